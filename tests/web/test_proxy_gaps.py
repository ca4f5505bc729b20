"""What the proxy used to miss, with the official ``openai`` client through ``simeval serve
--upstream`` (a subprocess) to an upstream of the test's own on 127.0.0.1
(tests/recording_upstream.py): streamed ``/v1/completions``, ``br`` and ``zstd`` replies,
``n > 1`` choices, a chained Responses turn, and one ``Date`` header."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from recording_upstream import ANSWER, TOOL_ANSWER, USAGE, Upstream
from servers import Proc, wait_healthy
from simeval.vocabulary import call_key

openai = pytest.importorskip("openai")

SIMEVAL = [sys.executable, "-c", "from simeval.cli import main; main()"]


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with Upstream() as up:
        yield up


@pytest.fixture(scope="module")
def server(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("gaps") / "gaps.db"
    proc = Proc(
        [*SIMEVAL, "serve", "--port", "0", "--db", str(db), "--upstream", upstream.url],
        r"Eval Studio: (\S+)",
    )
    wait_healthy(proc.url)
    yield proc.url
    proc.stop()


def client(server: str, **headers: str) -> Any:
    return openai.OpenAI(
        api_key="sk-test", base_url=server + "/v1", max_retries=0, default_headers=headers
    )


def health(server: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(server + "/api/health", timeout=5).json()["proxy"]
    return stats


def captured(server: str, prompt: str, count: int) -> list[dict[str, Any]]:
    """The captures whose input is ``prompt``, once there are ``count`` (bounded wait)."""
    found: list[dict[str, Any]] = []
    for _ in range(300):
        stats = health(server)
        if stats["queued"] == 0:
            rows = httpx.get(server + "/api/captures", params={"limit": 1000}, timeout=10)
            found = [c for c in rows.json()["captures"] if c["input"] == prompt]
            if len(found) >= count:
                return sorted(found, key=lambda c: c["capture_key"] or "")
        time.sleep(0.05)
    raise AssertionError(f"{len(found)} of {count} captures of {prompt!r}: {health(server)}")


@pytest.mark.process
def test_streamed_completions_are_captured(server: str) -> None:
    prompt = "Streamed completion: the capital of France?"
    stream = client(server).completions.create(model="gpt-test", prompt=prompt, stream=True)
    pieces = [c.choices[0].text for c in stream if c.choices]
    assert "".join(pieces) == ANSWER and len(pieces) > 3
    [cap] = captured(server, prompt, 1)
    assert cap["output"] == ANSWER
    assert cap["capture_key"].startswith("cmpl-")
    meta = cap["metadata"]
    assert meta["endpoint"] == "/v1/completions" and meta["finish_reason"] == "stop"
    assert meta["first_token_ms"] > 0


@pytest.mark.process
@pytest.mark.parametrize("encoding", ["br", "gzip"])
def test_compressed_replies_are_captured(server: str, encoding: str) -> None:
    before = health(server)
    via = client(server, **{"OpenAI-Test-Encoding": encoding})
    prompt = f"Capital of France, in {encoding}?"
    messages = [{"role": "user", "content": prompt}]
    raw = via.chat.completions.with_raw_response.create(model="gpt-test", messages=messages)
    assert raw.headers["content-encoding"] == encoding  # as the upstream sent it
    assert raw.parse().choices[0].message.content == ANSWER
    stream = via.chat.completions.create(model="gpt-test", messages=messages, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == ANSWER
    caps = captured(server, prompt, 2)
    assert [c["output"] for c in caps] == [ANSWER, ANSWER]
    after = health(server)
    assert after["failed"] == before["failed"] and after["dropped"] == before["dropped"]


@pytest.mark.process
def test_zstd_replies_are_captured(server: str) -> None:
    """zstd with httpx (the openai package's HTTP client asks for it only with
    ``backports.zstd`` installed); the reply reaches the client as the upstream sent it."""
    before = health(server)
    prompt = "Capital of France, in zstd?"
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": prompt}]}
    headers = {"OpenAI-Test-Encoding": "zstd", "Accept-Encoding": "zstd"}
    with httpx.Client(base_url=server + "/v1", headers=headers, timeout=10) as http:
        r = http.post("/chat/completions", json=body)
        assert r.headers["content-encoding"] == "zstd"
        assert r.json()["choices"][0]["message"]["content"] == ANSWER
        with http.stream("POST", "/chat/completions", json={**body, "stream": True}) as s:
            assert s.headers["content-encoding"] == "zstd"
            assert b"data: [DONE]" in b"".join(s.iter_bytes())
    caps = captured(server, prompt, 2)
    assert [c["output"] for c in caps] == [ANSWER, ANSWER]
    assert health(server)["failed"] == before["failed"]


@pytest.mark.process
def test_a_reply_that_cannot_be_read_is_counted(server: str) -> None:
    """A reply that says ``br`` but is not: passed through as it is, and counted ``failed``
    on /api/health (never silently lost)."""
    before = health(server)
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "Broken br?"}]}
    headers = {"OpenAI-Test-Encoding": "fake-br", "Authorization": "Bearer sk-test"}
    with httpx.stream(
        "POST", server + "/v1/chat/completions", json=body, headers=headers, timeout=10
    ) as r:
        raw = b"".join(r.iter_raw())
        assert r.status_code == 200 and r.headers["content-encoding"] == "br"
    assert raw.startswith(b'{"id"')  # what the upstream sent, unchanged
    for _ in range(300):  # bounded
        after = health(server)
        if after["failed"] > before["failed"]:
            break
        time.sleep(0.05)
    assert after["failed"] == before["failed"] + 1 and after["problem"]
    assert after["captured"] == before["captured"]


@pytest.mark.process
@pytest.mark.parametrize("stream", [False, True])
def test_n_choices_are_n_captures(server: str, stream: bool) -> None:
    prompt = f"Three answers, streamed={stream}: the capital of France?"
    messages = [{"role": "user", "content": prompt}]
    via = client(server)
    if stream:
        chunks = list(
            via.chat.completions.create(
                model="gpt-test",
                messages=messages,
                n=3,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        reply_id = chunks[0].id
    else:
        reply = via.chat.completions.create(model="gpt-test", messages=messages, n=3)
        assert [c.message.content for c in reply.choices] == [
            ANSWER,
            f"{ANSWER} (1)",
            f"{ANSWER} (2)",
        ]
        reply_id = reply.id
    caps = captured(server, prompt, 3)
    by_choice = {c["metadata"]["choice"]: c for c in caps}
    assert sorted(by_choice) == [0, 1, 2]
    assert by_choice[0]["output"] == ANSWER and by_choice[2]["output"] == f"{ANSWER} (2)"
    assert [by_choice[i]["capture_key"] for i in range(3)] == [
        call_key(reply_id),
        call_key(reply_id, 1),
        call_key(reply_id, 2),
    ]
    assert all(c["metadata"]["finish_reason"] == "stop" for c in caps)
    # the call's usage once, on choice 0: counts summed over captures stay right
    assert by_choice[0]["metadata"]["input_tokens"] == USAGE["prompt_tokens"]
    assert "input_tokens" not in by_choice[1]["metadata"]


@pytest.mark.process
def test_a_chained_responses_turn_is_captured_with_the_tool_output(server: str) -> None:
    via = client(server)
    tools = [
        {
            "type": "function",
            "name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    first = via.responses.create(
        model="gpt-test",
        input=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=tools,
    )
    call = next(item for item in first.output if item.type == "function_call")
    tool_output = '{"city": "Paris", "temperature_c": 18, "sky": "sunny"}'
    second = via.responses.create(
        model="gpt-test",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": tool_output}],
        tools=tools,
    )
    assert second.output_text == TOOL_ANSWER
    [cap] = captured(server, tool_output, 1)
    assert cap["output"] == TOOL_ANSWER and cap["capture_key"] == second.id
    assert cap["metadata"]["finish_reason"] == "stop"  # "completed", said as chat says it
    assert cap["metadata"]["input_tokens"] == 9 and cap["metadata"]["output_tokens"] == 10
    # the first turn had only a tool call: nothing to score, nothing stored
    rows = httpx.get(server + "/api/captures", params={"limit": 1000}, timeout=10).json()
    assert not [c for c in rows["captures"] if c["capture_key"] == first.id]


@pytest.mark.process
def test_replies_carry_one_date_header(server: str, upstream: Upstream) -> None:
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "One date?"}]}
    direct = httpx.post(upstream.url + "/chat/completions", json=body, timeout=10)
    assert len(direct.headers.get_list("date")) == 1  # the upstream sends its own
    for path, method in (("/v1/chat/completions", "POST"), ("/v1/models", "GET")):
        r = httpx.request(method, server + path, json=body if method == "POST" else None)
        assert r.status_code == 200, r.text
        assert len(r.headers.get_list("date")) == 1, (path, r.headers.get_list("date"))
