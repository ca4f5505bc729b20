"""The OTLP/HTTP routes: ``POST /v1/traces``, ``/v1/logs`` (captures) and ``/v1/metrics``
(answered, nothing stored), and the task that settles the log records' joins."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from simeval.checks import KeyedCapture, check_capture_key, check_texts
from simeval.errors import SimevalError
from simeval.service.adopt import SPAN_KEYS
from simeval.service.models import CaptureOut
from simeval.service.store_names import DatabaseBusyError
from simeval.web.otlp.decode import (
    Record,
    check_metrics,
    payload_media,
    records_from_json,
    records_from_protobuf,
    spans_from_json,
    spans_from_protobuf,
)
from simeval.web.otlp.genai import (
    NO_INPUT,
    Call,
    call_capture,
    genai_call,
    keep_within,
    span_call,
)
from simeval.web.otlp.join import (
    CHOICE_EVENT,
    DETAILS_EVENT,
    MAX_BYTES,
    MESSAGE_EVENTS,
    Joiner,
    body_text,
)
from simeval.web.otlp.tally import Tally

log = logging.getLogger("simeval.otlp")
router = APIRouter()
# One payload parsed at a time, whatever the event loop (a thread lock, not an anyio one):
# parsing holds the GIL for stretches, and several parses at once would take turns with the
# event loop for it. Inflating is not under it (zlib and zstd let the GIL go).
PARSING = threading.Lock()
STORE_TRIES = 5  # a joined call the database is too busy for is tried again this often
STREAM_REQUEST = "a streamed call's request span (its reply came in a span of its own)"


class Batch:
    """Captures to store: ``scored``, and ``unscored`` (those that look cut, or have no
    input text; with ``score_cut``, only the latter: ``serve --otlp-score-cut``)."""

    def __init__(self, score_cut: bool = False) -> None:
        self.score_cut = score_cut
        self.scored: list[KeyedCapture] = []
        self.unscored: list[KeyedCapture] = []

    def __bool__(self) -> bool:
        return bool(self.scored or self.unscored)

    def add(self, call: Call, unscored: list[str], tally: Tally) -> None:
        """``call`` as a capture; why it is not scored, if it is not, added to ``unscored``
        and counted."""
        capture, reason = call_capture(call)
        if reason is None or (self.score_cut and reason != NO_INPUT):
            self.scored.append(capture)  # a cut one keeps its "cut" in its metadata
            return
        self.unscored.append(capture)
        unscored.append(reason)
        tally.count("unscored", NO_INPUT if reason == NO_INPUT else "cut")


class Parsed:
    """What one payload gives: the captures to store with it (``now``), the calls its halves
    completed (``joined``, made the captures ``later``: stored in the background, never
    failing this request), why those stored unscored are (``unscored``), and why the spans
    or records refused on their own were (``rejected``: the others are kept)."""

    def __init__(self, tally: Tally, score_cut: bool = False) -> None:
        self.now = Batch(score_cut)
        self.later = Batch(score_cut)
        self.joined: list[Call] = []
        self.unscored: list[str] = []
        self.rejected: list[str] = []
        self.tally = tally

    def reject(self, kind: str, what: str, exc: SimevalError) -> None:
        """A span or record (``kind``: "spans", "log records") refused on its own: said (each
        one), counted, named in the reply."""
        reason = f"{what}: {exc}"
        log.warning("OTLP: refused %s", reason[:1000])
        self.rejected.append(reason)
        self.tally.count("rejected", kind)


def joiner_of(app: FastAPI) -> Joiner:
    """The app's table of waiting halves (made on first use), with its ``Tally``."""
    joiner = getattr(app.state, "otlp_joiner", None)
    if joiner is None:
        max_bytes = getattr(app.state, "otlp_join_bytes", MAX_BYTES)
        joiner = app.state.otlp_joiner = Joiner(max_bytes=max_bytes)
    return joiner


def parse_traces(media: str, raw: bytes, joiner: Joiner, score_cut: bool = False) -> Parsed:
    """A traces payload (``media`` "protobuf" or "json", ``raw`` its bytes, inflated) read:
    its whole spans as captures, the others handed to ``joiner``; a span that cannot be
    stored is refused on its own (``Parsed.rejected``). ``InvalidInput`` when the payload is
    malformed (then nothing of it is stored or kept). ``score_cut``: calls whose text was cut
    are scored on what was kept."""
    spans = spans_from_protobuf(raw) if media == "protobuf" else spans_from_json(raw)
    out = Parsed(joiner.tally, score_cut)
    whole, halves = [], []
    for i, span in enumerate(spans):
        try:
            call = span_call(span)
            if call is None:
                continue
            if call.output is not None:
                out.now.add(call, out.unscored, out.tally)
                whole.append(call)
            elif "logfire.msg_template" in span["attrs"]:
                # logfire's span of a streamed call's request: its reply comes in a span of its
                # own (input and output: the capture), never in log records to wait for
                out.tally.count(
                    "dropped",
                    STREAM_REQUEST,
                    "logfire sends a streamed call's request in a span of its own, then the "
                    "whole call in its 'streaming response' span: that one is captured",
                )
            else:  # checked now: its other half may come in a request of its own
                call.input = keep_within(call.input, "the input", call.cuts)
                check_texts(call.input, "")
                check_capture_key(call.span_id or None)
                check_capture_key(call.trace_id or None)
                halves.append(call)
        except SimevalError as exc:
            trace = span["trace_id"] or "none"
            out.reject("spans", f"span {i} ({span['name'][:100]!r}, trace {trace})", exc)
    for call in whole:
        joiner.settled(call)
    for call in halves:
        out.joined += joiner.add_span(call)
    return out


def _record_texts(record: Record) -> None:
    """A record's texts and ids checked as a capture's are (NUL, NaN, ...; text past the
    store's limit is cut when it is stored), before any is kept: the capture it makes may be
    stored after this request was answered."""
    event = record["event"]
    if event in (DETAILS_EVENT, CHOICE_EVENT) or event in MESSAGE_EVENTS:
        check_capture_key(record["span_id"] or None)
        check_capture_key(record["trace_id"] or None)
    if event == DETAILS_EVENT:
        call = genai_call(record["attrs"])
        check_texts(keep_within(call.input, "", []), keep_within(call.output or "", "", []))
    elif event in MESSAGE_EVENTS or event == CHOICE_EVENT:
        body = record["body"]
        if event == CHOICE_EVENT and isinstance(body, dict):
            body = body.get("message")
        check_texts(keep_within(body_text(body), "", []), "")


def parse_logs(media: str, raw: bytes, joiner: Joiner, score_cut: bool = False) -> Parsed:
    """A logs payload (as ``parse_traces`` takes it) read: its GenAI records handed to
    ``joiner``, the calls they complete returned; a record that cannot be stored is refused
    on its own. ``InvalidInput`` when the payload is malformed (then nothing of it is
    kept)."""
    records = records_from_protobuf(raw) if media == "protobuf" else records_from_json(raw)
    out = Parsed(joiner.tally, score_cut)
    for i, record in enumerate(records):
        try:
            _record_texts(record)
        except SimevalError as exc:
            trace = record["trace_id"] or "none"
            out.reject(
                "log records", f"log record {i} ({record['event'][:100]!r}, trace {trace})", exc
            )
            continue
        out.joined += joiner.add_record(record)
    return out


def _read(
    parse: Callable[[str, bytes, Joiner, bool], Parsed],
    body: bytes,
    content_type: str,
    encoding: str,
    joiner: Joiner,
    score_cut: bool,
) -> Parsed:
    """The body inflated (any number at once: no lock), then parsed one at a time."""
    media, raw = payload_media(body, content_type, encoding)
    with PARSING:
        parsed: Parsed = parse(media, raw, joiner, score_cut)
        # the joined calls made captures here too, off the event loop
        for call in parsed.joined:
            try:
                parsed.later.add(call, parsed.unscored, parsed.tally)
            except SimevalError as exc:  # its other half was accepted already: said, dropped
                log.warning("a joined GenAI call was not stored: %s", exc)
                parsed.tally.count("dropped", "not storable")
        return parsed


async def store(app: FastAPI, batch: Batch) -> None:
    """The captures of ``batch``, scored or not, each group in one transaction; a call the
    proxy stored already gets the span's conversation and ids (``adopt``)."""
    writer = app.state.writer
    for items, score in ((batch.scored, True), (batch.unscored, False)):
        if items:
            outs = await writer.capture_batch(items, score=score)
            await adopt(app, items, outs)


async def adopt(app: FastAPI, items: list[KeyedCapture], outs: list[CaptureOut]) -> None:
    """One call seen twice, its capture stored first by the proxy (or by another span of it):
    the capture takes what this span adds — its conversation id where the capture has none,
    its trace and span ids and name where it has no span's (``Service.adopt_span``), so the
    conversation is not lost. A span sent again that adds nothing writes nothing. The capture
    is stored already: a failure here is said, never the request's."""
    for item, out in zip(items, outs, strict=True):
        if not out.replayed:
            continue
        meta = item[3] or {}
        span = {k: meta[k] for k in SPAN_KEYS if k in meta}
        stored = out.metadata or {}
        talk = item[2] if out.conversation_id is None else None
        # a proxy's ids from the traceparent come without a span name: that one is missing
        if talk is None and all(k in stored for k in span):
            continue
        try:
            await anyio.to_thread.run_sync(app.state.service.adopt_span, out.id, talk, span)
        except SimevalError as exc:
            log.warning("OTLP: the span of capture %d was not added to it: %s", out.id, exc)


async def _store_later(app: FastAPI, batch: Batch) -> None:
    """Joined calls stored off the request: its answer never waits for, or fails with, a
    call whose other half came in another request. A busy database is tried again."""
    for attempt in range(STORE_TRIES):
        try:
            await store(app, batch)
            return
        except DatabaseBusyError:
            await asyncio.sleep(0.5 * (attempt + 1))
        except SimevalError as exc:
            log.warning("joined GenAI calls were not stored: %s", exc)
            return
    log.warning("joined GenAI calls were not stored: the database stayed busy")


def _background(app: FastAPI, coro: Coroutine[object, object, None]) -> None:
    tasks: set[asyncio.Task[None]] = getattr(app.state, "otlp_tasks", None) or set()
    app.state.otlp_tasks = tasks
    task = asyncio.get_running_loop().create_task(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def _sweep(app: FastAPI, joiner: Joiner) -> None:
    """Settle the halves whose wait is over, while any wait."""
    while len(joiner):
        await asyncio.sleep(max(0.05, min(1.0, joiner.wait_s / 4)))
        calls = joiner.expired()
        if calls:
            await _store_later(app, _batch(app, calls, joiner.tally))


def _score_cut(app: FastAPI) -> bool:
    """Whether calls whose text was cut are scored (``serve --otlp-score-cut``)."""
    return bool(getattr(app.state, "otlp_score_cut", False))


def _batch(app: FastAPI, calls: list[Call], tally: Tally) -> Batch:
    batch, unscored = Batch(_score_cut(app)), list[str]()
    for call in calls:
        try:
            batch.add(call, unscored, tally)
        except SimevalError as exc:  # its halves were accepted already: said, dropped
            log.warning("a GenAI call was not stored: %s", exc)
            tally.count("dropped", "not storable")
    return batch


def _watch(app: FastAPI, joiner: Joiner) -> None:
    task = getattr(app.state, "otlp_sweeper", None)
    if len(joiner) and (task is None or task.done()):
        app.state.otlp_sweeper = asyncio.get_running_loop().create_task(_sweep(app, joiner))


async def close(app: FastAPI) -> None:
    """On shutdown: the halves still waiting settled and stored, the background work done."""
    task = getattr(app.state, "otlp_sweeper", None)
    if task is not None:
        task.cancel()
    joiner = getattr(app.state, "otlp_joiner", None)
    if joiner is not None and len(joiner):
        await _store_later(app, _batch(app, joiner.drain(), joiner.tally))
    for pending in list(getattr(app.state, "otlp_tasks", None) or ()):
        await asyncio.wait([pending], timeout=10)


def _said(items: list[str], what: str) -> str:
    return f"{len(items)} {what}: {items[0]}" + (
        f" (and {len(items) - 1} more)" if len(items) > 1 else ""
    )


def _reply(content_type: str, kind: str, parsed: Parsed | None) -> Response:
    """An empty export response, or one whose partial success counts the spans or records
    refused (``rejected_*``) and names the first reason, and the calls stored unscored
    (accepted: as OTLP says, a warning has ``rejected_*`` 0)."""
    notes, rejected = [], 0
    if parsed is not None and parsed.rejected:
        rejected = len(parsed.rejected)
        notes.append(_said(parsed.rejected, "refused, the others kept"))
    if parsed is not None and parsed.unscored:
        notes.append(_said(parsed.unscored, "GenAI call(s) stored unscored"))
    message = "; ".join(notes)[:1000]
    field = {"traces": "rejectedSpans", "logs": "rejectedLogRecords"}.get(kind)
    if content_type.split(";")[0].strip().lower() == "application/json":
        if message and field:
            return JSONResponse({"partialSuccess": {field: str(rejected), "errorMessage": message}})
        return JSONResponse({})
    if kind == "traces":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse as Answer,
        )
    elif kind == "logs":
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceResponse as Answer,
        )
    else:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceResponse as Answer,
        )
    answer = Answer()
    if message:
        answer.partial_success.error_message = message
        if kind == "traces":
            answer.partial_success.rejected_spans = rejected
        elif kind == "logs":
            answer.partial_success.rejected_log_records = rejected
    return Response(answer.SerializeToString(), media_type="application/x-protobuf")


async def _ingest(request: Request, kind: str) -> Response:
    app = request.app
    body = await request.body()
    content_type = request.headers.get("content-type", "")
    encoding = request.headers.get("content-encoding", "")
    joiner = joiner_of(app)
    parse = parse_traces if kind == "traces" else parse_logs
    try:
        # inflating and parsing 64 MB takes a while: on a worker thread, not the event loop
        parsed = await anyio.to_thread.run_sync(
            _read, parse, body, content_type, encoding, joiner, _score_cut(app)
        )
        await store(app, parsed.now)
    except SimevalError as exc:
        # busy or down: an exporter retries a 503, after Retry-After (OTLP/HTTP's rule)
        retry = max(1, round(app.state.writer.lock_wait))
        headers = {"Retry-After": str(retry)} if exc.status_code == 503 else None
        return JSONResponse({"error": str(exc)}, status_code=exc.status_code, headers=headers)
    finally:
        _watch(app, joiner)
    if parsed.later:
        _background(app, _store_later(app, parsed.later))
    return _reply(content_type, kind, parsed)


_BODY = {
    "content": {
        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
        "application/json": {"schema": {"type": "object"}},
    },
    "required": True,
}


def _responses(what: str) -> dict[int | str, dict[str, Any]]:
    return {
        200: {
            "description": f"Accepted (an Export{what}ServiceResponse; its partial success "
            "counts the spans or records refused on their own, the others kept, and names "
            "the GenAI calls stored unscored)",
            "content": {"application/x-protobuf": {}, "application/json": {}},
        },
        400: {"description": "A malformed payload: nothing stored"},
        413: {
            "description": "A body (or its gzip or zstd inflated) over the limit, or more "
            "than 1,000 gzip members or zstd frames: nothing stored"
        },
        415: {"description": "Neither protobuf nor JSON, or neither gzip nor zstd"},
        422: {"description": "Text the store cannot hold (a NUL, NaN, nested too deep)"},
        503: {"description": "The database is busy or down: nothing stored, try again"},
    }


@router.post(
    "/v1/traces",
    tags=["captures"],
    openapi_extra={"requestBody": _BODY},
    responses=_responses("Trace"),
)
async def traces(request: Request) -> Response:
    """OTLP/HTTP traces: spans of model calls become captures, one per call (keyed by the
    response id, else the span id); a span whose content comes in log records waits for them.

    Point an OpenTelemetry exporter at it, e.g.
    ``OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:8000`` (traces, logs and metrics).
    """
    return await _ingest(request, "traces")


@router.post(
    "/v1/logs",
    tags=["captures"],
    openapi_extra={"requestBody": _BODY},
    responses=_responses("Logs"),
)
async def logs(request: Request) -> Response:
    """OTLP/HTTP logs: the GenAI message events (``gen_ai.user.message``, ``gen_ai.choice``
    …) and ``gen_ai.client.inference.operation.details`` records, joined to their span by
    trace and span id, become captures."""
    return await _ingest(request, "logs")


@router.post(
    "/v1/metrics",
    tags=["captures"],
    openapi_extra={"requestBody": _BODY},
    responses={
        200: {
            "description": "Accepted, nothing stored (an empty ExportMetricsServiceResponse)",
            "content": {"application/x-protobuf": {}, "application/json": {}},
        },
        400: {"description": "A malformed payload"},
        413: {"description": "A body over the limit"},
        415: {"description": "Neither protobuf nor JSON"},
    },
)
async def metrics(request: Request) -> Response:
    """OTLP/HTTP metrics: read, answered, nothing stored (so that an exporter given one
    endpoint for all its signals logs no errors); a malformed payload is still refused."""
    content_type = request.headers.get("content-type", "")
    try:
        await anyio.to_thread.run_sync(
            check_metrics,
            await request.body(),
            content_type,
            request.headers.get("content-encoding", ""),
        )
    except SimevalError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status_code)
    return _reply(content_type, "metrics", None)
