"""Keyset cursors: the opaque text a listing answers beside a page (``next_cursor``) and takes
back (``cursor=``) to go on after the page's last row.

A cursor is the sort key of the last row read (for instance its time and id), as JSON in
URL-safe base64 without padding: the next page starts after that key, so paging does not
skip rows one by one (``offset``) and rows stored meanwhile do not shift the pages. Datetimes
travel as naive-UTC ISO text, ints and strings as they are. A cursor that is not one of these
(cut, edited, from another listing) is ``InvalidInput`` naming the problem.

>>> from datetime import datetime
>>> text = encode_cursor((datetime(2026, 5, 1, 12, 0), 42))
>>> decode_cursor(text, (datetime, int))
(datetime.datetime(2026, 5, 1, 12, 0), 42)
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeAlias, TypeVar

from simeval.checks import DEEP_OFFSET_HINT, MAX_DEEP_OFFSET, MAX_ID
from simeval.errors import InvalidInput

T = TypeVar("T")

CursorValue: TypeAlias = datetime | int | str
"""A value of a cursor's sort key."""

MAX_CURSOR = 2000  # characters: a key of a time, an id and a 200-character text fits


def _plain(value: object) -> int | str:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"a cursor holds datetimes, ints and strings, not {type(value).__name__}")
    return value


def encode_cursor(values: tuple[object, ...]) -> str:
    """The opaque cursor of a row's sort key ``values`` (datetimes, ints, strings)."""
    text = json.dumps([_plain(v) for v in values], ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _typed(value: object, kind: type) -> CursorValue:
    if kind is datetime:
        if not isinstance(value, str):
            raise ValueError
        when = datetime.fromisoformat(value)
        if when.tzinfo is not None:
            when = when.astimezone(UTC).replace(tzinfo=None)
        return when
    if kind is int:  # ids, a row kind, an index: an edited one past the columns is refused
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ID:
            raise ValueError
        return value
    if kind is str:
        if not isinstance(value, str) or "\x00" in value:
            raise ValueError
        return value
    raise TypeError(f"a cursor holds datetimes, ints and strings, not {kind.__name__}")


def decode_cursor(text: object, kinds: tuple[type, ...]) -> tuple[CursorValue, ...]:
    """The sort key a cursor from ``encode_cursor`` holds, one value of each of ``kinds``;
    ``InvalidInput`` for anything else."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("cursor must be the next_cursor text of a previous page")
    if len(text) > MAX_CURSOR:
        raise InvalidInput(f"cursor is longer than {MAX_CURSOR} characters: not one answered")
    raw = text.strip()
    try:
        data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        values = json.loads(data.decode())
        if not isinstance(values, list) or len(values) != len(kinds):
            raise ValueError
        return tuple(_typed(v, k) for v, k in zip(values, kinds, strict=True))
    except (ValueError, UnicodeDecodeError, binascii.Error, OverflowError):
        raise InvalidInput(_not_ours(raw)) from None


def _not_ours(raw: str) -> str:
    return f"cursor {raw[:40]!r} is not one this listing gave (use a page's next_cursor)"


OLDER, NEWER = "older", "newer"  # the way a listing (newest first) goes on from a cursor


@dataclass(frozen=True)
class Position:
    """Where a page of a newest-first listing starts: after ``key`` going ``direction``
    (``OLDER`` for the next page, ``NEWER`` for the previous one)."""

    direction: str
    key: tuple[CursorValue, ...]


def listing_cursor(listing: str, direction: str, key: tuple[object, ...]) -> str:
    """The cursor of a page of ``listing`` ("results", "captures", "runs", "conversations")
    starting after the
    row whose sort key is ``key``, going ``direction`` (``OLDER`` or ``NEWER``)."""
    return encode_cursor((listing, direction, *key))


def read_listing_cursor(text: object, listing: str, kinds: tuple[type, ...]) -> Position:
    """The position a ``listing_cursor`` of ``listing`` holds (its key one value of each of
    ``kinds``); ``InvalidInput`` "cursor ... is not one this listing gave" for anything else:
    cut or edited text, or a cursor of another listing."""
    name, direction, *key = decode_cursor(text, (str, str, *kinds))
    if name != listing or direction not in (OLDER, NEWER) or not isinstance(direction, str):
        raise InvalidInput(_not_ours(str(text).strip()))
    return Position(direction, tuple(key))


@dataclass
class Page(Generic[T]):
    """A page of a listing with the cursors that go on from it: ``next_cursor`` to older rows
    (None at the end), ``prev_cursor`` to newer ones (None on the first page)."""

    items: list[T]
    next_cursor: str | None = None
    prev_cursor: str | None = None


def keyset_page(
    listing: str,
    fetch: Callable[[Position | None, int], list[T]],
    key: Callable[[T], tuple[CursorValue, ...]],
    limit: int,
    position: Position | None,
    given_offset: bool = False,
) -> Page[T]:
    """A page of ``listing`` with its cursors. ``fetch(position, n)`` reads up to ``n`` rows
    after ``position`` in its direction (newest first from the top for None; older rows for
    ``OLDER``, newer ones oldest first for ``NEWER``); ``key`` is a row's sort key;
    ``given_offset``: the page was asked for by a non-zero offset (so it has newer rows).
    A page of newer rows that reaches the top is the first page, full."""
    fetched = fetch(position, limit + 1)
    more, items = len(fetched) > limit, fetched[:limit]
    if position is not None and position.direction == NEWER:
        if not more:  # nothing newer beyond: the top of the listing, as a full first page
            return keyset_page(listing, fetch, key, limit, None)
        items.reverse()
        return Page(
            items,
            listing_cursor(listing, OLDER, key(items[-1])),
            listing_cursor(listing, NEWER, key(items[0])),
        )
    if not items:  # past the end: back to the rows above the cursor, if any
        back = None if position is None else listing_cursor(listing, NEWER, position.key)
        return Page([], None, back)
    below = listing_cursor(listing, OLDER, key(items[-1])) if more else None
    above = position is not None or given_offset
    return Page(items, below, listing_cursor(listing, NEWER, key(items[0])) if above else None)


def page_position(
    cursor: str | None, offset: int, listing: str, kinds: tuple[type, ...]
) -> Position | None:
    """Where a page asked for by ``cursor`` (or by ``offset``: None) starts; a cursor with a
    non-zero offset is ``InvalidInput`` (they are two ways to say where), and so is an offset
    past ``MAX_DEEP_OFFSET`` (it would read every row before it: a cursor reads none)."""
    if cursor is None:
        if offset > MAX_DEEP_OFFSET:
            raise InvalidInput(
                f"offset {offset:,} is past {MAX_DEEP_OFFSET:,}, which would read every row before "
                f"it: {DEEP_OFFSET_HINT}"
            )
        return None
    if offset:
        raise InvalidInput("give a cursor or an offset, not both")
    return read_listing_cursor(cursor, listing, kinds)
