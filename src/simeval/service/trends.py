"""Per-eval trends: captured results per hour, day or week."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select

from simeval import store as store_mod
from simeval.errors import InvalidInput
from simeval.models import TrendBucket, TrendOut
from simeval.service.base import ServiceBase
from simeval.service.checks import _utc, parse_time
from simeval.service.queries import _effective_pass, _in_range
from simeval.store import Result, Review

BUCKETS = ("hour", "day", "week")


class TrendsMixin(ServiceBase):
    """Per-eval trends."""

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
            b = store_mod.bucket_start(self.store.dialect, bucket, Result.created_at).label("b")
            q = (
                select(
                    b,
                    Result.eval_version,
                    Result.fingerprint,
                    func.count(Result.id),
                    func.sum(func.coalesce(Review.score, Result.score)),
                    func.sum(case((_effective_pass(), 1), else_=0)),
                    func.count(Review.id),
                )
                .outerjoin(Review, Review.result_id == Result.id)
                .where(Result.eval_id == ev.id, Result.capture_id.is_not(None))
                .group_by(b, Result.eval_version, Result.fingerprint)
                .order_by(b)
            )
            rows = s.execute(_in_range(q, start, end)).all()
            name, threshold = ev.name, ev.threshold
        merged: dict[datetime, dict[str, Any]] = {}
        for when, version, fp, count, total, passes, reviewed in rows:
            slot = merged.setdefault(
                store_mod.parse_bucket(when),
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
                    start=_utc(when),
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
