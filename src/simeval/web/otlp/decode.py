"""OTLP/HTTP payloads read into plain dicts: spans (``ExportTraceServiceRequest``) and log
records (``ExportLogsServiceRequest``), from protobuf or JSON, gzip, zstd or neither.

Every bound is checked here, before anything is stored: attribute values nested more than
``MAX_JSON_DEPTH`` levels, times outside 0 to 2^64-1 nanoseconds, the wrong shape
(``"spans": 5``) are ``InvalidInput`` (400); a gzip or zstd body (every member of it) that inflates
past ``MAX_INFLATED`` is 413; neither protobuf nor JSON is 415. Protobuf is read with the
OpenTelemetry project's own message definitions (``opentelemetry-proto``, the ``otel``
extra); JSON needs nothing more.
"""

from __future__ import annotations

import base64
import json
from typing import Any, TypedDict

from simeval.checks import MAX_JSON_DEPTH
from simeval.codings import inflate
from simeval.errors import InvalidInput, SimevalError
from simeval.jsontypes import JSONObject, JSONValue

MAX_INFLATED = 64 * 1024 * 1024  # a gzip or zstd body may inflate to this much at most
MAX_NANOS = 2**64 - 1  # OTLP times are fixed64 nanoseconds since 1970


class Span(TypedDict):
    """A span as read: its ids (hex), name, times (ns), attributes and events."""

    span_id: str
    trace_id: str
    name: str
    start: int
    end: int
    attrs: JSONObject
    events: list[tuple[str, JSONObject]]  # (name, attributes)


class Record(TypedDict):
    """A log record as read: its ids (hex, "" when none), event name, time (ns), attributes
    and body."""

    trace_id: str
    span_id: str
    event: str
    time: int
    attrs: JSONObject
    body: JSONValue


class UnsupportedMedia(SimevalError):
    status_code = 415


def payload_media(body: bytes, content_type: str, content_encoding: str) -> tuple[str, bytes]:
    """``("protobuf" | "json", the body inflated)``; 415 for another type or encoding. A gzip
    or zstd body is read in time linear in it, at most ``MAX_INFLATED`` bytes and
    ``simeval.codings.MAX_MEMBERS`` members of it (413 past either)."""
    encoding = content_encoding.strip().lower()
    if encoding not in ("", "identity", "gzip", "zstd"):
        raise UnsupportedMedia(
            f"unsupported Content-Encoding {content_encoding!r} (use gzip or zstd)"
        )
    if encoding in ("gzip", "zstd"):
        body = inflate(body, encoding, MAX_INFLATED, f"the {encoding} body")
    media = content_type.split(";")[0].strip().lower()
    if media in ("application/x-protobuf", "application/protobuf"):
        return "protobuf", body
    if media == "application/json":
        return "json", body
    raise UnsupportedMedia(
        f"unsupported Content-Type {media or 'none'!r}: send application/x-protobuf "
        "or application/json"
    )


# -- protobuf ------------------------------------------------------------------------------
def _too_deep() -> InvalidInput:
    return InvalidInput(f"an attribute value is nested more than {MAX_JSON_DEPTH} levels deep")


def _pb_value(v: Any, depth: int = 0) -> JSONValue:
    if depth > MAX_JSON_DEPTH:
        raise _too_deep()
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_pb_value(x, depth + 1) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value, depth + 1) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def _pb_parse(message: Any, body: bytes) -> None:
    from google.protobuf.message import DecodeError

    try:
        message.ParseFromString(body)
    except (DecodeError, ValueError) as exc:
        raise InvalidInput(f"malformed OTLP protobuf payload: {exc}") from None


def _no_protobuf() -> UnsupportedMedia:
    return UnsupportedMedia(
        "OTLP protobuf needs the otel extra (pip install 'simeval[otel]'); "
        "or send OTLP JSON (Content-Type: application/json)"
    )


def spans_from_protobuf(body: bytes) -> list[Span]:
    """The spans of an ``ExportTraceServiceRequest`` in protobuf."""
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:  # pragma: no cover - the otel extra is missing
        raise _no_protobuf() from None
    message = ExportTraceServiceRequest()
    _pb_parse(message, body)
    spans: list[Span] = []
    try:
        for rs in message.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    spans.append(
                        {
                            "span_id": span.span_id.hex(),
                            "trace_id": span.trace_id.hex(),
                            "name": span.name,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "attrs": _pb_attributes(span.attributes),
                            "events": [(e.name, _pb_attributes(e.attributes)) for e in span.events],
                        }
                    )
    except InvalidInput as exc:
        raise InvalidInput(f"malformed OTLP protobuf payload: {exc}") from None
    return spans


def records_from_protobuf(body: bytes) -> list[Record]:
    """The log records of an ``ExportLogsServiceRequest`` in protobuf."""
    try:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
        )
    except ImportError:  # pragma: no cover - the otel extra is missing
        raise _no_protobuf() from None
    message = ExportLogsServiceRequest()
    _pb_parse(message, body)
    records: list[Record] = []
    try:
        for rl in message.resource_logs:
            for sl in rl.scope_logs:
                for rec in sl.log_records:
                    attrs = _pb_attributes(rec.attributes)
                    records.append(
                        {
                            "trace_id": rec.trace_id.hex(),
                            "span_id": rec.span_id.hex(),
                            "event": rec.event_name or str(attrs.get("event.name") or ""),
                            "time": rec.time_unix_nano or rec.observed_time_unix_nano,
                            "attrs": attrs,
                            "body": _pb_value(rec.body) if rec.HasField("body") else None,
                        }
                    )
    except InvalidInput as exc:
        raise InvalidInput(f"malformed OTLP protobuf payload: {exc}") from None
    return records


def _pb_attributes(attributes: Any) -> JSONObject:
    return {kv.key: _pb_value(kv.value) for kv in attributes}


# -- JSON ----------------------------------------------------------------------------------
def _json_value(v: object, depth: int = 0) -> JSONValue:
    if depth > MAX_JSON_DEPTH:
        raise _too_deep()
    if not isinstance(v, dict):
        raise InvalidInput(f"malformed OTLP JSON: an attribute value is {type(v).__name__}")
    for kind, val in v.items():
        if kind == "stringValue":
            return str(val)
        if kind == "boolValue":
            return bool(val)
        if kind == "intValue":
            return int(val)
        if kind == "doubleValue":
            return float(val)
        if kind == "arrayValue":
            values = _list(_obj(val).get("values"))
            return [_json_value(x, depth + 1) for x in values]
        if kind == "kvlistValue":
            return _attributes(_obj(val).get("values"), depth + 1)
        if kind == "bytesValue":
            return base64.b64decode(val).hex()
    return None


def _obj(value: object) -> JSONObject:
    """``value``, checked to be a JSON object."""
    if not isinstance(value, dict):
        raise InvalidInput(f"malformed OTLP JSON: expected an object, got {type(value).__name__}")
    return value


def _list(value: object) -> list[JSONValue]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(f"malformed OTLP JSON: expected a list, got {type(value).__name__}")
    return value


def _attributes(values: object, depth: int = 0) -> JSONObject:
    out: JSONObject = {}
    for item in _list(values):
        kv = _obj(item)
        key = kv.get("key")
        if not isinstance(key, str):
            raise InvalidInput("malformed OTLP JSON: an attribute without a key")
        out[key] = _json_value(kv.get("value", {}), depth)
    return out


def _nanos(value: object, what: str) -> int:
    """An OTLP time: nanoseconds since 1970 in [0, 2^64-1] (JSON gives them as text or a
    number); 0 or absent means none."""
    if isinstance(value, bool) or not isinstance(value, int | str | float | type(None)):
        raise InvalidInput(f"{what} must be a number of nanoseconds, not {type(value).__name__}")
    nanos = int(value or 0)
    if not 0 <= nanos <= MAX_NANOS:
        shown = str(nanos) if len(str(nanos)) <= 30 else f"{nanos:.3e}"
        raise InvalidInput(f"{what} {shown} is not a time (0 to 2^64-1 nanoseconds since 1970)")
    return nanos


def _pairs(pairs: list[tuple[str, JSONValue]]) -> JSONObject:
    return dict(pairs)


def _load(body: bytes) -> JSONObject:
    try:
        # A Python hook per object: the parser then lets other threads run (the event loop
        # answering requests) between objects, instead of holding the GIL for a whole
        # 64 MB payload. Nesting too deep is still the parser's RecursionError.
        doc = json.loads(body, object_pairs_hook=_pairs)
    except RecursionError:
        raise InvalidInput("malformed OTLP JSON payload: nested too deep to read") from None
    except ValueError as exc:  # not JSON, not UTF-8, a number of 5,000 digits
        raise InvalidInput(f"malformed OTLP JSON payload: {exc}") from None
    return _obj(doc)


def _walk(doc: JSONObject, outer: str, middle: str, inner: str) -> list[JSONObject]:
    """The objects at ``doc[outer][*][middle][*][inner][*]``, each checked to be one."""
    found = []
    for a in _list(doc.get(outer)):
        for b in _list(_obj(a).get(middle)):
            for c in _list(_obj(b).get(inner)):
                found.append(_obj(c))
    return found


def _hex(value: object) -> str:
    return str(value or "").lower()


def spans_from_json(body: bytes) -> list[Span]:
    """The spans of an ``ExportTraceServiceRequest`` in OTLP JSON (hex ids, camelCase)."""
    doc = _load(body)
    spans: list[Span] = []
    try:
        for span in _walk(doc, "resourceSpans", "scopeSpans", "spans"):
            events = []
            for item in _list(span.get("events")):
                e = _obj(item)
                events.append((str(e.get("name") or ""), _attributes(e.get("attributes"))))
            spans.append(
                {
                    "span_id": _hex(span.get("spanId")),
                    "trace_id": _hex(span.get("traceId")),
                    "name": str(span.get("name") or ""),
                    "start": _nanos(span.get("startTimeUnixNano"), "startTimeUnixNano"),
                    "end": _nanos(span.get("endTimeUnixNano"), "endTimeUnixNano"),
                    "attrs": _attributes(span.get("attributes")),
                    "events": events,
                }
            )
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(f"malformed OTLP JSON payload: {exc}") from None
    return spans


def records_from_json(body: bytes) -> list[Record]:
    """The log records of an ``ExportLogsServiceRequest`` in OTLP JSON."""
    doc = _load(body)
    records: list[Record] = []
    try:
        for rec in _walk(doc, "resourceLogs", "scopeLogs", "logRecords"):
            attrs = _attributes(rec.get("attributes"))
            when = _nanos(rec.get("timeUnixNano"), "timeUnixNano") or _nanos(
                rec.get("observedTimeUnixNano"), "observedTimeUnixNano"
            )
            body_value = rec.get("body")
            records.append(
                {
                    "trace_id": _hex(rec.get("traceId")),
                    "span_id": _hex(rec.get("spanId")),
                    "event": str(rec.get("eventName") or attrs.get("event.name") or ""),
                    "time": when,
                    "attrs": attrs,
                    "body": None if body_value is None else _json_value(body_value),
                }
            )
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(f"malformed OTLP JSON payload: {exc}") from None
    return records


def check_metrics(body: bytes, content_type: str, content_encoding: str) -> None:
    """Read an OTLP metrics payload only to refuse a malformed one (nothing of it is kept):
    ``InvalidInput`` when it is not an ``ExportMetricsServiceRequest``, 415 for another type."""
    media, raw = payload_media(body, content_type, content_encoding)
    if media == "json":
        _load(raw)
        return
    try:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )
    except ImportError:  # pragma: no cover - the otel extra is missing
        raise _no_protobuf() from None
    _pb_parse(ExportMetricsServiceRequest(), raw)
