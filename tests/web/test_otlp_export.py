"""Scores out: results sent as ``gen_ai.evaluation.result`` OTLP log events to a receiver of
the test's own (an OTLP/HTTP server on 127.0.0.1, decoding with ``opentelemetry-proto``),
from ``simeval serve --otlp-export`` fed by every capture path (``/api/capture``, the batch API,
``simeval.Client``, the ``/v1`` proxy, OTLP spans), and a receiver that refuses or hangs never
slowing a capture."""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from tests.otlp_receiver import Receiver

import simeval
from servers import Proc
from simeval.cli import cli
from simeval.errors import InvalidInput
from simeval.service import Service
from simeval.web import create_app
from simeval.web.otlp_export import ScoreExporter, check_export_url
from simeval.web.server_process import running_server

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

HERE = Path(__file__).parents[1]  # tests/, where openai_upstream.py is
REF = "Paris is the capital of France and its largest city."
EVENT = "gen_ai.evaluation.result"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def active_db(path: Path) -> Path:
    with Service(path) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "Capital?", REF)
        svc.activate_eval("capital")
    return path


def chat_span(tracer: Any, question: str, answer: str, response_id: str | None = None) -> None:
    with tracer.start_as_current_span("chat gpt-test") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "gpt-test")
        if response_id:
            span.set_attribute("gen_ai.response.id", response_id)
        user = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
        span.set_attribute("gen_ai.input.messages", json.dumps(user))
        out = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        span.set_attribute("gen_ai.output.messages", json.dumps(out))


def by_output(svc: Service) -> dict[str, Any]:
    return {c.output: c for c in svc.list_captures(limit=100)}


@pytest.mark.process
def test_every_capture_path_sends_its_results_with_the_evaluated_span(
    tmp_path: Path, receiver: Receiver
) -> None:
    db = active_db(tmp_path / "out.db")
    upstream = Proc([sys.executable, str(HERE / "openai_upstream.py")], r"upstream: (\S+)")
    try:
        with running_server(db, "--otlp-export", receiver.url, "--upstream", upstream.url) as (
            url,
            _proc,
        ):
            # a span, as an instrumented engine exports it (the OpenTelemetry SDK)
            memory = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(memory))
            tracer = provider.get_tracer("test")
            chat_span(tracer, "Capital of France?", REF)
            chat_span(tracer, "Capital of France?", "Lyon has good food.", "chatcmpl-span-2")
            spans = {s.attributes["gen_ai.output.messages"]: s for s in memory.get_finished_spans()}
            sent = OTLPSpanExporter(endpoint=url + "/v1/traces").export(list(spans.values()))
            assert sent is SpanExportResult.SUCCESS
            # the capture API, the batch API, the client, the proxy
            r = httpx.post(
                url + "/api/capture",
                json={"input": "Capital?", "output": "Paris is in France.", "metadata": {}},
            )
            assert r.status_code == 201
            r = httpx.post(
                url + "/api/captures/batch",
                json={"captures": [{"input": "q", "output": "Bananas are yellow."}]},
            )
            assert r.status_code in (200, 201), r.text
            with simeval.Client(url) as client:
                client.capture("Capital?", "Paris, the French capital.")
            chat = httpx.post(
                url + "/v1/chat/completions",
                headers={"Authorization": "Bearer sk-test"},
                json={"model": "m", "messages": [{"role": "user", "content": "Japan?"}]},
                timeout=30,
            )
            assert chat.status_code == 200
            records = receiver.wait_for(6)
            health = httpx.get(url + "/api/health").json()
    finally:
        upstream.stop()
    assert len(records) == 6, records
    assert {r["event"] for r in records} == {EVENT}
    with Service(db) as svc:
        stored = by_output(svc)
    assert len(stored) == 6
    by_identifier = {r["attrs"]["evaluation.identifier"]: r for r in records}
    for capture in stored.values():
        (result,) = capture.results
        event = by_identifier[result.id]
        attrs = event["attrs"]
        assert attrs["gen_ai.evaluation.name"] == "capital"
        assert attrs["gen_ai.evaluation.score.value"] == pytest.approx(result.score, abs=1e-12)
        assert attrs["gen_ai.evaluation.score.label"] == ("pass" if result.passed else "fail")
        assert attrs["evaluation.annotator_kind"] == "CODE"
        meta = json.loads(attrs["evaluation.metadata"])
        assert meta["capture_id"] == capture.id and meta["threshold"] == result.threshold
        # the evaluator's identity (semantic-conventions-genai pull request 359)
        assert attrs["gen_ai.evaluation.evaluator.id"] == "capital"
        version = f"{result.eval_version}+{result.fingerprint}"
        assert attrs["gen_ai.evaluation.evaluator.version"] == version
        assert event["severity"] == ((9, "INFO") if result.passed else (13, "WARN"))
        # dated by its capture, to the microsecond; observed when it was offered
        at = capture.captured_at.replace(tzinfo=datetime.UTC).timestamp()
        assert abs(event["time"] / 1e9 - at) < 1e-5 and event["observed"] >= event["time"]
        if not result.passed:
            assert "missing:" in attrs["gen_ai.evaluation.explanation"]
    # the span captures carry their span: the event is parented to the evaluated span
    for text, span in spans.items():
        output = json.loads(text)[0]["parts"][0]["content"]
        result = stored[output].results[0]
        event = by_identifier[result.id]
        assert event["trace_id"] == format(span.context.trace_id, "032x")
        assert event["span_id"] == format(span.context.span_id, "016x")
    assert (
        by_identifier[stored["Lyon has good food."].results[0].id]["attrs"]["gen_ai.response.id"]
        == "chatcmpl-span-2"
    )
    # the proxy's capture carries its response id too
    proxied = next(c for c in stored.values() if (c.metadata or {}).get("source") == "proxy")
    proxied_attrs = by_identifier[proxied.results[0].id]["attrs"]
    assert proxied_attrs["gen_ai.response.id"] == chat.json()["id"]
    # the others came from no span
    for output in ("Paris is in France.", "Bananas are yellow.", "Paris, the French capital."):
        assert by_identifier[stored[output].results[0].id]["span_id"] == ""
    assert health["otlp_export"]["sent"] == 6 and health["otlp_export"]["dropped"] == 0
    assert all("protobuf" in kind for kind in receiver.requests)


@pytest.mark.process
def test_retried_after_503_and_sent_once(tmp_path: Path) -> None:
    receiver = Receiver(fail_first=2)
    try:
        app = create_app(active_db(tmp_path / "retry.db"))
        exporter = ScoreExporter(receiver.url, app.state.service, max_retry_delay=0.05)
        app.state.service.on_captured(exporter.offer)
        with TestClient(app, base_url="http://127.0.0.1:8000") as client:
            for i in range(5):
                assert client.post(
                    "/api/capture", json={"input": "q", "output": f"a {i}"}
                ).is_success
            assert exporter.flush(timeout=30)
        exporter.close()
        assert len(receiver.records) == 5
        assert exporter.stats()["sent"] == 5 and exporter.stats()["retries"] >= 2
        assert exporter.stats()["failed"] == 0
    finally:
        receiver.close()


@pytest.mark.process
def test_json_encoding(tmp_path: Path, receiver: Receiver) -> None:
    svc = Service(active_db(tmp_path / "json.db"))
    exporter = ScoreExporter(receiver.url, svc, encoding="json")
    svc.on_captured(exporter.offer)
    try:
        out = svc.capture(
            "Capital?", REF, conversation_id="conv-7", metadata={"response_id": "resp_1"}
        )
        svc.capture("Capital?", REF, capture_key="k")  # and once more: not sent twice
        svc.capture("Capital?", REF, capture_key="k")
        assert exporter.flush(timeout=30)
    finally:
        exporter.close()
        svc.close()
    assert receiver.requests and all(k == "application/json" for k in receiver.requests)
    assert len(receiver.records) == 2
    first = next(
        r for r in receiver.records if r["attrs"]["evaluation.identifier"] == out.results[0].id
    )
    assert first["event"] == EVENT
    assert first["attrs"]["gen_ai.response.id"] == "resp_1"
    assert first["attrs"]["gen_ai.conversation.id"] == "conv-7"
    assert first["severity"] == (9, "INFO")
    assert first["attrs"]["gen_ai.evaluation.score.label"] == "pass"
    assert first["attrs"]["gen_ai.evaluation.score.value"] == pytest.approx(out.results[0].score)


@contextlib.contextmanager
def hanging_receiver() -> Iterator[tuple[str, list[socket.socket]]]:
    """A port that accepts connections and reads requests, and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", held
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


@pytest.mark.process
@pytest.mark.parametrize("mode", ["hangs", "refuses"])
def test_a_receiver_down_never_slows_a_capture(tmp_path: Path, mode: str) -> None:
    bound = 5.0  # the exporter's timeout: one capture waiting on it would take this long
    app = create_app(active_db(tmp_path / f"{mode}.db"))
    with contextlib.ExitStack() as stack:
        if mode == "hangs":
            url, held = stack.enter_context(hanging_receiver())
        else:
            with socket.socket() as s:  # a port nobody listens on: connections are refused
                s.bind(("127.0.0.1", 0))
                url, held = f"http://127.0.0.1:{s.getsockname()[1]}", []
        exporter = ScoreExporter(url, app.state.service, timeout=bound, max_queue=50)
        app.state.service.on_captured(exporter.offer)
        app.state.otlp_export = exporter  # as create_app(otlp_export=...) does
        with TestClient(app, base_url="http://127.0.0.1:8000") as client:
            slowest = 0.0
            for i in range(200):
                start = time.monotonic()
                r = client.post("/api/capture", json={"input": "q", "output": f"Paris {i}"})
                slowest = max(slowest, time.monotonic() - start)
                assert r.status_code == 201
            batch = client.post(
                "/api/captures/batch",
                json={"captures": [{"input": "q", "output": f"b {i}"} for i in range(100)]},
            )
            assert batch.status_code == 201
            stats = exporter.stats()
            health = client.get("/api/health").json()
        exporter.close(timeout=0)
    # every capture answered within the exporter's bound although the receiver never took one
    assert slowest < bound
    assert stats["sent"] == 0
    if mode == "hangs":
        assert held  # the exporter is stuck in a request the receiver holds
    # the queue stays bounded: what did not fit is counted, and shown on /api/health
    assert stats["queued"] <= 50 + 50  # the queue, and the batch being sent
    assert stats["dropped"] >= 300 - 100, stats
    assert health["otlp_export"]["dropped"] >= 200
    assert health["status"] == "ok"


def test_bad_urls_are_one_line_errors(tmp_path: Path) -> None:
    assert check_export_url("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/logs"
    assert check_export_url("http://h:4318/v1/logs/") == "http://h:4318/v1/logs"
    assert check_export_url("https://h/otlp") == "https://h/otlp/v1/logs"
    for bad in ("", "ftp://h", "http://", "http://h:99999", "http://h/a b", None, 4318):
        with pytest.raises(InvalidInput):
            check_export_url(bad)
    result = CliRunner().invoke(
        cli, ["serve", "--db", str(tmp_path / "x.db"), "--otlp-export", "collector:4318"]
    )
    assert result.exit_code == 2
    assert "OTLP export URL" in result.output and "Traceback" not in result.output


@pytest.mark.process
def test_the_stored_setting_is_used_shown_and_followed(tmp_path: Path, receiver: Receiver) -> None:
    db = active_db(tmp_path / "setting.db")
    with Service(db) as svc:
        with pytest.raises(InvalidInput):
            svc.update_settings(otlp_export="not a url")
        assert svc.update_settings(otlp_export=receiver.url).otlp_export == receiver.url
    second = Receiver()
    try:
        app = create_app(db)
        with TestClient(app, base_url="http://127.0.0.1:8000") as client:
            assert (
                client.post("/api/capture", json={"input": "q", "output": REF}).status_code == 201
            )
            assert len(receiver.wait_for(1)) == 1
            page = client.get("/settings").text
            assert receiver.url in page and 'id="otlp-export-running"' in page
            assert client.get("/api/settings").json()["otlp_export"] == receiver.url
            # changed while serving: the exporter follows at once
            patched = client.patch("/api/settings", json={"otlp_export": second.url})
            assert patched.json()["otlp_export"] == second.url
            assert (
                client.post("/api/capture", json={"input": "q", "output": REF}).status_code == 201
            )
            assert len(second.wait_for(1)) == 1
            assert client.get("/api/health").json()["otlp_export"]["url"] == second.url + "/v1/logs"
            client.patch("/api/settings", json={"otlp_export": ""})
            assert client.get("/api/health").json()["otlp_export"] is None
            assert (
                client.post("/api/capture", json={"input": "q", "output": REF}).status_code == 201
            )
            # the exporter's listener is gone (the alert watcher's stays)
            listeners = app.state.service.capture_listeners
            assert not [f for f in listeners if f.__name__ == "offer"], listeners
        assert len(receiver.records) == 1 and len(second.records) == 1
    finally:
        second.close()
    # started with --otlp-export, the server keeps that URL whatever the setting says
    pinned = create_app(db, otlp_export=receiver.url)
    with TestClient(pinned, base_url="http://127.0.0.1:8000") as client:
        client.patch("/api/settings", json={"otlp_export": second.url})
        assert client.get("/api/health").json()["otlp_export"]["url"] == receiver.url + "/v1/logs"


def test_the_settings_command_sets_and_clears_it(new_sqlite: Callable[..., str]) -> None:
    db = new_sqlite("cli.db")
    runner = CliRunner()
    bad = runner.invoke(cli, ["settings", "--db", db, "--otlp-export", "ftp://h"])
    assert bad.exit_code == 2 and "OTLP export URL" in bad.output
    good = runner.invoke(cli, ["settings", "--db", db, "--otlp-export", "http://127.0.0.1:4318"])
    assert good.exit_code == 0 and "scores out (OTLP): http://127.0.0.1:4318" in good.output
    kept = runner.invoke(cli, ["settings", "--db", db, "--retention", "30"])
    assert "http://127.0.0.1:4318" in kept.output  # left as it was
    cleared = runner.invoke(cli, ["settings", "--db", db, "--otlp-export", ""])
    assert cleared.exit_code == 0 and "scores out (OTLP): none" in cleared.output


@pytest.mark.process
def test_the_settings_page_sets_it_and_shows_a_bad_url(tmp_path: Path, receiver: Receiver) -> None:
    app = create_app(active_db(tmp_path / "page.db"))
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        page = client.get("/settings").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token and 'id="otlp-export"' in page
        form = {"csrf_token": token.group(1), "auto_evaluate": "on", "retention_days": ""}
        bad = client.post("/settings", data={**form, "otlp_export": "collector:4318"})
        assert bad.status_code == 400 and "OTLP export URL" in bad.text
        assert app.state.otlp_export is None  # nothing stored, nothing started
        good = client.post("/settings", data={**form, "otlp_export": receiver.url})
        assert good.status_code in (200, 303)
        assert app.state.service.get_settings().otlp_export == receiver.url
        assert client.post("/api/capture", json={"input": "q", "output": REF}).status_code == 201
        assert len(receiver.wait_for(1)) == 1
        assert receiver.url in client.get("/settings").text
