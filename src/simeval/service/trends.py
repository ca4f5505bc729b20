"""Per-eval trends: captured results per hour, day or week."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TypedDict

from simeval.checks import as_utc, parse_time
from simeval.errors import InvalidInput
from simeval.service.base import Part
from simeval.service.models import TrendBucket, TrendOut
from simeval.store import Tx
from simeval.store.packing import EntryReader
from simeval.store.rollups import tally_range
from simeval.store.trend_reads import eval_capture_reviews, newest_scored_chunks, run_verdict_rows

BUCKETS = ("hour", "day", "week")
RECENT_LOOKBACK = 100_000  # captures read at most for an eval's recent verdicts
_CHUNK = 1000


def bucket_of(hour: datetime, bucket: str) -> datetime:
    """The start of the UTC hour, day or week (Monday) an hour falls in."""
    if bucket == "hour":
        return hour
    day = hour.replace(hour=0)
    return day if bucket == "day" else day - timedelta(days=day.weekday())


def _captured_verdicts(
    s: Tx, eval_id: int, lookback: int
) -> Iterator[tuple[datetime, float, bool]]:
    """(time, score, verdict) of an eval's captured results, newest first, from the packed
    results of the newest ``lookback`` captures (a chunk at a time through the time index;
    the texts are not read), a review's score deciding the verdict."""
    entry_of = EntryReader(eval_id)
    # the eval's reviews of captured results, read once
    reviews = eval_capture_reviews(s, eval_id)
    for rows in newest_scored_chunks(s, lookback, _CHUNK):
        for capture_id, when, blob in rows:
            entry = entry_of(blob)
            if entry is None:
                continue
            score, threshold, passed = entry
            reviewed = reviews.get(capture_id)
            yield when, score, bool(passed if reviewed is None else reviewed >= threshold)


def _run_verdicts(s: Tx, eval_id: int, limit: int) -> Iterator[tuple[datetime, float, bool]]:
    """(time, score, verdict) of an eval's newest data-set run rows, newest first."""
    for when, score, passed, threshold, reviewed in run_verdict_rows(s, eval_id, limit):
        yield when, score, bool(passed if reviewed is None else reviewed >= threshold)


class _Slot(TypedDict):
    """A bucket's sums while a trend is made."""

    count: int
    total: float
    passes: int
    reviewed: int
    versions: set[int]
    fingerprints: set[str]


class TrendService(Part):
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
        self, eval_name: str | int, bucket: str = "day", since: object = None, until: object = None
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
        merged: dict[datetime, _Slot] = {}
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
