"""One metadata vocabulary whichever way a capture came (``simeval.vocabulary``): 29 replies
through one ``simeval serve --upstream`` (a subprocess) by five paths, each saying its
finish reason and token counts its own way: the proxy (the official ``openai`` client, an
upstream of the test's own on 127.0.0.1), OTLP spans (the OpenTelemetry SDK's exporter), the
HTTP batch API, the library (``Service.capture``) and ``simeval.Client``. The ``meta=``
filter then finds every one."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import simeval
from recording_upstream import ANSWER, Upstream
from servers import Proc, wait_healthy
from simeval.service import Service

openai = pytest.importorskip("openai")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

SIMEVAL = [sys.executable, "-c", "from simeval.cli import main; main()"]


@pytest.fixture
def served(new_sqlite: Callable[..., str]) -> Iterator[tuple[str, Path]]:
    db = Path(new_sqlite("vocabulary.db"))
    with Upstream() as upstream:
        proc = Proc(
            [*SIMEVAL, "serve", "--port", "0", "--db", str(db), "--upstream", upstream.url],
            r"Eval Studio: (\S+)",
        )
        try:
            wait_healthy(proc.url)
            yield proc.url, db
        finally:
            proc.stop()


def _proxied(url: str) -> int:
    """8 captures through the proxy: chat, completions and responses, streamed or not, and
    a chat with n=2 (finish reasons ``"stop"`` and ``status: completed``)."""
    via = openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
    user = [{"role": "user", "content": "proxy: capital of France?"}]
    via.chat.completions.create(model="gpt-test", messages=user)
    usage: Any = {"stream_options": {"include_usage": True}}
    list(via.chat.completions.create(model="gpt-test", messages=user, stream=True, **usage))
    via.completions.create(model="gpt-test", prompt="proxy: completion?")
    list(
        via.completions.create(model="gpt-test", prompt="proxy: completion?", stream=True, **usage)
    )
    via.responses.create(model="gpt-test", input="proxy: response?")
    list(via.responses.create(model="gpt-test", input="proxy: response?", stream=True))
    via.chat.completions.create(model="gpt-test", messages=user, n=2)
    return 8


def _export_spans(url: str, calls: list[tuple[str, str]]) -> None:
    """One GenAI span per ``(response id, question)``, made by the SDK and sent by its
    OTLP/HTTP exporter: ``gen_ai.response.finish_reasons`` a list, ``gen_ai.usage.*``."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    for response_id, prompt in calls:
        with tracer.start_as_current_span("chat gpt-test") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.provider.name", "openai")
            span.set_attribute("gen_ai.request.model", "gpt-test")
            span.set_attribute("gen_ai.response.id", response_id)
            span.set_attribute("gen_ai.response.finish_reasons", ["stop"])
            span.set_attribute("gen_ai.usage.input_tokens", 9)
            span.set_attribute("gen_ai.usage.output_tokens", 10)
            question = [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
            answer = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            span.set_attribute("gen_ai.input.messages", json.dumps(question))
            span.set_attribute("gen_ai.output.messages", json.dumps(answer))
    provider.shutdown()
    exporter = OTLPSpanExporter(endpoint=url + "/v1/traces", timeout=10)
    assert exporter.export(memory.get_finished_spans()) == SpanExportResult.SUCCESS
    exporter.shutdown()


def _traced(url: str) -> int:
    """6 spans over OTLP."""
    _export_spans(url, [(f"chatcmpl-span-{i}", f"span {i}?") for i in range(6)])
    return 6


def _batched(url: str) -> int:
    """5 over the HTTP batch API: the finish reason a JSON text, usage as chat says it."""
    meta = {"finish_reason": '["stop"]', "usage": {"prompt_tokens": 9, "completion_tokens": 10}}
    rows = [{"input": f"batch {i}?", "output": ANSWER, "metadata": meta} for i in range(5)]
    r = httpx.post(url + "/api/captures/batch", json={"captures": rows}, timeout=10)
    assert r.status_code in (200, 201), r.text
    return 5


def _library(db: Path) -> int:
    """5 by the library, on the same database: a list of one, the GenAI names."""
    svc = Service(db)
    try:
        for i in range(5):
            meta = {
                "finish_reason": ["stop"],
                "gen_ai.usage.input_tokens": 9,
                "gen_ai.usage.output_tokens": 10,
            }
            svc.capture(f"library {i}?", ANSWER, metadata=meta)
    finally:
        svc.close()
    return 5


def _client(url: str) -> int:
    """5 by ``simeval.Client``: a string, and a count as text."""
    client = simeval.Client(url)
    try:
        for i in range(5):
            meta = {"finish_reason": "stop", "input_tokens": "9", "output_tokens": 10}
            client.capture(f"client {i}?", ANSWER, metadata=meta)
        assert client.flush(30)
    finally:
        client.close()
    return 5


def _listed(url: str, *meta: str) -> list[dict[str, Any]]:
    r = httpx.get(url + "/api/captures", params={"meta": list(meta), "limit": 100}, timeout=10)
    assert r.status_code == 200, r.text
    captures: list[dict[str, Any]] = r.json()["captures"]
    return captures


@pytest.mark.process
def test_one_vocabulary_the_meta_filter_finds_all_29(served: tuple[str, Path]) -> None:
    url, db = served
    expected = _proxied(url) + _traced(url) + _batched(url) + _library(db) + _client(url)
    assert expected == 29
    every: list[dict[str, Any]] = []
    for _ in range(300):  # bounded: the proxy's queue and the writers settle
        every = _listed(url)
        if len(every) >= 29:
            break
        time.sleep(0.05)
    assert len(every) == 29, [c["input"] for c in every]

    stopped = _listed(url, "finish_reason:stop")
    assert len(stopped) == 29, sorted({json.dumps(c["metadata"]) for c in every})
    assert all(c["metadata"]["finish_reason"] == "stop" for c in stopped)
    # token counts as integers under one name: every capture but the second choice of the
    # n=2 call (the call's usage goes with its first choice)
    counted = _listed(url, "input_tokens=9")
    assert len(counted) == 28
    assert all(c["metadata"]["input_tokens"] == 9 for c in counted)
    assert all(c["metadata"]["output_tokens"] == 10 for c in counted)
    models = {c["metadata"].get("model") for c in every if c["metadata"].get("source")}
    assert models == {"gpt-test"}
    # each source's own words are kept beside the vocabulary's
    spans = [c for c in every if c["input"].startswith("span ")]
    assert len(spans) == 6 and all(c["metadata"]["provider"] == "openai" for c in spans)
    batched = [c for c in every if c["input"].startswith("batch ")]
    assert all(c["metadata"]["usage"]["prompt_tokens"] == 9 for c in batched)


def _settled(url: str) -> list[dict[str, Any]]:
    """Every capture, once the proxy's queue is empty (bounded wait)."""
    for _ in range(300):
        if httpx.get(url + "/api/health", timeout=5).json()["proxy"]["queued"] == 0:
            break
        time.sleep(0.05)
    return _listed(url)


@pytest.mark.process
def test_a_call_seen_by_the_proxy_and_a_span_is_stored_once(served: tuple[str, Path]) -> None:
    """The proxy keys a reply by its response id, OTLP a span by ``gen_ai.response.id``: the
    same ``call_key``, so one call seen both ways is one capture, in either order."""
    url, _ = served
    via = openai.OpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
    user = [{"role": "user", "content": "Seen twice: the capital of France?"}]
    # the proxy first, then the instrumentation's span of the same call
    reply = via.chat.completions.create(model="gpt-test", messages=user)
    for _ in range(300):  # bounded
        if [c for c in _settled(url) if c["capture_key"] == reply.id]:
            break
        time.sleep(0.05)
    _export_spans(url, [(reply.id, user[0]["content"]), ("chatcmpl-other", "Another call?")])
    # the span first (its exporter flushed before the reply was read), then the proxy
    _export_spans(url, [("chatcmpl-span-first", user[0]["content"])])
    extra = {"OpenAI-Test-Id": "chatcmpl-span-first"}
    again = via.chat.completions.create(model="gpt-test", messages=user, extra_headers=extra)
    assert again.id == "chatcmpl-span-first"
    every = _settled(url)
    keys = [c["capture_key"] for c in every]
    assert sorted(keys) == sorted([reply.id, "chatcmpl-other", "chatcmpl-span-first"]), keys
    health = httpx.get(url + "/api/health", timeout=5).json()["proxy"]
    assert health["failed"] == 0 and health["dropped"] == 0
