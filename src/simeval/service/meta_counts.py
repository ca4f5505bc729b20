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

from simeval.checks import naive_utc
from simeval.service.capture_walk import CaptureScope, split_pairs
from simeval.store import Tx
from simeval.store.capture_reads import (
    blobs_between,
    capture_rollup_total,
    captured_reviews,
    entries_past,
    holding_pair,
    indexed_count,
    rollup_totals,
)
from simeval.store.meta_index import rolled_up
from simeval.store.meta_rollup import watermark, whole_hours
from simeval.store.packing import passed_count, unpack_results
from simeval.store.rollups import chunks_after

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
    count, passes = passed_count(blob, eval_id)
    out.count += count
    out.passes += passes


def _past_mark(
    s: Tx, pair: Pair, mark: int, lo: datetime | None, hi: datetime | None
) -> Iterator[bytes | None]:
    """The packed results of the captures past the watermark holding ``pair``, captured in
    [lo, hi): read by id (a few hundred), their pair looked up on ``capture_meta``'s primary
    key (capture_id, key) and compared here, so no plan walks the value's every capture."""
    for kept in chunks_after(s, mark, lo, hi):
        held = holding_pair(s, pair, [cid for cid, _, _ in kept])
        for cid, _, blob in kept:
            if cid in held:
                yield blob


def meta_counts(
    s: Tx,
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
        for blob in blobs_between(s, pair, start, end):
            _add_blob(out, blob, eval_id)
    else:
        if start is not None and h1 is not None and start < h1:
            for blob in blobs_between(s, pair, start, h1):
                _add_blob(out, blob, eval_id)
        if end is not None and h2 is not None and h2 < end:
            for blob in blobs_between(s, pair, h2, end):
                _add_blob(out, blob, eval_id)
        for blob in _past_mark(s, pair, watermark(s), h1, h2):
            _add_blob(out, blob, eval_id)
        count, passes = rollup_totals(s, pair, eval_id, h1, h2)
        out.count += count
        out.passes += passes
    _apply_reviews(s, out, pair, eval_id, start, end)
    return out


def _apply_reviews(
    s: Tx,
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
    wanted = None if eval_id is None else [eval_id]
    reviews = captured_reviews(s, wanted, start, end)
    held = holding_pair(s, pair, sorted({r[0] for r in reviews}))
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


def capture_count(
    s: Tx, pair: Pair, since: datetime | None = None, until: datetime | None = None
) -> int:
    """How many captures (scored or not) hold the answered ``pair`` in [since, until):
    whole hours from ``meta_capture_rollup``, the rest from ``capture_meta``."""
    start = None if since is None else naive_utc(since)
    end = None if until is None else naive_utc(until)
    h1, h2, within = whole_hours(start, end)
    if within or not rolled_up(pair[0]):  # no hour summed: one range of the index
        return indexed_count(s, pair, start, end)
    n = 0
    if start is not None and h1 is not None and start < h1:
        n += indexed_count(s, pair, start, h1)
    if end is not None and h2 is not None and h2 < end:
        n += indexed_count(s, pair, h2, end)
    for key, value, at in entries_past(s, watermark(s)):
        if (key, value) == pair and (h1 is None or at >= h1) and (h2 is None or at < h2):
            n += 1
    return n + capture_rollup_total(s, pair, h1, h2)


def rolled_capture_count(s: Tx, scope: CaptureScope) -> int | None:
    """``capture_count`` for a scope of one answered pair and a time range only (what
    ``count_captures`` with one metadata filter asks), else None (the walk counts)."""
    if len(scope.meta) != 1 or scope.conversation_id is not None or scope.scored or scope.reviewed:
        return None
    served, _ = split_pairs(s, scope.meta)
    if not served:
        return None
    return capture_count(s, served[0], scope.since, scope.until)
