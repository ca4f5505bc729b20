"""No simeval credential and no OTLP signal ever reaches the upstream: ``simeval serve
--upstream`` and ``simeval proxy`` in subprocesses with ``SIMEVAL_TOKEN`` set, the
OpenTelemetry SDK's own OTLP/HTTP exporters sending traces, logs and metrics with the token,
the official ``openai`` client, and an upstream of the test's own on 127.0.0.1 recording
every request it gets (tests/recording_upstream.py)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from recording_upstream import ANSWER, Upstream
from servers import Proc, wait_healthy
from simeval.service import Service

openai = pytest.importorskip("openai")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry._logs import LogRecord  # noqa: E402
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: E402
    OTLPMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import (  # noqa: E402
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import (  # noqa: E402
    InMemoryMetricReader,
    MetricExportResult,
)
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

TOKEN = "simeval-secret-token-7f3a9c"
SIMEVAL = [sys.executable, "-c", "from simeval.cli import main; main()"]
QUESTION = "What is the capital of France, traced?"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with Upstream() as up:
        yield up


@pytest.fixture(params=["serve", "proxy"])
def server(
    request: pytest.FixtureRequest,
    upstream: Upstream,
    new_sqlite: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[str, Path]]:
    """``simeval serve --upstream`` or ``simeval proxy``, with SIMEVAL_TOKEN set."""
    monkeypatch.setenv("SIMEVAL_TOKEN", TOKEN)  # inherited by the subprocess
    db = Path(new_sqlite("token.db"))
    common = ["--port", "0", "--db", str(db), "--upstream", upstream.url]
    if request.param == "serve":
        proc = Proc([*SIMEVAL, "serve", *common], r"Eval Studio: (\S+)")
    else:
        proc = Proc([*SIMEVAL, "proxy", *common], r"Proxy: (\S+)/v1")
    wait_healthy(proc.url)
    yield proc.url, db
    proc.stop()


def _spans() -> list[Any]:
    """One GenAI span, made by the SDK (what an instrumentation would record)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("test").start_as_current_span("chat gpt-test") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "gpt-test")
        span.set_attribute("gen_ai.response.id", f"chatcmpl-traced-{time.monotonic_ns()}")
        span.set_attribute("gen_ai.response.finish_reasons", ["stop"])
        span.set_attribute(
            "gen_ai.input.messages",
            json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]),
        )
        span.set_attribute(
            "gen_ai.output.messages",
            json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": ANSWER}],
                        "finish_reason": "stop",
                    }
                ]
            ),
        )
    provider.shutdown()
    return list(memory.get_finished_spans())


def _logs() -> list[Any]:
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    body = {"content": "What is the capital of France?"}
    record = LogRecord(body=body, attributes={"event.name": "gen_ai.user.message"})
    provider.get_logger("test").emit(record)
    provider.shutdown()
    return list(memory.get_finished_logs())


def _metrics() -> Any:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    counter = provider.get_meter("test").create_counter("gen_ai.client.token.usage")
    counter.add(19, {"gen_ai.request.model": "gpt-test"})
    data = reader.get_metrics_data()
    provider.shutdown()
    return data


def _leaks(upstream: Upstream, since: int) -> list[str]:
    """What the upstream got since request ``since`` that it must never get."""
    found = []
    for r in upstream.requests[since:]:
        seen = r["path"] + "\n" + "\n".join(f"{k}: {v}" for k, v in r["headers"])
        if TOKEN in seen or TOKEN.encode() in r["body"]:
            found.append(f"the token in {r['method']} {r['path']}")
        if any(r["path"].startswith(f"/v1/{s}") for s in ("traces", "logs", "metrics")):
            found.append(f"an OTLP signal: {r['method']} {r['path']}")
        if "simeval_session" in seen or "simeval_csrf" in seen:
            found.append(f"a studio cookie in {r['path']}")
    return found


@pytest.mark.process
def test_no_token_and_no_otlp_signal_reaches_the_upstream(
    server: tuple[str, Path], upstream: Upstream
) -> None:
    url, db = server
    start = len(upstream.requests)
    auth = {"Authorization": f"Bearer {TOKEN}"}

    # the SDK's own exporters, as an app configured with OTEL_EXPORTER_OTLP_ENDPOINT=url
    # and OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer <token>" sends its signals
    spans = OTLPSpanExporter(endpoint=url + "/v1/traces", headers=auth, timeout=10)
    assert spans.export(_spans()) == SpanExportResult.SUCCESS
    logs = OTLPLogExporter(endpoint=url + "/v1/logs", headers=auth, timeout=10)
    assert logs.export(_logs()) == LogRecordExportResult.SUCCESS
    metrics = OTLPMetricExporter(endpoint=url + "/v1/metrics", headers=auth, timeout=10)
    assert metrics.export(_metrics()) == MetricExportResult.SUCCESS
    for exporter in (spans, logs, metrics):
        exporter.shutdown()

    # an OpenAI client whose key is simeval's token (a local upstream needing none): the
    # call goes through, without the token
    via = openai.OpenAI(api_key=TOKEN, base_url=url + "/v1", max_retries=0)
    reply = via.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "Capital of France?"}]
    )
    assert reply.choices[0].message.content == ANSWER
    sent = upstream.requests[-1]
    assert sent["path"] == "/v1/chat/completions"
    assert "authorization" not in dict(sent["headers"])
    # the provider's own key, beside simeval's in X-Simeval-Token, is forwarded, with the
    # OpenAI headers; no cookie is (a comma-joined one neither), nor the token under any
    # other name, nor a token= query parameter
    keyed = openai.OpenAI(
        api_key="sk-provider",
        base_url=url + "/v1",
        max_retries=0,
        organization="org-test",
        project="proj-test",
        default_headers={
            "X-Simeval-Token": TOKEN,
            "Cookie": "theirs=1, simeval_session=abc; simeval_csrf=def",
            "X-Api-Key": TOKEN,
            "X-Token": f"Token {TOKEN}",
            "X-Custom-Secret": "kept-out",
        },
    )
    assert [m for m in keyed.models.list(extra_query={"token": TOKEN, "limit": "5"})] == []
    sent = upstream.requests[-1]
    headers = dict(sent["headers"])
    assert headers["authorization"] == "Bearer sk-provider"
    assert headers["openai-organization"] == "org-test"
    assert headers["openai-project"] == "proj-test"
    assert any(k.startswith("x-stainless-") for k in headers)  # the SDK's own headers
    assert "cookie" not in headers and "x-api-key" not in headers
    assert "x-token" not in headers and "x-custom-secret" not in headers
    assert sent["path"] == "/v1/models?limit=5"

    # a path that is not the OpenAI API's, or would resolve to another, never leaves
    before = len(upstream.requests)
    for path in ("/v1/traces/more", "/v1/logs", "/v1/metrics/x", "/v1/rerank", "/v1/"):
        r = httpx.post(url + path, headers=auth, content=b"{}", timeout=10)
        assert r.status_code in (404, 405, 400, 415), (path, r.status_code, r.text)
    for path in (
        "/v1/models/%2e%2e/traces",
        "/v1/models/../logs",
        "/v1/models%2F..%2Ftraces",
        "/v1/models/..%5Clogs",
        "/v1/%6Dodels",
    ):
        r = httpx.get(url + path, headers=auth, timeout=10)
        assert r.status_code == 404, (path, r.status_code)
        assert "error" in r.json()
    assert len(upstream.requests) == before
    # a model id with an encoded slash is an API path (vLLM's, OpenRouter's ids)
    r = httpx.get(url + "/v1/models/meta-llama%2FLlama-3", headers=auth, timeout=10)
    assert r.status_code == 200
    assert upstream.requests[-1]["path"] == "/v1/models/meta-llama%2FLlama-3"

    assert _leaks(upstream, start) == []
    # the traced call was captured here
    svc = Service(db)
    try:
        for _ in range(200):  # bounded: the writer commits within a moment
            caps = [c for c in svc.list_captures(limit=50) if c.input == QUESTION]
            if caps:
                break
            time.sleep(0.05)
    finally:
        svc.close()
    assert [c.output for c in caps] == [ANSWER]
    assert (caps[0].metadata or {})["finish_reason"] == "stop"
