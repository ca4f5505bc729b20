"""Counts of captured results under one metadata filter, from ``meta_rollup``.

``meta_rollup`` (``simeval.store.meta_rollup``) counts, per indexed metadata value, hour and
eval, the results of the captures up to the rollup's watermark. A count under one answered
pair (key, value), with an eval, a verdict, a review filter and a time range, sums the whole
hours of that value from the table's primary-key range, and adds from the captures what the
table does not hold: the partial hours at either end of the range (through the metadata
index, by time) and the captures past the watermark (a few hundred, by id). Reviews are
applied on read, as the trend rollup's readers apply them: only reviews of captures holding
the pair count. Several pairs, or a pair the index cannot answer, are counted by the walk.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from simeval.service.rollup import watermark
from simeval.store import PACK_HEAD, Capture, CaptureMeta, Review, packed_fingerprints
from simeval.store.meta_rollup import hour_start
from simeval.store.models import MetaRollup
from simeval.store.packing import unpack_results

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


def _naive(when: datetime | None) -> datetime | None:
    if when is None or when.tzinfo is None:
        return when
    return when.astimezone(UTC).replace(tzinfo=None)


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
    key, value = pair
    last = mark
    while True:
        rows = s.execute(
            select(Capture.id, Capture.captured_at, Capture.scores)
            .where(Capture.id > last, Capture.scores.is_not(None))
            .order_by(Capture.id)
            .limit(_CHUNK)
        ).all()
        if not rows:
            return
        kept = [r for r in rows if (lo is None or r[1] >= lo) and (hi is None or r[1] < hi)]
        if kept:
            held = {
                cid
                for cid, v in s.execute(
                    select(CaptureMeta.capture_id, CaptureMeta.value).where(
                        CaptureMeta.capture_id.in_([r[0] for r in kept]),
                        CaptureMeta.key == key,
                    )
                )
                if v == value
            }
            for cid, _, blob in kept:
                if cid in held:
                    yield blob
        if len(rows) < _CHUNK:
            return
        last = rows[-1][0]


def _whole_hours(
    start: datetime | None, end: datetime | None
) -> tuple[datetime | None, datetime | None, bool]:
    """The whole hours [h1, h2) of [start, end) (None: open), and whether the range lies
    within one hour (then its captures are read instead)."""
    h1 = (
        None
        if start is None
        else (start if start == hour_start(start) else hour_start(start) + _HOUR)
    )
    h2 = None if end is None else hour_start(end)
    if h1 is not None and h2 is not None and h1 >= h2:
        return None, None, True
    return h1, h2, False


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
    start, end = _naive(since), _naive(until)
    out = MetaCounts()
    h1, h2, within = _whole_hours(start, end)
    if within:
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
    q: Any = (
        select(Review.capture_id, Review.eval_id, Review.score, Capture.scores)
        .join(Capture, Capture.id == Review.capture_id)
        .where(Review.capture_id.is_not(None))
        .where(Capture.id.in_(select(Review.capture_id).where(Review.capture_id.is_not(None))))
    )
    if eval_id is not None:
        q = q.where(Review.eval_id == eval_id)
    if start is not None:
        q = q.where(Capture.captured_at >= start)
    if end is not None:
        q = q.where(Capture.captured_at < end)
    reviews = s.execute(q).all()
    held: set[int] = set()
    ids = sorted({r[0] for r in reviews})
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
