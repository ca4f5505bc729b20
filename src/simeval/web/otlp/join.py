"""Log records joined to their span: the halves of one model call that arrive apart.

Some instrumentations put a call's content in log records and its model, usage and response
id on its span (OpenTelemetry's openai-v2 on semantic conventions v1.28–1.36:
``gen_ai.user.message`` … and ``gen_ai.choice`` records; v1.37+ with content in events only:
one ``gen_ai.client.inference.operation.details`` record). The two come over two exporters
(``/v1/logs``, ``/v1/traces``), in any order, in other batches, seconds apart: log records
go out every second by default, spans every five, and a call's first records (its input) are
emitted when it starts, its span when it ends.

The join: a table in memory, keyed by (trace id, span id), of the halves still waiting.

- A call is stored as soon as both halves are there: its span, and its ``gen_ai.choice``
  (the first choice, index 0) or its ``operation.details`` record.
- A half waits at most ``wait_s`` (default 60 s) after it arrived. Then what is there is
  stored if it has an output (records without their span: no model or latency from it),
  and dropped if not (a span without content: the instrumentation sends none). A call whose
  records hold no text (content capture off: a ``gen_ai.choice`` with only a role) is
  dropped too, never stored as an empty capture. Every drop is counted by reason (``Tally``).
- A record naming no span (its span id empty or zero) joins by what it has: a user message
  or a choice with a trace id joins the waiting span of that trace it fits — the one whose
  response id it names, when both have one, else the one whose time it falls within; a
  ``gen_ai.choice`` with neither trace nor span id (OpenLLMetry's streamed calls in its
  events mode) the one waiting span, of any trace, it fits so. When no span fits yet, the
  record waits (``_Loose``) for one to arrive, and is dropped when none does; one that fits
  several calls at once cannot be told apart and is dropped. A message naming neither
  trace nor span is dropped at once.
- Bounded: at most ``max_calls`` calls (10,000) and ``max_bytes`` bytes (64 MB: their texts
  and attributes as Python holds them, ``footprint``) wait at once; past either, the oldest is
  settled early as if its wait had expired, and counted (``early``, on ``/api/health``).
  A call settled is remembered (the last ``max_calls`` of them), so a record arriving after
  it is dropped instead of starting a second, partial capture.
- In memory only: a server stopped settles what is waiting (``drain``); a server killed
  loses at most ``wait_s`` of halves, which the exporters do not send again.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace

from simeval.jsontypes import JSONObject, JSONValue
from simeval.web.otlp.decode import Record
from simeval.web.otlp.genai import Call, genai_call, message_text
from simeval.web.otlp.tally import Tally

log = logging.getLogger("simeval.otlp")
WAIT_S = 60.0
MAX_CALLS = 10_000
MAX_BYTES = 64 * 1024 * 1024
ENTRY_BYTES = 1024  # what one waiting call holds besides its texts and attributes
# the log events that carry a call's messages (semantic conventions v1.28 to v1.36)
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
NO_CONTENT = "no message content"  # the drops' reasons (``Tally``)
NO_SPAN = "a record names no span"
SEVERAL = "a record names no span and fits several calls"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"


_Choice = tuple[int, str, JSONValue, JSONObject]  # a choice record's index, text, finish, attrs


def choice_of(record: Record) -> _Choice:
    """What a ``gen_ai.choice`` record brings."""
    body = record["body"] if isinstance(record["body"], dict) else {}
    index = body.get("index", 0)
    index = index if isinstance(index, int) and not isinstance(index, bool) else 0
    attrs = {k: v for k, v in record["attrs"].items() if k.startswith("gen_ai.")}
    return index, body_text(body.get("message")), body.get("finish_reason"), attrs


@dataclass
class _Halves:
    """What has arrived of one call."""

    born: float
    span: Call | None = None
    user: tuple[tuple[int, int], str] | None = None  # (time ns, arrival), text
    choice: _Choice | None = None
    details: Call | None = None
    size: int = ENTRY_BYTES  # bytes held (``footprint``)

    def complete(self) -> bool:
        return self.span is not None and (self.choice is not None or self.details is not None)


@dataclass
class _Loose:
    """A record that names no span, waiting for the span it fits."""

    arrived: float
    trace_id: str  # "" when it names no trace either
    at: int  # its time, ns
    response_id: str | None
    size: int  # bytes held (``footprint``)
    choice: _Choice | None = None
    user: tuple[tuple[int, int], str] | None = None  # (time ns, arrival), text

    def fits(self, trace_id: str, halves: _Halves) -> bool:
        """Whether it can be the missing half of ``halves`` (the call of ``trace_id``): a span
        that waits for what it brings, of its trace, and the one it names (by response id,
        when both have one) or the one whose time it falls within."""
        span = halves.span
        if span is None or halves.details is not None:
            return False
        if self.trace_id and self.trace_id != trace_id:
            return False
        if (halves.choice if self.choice is not None else halves.user) is not None:
            return False
        if self.response_id and span.response_id:
            return self.response_id == span.response_id
        return span.start <= self.at <= span.end


def footprint(*values: object) -> int:
    """About how many bytes ``values`` (texts, attribute dicts and lists) take in memory: each
    object's own size, its keys and items counted too (``sys.getsizeof``; strings as Python
    stores them, 1, 2 or 4 bytes a character)."""
    total, stack = 0, list(values)
    while stack:
        value = stack.pop()
        total += sys.getsizeof(value)
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return total


def body_text(body: object) -> str:
    """The text of a message event's body (a string, or a message with ``content``)."""
    if isinstance(body, str):
        return body
    if isinstance(body, dict):
        return message_text(body)
    return ""


def merge(halves: _Halves, key: tuple[str, str]) -> Call | None:
    """The call the halves of ``key`` (trace id, span id) make, or None when they hold no
    output text (a span without content, records with none)."""
    span = halves.span
    if halves.details is not None:
        call = halves.details
        if span is not None:
            call = replace(
                call,
                name=span.name,
                start=span.start,
                end=span.end,
                attrs={**span.attrs, **call.attrs},
                response_id=call.response_id or span.response_id,
                conversation=call.conversation
                if call.conversation is not None
                else span.conversation,
            )
        return call if call.output else None
    if halves.choice is None:
        return None
    _, text, finish, attrs = halves.choice
    base = span if span is not None else Call(trace_id=key[0], span_id=key[1], attrs=attrs)
    if not text:
        return None
    user = halves.user[1] if halves.user is not None else ""
    return replace(
        base,
        input=user or base.input,
        output=text,
        finish=finish or base.finish,
        attrs={**attrs, **base.attrs},
    )


class Joiner:
    """The table of waiting halves (see the module doc). Thread-safe: payloads are read on
    worker threads, expired halves settled from the event loop."""

    def __init__(
        self,
        wait_s: float = WAIT_S,
        max_calls: int = MAX_CALLS,
        max_bytes: int = MAX_BYTES,
        tally: Tally | None = None,
    ):
        self.wait_s = wait_s
        self.max_calls = max_calls
        self.max_bytes = max_bytes
        self._waiting: OrderedDict[tuple[str, str], _Halves] = OrderedDict()
        # records that name no span, waiting for one they fit, by arrival
        self._orphans: OrderedDict[int, _Loose] = OrderedDict()
        self._settled: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._bytes = 0
        self._seq = 0
        self._lock = threading.Lock()
        self.tally = tally or Tally()  # the drops, by reason
        self.early = 0  # calls settled before their wait was over: the table was full

    def __len__(self) -> int:
        return len(self._waiting) + len(self._orphans)

    @property
    def bytes(self) -> int:
        """The bytes the waiting calls hold (``footprint``)."""
        return self._bytes

    def stats(self) -> dict[str, int]:
        """What ``/api/health`` shows: the calls waiting for their other half and the bytes
        they hold, those settled early because the table was full, and those dropped for
        having no content."""
        with self._lock:
            return {
                "waiting": len(self._waiting) + len(self._orphans),
                "waiting_bytes": self._bytes,
                "max_bytes": self.max_bytes,
                "settled_early": self.early,
                "dropped_without_content": self.tally.get("dropped", NO_CONTENT),
            }

    def add_span(self, call: Call) -> list[Call]:
        """A span's call without output: it waits for its records. The calls now settled."""
        with self._lock:
            halves = self._halves(call.trace_id, call.span_id)
            if halves is None:
                return []
            halves.span = call
            added = footprint(call.input, call.attrs, call.name)
            halves.size += added
            self._bytes += added
            # the records naming no span that it fits, if any wait (the first of each kind)
            for seq, loose in list(self._orphans.items()):
                if loose.fits(call.trace_id, halves):
                    del self._orphans[seq]
                    self._join(halves, loose)
            return self._settle_ready(call.trace_id, call.span_id)

    def _join(self, halves: _Halves, loose: _Loose) -> None:
        """``loose`` made a half of ``halves`` (its bytes now theirs)."""
        if loose.choice is not None:
            halves.choice = loose.choice
        else:
            halves.user = loose.user
        halves.size += loose.size - ENTRY_BYTES
        self._bytes -= ENTRY_BYTES

    def _loose(self, loose: _Loose) -> list[Call]:
        """A record that names no span: joined to the one waiting span it fits
        (``_Loose.fits``), else kept until such a span arrives or its wait is over; dropped
        when several fit (it cannot be told which call it belongs to)."""
        with self._lock:
            fits = [key for key, h in self._waiting.items() if loose.fits(key[0], h)]
            if len(fits) > 1:
                self.tally.count(
                    "dropped",
                    SEVERAL,
                    f"a record naming no span fits {len(fits)} calls of its trace at once "
                    "(by time: none names a response id to tell them apart), so it joins "
                    "none; its instrumentation does not put it inside the call's span",
                )
                return []
            self._bytes += loose.size
            if len(fits) == 1:
                self._join(self._waiting[fits[0]], loose)
                return self._settle_ready(*fits[0])
            self._seq += 1
            self._orphans[self._seq] = loose
            return self._settle_ready("", "")

    def add_record(self, record: Record) -> list[Call]:
        """A log record: a message, a choice or an operation's details, kept with its call's
        other halves (other records are ignored). The calls now settled, or ready at once (a
        details record with no span to wait for)."""
        event = record["event"]
        if event not in MESSAGE_EVENTS and event not in (CHOICE_EVENT, DETAILS_EVENT):
            return []
        trace_id, span_id = record["trace_id"], record["span_id"]
        if event == DETAILS_EVENT:
            details = genai_call(record["attrs"], trace_id=trace_id, span_id=span_id)
            if not span_id:  # outside any span: nothing to join
                if details.output:
                    return [details]
                self._no_content(None)
                return []
        elif not span_id and record["time"] and (trace_id or event == CHOICE_EVENT):
            loose = self._loose_record(record)
            return [] if loose is None else self._loose(loose)
        elif not span_id:  # a message outside any trace cannot be told apart from others
            self.tally.count(
                "dropped",
                NO_SPAN,
                f"a {event} record names no span (span id empty or zero), so it joins no "
                "call; its instrumentation does not put it inside the call's span",
            )
            return []
        with self._lock:
            halves = self._halves(trace_id, span_id)
            if halves is None:
                return []
            self._seq += 1
            body = record["body"]
            added = 0
            if event == DETAILS_EVENT:
                halves.details = details
                added = footprint(details.input, details.output, details.attrs)
            elif event == CHOICE_EVENT:
                choice = choice_of(record)
                if halves.choice is None or choice[0] < halves.choice[0]:
                    halves.choice = choice
                    added = footprint(choice[1], choice[3])
            else:
                role = MESSAGE_EVENTS[event]
                said = body.get("role") if isinstance(body, dict) else None
                if isinstance(said, str):
                    role = said
                order = (int(record["time"] or 0), self._seq)
                if role == "user" and (halves.user is None or order >= halves.user[0]):
                    text = body_text(body)
                    halves.user = (order, text)
                    added = footprint(text)
            halves.size += added
            self._bytes += added
            return self._settle_ready(trace_id, span_id)

    def _loose_record(self, record: Record) -> _Loose | None:
        """A choice or user message record naming no span, as it waits; None for another
        message (nothing of it is kept, as for one inside its span)."""
        at, event, body = int(record["time"]), record["event"], record["body"]
        response_id = record["attrs"].get("gen_ai.response.id")
        response_id = response_id if isinstance(response_id, str) and response_id else None
        loose = _Loose(time.monotonic(), record["trace_id"], at, response_id, ENTRY_BYTES)
        if event == CHOICE_EVENT:
            loose.choice = choice_of(record)
            loose.size += footprint(loose.choice[1], loose.choice[3])
            return loose
        role = MESSAGE_EVENTS[event]
        said = body.get("role") if isinstance(body, dict) else None
        if isinstance(said, str):
            role = said
        if role != "user":
            return None
        with self._lock:
            self._seq += 1
            loose.user = ((at, self._seq), body_text(body))
        loose.size += footprint(loose.user[1])
        return loose

    def _halves(self, trace_id: str, span_id: str) -> _Halves | None:
        """The entry of a call (a new one when none waits); None when it was settled."""
        key = (trace_id, span_id)
        if key in self._settled:
            return None
        halves = self._waiting.get(key)
        if halves is None:
            halves = self._waiting[key] = _Halves(time.monotonic())
            self._bytes += halves.size
        return halves

    def _settle_ready(self, trace_id: str, span_id: str) -> list[Call]:
        """The call if complete, and the oldest ones while the table is over its bounds."""
        out: list[Call] = []
        key = (trace_id, span_id)
        halves = self._waiting.get(key)
        if halves is not None and halves.complete():
            self._settle(key, out)
        while self._orphans and (
            len(self._orphans) > self.max_calls or self._bytes > self.max_bytes
        ):
            self._drop_orphan()
        while self._waiting and (
            len(self._waiting) > self.max_calls or self._bytes > self.max_bytes
        ):
            if not self.early:
                log.warning(
                    "OTLP: more than %d calls (or %d bytes) wait for their other half; the "
                    "oldest are settled early (simeval serve --otlp-join-mb)",
                    self.max_calls,
                    self.max_bytes,
                )
            self.early += 1
            self._settle(next(iter(self._waiting)), out)
        return out

    def _settle(self, key: tuple[str, str], out: list[Call]) -> None:
        halves = self._waiting.pop(key)
        self._bytes -= halves.size
        self._settled[key] = None
        while len(self._settled) > self.max_calls:
            self._settled.popitem(last=False)
        call = merge(halves, key)
        if call is None:
            self._no_content(halves.span)
        else:
            out.append(call)

    def _drop_orphan(self) -> None:
        """The oldest orphan choice, which joined no span: dropped, counted, said once."""
        _, loose = self._orphans.popitem(last=False)
        self._bytes -= loose.size
        self.tally.count(
            "dropped",
            NO_SPAN,
            "a GenAI record names no span and fitted no span that waited for one (of its "
            "trace, by response id or time); its instrumentation emits it outside the "
            "call's span",
        )

    def _no_content(self, span: Call | None) -> None:
        """A call dropped for want of content: counted, said once (the usual cause is an
        instrumentation with its content capture off)."""
        what = f"a GenAI span ({span.name[:100]!r})" if span is not None else "a GenAI record"
        self.tally.count(
            "dropped",
            NO_CONTENT,
            f"{what} came without message content and no log record brought it: turn on the "
            "instrumentation's content capture (e.g. "
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT) and export its logs",
        )

    def settled(self, span: Call) -> None:
        """Mark a span's call stored already (it came whole): its records are then dropped."""
        with self._lock:
            key = (span.trace_id, span.span_id)
            halves = self._waiting.pop(key, None)
            if halves is not None:
                self._bytes -= halves.size
            self._settled[key] = None
            while len(self._settled) > self.max_calls:
                self._settled.popitem(last=False)

    def expired(self, now: float | None = None) -> list[Call]:
        """The calls whose wait is over, settled (oldest first)."""
        now = time.monotonic() if now is None else now
        out: list[Call] = []
        with self._lock:
            while self._waiting:
                key, halves = next(iter(self._waiting.items()))
                if now - halves.born < self.wait_s:
                    break
                self._settle(key, out)
            while self._orphans and now - next(iter(self._orphans.values())).arrived >= self.wait_s:
                self._drop_orphan()
        return out

    def drain(self) -> list[Call]:
        """Every waiting call settled now (the server is stopping)."""
        with self._lock:
            out: list[Call] = []
            while self._waiting:
                self._settle(next(iter(self._waiting)), out)
            while self._orphans:
                self._drop_orphan()
            return out
