"""The overview (every active eval at a glance) read from the rollup equals a direct count of
every result, and sorts a dropping eval first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from simeval.errors import InvalidInput
from simeval.scoring.compare import pass_rate_diff_interval
from simeval.service import Service
from simeval.store.meta_rollup import watermark
from simeval.store.rollups import ROLLUP_EVERY

PARIS = "Paris is the capital of France."
ROME = "The Tiber flows through Rome."
GOOD = "Paris is France's capital."
BAD = "I like trains."
NOW = datetime(2026, 3, 10, 12, 30, tzinfo=UTC)


def _direct(svc: Service, name: str, since: datetime, until: datetime) -> tuple[int, int, float]:
    rows = svc.list_results(eval_name=name, since=since, until=until, limit=100_000, explain=False)
    return (
        len(rows),
        sum(r.passed for r in rows),
        sum(r.review.score if r.review else r.score for r in rows),
    )


def _setup(svc: Service) -> None:
    for name, ref in (("paris", PARIS), ("rome", ROME), ("steady", PARIS)):
        svc.create_eval(name, ref, threshold=0.6)
        svc.test_eval(name, "q", ref)
        svc.activate_eval(name)
    svc.create_eval("draft-one", PARIS)  # not active: not in the overview
    end = NOW.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(hours=24)
    items = []
    # the window before: mostly good answers; this window: mostly bad ones
    for k in range(ROLLUP_EVERY + 40):
        at = start - timedelta(hours=23) + timedelta(minutes=5 * k)
        items.append(("q", GOOD if k % 10 else BAD, None, None, at))
    for k in range(ROLLUP_EVERY):
        at = start + timedelta(minutes=1 + 5 * k)
        items.append(("q", BAD if k % 4 else GOOD, None, None, at))
    for k in range(0, len(items), 50):
        svc.capture_checked(items[k : k + 50])


def test_overview_matches_a_direct_count_and_sorts_the_drop_first(db: str) -> None:
    svc = Service(db)
    _setup(svc)
    assert watermark_is_behind(svc)  # some captures are read past the rollup's watermark
    first = svc.list_results(eval_name="paris", limit=3, explain=False)
    for r in first:  # reviews win, as everywhere else
        svc.review_result(r.id, 0.0 if r.passed else 1.0, "flipped")
    out = svc.overview("24h", now=NOW)
    names = [r.eval_name for r in out.evals]
    assert set(names) == {"paris", "rome", "steady"}
    end, start = out.end, out.start
    assert end - start == timedelta(hours=24) and out.slot_hours == 2
    for row in out.evals:
        n, passes, total = _direct(svc, row.eval_name, start, end)
        pn, ppasses, _ = _direct(svc, row.eval_name, start - timedelta(hours=24), start)
        assert row.results == n and row.previous_results == pn
        assert row.pass_rate == pytest.approx(passes / n)
        assert row.mean_score == pytest.approx(total / n)
        d, lo, hi = pass_rate_diff_interval(ppasses, pn, passes, n)
        assert row.change == pytest.approx(d) and row.change_ci == pytest.approx([lo, hi])
        assert len(row.sparkline) == 12
        assert row.last_hour is not None and start <= row.last_hour < end
    by = {r.eval_name: r for r in out.evals}
    assert by["paris"].trend == "dropped" and by["steady"].trend == "dropped"
    assert by["rome"].trend == "no clear change"  # never passes, either window
    # worst first: the two drops (most certain first), then the lowest pass rate
    assert names[2] == "rome" and set(names[:2]) == {"paris", "steady"}
    assert [r.eval_name for r in svc.overview("24h", "name", now=NOW).evals] == sorted(names)
    desc = svc.overview("24h", "-pass_rate", now=NOW).evals
    assert [r.pass_rate for r in desc] == sorted((r.pass_rate for r in desc), reverse=True)


def watermark_is_behind(svc: Service) -> bool:
    with svc.store.read() as s:
        mark = watermark(s)
    return 0 < mark < svc.count_captures()


def test_overview_empty_window_and_bad_input(db: str) -> None:
    svc = Service(db)
    _setup(svc)
    later = svc.overview("24h", now=NOW + timedelta(days=5))
    assert all(r.results == 0 and r.pass_rate is None for r in later.evals)
    assert all(r.trend == "not enough data" and r.last_hour is None for r in later.evals)
    wide = svc.overview("30d", now=NOW, alerts=lambda: {"paris": 2})
    assert {r.eval_name: r.open_alerts for r in wide.evals} == {"paris": 2, "rome": 0, "steady": 0}
    with pytest.raises(InvalidInput, match="window must be one of 24h, 7d, 30d"):
        svc.overview("2w")
    with pytest.raises(InvalidInput, match="sort must be one of"):
        svc.overview("24h", "loudest")


def test_overview_without_date_arithmetic_slots_the_hours_itself(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dialect whose date arithmetic the overview does not know: the hourly sums are read
    and slotted in Python, with the same answer."""
    from simeval.store import overview_sql

    svc = Service(db)
    _setup(svc)
    in_sql = svc.overview("7d", now=NOW)
    monkeypatch.setattr(overview_sql, "_hour_index", lambda dialect, start: None)
    assert svc.overview("7d", now=NOW) == in_sql
