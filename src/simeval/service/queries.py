"""Results as one stream over two stores, with one set of filters.

A captured result lives packed on its capture (``Capture.scores``); a data-set run's row is a
row of ``results``. ``iter_rows`` walks both in time order (newest or oldest first) as
``Row``s, filtered by eval, effective verdict (a review wins), time range, review and run;
``count_rows`` counts the same set without walking captured results one by one (through the
rollup, ``simeval.store.rollups``). A result's id says where it lives: "<capture>-<eval>" or
"r<row>" (``parse_result_id``).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from simeval.checks import MAX_ID, as_utc
from simeval.errors import InvalidInput, NotFound
from simeval.service.capture_walk import (
    CaptureScope,
    capture_chunks,
    count_results_in_scope,
    split_pairs,
)
from simeval.service.filters import ResultFilter
from simeval.service.meta_counts import meta_counts
from simeval.service.models import ReviewOut
from simeval.store import Capture, Result, Review, Tx, unpack_results
from simeval.store.results_sql import capture_reviews, count_run_rows, run_rows
from simeval.store.rollups import tally_totals

_ID = re.compile(r"^\s*(?:(\d{1,40})-(\d{1,40})|r?(\d{1,40}))\s*$")
RESULT_ID_PATTERN = r"^(\d+-\d+|r?\d+)$"  # for routes: another form is a 422


def parse_result_id(value: object) -> tuple[int, int] | int:
    """(capture id, eval id) for a captured result, the row id for a run's row ("r7", or
    "7" as run rows were numbered before captured results were packed).

    >>> parse_result_id("12-3"), parse_result_id("r7")
    ((12, 3), 7)
    """
    m = _ID.match(str(value)) if isinstance(value, str | int) else None
    if m is None:
        raise InvalidInput(
            f"result id must look like 12-3 (capture-eval) or r7 (a run's row), not {value!r}"
        )
    numbers = [int(g) for g in m.groups() if g is not None]
    if any(n > MAX_ID for n in numbers):
        # larger than any id the database can hold: names nothing (not an overflow)
        raise NotFound(f"no result with id {value}")
    if m.group(3) is not None:
        return numbers[0]
    return numbers[0], numbers[1]


def capture_result_id(capture_id: int, eval_id: int) -> str:
    return f"{capture_id}-{eval_id}"


@dataclass
class Row:
    """One result from either store."""

    id: str
    capture: Capture | None
    run_row: Result | None
    eval_id: int | None
    eval_version: int | None
    score: float
    automated_passed: bool
    threshold: float
    matched_index: int
    fingerprint: str
    created_at: datetime
    review: Review | None
    order: tuple[int, int, int]  # the sort key within one created_at: kind, id, index

    @property
    def passed(self) -> bool:
        """The effective verdict: a review's score decides when there is one."""
        if self.review is not None:
            return self.review.score >= self.threshold
        return self.automated_passed


def review_out(review: Review | None) -> ReviewOut | None:
    """A stored review as the service answers it (None without one)."""
    if review is None:
        return None
    return ReviewOut(
        score=review.score,
        note=review.note,
        created_at=as_utc(review.created_at),
        reviewer=review.reviewer,
    )


def _keep(row: Row, f: ResultFilter) -> bool:
    if f.reviewed is not None and (row.review is not None) != f.reviewed:
        return False
    return f.passed is None or row.passed == f.passed


def capture_rows(s: Tx, cap: Capture, reviews: dict[tuple[int, int], Review]) -> list[Row]:
    """The results of one capture, in the order they were scored."""
    packed = unpack_results(cap.scores)
    out = []
    for i, (eval_id, version, score, ok, threshold, at, fp) in enumerate(packed.rows()):
        out.append(
            Row(
                capture_result_id(cap.id, eval_id),
                cap,
                None,
                eval_id,
                version,
                score,
                ok,
                threshold,
                at,
                fp,
                cap.captured_at,
                reviews.get((cap.id, eval_id)),
                (1, cap.id, i),
            )
        )
    return out


ResultKey = tuple[datetime, int, int, int]  # a result's place: time, then ``Row.order``


def result_key(row: Row) -> ResultKey:
    """A result's place in the listing (its cursor): (time, 0 for a run's row or 1 for a
    captured result, row or capture id, the entry's index in its capture's packed results)."""
    kind, ident, index = row.order
    return (row.created_at, kind, ident, index)


def _scope(f: ResultFilter) -> CaptureScope:
    return CaptureScope(
        meta=f.meta,
        since=f.since,
        until=f.until,
        conversation_id=f.conversation_id,
        scored=True,
        reviewed=bool(f.reviewed),
    )


def _iter_captured(
    s: Tx,
    f: ResultFilter,
    eval_id: int | None,
    newest: bool,
    after: ResultKey | None = None,
) -> Iterator[Row]:
    start: tuple[datetime, int] | None = None
    partial: tuple[int, int] | None = None  # (capture id, entry index): its entries beyond
    if after is not None:
        at, kind, ident, index = after
        if kind == 1:  # within a capture: that capture again, from the entry after
            start, partial = (at, ident + 1 if newest else ident - 1), (ident, index)
        else:  # after a run's row: the captures of an earlier (later) time, all of them
            start = (at, 0)
    for caps in capture_chunks(s, _scope(f), newest=newest, after=start):
        reviews = capture_reviews(s, [c.id for c in caps])
        for cap in caps:
            rows = capture_rows(s, cap, reviews)
            if partial is not None and cap.id == partial[0]:
                cut = partial[1]
                rows = [r for r in rows if (r.order[2] < cut if newest else r.order[2] > cut)]
            if eval_id is not None:
                rows = [r for r in rows if r.eval_id == eval_id]
            for row in reversed(rows) if newest else rows:
                if _keep(row, f):
                    yield row


def run_row(r: Result, review: Review | None) -> Row:
    return Row(
        f"r{r.id}",
        None,
        r,
        r.eval_id,
        r.eval_version,
        r.score,
        r.passed,
        r.threshold,
        r.matched_index,
        r.fingerprint,
        r.created_at,
        review,
        (0, r.id, 0),
    )


def _iter_run_rows(
    s: Tx,
    f: ResultFilter,
    eval_id: int | None,
    newest: bool,
    after: ResultKey | None,
    limit: int | None = None,
) -> Iterator[Row]:
    for r, review in run_rows(s, f, eval_id, newest, after, limit):
        yield run_row(r, review)


def iter_rows(
    s: Tx,
    f: ResultFilter,
    eval_id: int | None,
    newest: bool = True,
    after: ResultKey | None = None,
    limit: int | None = None,
) -> Iterator[Row]:
    """Every result matching ``f`` (its eval looked up: ``eval_id``), newest (or oldest)
    first, from both stores; ``after``: only the results past this ``result_key`` in that
    order (a cursor: each store's query starts there, through its time index); ``limit``:
    the caller reads at most this many rows (the run rows' query is cut there)."""
    if f.captures_only:
        yield from _iter_captured(s, f, eval_id, newest, after)
        return
    runs = _iter_run_rows(s, f, eval_id, newest, after, limit)
    if f.run_id is not None:
        yield from runs
        return
    yield from heapq.merge(
        _iter_captured(s, f, eval_id, newest, after),
        runs,
        key=lambda r: (r.created_at, r.order),
        reverse=newest,
    )


def capture_scope(f: ResultFilter) -> CaptureScope:
    """The captures whose results ``f`` can match (the walk under ``iter_rows``): for a
    reader of whole columns (the export) that applies the eval, verdict and review filters
    itself."""
    return _scope(f)


def iter_run_rows(
    s: Tx, f: ResultFilter, eval_id: int | None, newest: bool = True
) -> Iterator[Row]:
    """The data-set run rows of ``iter_rows`` alone, in its order (the export merges them
    with its own walk of the captures)."""
    return _iter_run_rows(s, f, eval_id, newest, None)


def count_rows(s: Tx, f: ResultFilter, eval_id: int | None) -> int:
    """How many results ``iter_rows`` gives, without walking the captured ones: through the
    rollup, or under a metadata or conversation filter (which the rollup does not know) from
    the matching captures' packed headers (``capture_meta`` selecting them); a verdict or
    review filter with those walks the matching captures' results."""
    if f.captures_only:
        pair = _rolled_pair(s, f)
        if pair is not None:  # one answered pair: its value's hours in meta_rollup
            mc = meta_counts(s, pair, eval_id, f.since, f.until)
            return _captured(f, mc.count, mc.passes, mc.reviewed, mc.reviewed_passes)
        if f.passed is None and f.reviewed is None:
            return count_results_in_scope(s, _scope(f), eval_id)
        return sum(1 for _ in _iter_captured(s, f, eval_id, True))
    runs = count_run_rows(s, f, eval_id)
    if f.run_id is not None:
        return runs
    sums = tally_totals(s, None if eval_id is None else [eval_id], f.since, f.until).values()
    n = sum(x.count for x in sums)
    p = sum(x.passes for x in sums)
    r = sum(x.reviewed for x in sums)
    rp = sum(x.reviewed_passes for x in sums)
    return runs + _captured(f, n, p, r, rp)


def _rolled_pair(s: Tx, f: ResultFilter) -> tuple[str, str] | None:
    """The one metadata pair of ``f`` when ``meta_rollup`` answers its count (a single pair
    the index answers, no conversation filter), else None."""
    if len(f.meta) != 1 or f.conversation_id is not None:
        return None
    served, _ = split_pairs(s, f.meta)
    return served[0] if served else None


def _captured(f: ResultFilter, n: int, p: int, r: int, rp: int) -> int:
    """Of ``n`` captured results (``p`` passing, effective; ``r`` reviewed, ``rp`` of them
    passing), how many ``f``'s verdict and review filters keep."""
    if f.reviewed is True:
        n, p = r, rp
    elif f.reviewed is False:
        n, p = n - r, p - rp
    return n if f.passed is None else (p if f.passed else n - p)
