"""Real instrumentations against a real ``simeval serve``: each mode's calls captured once,
with the right input, output, model and conversation id.

The instrumentations (``opentelemetry-instrumentation-openai-v2`` in its default mode,
``span_only`` and ``event_only``; ``openinference-instrumentation-openai``) run in their own
process (tests/instrumented_calls.py: they patch ``openai`` for the whole process) and send
with the OpenTelemetry SDK's own OTLP/HTTP exporters (traces, logs and metrics); the calls
go to a local OpenAI-compatible server (tests/openai_upstream.py), directly or through
``simeval serve --upstream`` (the proxy), and the proxy and the instrumentation then see
the same call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.otlp_receiver import Receiver
from tests.servers import Proc, wait_captures

from simeval.service import Service
from simeval.web.server_process import running_server

pytest.importorskip("opentelemetry.instrumentation.openai_v2")
pytest.importorskip("openinference.instrumentation.openai")
pytest.importorskip("opentelemetry.instrumentation.openai")
pytest.importorskip("logfire")

TESTS = Path(__file__).parents[1]
FRANCE = "Paris is the capital of France and its largest city."
JAPAN = "Tokyo is the capital of Japan."
LATEST = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
# the settings each mode needs (the table in docs/capture.md says the same)
MODES: dict[str, tuple[str, dict[str, str]]] = {
    # v1.30 conventions: the content in log records, joined to the span
    "openai-v2 default": (
        "openai-v2",
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    ),
    "openai-v2 span_only": (
        "openai-v2",
        {**LATEST, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
    ),
    "openai-v2 event_only": (
        "openai-v2",
        {**LATEST, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"},
    ),
    "openinference": ("openinference", {}),
    # its default: no content captured; records are still sent, with no body (a message) or
    # only a role (a choice)
    "openai-v2 content off": ("openai-v2", {}),
    # Traceloop's OpenLLMetry: content in span attributes (its default), or in log records
    "openllmetry": ("openllmetry", {}),
    "openllmetry events": ("openllmetry-events", {}),
    "logfire": ("logfire", {}),
}


# the two calls most tests make: one plain, one streamed
QUESTIONS = [
    "--question",
    "What is the capital of France?",
    "--stream-question",
    "And the capital of Japan?",
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    proc = Proc([sys.executable, str(TESTS / "openai_upstream.py")], r"upstream: (\S+)")
    try:
        yield proc.url
    finally:
        proc.stop()


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "instrumented.db"
    svc = Service(db)
    svc.create_eval("capital", FRANCE)
    svc.test_eval("capital", "Capital?", FRANCE)
    svc.activate_eval("capital")
    svc.close()
    return db


def instrumented(
    mode: str, upstream: str, otlp: str, *args: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """tests/instrumented_calls.py run once; its JSON line."""
    kind, settings = MODES[mode]
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "SIMEVAL_")) and k != "OPENAI_API_KEY"
    }
    out = subprocess.run(
        [
            sys.executable,
            str(TESTS / "instrumented_calls.py"),
            kind,
            "--upstream",
            upstream,
            "--otlp",
            otlp,
            *args,
        ],
        env={**clean, **settings, **(env or {}), "PYTHONPATH": str(TESTS.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def the_two(caps: dict[str, dict[str, Any]], found: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The captures of ``QUESTIONS``' two calls (``by_input``): France's, Japan's."""
    assert sorted(caps) == ["And the capital of Japan?", "What is the capital of France?"], found
    return caps["What is the capital of France?"], caps["And the capital of Japan?"]


def by_input(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for cap in found:
        assert cap["input"] not in out, f"stored twice: {cap['input']!r}"
        out[cap["input"]] = cap
    return out


@pytest.mark.process
@pytest.mark.parametrize(
    "mode", [m for m in MODES if m not in ("openai-v2 content off", "logfire")]
)
def test_each_call_captured_once(mode: str, upstream: str, tmp_path: Path) -> None:
    questions = QUESTIONS
    session = ["--session", "conv-42"] if mode == "openinference" else []
    orders = ["spans-first", "logs-first"] if mode == "openai-v2 default" else ["spans-first"]
    with running_server(_db(tmp_path)) as (url, _proc):
        ids: list[str] = []
        for order in orders:  # the second run sends the same calls again: stored once
            result = instrumented(mode, upstream, url, *questions, *session, "--order", order)
            assert all(r == "SUCCESS" for rs in result["exports"].values() for r in rs), result
            assert result["exports"]["traces"] and result["exports"]["metrics"]
            ids = result["ids"]
        time.sleep(0.3)  # a second capture of either call would be stored by now
        caps = by_input(wait_captures(url, 2))
    assert sorted(caps) == ["And the capital of Japan?", "What is the capital of France?"]
    france, japan = caps["What is the capital of France?"], caps["And the capital of Japan?"]
    assert (france["output"], japan["output"]) == (FRANCE, JAPAN)
    # one key per model call: the response id, the key the proxy gives the same reply
    assert [france["capture_key"], japan["capture_key"]] == ids
    for cap in (france, japan):
        meta = cap["metadata"]
        assert meta["model"] == "gpt-test" and meta["finish_reason"] == "stop", meta
        assert (meta["input_tokens"], meta["output_tokens"]) == (9, len(cap["output"].split()))
        assert cap["conversation_id"] == ("conv-42" if mode == "openinference" else None)
        assert "cut" not in meta and cap["evaluated"]
    assert france["results"][0]["passed"] and not japan["results"][0]["passed"]
    # the span's times, joined to the records' content where they came apart
    assert france["metadata"]["latency_ms"] >= 0 and japan["metadata"]["latency_ms"] >= 0


@pytest.mark.process
def test_a_call_seen_by_the_proxy_and_an_instrumentation_is_stored_once(
    upstream: str, tmp_path: Path
) -> None:
    with running_server(_db(tmp_path), "--upstream", upstream) as (url, _proc):
        for mode in ("openai-v2 span_only", "openai-v2 default", "openinference"):
            result = instrumented(
                mode,
                url + "/v1",  # the calls go through the proxy, the spans to the same server
                url,
                "--question",
                f"Capital of France? ({mode})",
                "--stream-question",
                f"And the capital of Japan? ({mode})",
            )
            # the server took the spans (and records) of both calls, keyed as the proxy did
            assert result["exports"]["traces"] == ["SUCCESS"], result
        time.sleep(0.5)
        found = wait_captures(url, 6)
    assert len(found) == 6, [(c["input"], c["capture_key"]) for c in found]
    keys = [c["capture_key"] for c in found]
    assert len(set(keys)) == 6 and all(k.startswith("chatcmpl-") for k in keys)


@pytest.mark.process
def test_a_value_cut_by_the_sdk_length_limit_is_stored_unscored(
    upstream: str, tmp_path: Path
) -> None:
    """``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` cuts ``gen_ai.output.messages`` mid-JSON: the
    capture is kept (with why) and not scored, where it used to pass an eval as raw JSON."""
    with running_server(_db(tmp_path)) as (url, _proc):
        result = instrumented(
            "openai-v2 span_only",
            upstream,
            url,
            "--question",
            "What is the capital of France?",
            env={"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "100"},
        )
        (cap,) = wait_captures(url, 1)
    assert result["exports"]["traces"] == ["SUCCESS"]
    assert cap["capture_key"] == result["ids"][0] and cap["metadata"]["model"] == "gpt-test"
    assert "gen_ai.output.messages is not whole JSON (100 characters)" in cap["metadata"]["cut"]
    assert cap["output"].startswith('[{"role":"assistant"') and len(cap["output"]) == 100
    assert not cap["evaluated"] and cap["results"] == []


@pytest.mark.process
def test_calls_without_content_are_counted_never_scored(upstream: str, tmp_path: Path) -> None:
    """openai-v2 in its default mode sends its spans and records without content: no capture
    is stored (so no fail is scored, nor exported onto the caller's spans); the drops are
    counted on /api/health, by reason."""
    with running_server(_db(tmp_path)) as (url, _proc):
        result = instrumented(
            "openai-v2 content off",
            upstream,
            url,
            *QUESTIONS,
        )
        assert result["exports"]["traces"] == ["SUCCESS"] and result["exports"]["logs"], result
        assert all(r == "SUCCESS" for rs in result["exports"].values() for r in rs), result
        otlp: dict[str, Any] = {}
        for _ in range(100):  # the calls are dropped as their halves meet
            otlp = httpx.get(url + "/api/health").json().get("otlp") or {}
            if otlp.get("dropped", {}).get("no message content") == 2:
                break
            time.sleep(0.1)
        assert otlp["dropped"] == {"no message content": 2}, otlp
        assert otlp["dropped_without_content"] == 2 and otlp["waiting"] == 0
        assert otlp["rejected"] == {} and otlp["unscored"] == {}
        assert httpx.get(url + "/api/captures").json()["captures"] == []


@pytest.mark.process
@pytest.mark.parametrize("mode", ["openllmetry", "openllmetry events"])
def test_openllmetry_calls_captured_once(mode: str, upstream: str, tmp_path: Path) -> None:
    """OpenLLMetry in both modes: a plain and a streamed call, each captured once, with its
    output. In events mode the stream's ``gen_ai.choice`` record comes with a zero span id;
    it joins the one span whose time it falls within, whichever arrives first (the second
    run sends the same calls again, its logs first: stored once)."""
    orders = ["spans-first", "logs-first"] if mode == "openllmetry events" else ["spans-first"]
    with running_server(_db(tmp_path)) as (url, _proc):
        for order in orders:
            result = instrumented(
                mode,
                upstream,
                url,
                *QUESTIONS,
                "--order",
                order,
            )
            assert all(r == "SUCCESS" for rs in result["exports"].values() for r in rs), result
        found = wait_captures(url, 2)
        time.sleep(0.3)  # a second capture of either call would be stored by now
        found = wait_captures(url, 2)
        otlp = httpx.get(url + "/api/health").json().get("otlp") or {}
    caps = by_input(found)
    france, japan = the_two(caps, found)
    assert (france["output"], japan["output"]) == (FRANCE, JAPAN)
    assert france["results"][0]["passed"] and not japan["results"][0]["passed"]
    assert {c["capture_key"] for c in found} == set(result["ids"])
    assert not otlp.get("dropped") and not otlp.get("rejected"), otlp


@pytest.mark.process
def test_logfire_calls_captured_once(upstream: str, tmp_path: Path) -> None:
    """logfire: the plain call's span and the streamed call's "streaming response" span are
    captured, named by their rendered message; the streamed call's request-only span waits for
    nothing and is counted."""
    with running_server(_db(tmp_path)) as (url, _proc):
        result = instrumented(
            "logfire",
            upstream,
            url,
            *QUESTIONS,
        )
        assert result["exports"]["traces"] and all(
            r == "SUCCESS" for r in result["exports"]["traces"]
        ), result
        found = wait_captures(url, 2)
        otlp = httpx.get(url + "/api/health").json().get("otlp") or {}
    caps = by_input(found)
    france, japan = the_two(caps, found)
    assert (france["output"], japan["output"]) == (FRANCE, JAPAN)
    assert {c["capture_key"] for c in found} == set(result["ids"])
    assert france["metadata"]["span_name"] == "Chat Completion with 'gpt-test'"
    assert japan["metadata"]["span_name"].startswith("streaming response from 'gpt-test' took")
    assert otlp["waiting"] == 0, otlp
    assert otlp["dropped"] == {
        "a streamed call's request span (its reply came in a span of its own)": 1
    }, otlp


@pytest.mark.process
def test_a_call_through_the_proxy_keeps_its_spans_conversation(
    upstream: str, tmp_path: Path
) -> None:
    """The proxy stores the call first (its exact text); the span of the same call (the same
    response id) then adds what the proxy could not know: the conversation (OpenInference's
    session) and the trace and span ids, so the conversation and the exported scores find it."""
    with running_server(_db(tmp_path), "--upstream", upstream) as (url, _proc):
        result = instrumented(
            "openinference",
            url + "/v1",
            url,
            "--session",
            "conv-proxied",
            *QUESTIONS,
        )
        assert result["exports"]["traces"] == ["SUCCESS"], result
        found: list[dict[str, Any]] = []
        for _ in range(100):  # the span's part is added just after its request
            found = wait_captures(url, 2)
            if all(c["conversation_id"] for c in found):
                break
            time.sleep(0.1)
        talks = httpx.get(url + "/api/conversations").json()
    assert len(found) == 2 and {c["capture_key"] for c in found} == set(result["ids"])
    for cap in found:  # whichever copy came first
        meta = cap["metadata"]
        assert cap["conversation_id"] == "conv-proxied", cap
        assert len(meta["trace_id"]) == 32 and len(meta["span_id"]) == 16, meta
    # the plain call's reply reaches the proxy's store long before its span is exported
    (plain,) = [c for c in found if c["input"] == "What is the capital of France?"]
    assert plain["metadata"]["source"] == "proxy"
    assert plain["metadata"]["response_id"] == plain["capture_key"]
    (talk,) = [t for t in talks["conversations"] if t["id"] == "conv-proxied"]
    assert talk["turns"] == 2, talk


@pytest.mark.process
@pytest.mark.parametrize("order", ["spans-first", "logs-first"])
def test_records_without_a_span_id_join_the_call_of_their_trace(
    order: str, upstream: str, tmp_path: Path
) -> None:
    """openai-v2 (content in log records) with each record's span id cleared before export,
    its trace id kept (a log processor does it: no pinned instrumentation sends this shape on
    its own), both calls inside one parent span: each record joins the call of its trace
    whose time it falls within, whichever arrives first; none is dropped."""
    with running_server(_db(tmp_path)) as (url, _proc):
        result = instrumented(
            "openai-v2 default",
            upstream,
            url,
            *QUESTIONS,
            "--one-trace",
            "--records-without-span",
            "--order",
            order,
        )
        assert all(r == "SUCCESS" for rs in result["exports"].values() for r in rs), result
        found = wait_captures(url, 2)
        otlp = httpx.get(url + "/api/health").json().get("otlp") or {}
    france, japan = the_two(by_input(found), found)
    assert (france["output"], japan["output"]) == (FRANCE, JAPAN)
    assert [france["capture_key"], japan["capture_key"]] == result["ids"]
    assert france["metadata"]["trace_id"] == japan["metadata"]["trace_id"]
    assert france["metadata"]["span_id"] != japan["metadata"]["span_id"]
    assert france["results"][0]["passed"] and not japan["results"][0]["passed"]
    assert not otlp.get("dropped") and otlp["waiting"] == 0, otlp


@pytest.mark.process
def test_a_call_whose_span_came_first_takes_the_proxys_exact_text(
    upstream: str, tmp_path: Path
) -> None:
    """The span is stored first, the proxy's copy of the same call second (the same response
    id: the local upstream answers a request the same way, id included). Here the span's copy
    was cut by the SDK's length limit (stored unscored); the one capture of each call then
    holds the proxy's exact text, scored, its metadata merged, the first span's trace and
    span ids, and the conversation a span of the call named (OpenInference's session)."""
    with running_server(_db(tmp_path), "--upstream", upstream) as (url, _proc):
        first = instrumented(
            "openai-v2 span_only",
            upstream,  # directly: only the spans reach the server
            url,
            *QUESTIONS,
            env={"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "40"},
        )
        spans = {c["capture_key"]: c for c in wait_captures(url, 2)}
        assert sorted(spans) == sorted(first["ids"]), spans
        assert all("cut" in c["metadata"] and not c["evaluated"] for c in spans.values())
        second = instrumented(
            "openinference", url + "/v1", url, *QUESTIONS, "--session", "conv-merged"
        )
        assert second["ids"] == first["ids"]  # the same calls, as the proxy sees them
        found: list[dict[str, Any]] = []
        for _ in range(200):  # the proxy's copies are merged just after they are queued
            found = wait_captures(url, 2)
            if all(c["metadata"]["source"] == "proxy" and c["conversation_id"] for c in found):
                break
            time.sleep(0.1)
    france, japan = the_two(by_input(found), found)
    assert (france["output"], japan["output"]) == (FRANCE, JAPAN)
    for cap in (france, japan):
        meta, span = cap["metadata"], spans[cap["capture_key"]]["metadata"]
        assert cap["conversation_id"] == "conv-merged" and cap["evaluated"], cap
        assert (meta["trace_id"], meta["span_id"]) == (span["trace_id"], span["span_id"])
        assert meta["source"] == "proxy" and meta["endpoint"] == "/v1/chat/completions", meta
        assert meta["span_name"] == span["span_name"] and "cut" not in meta, meta
    assert france["results"][0]["passed"] and not japan["results"][0]["passed"]


@pytest.mark.process
def test_a_proxied_calls_scores_go_out_once_on_its_callers_span(
    upstream: str, tmp_path: Path
) -> None:
    """OpenLLMetry sends the W3C ``traceparent`` of its GenAI span with the request: the
    proxy's capture, stored before the span arrives, has the trace and span ids at once, so
    its exported score is parented to that span; the span, adopted later, changes nothing of
    it and no second event goes out."""
    receiver = Receiver()
    try:
        with running_server(
            _db(tmp_path), "--upstream", upstream, "--otlp-export", receiver.url
        ) as (url, _proc):
            result = instrumented(
                "openllmetry", url + "/v1", url, *QUESTIONS, "--flush-after-captures", "2"
            )
            assert result["exports"]["traces"] == ["SUCCESS"], result
            found: list[dict[str, Any]] = []
            for _ in range(200):  # the spans' names are added just after their request
                found = wait_captures(url, 2)
                if all("span_name" in c["metadata"] for c in found):
                    break
                time.sleep(0.1)
            records = receiver.wait_for(2)
            time.sleep(1.0)  # a second event for either result would have been sent by now
            health = httpx.get(url + "/api/health").json()
    finally:
        receiver.close()
    assert len(found) == 2 and all(c["metadata"]["source"] == "proxy" for c in found), found
    assert len(receiver.records) == 2, receiver.records
    by_result = {r["attrs"]["evaluation.identifier"]: r for r in records}
    for cap in found:
        meta = cap["metadata"]
        assert meta["span_name"] == "openai.chat", meta
        event = by_result[cap["results"][0]["id"]]
        assert (event["trace_id"], event["span_id"]) == (meta["trace_id"], meta["span_id"])
        assert event["attrs"]["gen_ai.response.id"] == cap["capture_key"]
    assert health["otlp_export"]["sent"] == 2, health
