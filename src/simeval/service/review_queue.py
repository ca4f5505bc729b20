"""The review queue: unreviewed results one at a time, borderline ones first (closest to the
threshold they were scored with), then failing ones (newest first), and reviews given as a
verdict (pass / fail) rather than a score.

Bounded on big stores: captured results are packed on their captures (no SQL column to order
by ``|score - threshold|``), so the queue is drawn from the ``window`` most recent unreviewed
results matching the filter (walked newest first in keyset steps by ``iter_rows``, stopping
after ``window`` of them; never the whole store). A clearly passing result (further than
``margin`` above its threshold) is not queued. The position in the queue is a keyset cursor:
the key of the last skipped item; the next item is the first whose key is greater, and a
reviewed item leaves the queue by itself (it is no longer unreviewed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import islice
from typing import Literal

from pydantic import BaseModel

from simeval.errors import InvalidInput
from simeval.scoring.options import check_unit
from simeval.service.base import Core, Part
from simeval.service.filters import ResultFilter, filter_of
from simeval.service.models import ResultOut
from simeval.service.queries import Row, iter_rows
from simeval.service.results import ResultService

QUEUE_WINDOW = 500  # the most recent unreviewed results the queue is drawn from
MAX_WINDOW = 10_000
BORDERLINE_MARGIN = 0.1  # |score - threshold| at most this: borderline
FAIL_STEP = 0.01  # a fail review of a passing result: this much below its threshold

Reason = Literal["borderline", "failing"]


class ReviewQueueOut(BaseModel):
    """One step of the review queue: the next result to review (None when the queue is
    empty) and the progress counts."""

    item: ResultOut | None
    reason: Reason | None  # why it is queued
    distance: float | None  # score - threshold
    cursor: str | None  # the item's position: give it as ``after`` to skip it
    remaining: int  # queued results from this item on (this one included)
    skipped: int  # queued results before the position given (passed over)
    reviewed: int  # reviewed results matching the filter (all time, not only the window)
    window: int  # how many recent unreviewed results the queue was drawn from
    window_full: bool  # the window was filled: older unreviewed results are not queued yet
    margin: float


@dataclass(frozen=True, order=True)
class _Key:
    """A result's place in the queue: borderline (tier 0, by distance) before failing (tier
    1), newest first within one distance, then by id so every key is distinct."""

    tier: int
    distance: float
    newest: float  # minus the result's time as a POSIX timestamp
    id: str

    def text(self) -> str:
        return f"{self.tier}:{self.distance!r}:{self.newest!r}:{self.id}"

    @classmethod
    def parse(cls, text: str) -> _Key:
        parts = text.split(":", 3) if isinstance(text, str) else []
        try:
            tier, distance, newest = int(parts[0]), float(parts[1]), float(parts[2])
            key = cls(tier, distance, newest, parts[3])
        except (IndexError, ValueError):
            raise InvalidInput(
                f"review queue position {text!r} is not one the queue gave (its 'cursor')"
            ) from None
        if key.tier not in (0, 1) or not all(map(math.isfinite, (distance, newest))):
            raise InvalidInput(f"review queue position {text!r} is not one the queue gave")
        return key


def _queued(row: Row, margin: float) -> tuple[_Key, Reason] | None:
    """Where an unreviewed result goes in the queue, None when it clearly passes."""
    gap = row.score - row.threshold
    newest = -row.created_at.timestamp()
    if abs(gap) <= margin:
        return _Key(0, round(abs(gap), 12), newest, row.id), "borderline"
    if not row.automated_passed:
        return _Key(1, 0.0, newest, row.id), "failing"
    return None


def _check_window(window: object) -> int:
    if isinstance(window, bool) or not isinstance(window, int):
        raise InvalidInput(f"review queue window must be a whole number, not {window!r}")
    if not 1 <= window <= MAX_WINDOW:
        raise InvalidInput(f"review queue window must be between 1 and {MAX_WINDOW:,}")
    return window


class ReviewQueueService(Part):
    """The review queue, and reviews given as a verdict."""

    def __init__(self, core: Core, results: ResultService):
        super().__init__(core)
        self.results = results

    def review_queue_next(
        self,
        where: ResultFilter | None = None,
        *,
        after: str | None = None,
        margin: float = BORDERLINE_MARGIN,
        window: int = QUEUE_WINDOW,
        **filters: object,
    ) -> ReviewQueueOut:
        """The next result to review among the ``window`` most recent unreviewed results
        matching ``where`` (a ``ResultFilter``, or its fields as keywords): borderline ones
        (``|score - threshold| <= margin``) closest to their threshold first, then failing
        ones newest first; clearly passing ones are not queued. ``after``: the ``cursor`` of
        the last item skipped (the next item comes after it). With its explanation."""
        f = replace(filter_of(where, filters), reviewed=False)
        margin = check_unit(margin, "borderline margin")
        window = _check_window(window)
        start = _Key.parse(after) if after else None
        with self.store.read() as s:
            eval_id = self._eval_id(s, f)
            seen = 0
            queue: list[tuple[_Key, Reason, Row]] = []
            for row in islice(iter_rows(s, f, eval_id), window):
                seen += 1
                placed = _queued(row, margin)
                if placed is not None:
                    queue.append((*placed, row))
            queue.sort(key=lambda q: q[0])
            ahead = [q for q in queue if start is None or q[0] > start]
        # shown with its explanation, read as get_result reads one (its own reads)
        item = self.results.get_result(ahead[0][2].id) if ahead else None
        reviewed = self.results.count_results(replace(f, reviewed=True))
        first = ahead[0] if ahead else None
        return ReviewQueueOut(
            item=item,
            reason=first[1] if first else None,
            distance=(first[2].score - first[2].threshold) if first else None,
            cursor=first[0].text() if first else None,
            remaining=len(ahead),
            skipped=len(queue) - len(ahead),
            reviewed=reviewed,
            window=window,
            window_full=seen >= window,
            margin=margin,
        )

    def review_verdict(
        self,
        result_id: str,
        verdict: str,
        *,
        score: float | str | None = None,
        note: str = "",
        reviewer: str | None = None,
    ) -> ResultOut:
        """Review a result as a pass or a fail (``verdict``), with a score that says so: a
        pass gets its threshold (or ``score``, which must be at or above it), a fail keeps
        its automated score when that already fails, else gets just below the threshold (or
        ``score``, which must be below it). Stored by ``review_result`` with the note and
        the reviewer."""
        if verdict not in ("pass", "fail"):
            raise InvalidInput(f"review verdict must be pass or fail, not {verdict!r}")
        current = self.results.get_result(result_id)
        threshold = current.threshold
        if score is not None and str(score).strip() != "":
            value = check_unit(score, "review score")
            if verdict == "pass" and value < threshold:
                raise InvalidInput(
                    f"a pass needs a score at or above the threshold {threshold:.2f}, not {value:g}"
                )
            if verdict == "fail" and value >= threshold:
                raise InvalidInput(
                    f"a fail needs a score below the threshold {threshold:.2f}, not {value:g}"
                )
        elif verdict == "pass":
            value = threshold
        elif current.score < threshold:
            value = current.score
        elif threshold <= 0:
            raise InvalidInput("cannot review as a fail: its threshold 0 passes every score")
        else:
            value = max(0.0, round(threshold - FAIL_STEP, 6))
        return self.results.review_result(result_id, value, note, reviewer)
