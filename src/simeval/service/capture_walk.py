"""Captures in time order, a chunk at a time, selected in the database: the walk under every
listing, count and export of captures and captured results.

A walk goes newest (or oldest) first by the key ``(captured_at, id)``, each step starting
after the last capture read (a keyset: no row is skipped one by one, and captures stored
meanwhile do not shift it). A metadata filter is answered from ``capture_meta`` (migration
0010, ``simeval.store.meta_index``) when its key is indexed and its value short enough: the
first such pair walks that table's index (key, value, captured_at, capture_id), the others
are ``EXISTS`` on its primary key (capture_id, key), so a selective filter reads only the
captures it returns. A pair the index cannot answer (a key not indexed, a value over 200
characters) is checked on the captures read, as before: correct, and slower.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, select, tuple_
from sqlalchemy.orm import Session, aliased

from simeval.service.filters import meta_matches
from simeval.service.settings import answered_meta_keys
from simeval.store import PACK_HEAD, Capture, CaptureMeta, Review, packed_fingerprints
from simeval.store.meta_index import answerable

FIRST_CHUNK = 32  # captures read by a walk's first step: a page of results needs a few
MOST_CHUNK = 512  # ... doubling up to this many for a long walk

Pair = tuple[str, str]


@dataclass(frozen=True)
class CaptureScope:
    """Which captures a walk takes: every given condition must hold.

    ``meta``: (key, value) pairs as ``meta_matches`` compares them; ``since`` inclusive,
    ``until`` exclusive; ``scored``: only captures with results; ``reviewed``: only captures
    with a review."""

    meta: tuple[Pair, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    conversation_id: str | None = None
    scored: bool = False
    reviewed: bool = False


def split_pairs(s: Session, pairs: tuple[Pair, ...]) -> tuple[list[Pair], list[Pair]]:
    """``pairs`` as (answered by ``capture_meta``, checked on the captures read)."""
    keys = answered_meta_keys(s) if pairs else ()
    served = [p for p in pairs if answerable(p, keys)]
    return served, [p for p in pairs if p not in served]


def _meta_query(scope: CaptureScope, served: list[Pair], columns: list[Any]) -> Any:
    """``columns`` of the ``capture_meta`` rows of the first served pair (its index walks
    them) whose capture holds the other served pairs and falls in the scope's times."""
    first = aliased(CaptureMeta)
    key, value = served[0]
    q = select(*[getattr(first, c) if isinstance(c, str) else c for c in columns])
    q = q.select_from(first)
    q = q.where(first.key == key, first.value == value)
    for other_key, other_value in served[1:]:
        other = aliased(CaptureMeta)
        q = q.where(
            exists().where(
                other.capture_id == first.capture_id,
                other.key == other_key,
                other.value == other_value,
            )
        )
    if scope.since is not None:
        q = q.where(first.captured_at >= scope.since)
    if scope.until is not None:
        q = q.where(first.captured_at < scope.until)
    return q, first


def _capture_conditions(q: Any, scope: CaptureScope, with_meta: bool) -> Any:
    if scope.scored:
        q = q.where(Capture.scores.is_not(None))
    if scope.conversation_id is not None:
        q = q.where(Capture.conversation_id == scope.conversation_id)
    if scope.reviewed:  # only reviewed: the reviewed captures, not every capture
        q = q.where(Capture.id.in_(select(Review.capture_id).where(Review.capture_id.is_not(None))))
    if with_meta:
        q = q.where(Capture.meta.is_not(None))
    return q


def capture_chunks(
    s: Session,
    scope: CaptureScope,
    *,
    newest: bool = True,
    after: tuple[datetime, int] | None = None,
    first: int = FIRST_CHUNK,
) -> Iterator[list[Capture]]:
    """The captures in ``scope``, newest (or oldest) first, in lists of a few, starting after
    the key ``after`` = (captured_at, id) in the walk's direction (None: from the start)."""
    served, checked = split_pairs(s, scope.meta)
    size = first
    last = after
    while True:
        if served:
            caps, last = _step_by_meta(s, scope, served, newest, last, size)
        else:
            caps, last = _step_by_time(s, scope, newest, last, size)
        if last is None:
            return
        if checked:
            caps = [c for c in caps if meta_matches(c.meta, tuple(checked))]
        if caps:
            yield caps
        size = min(size * 2, MOST_CHUNK)


def _step_by_time(
    s: Session, scope: CaptureScope, newest: bool, last: tuple[datetime, int] | None, size: int
) -> tuple[list[Capture], tuple[datetime, int] | None]:
    q = _capture_conditions(select(Capture), scope, bool(scope.meta))
    if scope.since is not None:
        q = q.where(Capture.captured_at >= scope.since)
    if scope.until is not None:
        q = q.where(Capture.captured_at < scope.until)
    key = tuple_(Capture.captured_at, Capture.id)
    if last is not None:
        q = q.where(key < tuple_(*last) if newest else key > tuple_(*last))
    if newest:
        q = q.order_by(Capture.captured_at.desc(), Capture.id.desc())
    else:
        q = q.order_by(Capture.captured_at, Capture.id)
    caps = list(s.scalars(q.limit(size)))
    return caps, ((caps[-1].captured_at, caps[-1].id) if caps else None)


def _step_by_meta(
    s: Session,
    scope: CaptureScope,
    served: list[Pair],
    newest: bool,
    last: tuple[datetime, int] | None,
    size: int,
) -> tuple[list[Capture], tuple[datetime, int] | None]:
    q, m = _meta_query(scope, served, ["captured_at", "capture_id"])
    key = tuple_(m.captured_at, m.capture_id)
    if last is not None:
        q = q.where(key < tuple_(*last) if newest else key > tuple_(*last))
    if newest:
        q = q.order_by(m.captured_at.desc(), m.capture_id.desc())
    else:
        q = q.order_by(m.captured_at, m.capture_id)
    found = s.execute(q.limit(size)).all()
    if not found:
        return [], None
    ids = [cid for _, cid in found]
    load = _capture_conditions(select(Capture).where(Capture.id.in_(ids)), scope, False)
    by_id = {c.id: c for c in s.scalars(load)}
    return [by_id[i] for i in ids if i in by_id], (found[-1][0], found[-1][1])


def count_in_scope(s: Session, scope: CaptureScope) -> int:
    """How many captures ``capture_chunks`` gives: a COUNT over ``capture_meta``'s index when
    the index answers every metadata pair, else the captures' count (or the walk)."""
    served, checked = split_pairs(s, scope.meta)
    if checked:
        return sum(len(c) for c in capture_chunks(s, scope, first=MOST_CHUNK))
    if not served:
        q = _capture_conditions(select(func.count(Capture.id)), scope, False)
        if scope.since is not None:
            q = q.where(Capture.captured_at >= scope.since)
        if scope.until is not None:
            q = q.where(Capture.captured_at < scope.until)
        return int(s.scalar(q) or 0)
    q, m = _meta_query(scope, served, [func.count()])
    if scope.scored or scope.conversation_id is not None or scope.reviewed:
        q = _capture_conditions(q.join(Capture, Capture.id == m.capture_id), scope, False)
    return int(s.scalar(q) or 0)


def count_results_in_scope(s: Session, scope: CaptureScope, eval_id: int | None) -> int:
    """How many captured results (of ``eval_id``, or all) the captures in ``scope`` hold,
    from each capture's packed results' header (their count, grouped in the database: one
    row per distinct count) or their eval ids column, not from the captures' rows."""
    served, checked = split_pairs(s, scope.meta)
    count_bytes = func.substr(Capture.scores, 5, 4)  # the header's uint32 count (packing)
    if eval_id is None and not checked:
        q = _scope_query(scope, served, [count_bytes, func.count()]).group_by(count_bytes)
        return sum(int.from_bytes(bytes(n), "little") * k for n, k in s.execute(q) if n)
    q = _scope_query(scope, served, [Capture.scores, *([Capture.meta] if checked else [])])
    pairs, total = tuple(checked), 0
    for row in s.execute(q.execution_options(yield_per=5000)):
        if row[0] is None or (checked and not meta_matches(row[1], pairs)):
            continue
        total += _entries(bytes(row[0]), eval_id)
    return total


def _scope_query(scope: CaptureScope, served: list[Pair], columns: list[Any]) -> Any:
    """``columns`` of the captures in ``scope`` (of the served pairs' ``capture_meta`` rows
    joined to their captures, when there are served pairs)."""
    if served:
        q, m = _meta_query(scope, served, columns)
        q = q.join(Capture, Capture.id == m.capture_id)
    else:
        q = select(*columns)
        if scope.since is not None:
            q = q.where(Capture.captured_at >= scope.since)
        if scope.until is not None:
            q = q.where(Capture.captured_at < scope.until)
    return _capture_conditions(q, scope, len(served) < len(scope.meta))


def _entries(blob: bytes, eval_id: int | None) -> int:
    """The results a packed blob holds (of ``eval_id``: 0 or 1, an eval scores a capture
    once), reading its eval ids column only."""
    _, _, nfp, n = PACK_HEAD.unpack_from(blob)
    if eval_id is None:
        return int(n)
    _, at = packed_fingerprints(blob, nfp)
    column, key = blob[at : at + 8 * n], eval_id.to_bytes(8, "little", signed=True)
    found = column.find(key)
    while found != -1:
        if found % 8 == 0:  # an entry, not bytes across two
            return 1
        found = column.find(key, found + 1)
    return 0


def scope_select(
    s: Session, scope: CaptureScope, columns: list[Any], *, newest: bool = False
) -> tuple[Any, tuple[Pair, ...]]:
    """A select of ``columns`` (of ``Capture``) over every capture in ``scope``, in time
    order (oldest first unless ``newest``), for a reader of whole columns (compare) that
    streams them without an object per capture; and the metadata pairs ``capture_meta``
    cannot answer: then ``Capture.meta`` is selected last, for the caller to check them
    (``meta_matches``)."""
    served, checked = split_pairs(s, scope.meta)
    wanted = [*columns, *([Capture.meta] if checked else [])]
    if served:
        q, m = _meta_query(scope, served, wanted)
        q = q.join(Capture, Capture.id == m.capture_id)
        at, ident = m.captured_at, m.capture_id
    else:
        q = select(*wanted)
        if scope.since is not None:
            q = q.where(Capture.captured_at >= scope.since)
        if scope.until is not None:
            q = q.where(Capture.captured_at < scope.until)
        at, ident = Capture.captured_at, Capture.id
    q = _capture_conditions(q, scope, bool(checked))
    q = q.order_by(at.desc(), ident.desc()) if newest else q.order_by(at, ident)
    return q, tuple(checked)
