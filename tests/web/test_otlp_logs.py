"""``POST /v1/logs`` joined to ``/v1/traces``, OpenInference spans, span events, values that
arrived cut, and ``/v1/metrics``, through the real app on a real SQLite file (OTLP JSON made
here for the cases the instrumentations do not produce on demand: an order, a wait, a cut;
tests/web/test_instrumentations.py drives the real ones)."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from simeval.service import Service
from simeval.web import create_app
from simeval.web.otlp import Joiner
from simeval.web.otlp.genai import Call

pytest.importorskip("opentelemetry.proto")
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

JSON = {"content-type": "application/json"}
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
FRANCE = "Paris is the capital of France and its largest city."


def value(v: Any) -> dict[str, Any]:
    """An OTLP JSON AnyValue."""
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, list):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": attrs(v)}}
    raise TypeError(v)


def attrs(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": value(v)} for k, v in d.items()]


def spans(*items: dict[str, Any]) -> bytes:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": list(items)}]}]}
    return json.dumps(doc).encode()


def span(attributes: dict[str, Any], span_id: str = SPAN, **more: Any) -> dict[str, Any]:
    return {
        "traceId": TRACE,
        "spanId": span_id,
        "name": "chat gpt-test",
        "startTimeUnixNano": "1714560000000000000",
        "endTimeUnixNano": "1714560001250000000",
        "attributes": attrs(attributes),
        **more,
    }


def logs(*records: dict[str, Any]) -> bytes:
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": list(records)}]}]}
    return json.dumps(doc).encode()


def record(event: str, body: Any = None, span_id: str = SPAN, **attributes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": TRACE,
        "spanId": span_id,
        "eventName": event,
        "attributes": attrs({"gen_ai.system": "openai", **attributes}),
    }
    if body is not None:
        out["body"] = value(body)
    return out


# the span of a call whose content came in log records (semantic conventions v1.30)
CONTENTLESS = {
    "gen_ai.operation.name": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-test",
    "gen_ai.response.model": "gpt-test-0601",
    "gen_ai.response.id": "chatcmpl-joined",
    "gen_ai.response.finish_reasons": ["stop"],
    "gen_ai.usage.input_tokens": 9,
    "gen_ai.usage.output_tokens": 10,
}
MESSAGES = (
    record("gen_ai.system.message", {"content": "Be brief."}),
    record("gen_ai.user.message", {"content": "Capital of France?"}),
    record("gen_ai.assistant.message", {"content": "Ask me."}),
    record("gen_ai.user.message", {"content": "What is the capital of France?"}),
)
CHOICE = record(
    "gen_ai.choice",
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": FRANCE}},
)


@pytest.fixture
def db(new_sqlite: Callable[..., str]) -> Path:
    path = Path(new_sqlite("logs.db"))
    svc = Service(path)
    svc.create_eval("capital", FRANCE, threshold=0.5)
    svc.test_eval("capital", "Capital?", FRANCE)
    svc.activate_eval("capital")
    svc.close()
    return path


@pytest.fixture
def client(db: Path) -> Iterator[TestClient]:
    app = create_app(str(db))
    app.state.otlp_joiner = Joiner(wait_s=20)  # the default waits a minute
    with TestClient(app, base_url="http://127.0.0.1") as c:
        yield c


def stored(client: TestClient, count: int) -> list[Any]:
    """The captures once there are ``count`` (joined calls are stored just after the request
    that completed them, expired ones within a sweep): at most 10 s of polling."""
    found: list[Any] = []
    for _ in range(200):
        found = client.app.state.service.list_captures()  # type: ignore[attr-defined]
        if len(found) >= count:
            break
        time.sleep(0.05)
    return found


def stored_now(client: TestClient) -> list[Any]:
    return client.app.state.service.list_captures()  # type: ignore[attr-defined,no-any-return]


def post(client: TestClient, path: str, body: bytes) -> Any:
    r = client.post(path, content=body, headers=JSON)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("spans_first", [True, False])
def test_records_join_their_span_in_either_order(client: TestClient, spans_first: bool) -> None:
    batches = [
        ("/v1/traces", spans(span(CONTENTLESS))),
        ("/v1/logs", logs(*MESSAGES[:2])),  # the input, sent when the call started
        ("/v1/logs", logs(*MESSAGES[2:], CHOICE)),
    ]
    if not spans_first:
        batches.append(batches.pop(0))
    for path, body in batches[:-1]:
        assert post(client, path, body) == {}
    assert stored_now(client) == []  # waiting for the other half
    post(client, *batches[-1])
    (cap,) = stored(client, 1)
    assert (cap.input, cap.output) == ("What is the capital of France?", FRANCE)
    assert cap.capture_key == "chatcmpl-joined" and cap.results[0].passed
    meta = cap.metadata
    assert meta["model"] == "gpt-test-0601" and meta["provider"] == "openai"
    assert meta["finish_reason"] == "stop" and meta["latency_ms"] == 1250.0
    assert (meta["input_tokens"], meta["output_tokens"]) == (9, 10)
    assert (meta["trace_id"], meta["span_id"]) == (TRACE, SPAN)
    # the exporter sends it all again: nothing more is stored
    for path, body in batches:
        post(client, path, body)
    time.sleep(0.5)
    assert len(stored_now(client)) == 1


def test_halves_that_wait_too_long(client: TestClient) -> None:
    """Records whose span never comes are stored as they are once the wait is over (keyed by
    the span id); a span whose records never come (no content) is dropped."""
    client.app.state.otlp_joiner.wait_s = 0.3  # type: ignore[attr-defined]
    post(client, "/v1/logs", logs(*MESSAGES, CHOICE))
    post(client, "/v1/traces", spans(span(CONTENTLESS, span_id="00000000000000aa")))
    (cap,) = stored(client, 1)
    assert (cap.input, cap.output, cap.capture_key) == (
        "What is the capital of France?",
        FRANCE,
        SPAN,
    )
    assert "model" not in cap.metadata and cap.metadata["provider"] == "openai"
    joiner: Joiner = client.app.state.otlp_joiner  # type: ignore[attr-defined]
    for _ in range(100):
        if not len(joiner):
            break
        time.sleep(0.05)
    assert len(joiner) == 0 and joiner.stats()["dropped_without_content"] == 1
    assert len(stored_now(client)) == 1


def test_an_operation_details_record_and_its_span(client: TestClient) -> None:
    details = {
        **CONTENTLESS,
        "gen_ai.conversation.id": "conv-7",
        "gen_ai.input.messages": [
            {"role": "user", "parts": [{"type": "text", "content": "Capital of France?"}]}
        ],
        "gen_ai.output.messages": [
            {"role": "assistant", "parts": [{"type": "text", "content": FRANCE}]}
        ],
    }
    post(client, "/v1/logs", logs(record("gen_ai.client.inference.operation.details", **details)))
    assert stored_now(client) == []
    post(client, "/v1/traces", spans(span(CONTENTLESS)))
    (cap,) = stored(client, 1)
    assert (cap.input, cap.output, cap.conversation_id) == ("Capital of France?", FRANCE, "conv-7")
    assert cap.capture_key == "chatcmpl-joined" and cap.metadata["latency_ms"] == 1250.0


def test_waiting_halves_are_stored_when_the_server_stops(db: Path) -> None:
    with TestClient(create_app(str(db)), base_url="http://127.0.0.1") as client:
        post(client, "/v1/logs", logs(*MESSAGES, CHOICE))  # waits a minute for its span
        assert stored_now(client) == []
    svc = Service(db)
    try:
        (cap,) = svc.list_captures()
    finally:
        svc.close()
    assert cap.output == FRANCE


def test_the_table_is_bounded_in_calls() -> None:
    joiner = Joiner(wait_s=60, max_calls=3)
    out = []
    for i in range(5):
        call = Call(span_id=f"{i:016x}", trace_id=TRACE, input="q", attrs={"gen_ai.system": "x"})
        out += joiner.add_span(call)
    # the two oldest settled early: spans without content, dropped
    assert len(joiner) == 3 and joiner.early == 2 and out == []
    assert joiner.tally.stats()["dropped"] == {"no message content": 2}


def test_the_table_is_bounded_in_bytes() -> None:
    joiner = Joiner(wait_s=60, max_bytes=20_000)
    out = []
    for i in range(40):
        rec = {"trace_id": TRACE, "span_id": f"{10 + i:016x}", "event": "gen_ai.choice"}
        body = {"index": 0, "message": {"content": f"{i:02d}" + "x" * 600}}
        out += joiner.add_record({**rec, "time": 0, "attrs": {}, "body": body})
        assert 0 < joiner.bytes <= 20_000
    # the oldest settled early, in order, with their outputs; the newest still wait
    waiting = len(joiner)
    assert 5 < waiting < 20 and joiner.early == 40 - waiting
    assert [c.output[:2] for c in out] == [f"{i:02d}" for i in range(40 - waiting)]
    assert joiner.stats() == {
        "waiting": waiting,
        "waiting_bytes": joiner.bytes,
        "max_bytes": 20_000,
        "settled_early": 40 - waiting,
        "dropped_without_content": 0,
    }
    # a record of a call settled already is dropped, not the start of a second capture
    again = {"trace_id": TRACE, "span_id": f"{10:016x}", "event": "gen_ai.choice"}
    body = {"index": 0, "message": {"content": "late"}}
    assert joiner.add_record({**again, "time": 0, "attrs": {}, "body": body}) == []
    assert len(joiner) == waiting
    assert len(joiner.drain()) == waiting and len(joiner) == 0 and joiner.bytes == 0


def test_a_calls_attributes_count_toward_the_bound() -> None:
    """A span's attributes are held while it waits: 64 KiB of them weigh 64 KiB (they were
    not counted: 4,000 such spans held 256 MB)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        joiner = Joiner(wait_s=60, max_bytes=1_000_000)
        for i in range(40):
            attrs = {"gen_ai.system": "x", "gen_ai.tool.definitions": "a" * 65_535 + f"{i}"}
            joiner.add_span(Call(span_id=f"{i:016x}", trace_id=TRACE, input="q", attrs=attrs))
            assert joiner.bytes <= 1_000_000
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 10 <= len(joiner) <= 15 and joiner.early == 40 - len(joiner)
    # the count is of the memory really held: within a quarter of it
    assert 0.75 * held <= joiner.bytes <= 1.25 * held


CUT = '[{"role":"assistant","parts":[{"content":"The capital of France is Paris, on the'


def test_values_that_look_cut_are_stored_unscored(client: TestClient) -> None:
    cut_span = span(
        {
            "gen_ai.request.model": "m",
            "gen_ai.input.messages": '[{"role":"user","parts":[{"content":"Capital?"}]}]',
            "gen_ai.output.messages": CUT,
        }
    )
    marked = span(
        {"gen_ai.prompt.0.content": "Capital?", "gen_ai.completion.0.content": "Paris [truncated]"},
        span_id="00000000000000bb",
    )
    answer = post(client, "/v1/traces", spans(cut_span, marked))
    assert answer["partialSuccess"]["rejectedSpans"] == "0"
    assert answer["partialSuccess"]["errorMessage"].startswith("2 GenAI call(s) stored unscored")
    caps = {c.capture_key: c for c in stored(client, 2)}
    cut, truncated = caps[SPAN], caps["00000000000000bb"]
    assert cut.output == CUT and "gen_ai.output.messages is not whole JSON" in cut.metadata["cut"]
    assert "truncation marker" in truncated.metadata["cut"]
    for cap in (cut, truncated):
        assert not cap.evaluated and cap.results == []
    # protobuf: the partial success says the same
    request = ExportTraceServiceRequest()
    one = request.resource_spans.add().scope_spans.add().spans.add()
    one.span_id, one.name = bytes.fromhex("00000000000000cc"), "chat"
    one.attributes.append(KeyValue(key="gen_ai.output.messages", value=AnyValue(string_value=CUT)))
    r = client.post(
        "/v1/traces",
        content=request.SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
    )
    reply = ExportTraceServiceResponse.FromString(r.content)
    assert r.status_code == 200 and "stored unscored" in reply.partial_success.error_message


OI = {
    "openinference.span.kind": "LLM",
    "llm.system": "openai",
    "llm.model_name": "gpt-oi",
    "llm.input_messages.0.message.role": "system",
    "llm.input_messages.0.message.content": "Be brief.",
    "llm.input_messages.1.message.role": "user",
    "llm.input_messages.1.message.content": "Capital of France?",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": FRANCE,
    "llm.token_count.prompt": 9,
    "llm.token_count.completion": 10,
    "session.id": "session-1",
    "output.mime_type": "application/json",
    "output.value": json.dumps(
        {"id": "chatcmpl-oi", "choices": [{"message": {"content": FRANCE}}]}
    ),
}


def test_openinference_spans(client: TestClient) -> None:
    from_values = {  # no message attributes: the request and reply JSON
        "openinference.span.kind": "LLM",
        "input.mime_type": "application/json",
        "input.value": json.dumps({"messages": [{"role": "user", "content": "And Japan?"}]}),
        "output.mime_type": "application/json",
        "output.value": json.dumps(
            {"id": "chatcmpl-values", "choices": [{"message": {"content": "Tokyo."}}]}
        ),
    }
    chain = {"openinference.span.kind": "CHAIN", "output.value": "not a model call"}
    # output.value cut by a length limit, its message attribute whole (shorter than the cut)
    limited = {**OI, "output.value": OI["output.value"][:70]}
    post(
        client,
        "/v1/traces",
        spans(
            span(OI),
            span(from_values, "00000000000000b1"),
            span(chain, "00000000000000b2"),
            span(limited, "00000000000000b3"),
        ),
    )
    caps = {c.capture_key: c for c in stored(client, 3)}
    assert set(caps) == {"chatcmpl-oi", "chatcmpl-values", "00000000000000b3"}
    oi = caps["chatcmpl-oi"]
    assert (oi.input, oi.output, oi.conversation_id) == ("Capital of France?", FRANCE, "session-1")
    meta = oi.metadata
    assert (meta["model"], meta["provider"], meta["source"]) == (
        "gpt-oi",
        "openai",
        "openinference",
    )
    assert (meta["input_tokens"], meta["output_tokens"]) == (9, 10) and oi.results[0].passed
    assert (caps["chatcmpl-values"].input, caps["chatcmpl-values"].output) == (
        "And Japan?",
        "Tokyo.",
    )
    assert caps["00000000000000b3"].evaluated and "cut" not in caps["00000000000000b3"].metadata


def test_older_span_events(client: TestClient) -> None:
    events = [
        {
            "name": "gen_ai.content.prompt",
            "attributes": attrs({"gen_ai.prompt": '[{"role": "user", "content": "Capital?"}]'}),
        },
        {"name": "gen_ai.content.completion", "attributes": attrs({"gen_ai.completion": FRANCE})},
    ]
    post(client, "/v1/traces", spans(span({"gen_ai.system": "openai"}, events=events)))
    (cap,) = stored(client, 1)
    assert (cap.input, cap.output, cap.capture_key) == ("Capital?", FRANCE, SPAN)


def test_metrics_are_answered_and_not_stored(client: TestClient) -> None:
    doc = {"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"name": "gen_ai.client"}]}]}]}
    assert post(client, "/v1/metrics", json.dumps(doc).encode()) == {}
    r = client.post(
        "/v1/metrics", content=b"\x0a\x00", headers={"content-type": "application/x-protobuf"}
    )
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-protobuf"
    assert stored_now(client) == []


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'{"resourceLogs": 5}',
        b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"timeUnixNano": "-1"}]}]}]}',
    ],
)
def test_malformed_logs_store_and_keep_nothing(client: TestClient, body: bytes) -> None:
    before = logs(*MESSAGES)  # a good record in the same payload is not kept either
    doc = json.loads(body) if body.startswith(b'{"resourceLogs": [{') else None
    if doc is not None:
        doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"] += json.loads(before)["resourceLogs"][
            0
        ]["scopeLogs"][0]["logRecords"]
        body = json.dumps(doc).encode()
    r = client.post("/v1/logs", content=body, headers=JSON)
    assert r.status_code == 400, r.text
    assert r.json()["error"] and "\n" not in r.json()["error"]
    assert len(client.app.state.otlp_joiner) == 0  # type: ignore[attr-defined]
    r = client.post("/v1/logs", content=logs(*MESSAGES), headers={"content-type": "text/plain"})
    assert r.status_code == 415
    proto = client.post("/v1/logs", content=b"", headers={"content-type": "application/x-protobuf"})
    assert proto.status_code == 200
    assert ExportLogsServiceResponse.FromString(proto.content).partial_success.error_message == ""


def test_a_choice_naming_no_span_joins_the_span_of_its_time() -> None:
    """A ``gen_ai.choice`` with neither trace nor span id (OpenLLMetry's streamed calls) joins
    the one waiting span it falls within, before or after that span arrives; one that falls
    within two spans is dropped at once (it cannot be told which), one within none when its
    wait is over, each counted."""
    joiner = Joiner(wait_s=60)

    def waiting_span(n: int, start: int, end: int) -> list[Call]:
        call = Call(span_id=f"{n:016x}", trace_id=TRACE, input=f"q{n}", start=start, end=end)
        return joiner.add_span(call)

    def orphan(at: int, text: str) -> list[Call]:
        body = {"index": 0, "message": {"content": text}}
        rec = {"trace_id": "", "span_id": "", "event": "gen_ai.choice", "time": at}
        return joiner.add_record({**rec, "attrs": {}, "body": body})

    assert waiting_span(1, 100, 200) == []
    (first,) = orphan(150, "a1")  # the span waited: joined at once
    assert (first.input, first.output, first.span_id) == ("q1", "a1", f"{1:016x}")
    assert orphan(350, "a2") == []  # no span yet: it waits
    (second,) = waiting_span(2, 300, 400)
    assert (second.input, second.output) == ("q2", "a2")
    waiting_span(3, 500, 700)
    waiting_span(4, 600, 800)
    assert orphan(650, "both") == []  # within two spans: neither is guessed
    assert orphan(900, "none") == []  # within none yet: it waits
    assert len(joiner) == 3
    assert joiner.expired(time.monotonic() + 61) == []  # spans 3, 4 without content; the orphan
    assert joiner.tally.stats()["dropped"] == {
        "a record names no span": 1,
        "a record names no span and fits several calls": 1,
        "no message content": 2,
    }
    assert len(joiner) == 0 and joiner.bytes == 0


def test_records_naming_a_trace_but_no_span_join_the_call_they_fit() -> None:
    """A user message or choice record with a trace id and no span id joins the waiting span
    of its trace it fits: the one whose response id it names, when both have one (two
    overlapping calls of one trace told apart), else the one whose time it falls within;
    whichever arrives first. Hand-built records: no pinned instrumentation sends this shape
    on its own (tests/web/test_instrumentations.py drives openai-v2 with the span ids
    cleared by a log processor)."""
    joiner = Joiner(wait_s=60)
    other = "f" * 32

    def span(n: int, start: int, end: int, response: str | None = None) -> list[Call]:
        call = Call(span_id=f"{n:016x}", trace_id=TRACE, start=start, end=end, response_id=response)
        return joiner.add_span(call)

    def record(event: str, at: int, body: Any, trace: str = TRACE, **attrs: Any) -> list[Call]:
        rec = {"trace_id": trace, "span_id": "", "event": event, "time": at, "body": body}
        return joiner.add_record({**rec, "attrs": attrs})

    def choice(at: int, text: str, trace: str = TRACE, **attrs: Any) -> list[Call]:
        return record(
            "gen_ai.choice", at, {"index": 0, "message": {"content": text}}, trace, **attrs
        )

    # two calls of one trace at once, each record naming its response id
    assert span(1, 100, 500, "chatcmpl-1") == span(2, 200, 600, "chatcmpl-2") == []
    assert (
        record(
            "gen_ai.user.message", 250, {"content": "q2"}, **{"gen_ai.response.id": "chatcmpl-2"}
        )
        == []
    )
    (second,) = choice(450, "a2", **{"gen_ai.response.id": "chatcmpl-2"})
    (first,) = choice(450, "a1", **{"gen_ai.response.id": "chatcmpl-1"})
    assert (second.input, second.output, second.span_id) == ("q2", "a2", f"{2:016x}")
    assert (first.output, first.span_id) == ("a1", f"{1:016x}")
    # by time, the records first: they wait for their span
    assert record("gen_ai.user.message", 1100, {"content": "q3"}) == []
    assert choice(1150, "a3") == []
    assert choice(1150, "elsewhere", trace=other) == []  # another trace's: not this call's
    (third,) = span(3, 1000, 1200)
    assert (third.input, third.output, third.span_id) == ("q3", "a3", f"{3:016x}")
    assert len(joiner) == 1
    # overlapping calls of one trace naming no response id: a record within both joins none
    assert span(4, 2000, 2400) == span(5, 2100, 2500) == []
    assert choice(2200, "either") == []
    assert joiner.tally.stats()["dropped"] == {"a record names no span and fits several calls": 1}
    assert joiner.expired(time.monotonic() + 61) == []
    assert joiner.tally.stats()["dropped"] == {
        "a record names no span": 1,  # the other trace's
        "a record names no span and fits several calls": 1,
        "no message content": 2,  # spans 4 and 5
    }
    assert len(joiner) == 0 and joiner.bytes == 0
