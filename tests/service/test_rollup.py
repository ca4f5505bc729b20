"""Trends, counts and eval stats read through the rollup equal a count of every result."""

from __future__ import annotations

import threading
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from simeval.service import Service
from simeval.store import resolve_db_url
from simeval.store.meta_rollup import watermark
from simeval.store.rollups import ROLLUP_EVERY, roll_up, tally_range

REFS = ["Paris is the capital of France.", "The Seine flows through Paris.", "Rome is in Italy."]
OUTPUTS = [
    "Paris is France's capital.",
    "The river Seine runs through Paris.",
    "Rome, Italy.",
    "I like trains.",
    "The capital of France is Paris, on the Seine.",
]


def _direct(svc: Service, name: str, start: datetime, end: datetime) -> dict[datetime, list]:
    """Per hour: count, sum of effective scores, passes, reviewed, from every listed result."""
    out: dict[datetime, list] = defaultdict(lambda: [0, 0.0, 0, 0])
    for r in svc.list_results(eval_name=name, since=start, until=end, limit=100_000, explain=False):
        when = r.captured_at.replace(minute=0, second=0, microsecond=0, tzinfo=None)
        slot = out[when]
        slot[0] += 1
        slot[1] += r.review.score if r.review else r.score
        slot[2] += r.passed
        slot[3] += r.review is not None
    return out


def test_rollup_matches_a_direct_count(db: str) -> None:
    svc = Service(db)
    for i, ref in enumerate(REFS):
        svc.create_eval(f"e{i}", ref, threshold=0.6)
        svc.test_eval(f"e{i}", "q", ref)
        svc.activate_eval(f"e{i}")
    base = datetime(2026, 1, 5, 9, 10)
    n = 2 * ROLLUP_EVERY + 37  # several steps of the rollup, and captures past the watermark
    items = [
        ("q", OUTPUTS[k % len(OUTPUTS)], None, None, base + timedelta(minutes=7 * k))
        for k in range(n)
    ]
    for k in range(0, n, 50):  # batches, as the server stores them
        svc.capture_checked(items[k : k + 50])
    # a new version of one eval part-way: its results keep their version apart
    svc.edit_eval("e1", threshold=0.5)
    svc.test_eval("e1", "q", REFS[1])
    svc.activate_eval("e1")
    svc.capture("q", OUTPUTS[1], captured_at=base + timedelta(minutes=7 * n))
    # reviews change the effective score and verdict of some results
    for r in svc.list_results(eval_name="e0", limit=7, explain=False):
        svc.review_result(r.id, 0.0 if r.passed else 1.0, "flipped")
    start, end = base + timedelta(minutes=25), base + timedelta(minutes=7 * n - 40)
    for name in ("e0", "e1", "e2"):
        tr = svc.trend(name, bucket="hour", since=start, until=end)
        want = _direct(svc, name, start, end)
        got = {
            b.start.replace(tzinfo=None): [
                b.count,
                b.mean_score * b.count,
                b.pass_rate * b.count,
                b.reviewed,
            ]
            for b in tr.buckets
        }
        assert set(got) == set(want)
        for hour, (c, total, passes, reviewed) in want.items():
            g = got[hour]
            assert g[0] == c and g[3] == reviewed
            assert abs(g[1] - total) < 1e-9 and round(g[2]) == passes
        assert svc.count_results(eval_name=name, since=start, until=end) == sum(
            v[0] for v in want.values()
        )
        assert svc.count_results(eval_name=name, passed=True, since=start, until=end) == sum(
            v[2] for v in want.values()
        )
    everything = svc.list_results(limit=100_000, explain=False)
    assert svc.count_results() == len(everything) == 3 * (n + 1)
    assert svc.count_results(reviewed=True) == 7
    assert svc.count_results(passed=False) == sum(not r.passed for r in everything)
    stats = {e.name: e.stats for e in svc.list_evals()}
    e0 = [r for r in everything if r.eval_name == "e0"]
    assert stats["e0"] is not None and stats["e0"].results == len(e0)
    assert abs(stats["e0"].pass_rate - sum(r.passed for r in e0) / len(e0)) < 1e-12
    # retention: the rollup loses exactly what is deleted, the hour of the cutoff included
    svc.update_settings(retention_days=7)
    cut = svc.cleanup(now=base + timedelta(days=7, minutes=7 * 100 + 3))
    assert cut.captures > 0
    left = svc.list_results(limit=100_000, explain=False)
    assert svc.count_results() == len(left) == 3 * (n + 1) - cut.results
    tr = svc.trend("e2", bucket="day")
    assert sum(b.count for b in tr.buckets) == sum(r.eval_name == "e2" for r in left)
    svc.close()


def _one_eval_and_items(svc: Service) -> list[tuple[Any, ...]]:
    """An active eval "e0", and checked captures spread over hours past two rollup steps."""
    svc.create_eval("e0", REFS[0], threshold=0.6)
    svc.test_eval("e0", "q", REFS[0])
    svc.activate_eval("e0")
    base = datetime(2026, 1, 5, 9, 10)
    return [
        ("q", OUTPUTS[k % len(OUTPUTS)], None, None, base + timedelta(minutes=7 * k))
        for k in range(2 * ROLLUP_EVERY + 37)
    ]


def test_rescore_keeps_the_rollup_exact_and_stores_once(db: str) -> None:
    svc = Service(db)
    items = _one_eval_and_items(svc)
    n, base = len(items), items[0][4]
    # the first third captured while automatic evaluation was off: no results
    svc.update_settings(auto_evaluate=False)
    svc.capture_checked(items[: n // 3])
    svc.update_settings(auto_evaluate=True)
    for k in range(n // 3, n, 50):
        svc.capture_checked(items[k : min(k + 50, n)])
    # an eval made afterwards scores none of them until rescored
    svc.create_eval("late", REFS[1], threshold=0.5)
    svc.test_eval("late", "q", REFS[1])
    svc.activate_eval("late")
    first = svc.rescore("e0", since=base)
    assert first["added"] == n // 3 and first["scanned"] == n
    assert svc.rescore("late", since=base)["added"] == n
    again = [svc.rescore(name, since=base)["added"] for name in ("e0", "late")]
    assert again == [0, 0]  # once per capture and eval
    _assert_exact(svc, ("e0", "late"), base, n)
    # the captures past the watermark rolled up afterwards: with the entries rescore added
    svc.store.run_write(lambda s: roll_up(s.connection()))
    _assert_exact(svc, ("e0", "late"), base, n)
    svc.close()


def _assert_exact(svc: Service, names: tuple[str, ...], base: datetime, n: int) -> None:
    """The rollup's sums (``tally_range``, the trend, counts, stats) equal a direct count."""
    start, end = base, base + timedelta(minutes=7 * n + 1)
    ids = {e.name: e.id for e in svc.list_evals()}
    with svc.store.read() as s:
        tallied = tally_range(s, None, start, end)
    for name in names:
        want = _direct(svc, name, start, end)
        assert sum(v[0] for v in want.values()) == n
        mine = {k[0]: v for k, v in tallied.items() if k[1] == ids[name]}
        assert {h: v.count for h, v in mine.items()} == {h: v[0] for h, v in want.items()}
        for hour, (_, total, passes, _) in want.items():
            assert abs(mine[hour].total - total) < 1e-9 and mine[hour].passes == passes
        tr = svc.trend(name, bucket="hour", since=start, until=end)
        got = {b.start.replace(tzinfo=None): (b.count, b.mean_score * b.count) for b in tr.buckets}
        assert set(got) == set(want)
        for hour, (c, total, _, _) in want.items():
            assert got[hour][0] == c and abs(got[hour][1] - total) < 1e-9
        assert svc.count_results(eval_name=name) == n
    stats = {e.name: e.stats.results for e in svc.list_evals() if e.stats}
    assert stats == {name: n for name in names}


def test_rescore_waits_for_a_rollup_in_progress(pg_url: str) -> None:
    """On PostgreSQL a rescore and the rollup would otherwise interleave: the rollup (holding
    the capture lock, not committed yet) counts captures past the old watermark with their
    results as they were, while the rescore, reading the old watermark, adds results to those
    captures without adding them to the rollup, and overwrites the rollup rows both change.
    The rescore takes the capture lock as the rollup does, so it runs after it."""
    import sqlalchemy as sa

    svc = Service(pg_url)
    items = _one_eval_and_items(svc)
    n, base = len(items), items[0][4]
    for k in range(0, n, 50):
        svc.capture_checked(items[k : k + 50])
    with svc.store.read() as s:
        assert 0 < watermark(s) < n  # some captures rolled up, some past the watermark
    svc.create_eval("late", REFS[1], threshold=0.5)
    svc.test_eval("late", "q", REFS[1])
    svc.activate_eval("late")
    engine = sa.create_engine(resolve_db_url(pg_url), poolclass=sa.pool.NullPool)
    done: list[dict] = []
    try:
        with engine.connect() as conn:
            assert roll_up(conn) == n  # the lock held, the watermark moved, not committed
            worker = threading.Thread(target=lambda: done.append(svc.rescore("late", since=base)))
            worker.start()
            worker.join(1.0)
            assert worker.is_alive() and not done  # waiting for the rollup
            conn.commit()
        worker.join(60)
    finally:
        engine.dispose()
    assert done and done[0]["added"] == n
    _assert_exact(svc, ("e0", "late"), base, n)
    svc.close()
