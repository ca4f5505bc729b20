"""OpenTelemetry traces as captures: ``POST /v1/traces`` (OTLP/HTTP, protobuf or JSON).

A span carrying GenAI attributes becomes a capture, whatever instrumentation emitted it:

- the current semantic conventions: ``gen_ai.input.messages`` / ``gen_ai.output.messages``
  (messages with ``parts``, as JSON text or as structured attribute values),
  ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.*``,
  ``gen_ai.conversation.id``, ``gen_ai.response.finish_reasons``;
- the older indexed ones still emitted by common instrumentations (OpenLLMetry, OpenLIT):
  ``gen_ai.prompt.N.role`` / ``gen_ai.prompt.N.content`` and ``gen_ai.completion.N.content``.

Input = the last user message's text, output = the first output message's text; the span id
(hex) is the capture key, so a batch the exporter sends again is stored once; the capture is
dated when the span ended. Spans without GenAI attributes, or without output text, are
accepted and ignored. A payload that cannot be parsed gets 400 and nothing of it is stored:
not protobuf or JSON, the wrong shape (``"parts": 5``), attribute values nested more than
``MAX_JSON_DEPTH`` levels, a time outside 0 to 2^64-1 nanoseconds; a gzip body (every member
of it) that inflates past ``MAX_INFLATED`` gets 413. Inflating and parsing run on a worker
thread, never on the event loop.
Protobuf is read with the OpenTelemetry project's own message definitions
(``opentelemetry-proto``, the ``otel`` extra); JSON needs nothing more.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from datetime import datetime, timedelta
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from simeval.checks import (
    MAX_JSON_DEPTH,
    KeyedCapture,
    check_capture,
    check_capture_key,
    inflate,
    load_json,
)
from simeval.errors import InvalidInput, SimevalError

router = APIRouter()
MAX_INFLATED = 64 * 1024 * 1024  # a gzip body may inflate to this much at most
# One payload parsed at a time, whatever the event loop (a thread lock, not an anyio one):
# parsing holds the GIL for stretches, and several parses at once would take turns with the
# event loop for it.
_PARSING = threading.Lock()
MAX_NANOS = 2**64 - 1  # OTLP times are fixed64 nanoseconds since 1970
EPOCH = datetime(1970, 1, 1)


class UnsupportedMedia(SimevalError):
    status_code = 415


Span = dict[str, Any]  # span_id, trace_id (hex), name, start, end (ns), attrs


# -- protobuf ------------------------------------------------------------------------------
def _too_deep() -> InvalidInput:
    return InvalidInput(f"an attribute value is nested more than {MAX_JSON_DEPTH} levels deep")


def _pb_value(v: Any, depth: int = 0) -> Any:
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


def spans_from_protobuf(body: bytes) -> list[Span]:
    """The spans of an ``ExportTraceServiceRequest`` in protobuf."""
    try:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:  # pragma: no cover - the otel extra is missing
        raise UnsupportedMedia(
            "OTLP protobuf needs the otel extra (pip install 'simeval[otel]'); "
            "or send OTLP JSON (Content-Type: application/json)"
        ) from None
    message = ExportTraceServiceRequest()
    try:
        message.ParseFromString(body)
    except (DecodeError, ValueError) as exc:
        raise InvalidInput(f"malformed OTLP protobuf payload: {exc}") from None
    spans = []
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
                    }
                )
    return spans


def _pb_attributes(attributes: Any) -> dict[str, Any]:
    try:
        return {kv.key: _pb_value(kv.value) for kv in attributes}
    except InvalidInput as exc:
        raise InvalidInput(f"malformed OTLP protobuf payload: {exc}") from None


# -- JSON ----------------------------------------------------------------------------------
def _json_value(v: Any, depth: int = 0) -> Any:
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
            values = _list(val.get("values") if _obj(val) else None)
            return [_json_value(x, depth + 1) for x in values]
        if kind == "kvlistValue":
            return _attributes(val.get("values") if _obj(val) else None, depth + 1)
        if kind == "bytesValue":
            return base64.b64decode(val).hex()
    return None


def _obj(value: Any) -> bool:
    if not isinstance(value, dict):
        raise InvalidInput(f"malformed OTLP JSON: expected an object, got {type(value).__name__}")
    return True


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(f"malformed OTLP JSON: expected a list, got {type(value).__name__}")
    return value


def _attributes(values: Any, depth: int = 0) -> dict[str, Any]:
    out = {}
    for kv in _list(values):
        _obj(kv)
        key = kv.get("key")
        if not isinstance(key, str):
            raise InvalidInput("malformed OTLP JSON: an attribute without a key")
        out[key] = _json_value(kv.get("value", {}), depth)
    return out


def _nanos(value: Any, what: str) -> int:
    """An OTLP time: nanoseconds since 1970 in [0, 2^64-1] (JSON gives them as text or a
    number); 0 or absent means none."""
    if isinstance(value, bool) or not isinstance(value, int | str | float | type(None)):
        raise InvalidInput(f"{what} must be a number of nanoseconds, not {type(value).__name__}")
    nanos = int(value or 0)
    if not 0 <= nanos <= MAX_NANOS:
        shown = str(nanos) if len(str(nanos)) <= 30 else f"{nanos:.3e}"
        raise InvalidInput(f"{what} {shown} is not a time (0 to 2^64-1 nanoseconds since 1970)")
    return nanos


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(pairs)


def spans_from_json(body: bytes) -> list[Span]:
    """The spans of an ``ExportTraceServiceRequest`` in OTLP JSON (hex ids, camelCase)."""
    try:
        # A Python hook per object: the parser then lets other threads run (the event loop
        # answering requests) between objects, instead of holding the GIL for a whole
        # 64 MB payload. Nesting too deep is still the parser's RecursionError.
        doc = json.loads(body, object_pairs_hook=_pairs)
    except RecursionError:
        raise InvalidInput("malformed OTLP JSON payload: nested too deep to read") from None
    except ValueError as exc:  # not JSON, not UTF-8, a number of 5,000 digits
        raise InvalidInput(f"malformed OTLP JSON payload: {exc}") from None
    _obj(doc)
    spans = []
    try:
        for rs in _list(doc.get("resourceSpans")):
            _obj(rs)
            for ss in _list(rs.get("scopeSpans")):
                _obj(ss)
                for span in _list(ss.get("spans")):
                    _obj(span)
                    spans.append(
                        {
                            "span_id": str(span.get("spanId") or "").lower(),
                            "trace_id": str(span.get("traceId") or "").lower(),
                            "name": str(span.get("name") or ""),
                            "start": _nanos(span.get("startTimeUnixNano"), "startTimeUnixNano"),
                            "end": _nanos(span.get("endTimeUnixNano"), "endTimeUnixNano"),
                            "attrs": _attributes(span.get("attributes")),
                        }
                    )
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(f"malformed OTLP JSON payload: {exc}") from None
    return spans


# -- GenAI spans as captures ---------------------------------------------------------------
_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d{1,9})\.(role|content)$")


def _messages(value: Any, what: str) -> list[dict[str, Any]]:
    if isinstance(value, str):
        try:
            value = load_json(value, what)
        except SimevalError:  # JSON text nested too deep: refused, not taken as plain text
            raise
        except ValueError:
            return [{"role": "user", "content": value}]
    if isinstance(value, dict):
        value = [value]
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []


def _message_text(message: dict[str, Any]) -> str:
    texts = []
    parts = message.get("parts")
    if parts is not None and not isinstance(parts, list):
        raise InvalidInput(f"a message's parts must be a list, not {type(parts).__name__}")
    for part in parts or []:
        if isinstance(part, dict) and part.get("type", "text") == "text":
            content = part.get("content", part.get("text"))
            if isinstance(content, str):
                texts.append(content)
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    return "\n".join(t for t in texts if t)


def span_capture(span: Span) -> KeyedCapture | None:
    """A span as a checked capture keyed by its span id, or None when it carries no GenAI
    exchange (no ``gen_ai.*`` attributes, or no output text)."""
    attrs: dict[str, Any] = span["attrs"]
    if not any(k.startswith("gen_ai.") for k in attrs):
        return None
    inputs = _messages(attrs.get("gen_ai.input.messages"), "gen_ai.input.messages")
    outputs = _messages(attrs.get("gen_ai.output.messages"), "gen_ai.output.messages")
    indexed: dict[tuple[str, int], dict[str, Any]] = {}
    for key, value in attrs.items():
        match = _INDEXED.match(key)
        if match:
            kind, n, field = match.group(1), int(match.group(2)), match.group(3)
            indexed.setdefault((kind, n), {})[field] = value
    if not inputs:
        inputs = [m for (k, _), m in sorted(indexed.items()) if k == "prompt"]
    if not outputs:
        outputs = [m for (k, _), m in sorted(indexed.items()) if k == "completion"]
    output = _message_text(outputs[0]) if outputs else ""
    if not output.strip():
        return None
    users = [m for m in inputs if m.get("role", "user") == "user"]
    text_in = _message_text(users[-1]) if users else ""
    usage = {
        k.removeprefix("gen_ai.usage."): v
        for k, v in attrs.items()
        if k.startswith("gen_ai.usage.")
    }
    finish = attrs.get("gen_ai.response.finish_reasons") or (
        outputs[0].get("finish_reason") if outputs else None
    )
    metadata: dict[str, Any] = {
        "source": "otel",
        "span_name": span["name"],
        "trace_id": span["trace_id"],
        "model": attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model"),
    }
    for name, key in (
        ("provider", "gen_ai.provider.name"),
        ("system", "gen_ai.system"),
        ("operation", "gen_ai.operation.name"),
        ("response_id", "gen_ai.response.id"),
    ):
        if attrs.get(key) is not None:
            metadata[name] = attrs[key]
    if usage:
        metadata["usage"] = usage
    if finish:
        metadata["finish_reason"] = finish
    start, end = span["start"], span["end"]
    if start and end >= start:
        metadata["latency_ms"] = round((end - start) / 1e6, 3)
    # exact to the microsecond, and any fixed64 (up to the year 2554) is a datetime
    when = EPOCH + timedelta(microseconds=(end or start) // 1000) if (end or start) else None
    conversation = attrs.get("gen_ai.conversation.id")
    checked = check_capture(
        text_in,
        output,
        str(conversation)[:200] if conversation is not None else None,
        metadata,
        when,
    )
    return (*checked, check_capture_key(span["span_id"] or None))


def parse_traces(body: bytes, content_type: str, content_encoding: str = "") -> list[KeyedCapture]:
    """The captures of an OTLP/HTTP traces payload; ``InvalidInput`` when it is malformed
    (then nothing of it is stored)."""
    encoding = content_encoding.strip().lower()
    if encoding not in ("", "identity", "gzip"):
        raise UnsupportedMedia(f"unsupported Content-Encoding {content_encoding!r} (use gzip)")
    if encoding == "gzip":
        body = inflate(body, encoding, MAX_INFLATED, "the gzip body")
    media = content_type.split(";")[0].strip().lower()
    if media in ("application/x-protobuf", "application/protobuf"):
        spans = spans_from_protobuf(body)
    elif media == "application/json":
        spans = spans_from_json(body)
    else:
        raise UnsupportedMedia(
            f"unsupported Content-Type {media or 'none'!r}: send application/x-protobuf "
            "or application/json"
        )
    captures = []
    for i, span in enumerate(spans):
        try:
            one = span_capture(span)
        except SimevalError as exc:
            raise type(exc)(f"span {i} ({span['name'][:100]!r}): {exc}") from None
        if one is not None:
            captures.append(one)
    return captures


def _parse_one_at_a_time(body: bytes, content_type: str, encoding: str) -> list[KeyedCapture]:
    with _PARSING:
        return parse_traces(body, content_type, encoding)


_BODY = {
    "content": {
        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
        "application/json": {"schema": {"type": "object"}},
    },
    "required": True,
}


@router.post(
    "/v1/traces",
    tags=["captures"],
    openapi_extra={"requestBody": _BODY},
    responses={
        200: {
            "description": "Accepted (an empty ExportTraceServiceResponse)",
            "content": {"application/x-protobuf": {}, "application/json": {}},
        },
        400: {"description": "A malformed payload: nothing stored"},
        413: {"description": "A body (or its gzip inflated) over the limit: nothing stored"},
        422: {"description": "Text the store cannot hold (a NUL, NaN, nested too deep)"},
        503: {"description": "The database is busy or down: nothing stored, try again"},
        415: {"description": "Neither protobuf nor JSON"},
    },
)
async def traces(request: Request) -> Response:
    """OTLP/HTTP traces: spans with GenAI attributes become captures, keyed by span id.

    Point an OpenTelemetry exporter at it, e.g.
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:8000/v1/traces``.
    """
    body = await request.body()
    content_type = request.headers.get("content-type", "")
    encoding = request.headers.get("content-encoding", "")
    try:
        # inflating and parsing 64 MB takes a while: on a worker thread, not the event loop
        captures = await anyio.to_thread.run_sync(
            _parse_one_at_a_time, body, content_type, encoding
        )
        if captures:
            await request.app.state.writer.capture_batch(captures)
    except SimevalError as exc:
        # busy or down: an exporter retries a 503, after Retry-After (OTLP/HTTP's rule)
        retry = max(1, round(request.app.state.writer.lock_wait))
        headers = {"Retry-After": str(retry)} if exc.status_code == 503 else None
        return JSONResponse({"error": str(exc)}, status_code=exc.status_code, headers=headers)
    if content_type.split(";")[0].strip().lower() == "application/json":
        return JSONResponse({})
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    return Response(
        ExportTraceServiceResponse().SerializeToString(), media_type="application/x-protobuf"
    )
