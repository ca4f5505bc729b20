"""GenAI spans, span events and log-record halves read as model calls (``Call``), and a call
made a checked capture.

What is read (input = the last user message's text, output = the first output message's):

- the current semantic conventions: ``gen_ai.input.messages`` / ``gen_ai.output.messages``
  (messages with ``parts``, as JSON text or structured values), ``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.response.id``, ``gen_ai.usage.*``,
  ``gen_ai.conversation.id``, ``gen_ai.response.finish_reasons``;
- the older indexed ones (OpenLLMetry, OpenLIT): ``gen_ai.prompt.N.role`` /
  ``gen_ai.prompt.N.content`` and ``gen_ai.completion.N.content``;
- the older span events ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` (their
  ``gen_ai.prompt`` / ``gen_ai.completion`` attribute, JSON messages or plain text);
- OpenInference LLM spans (``openinference.span.kind=LLM``): ``llm.input_messages.N.message.*``
  and ``llm.output_messages.N.message.*``, else ``input.value`` / ``output.value`` (the
  request and reply JSON when ``*.mime_type`` is ``application/json``), ``llm.model_name``,
  ``llm.token_count.prompt`` / ``completion``, ``llm.provider``, ``session.id`` (the
  conversation id); the response id from ``output.value``'s ``id``.

One key per model call (``simeval.vocabulary.call_key``): the response id when there is one,
the key the proxy gives the same reply, else the span id.

A value that looks cut (JSON text where JSON is expected that does not parse, e.g. cut by
``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``; or text ending in a truncation marker such as
``[truncated]``) makes the call ``cut``: it is stored with the reason in its metadata
(``cut``) and is not scored. So is text over the store's limit (``MAX_TEXT_CHARS``): its
first ``MAX_TEXT_CHARS`` characters are kept. A call with no input text (its messages hold
none: ``"parts": []``, only images) is stored unscored too (``no_input`` in its metadata);
the parts that are not text are named in its metadata (``other_parts``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simeval.checks import (
    MAX_TEXT_CHARS,
    KeyedCapture,
    check_capture,
    check_capture_key,
    from_unix_ns,
    load_json,
)
from simeval.errors import InvalidInput, SimevalError
from simeval.jsontypes import JSONObject, JSONValue
from simeval.vocabulary import call_key
from simeval.web.otlp.decode import Span

# text that ends so was cut on purpose by the code that sent it (compared in lower case)
TRUNCATION_MARKERS = ("[truncated]", "(truncated)", "<truncated>", "...truncated")
NO_INPUT = "no input text"  # why a call with none is stored unscored
TEXT_PARTS = ("text", "input_text", "output_text")
_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d{1,9})\.(role|content)$")
_OI_MESSAGE = re.compile(r"^llm\.(input|output)_messages\.(\d{1,9})\.message\.(role|content)$")
_OI_PART = re.compile(
    r"^llm\.(input|output)_messages\.(\d{1,9})\.message\.contents\.(\d{1,9})"
    r"\.message_content\.(type|text)$"
)
# the GenAI attributes a call's metadata is made from (the rest of a span's are not kept)
_META_NAMES = (
    ("provider", "gen_ai.provider.name"),
    ("system", "gen_ai.system"),
    ("operation", "gen_ai.operation.name"),
    ("response_id", "gen_ai.response.id"),
)


@dataclass
class Call:
    """One model call: its texts (``output`` None: none yet, the other half may bring it),
    where it was seen (span and trace id, times in ns) and the attributes its metadata,
    model and response id come from; ``cuts`` says which values look cut and why."""

    span_id: str = ""
    trace_id: str = ""
    name: str = ""
    input: str = ""
    output: str | None = None
    attrs: JSONObject = field(default_factory=dict)
    start: int = 0
    end: int = 0
    response_id: str | None = None
    conversation: JSONValue = None
    source: str = "otel"
    finish: JSONValue = None
    cuts: list[str] = field(default_factory=list)
    other_parts: list[str] = field(default_factory=list)  # the input's parts not text


def looks_truncated(text: str) -> bool:
    """Whether ``text`` ends with a known truncation marker."""
    return text.rstrip().lower().endswith(TRUNCATION_MARKERS)


def read_messages(value: object, what: str, cuts: list[str]) -> list[JSONObject]:
    """Messages from an attribute: JSON text or structured; plain text is one user message.
    JSON text that does not parse is cut: noted in ``cuts``, and read as one message of that
    text (what arrived is stored, not scored)."""
    if isinstance(value, str):
        text = value
        try:
            value = load_json(text, what)
        except SimevalError:  # JSON text nested too deep: refused, not taken as plain text
            raise
        except ValueError:
            if text.lstrip()[:1] in ("[", "{"):
                cuts.append(f"{what} is not whole JSON ({len(text)} characters): cut")
                return [{"content": text}]
            return [{"role": "user", "content": text}]
    if isinstance(value, dict):
        value = [value]
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []


def _parts(message: JSONObject) -> list[JSONValue]:
    """A message's parts: its ``parts`` and its ``content`` when that is a list."""
    parts = message.get("parts")
    if parts is not None and not isinstance(parts, list):
        raise InvalidInput(f"a message's parts must be a list, not {type(parts).__name__}")
    content = message.get("content")
    if isinstance(content, list):  # OpenAI's content parts: [{"type": "text", "text": ...}]
        parts = [*(parts or []), *content]
    return parts or []


def message_text(message: JSONObject) -> str:
    """The text of a message: its text parts and its ``content`` (a string or a list of
    parts), joined by new lines."""
    texts = []
    for part in _parts(message):
        if isinstance(part, dict) and part.get("type", "text") in TEXT_PARTS:
            text = part.get("content", part.get("text"))
            if isinstance(text, str):
                texts.append(text)
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    return "\n".join(t for t in texts if t)


def other_parts(message: JSONObject) -> list[str]:
    """The types of a message's parts that are not text (``image_url``, ``blob`` …)."""
    found = []
    for part in _parts(message):
        kind = part.get("type", "text") if isinstance(part, dict) else type(part).__name__
        if kind not in TEXT_PARTS:
            found.append(str(kind)[:100])
    return found


def last_user(messages: list[JSONObject]) -> JSONObject:
    """The last user message (a message without a role counts as one), or {}."""
    users = [m for m in messages if m.get("role", "user") == "user"]
    return users[-1] if users else {}


def last_user_text(messages: list[JSONObject]) -> str:
    """The text of the last user message."""
    return message_text(last_user(messages))


def _indexed(attrs: JSONObject, pattern: re.Pattern[str]) -> dict[str, list[JSONObject]]:
    """Messages spread over numbered attributes (``prefix.N.role``), by kind, in order."""
    found: dict[tuple[str, int], JSONObject] = {}
    for key, value in attrs.items():
        match = pattern.match(key)
        if match:
            kind, n, name = match.group(1), int(match.group(2)), match.group(3)
            found.setdefault((kind, n), {})[name] = value
    out: dict[str, list[JSONObject]] = {}
    for (kind, _), message in sorted(found.items()):
        out.setdefault(kind, []).append(message)
    return out


def _oi_parts(attrs: JSONObject) -> dict[tuple[str, int], str]:
    """OpenInference's content parts (``...message.contents.M.message_content.text``)."""
    parts: dict[tuple[str, int, int], JSONObject] = {}
    for key, value in attrs.items():
        match = _OI_PART.match(key)
        if match:
            at = (match.group(1), int(match.group(2)), int(match.group(3)))
            parts.setdefault(at, {})[match.group(4)] = value
    out: dict[tuple[str, int], list[str]] = {}
    for (kind, n, _), part in sorted(parts.items()):
        text = part.get("text")
        if part.get("type", "text") == "text" and isinstance(text, str):
            out.setdefault((kind, n), []).append(text)
    return {k: "\n".join(v) for k, v in out.items()}


def _json_value(attrs: JSONObject, name: str) -> tuple[JSONValue, int | None]:
    """OpenInference's ``input.value`` / ``output.value``: JSON when its mime type says so,
    else the text itself; and, for JSON that does not parse (cut), its text and its length."""
    value = attrs.get(f"{name}.value")
    if not isinstance(value, str):
        return value, None
    if str(attrs.get(f"{name}.mime_type", "")).lower() != "application/json":
        return value, None
    try:
        return load_json(value, f"{name}.value"), None
    except SimevalError:
        raise
    except ValueError:
        return value, len(value)


def openinference_call(span: Span) -> Call:
    """An OpenInference LLM span as a call."""
    attrs = span["attrs"]
    cuts: list[str] = []
    messages = _indexed(attrs, _OI_MESSAGE)
    parts = _oi_parts(attrs)
    for kind, listed in messages.items():
        for n, message in enumerate(listed):
            if not isinstance(message.get("content"), str) and (kind, n) in parts:
                message["content"] = parts[(kind, n)]
    request, request_cut = _json_value(attrs, "input")
    reply, reply_cut = _json_value(attrs, "output")
    inputs = messages.get("input") or []
    if not inputs and isinstance(request, dict):
        inputs = read_messages(request.get("messages") or request.get("input"), "input", cuts)
    elif not inputs and isinstance(request, str):
        inputs = [{"role": "user", "content": request}]
    outputs: Sequence[JSONValue] = messages.get("output") or []
    response_id = None
    if isinstance(reply, dict):
        reply_id = reply.get("id")
        response_id = reply_id if isinstance(reply_id, str) else None
        if not outputs:
            choices = reply.get("choices")
            if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                first = choices[0]
                outputs = [first.get("message") or {"content": first.get("text")}]
            elif isinstance(reply.get("output_text"), str):
                outputs = [{"content": reply["output_text"]}]
    elif isinstance(reply, str) and not outputs:
        outputs = [{"role": "assistant", "content": reply}]
    meta_attrs = {
        k: v
        for k, v in attrs.items()
        if k.startswith(("llm.model_name", "llm.token_count.", "llm.provider", "llm.system"))
    }
    output = message_text(outputs[0]) if outputs and isinstance(outputs[0], dict) else ""
    user = last_user([m for m in inputs if isinstance(m, dict)])
    text_in = message_text(user)
    # The length limit cuts every attribute alike: a message attribute shorter than where its
    # JSON value was cut is whole, and the call is then not cut on that side.
    for side, text, cut_at in (("input", text_in, request_cut), ("output", output, reply_cut)):
        if cut_at is not None and not (messages.get(side) and len(text) < cut_at):
            cuts.append(f"{side}.value is not whole JSON ({cut_at} characters): cut")
    return Call(
        span_id=span["span_id"],
        trace_id=span["trace_id"],
        name=span["name"],
        input=text_in,
        output=output or None,
        other_parts=other_parts(user),
        attrs=meta_attrs,
        start=span["start"],
        end=span["end"],
        response_id=response_id,
        conversation=attrs.get("session.id"),
        source="openinference",
        finish=attrs.get("llm.finish_reason"),
        cuts=cuts,
    )


def genai_call(
    attrs: JSONObject, events: list[tuple[str, JSONObject]] | None = None, **where: Any
) -> Call:
    """A call from GenAI attributes (a span's, or a ``gen_ai.client.inference.operation.details``
    log record's) and a span's events; ``where``: span_id, trace_id, name, start, end."""
    cuts: list[str] = []
    inputs = read_messages(attrs.get("gen_ai.input.messages"), "gen_ai.input.messages", cuts)
    outputs = read_messages(attrs.get("gen_ai.output.messages"), "gen_ai.output.messages", cuts)
    for name, event_attrs in events or ():
        if name == "gen_ai.content.prompt" and not inputs:
            inputs = read_messages(event_attrs.get("gen_ai.prompt"), "gen_ai.prompt", cuts)
        elif name == "gen_ai.content.completion" and not outputs:
            found = read_messages(event_attrs.get("gen_ai.completion"), "gen_ai.completion", cuts)
            outputs = [{**m, "role": m.get("role", "assistant")} for m in found]
    indexed = _indexed(attrs, _INDEXED)
    inputs = inputs or indexed.get("prompt", [])
    outputs = outputs or indexed.get("completion", [])
    output = message_text(outputs[0]) if outputs else ""
    response_id = attrs.get("gen_ai.response.id")
    return Call(
        input=last_user_text(inputs),
        other_parts=other_parts(last_user(inputs)),
        output=output or None,
        attrs={k: v for k, v in attrs.items() if k.startswith("gen_ai.") and "messages" not in k},
        response_id=response_id if isinstance(response_id, str) else None,
        conversation=attrs.get("gen_ai.conversation.id"),
        finish=attrs.get("gen_ai.response.finish_reasons")
        or (outputs[0].get("finish_reason") if outputs else None),
        cuts=cuts,
        **where,
    )


def span_call(span: Span) -> Call | None:
    """A span as a call, or None when it is no model call: no ``gen_ai.*`` attribute (nor
    span event), not an OpenInference LLM span, or an embeddings call. Its name is logfire's
    rendered message (``logfire.msg``) where there is one."""
    attrs = span["attrs"]
    message = attrs.get("logfire.msg")
    if isinstance(message, str) and message.strip():
        # logfire names its spans by a template ("Chat Completion with {request_data[model]!r}")
        # and sends the rendered text beside it
        span = {**span, "name": message[:200]}
    if attrs.get("openinference.span.kind") == "LLM":
        return openinference_call(span)
    events = [e for e in span.get("events") or () if e[0].startswith("gen_ai.")]
    if not events and not any(k.startswith("gen_ai.") for k in attrs):
        return None
    if attrs.get("gen_ai.operation.name") == "embeddings":
        return None  # no text out: nothing to score, nothing to wait for
    return genai_call(
        attrs,
        events,
        span_id=span["span_id"],
        trace_id=span["trace_id"],
        name=span["name"],
        start=span["start"],
        end=span["end"],
    )


def keep_within(text: str, what: str, cuts: list[str]) -> str:
    """``text``, or its first ``MAX_TEXT_CHARS`` characters (noted in ``cuts``)."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    cuts.append(f"{what} has {len(text):,} characters: its first {MAX_TEXT_CHARS:,} kept")
    return text[:MAX_TEXT_CHARS]


def call_capture(call: Call) -> tuple[KeyedCapture, str | None]:
    """The checked capture of a call that has its output, and why it is not to be scored
    (None: it is): it looks cut, or has no input text. Its key is ``call_key`` of the
    response id, else the span id."""
    cuts = list(call.cuts)
    text_in = keep_within(call.input, "the input", cuts)
    output = keep_within(call.output or "", "the output", cuts)
    for what, text in (("the input", text_in), ("the output", output)):
        if text and looks_truncated(text):
            cuts.append(f"{what} ends with a truncation marker")
    attrs = call.attrs
    metadata: JSONObject = {"source": call.source, "span_name": call.name}
    if call.trace_id:
        metadata["trace_id"] = call.trace_id
    if call.span_id:
        metadata["span_id"] = call.span_id
    model = (
        attrs.get("gen_ai.response.model")
        or attrs.get("gen_ai.request.model")
        or attrs.get("llm.model_name")
    )
    if model is not None:
        metadata["model"] = model
    for name, key in _META_NAMES:
        if attrs.get(key) is not None:
            metadata[name] = attrs[key]
    if call.response_id:
        metadata["response_id"] = call.response_id
    for name, keys in (
        ("provider", ("gen_ai.provider.name", "llm.provider", "gen_ai.system", "llm.system")),
        ("input_tokens", ("gen_ai.usage.input_tokens", "llm.token_count.prompt")),
        ("output_tokens", ("gen_ai.usage.output_tokens", "llm.token_count.completion")),
    ):
        value = next((attrs[k] for k in keys if attrs.get(k) is not None), None)
        if value is not None:
            metadata[name] = value
    usage = {k.removeprefix("gen_ai.usage."): v for k, v in attrs.items() if "usage." in k}
    if usage:
        metadata["usage"] = usage
    if call.finish:
        metadata["finish_reason"] = call.finish
    if cuts:
        metadata["cut"] = "; ".join(cuts)
    if not text_in.strip():
        metadata["no_input"] = True
    if call.other_parts:
        metadata["other_parts"] = list[JSONValue](call.other_parts[:20])
    start, end = call.start, call.end
    if start and end >= start:
        metadata["latency_ms"] = round((end - start) / 1e6, 3)
    when = from_unix_ns(end or start) if (end or start) else None
    conversation = call.conversation
    checked = check_capture(
        text_in,
        output,
        str(conversation)[:200] if conversation is not None else None,
        metadata,
        when,
    )
    capture_key = call_key(call.response_id) or check_capture_key(call.span_id or None)
    cut = metadata.get("cut")
    reason = (
        cut if isinstance(cut, str) and cut else (NO_INPUT if metadata.get("no_input") else None)
    )
    return (*checked, capture_key), reason


def dumps(value: object) -> str:
    """Compact JSON (for a note naming a value)."""
    return json.dumps(value, separators=(",", ":"), default=str)
