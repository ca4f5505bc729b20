"""The proxy fed hostile messages from both sides, with real parts: the OpenAI-compatible
upstream of tests/openai_upstream.py (which can answer any bytes, ``POST /script``) and
``simeval proxy`` in subprocesses, driven by httpx and the official ``openai`` package.

Each poison message is passed through to the client byte for byte, stores nothing, is
counted ``failed`` where it cannot be read, and capturing goes on: after every one of them,
100 good replies are all captured. Then a client that hangs up mid-stream, and the capture
thread itself killed (the watchdog starts another)."""

from __future__ import annotations

import base64
import gzip
import json
import re
import sqlite3
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import brotli
import httpx
import pytest
import zstandard

from servers import Proc, wait_healthy
from simeval.errors import InvalidInput, TooLarge
from simeval.service import Service
from simeval.vocabulary import call_key as reply_key
from simeval.web.proxy import CaptureQueue
from simeval.web.replies import Reply, reply_captures

openai = pytest.importorskip("openai")

HERE = Path(__file__).parents[1]  # tests/, where openai_upstream.py is
KEY = "sk-test"
SIMEVAL = [sys.executable, "-c", "from simeval.cli import main; main()"]
AUTH = {"Authorization": f"Bearer {KEY}"}
GOOD = {
    "id": "chatcmpl-good",
    "object": "chat.completion",
    "model": "gpt-test",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Fine."}}],
}
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
RESPONSE = {
    "id": "resp_good",
    "object": "response",
    "status": "completed",
    "output": [{"type": "message", "content": [{"type": "output_text", "text": "Fine."}]}],
}


def chat(content: str = "Fine.", **more: Any) -> dict[str, Any]:
    return {**GOOD, "choices": [{"index": 0, "message": {"content": content}}], **more}


def js(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def sse(*events: bytes) -> bytes:
    return b"".join(b"data: " + e + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def gzip_bomb(megabytes: int = 300) -> bytes:
    """About 300 KB of gzip, one member, that inflates to 300 MB (made piece by piece)."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    piece = b" " * (1024 * 1024)
    return b"".join(packer.compress(piece) for _ in range(megabytes)) + packer.flush()


def members_bomb(megabytes: int = 300) -> bytes:
    """The same in 300 members of 1 MB each (a reader inflates every member of a stream)."""
    return gzip.compress(b" " * (1024 * 1024), 9) * megabytes


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


GZIP_BOMB = gzip_bomb()
MEMBERS_BOMB = members_bomb()
HALF = js(chat("Two gzip members, one reply."))
# 50 MB of zeros, over the 16 MiB cap, in a few KB; and a zstd reply cut short
BR_BOMB = brotli.compress(b"\0" * 50_000_000, quality=1)
ZSTD_BOMB = zstandard.ZstdCompressor(level=1).compress(b"\0" * 50_000_000)
ZSTD_CUT = zstandard.ZstdCompressor().compress(js(chat()))[:-4]

# name: (endpoint, the upstream's reply, its content type, its encoding, failed?)
UPSTREAM_POISON: dict[str, tuple[str, bytes, str, str, bool]] = {
    "choices is 1": ("/chat/completions", b'{"id":"poison-c1","choices":1}', "json", "", True),
    "output is 5": ("/responses", b'{"id":"poison-o5","output":5}', "json", "", True),
    "nested 100,000 deep": (
        "/chat/completions",
        b'{"id":"poison-deep","choices":' + deep(100_000) + b"}",
        "json",
        "",
        True,
    ),
    "usage nested 50 deep": (
        "/chat/completions",
        js(chat(usage=nested(50))),
        "json",
        "",
        True,
    ),
    "a choice is 5": ("/chat/completions", js({**GOOD, "choices": [5]}), "json", "", True),
    "the message is a list": (
        "/chat/completions",
        js({**GOOD, "choices": [{"message": ["x"]}]}),
        "json",
        "",
        True,
    ),
    "the reply is a list": ("/chat/completions", b"[1, 2]", "json", "", True),
    "not JSON": ("/chat/completions", b"<html>oops</html>", "json", "", True),
    "not UTF-8": ("/chat/completions", b'{"id": "\xff\xfe", "choices": []}', "json", "", True),
    "a NUL in the text": ("/chat/completions", js(chat("a\x00b")), "json", "", True),
    "a lone surrogate": (
        "/chat/completions",
        b'{"choices":[{"message":{"content":"\\ud800"}}]}',
        "json",
        "",
        True,
    ),
    "NaN in usage": ("/chat/completions", js(chat(usage={"x": float("nan")})), "json", "", True),
    "a 5,000-digit number": (
        "/chat/completions",
        b'{"choices":[],"n":' + b"9" * 5000 + b"}",
        "json",
        "",
        True,
    ),
    "a text over 1M characters": (
        "/completions",
        js({"choices": [{"text": "x" * 1_000_001}]}),
        "json",
        "",
        True,
    ),
    "a gzip bomb": ("/chat/completions", GZIP_BOMB, "json", "gzip", True),
    "a gzip bomb of many members": ("/chat/completions", MEMBERS_BOMB, "json", "gzip", True),
    "damaged gzip": ("/chat/completions", b"\x1f\x8b\x08\x00garbage", "json", "gzip", True),
    "truncated gzip": ("/chat/completions", gzip.compress(js(chat()))[:-6], "json", "gzip", True),
    "an unknown encoding": ("/chat/completions", js(chat()), "json", "compress", True),
    "damaged br": ("/chat/completions", js(chat()), "json", "br", True),
    "truncated zstd": ("/chat/completions", ZSTD_CUT, "json", "zstd", True),
    "a br bomb": ("/chat/completions", BR_BOMB, "json", "br", True),
    "a zstd bomb": ("/chat/completions", ZSTD_BOMB, "json", "zstd", True),
    "a stream whose choices are 1": (
        "/chat/completions",
        sse(b'{"id":"poison-s1","choices":1}'),
        "sse",
        "",
        True,
    ),
    "a stream whose delta is 5": (
        "/chat/completions",
        sse(b'{"id":"poison-s2","choices":[{"index":0,"delta":5}]}'),
        "sse",
        "",
        True,
    ),
    "a Responses stream whose response is 5": (
        "/responses",
        sse(b'{"type":"response.completed","response":5}'),
        "sse",
        "",
        True,
    ),
    # events that cannot be read are skipped: no text, so nothing to capture (not failed)
    "a stream of one event nested 100,000 deep": (
        "/chat/completions",
        sse(b'{"choices":' + deep(100_000) + b"}"),
        "sse",
        "",
        False,
    ),
}

# name: (endpoint, the client's request body); the upstream answers a good reply to each
CLIENT_POISON: dict[str, tuple[str, bytes]] = {
    "metadata nested 50,000 deep": (
        "/chat/completions",
        b'{"model":"gpt-test","messages":[],"metadata":' + deep(50_000) + b"}",
    ),
    "not JSON": ("/chat/completions", b"model=gpt-test"),
    "a JSON list": ("/chat/completions", b"[]"),
    "messages is 5": ("/chat/completions", b'{"model":"gpt-test","messages":5}'),
    "a message is a string": ("/chat/completions", b'{"messages":["hi"]}'),
    "input is an object": ("/responses", b'{"model":"gpt-test","input":{"a":1}}'),
    "a lone surrogate in the prompt": (
        "/chat/completions",
        b'{"messages":[{"role":"user","content":"\\udc00"}]}',
    ),
    "a NUL in the user": ("/chat/completions", b'{"messages":[],"user":"u\\u0000"}'),
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[Proc]:
    proc = Proc([sys.executable, str(HERE / "openai_upstream.py")], r"upstream: (\S+)")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def proxied(
    tmp_path_factory: pytest.TempPathFactory, upstream: Proc
) -> Iterator[tuple[Proc, Path]]:
    db = tmp_path_factory.mktemp("hostile") / "proxy.db"
    proc = Proc(
        [*SIMEVAL, "proxy", "--upstream", upstream.url, "--port", "0", "--db", str(db)],
        r"Proxy: (http://\S+)/v1",
    )
    wait_healthy(proc.url)
    yield proc, db
    proc.stop()


def script(upstream: Proc, body: bytes, content_type: str, encoding: str = "") -> None:
    """The upstream's next reply: exactly ``body``, in chunks of 64 KB."""
    media = "text/event-stream" if content_type == "sse" else "application/json"
    chunks = [base64.b64encode(body[i : i + 65536]).decode() for i in range(0, len(body), 65536)]
    spec = {"chunks": chunks or [""], "content_type": media, "encoding": encoding}
    r = httpx.post(upstream.url.removesuffix("/v1") + "/script", json=spec, timeout=30)
    assert r.status_code == 200


def raw_post(url: str, body: bytes) -> httpx.Response:
    """POST ``body`` as is; the response's bytes as sent (not inflated) in ``.content``."""
    with httpx.stream(
        "POST", url, content=body, headers={**AUTH, "content-type": "application/json"}, timeout=60
    ) as r:
        r._content = b"".join(r.iter_raw())
    return r


def stored(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT id, capture_key, input, output, metadata FROM captures ORDER BY id"
        ).fetchall()


def health(url: str) -> dict[str, Any]:
    r = httpx.get(url + "/api/health", timeout=10)
    assert r.status_code == 200
    body: dict[str, Any] = r.json()
    return body


def wait_settled(url: str, captured: int) -> dict[str, Any]:
    """The health answer once ``captured`` replies are stored and none wait (bounded)."""
    answer: dict[str, Any] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer = health(url)
        if answer["proxy"]["captured"] >= captured and answer["proxy"]["queued"] == 0:
            return answer
        time.sleep(0.05)
    raise AssertionError(f"captures never arrived: {answer}")


def good_replies(client: httpx.Client, url: str, tag: str, n: int = 100) -> set[str]:
    """``n`` good exchanges through the proxy at ``url``: chat, completions and Responses,
    every tenth one streamed; the ids of the replies."""
    ids = set()
    for i in range(n):
        prompt = f"France {tag} {i}?"
        kind = i % 10
        if kind == 9:
            body = {"model": "gpt-test", "messages": [{"role": "user", "content": prompt}]}
            with client.stream(
                "POST", url + "/chat/completions", json={**body, "stream": True}
            ) as r:
                events = [line for line in r.iter_lines() if line.startswith("data: {")]
            ids.add(json.loads(events[0][6:])["id"])
            continue
        if kind % 3 == 0:
            path, body = "/chat/completions", {"messages": [{"role": "user", "content": prompt}]}
        elif kind % 3 == 1:
            path, body = "/completions", {"prompt": prompt}
        else:
            path, body = "/responses", {"input": prompt}
        r = client.post(url + path, json={"model": "gpt-test", **body})
        assert r.status_code == 200, r.text
        ids.add(r.json()["id"])
    return ids


@pytest.mark.process
def test_each_poison_then_100_good_replies(proxied: tuple[Proc, Path], upstream: Proc) -> None:
    proxy, db = proxied
    client = httpx.Client(headers=AUTH, timeout=30)
    captured, failed = 0, 0
    cases = [("upstream", name, *case) for name, case in UPSTREAM_POISON.items()]
    cases += [
        ("client", name, endpoint, request, "json", "", True)
        for name, (endpoint, request) in CLIENT_POISON.items()
    ]
    for side, name, endpoint, body, kind, encoding, fails in cases:
        before = stored(db)
        if side == "upstream":
            sent, request = body, js({"model": "gpt-test", "messages": FRANCE})
        elif endpoint == "/responses":
            sent, request = js(RESPONSE), body
        else:
            sent, request = js(chat("The request was hostile.")), body
        script(upstream, sent, kind, encoding)
        r = raw_post(proxy.url + "/v1" + endpoint, request)
        # the client gets exactly what the upstream sent, however hostile
        assert r.status_code == 200, (name, r.text[:200])
        assert r.content == sent, name
        if encoding:
            assert r.headers["content-encoding"] == encoding
        ids = good_replies(client, proxy.url + "/v1", re.sub(r"\W+", "-", f"{side} {name}"))
        captured += 100
        failed += fails
        answer = wait_settled(proxy.url, captured)
        stats = answer["proxy"]
        assert stats["captured"] == captured and stats["failed"] == failed, (name, stats)
        assert stats["dropped"] == 0 and stats["restarts"] == 0, (name, stats)
        # nothing of the poison stored: exactly the 100 good replies were added
        after = stored(db)
        assert after[: len(before)] == before, name
        assert {row[1] for row in after[len(before) :]} == ids, name
        if fails:
            assert answer["status"] == "degraded" and stats["problem"], answer
    client.close()
    # each failure was logged with the reply's id, where it had one
    for poison_id in ("poison-c1", "poison-o5", "poison-deep", "poison-s1", "poison-s2"):
        assert f"(id {poison_id})" in proxy.output
    assert "Traceback" not in proxy.output  # every poison was an expected, checked failure


@pytest.mark.process
def test_gzip_replies_inflate_within_bounds(proxied: tuple[Proc, Path], upstream: Proc) -> None:
    """A gzip bomb costs the proxy no more than the cap; a reply of two gzip members is read
    whole; a response id of 500 characters is captured under a hashed key."""
    proxy, db = proxied
    status = Path(f"/proc/{proxy.proc.pid}/status")
    if status.exists():
        peak_before = int(re.findall(r"VmHWM:\s+(\d+)", status.read_text())[0])
        bombs = [(GZIP_BOMB, "gzip"), (MEMBERS_BOMB, "gzip"), (GZIP_BOMB, "gzip")]
        for bomb, encoding in [*bombs, (BR_BOMB, "br"), (ZSTD_BOMB, "zstd")]:
            script(upstream, bomb, "json", encoding)
            r = raw_post(proxy.url + "/v1/chat/completions", js({"messages": FRANCE}))
            assert r.content == bomb
        wait_settled(proxy.url, health(proxy.url)["proxy"]["captured"])
        peak_after = int(re.findall(r"VmHWM:\s+(\d+)", status.read_text())[0])
        # inflating stops at the 16 MiB cap: far from the bomb's 300 MB
        assert peak_after - peak_before < 120 * 1024, (peak_before, peak_after)

    start = health(proxy.url)["proxy"]["captured"]
    members = gzip.compress(HALF[:20]) + gzip.compress(HALF[20:])
    script(upstream, members, "json", "gzip")
    raw_post(proxy.url + "/v1/chat/completions", js({"messages": FRANCE}))
    long_id = "chatcmpl-" + "x" * 491
    script(upstream, js(chat("A long id.", id=long_id)), "json")
    raw_post(proxy.url + "/v1/chat/completions", js({"messages": FRANCE}))
    script(upstream, js(chat("A long id, replayed.", id=long_id)), "json")
    raw_post(proxy.url + "/v1/chat/completions", js({"messages": FRANCE}))
    wait_settled(proxy.url, start + 3)
    rows = {row[3]: row for row in stored(db)}
    assert "Two gzip members, one reply." in rows
    key = rows["A long id."][1]
    assert key == reply_key(long_id) and len(key) <= 200
    assert key.startswith("chatcmpl-xxx") and "~sha256:" in key
    assert "A long id, replayed." not in rows  # the same id: stored once


@pytest.mark.process
def test_a_client_that_hangs_up_mid_stream(proxied: tuple[Proc, Path], upstream: Proc) -> None:
    """The upstream request is closed (the upstream stops sending), and what the client was
    given is captured, marked ``client_disconnected``."""
    proxy, db = proxied
    streams_url = upstream.url.removesuffix("/v1") + "/debug/streams"
    known = len(httpx.get(streams_url).json())
    start = health(proxy.url)["proxy"]["captured"]
    body = {"model": "drip", "messages": [{"role": "user", "content": "Count."}], "stream": True}
    read = b""
    with httpx.stream(
        "POST", proxy.url + "/v1/chat/completions", json=body, headers=AUTH, timeout=30
    ) as r:
        for chunk in r.iter_raw():
            read += chunk
            if read.count(b"\n\n") >= 5:
                break
    # the client has hung up: the upstream stream ends well before its 200 words (4 s)
    fate: dict[str, Any] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        fate = httpx.get(streams_url).json()[known]
        if fate["closed"]:
            break
        time.sleep(0.05)
    assert fate["closed"] and not fate["finished"] and fate["sent"] < fate["of"] / 2, fate
    wait_settled(proxy.url, start + 1)
    row = stored(db)[-1]
    metadata = json.loads(row[4])
    assert metadata["client_disconnected"] is True
    full = " ".join(f"w{i}" for i in range(200))
    given = "".join(
        (json.loads(line[6:])["choices"][0]["delta"].get("content") or "")
        for line in read.decode().split("\n")
        if line.startswith("data: {")
    )
    # at least what the client read, never the whole reply
    assert row[3].startswith(given) and full.startswith(row[3]) and len(row[3]) < len(full)
    assert row[1].startswith("chatcmpl-")


# -- the capture thread, in process --------------------------------------------------------
def _reply(n: int, content: str = "An answer.") -> Reply:
    body = js({"id": f"r-{n}", "choices": [{"message": {"content": content}}]})
    return Reply("/chat/completions", b"{}", None, 200, "application/json", "", [body], [0.0])


# the thread's end is the point: pytest would report it as a warning
@pytest.mark.process
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_watchdog_restarts_a_stopped_capture_thread(tmp_path: Path) -> None:
    """A capture thread stopped by something no handler may catch (``SystemExit`` from the
    store) loses its batch, counted ``failed``; the watchdog starts another, which captures
    every later reply; ``degraded()`` says so, and clears once the window has passed."""
    svc = Service(tmp_path / "w.db")
    calls = {"n": 0}

    def store(items: list[Any]) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise SystemExit("the interpreter is going away")
        return svc.capture_checked(items)

    q = CaptureQueue(store, upstream="u", degraded_for=1.0, watch_every=0.05)
    try:
        q.put(_reply(0))
        deadline = time.monotonic() + 10
        while q.restarts == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert q.restarts == 1 and q.failed == 1
        assert q.degraded()
        for n in range(1, 51):
            q.put(_reply(n))
        assert q.join(20)
        assert q.captured == 50 and q.failed == 1 and q.dropped == 0
        deadline = time.monotonic() + 10
        while q.degraded() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert q.degraded() is None
        assert q.stats()["problem"] is None and q.stats()["restarts"] == 1
    finally:
        q.close()
        keys = sorted(c.capture_key for c in svc.list_captures(limit=100))
        svc.close()
    assert keys == sorted(f"r-{n}" for n in range(1, 51))


def test_a_capture_the_store_cannot_take_does_not_block_the_others(tmp_path: Path) -> None:
    """An error of the store's own (not "busy" or "down") on one capture: that one is
    counted ``failed`` and logged, the others are stored; the queue never stalls on it."""
    svc = Service(tmp_path / "s.db")

    def store(items: list[Any]) -> Any:
        if any(item[1] == "poison" for item in items):
            raise RuntimeError("the store cannot take this one")
        return svc.capture_checked(items)

    q = CaptureQueue(store, upstream="u")
    try:
        for n in range(20):
            q.put(_reply(n, "poison" if n == 7 else "An answer."))
        assert q.join(20)
        assert (q.captured, q.failed, q.dropped) == (19, 1, 0)
    finally:
        q.close()
        keys = {c.capture_key for c in svc.list_captures(limit=100)}
        svc.close()
    assert keys == {f"r-{n}" for n in range(20) if n != 7}


def test_reply_capture_refuses_with_a_named_error() -> None:
    too_big = _reply(1)
    too_big.truncated = True
    with pytest.raises(TooLarge, match="larger than"):
        reply_captures(too_big)
    wrong = _reply(2)
    wrong.chunks = [b'{"choices": 1}']
    with pytest.raises(InvalidInput, match=r"reply: choices: expected a list, got int"):
        reply_captures(wrong)
    # a JSON reply cut short by the client is no capture (and no failure)
    cut = _reply(3)
    cut.client_disconnected = True
    assert reply_captures(cut) == []
    assert reply_key("x" * 201) != reply_key("x" * 202)
    assert reply_key("a\nb") is not None and "\n" not in (reply_key("a\nb") or "")
    assert reply_key(5) is None


def test_serve_health_says_degraded_after_a_failed_reply(new_sqlite: Callable[..., str]) -> None:
    """``serve --upstream``'s ``/api/health`` (the API's own route and model) shows the
    failure too: ``failed``, the ``problem``, and the status ``degraded``."""
    from fastapi.testclient import TestClient

    from simeval.web import create_app

    app = create_app(new_sqlite("h.db"), upstream="http://127.0.0.1:9/v1")
    with TestClient(app, base_url="http://127.0.0.1") as c:
        before = c.get("/api/health").json()
        assert before["status"] == "ok" and before["proxy"]["failed"] == 0
        poison = _reply(1)
        poison.chunks = [b'{"id": "poison-h", "choices": 1}']
        queue = app.state.proxy
        queue.put(poison)
        queue.put(_reply(2))
        assert queue.join(20)
        after = c.get("/api/health").json()
    assert after["status"] == "degraded", after
    stats = after["proxy"]
    assert (stats["failed"], stats["captured"], stats["restarts"]) == (1, 1, 0)
    assert stats["problem"].startswith("1 reply could not be captured, the last")
