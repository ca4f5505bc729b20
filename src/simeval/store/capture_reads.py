"""The SQL of reading captures by scope: the walk in time order (``simeval.service.capture_walk``)
and the counts under one metadata pair (``simeval.service.meta_counts``).

A walk step reads captures by the key ``(captured_at, id)`` after the last one read (a
keyset). A metadata pair the ``capture_meta`` index answers ("served") walks that table's
index (key, value, captured_at, capture_id) for the first pair, the others are ``EXISTS`` on
its primary key (capture_id, key). Which pairs are served is decided by the caller (it knows
the indexed keys); the pairs it checks itself are only flagged here (``Capture.meta`` is then
read, or required).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVarTuple

from sqlalchemy import Select, exists, func, select, tuple_
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session, aliased

from simeval.store.packing import packed_count_sql
from simeval.store.rollups import reviews_of
from simeval.store.tables import (
    Capture,
    CaptureMeta,
    MetaCaptureRollup,
    MetaRollup,
    Review,
)

Pair = tuple[str, str]
Ts = TypeVarTuple("Ts")
_CHUNK = 1000  # captures of one pair read at a time through the metadata index
_IN_CHUNK = 500  # ids in one IN (...) list


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


def _meta_query(scope: CaptureScope, served: Sequence[Pair], columns: Sequence[Any]) -> Any:
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


def _capture_conditions(q: Select[*Ts], scope: CaptureScope, with_meta: bool) -> Select[*Ts]:
    if scope.scored:
        q = q.where(Capture.scores.is_not(None))
    if scope.conversation_id is not None:
        q = q.where(Capture.conversation_id == scope.conversation_id)
    if scope.reviewed:  # only reviewed: the reviewed captures, not every capture
        q = q.where(Capture.id.in_(select(Review.capture_id).where(Review.capture_id.is_not(None))))
    if with_meta:
        q = q.where(Capture.meta.is_not(None))
    return q


def step_by_time(
    s: Session, scope: CaptureScope, newest: bool, last: tuple[datetime, int] | None, size: int
) -> tuple[list[Capture], tuple[datetime, int] | None]:
    """Up to ``size`` captures in ``scope`` after the key ``last``, through the time index,
    and the key of the last one read (None when none is left)."""
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


def step_by_meta(
    s: Session,
    scope: CaptureScope,
    served: Sequence[Pair],
    newest: bool,
    last: tuple[datetime, int] | None,
    size: int,
) -> tuple[list[Capture], tuple[datetime, int] | None]:
    """Up to ``size`` captures in ``scope`` after the key ``last``, through the metadata
    index of the first ``served`` pair, and the key of the last index row read (None when
    none is left)."""
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


def count_captures_in_scope(s: Session, scope: CaptureScope, served: Sequence[Pair]) -> int:
    """How many captures are in ``scope`` when the index serves every metadata pair
    (``served``, possibly none): a COUNT over ``capture_meta``'s index, else the captures'."""
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


def _scope_query(scope: CaptureScope, served: Sequence[Pair], columns: list[Any]) -> Any:
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


def result_count_groups(
    s: Session, scope: CaptureScope, served: Sequence[Pair]
) -> Iterator[tuple[bytes | None, int]]:
    """(the packed header's count bytes, how many captures hold that count) over the
    captures in ``scope``: one row per distinct count, grouped in the database."""
    count_bytes = packed_count_sql(Capture.scores)
    q = _scope_query(scope, served, [count_bytes, func.count()]).group_by(count_bytes)
    for n, k in s.execute(q):
        yield n, int(k)


def scope_blobs(
    s: Session, scope: CaptureScope, served: Sequence[Pair], with_meta: bool
) -> Iterator[Any]:
    """The rows (packed results, and the metadata when ``with_meta``) of the captures in
    ``scope``, streamed a few thousand at a time."""
    q = _scope_query(scope, served, [Capture.scores, *([Capture.meta] if with_meta else [])])
    yield from s.execute(q.execution_options(yield_per=5000))


def select_in_scope(
    scope: CaptureScope,
    served: Sequence[Pair],
    checked: bool,
    columns: list[Any],
    newest: bool = False,
) -> Any:
    """A select of ``columns`` (of ``Capture``) over every capture in ``scope``, in time
    order (oldest first unless ``newest``); with ``checked`` (pairs the index cannot answer)
    ``Capture.meta`` is selected last, for the caller to check them."""
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
    q = _capture_conditions(q, scope, checked)
    return q.order_by(at.desc(), ident.desc()) if newest else q.order_by(at, ident)


# -- counts under one metadata pair (``simeval.service.meta_counts``)


def blobs_between(
    s: Session, pair: Pair, start: datetime | None, end: datetime | None
) -> Iterator[bytes | None]:
    """The packed results of the captures holding ``pair`` in [start, end), a chunk at a time
    through the metadata index (key, value, captured_at, capture_id)."""
    key, value = pair
    q = (
        select(CaptureMeta.captured_at, CaptureMeta.capture_id, Capture.scores)
        .join(Capture, Capture.id == CaptureMeta.capture_id)
        .where(CaptureMeta.key == key, CaptureMeta.value == value)
        .order_by(CaptureMeta.captured_at, CaptureMeta.capture_id)
        .limit(_CHUNK)
    )
    if start is not None:
        q = q.where(CaptureMeta.captured_at >= start)
    if end is not None:
        q = q.where(CaptureMeta.captured_at < end)
    step = q
    while True:
        rows = s.execute(step).all()
        for _, _, blob in rows:
            yield blob
        if len(rows) < _CHUNK:
            return
        at, cid = rows[-1][0], rows[-1][1]
        step = q.where(tuple_(CaptureMeta.captured_at, CaptureMeta.capture_id) > tuple_(at, cid))


def holding_pair(s: Session, pair: Pair, ids: list[int]) -> set[int]:
    """Which of the captures ``ids`` hold ``pair``: their rows of the pair's key looked up on
    ``capture_meta``'s primary key (capture_id, key), the value compared here."""
    held: set[int] = set()
    for i in range(0, len(ids), _IN_CHUNK):
        held.update(
            cid
            for cid, v in s.execute(
                select(CaptureMeta.capture_id, CaptureMeta.value).where(
                    CaptureMeta.capture_id.in_(ids[i : i + _IN_CHUNK]), CaptureMeta.key == pair[0]
                )
            )
            if v == pair[1]
        )
    return held


def rollup_sum(
    pair: Pair, eval_id: int | None, h1: datetime | None, h2: datetime | None
) -> Select[int, int]:
    """The sums of ``meta_rollup`` over the hours [h1, h2) of ``pair`` (of ``eval_id``, or
    every eval): one range of its primary key (key, value, bucket)."""
    q = select(func.sum(MetaRollup.count), func.sum(MetaRollup.passes)).where(
        MetaRollup.key == pair[0], MetaRollup.value == pair[1]
    )
    if h1 is not None:
        q = q.where(MetaRollup.bucket >= h1)
    if h2 is not None:
        q = q.where(MetaRollup.bucket < h2)
    if eval_id is not None:
        q = q.where(MetaRollup.eval_id == eval_id)
    return q


def rollup_totals(
    s: Session, pair: Pair, eval_id: int | None, h1: datetime | None, h2: datetime | None
) -> tuple[int, int]:
    """(results, passes) ``meta_rollup`` counts over the hours [h1, h2) of ``pair``."""
    count, passes = s.execute(rollup_sum(pair, eval_id, h1, h2)).one()
    return int(count or 0), int(passes or 0)


def captured_reviews(
    s: Session, eval_ids: Iterable[int] | None, start: datetime | None, end: datetime | None
) -> list[tuple[int, int | None, float, bytes | None]]:
    """(capture id, eval id, review score, packed results) of the reviews of captured results
    (of ``eval_ids``, or all) whose captures were captured in [start, end)."""
    columns = [Review.capture_id, Review.eval_id, Review.score, Capture.scores]
    q = reviews_of(columns, eval_ids, start, end)
    return list(s.execute(q).all())


def capture_rollup_sum(pair: Pair, h1: datetime | None, h2: datetime | None) -> Select[int]:
    """The captures ``meta_capture_rollup`` counts over the hours [h1, h2) of ``pair``: one
    range of its primary key (key, value, bucket)."""
    q = select(func.sum(MetaCaptureRollup.count)).where(
        MetaCaptureRollup.key == pair[0], MetaCaptureRollup.value == pair[1]
    )
    if h1 is not None:
        q = q.where(MetaCaptureRollup.bucket >= h1)
    if h2 is not None:
        q = q.where(MetaCaptureRollup.bucket < h2)
    return q


def capture_rollup_total(s: Session, pair: Pair, h1: datetime | None, h2: datetime | None) -> int:
    """How many captures ``meta_capture_rollup`` counts over the hours [h1, h2) of ``pair``."""
    return int(s.scalar(capture_rollup_sum(pair, h1, h2)) or 0)


def indexed_count(s: Session, pair: Pair, start: datetime | None, end: datetime | None) -> int:
    """How many captures hold ``pair`` in [start, end): a COUNT over one range of the metadata
    index (key, value, captured_at, capture_id), used for partial hours (at most one each)."""
    q = select(func.count()).where(CaptureMeta.key == pair[0], CaptureMeta.value == pair[1])
    if start is not None:
        q = q.where(CaptureMeta.captured_at >= start)
    if end is not None:
        q = q.where(CaptureMeta.captured_at < end)
    return int(s.scalar(q) or 0)


def entries_past(s: Session, mark: int) -> Iterator[Row[str, str, datetime]]:
    """(key, value, captured_at) of the ``capture_meta`` rows of the captures past the
    watermark ``mark``: a range of its primary key (capture_id, key) and nothing else in the
    statement, so no plan prefers the metadata index (a key and value there would walk every
    capture of the value)."""
    q = select(CaptureMeta.key, CaptureMeta.value, CaptureMeta.captured_at).where(
        CaptureMeta.capture_id > mark
    )
    yield from s.execute(q)
