"""Checks that need no database: texts, eval names and scopes, times, capture payloads and
batch rows, JSON values, ids and paging. Each raises a ``SimevalError`` subclass naming the
problem.

The bottom layer beside ``simeval.errors``: it imports only the standard library and the
errors, so the light engine-side client (``simeval.Client``) checks a capture as the server
will without loading SQLAlchemy. The checks that need the scorer or the database are the
service's: ``simeval.service.option_checks.check_options`` and
``simeval.service.base.get_row``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from simeval.errors import InvalidInput, InvalidType, NotFound, Unstorable
from simeval.jsontypes import JSONObject, JSONValue

MAX_TEXT_CHARS = 1_000_000
MAX_NAME_CHARS = 200
MAX_JSON_DEPTH = 32
# eval names: letters, digits, '-', '_', '.' and spaces, so every name is a safe URL segment
NAME_ALLOWED = "letters, digits, '-', '_', '.' and spaces"
_NAME_EXTRA = frozenset("-_. ")


def check_storable(text: str, what: str) -> str:
    """``text`` if the database and JSON can hold it: no lone surrogate (not UTF-8, so the
    answer could not be serialised after the commit) and no NUL (PostgreSQL's text cannot hold
    it). Else ``InvalidInput`` naming ``what``.

    >>> check_storable("caf\u00e9", "output")
    'café'
    """
    if "\x00" in text:
        raise Unstorable(f"{what} contains a NUL character (\\x00), which cannot be stored")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Unstorable(
            f"{what} contains a lone surrogate ({text[exc.start]!r} at character {exc.start}), "
            "which is not valid Unicode text"
        ) from None
    return text


def check_storable_all(texts: list[str], what: str) -> None:
    """``check_storable`` and ``check_text_size`` on each text of a list (e.g. reference
    answers)."""
    for i, text in enumerate(texts):
        label = what if len(texts) == 1 else f"{what} {i + 1}"
        check_text_size(text, label)
        check_storable(text, label)


def check_json_value(value: object, what: str, depth: int = 0) -> None:
    """A JSON value the store can hold and give back: objects with string keys, arrays,
    storable strings, finite numbers, nested at most ``MAX_JSON_DEPTH`` levels."""
    if depth > MAX_JSON_DEPTH:
        raise Unstorable(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
    if isinstance(value, str):
        check_storable(value, what)
    elif isinstance(value, bool) or value is None or isinstance(value, int):
        return
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise Unstorable(f"{what} contains {value!r}, which JSON cannot hold")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise Unstorable(f"{what} has a key that is not a string: {key!r}")
            check_storable(key, f"{what} key")
            check_json_value(item, f"{what}.{key}"[:200], depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            check_json_value(item, what, depth + 1)
    else:  # a Python object, not JSON data: the caller's type mistake
        raise InvalidType(f"{what} is not JSON: {type(value).__name__}")


class Unset:
    """The type of ``UNSET``: ``isinstance(value, Unset)`` asks whether an argument was given."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Unset = Unset()
"""Marker for "leave unchanged" where None is a meaningful value (e.g. no input scope)."""

# The id columns are INTEGER (simeval.store.tables): PostgreSQL's ``integer`` holds at most
# 2^31-1 and refuses a larger operand with an error, so a larger id names nothing on either
# backend (SQLite hands out ids from 1 too, so no row it stores has a larger one).
MAX_ID = 2**31 - 1
MAX_OFFSET = MAX_ID  # a listing's offset: past any row count the tables can reach
# a listing that pages by cursor is read by offset this deep at most (pages of 50: page 200)
MAX_DEEP_OFFSET = 10_000
DEEP_OFFSET_HINT = "page on with cursor= (each page's next_cursor) instead"
MAX_PAGE = 10_000_000  # a studio page number (pages of 50: past MAX_ID rows)
# The times stored and filtered on: inside what Python's datetime holds after any offset or
# bucket arithmetic (years 1-9999) and both databases store and order (SQLite as ISO text,
# which sorts only with four-digit years). A capture from outside is a mistake. A time with
# an offset is checked as written (the year the schema's pattern declares): in UTC it may
# then lie up to a day outside, still far from the ends of the calendar.
MIN_TIME = datetime(1000, 1, 1)
MAX_TIME = datetime(9000, 1, 1)
TIME_RANGE = "between the years 1000 and 8999"


def utc_now() -> datetime:
    """Now as naive UTC: what the database stores."""
    return datetime.now(UTC).replace(tzinfo=None)


def as_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC time, a naive one taken as UTC (as the database stores it).

    >>> as_utc(datetime(2024, 5, 1, 12, 0))
    datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
    """
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def naive_utc(value: datetime) -> datetime:
    """``value`` as the naive UTC time the database stores, a naive one taken as UTC already.

    >>> naive_utc(datetime.fromisoformat("2024-05-01T14:00:00+02:00"))
    datetime.datetime(2024, 5, 1, 12, 0)
    """
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


EPOCH = datetime(1970, 1, 1)  # naive UTC, as the database stores times


def from_unix_ns(ns: int) -> datetime:
    """Nanoseconds since 1970 (an OTLP time) as the naive UTC time the database stores,
    exact to the microsecond; any 64-bit value (up to the year 2554) is one.

    >>> from_unix_ns(1_714_564_800_123_456_789)
    datetime.datetime(2024, 5, 1, 12, 0, 0, 123456)
    """
    return EPOCH + timedelta(microseconds=ns // 1000)


def unix_ns(value: datetime) -> int:
    """A time (naive UTC, or aware) in nanoseconds since 1970, exact to the microsecond:
    ``from_unix_ns`` the other way.

    >>> unix_ns(datetime(2024, 5, 1, 12, 0, 0, 123456))
    1714564800123456000
    """
    return (naive_utc(value) - EPOCH) // timedelta(microseconds=1) * 1000


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$", re.IGNORECASE)


def parse_time(value: object, what: str = "time", now: datetime | None = None) -> datetime | None:
    """A point in time as naive UTC: a datetime, a date, ISO 8601 text, or a relative age such
    as ``30m``, ``24h``, ``7d``, ``2w`` (that long before now). Naive times are taken as UTC.

    >>> parse_time("2024-05-01T12:00:00+02:00")
    datetime.datetime(2024, 5, 1, 10, 0)
    >>> parse_time("2d", now=datetime(2024, 5, 3))
    datetime.datetime(2024, 5, 1, 0, 0)
    >>> parse_time("1000-01-01T00:00:00+05:00")  # its year as written is in range
    datetime.datetime(999, 12, 31, 19, 0)
    """
    if value is None or value == "":
        return None
    try:
        return _read_time(value, what, now)
    except OverflowError:  # an offset or an age past the calendar's ends
        raise InvalidInput(f"{what} {value!r} is not a time {TIME_RANGE}") from None


def check_time(value: datetime, what: str) -> datetime:
    """``value`` (naive UTC) if it lies ``TIME_RANGE``, else ``InvalidInput`` naming ``what``.

    >>> check_time(datetime(2024, 5, 1), "captured_at")
    datetime.datetime(2024, 5, 1, 0, 0)
    """
    if not MIN_TIME <= value < MAX_TIME:
        raise InvalidInput(f"{what} {value} is not a time {TIME_RANGE}")
    return value


def _read_time(value: object, what: str, now: datetime | None) -> datetime:
    if isinstance(value, datetime):
        return _written_utc(value, what)
    if isinstance(value, date):
        return check_time(datetime(value.year, value.month, value.day), what)
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a date or time, not {value!r}")
    match = _RELATIVE.match(value)
    if match:
        amount, unit = float(match.group(1)), match.group(2).lower()
        span = {
            "m": timedelta(minutes=amount),
            "h": timedelta(hours=amount),
            "d": timedelta(days=amount),
            "w": timedelta(weeks=amount),
        }[unit]
        return check_time((now or utc_now()) - span, what)
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(
            f"{what} {value!r} is not an ISO 8601 date/time or an age like 24h, 7d"
        ) from None
    return _written_utc(parsed, what)


def _written_utc(value: datetime, what: str) -> datetime:
    # checked as written (its own offset's wall clock), then as naive UTC
    check_time(value.replace(tzinfo=None), what)
    return as_utc(value).replace(tzinfo=None)


def check_name(name: object) -> str:
    """An eval name as stored: stripped, 1-200 characters of ``NAME_ALLOWED``.

    >>> check_name("  capital-answer ")
    'capital-answer'
    """
    if not isinstance(name, str):
        raise InvalidType(f"eval name must be a string, not {type(name).__name__}")
    clean = name.strip()
    if not clean:
        raise InvalidInput("eval name is empty")
    if len(clean) > MAX_NAME_CHARS:
        raise InvalidInput(f"eval name is longer than {MAX_NAME_CHARS} characters")
    if any(unicodedata.category(c) == "Cc" for c in clean):
        raise InvalidInput("eval name contains a control character (e.g. a newline)")
    check_storable(clean, "eval name")
    bad = next((c for c in clean if not (c.isalnum() or c in _NAME_EXTRA)), None)
    if bad is not None:
        raise InvalidInput(f"eval name contains {bad!r}; a name may use only {NAME_ALLOWED}")
    if not clean.strip("."):
        # "." and ".." are path segments a browser folds away: /evals/.. would be /
        raise InvalidInput("eval name is made only of dots; a name needs a letter or digit")
    return clean


def check_lookup(value: str, what: str) -> str | None:
    """``value`` if it could name a stored row, None when it holds a NUL or a lone surrogate
    (no stored text does; PostgreSQL would refuse the query): the caller answers "not found"."""
    try:
        return check_storable(value, what)
    except Unstorable:
        return None


def read_text_file(path: str | os.PathLike[str], what: str) -> str:
    """A UTF-8 text file's content, with a one-line error for a missing or non-UTF-8 file."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{what} file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} file {path} is not UTF-8 text (byte {exc.start})") from None
    except IsADirectoryError:
        raise InvalidInput(f"{what} path {path} is a directory, not a file") from None


def load_json(text: str | bytes, what: str) -> JSONValue:
    """``json.loads(text)``, with a nesting too deep for the parser (a few thousand levels) an
    ``Unstorable`` naming ``what`` rather than a ``RecursionError``; a JSON syntax error is
    raised as ``json.JSONDecodeError`` for the caller to place.

    >>> load_json("[" * 100_000, "line 1")
    Traceback (most recent call last):
    ...
    simeval.errors.Unstorable: line 1 is nested too deep to read (more than 32 levels are refused)
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise Unstorable(
            f"{what} is nested too deep to read (more than {MAX_JSON_DEPTH} levels are refused)"
        ) from None


MAX_URL_CHARS = 2000
# What a URL a user gives may be, as a regular expression (the API schema states it too):
# http or https, a host name or IPv4 address of ASCII letters, digits and "._~-", or an IPv6
# address in brackets (RFC 3986's IPv6address); a port from 1 to 65535; then a path, query or
# fragment of printable ASCII (percent-encode the rest). No credentials before the host: they
# would be logged with the URL.
_H16 = "[0-9A-Fa-f]{1,4}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_LS32 = f"(?:{_H16}:{_H16}|{_OCTET}(?:\\.{_OCTET}){{3}})"
_IPV6 = "|".join(
    [
        f"(?:{_H16}:){{6}}{_LS32}",
        f"::(?:{_H16}:){{5}}{_LS32}",
        f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
        *(f"(?:(?:{_H16}:){{0,{n - 1}}}{_H16})?::(?:{_H16}:){{{4 - n}}}{_LS32}" for n in (2, 3)),
        f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
        f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
        f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
        f"(?:(?:{_H16}:){{0,6}}{_H16})?::",
    ]
)
_PORT = "(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
URL_PATTERN = f"https?://(?:[A-Za-z0-9._~-]+|\\[(?:{_IPV6})\\])(?::{_PORT})?(?:[/?#][!-~]*)?"
_URL = re.compile(URL_PATTERN)


def check_url(url: object, what: str, example: str = "https://host/path") -> str:
    """An http(s) URL as ``URL_PATTERN`` says (a host, a valid port, printable ASCII),
    stripped: no whitespace or control character inside, at most ``MAX_URL_CHARS``; else
    ``InvalidInput`` naming ``what``. Every URL a user gives (webhooks, the proxy's upstream,
    the OTLP export) is read here.

    >>> check_url(" http://127.0.0.1:9/hook ", "webhook")
    'http://127.0.0.1:9/hook'
    >>> check_url("http://[::1", "webhook")
    Traceback (most recent call last):
    simeval.errors.InvalidInput: webhook must be an http(s) URL such as https://host/path, not 'http://[::1'
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput(f"{what} must be an http(s) URL such as {example}")
    text = url.strip()
    if len(text) > MAX_URL_CHARS:
        raise InvalidInput(f"{what} has {len(text):,} characters; at most {MAX_URL_CHARS:,}")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise InvalidInput(f"{what} holds a space or a control character: {text!r}")
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # "http://[::1" (an unclosed IPv6 host), a port out of range
        parts, port_ok = None, False
    if (
        not _URL.fullmatch(text)
        or parts is None
        or not port_ok
        or parts.scheme not in ("http", "https")
        or not parts.hostname
    ):
        raise InvalidInput(f"{what} must be an http(s) URL such as {example}, not {text!r}")
    return text


def check_scope(scope: object) -> str | None:
    """An eval's input scope as stored: None (every input), or storable text; blank is None."""
    if scope is None:
        return None
    if not isinstance(scope, str):
        raise InvalidType(f"input scope must be a string or null, not {type(scope).__name__}")
    check_text_size(scope, "input scope")
    check_storable(scope, "input scope")
    # a blank scope from a form means "no scope"
    return scope.strip() or None


def check_text(value: object, what: str) -> str:
    """``value`` if it is a string, else ``InvalidType`` naming ``what``."""
    if not isinstance(value, str):
        raise InvalidType(f"{what} must be a string, not {type(value).__name__}")
    return value


def check_text_size(text: str, what: str) -> None:
    """``InvalidInput`` naming ``what`` when ``text`` is over ``MAX_TEXT_CHARS``."""
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInput(
            f"{what} has {len(text):,} characters; simeval stores at most {MAX_TEXT_CHARS:,} "
            "per text (nothing was stored)"
        )


def check_texts(input: object, output: object) -> tuple[str, str]:
    """A capture's or a test's input and output: strings of at most ``MAX_TEXT_CHARS``;
    the two strings."""
    input_text = check_text(input, "input")
    output_text = check_text(output, "output")
    check_text_size(input_text, "input")
    check_text_size(output_text, "output")
    check_storable(input_text, "input")
    check_storable(output_text, "output")
    return input_text, output_text


CheckedCapture = tuple[str, str, str | None, JSONObject | None, datetime | None]
# a checked capture with its capture key last (``check_capture_key``): stored at most once
KeyedCapture = tuple[str, str, str | None, JSONObject | None, datetime | None, str | None]
MAX_KEY_CHARS = 200


def check_capture_key(key: object) -> str | None:
    """A capture key as stored: None, or text of 1-200 characters without control characters.

    >>> check_capture_key("chatcmpl-123")
    'chatcmpl-123'
    """
    if key is None:
        return None
    if not isinstance(key, str):
        raise InvalidType(f"capture_key must be a string, not {type(key).__name__}")
    if not key.strip():
        raise InvalidInput("capture_key is empty")
    if len(key) > MAX_KEY_CHARS:
        raise InvalidInput(f"capture_key is longer than {MAX_KEY_CHARS} characters")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in key):
        raise InvalidInput("capture_key contains a control character or a lone surrogate")
    return key


def check_capture(
    input: object,
    output: object,
    conversation_id: object = None,
    metadata: object = None,
    captured_at: object = None,
) -> CheckedCapture:
    """The arguments of ``Service.capture`` checked, as it stores them: ``InvalidInput`` or
    ``InvalidType`` naming the problem. Lets a caller check a whole batch before storing any.

    >>> check_capture("q", "a", 42, None, "2024-05-01T12:00:00Z")
    ('q', 'a', '42', None, datetime.datetime(2024, 5, 1, 12, 0))
    """
    input_text, output_text = check_texts(input, output)
    conversation: str | None = None
    if conversation_id is not None:
        if isinstance(conversation_id, bool) or not isinstance(conversation_id, str | int):
            raise InvalidType("conversation_id must be a string")
        # "" is no conversation: stored, it would list a conversation no URL can name
        conversation = str(conversation_id) or None
    if conversation is not None:
        if len(conversation) > 200:
            raise InvalidInput("conversation_id is longer than 200 characters")
        check_storable(conversation, "conversation_id")
        if any(part in (".", "..") for part in conversation.split("/")):
            # a URL's "." and ".." segments are taken away by every client, so none names it
            raise InvalidInput(
                "conversation_id may not be '.' or '..', nor hold one between slashes:"
                " no URL could name the conversation"
            )
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise InvalidType(f"metadata must be a JSON object, not {type(metadata).__name__}")
        check_json_value(metadata, "metadata")  # what json.dumps would refuse, and more
    checked_at = parse_time(captured_at, "captured_at")
    return input_text, output_text, conversation, metadata, checked_at


CAPTURE_FIELDS = ("input", "output", "conversation_id", "metadata", "captured_at")
# a batch row may date a capture with "at" (a log's usual name) as well as "captured_at"
_ROW_KEYS = {*CAPTURE_FIELDS, "at", "capture_key"}


def check_capture_row(row: object, where: str) -> dict[str, Any]:
    """One row of a batch of captures checked as ``Service.capture`` checks its arguments,
    as the keyword arguments of ``capture``: a mapping with ``output`` and optionally
    ``input``, ``conversation_id``, ``metadata``, ``capture_key`` and ``at`` or
    ``captured_at``. Errors start
    with ``where`` (e.g. ``captures.jsonl line 3``).

    >>> check_capture_row({"output": "a", "at": "2024-05-01"}, "row 1")["captured_at"]
    datetime.datetime(2024, 5, 1, 0, 0)
    """
    if not isinstance(row, dict):
        raise InvalidInput(f"{where}: expected a JSON object")
    unknown = set(row) - _ROW_KEYS
    if unknown:
        raise InvalidInput(f"{where}: unknown key {sorted(unknown)[0]!r}")
    if "output" not in row:
        raise InvalidInput(f"{where}: no 'output'")
    try:
        checked = check_capture(
            row.get("input", ""),
            row["output"],
            row.get("conversation_id"),
            row.get("metadata"),
            row.get("at", row.get("captured_at")),
        )
        key = check_capture_key(row.get("capture_key"))
    except (InvalidInput, InvalidType) as exc:
        raise type(exc)(f"{where}: {exc}") from None
    out = dict(zip(CAPTURE_FIELDS, checked, strict=True))
    if key is not None:
        out["capture_key"] = key
    return out


def file_key_prefix(data: bytes) -> str:
    """The prefix of the capture keys derived for the lines of a captures file without their
    own key (``read_capture_lines``): ``file:`` and 16 hex digits of the SHA-256 of the file's
    bytes. The same content gives the same keys, so a rerun stores only what is missing.

    >>> file_key_prefix(b'{"output": "a"}\\n')
    'file:18fe23e230a112b5'
    """
    return f"file:{hashlib.sha256(data).hexdigest()[:16]}"


def read_capture_lines(
    text: str, source: str = "captures", key_prefix: str | None = None
) -> list[dict[str, Any]]:
    """JSON Lines of captures (one object a line, blank lines skipped), every line checked
    (``check_capture_row``) before any is returned; errors name ``source`` and the line.

    With ``key_prefix`` (``file_key_prefix``) a line without its own ``capture_key`` gets
    ``<key_prefix>:<line number>``: storing the lines again stores only those not stored yet.
    Lines end at ``\\n`` (a ``\\r`` before it is dropped), not at the other characters
    ``str.splitlines`` breaks on, which JSON text may hold unescaped (U+2028, U+0085...). A
    byte order mark at the start (files saved by some Windows editors) is not part of line 1.

    >>> [r["output"] for r in read_capture_lines('{"output": "a"}\\n\\n{"output": "b"}')]
    ['a', 'b']
    >>> read_capture_lines('\\n{"output": "a"}', key_prefix="file:ab")[0]["capture_key"]
    'file:ab:2'
    """
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(text.removeprefix("\ufeff").split("\n"), 1):
        if not line.strip():
            continue
        where = f"{source} line {n}"
        try:
            row = load_json(line, where)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{where}: not JSON ({exc.msg}, column {exc.colno})") from None
        checked = check_capture_row(row, where)
        if key_prefix is not None and "capture_key" not in checked:
            checked["capture_key"] = f"{key_prefix}:{n}"
        rows.append(checked)
    return rows


def check_id(value: Any, what: str) -> int:
    """A row id: a positive integer (or its digits), else ``InvalidInput``; one over
    ``MAX_ID`` names nothing (``NotFound``), as no database can hold it.

    >>> check_id("12", "run")
    12
    >>> check_id("12\x85", "run")
    Traceback (most recent call last):
    ...
    simeval.errors.InvalidInput: run id must be a positive integer, not '12\x85'
    """
    if isinstance(value, bool):
        raise InvalidInput(f"{what} id must be a positive integer, not {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{what} id must be a positive integer, not {value!r}") from None
    # as written: no sign, no leading zero, no whitespace (int() would take " 12\x85")
    if number < 1 or str(number) != str(value):
        raise InvalidInput(f"{what} id must be a positive integer, not {value!r}")
    if number > MAX_ID:
        raise NotFound(f"no {what} with id {value}")
    return number


def check_page(limit: object, offset: object) -> tuple[int, int]:
    """A listing's page: ``limit`` in [1, 100000], ``offset`` in [0, ``MAX_OFFSET``]."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100_000:
        raise InvalidInput(f"limit must be an integer in [1, 100000], not {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET:
        raise InvalidInput(f"offset must be an integer in [0, {MAX_OFFSET}], not {offset!r}")
    return limit, offset


def read_capture_file(data: bytes, source: str, keyed: bool = True) -> list[dict[str, Any]]:
    """The captures of a JSON Lines file's bytes, every line checked (``read_capture_lines``)
    before any is returned. ``keyed``: a line without its own capture key is keyed by the
    file's content and its line number (``file_key_prefix``), so storing the file again
    stores only the lines not stored yet; without it every line is a new capture.

    >>> [r["capture_key"] for r in read_capture_file(b'{"output": "a"}\\r\\n', "c.jsonl")]
    ['file:d6471d2ad6230ddb:1']
    """
    try:
        # newlines as a text file reads them (\r\n and \r are \n); a raw \r cannot be
        # inside a JSON string, so no capture's text changes
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"captures file {source} is not UTF-8 text (byte {exc.start})") from None
    return read_capture_lines(text, source, file_key_prefix(data) if keyed else None)
