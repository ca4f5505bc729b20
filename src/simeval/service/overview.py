"""Every active eval at a glance: ``Service.overview``.

Per active eval, over a window (the last 24 hours, 7 or 30 days, ending with the current
hour): results, pass rate and mean score, a pass-rate sparkline, and the change of the pass
rate against the window before with its 95% interval (``scoring.compare``'s
``pass_rate_diff_interval``: the rollup holds counts, not cases, so there is nothing to
bootstrap).

It reads the trend rollup, never the results: one aggregate query sums the rollup's hourly
rows of every eval into the sparkline's slots and the previous window in the database
(``simeval.store.overview_sql``), so it returns about (evals × slots) rows whatever the
number of results; the captures past the rollup's watermark (a few hundred at most) are added
from their packed results, and reviews are applied as the rollup's other readers apply them
(``simeval.store.rollups.review_changes``). Windows end on the hour, so no partial hour has
to be summed from captures.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from simeval.checks import as_utc
from simeval.errors import InvalidInput
from simeval.scoring.compare import pass_rate_diff_interval
from simeval.service.base import Part
from simeval.store import Tx
from simeval.store.meta_rollup import hour_start, watermark
from simeval.store.overview_sql import active_evals, rollup_slots, slot_of
from simeval.store.rollups import HOUR, Sums, Tally, captures_after, review_changes

# window: (hours, hours per sparkline slot)
WINDOWS: dict[str, tuple[int, int]] = {"24h": (24, 2), "7d": (168, 12), "30d": (720, 48)}
SORTS = ("worst", "name", "pass_rate", "mean_score", "change", "results", "last")
Trend = Literal["dropped", "rose", "no clear change", "not enough data"]


class OverviewRow(BaseModel):
    """One active eval over the window, and the change against the window before."""

    eval_name: str
    threshold: float
    results: int
    pass_rate: float | None
    mean_score: float | None
    previous_results: int
    previous_pass_rate: float | None
    previous_mean_score: float | None
    change: float | None = Field(None, description="pass rate B − A: this window − the previous")
    change_ci: list[float] | None = Field(None, description="95% interval of the change")
    score_change: float | None = None
    trend: Trend
    last_hour: datetime | None = Field(
        None, description="the hour of the newest result in the two windows (None: none)"
    )
    sparkline: list[float | None] = Field(
        default_factory=list, description="pass rate per slot, oldest first (None: no results)"
    )
    open_alerts: int | None = None


class OverviewOut(BaseModel):
    """Every active eval over a window (``Service.overview``)."""

    window: str
    start: datetime
    end: datetime
    slot_hours: int
    sort: str
    evals: list[OverviewRow]


class _Board:
    """Sums per eval and slot (count, total, passes; slot -1 is the previous window,
    0… the current window's sparkline slots) and the newest hour with results per eval."""

    def __init__(self) -> None:
        self.slots: dict[int, dict[int, Sums]] = {}
        self.last: dict[int, datetime] = {}

    def add(self, eval_id: int, k: int, count: int, total: float, passes: int) -> None:
        per = self.slots.get(eval_id)
        if per is None:
            per = self.slots[eval_id] = {}
        acc = per.get(k)
        if acc is None:
            per[k] = Sums(count, total, passes)
        else:
            acc.count += count
            acc.total += total
            acc.passes += passes

    def seen(self, eval_id: int, hour: datetime) -> None:
        old = self.last.get(eval_id)
        if old is None or hour > old:
            self.last[eval_id] = hour


def _tail(s: Tx, board: _Board, prev: datetime, start: datetime, end: datetime, per: int) -> None:
    """Add the captures past the rollup's watermark, and every review in the two windows."""
    tally = Tally()
    for when, blob in captures_after(s, watermark(s), prev, end):
        tally.add(when, blob)
    for (hour, eval_id, _, _), sums in tally.sums().items():
        board.add(eval_id, slot_of(hour, start, per), sums.count, sums.total, sums.passes)
        board.seen(eval_id, hour)
    for (hour, eval_id, _, _), d_total, d_passes, _ok in review_changes(s, None, prev, end):
        board.add(eval_id, slot_of(hour, start, per), 0, d_total, d_passes)


def _trend(change: tuple[float, float, float] | None) -> Trend:
    if change is None:
        return "not enough data"
    _, lo, hi = change
    if hi < 0:
        return "dropped"
    if lo > 0:
        return "rose"
    return "no clear change"


def _row(
    name: str,
    threshold: float,
    slots: dict[int, Sums],
    last: datetime | None,
    nslots: int,
    alerts: int | None,
) -> OverviewRow:
    cur, prev = Sums(), Sums()  # this window, the one before
    spark: list[float | None] = [None] * nslots
    for k, acc in slots.items():
        count, total, passes = acc.count, acc.total, acc.passes
        side = prev if k < 0 else cur
        side.count += count
        side.total += total
        side.passes += passes
        if 0 <= k < nslots and count:
            spark[k] = passes / count
    change = (
        pass_rate_diff_interval(prev.passes, prev.count, cur.passes, cur.count)
        if cur.count >= 2 and prev.count >= 2
        else None
    )
    return OverviewRow(
        eval_name=name,
        threshold=threshold,
        results=cur.count,
        pass_rate=cur.passes / cur.count if cur.count else None,
        mean_score=cur.total / cur.count if cur.count else None,
        previous_results=prev.count,
        previous_pass_rate=prev.passes / prev.count if prev.count else None,
        previous_mean_score=prev.total / prev.count if prev.count else None,
        change=None if change is None else change[0],
        change_ci=None if change is None else [change[1], change[2]],
        score_change=(cur.total / cur.count - prev.total / prev.count)
        if cur.count and prev.count
        else None,
        trend=_trend(change),
        last_hour=None if last is None else as_utc(last),
        sparkline=spark,
        open_alerts=alerts,
    )


def _none_last(value: float | None, reverse: bool) -> tuple[bool, float]:
    """A sort key that keeps rows without a value at the end either way round."""
    if value is None:
        return (not reverse, 0.0)
    return (reverse, -value if reverse else value)


def _worst(r: OverviewRow) -> tuple[bool, float, bool, float, str]:
    """Significant drops first (the most certain first), then the lowest pass rates; evals
    without results in the window last."""
    dropped = r.trend == "dropped"
    return (
        not dropped,
        r.change_ci[1] if dropped and r.change_ci else 0.0,
        r.pass_rate is None,
        r.pass_rate if r.pass_rate is not None else 0.0,
        r.eval_name,
    )


def sort_rows(rows: list[OverviewRow], sort: str) -> list[OverviewRow]:
    """``rows`` in the order ``sort`` names (one of ``SORTS``, ``-`` first for descending)."""
    reverse = sort.startswith("-")
    key_name = sort[1:] if reverse else sort
    if key_name not in SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(SORTS)} (or -NAME), not {sort!r}")
    if key_name == "worst":
        return sorted(rows, key=_worst, reverse=reverse)
    if key_name == "name":
        return sorted(rows, key=lambda r: r.eval_name, reverse=reverse)
    values: dict[str, Callable[[OverviewRow], float | None]] = {
        "pass_rate": lambda r: r.pass_rate,
        "mean_score": lambda r: r.mean_score,
        "change": lambda r: r.change,
        "results": lambda r: float(r.results),
        "last": lambda r: None if r.last_hour is None else r.last_hour.timestamp(),
    }
    get = values[key_name]
    return sorted(
        sorted(rows, key=lambda r: r.eval_name),
        key=lambda r: _none_last(get(r), reverse),
    )


class OverviewService(Part):
    """Every active eval at a glance."""

    def overview(
        self,
        window: str = "24h",
        sort: str = "worst",
        now: datetime | None = None,
        alerts: Callable[[], dict[str, int]] | None = None,
    ) -> OverviewOut:
        """Every active eval over ``window`` ("24h", "7d" or "30d", ending with the current
        UTC hour): results, pass rate, mean score, a pass-rate sparkline, the change of the
        pass rate against the window before with its 95% interval ("dropped" when it lies
        wholly below 0), the hour of the newest result; sorted by ``sort`` (``SORTS``; worst
        first by default). ``alerts`` returns the open alerts per eval name, when there is
        such a thing to count. Reads the trend rollup, not the results."""
        if window not in WINDOWS:
            raise InvalidInput(f"window must be one of {', '.join(WINDOWS)}, not {window!r}")
        if sort.lstrip("-") not in SORTS:
            raise InvalidInput(f"sort must be one of {', '.join(SORTS)} (or -NAME), not {sort!r}")
        hours, per = WINDOWS[window]
        when = (now or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None)
        end = hour_start(when) + HOUR
        start = end - timedelta(hours=hours)
        prev = start - timedelta(hours=hours)
        board = _Board()
        with self.store.read() as s:
            evals = active_evals(s)
            rollup_slots(s, board, prev, start, end, per)
            _tail(s, board, prev, start, end, per)
        open_by_name = alerts() if alerts is not None else None
        rows = [
            _row(
                name,
                threshold,
                board.slots.get(eval_id, {}),
                board.last.get(eval_id),
                hours // per,
                None if open_by_name is None else open_by_name.get(name, 0),
            )
            for eval_id, name, threshold in evals
        ]
        return OverviewOut(
            window=window,
            start=as_utc(start),
            end=as_utc(end),
            slot_hours=per,
            sort=sort,
            evals=sort_rows(rows, sort),
        )
