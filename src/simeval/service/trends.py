"""Per-eval trends: captured results per hour, day or week."""

from __future__ import annotations

import heapq
import itertools
import struct
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from simeval.checks import as_utc, parse_time
from simeval.errors import InvalidInput
from simeval.service.base import ServiceBase
from simeval.service.models import TrendBucket, TrendOut
from simeval.store import PACK_HEAD, PACK_VERSION, Capture, Result, Review, unpack_results
from simeval.store.rollups import tally_range

BUCKETS = ("hour", "day", "week")
RECENT_LOOKBACK = 100_000  # captures read at most for an eval's recent verdicts
_CHUNK = 1000


def bucket_of(hour: datetime, bucket: str) -> datetime:
    """The start of the UTC hour, day or week (Monday) an hour falls in."""
    if bucket == "hour":
        return hour
    day = hour.replace(hour=0)
    return day if bucket == "day" else day - timedelta(days=day.weekday())


class _EntryReader:
    """One eval's (score, threshold, passed) read straight from packed results: the entry's
    place is worked out once per layout (captures scored by the same evals share one)."""

    _F64 = struct.Struct("<d")

    def __init__(self, eval_id: int):
        self.eval_id = eval_id
        self.places: dict[bytes, tuple[int, int, int] | None] = {}

    def __call__(self, blob: bytes | None) -> tuple[float, float, int] | None:
        if not blob:
            return None
        blob = bytes(blob)
        version, _, nfp, n = PACK_HEAD.unpack_from(blob)
        if version != PACK_VERSION:
            return None
        at = PACK_HEAD.size
        for _ in range(nfp):
            at += 1 + blob[at]
        scores_at = at + 12 * n
        key = blob[:scores_at]
        if key not in self.places:
            i = unpack_results(blob).position(self.eval_id)
            self.places[key] = (
                None
                if i < 0
                else (scores_at + 8 * i, scores_at + 8 * n + 8 * i, scores_at + 20 * n + i)
            )
        place = self.places[key]
        if place is None:
            return None
        score_at, threshold_at, passed_at = place
        return (
            self._F64.unpack_from(blob, score_at)[0],
            self._F64.unpack_from(blob, threshold_at)[0],
            blob[passed_at],
        )


def _captured_verdicts(
    s: Session, eval_id: int, lookback: int
) -> Iterator[tuple[datetime, float, bool]]:
    """(time, score, verdict) of an eval's captured results, newest first, from the packed
    results of the newest ``lookback`` captures (a chunk at a time through the time index;
    the texts are not read), a review's score deciding the verdict."""
    entry_of = _EntryReader(eval_id)
    first = (
        select(Capture.id, Capture.captured_at, Capture.scores)
        .where(Capture.scores.is_not(None))
        .order_by(Capture.captured_at.desc(), Capture.id.desc())
    )
    # the eval's reviews of captured results, read once: few beside its results (an IN list
    # of each chunk's capture ids cost more to build than the chunk to read)
    reviews: dict[Any, float] = dict(
        s.execute(
            select(Review.capture_id, Review.score).where(
                Review.eval_id == eval_id, Review.capture_id.is_not(None)
            )
        ).all()
    )
    q, read = first, 0
    while read < lookback:
        chunk = min(_CHUNK, lookback - read)
        rows = s.execute(q.limit(chunk)).all()
        read += len(rows)
        for capture_id, when, blob in rows:
            entry = entry_of(blob)
            if entry is None:
                continue
            score, threshold, passed = entry
            reviewed = reviews.get(capture_id)
            yield when, score, bool(passed if reviewed is None else reviewed >= threshold)
        if len(rows) < chunk:
            return
        last = tuple_(rows[-1][1], rows[-1][0])
        q = first.where(tuple_(Capture.captured_at, Capture.id) < last)


def _run_verdicts(s: Session, eval_id: int, limit: int) -> Iterator[tuple[datetime, float, bool]]:
    """(time, score, verdict) of an eval's newest data-set run rows, newest first."""
    q = (
        select(Result.created_at, Result.score, Result.passed, Result.threshold, Review.score)
        .outerjoin(Review, Review.result_id == Result.id)
        .where(Result.capture_id.is_(None), Result.eval_id == eval_id)
        .order_by(Result.created_at.desc(), Result.id.desc())
        .limit(limit)
    )
    for when, score, passed, threshold, reviewed in s.execute(q):
        yield when, score, bool(passed if reviewed is None else reviewed >= threshold)


class TrendsMixin(ServiceBase):
    """Per-eval trends."""

    def recent_verdicts(
        self, eval_name: str | int, limit: int = 5000, lookback: int = RECENT_LOOKBACK
    ) -> list[tuple[float, bool]]:
        """An eval's newest ``limit`` results, captured and from data-set runs, newest first,
        as (score, verdict): the automated score and the verdict given (a review's wins), as
        ``list_results`` gives them; read from the packed results of the newest ``lookback``
        captures at most, so the cost does not grow with the store (a score histogram)."""
        with self.store.read() as s:
            ev = self._find_eval(s, eval_name)
            merged = heapq.merge(
                _captured_verdicts(s, ev.id, lookback),
                _run_verdicts(s, ev.id, limit),
                key=lambda v: v[0],
                reverse=True,
            )
            return [(score, ok) for _, score, ok in itertools.islice(merged, limit)]

    def trend(
        self, eval_name: str | int, bucket: str = "day", since: Any = None, until: Any = None
    ) -> TrendOut:
        """An eval's captured results per hour, day or week (UTC): count, mean score and pass
        rate (reviews win), the versions and scorer fingerprints in force. A bucket whose
        fingerprints differ from the previous bucket's (or vary within it) is flagged as a
        break: scores on either side are not comparable."""
        if bucket not in BUCKETS:
            raise InvalidInput(f"bucket must be hour, day or week, not {bucket!r}")
        start, end = parse_time(since, "since"), parse_time(until, "until")
        with self.store.read() as s:
            ev = self._find_eval(s, eval_name)
            sums = tally_range(s, [ev.id], start, end)
            name, threshold = ev.name, ev.threshold
        merged: dict[datetime, dict[str, Any]] = {}
        for (hour, _, version, fp), sum_ in sums.items():
            if not sum_.count:
                continue
            count, total, passes, reviewed = sum_.count, sum_.total, sum_.passes, sum_.reviewed
            slot = merged.setdefault(
                bucket_of(hour, bucket),
                {
                    "count": 0,
                    "total": 0.0,
                    "passes": 0,
                    "reviewed": 0,
                    "versions": set(),
                    "fingerprints": set(),
                },
            )
            slot["count"] += count
            slot["total"] += float(total or 0.0)
            slot["passes"] += int(passes or 0)
            slot["reviewed"] += int(reviewed or 0)
            slot["versions"].add(version)
            slot["fingerprints"].add(fp)
        buckets: list[TrendBucket] = []
        prev_fps: set[str] | None = None
        prev_versions: set[int] | None = None
        for when in sorted(merged):
            slot = merged[when]
            fps, versions = slot["fingerprints"], slot["versions"]
            buckets.append(
                TrendBucket(
                    start=as_utc(when),
                    count=slot["count"],
                    mean_score=slot["total"] / slot["count"],
                    pass_rate=slot["passes"] / slot["count"],
                    reviewed=slot["reviewed"],
                    versions=sorted(versions),
                    fingerprints=sorted(fps),
                    fingerprint_break=len(fps) > 1 or (prev_fps is not None and fps != prev_fps),
                    version_change=len(versions) > 1
                    or (prev_versions is not None and versions != prev_versions),
                )
            )
            prev_fps, prev_versions = fps, versions
        return TrendOut(
            eval_name=name,
            bucket=bucket,  # type: ignore[arg-type]
            threshold=threshold,
            buckets=buckets,
        )
