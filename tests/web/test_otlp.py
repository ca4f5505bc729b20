"""OpenTelemetry traces as captures: the OpenTelemetry SDK's own OTLP/HTTP exporter (protobuf)
against a real ``simeval serve``, OTLP JSON and malformed payloads through the ASGI app."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from simeval.service import Service
from simeval.web import create_app
from simeval.web.server_process import running_server

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

REF = "Paris is the capital of France and its largest city."


def genai_spans() -> list[Any]:
    """Spans as an instrumented engine makes them: the current GenAI conventions, the older
    indexed ones, a plain HTTP span, and a GenAI span with no output (embeddings)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "engine"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("chat gpt-test") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "gpt-test")
        span.set_attribute("gen_ai.conversation.id", "conv-1")
        span.set_attribute("gen_ai.usage.input_tokens", 9)
        span.set_attribute("gen_ai.usage.output_tokens", 10)
        span.set_attribute("gen_ai.response.finish_reasons", ["stop"])
        messages = [
            {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Capital of France?"}]},
        ]
        span.set_attribute("gen_ai.input.messages", json.dumps(messages))
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": REF}]}]
        span.set_attribute("gen_ai.output.messages", json.dumps(answer))
    with tracer.start_as_current_span("openai.chat") as span:
        span.set_attribute("gen_ai.system", "openai")
        span.set_attribute("gen_ai.request.model", "gpt-old")
        span.set_attribute("gen_ai.prompt.0.role", "system")
        span.set_attribute("gen_ai.prompt.0.content", "Be brief.")
        span.set_attribute("gen_ai.prompt.1.role", "user")
        span.set_attribute("gen_ai.prompt.1.content", "And the capital of Japan?")
        span.set_attribute("gen_ai.completion.0.role", "assistant")
        span.set_attribute("gen_ai.completion.0.content", "Tokyo is the capital of Japan.")
    with tracer.start_as_current_span("GET /health") as span:
        span.set_attribute("http.request.method", "GET")
    with tracer.start_as_current_span("embeddings") as span:
        span.set_attribute("gen_ai.operation.name", "embeddings")
        span.set_attribute("gen_ai.request.model", "embed-test")
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.mark.process
def test_the_sdk_exporter_sends_genai_spans(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("otel.db"))
    svc = Service(db)
    svc.create_eval("capital", REF)
    svc.test_eval("capital", "Capital?", REF)
    svc.activate_eval("capital")
    svc.close()
    spans = genai_spans()
    with running_server(db) as (url, _proc):
        for compression in (Compression.NoCompression, Compression.Gzip):
            exporter = OTLPSpanExporter(endpoint=url + "/v1/traces", compression=compression)
            # sent twice: the span id is the capture key, so the second changes nothing
            assert exporter.export(spans) == SpanExportResult.SUCCESS
            exporter.shutdown()
    svc = Service(db)
    try:
        caps = {c.input: c for c in svc.list_captures()}
    finally:
        svc.close()
    assert sorted(caps) == ["And the capital of Japan?", "Capital of France?"]
    new = caps["Capital of France?"]
    assert new.output == REF and new.conversation_id == "conv-1"
    assert new.capture_key == format(spans[0].context.span_id, "016x")
    assert new.results[0].eval_name == "capital" and new.results[0].passed
    meta = new.metadata or {}
    assert meta["model"] == "gpt-test" and meta["usage"] == {
        "input_tokens": 9,
        "output_tokens": 10,
    }
    # one metadata vocabulary (simeval.vocabulary): a finish reason is one string
    assert meta["finish_reason"] == "stop" and meta["source"] == "otel"
    assert (meta["input_tokens"], meta["output_tokens"]) == (9, 10)
    assert meta["latency_ms"] >= 0 and meta["trace_id"] == format(spans[0].context.trace_id, "032x")
    old = caps["And the capital of Japan?"]
    assert old.output == "Tokyo is the capital of Japan." and not old.results[0].passed
    assert (old.metadata or {})["system"] == "openai"


@pytest.fixture
def client(new_sqlite: Callable[..., str]) -> Iterator[TestClient]:
    with TestClient(create_app(new_sqlite("j.db")), base_url="http://127.0.0.1") as c:
        yield c


def _json_payload(attrs: list[dict[str, Any]], span_id: str = "00f067aa0ba902b7") -> bytes:
    span = {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
        "spanId": span_id,
        "name": "chat",
        "kind": 3,
        "startTimeUnixNano": "1714560000000000000",
        "endTimeUnixNano": "1714560001500000000",
        "attributes": attrs,
    }
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [span]}]}]}
    return json.dumps(doc).encode()


def _captures(client: TestClient) -> list[Any]:
    return client.app.state.service.list_captures()  # type: ignore[attr-defined]


def test_json_payload(client: TestClient) -> None:
    attrs = [
        {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
        {
            "key": "gen_ai.input.messages",
            "value": {
                "arrayValue": {
                    "values": [
                        {
                            "kvlistValue": {
                                "values": [
                                    {"key": "role", "value": {"stringValue": "user"}},
                                    {"key": "content", "value": {"stringValue": "Hi?"}},
                                ]
                            }
                        }
                    ]
                }
            },
        },
        {"key": "gen_ai.completion.0.content", "value": {"stringValue": "Hello."}},
    ]
    headers = {"content-type": "application/json"}
    r = client.post("/v1/traces", content=_json_payload(attrs), headers=headers)
    assert r.status_code == 200 and r.json() == {}
    r = client.post("/v1/traces", content=_json_payload(attrs), headers=headers)
    assert r.status_code == 200
    (cap,) = _captures(client)
    assert (cap.input, cap.output, cap.capture_key) == ("Hi?", "Hello.", "00f067aa0ba902b7")
    assert cap.metadata["usage"] == {"input_tokens": 12}
    assert cap.metadata["latency_ms"] == 1500.0
    assert cap.captured_at.isoformat().startswith("2024-05-01T10:40:01.5")


def test_spans_without_genai_and_bad_payloads_store_nothing(client: TestClient) -> None:
    plain = _json_payload([{"key": "http.route", "value": {"stringValue": "/x"}}])
    json_type = {"content-type": "application/json"}
    assert client.post("/v1/traces", content=plain, headers=json_type).status_code == 200
    proto = {"content-type": "application/x-protobuf"}
    for body, headers in (
        (b"\xff\xff\xff garbage", proto),
        (b"{not json", json_type),
        (b'{"resourceSpans": 5}', json_type),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [7]}]}]}]}', json_type),
        (b"\x1f\x8b broken gzip", {**json_type, "content-encoding": "gzip"}),
    ):
        r = client.post("/v1/traces", content=body, headers=headers)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"] and "\n" not in r.json()["error"]
    r = client.post("/v1/traces", content=b"x", headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert _captures(client) == []
