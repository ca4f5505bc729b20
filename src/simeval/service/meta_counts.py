"""Counts of captured results under one metadata filter, from ``meta_rollup``.

``meta_rollup`` (``simeval.store.meta_rollup``) counts, per indexed metadata value, hour and
eval, the results of the captures up to the rollup's watermark. A count under one answered
pair (key, value), with an eval, a verdict, a review filter and a time range, sums the whole
hours of that value from the table's primary-key range, and adds from the captures what the
table does not hold: the partial hours at either end of the range (through the metadata
index, by time) and the captures past the watermark (a few hundred, by id). Reviews are
applied on read, as the trend rollup's readers apply them: only reviews of captures holding
the pair count. Several pairs, or a pair the index cannot answer, are counted by the walk.

The number of captures under one answered pair (``/api/captures?meta=``'s total) is summed the
same way from ``meta_capture_rollup`` (captures per key, value and hour, scored or not): the
whole hours from its primary-key range, the partial hours counted on the metadata index,
the captures past the watermark read by id (``capture_count``).

A pair whose key the rollups do not count (``meta_index.NOT_ROLLED_UP``: per-capture values
such as ``latency_ms``, each held by few captures) is counted from the metadata index alone:
its captures in the range, one range of the index.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from simeval.checks import naive_utc
from simeval.service.capture_walk import CaptureScope, split_pairs
from simeval.store import PACK_HEAD, Capture, CaptureMeta, Review, packed_fingerprints
from simeval.store.meta_index import rolled_up
from simeval.store.meta_rollup import watermark, whole_hours
from simeval.store.packing import unpack_results
from simeval.store.rollups import chunks_after, reviews_of
from simeval.store.tables import MetaCaptureRollup, MetaRollup

_CHUNK = 1000
_HOUR = timedelta(hours=1)
Pair = tuple[str, str]


@dataclass
class MetaCounts:
    """Captured results under one pair: how many, how many pass (effective: a review
    decides), how many are reviewed, and how many of those pass."""

    count: int = 0
    passes: int = 0
    reviewed: int = 0
    reviewed_passes: int = 0


def _add_blob(out: MetaCounts, blob: bytes | None, eval_id: int | None) -> None:
    """Add one capture's automated results (of ``eval_id``, or all) to ``out``."""
    if not blob:
        return
    blob = bytes(blob)
    _, _, nfp, n = PACK_HEAD.unpack_from(blob)
    if n == 0:
        return
    _, at = packed_fingerprints(blob, nfp)
    passed_at = at + 12 * n + 8 * n + 8 * n + 4 * n
    passed = blob[passed_at : passed_at + n]
    if eval_id is None:
        out.count += n
        out.passes += passed.count(1)
        return
    column, key = blob[at : at + 8 * n], eval_id.to_bytes(8, "little", signed=True)
    found = column.find(key)
    while found != -1:
        if found % 8 == 0:  # an entry, not bytes across two
            out.count += 1
            out.passes += passed[found // 8]
            return
        found = column.find(key, found + 1)


def _between(
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


def _past_mark(
    s: Session, pair: Pair, mark: int, lo: datetime | None, hi: datetime | None
) -> Iterator[bytes | None]:
    """The packed results of the captures past the watermark holding ``pair``, captured in
    [lo, hi): read by id (a few hundred), their pair looked up on ``capture_meta``'s primary
    key (capture_id, key) and compared here, so no plan walks the value's every capture."""
    for kept in chunks_after(s, mark, lo, hi):
        held = _holding(s, pair, [cid for cid, _, _ in kept])
        for cid, _, blob in kept:
            if cid in held:
                yield blob


def _holding(s: Session, pair: Pair, ids: list[int]) -> set[int]:
    """Which of the captures ``ids`` hold ``pair``: their rows of the pair's key looked up on
    ``capture_meta``'s primary key (capture_id, key), the value compared here."""
    held: set[int] = set()
    for i in range(0, len(ids), 500):
        held.update(
            cid
            for cid, v in s.execute(
                select(CaptureMeta.capture_id, CaptureMeta.value).where(
                    CaptureMeta.capture_id.in_(ids[i : i + 500]), CaptureMeta.key == pair[0]
                )
            )
            if v == pair[1]
        )
    return held


def rollup_sum(pair: Pair, eval_id: int | None, h1: datetime | None, h2: datetime | None) -> Any:
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


def meta_counts(
    s: Session,
    pair: Pair,
    eval_id: int | None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> MetaCounts:
    """The captured results (of ``eval_id``, or all) of the captures holding the answered
    ``pair`` in [since, until), counted exactly, reviews applied."""
    start = None if since is None else naive_utc(since)
    end = None if until is None else naive_utc(until)
    out = MetaCounts()
    h1, h2, within = whole_hours(start, end)
    if within or not rolled_up(pair[0]):  # no hour summed: the index gives every capture
        for blob in _between(s, pair, start, end):
            _add_blob(out, blob, eval_id)
    else:
        if start is not None and h1 is not None and start < h1:
            for blob in _between(s, pair, start, h1):
                _add_blob(out, blob, eval_id)
        if end is not None and h2 is not None and h2 < end:
            for blob in _between(s, pair, h2, end):
                _add_blob(out, blob, eval_id)
        for blob in _past_mark(s, pair, watermark(s), h1, h2):
            _add_blob(out, blob, eval_id)
        count, passes = s.execute(rollup_sum(pair, eval_id, h1, h2)).one()
        out.count += int(count or 0)
        out.passes += int(passes or 0)
    _apply_reviews(s, out, pair, eval_id, start, end)
    return out


def _apply_reviews(
    s: Session,
    out: MetaCounts,
    pair: Pair,
    eval_id: int | None,
    start: datetime | None,
    end: datetime | None,
) -> None:
    """Reviews of captured results of captures holding ``pair`` in [start, end): each one's
    verdict replaces the automated one. The reviews (few) are read first, their captures by
    id, and the pair looked up on ``capture_meta``'s primary key for those captures only: a
    join planned from the metadata index would read every capture of the value."""
    columns = [Review.capture_id, Review.eval_id, Review.score, Capture.scores]
    wanted = None if eval_id is None else [eval_id]
    reviews = s.execute(reviews_of(columns, wanted, start, end)).all()
    held = _holding(s, pair, sorted({r[0] for r in reviews}))
    for cid, reviewed_eval, score, blob in reviews:
        if reviewed_eval is None or cid not in held:
            continue
        packed = unpack_results(blob)
        i = packed.position(reviewed_eval)
        if i < 0:
            continue
        ok = score >= packed.thresholds[i]
        out.passes += int(ok) - packed.passed[i]
        out.reviewed += 1
        out.reviewed_passes += int(ok)


def capture_rollup_sum(pair: Pair, h1: datetime | None, h2: datetime | None) -> Any:
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


def indexed_count(pair: Pair, start: datetime | None, end: datetime | None) -> Any:
    """How many captures hold ``pair`` in [start, end): a COUNT over one range of the metadata
    index (key, value, captured_at, capture_id), used for partial hours (at most one each)."""
    q = select(func.count()).where(CaptureMeta.key == pair[0], CaptureMeta.value == pair[1])
    if start is not None:
        q = q.where(CaptureMeta.captured_at >= start)
    if end is not None:
        q = q.where(CaptureMeta.captured_at < end)
    return q


def entries_past(mark: int) -> Any:
    """The ``capture_meta`` rows of the captures past the watermark ``mark``: a range of its
    primary key (capture_id, key) and nothing else in the statement, so no plan prefers the
    metadata index (a key and value there would walk every capture of the value)."""
    return select(CaptureMeta.key, CaptureMeta.value, CaptureMeta.captured_at).where(
        CaptureMeta.capture_id > mark
    )


def capture_count(
    s: Session, pair: Pair, since: datetime | None = None, until: datetime | None = None
) -> int:
    """How many captures (scored or not) hold the answered ``pair`` in [since, until):
    whole hours from ``meta_capture_rollup``, the rest from ``capture_meta``."""
    start = None if since is None else naive_utc(since)
    end = None if until is None else naive_utc(until)
    h1, h2, within = whole_hours(start, end)
    if within or not rolled_up(pair[0]):  # no hour summed: one range of the index
        return int(s.scalar(indexed_count(pair, start, end)) or 0)
    n = 0
    if start is not None and h1 is not None and start < h1:
        n += int(s.scalar(indexed_count(pair, start, h1)) or 0)
    if end is not None and h2 is not None and h2 < end:
        n += int(s.scalar(indexed_count(pair, h2, end)) or 0)
    for key, value, at in s.execute(entries_past(watermark(s))):
        if (key, value) == pair and (h1 is None or at >= h1) and (h2 is None or at < h2):
            n += 1
    return n + int(s.scalar(capture_rollup_sum(pair, h1, h2)) or 0)


def rolled_capture_count(s: Session, scope: CaptureScope) -> int | None:
    """``capture_count`` for a scope of one answered pair and a time range only (what
    ``count_captures`` with one metadata filter asks), else None (the walk counts)."""
    if len(scope.meta) != 1 or scope.conversation_id is not None or scope.scored or scope.reviewed:
        return None
    served, _ = split_pairs(s, scope.meta)
    if not served:
        return None
    return capture_count(s, served[0], scope.since, scope.until)
