"""The SQL of an eval's recent verdicts (``simeval.service.trends``): its captured results
read from the newest captures' packed results a chunk at a time, its data-set run rows, and
the reviews that decide their verdicts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from sqlalchemy import select, tuple_
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

from simeval.store.tables import Capture, Result, Review


def eval_capture_reviews(s: Session, eval_id: int) -> dict[int | None, float]:
    """The review scores of an eval's captured results, by capture id."""
    # read once: few beside its results (an IN list of each chunk's capture ids cost more to
    # build than the chunk to read)
    return dict(
        s.execute(
            select(Review.capture_id, Review.score).where(
                Review.eval_id == eval_id, Review.capture_id.is_not(None)
            )
        ).all()
    )


def newest_scored_chunks(
    s: Session, lookback: int, chunk: int
) -> Iterator[Sequence[Row[int, datetime, bytes | None]]]:
    """(id, captured_at, packed results) of the newest ``lookback`` scored captures, newest
    first, ``chunk`` at a time through the time index (the texts are not read)."""
    first = (
        select(Capture.id, Capture.captured_at, Capture.scores)
        .where(Capture.scores.is_not(None))
        .order_by(Capture.captured_at.desc(), Capture.id.desc())
    )
    q, read = first, 0
    while read < lookback:
        size = min(chunk, lookback - read)
        rows = s.execute(q.limit(size)).all()
        read += len(rows)
        yield rows
        if len(rows) < size:
            return
        last = tuple_(rows[-1][1], rows[-1][0])
        q = first.where(tuple_(Capture.captured_at, Capture.id) < last)


def run_verdict_rows(
    s: Session, eval_id: int, limit: int
) -> Iterator[tuple[datetime, float, bool, float, float | None]]:
    """(time, score, passed, threshold, review score) of an eval's newest ``limit`` data-set
    run rows, newest first."""
    q = (
        select(Result.created_at, Result.score, Result.passed, Result.threshold, Review.score)
        .outerjoin(Review, Review.result_id == Result.id)
        .where(Result.capture_id.is_(None), Result.eval_id == eval_id)
        .order_by(Result.created_at.desc(), Result.id.desc())
        .limit(limit)
    )
    yield from s.execute(q)
