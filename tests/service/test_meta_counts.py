"""Counts of captured results under one metadata filter, summed from ``meta_rollup``
(migration 0012), on a real SQLite file and a real PostgreSQL database (``conftest.db``).

Each count equals a direct scan of every stored result (its capture's metadata, time, eval,
effective verdict and review), for time ranges straddling hour boundaries and within one
hour, with the rollup's watermark in the middle of the captures, with reviews; and stays so
after a rescore, a retention cleanup (the cutoff within an hour and on the hour) and the
declaration of a new key (and its removal). ``meta_rollup`` itself is checked against a
recomputation from the captures up to the watermark and their ``capture_meta`` rows. A store
taken down to revision 0011 gets the same counts after the upgrade.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from tests.rollups import capture_at, held_results, mixed_meta, roll, utc

from simeval.checks import utc_now
from simeval.service import ResultFilter, Service
from simeval.service.filters import meta_matches
from simeval.store import make_engine, resolve_db_url, unpack_results, upgrade
from simeval.store.capture_reads import rollup_sum
from simeval.store.meta_rollup import hour_start, watermark
from simeval.store.tables import capture_meta_table, captures_table

PARIS = "The capital of France is Paris, which stands on the Seine."
SEINE = "The Seine flows through Paris."
QUESTION = "What is the capital of France?"
ANSWERS = ("Paris is the capital of France.", "France is in Europe.", "The Seine is a river.")
# (passed, reviewed) pairs counted for every filter
VERDICTS = [(None, None), (False, None), (True, None), (None, True), (None, False), (False, True)]


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as s:
        for name, ref in (("capital", PARIS), ("river", SEINE)):
            s.create_eval(name, ref, threshold=0.5)
            assert s.test_eval(name, QUESTION, ref).passed
            s.activate_eval(name)
        yield s


def _capture(svc: Service, rng: random.Random, times: list[datetime]) -> None:
    capture_at(svc, rng, times, ANSWERS, mixed_meta)


def _assert_counts(svc: Service, filters: list[list[str]], ranges: list[tuple[Any, Any]]) -> None:
    """``count_results`` equals a direct scan of every result, for each filter, range, eval
    and (verdict, review) filter."""
    every = svc.list_results(limit=100_000, explain=False)
    assert len(every) < 100_000
    for meta in filters:
        pairs = ResultFilter.parse(meta=meta).meta
        for since, until in ranges:
            lo, hi = utc(since), utc(until)
            inside = [
                r
                for r in every
                if r.capture_id is not None
                and meta_matches(r.metadata, pairs)
                and (lo is None or r.captured_at >= lo)
                and (hi is None or r.captured_at < hi)
            ]
            for name in (None, "river"):
                for passed, reviewed in VERDICTS:
                    want = sum(
                        1
                        for r in inside
                        if (name is None or r.eval_name == name)
                        and (passed is None or r.passed == passed)
                        and (reviewed is None or (r.review is not None) == reviewed)
                    )
                    f = ResultFilter.parse(
                        eval_name=name,
                        passed=passed,
                        reviewed=reviewed,
                        meta=meta,
                        since=since,
                        until=until,
                    )
                    got = svc.count_results(f)
                    assert got == want, (meta, since, until, name, passed, reviewed)


def _assert_rollup_exact(db: str) -> None:
    """``meta_rollup`` holds what the captures up to the watermark and their
    ``capture_meta`` rows give, recomputed one result at a time."""
    with Service(db) as svc, svc.store.read() as s:
        mark = watermark(s)
        pairs: dict[int, list[tuple[str, str]]] = {}
        for cid, key, value in s.execute(
            sa.select(
                capture_meta_table.c.capture_id,
                capture_meta_table.c.key,
                capture_meta_table.c.value,
            )
        ):
            pairs.setdefault(cid, []).append((key, value))
        want: dict[tuple[Any, ...], list[int]] = {}
        caps = sa.select(captures_table.c.id, captures_table.c.captured_at, captures_table.c.scores)
        for cid, when, blob in s.execute(caps.where(captures_table.c.id <= mark)):
            for eval_id, _v, _score, ok, *_ in unpack_results(blob).rows():
                for key, value in pairs.get(cid, []):
                    slot = want.setdefault((key, value, hour_start(when), eval_id), [0, 0])
                    slot[0] += 1
                    slot[1] += int(ok)
        got = held_results(s)
        assert got == want


FILTERS = [["engine=v2"], ["model=3"], ["engine=" + "é" * 201], ["engine=v1", "model=m-0"]]


@pytest.mark.slow
def test_counts_under_one_filter_equal_a_direct_scan(db: str, svc: Service) -> None:
    rng = random.Random(7)
    base = (utc_now() - timedelta(days=3)).replace(tzinfo=None, minute=10, second=0, microsecond=0)
    hour = hour_start(base)
    # the first captures rolled up, the later ones (interleaved in time) past the watermark
    _capture(svc, rng, [base + timedelta(minutes=7 * k) for k in range(90)])
    assert roll(svc) > 0
    _capture(svc, rng, [base + timedelta(minutes=7 * k + 3) for k in range(0, 90, 2)])
    with svc.store.read() as s:
        assert watermark(s) < max(c.id for c in svc.list_captures(limit=1000))
    # reviews: of counted captures and of captures past the watermark, some flipping
    every = svc.list_results(limit=10_000, explain=False)
    for r in rng.sample(every, 12):
        svc.review_result(r.id, 1.0 - float(r.passed), note="flip" if rng.random() < 0.7 else "")
    ranges = [
        (None, None),
        (base + timedelta(minutes=25), None),  # from the middle of an hour
        (hour + timedelta(hours=2), hour + timedelta(hours=7, minutes=40)),  # on the hour
        (base + timedelta(hours=1, minutes=5), base + timedelta(hours=8)),  # both partial
        (hour + timedelta(hours=3, minutes=10), hour + timedelta(hours=3, minutes=50)),  # within
    ]
    _assert_counts(svc, FILTERS, ranges)
    _assert_rollup_exact(db)

    # a new eval rescored over the past captures: its entries counted under their values
    svc.create_eval("late", ANSWERS[2], threshold=0.4)
    svc.test_eval("late", QUESTION, ANSWERS[2])
    svc.activate_eval("late")
    assert svc.rescore("late", since="30d").added > 0
    _assert_rollup_exact(db)
    _assert_counts(svc, FILTERS[:2], ranges[:4])

    # a key declared after the captures: filled in, counted; then dropped again
    svc.update_settings(indexed_meta=["team"])
    _assert_rollup_exact(db)
    _assert_counts(svc, [["team=chat"]], ranges[:3])
    roll(svc)
    _capture(svc, rng, [base + timedelta(hours=2, minutes=k) for k in range(5)])
    _assert_counts(svc, [["team=search"]], ranges[:3])
    svc.update_settings(indexed_meta=[])
    _assert_rollup_exact(db)
    _assert_counts(svc, [["team=chat"]], ranges[:2])

    # retention: the cutoff within an hour, then on the hour
    svc.update_settings(retention_days=7)
    for cut in (base + timedelta(hours=1, minutes=33), hour + timedelta(hours=4)):
        assert svc.cleanup(now=cut + timedelta(days=7)).captures > 0
        _assert_rollup_exact(db)
        _assert_counts(svc, FILTERS[:2], ranges[:4])
    svc.update_settings(retention_days=None)


def test_a_0011_store_gets_the_same_counts_after_the_upgrade(db: str, svc: Service) -> None:
    rng = random.Random(11)
    base = (utc_now() - timedelta(days=2)).replace(tzinfo=None, minute=40, second=0, microsecond=0)
    _capture(svc, rng, [base + timedelta(minutes=11 * k) for k in range(70)])
    roll(svc)
    _capture(svc, rng, [base + timedelta(minutes=11 * k + 5) for k in range(10)])
    ranges = [(None, None), (base + timedelta(minutes=50), base + timedelta(hours=9))]
    before = {
        (tuple(m), i): svc.count_results(ResultFilter.parse(meta=m, since=a, until=b))
        for m in FILTERS[:2]
        for i, (a, b) in enumerate(ranges)
    }
    engine = make_engine(resolve_db_url(db))
    from alembic import command

    from simeval.store import alembic_config

    with engine.begin() as conn:  # down to 0011 (no meta_rollup), then up again: filled
        command.downgrade(alembic_config(conn), "0011")
        assert not sa.inspect(conn).has_table("meta_rollup")
        upgrade(conn, "head")
    engine.dispose()
    _assert_rollup_exact(db)
    with Service(db) as again:
        after = {
            (tuple(m), i): again.count_results(ResultFilter.parse(meta=m, since=a, until=b))
            for m in FILTERS[:2]
            for i, (a, b) in enumerate(ranges)
        }
    assert after == before
    assert any(n > 0 for n in after.values())


def test_the_rollup_sum_reads_one_range_of_the_primary_key(new_sqlite: Callable[..., str]) -> None:
    """SQLite plans the sum of one value's hours (with and without an eval and a range) as a
    search of ``meta_rollup``'s primary key, never a scan of the table."""
    db = new_sqlite("plan.db")
    with Service(db) as svc, svc.store.read() as s:
        hour = datetime(2026, 5, 1, 8)
        for eval_id, h1, h2 in [(None, None, None), (3, hour, hour + timedelta(days=2))]:
            q = rollup_sum(("engine", "v2"), eval_id, h1, h2)
            sql = str(q.compile(s.get_bind(), compile_kwargs={"literal_binds": True}))
            plan = " ".join(str(r[-1]) for r in s.execute(sa.text("EXPLAIN QUERY PLAN " + sql)))
            assert "SEARCH meta_rollup USING" in plan and "key=? AND value=?" in plan, plan
            assert "SCAN" not in plan, plan
