"""The OpenAI-compatible proxy with real parts: an OpenAI-compatible upstream server in a
subprocess (tests/openai_upstream.py), ``simeval serve --upstream`` and ``simeval proxy`` in
subprocesses, and the official ``openai`` package as the client."""

from __future__ import annotations

import html
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from servers import Proc, wait_healthy
from simeval.service import Service
from simeval.web.proxy import Reply, reply_output, request_input

openai = pytest.importorskip("openai")

HERE = Path(__file__).parents[1]  # tests/, where openai_upstream.py is
KEY = "sk-test"
REF = "Paris is the capital of France and its largest city."
SIMEVAL = [sys.executable, "-c", "from simeval.cli import main; main()"]


def wait_captured(url: str, count: int) -> dict[str, Any]:
    """The proxy's counters once ``count`` replies are stored and none wait (bounded)."""
    stats: dict[str, Any] = {}
    for _ in range(600):
        stats = httpx.get(url + "/api/health", timeout=5).json()["proxy"]
        if stats["captured"] >= count and stats["queued"] == 0:
            return stats
        time.sleep(0.05)
    raise AssertionError(f"captures never arrived: {stats}")


@pytest.fixture(scope="module")
def upstream() -> Iterator[Proc]:
    proc = Proc([sys.executable, str(HERE / "openai_upstream.py")], r"upstream: (\S+)")
    yield proc
    proc.stop()


@pytest.fixture
def served(new_sqlite: Callable[..., str], upstream: Proc) -> Iterator[tuple[Proc, Path]]:
    db = Path(new_sqlite("proxy.db"))
    proc = Proc(
        [
            *SIMEVAL,
            "serve",
            "--port",
            "0",
            "--db",
            str(db),
            "--upstream",
            upstream.url,
            "--log-level",
            "debug",
        ],
        r"Eval Studio: (\S+)",
    )
    wait_healthy(proc.url)
    yield proc, db
    proc.stop()


def activate_eval(url: str) -> None:
    r = httpx.post(url + "/api/evals", json={"name": "capital", "references": [REF]})
    assert r.status_code == 201, r.text
    r = httpx.post(
        url + "/api/evals/capital/test", json={"input": "Capital?", "output": REF}, timeout=10
    )
    assert r.json()["passed"], r.text
    assert httpx.post(url + "/api/evals/capital/activate").status_code == 200


def clients(upstream: Proc, server: str) -> tuple[Any, Any]:
    direct = openai.OpenAI(api_key=KEY, base_url=upstream.url, max_retries=0)
    via = openai.OpenAI(api_key=KEY, base_url=server + "/v1", max_retries=0)
    return direct, via


FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.mark.process
def test_openai_client_through_the_proxy(served: tuple[Proc, Path], upstream: Proc) -> None:
    server, db = served
    activate_eval(server.url)
    direct, via = clients(upstream, server.url)

    # not streamed: byte-identical bodies, same status and content type
    a = direct.chat.completions.with_raw_response.create(model="gpt-test", messages=FRANCE)
    b = via.chat.completions.with_raw_response.create(model="gpt-test", messages=FRANCE)
    assert b.status_code == a.status_code == 200
    assert b.content == a.content
    assert b.headers["content-type"] == a.headers["content-type"]
    assert b.parse().choices[0].message.content == REF

    # streamed: the same chunks, in order (with usage in the last one)
    kwargs: dict[str, Any] = {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "And the capital of Japan?"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "user": "user-7",
    }
    direct_chunks = [c.model_dump() for c in direct.chat.completions.create(**kwargs)]
    via_chunks = [c.model_dump() for c in via.chat.completions.create(**kwargs)]
    assert via_chunks == direct_chunks and len(via_chunks) > 3
    # the raw event stream too
    headers = {"Authorization": f"Bearer {KEY}"}
    raw = json.dumps({**kwargs, "user": "raw"})
    with httpx.stream(
        "POST", upstream.url + "/chat/completions", content=raw, headers=headers
    ) as r:
        direct_raw = b"".join(r.iter_raw())
    with httpx.stream(
        "POST", server.url + "/v1/chat/completions", content=raw, headers=headers
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        via_raw = b"".join(r.iter_raw())
    assert via_raw == direct_raw

    # the other captured endpoints, streamed and not
    conv = {"X-Simeval-Conversation": "conv-42"}
    text = via.completions.create(model="gpt-test", prompt="Capital of France?").choices[0].text
    assert text == REF
    resp = via.responses.create(model="gpt-test", input="Capital of France?", extra_headers=conv)
    assert resp.output_text == REF
    streamed = via.responses.create(
        model="gpt-test", input=[{"role": "user", "content": "Japan's capital?"}], stream=True
    )
    assert [e.type for e in streamed][-1] == "response.completed"

    # a tool call passes through and is not captured (no text)
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    called = via.chat.completions.create(model="gpt-test", messages=FRANCE, tools=[tool])
    assert called.choices[0].message.tool_calls[0].function.name == "lookup"
    assert called.choices[0].message.content is None
    # an upstream error passes through unchanged and is not captured
    with pytest.raises(openai.InternalServerError) as via_err:
        via.chat.completions.create(model="broken", messages=FRANCE)
    with pytest.raises(openai.InternalServerError) as direct_err:
        direct.chat.completions.create(model="broken", messages=FRANCE)
    assert via_err.value.response.content == direct_err.value.response.content
    # a wrong key is the upstream's 401, passed through
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="sk-wrong", base_url=server.url + "/v1", max_retries=0).models.list()
    assert [m.id for m in via.models.list()] == ["gpt-test"]
    # a replayed reply (the same response id) is stored once
    again = via.chat.completions.with_raw_response.create(model="gpt-test", messages=FRANCE)
    assert again.content == a.content

    # the proxy forwarded the client's credentials and the OpenAI headers, nothing else
    via.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": "France, once more?"}],
        extra_headers={"X-Custom": "dropped", "X-Simeval-Conversation": "c", "OpenAI-Beta": "b"},
    )
    seen = httpx.get(upstream.url.removesuffix("/v1") + "/debug/last").json()
    assert seen["authorization"] == f"Bearer {KEY}" and seen["openai-beta"] == "b"
    assert "x-custom" not in seen
    assert not any(k.startswith("x-simeval") for k in seen)

    # chat (1 + 1 replayed + 1 header test), chat stream x2 (openai, raw), completions,
    # responses x2 = 7 distinct replies; the tool call and the error are not captured
    stats = wait_captured(server.url, 8)
    assert stats["dropped"] == 0
    svc = Service(db)
    try:
        caps = svc.list_captures(limit=100)
    finally:
        svc.close()
    keys = [c.capture_key for c in caps]
    assert len(caps) == 7 and len(set(keys)) == 7, keys
    by_input = {c.input: c for c in caps}
    france = [c for c in caps if c.input == "What is the capital of France?"]
    assert france and all(c.output == REF for c in france)
    first = next(c for c in france if c.capture_key == a.parse().id)
    assert [r.eval_name for r in first.results] == ["capital"] and first.results[0].passed
    meta = first.metadata or {}
    assert meta["model"] == "gpt-test" and meta["finish_reason"] == "stop"
    assert meta["upstream_status"] == 200 and meta["usage"]["completion_tokens"] == 10
    assert meta["latency_ms"] > 0
    japan = next(c for c in caps if c.conversation_id == "user-7")
    assert japan.output == "Tokyo is the capital of Japan."
    assert japan.metadata and japan.metadata["first_token_ms"] > 0
    assert japan.metadata["usage"]["prompt_tokens"] == 9
    assert by_input["Capital of France?"].output == REF
    assert any(c.conversation_id == "conv-42" for c in caps)
    assert any(c.capture_key and c.capture_key.startswith("resp_") for c in caps)
    assert any(c.capture_key and c.capture_key.startswith("cmpl-") for c in caps)

    # the client's key is in no stored row and no log line
    with sqlite3.connect(db) as conn:
        dump = "\n".join(conn.iterdump())
    assert "sk-" not in dump and "Bearer" not in dump
    server.stop()
    assert KEY not in server.output and "Bearer" not in server.output
    assert "/v1/chat/completions" in server.output  # the debug log did log the requests


@pytest.mark.process
def test_streams_are_not_buffered(served: tuple[Proc, Path], upstream: Proc) -> None:
    """The upstream sends its first chunk and waits for /release: a proxy that buffered the
    stream would never hand the client that first chunk."""
    server, _ = served
    body = {"model": "hold", "messages": FRANCE, "stream": True}
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.stream(
        "POST", server.url + "/v1/chat/completions", json=body, headers=headers, timeout=20
    ) as r:
        chunks = r.iter_raw()
        first = next(chunks)
        assert first.startswith(b"data: ") and b'"role":"assistant"' in first
        httpx.post(upstream.url.removesuffix("/v1") + "/release")
        rest = b"".join(chunks)
    assert rest.endswith(b"data: [DONE]\n\n")


@pytest.mark.process
def test_the_requests_traceparent_is_kept_with_its_capture(
    served: tuple[Proc, Path], upstream: Proc
) -> None:
    """A W3C ``traceparent`` sent with the request (as an instrumented client sends it) is
    forwarded unchanged, and its trace and span ids are the capture's: its exported scores
    join the caller's trace at once. A header that is not valid Trace Context gives none."""
    server, _ = served
    _, via = clients(upstream, server.url)
    trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = {
        "valid": f"00-{trace}-{span}-01",
        "a later version, more fields": f"01-{trace}-{span}-01-what-comes-next",
        "upper case": f"00-{trace.upper()}-{span}-01",
        "zero span id": f"00-{trace}-{'0' * 16}-01",
        "version ff": f"ff-{trace}-{span}-01",
        "version 00 with more fields": f"00-{trace}-{span}-01-more",
        "not one": "hello",
    }
    for name, value in headers.items():
        via.chat.completions.create(
            model="gpt-test",
            messages=[{"role": "user", "content": f"Capital of France? ({name})"}],
            extra_headers={"traceparent": value},
        )
        seen = httpx.get(upstream.url.removesuffix("/v1") + "/debug/last").json()
        assert (seen.get("headers") or seen)["traceparent"] == value
    wait_captured(server.url, len(headers))
    caps = httpx.get(server.url + "/api/captures", params={"limit": 50}).json()["captures"]
    ids = {
        c["input"].removeprefix("Capital of France? (").removesuffix(")"): (
            c["metadata"].get("trace_id"),
            c["metadata"].get("span_id"),
        )
        for c in caps
    }
    valid = {"valid", "a later version, more fields"}
    assert ids == {name: (trace, span) if name in valid else (None, None) for name in headers}


@pytest.mark.process
def test_standalone_proxy_with_the_store_unavailable(
    new_sqlite: Callable[..., str], upstream: Proc
) -> None:
    """``simeval proxy``: while another process holds the database's write lock, clients are
    answered as always; the replies wait in the queue and are stored once the store is back."""
    db = Path(new_sqlite("standalone.db"))
    Service(db).close()  # created (and migrated) up front
    proxy = Proc(
        [*SIMEVAL, "proxy", "--upstream", upstream.url, "--port", "0", "--db", str(db)],
        r"Proxy: (http://\S+)/v1",
    )
    try:
        wait_healthy(proxy.url)
        via = openai.OpenAI(api_key=KEY, base_url=proxy.url + "/v1", max_retries=0)
        lock = sqlite3.connect(db, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            for i in range(5):
                reply = via.chat.completions.create(
                    model="gpt-test", messages=[{"role": "user", "content": f"France {i}?"}]
                )
                assert reply.choices[0].message.content == REF
            stats = httpx.get(proxy.url + "/api/health").json()["proxy"]
            assert stats["captured"] == 0  # the store is still locked
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        stats = wait_captured(proxy.url, 5)
        assert stats["dropped"] == 0
        assert httpx.get(proxy.url + "/docs").status_code == 404
    finally:
        proxy.stop()
    svc = Service(db)
    try:
        assert sorted(c.input for c in svc.list_captures()) == [f"France {i}?" for i in range(5)]
    finally:
        svc.close()


@pytest.mark.process
def test_proxy_cli_errors() -> None:
    bad = subprocess.run(
        [*SIMEVAL, "proxy", "--upstream", "ftp://x"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "--upstream must be" in bad.stderr
    helped = subprocess.run([*SIMEVAL, "proxy", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "Examples" in helped.stdout


# -- parsing, unit by unit ---------------------------------------------------------------
def _reply(endpoint: str, body: bytes, content_type: str = "application/json") -> Reply:
    return Reply(endpoint, b"{}", None, 200, content_type, "", [body], [0.01], 0.02)


def test_reply_output_of_each_endpoint() -> None:
    chat = {"id": "x", "model": "m", "choices": [{"index": 0, "message": {"content": "Hi"}}]}
    assert reply_output(_reply("/chat/completions", json.dumps(chat).encode()))[0] == "Hi"
    stream = b'data: {"id":"s","choices":[{"index":0,"delta":{"content":"He"}}]}\n\n'
    stream += b'data: {"id":"s","choices":[{"index":0,"delta":{"content":"y"},'
    stream += b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    # split anywhere, the events are the same
    for cut in (1, 17, 60, len(stream) - 3):
        reply = Reply("/chat/completions", b"{}", None, 200, "text/event-stream", "")
        reply.chunks, reply.times = [stream[:cut], stream[cut:]], [0.1, 0.2]
        text, info = reply_output(reply)
        assert text == "Hey" and info["id"] == "s" and info["finish_reason"] == "stop"
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}]
    body = {"messages": [{"role": "user", "content": parts}, {"role": "assistant"}]}
    assert request_input("/chat/completions", body) == "a"
    assert request_input("/responses", {"input": "plain"}) == "plain"
    assert request_input("/completions", {"prompt": ["x", "y"]}) == "y"


def test_settings_page_shows_how_to_connect(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    from fastapi.testclient import TestClient

    from simeval.web import create_app

    app = create_app(new_sqlite("s.db"), upstream="http://127.0.0.1:9/v1")
    with TestClient(app, base_url="http://127.0.0.1:8123") as c:
        page = html.unescape(c.get("/settings").text)
        assert c.get("/api/health").json()["proxy"]["upstream"] == "http://127.0.0.1:9/v1"
    assert 'OpenAI(base_url="http://127.0.0.1:8123/v1")' in page
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:8123/v1/traces" in page
    assert 'simeval.Client("http://127.0.0.1:8123")' in page
    assert "http://127.0.0.1:9/v1" in page
    app = create_app(new_sqlite("t.db"), token="s3cret", upstream="http://127.0.0.1:9/v1")
    with TestClient(app) as c:
        page = c.get("/settings?token=s3cret").text
    assert "X-Simeval-Token" in page and "s3cret" not in page
