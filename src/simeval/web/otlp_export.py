"""Scores out: each capture's results sent as OpenTelemetry ``gen_ai.evaluation.result`` events.

``simeval serve --otlp-export URL`` (or the stored setting ``otlp_export``, which a server
follows at once when it is changed through its API or studio: ``follow_setting``) makes the server
send every result of every capture it stores (from ``/api/capture``, the batch API,
``simeval.Client``, the ``/v1`` proxy and OTLP ingest alike) to an OTLP/HTTP logs endpoint:
an OpenTelemetry Collector, or any backend that takes OTLP logs. A URL that does not end in
``/v1/logs`` is a base URL (as ``OTEL_EXPORTER_OTLP_ENDPOINT``): ``/v1/logs`` is appended.
Headers (an API key) come from ``OTEL_EXPORTER_OTLP_LOGS_HEADERS`` or
``OTEL_EXPORTER_OTLP_HEADERS`` (``key=value,key2=value2``, values URL-encoded).

One log record per result, as the GenAI semantic conventions define the event
(open-telemetry/semantic-conventions-genai, ``gen_ai-events.md``): event name
``gen_ai.evaluation.result``; attributes ``gen_ai.evaluation.name`` (the eval's name),
``gen_ai.evaluation.score.value`` (the score, a double), ``gen_ai.evaluation.score.label``
(``pass`` or ``fail``), ``gen_ai.evaluation.explanation`` (the score against the threshold and,
for a failure, the reference terms the output lacks), the evaluator's identity as proposed
for the conventions (open-telemetry/semantic-conventions-genai pull request 359):
``gen_ai.evaluation.evaluator.id`` (the eval's name) and ``gen_ai.evaluation.evaluator.version``
(its version and the scorer's fingerprint, ``3+f1a2...``), ``gen_ai.response.id`` for every
capture that has one (OTLP ingest and the proxy keep it) and ``gen_ai.conversation.id`` where
the capture has a conversation. Severity: INFO (9) for a pass, WARN (13) for a fail. Each
record is dated by its capture (``captured_at``: for a span, when it ended), observed when it
was handed to the exporter. A capture that came from a span (OTLP ingest keeps ``trace_id`` and
``span_id`` in its metadata) gives the record that trace id and span id: the event is parented
to the evaluated span, as the convention asks.

OpenInference (Arize Phoenix) carries evaluations as attributes of the evaluated span itself
(``evaluations.N.evaluation.*``), which an evaluator scoring a span already exported cannot
add, and it defines no log event of its own; its spec maps its fields to this event, and asks
that the three it has no OpenTelemetry name for be kept as extra attributes. They are:
``evaluation.annotator_kind`` (``CODE``), ``evaluation.identifier`` (the result's id,
``<capture>-<eval>``) and ``evaluation.metadata`` (JSON: eval id and version, threshold,
capture id, matched reference, scorer fingerprint).

Never on the capture's path: the service hands each stored batch of captures to ``offer``
(after the commit, one append to a bounded queue); a thread of its own builds the events,
batches them (``batch_size`` a request), and sends them with retries and exponential backoff
(429, 502, 503, 504, a refused or timed-out connection; ``Retry-After`` honoured). A receiver
that is down or hangs fills the queue (``max_queue`` captures); past that, captures' results
are dropped and counted. ``/api/health`` shows the counters (``stats``).

Encoding: OTLP protobuf (``application/x-protobuf``) with ``opentelemetry-proto`` installed
(the ``otel`` extra), else OTLP JSON (``application/json``), which every collector takes too.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import logging
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Sequence
from types import ModuleType
from typing import TypedDict

from starlette.datastructures import State

from simeval import __version__
from simeval.checks import unix_ns
from simeval.errors import InvalidInput
from simeval.keepalive import KeepAlive
from simeval.scoring.explain import missing_terms
from simeval.scoring.required import missing_required
from simeval.scoring.scorer import Scorer, get_scorer
from simeval.service import Service
from simeval.service.models import CaptureOut, CaptureResultOut
from simeval.service.settings import check_otlp_url

log = logging.getLogger("simeval.otlp_export")

EVENT_NAME = "gen_ai.evaluation.result"
LOGS_PATH = "/v1/logs"
RETRYABLE = frozenset({429, 502, 503, 504})  # the OTLP/HTTP spec's retryable statuses
# a result's severity (number, text): OpenTelemetry's INFO for a pass, WARN for a fail
SEVERITY = {True: (9, "INFO"), False: (13, "WARN")}
TOP_MISSING = 5  # reference terms an explanation names at most


def check_export_url(url: object) -> str:
    """The OTLP/HTTP logs URL of ``url`` (``/v1/logs`` appended to a base URL), else an
    ``InvalidInput`` naming the problem."""
    parts = urllib.parse.urlsplit(check_otlp_url(url))
    path = parts.path.rstrip("/")
    if not path.endswith(LOGS_PATH):
        path += LOGS_PATH
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def open_exporter(state: State, service: Service, url: str | None = None) -> None:
    """Give the app (``state``: its ``app.state``) the exporter ``url`` names (else the
    stored setting), fed by ``service``; ``state.otlp_export`` is None when neither names one.
    A ``url`` given (``serve --otlp-export``) pins it: the setting then changes nothing."""
    state.otlp_export_pinned = url is not None
    state.otlp_export = None
    try:
        chosen = url or service.get_settings().otlp_export
    except Exception as exc:  # the database unreadable now: the server still starts
        log.warning("OTLP export: the stored setting cannot be read (%s); not exporting", exc)
        chosen = None
    if chosen:
        exporter = ScoreExporter(chosen, service)
        service.on_captured(exporter.offer)
        state.otlp_export = exporter


def close_exporter(state: State, service: Service, timeout: float = 5.0) -> None:
    """Stop feeding the app's exporter and close it (what is queued: ``timeout`` s at most)."""
    exporter = getattr(state, "otlp_export", None)
    state.otlp_export = None
    if exporter is not None:
        with contextlib.suppress(ValueError):  # removed already
            service.capture_listeners.remove(exporter.offer)
        exporter.close(timeout)


def follow_setting(state: State, service: Service) -> None:
    """After the stored setting changed: start, switch or stop the app's exporter to match
    it (a server started with ``--otlp-export`` keeps that URL). Blocks up to a second or two
    while the old exporter sends what it has: call it off the event loop."""
    if getattr(state, "otlp_export_pinned", False):
        return
    url = service.get_settings().otlp_export
    current = getattr(state, "otlp_export", None)
    if (current.url if current else None) == (check_export_url(url) if url else None):
        return
    close_exporter(state, service, timeout=1.0)
    open_exporter(state, service)


def env_headers() -> dict[str, str]:
    """The headers ``OTEL_EXPORTER_OTLP_LOGS_HEADERS`` (else ``OTEL_EXPORTER_OTLP_HEADERS``)
    names, as the OpenTelemetry exporters read them."""
    raw = os.environ.get("OTEL_EXPORTER_OTLP_LOGS_HEADERS") or os.environ.get(
        "OTEL_EXPORTER_OTLP_HEADERS", ""
    )
    out = {}
    for item in raw.split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            out[urllib.parse.unquote(name.strip())] = urllib.parse.unquote(value.strip())
    return out


def _proto() -> ModuleType | None:
    """The OTLP logs messages, or None without ``opentelemetry-proto``."""
    try:
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
    except ImportError:
        return None
    return logs_service_pb2


def _hex_id(value: object, size: int) -> str | None:
    """A trace id (16 bytes) or span id (8) as lower-case hex, when ``value`` is one."""
    if not isinstance(value, str) or len(value) != size * 2:
        return None
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        return None
    return value.lower() if any(raw) else None  # all zeros: "no id" in OTLP


def span_of(capture: CaptureOut) -> tuple[str | None, str | None]:
    """(trace id, span id) in hex of the span a capture came from, else (None, None)."""
    meta = capture.metadata or {}
    trace = _hex_id(meta.get("trace_id"), 16)
    span = _hex_id(meta.get("span_id"), 8)
    if trace and span is None and meta.get("source") == "otel":
        # OTLP ingest keys a span without a response id by its span id
        span = _hex_id(capture.capture_key, 8)
    return (trace, span) if trace and span else (None, None)


class ScoreRecord(TypedDict):
    """One result's log record as plain values (``ScoreExporter._encode`` writes it)."""

    time: int  # ns
    observed: int  # ns
    severity: tuple[int, str]  # number, text
    trace_id: str | None  # hex, both ids or neither (``span_of``)
    span_id: str | None
    attrs: dict[str, str | float]


class ExportStats(TypedDict):
    """The counters ``/api/health`` shows (``ScoreExporter.stats``)."""

    url: str
    encoding: str
    sent: int
    failed: int
    dropped: int
    queued: int
    retries: int
    last_error: str | None


def response_id_of(capture: CaptureOut) -> str | None:
    """The evaluated completion's id (``gen_ai.response.id``), when the capture knows it."""
    meta = capture.metadata or {}
    for key in ("response_id", "gen_ai.response.id"):
        value = meta.get(key)
        if isinstance(value, str) and value:
            return value
    return None


class ScoreExporter:
    """Sends the results of stored captures to an OTLP/HTTP logs endpoint (see the module doc).

    ``offer`` is the service's capture listener; ``stats`` the counters ``/api/health``
    shows; ``flush`` waits until what is queued is sent (or given up); ``close`` sends what is
    left for at most ``timeout`` seconds and stops the thread.
    """

    def __init__(
        self,
        url: str,
        service: Service | None = None,
        *,
        headers: dict[str, str] | None = None,
        max_queue: int = 10_000,
        batch_size: int = 512,
        timeout: float = 10.0,
        max_retry_delay: float = 30.0,
        max_attempts: int = 8,
        encoding: str | None = None,
    ):
        self.url = check_export_url(url)
        self.service = service
        self.max_queue = max_queue
        self.batch_size = batch_size
        self.timeout = timeout
        self.max_retry_delay = max_retry_delay
        self.max_attempts = max_attempts
        self._pb = _proto() if encoding in (None, "protobuf") else None
        if encoding == "protobuf" and self._pb is None:
            raise InvalidInput(
                "OTLP protobuf needs opentelemetry-proto: pip install 'simeval[otel]'"
            )
        self.encoding = "protobuf" if self._pb is not None else "json"
        self._headers = {
            **(env_headers() if headers is None else headers),
            "Content-Type": "application/x-protobuf"
            if self.encoding == "protobuf"
            else "application/json",
            "User-Agent": f"simeval/{__version__}",
        }
        self.sent = 0  # events the receiver acknowledged
        self.failed = 0  # events given up: refused, or still failing after every retry
        self.dropped = 0  # captures whose results were not queued: the queue was full
        self.retries = 0
        self.last_error: str | None = None
        self._queue: collections.deque[tuple[CaptureOut, int]] = collections.deque()
        self._busy = 0  # captures being sent
        self._cond = threading.Condition()
        self._closing = False
        self._deadline = float("inf")
        self._http = KeepAlive(urllib.parse.urlsplit(self.url), timeout)
        self._scorers: dict[tuple[int, int], Scorer | None] = {}
        self._thread = threading.Thread(target=self._run, name="simeval-otlp-export", daemon=True)
        self._thread.start()

    # -- the capture side: O(1), never waits -----------------------------------------------------
    def offer(self, captures: Sequence[CaptureOut]) -> None:
        """Queue the newly stored, scored ``captures`` (the service's capture listener)."""
        now = time.time_ns()
        with self._cond:
            for capture in captures:
                if capture.replayed or not capture.evaluated:
                    continue  # stored before (its results went then), or not scored
                if len(self._queue) >= self.max_queue:
                    self.dropped += 1
                    continue
                self._queue.append((capture, now))
            self._cond.notify()

    def stats(self) -> ExportStats:
        """The counters ``/api/health`` shows."""
        with self._cond:
            queued = len(self._queue) + self._busy
        return {
            "url": self.url,
            "encoding": self.encoding,
            "sent": self.sent,
            "failed": self.failed,
            "dropped": self.dropped,
            "queued": queued,
            "retries": self.retries,
            "last_error": self.last_error,
        }

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued result is sent or given up; False when ``timeout`` ran out."""
        end = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued for at most ``timeout`` seconds, then stop (a request still
        waiting on a receiver that hangs is cut off: a server's shutdown never waits on it)."""
        with self._cond:
            self._closing = True
            self._deadline = time.monotonic() + timeout
            self._cond.notify_all()
        self._thread.join(timeout + 1)
        if self._thread.is_alive():
            # still waiting on a receiver that hangs: its read is woken, fails at once and
            # is not retried
            self._http.interrupt()
            self._thread.join(1)

    # -- the sending thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue or time.monotonic() > self._deadline:
                    self._busy = 0
                    self._cond.notify_all()
                    return
                # batch_size captures, one event per result: cut into requests by _deliver
                count = min(len(self._queue), self.batch_size)
                taken = [self._queue.popleft() for _ in range(count)]
                self._busy = len(taken)
            try:
                records = [r for capture, when in taken for r in self._records(capture, when)]
                if records:
                    self._deliver(records)
            except Exception:  # a bug here must not stop the exporter for good
                log.exception("OTLP export: a batch could not be built; it is skipped")
            with self._cond:
                self._busy = 0
                self._cond.notify_all()

    def _deliver(self, records: list[ScoreRecord]) -> None:
        """Send ``records`` in requests of ``batch_size``, each retried until it is taken,
        refused, or out of attempts (or of time, when closing)."""
        for start in range(0, len(records), self.batch_size):
            part = records[start : start + self.batch_size]
            body = self._encode(part)
            delay = 0.5
            for attempt in range(1, self.max_attempts + 1):
                status, detail, retry_after = self._post(body)
                if status in (200, 202):
                    self.sent += len(part)
                    self.last_error = None
                    break
                self.last_error = detail
                retryable = status == 0 or status in RETRYABLE
                wait = retry_after if retry_after is not None else delay
                wait = min(wait, self.max_retry_delay) * (0.5 + random.random() / 2)
                with self._cond:
                    out_of_time = self._closing and time.monotonic() + wait > self._deadline
                if not retryable or attempt == self.max_attempts or out_of_time:
                    self.failed += len(part)
                    log.warning("OTLP export: %d results not sent (%s)", len(part), detail)
                    break
                self.retries += 1
                with self._cond:
                    # new captures do not cut the wait short (they notify); close does, once
                    if self._closing:
                        self._cond.wait_for(lambda: False, wait)  # fits before the deadline
                    else:
                        self._cond.wait_for(lambda: self._closing, wait)
                delay = min(delay * 2, self.max_retry_delay)

    def _post(self, body: bytes) -> tuple[int, str, float | None]:
        """(status, a one-line detail, Retry-After seconds); status 0 when unreachable."""
        try:
            status, text, retry_header = self._http.post(body, self._headers, limit=4096)
        except (OSError, http.client.HTTPException) as exc:
            return 0, f"{type(exc).__name__}: {exc}", None
        if status in (200, 202):
            return status, "", None
        retry_after = None
        with contextlib.suppress(ValueError):
            retry_after = max(0.0, float(retry_header))
        shown = text[:200].decode("utf-8", "replace").strip()
        return status, f"HTTP {status}: {shown}", retry_after

    # -- the events -----------------------------------------------------------------------------
    def _records(self, capture: CaptureOut, when: int) -> list[ScoreRecord]:
        """The log records of one capture's results (plain values; ``_encode`` writes them)."""
        trace_id, span_id = span_of(capture)
        response_id = response_id_of(capture)
        at = unix_ns(capture.captured_at)
        out: list[ScoreRecord] = []
        for result in capture.results:
            label = "pass" if result.passed else "fail"
            attrs: dict[str, str | float] = {
                "gen_ai.evaluation.name": result.eval_name,
                "gen_ai.evaluation.score.value": float(result.score),
                "gen_ai.evaluation.score.label": label,
                "gen_ai.evaluation.explanation": self._explanation(capture, result),
                "gen_ai.evaluation.evaluator.id": result.eval_name,
                "gen_ai.evaluation.evaluator.version": (
                    f"{result.eval_version}+{result.fingerprint}"
                ),
            }
            if response_id:
                attrs["gen_ai.response.id"] = response_id
            if capture.conversation_id:
                attrs["gen_ai.conversation.id"] = capture.conversation_id
            # OpenInference's fields with no OpenTelemetry name (see the module doc)
            attrs["evaluation.annotator_kind"] = "CODE"
            attrs["evaluation.identifier"] = result.id
            attrs["evaluation.metadata"] = json.dumps(
                {
                    "eval_id": result.eval_id,
                    "eval_version": result.eval_version,
                    "threshold": result.threshold,
                    "capture_id": capture.id,
                    "matched_index": result.matched_index,
                    "fingerprint": result.fingerprint,
                },
                separators=(",", ":"),
            )
            out.append(
                {
                    "time": at,
                    "observed": when,
                    "severity": SEVERITY[result.passed],
                    "trace_id": trace_id,
                    "span_id": span_id,
                    "attrs": attrs,
                }
            )
        return out

    def _explanation(self, capture: CaptureOut, result: CaptureResultOut) -> str:
        """Short: the score against the threshold; for a failure, what the output lacks."""
        relation = ">=" if result.score >= result.threshold else "<"
        text = f"score {result.score:.3f} {relation} threshold {result.threshold:g}"
        if result.passed:
            return text
        scorer = self._scorer(result)
        if scorer is None:
            return text
        try:
            required = missing_required(scorer, capture.output)
            missing = missing_terms(
                scorer, capture.output, result.matched_reference, TOP_MISSING, capture.input
            )
        except Exception as exc:  # an explanation is a courtesy: the score goes out regardless
            log.debug("OTLP export: no explanation for %s: %s", result.id, exc)
            return text
        if required:
            text += "; required term missing: " + ", ".join(required)
        if missing:
            text += "; missing: " + ", ".join(missing)
        return text

    def _scorer(self, result: CaptureResultOut) -> Scorer | None:
        """The scorer of the result's eval version (read once), None when it cannot be had."""
        key = (result.eval_id, result.eval_version)
        if key not in self._scorers:
            scorer = None
            if self.service is not None:
                try:
                    versions = self.service.eval_versions(result.eval_id)
                    found = [v for v in versions if v.version == result.eval_version]
                    if found:
                        scorer = get_scorer(**found[0].options)
                except Exception as exc:  # deleted since, or its IDF table gone
                    log.debug("OTLP export: no scorer for eval %s: %s", result.eval_id, exc)
            if len(self._scorers) > 1000:
                self._scorers.clear()
            self._scorers[key] = scorer
        return self._scorers[key]

    def _encode(self, records: list[ScoreRecord]) -> bytes:
        if self._pb is not None:
            return encode_protobuf(self._pb, records)
        return encode_json(records)


def _resource() -> list[tuple[str, str]]:
    return [("service.name", "simeval")]


def encode_json(records: list[ScoreRecord]) -> bytes:
    """An OTLP/HTTP JSON ``ExportLogsServiceRequest`` of ``records`` (ids as hex, as the
    OTLP JSON encoding has them; 64-bit integers as strings)."""

    def value(v: object) -> dict[str, float | str]:
        if isinstance(v, float):
            return {"doubleValue": v}
        return {"stringValue": str(v)}

    logs = []
    for r in records:
        rec: dict[str, object] = {
            "timeUnixNano": str(r["time"]),
            "observedTimeUnixNano": str(r["observed"]),
            "severityNumber": r["severity"][0],
            "severityText": r["severity"][1],
            "eventName": EVENT_NAME,
            "attributes": [{"key": k, "value": value(v)} for k, v in r["attrs"].items()],
        }
        if r["trace_id"]:
            rec["traceId"], rec["spanId"] = r["trace_id"], r["span_id"]
        logs.append(rec)
    payload = {
        "resourceLogs": [
            {
                "resource": {
                    "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in _resource()]
                },
                "scopeLogs": [
                    {"scope": {"name": "simeval", "version": __version__}, "logRecords": logs}
                ],
            }
        ]
    }
    return json.dumps(payload, separators=(",", ":")).encode()


def encode_protobuf(pb: ModuleType, records: list[ScoreRecord]) -> bytes:
    """An OTLP/HTTP protobuf ``ExportLogsServiceRequest`` of ``records``."""
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.logs.v1 import logs_pb2

    has_event_name = "event_name" in logs_pb2.LogRecord.DESCRIPTOR.fields_by_name
    request = pb.ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    for k, v in _resource():
        resource_logs.resource.attributes.add(key=k, value=common_pb2.AnyValue(string_value=v))
    scope_logs = resource_logs.scope_logs.add()
    scope_logs.scope.name, scope_logs.scope.version = "simeval", __version__
    for r in records:
        rec = scope_logs.log_records.add(
            time_unix_nano=r["time"],
            observed_time_unix_nano=r["observed"],
            severity_number=r["severity"][0],
            severity_text=r["severity"][1],
        )
        attrs = dict(r["attrs"])
        if has_event_name:
            rec.event_name = EVENT_NAME
        else:  # opentelemetry-proto before 1.32: the event name was an attribute
            attrs = {"event.name": EVENT_NAME, **attrs}
        for key, item in attrs.items():
            any_value = (
                common_pb2.AnyValue(double_value=item)
                if isinstance(item, float)
                else common_pb2.AnyValue(string_value=str(item))
            )
            rec.attributes.add(key=key, value=any_value)
        if r["trace_id"]:
            span_id = r["span_id"]
            assert span_id is not None  # span_of gives both ids or neither
            rec.trace_id = bytes.fromhex(r["trace_id"])
            rec.span_id = bytes.fromhex(span_id)
    return bytes(request.SerializeToString())
