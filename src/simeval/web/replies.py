"""A proxied OpenAI reply turned into a capture (``simeval.web.proxy`` does the forwarding).

Input = the last user message of the client's request (a chained Responses turn with no user
message: its ``function_call_output`` items' text), output = the assistant's text of the
upstream's reply (``/chat/completions``, ``/completions``, ``/responses``; streamed or not,
gzip/deflate/br/zstd encoded or not), one capture per choice (``n > 1``), keyed by
``simeval.vocabulary.call_key(response id, choice)``, metadata in the vocabulary's names
(``simeval.vocabulary.normal_meta``), with the trace and span ids of the request's W3C
``traceparent`` header when it has one (``trace_context``: the caller's span around the HTTP
request, so the capture's exported scores are parented to the caller's trace at once).

Both sides are untrusted: the client's request and the upstream's reply are read with bounds
(``simeval.checks.load_json``, ``inflate``), and a value of the wrong shape where the reply's
structure is (``"choices": 1``, ``"output": 5``) is an ``InvalidInput`` naming it, never a
``TypeError``. A reply that simply has no text (only tool calls, say) is not a capture
(``None``), and not an error.
"""

from __future__ import annotations

import codecs
import importlib
import io
import json
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypedDict

from simeval.checks import (
    KeyedCapture,
    check_capture,
    load_json,
)
from simeval.codings import inflate
from simeval.errors import InvalidInput, SimevalError, TooLarge
from simeval.jsontypes import JSONObject, JSONValue
from simeval.vocabulary import call_key, normal_meta

MAX_CAPTURED_BYTES = 16 * 1024 * 1024  # a longer reply (sent or inflated) is not captured
MAX_CHOICES = 128  # the most choices (``n``) OpenAI serves; a higher index is malformed
# W3C Trace Context: version, trace id, parent (span) id, flags; a later version may add
# fields after these, version ff is invalid
_TRACEPARENT = re.compile(
    r"^(?!ff)([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-[ -~]*)?$"
)


def trace_context(header: str | bytes | None) -> tuple[str, str] | None:
    """The (trace id, span id) of a W3C ``traceparent`` header, or None when there is none or
    it is not valid (the spec's rules: lower-case hex, neither id all zeros, version 00 with
    exactly four fields, version ff refused).

    >>> trace_context("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    ('4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7')
    >>> trace_context("00-00000000000000000000000000000000-00f067aa0ba902b7-01") is None
    True
    """
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    match = _TRACEPARENT.match((header or "").strip(" \t"))
    if match is None:
        return None
    version, trace_id, span_id, more = match.groups()
    if (version == "00" and more) or not int(trace_id, 16) or not int(span_id, 16):
        return None
    return trace_id, span_id


@dataclass
class Reply:
    """A completed exchange, as the capture thread needs it (no request headers but the
    conversation id and the trace context). ``client_disconnected``: the client hung up
    before the end; ``chunks`` then hold what was delivered to it."""

    endpoint: str  # "/chat/completions", "/completions" or "/responses"
    request: bytes
    conversation: str | None
    status: int
    content_type: str
    encoding: str
    chunks: list[bytes] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # seconds after the request, per chunk
    latency: float = 0.0
    client_disconnected: bool = False
    truncated: bool = False  # over MAX_CAPTURED_BYTES: the chunks hold only the first ones
    number: int = 0  # the proxy's count of replies, to name one in the log
    trace: tuple[str, str] | None = None  # the request's traceparent (``trace_context``)

    @property
    def streamed(self) -> bool:
        """True for a server-sent-event stream."""
        return self.content_type.strip().lower().startswith("text/event-stream")


class ReplyInfo(TypedDict, total=False):
    """What a reply says about itself (``reply_outputs``), each as the reply has it."""

    id: JSONValue
    model: JSONValue
    usage: JSONValue
    finish_reasons: dict[int, JSONValue]  # by choice index
    finish_reason: JSONValue  # the first choice's (``reply_output``)
    first_token: float  # seconds after the request (streams)


def _parse(data: bytes, what: str) -> JSONValue:
    """JSON bytes parsed: ``InvalidInput`` when they are not JSON (or not UTF-8), nested too
    deep, or hold a number too long to read."""
    try:
        return load_json(data, what)
    except SimevalError:
        raise
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, a 5,000-digit number
        problem = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise InvalidInput(f"{what} is not JSON ({problem.splitlines()[0][:200]})") from None


def _malformed(what: str, value: object, expected: str) -> InvalidInput:
    return InvalidInput(f"malformed {what}: expected {expected}, got {type(value).__name__}")


def _list(value: object, what: str) -> list[JSONValue]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _malformed(what, value, "a list")
    return value


def _obj(value: object, what: str) -> JSONObject:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _malformed(what, value, "an object")
    return value


def _text_parts(
    content: object, kinds: tuple[str, ...] = ("text", "input_text", "output_text")
) -> str:
    """The text of an OpenAI message content: a string, or the text parts of a list, joined
    (parts of other kinds, or of an unknown shape, carry no text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type") in kinds:
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(t for t in texts if t)
    return ""


def request_input(endpoint: str, body: JSONObject) -> str:
    """The prompt of a request: the last user message's text (or the completion prompt);
    a Responses request with no user message (a turn chained by ``previous_response_id``
    carrying ``function_call_output`` items) gives its tool outputs' text, joined by new
    lines (the proxy keeps no history: the previous turn is not looked up);
    ``InvalidInput`` when the messages are not a list of objects.

    >>> request_input("/chat/completions", {"messages": [
    ...     {"role": "system", "content": "Be brief."},
    ...     {"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]}]})
    'Capital of France?'
    """
    if endpoint == "/completions":
        prompt = body.get("prompt")
        if isinstance(prompt, list):  # a batch of prompts (or of token ids): the last text
            prompt = prompt[-1] if prompt and isinstance(prompt[-1], str) else ""
        return prompt if isinstance(prompt, str) else ""
    name = "messages" if endpoint == "/chat/completions" else "input"
    messages = body.get(name)
    if isinstance(messages, str):  # the Responses API's input may be plain text
        return messages
    items = [_obj(m, f"request: {name} item") for m in _list(messages, f"request: {name}")]
    for message in reversed(items):
        if message.get("role") == "user":
            return _text_parts(message.get("content"))
    # a chained Responses request (previous_response_id) sends only what is new, often the
    # tool's answers: the model answers from them, so they are the input
    tools = [
        _text_parts(item.get("output"), ("text", "input_text", "output_text"))
        for item in items
        if item.get("type") == "function_call_output"
    ]
    return "\n".join(t for t in tools if t)


def decoded(reply: Reply) -> bytes:
    """The reply's body as sent, inflated (at most ``MAX_CAPTURED_BYTES``) when it was
    compressed: ``InvalidInput`` (``TooLarge``) otherwise."""
    return inflate(b"".join(reply.chunks), reply.encoding, MAX_CAPTURED_BYTES, "the reply")


def _events(reply: Reply) -> Iterable[tuple[float, JSONObject]]:
    """The JSON events of a server-sent-event stream, each with when its chunk arrived; an
    event that is not a JSON object (a comment, ``[DONE]``, nesting too deep) is skipped."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    compressed = reply.encoding.strip().lower() not in ("", "identity")
    chunks = [decoded(reply)] if compressed else reply.chunks
    times = [reply.times[-1] if reply.times else 0.0] if compressed else reply.times
    for chunk, at in zip(chunks, times, strict=False):
        pending += decoder.decode(chunk).replace("\r\n", "\n")
        while "\n\n" in pending:
            event, pending = pending.split("\n\n", 1)
            data = "\n".join(
                line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
            )
            if not data or data == "[DONE]":
                continue
            try:
                parsed = load_json(data, "a reply event")
            except (ValueError, SimevalError):
                continue
            if isinstance(parsed, dict):
                yield at, parsed


def _chat_text(choice: JSONObject, streamed: bool) -> str:
    if "text" in choice:  # /completions, streamed or not: each event's choices[].text
        text = choice.get("text")
        return text if isinstance(text, str) else ""
    if streamed:
        return _text_parts(_obj(choice.get("delta"), "reply: choices[].delta").get("content"))
    message = _obj(choice.get("message"), "reply: choices[].message")
    return _text_parts(message.get("content"))


def _response_text(response: JSONObject) -> str:
    texts = []
    for item in _list(response.get("output"), "reply: output"):
        message = _obj(item, "reply: output item")
        if message.get("type") == "message":
            texts.append(_text_parts(message.get("content"), ("output_text", "text")))
    return "".join(texts)


# a Responses reply's end said in the chat words (the vocabulary's ``finish_reason``)
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _response_finish(response: JSONObject) -> JSONValue:
    """A Responses reply's finish reason as Chat Completions says it: ``completed`` is
    ``stop``, ``incomplete`` for lack of tokens ``length``; another status as it is."""
    status = response.get("status")
    if status == "completed":
        return "stop"
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if status == "incomplete" and isinstance(reason, str):
        return _INCOMPLETE.get(reason, reason)
    return status


def _response_event(
    event: JSONObject,
    at: float,
    streamed: bool,
    texts: dict[int, list[str]],
    info: ReplyInfo,
) -> None:
    """One event of a Responses stream (or the whole reply) added to ``texts`` (one choice,
    0) and ``info``."""
    text = texts.setdefault(0, [])
    kind = event.get("type", "")
    response = event.get("response") if streamed else event
    delta = event.get("delta")
    if kind == "response.output_text.delta" and isinstance(delta, str):
        if "first_token" not in info and delta:
            info["first_token"] = at
        text.append(delta)
    if not streamed or kind == "response.completed":
        response = _obj(response, "reply: response")
        full = _response_text(response)
        if not streamed or not text:
            text[:] = [full]
        info["id"] = response.get("id")
        info["model"] = response.get("model")
        info["usage"] = response.get("usage")
        info["finish_reasons"] = {0: _response_finish(response)}


def _chat_event(
    event: JSONObject,
    at: float,
    streamed: bool,
    texts: dict[int, list[str]],
    info: ReplyInfo,
) -> None:
    """One chat or completion event (or the whole reply) added to ``texts`` (by choice
    index) and ``info``."""
    info.setdefault("id", event.get("id"))
    info["model"] = event.get("model") or info.get("model")
    if event.get("usage"):
        info["usage"] = event["usage"]
    finish = info.setdefault("finish_reasons", {})
    for position, choice in enumerate(_list(event.get("choices"), "reply: choices")):
        index = _obj(choice, "reply: choice").get("index", position)
        assert isinstance(choice, dict)  # or None, whose text cannot be read
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < MAX_CHOICES:
            raise _malformed("reply: choices[].index", index, f"an integer below {MAX_CHOICES}")
        piece = _chat_text(choice, streamed)
        text = texts.setdefault(index, [])
        if piece:
            if streamed and "first_token" not in info:
                info["first_token"] = at
            text.append(piece)
        if choice.get("finish_reason"):
            finish[index] = choice["finish_reason"]


def reply_outputs(reply: Reply) -> tuple[dict[int, str], ReplyInfo]:
    """The assistant's text of each choice of a completed reply (by index: one, 0, unless
    the request asked ``n > 1``), and what the reply says about itself: its id, model,
    token usage, finish reason per choice (``finish_reasons``) and (streams) when the first
    text arrived. ``InvalidInput`` for a reply that is not what its endpoint sends."""
    info: ReplyInfo = {}
    streamed = reply.streamed
    if streamed:
        events: Iterable[tuple[float, JSONObject]] = _events(reply)
    else:
        events = [(reply.latency, _obj(_parse(decoded(reply), "the reply"), "reply"))]
    texts: dict[int, list[str]] = {}
    read = _response_event if reply.endpoint == "/responses" else _chat_event
    for at, event in events:
        read(event, at, streamed, texts, info)
    return {i: "".join(parts) for i, parts in sorted(texts.items())}, info


def reply_output(reply: Reply) -> tuple[str, ReplyInfo]:
    """The text of the reply's first choice and what the reply says about itself (see
    ``reply_outputs``; ``finish_reason`` is the first choice's)."""
    texts, info = reply_outputs(reply)
    finish = info.get("finish_reasons", {}).get(0)
    if finish:
        info["finish_reason"] = finish
    return texts.get(0, ""), info


def reply_captures(reply: Reply) -> list[KeyedCapture]:
    """A reply as checked captures with their keys: one per choice with text (one, unless
    the request asked ``n > 1``: then each carries its ``choice`` index in its metadata and
    its own key, ``call_key(id, index)``; the call's token usage goes with choice 0 only, so
    summed counts stay right). None of them when there is nothing to capture (an upstream
    error, no text). ``InvalidInput`` (or another ``SimevalError``) when the reply or the
    client's request cannot be read (not JSON, the wrong shape, nested too deep, too long,
    not storable): the caller counts and logs it."""
    if not 200 <= reply.status < 300:
        return []
    if reply.truncated:
        raise TooLarge(f"the reply is larger than {MAX_CAPTURED_BYTES:,} bytes")
    if reply.client_disconnected and not reply.streamed:
        return []  # a JSON reply cut short: nothing was delivered that could be read
    request = _obj(_parse(reply.request, "the request") if reply.request else {}, "request")
    outputs, info = reply_outputs(reply)
    several = len(outputs) > 1
    user = request.get("user")
    conversation = reply.conversation or (user if isinstance(user, str) and user else None)
    prompt = request_input(reply.endpoint, request)
    captures: list[KeyedCapture] = []
    for index, output in outputs.items():
        if not output.strip():
            continue  # tool calls only, or an empty reply: nothing to score
        metadata: JSONObject = {
            "source": "proxy",
            "endpoint": "/v1" + reply.endpoint,
            "model": info.get("model") or request.get("model"),
            "latency_ms": round(reply.latency * 1000, 3),
            "upstream_status": reply.status,
        }
        response_id = info.get("id")
        if isinstance(response_id, str) and response_id:
            metadata["response_id"] = response_id[:200]
        if several:
            metadata["choice"] = index
        if "first_token" in info:
            metadata["first_token_ms"] = round(info["first_token"] * 1000, 3)
        if isinstance(info.get("usage"), dict) and index == 0:
            metadata["usage"] = info["usage"]
        finish = info.get("finish_reasons", {}).get(index)
        if finish:
            metadata["finish_reason"] = finish
        if reply.client_disconnected:
            metadata["client_disconnected"] = True
        if reply.trace is not None:
            metadata["trace_id"], metadata["span_id"] = reply.trace
        checked = check_capture(
            prompt, output, conversation[:200] if conversation else None, normal_meta(metadata)
        )
        captures.append((*checked, call_key(info.get("id"), index)))
    return captures


def reply_id(reply: Reply) -> str:
    """The reply's id for a log line, read as far as it can be (a reply that cannot be
    parsed may still show its id near the start), else ``?``; never the reply's text."""
    start = bytearray()
    for chunk in reply.chunks:  # the first 64 KB: never a copy of the whole reply
        start += chunk
        if len(start) >= 65536:
            break
    head = bytes(start[:65536])
    coding = reply.encoding.strip().lower()
    if coding not in ("", "identity"):
        try:  # the start of the stream only: a truncated one is no error here
            head = _head_inflated(head, coding)
        except Exception:  # zlib.error, brotli.error, zstandard.ZstdError, not installed
            return "?"
    marker = head.find(b'"id"')
    if marker < 0:
        return "?"
    rest = head[marker + 4 : marker + 4 + 512].lstrip(b" \t\r\n:")
    if not rest.startswith(b'"'):
        return "?"
    end = rest.find(b'"', 1)
    found = rest[1:end] if end > 0 else rest[1:200]
    shown = found[:200].decode("utf-8", "replace")
    return "".join(c if c.isprintable() else "?" for c in shown) or "?"


def _head_inflated(head: bytes, coding: str) -> bytes:
    """The first 64 KB of a compressed reply's start, inflated (a log line's id only)."""
    if coding == "br":
        return bytes(
            importlib.import_module("brotli")
            .Decompressor()
            .process(head, output_buffer_limit=65536)
        )
    if coding == "zstd":
        zstd = importlib.import_module("zstandard").ZstdDecompressor()
        return bytes(zstd.stream_reader(io.BytesIO(head)).read(65536))
    return zlib.decompressobj(47 if "gzip" in coding else 15).decompress(head, 65536)
