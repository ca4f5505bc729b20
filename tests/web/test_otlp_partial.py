"""OTLP batches are never all-or-nothing: each span and record is taken or refused on its own,
the export answered 200 with its partial success; text past the store's limit is stored cut
and unscored; calls without input text are stored unscored; every drop, refusal and
unscored call is counted on ``/api/health``.

The batch with one long span is sent by the OpenTelemetry SDK's own OTLP/HTTP exporter to a
real ``simeval serve``."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from tests.servers import wait_captures

from simeval.checks import MAX_TEXT_CHARS
from simeval.service import Service
from simeval.web.app import create_app
from simeval.web.server_process import running_server

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

FRANCE = "Paris is the capital of France and its largest city."
JSON = {"content-type": "application/json"}
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "partial.db"
    with Service(db) as svc:
        svc.create_eval("capital", FRANCE, threshold=0.5)
        svc.test_eval("capital", "Capital?", FRANCE)
        svc.activate_eval("capital")
    return db


@pytest.mark.process
def test_one_long_span_does_not_lose_its_batch(tmp_path: Path) -> None:
    """A span with 2 MiB of output, exported in one batch with two normal calls: the batch is
    taken (over the API's 1 MiB body limit: OTLP's paths take what the exporters send), the
    two calls scored, the long one stored cut to the store's limit and unscored."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

    with running_server(_db(tmp_path)) as (url, _proc):
        exporter = OTLPSpanExporter(endpoint=url + "/v1/traces")
        results: list[SpanExportResult] = []
        export = exporter.export

        def kept(batch: Any) -> SpanExportResult:
            results.append(export(batch))
            return results[-1]

        exporter.export = kept  # type: ignore[method-assign,assignment]
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
        tracer = provider.get_tracer("engine")
        for i, output in enumerate([FRANCE, "Paris. " * (2 * 1024 * 1024 // 7), FRANCE]):
            with tracer.start_as_current_span(f"chat {i}") as span:
                span.set_attribute("gen_ai.operation.name", "chat")
                span.set_attribute("gen_ai.response.id", f"chatcmpl-{i}")
                span.set_attribute("gen_ai.prompt.0.role", "user")
                span.set_attribute("gen_ai.prompt.0.content", f"Capital of France? ({i})")
                span.set_attribute("gen_ai.completion.0.content", output)
        provider.shutdown()  # the three in one export
        assert [r.name for r in results] == ["SUCCESS"]
        caps = {c["capture_key"]: c for c in wait_captures(url, 3)}
        health = httpx.get(url + "/api/health").json()
    assert sorted(caps) == ["chatcmpl-0", "chatcmpl-1", "chatcmpl-2"]
    for key in ("chatcmpl-0", "chatcmpl-2"):
        assert caps[key]["evaluated"] and caps[key]["results"][0]["passed"]
    long = caps["chatcmpl-1"]
    assert len(long["output"]) == MAX_TEXT_CHARS and not long["results"]
    assert f"its first {MAX_TEXT_CHARS:,} kept" in long["metadata"]["cut"]
    assert health["otlp"]["unscored"] == {"cut": 1}


def _span(span_id: str, attributes: dict[str, Any], name: str = "chat") -> dict[str, Any]:
    return {
        "traceId": TRACE,
        "spanId": span_id,
        "name": name,
        "endTimeUnixNano": "1714560001250000000",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }


def _body(key: str, items: list[dict[str, Any]]) -> bytes:
    scope = "scopeSpans" if key == "resourceSpans" else "scopeLogs"
    inner = "spans" if key == "resourceSpans" else "logRecords"
    return json.dumps({key: [{scope: [{inner: items}]}]}).encode()


def _messages(input_parts: list[dict[str, Any]]) -> dict[str, str]:
    return {
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": input_parts}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": FRANCE}]}]
        ),
    }


def test_spans_refused_on_their_own_and_calls_without_input_unscored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = _span("00000000000000a1", _messages([{"type": "text", "content": "Capital?"}]))
    empty = _span("00000000000000a2", _messages([]))  # openai-v2's list content: "parts": []
    image = _span(
        "00000000000000a3",
        _messages([{"type": "uri", "modality": "image", "uri": "https://x.test/a.png"}]),
    )
    bad = _span("00000000000000a4", {"gen_ai.completion.0.content": "a\x00b"}, name="bad one")
    shape = _span("00000000000000a5", {"gen_ai.output.messages": '[{"parts": 5}]'})
    app = create_app(str(_db(tmp_path)))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        with caplog.at_level(logging.WARNING, logger="simeval.otlp"):
            r = client.post(
                "/v1/traces",
                content=_body("resourceSpans", [good, bad, empty, shape, image]),
                headers=JSON,
            )
        assert r.status_code == 200, r.text
        said = r.json()["partialSuccess"]
        assert said["rejectedSpans"] == "2"
        assert said["errorMessage"].startswith(
            f"2 refused, the others kept: span 1 ('bad one', trace {TRACE}): output contains "
            "a NUL character"
        )
        assert "(and 1 more)" in said["errorMessage"]
        assert "2 GenAI call(s) stored unscored: no input text" in said["errorMessage"]
        # each refusal said, with the span's name and trace id
        refusals = [m for m in caplog.messages if m.startswith("OTLP: refused span")]
        assert len(refusals) == 2 and "'bad one'" in refusals[0] and TRACE in refusals[1]
        caps = {c.capture_key: c for c in app.state.service.list_captures()}
        health = client.get("/api/health").json()["otlp"]
    assert sorted(caps) == ["00000000000000a1", "00000000000000a2", "00000000000000a3"]
    assert caps["00000000000000a1"].evaluated and caps["00000000000000a1"].results
    for key in ("00000000000000a2", "00000000000000a3"):
        cap = caps[key]
        assert cap.input == "" and cap.metadata["no_input"] is True
        assert not cap.evaluated and cap.results == []
    assert caps["00000000000000a3"].metadata["other_parts"] == ["uri"]
    assert health["rejected"] == {"spans": 2} and health["unscored"] == {"no input text": 2}


@pytest.mark.slow
def test_log_records_refused_on_their_own(tmp_path: Path) -> None:
    def record(event: str, body: dict[str, Any], span_id: str = "00f067aa0ba902b7") -> Any:
        return {
            "traceId": TRACE,
            "spanId": span_id,
            "eventName": event,
            "body": {"kvlistValue": {"values": [_value(k, v) for k, v in body.items()]}},
        }

    def _value(key: str, v: Any) -> dict[str, Any]:
        if isinstance(v, dict):
            return {
                "key": key,
                "value": {"kvlistValue": {"values": [_value(*kv) for kv in v.items()]}},
            }
        return {"key": key, "value": {"stringValue": v}}

    records = [
        record("gen_ai.user.message", {"content": "What is the capital of France?"}),
        record("gen_ai.user.message", {"content": "a\x00b"}, span_id="00000000000000b2"),
        record("gen_ai.choice", {"message": {"content": "x"}}, span_id="ab" * 150),
        record("gen_ai.choice", {"message": {"role": "assistant", "content": FRANCE}}),
        # a record outside any span joins nothing: counted as dropped
        record("gen_ai.choice", {"message": {"content": FRANCE}}, span_id=""),
    ]
    span = _span("00f067aa0ba902b7", {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"})
    app = create_app(str(_db(tmp_path)))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.post("/v1/traces", content=_body("resourceSpans", [span]), headers=JSON)
        r = client.post("/v1/logs", content=_body("resourceLogs", records), headers=JSON)
        assert r.status_code == 200, r.text
        said = r.json()["partialSuccess"]
        assert said["rejectedLogRecords"] == "2", said
        assert said["errorMessage"].startswith("2 refused, the others kept: log record 1 (")
        caps: list[Any] = []
        for _ in range(100):  # a joined call is stored just after the request
            caps = app.state.service.list_captures()
            if caps:
                break
            time.sleep(0.05)
        health = client.get("/api/health").json()["otlp"]
    (cap,) = caps
    assert (cap.input, cap.output) == ("What is the capital of France?", FRANCE)
    assert cap.evaluated and cap.results[0].passed
    assert health["rejected"] == {"log records": 2}
    assert health["dropped"] == {"a record names no span": 1}


def test_a_logfire_span_is_named_by_its_rendered_message(tmp_path: Path) -> None:
    attributes = {
        "logfire.msg_template": "Chat Completion with {request_data[model]!r}",
        "logfire.msg": "Chat Completion with 'gpt-4o'",
        "gen_ai.prompt.0.content": "Capital?",
        "gen_ai.completion.0.content": FRANCE,
    }
    span = _span("00000000000000c1", attributes, name=attributes["logfire.msg_template"])
    app = create_app(str(_db(tmp_path)))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        r = client.post("/v1/traces", content=_body("resourceSpans", [span]), headers=JSON)
        assert r.status_code == 200, r.text
        (cap,) = app.state.service.list_captures()
    assert cap.metadata["span_name"] == "Chat Completion with 'gpt-4o'"


@pytest.mark.parametrize("score_cut", [False, True])
def test_cut_text_is_scored_only_when_asked(tmp_path: Path, score_cut: bool) -> None:
    """Text past the store's limit is stored cut and unscored; with ``serve --otlp-score-cut``
    it is scored on what was kept, its ``cut`` still in its metadata. A call with no input
    text stays unscored either way."""
    long = _span(
        "00000000000000d1",
        {"gen_ai.prompt.0.content": "Capital?", "gen_ai.completion.0.content": FRANCE * 20_000},
    )
    bare = _span("00000000000000d2", _messages([]))
    app = create_app(str(_db(tmp_path)), otlp_score_cut=score_cut)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        r = client.post("/v1/traces", content=_body("resourceSpans", [long, bare]), headers=JSON)
        assert r.status_code == 200, r.text
        caps = {c.capture_key: c for c in app.state.service.list_captures()}
    cut = caps["00000000000000d1"]
    assert len(cut.output) == MAX_TEXT_CHARS and "first 1,000,000 kept" in cut.metadata["cut"]
    assert cut.evaluated is score_cut and bool(cut.results) is score_cut
    assert not caps["00000000000000d2"].evaluated
