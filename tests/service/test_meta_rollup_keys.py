"""Which metadata keys the rollups by value count, and the counts of those they do not.

``latency_ms``, ``input_tokens`` and ``output_tokens`` (``meta_index.NOT_ROLLED_UP``) are
indexed but not rolled up: nearly every capture has its own value, so ``meta_rollup`` and
``meta_capture_rollup`` would hold a row per capture. On a real SQLite file and a real
PostgreSQL database (``conftest.db``):

- a capture's numeric metadata creates no rollup row (rolling up, a rescore, a cleanup);
- counts of results and of captures under such a key, and under a rolled-up key, equal a
  direct scan of the stored captures;
- a store taken down to 0011 (no rollup tables) with such captures, upgraded to the head
  (0012 and 0013 fill them, 0015 deletes the measurement rows), holds rollup tables equal to
  a recomputation and the same counts as a direct scan;
- a drop of a declared key interrupted after its first chunk, then the key declared again,
  leaves the counts exact (the leftover rows are dropped before the backfill).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from tests.rollups import capture_at, declared, held_captures, held_results, roll, stored, utc

from simeval.checks import utc_now
from simeval.service import ResultFilter, Service
from simeval.service.filters import meta_matches, parse_meta
from simeval.store import (
    index_entries,
    indexed_keys,
    make_engine,
    resolve_db_url,
    unpack_results,
    upgrade,
)
from simeval.store.meta_index import NOT_ROLLED_UP, rolled_up
from simeval.store.meta_rollup import hour_start, watermark
from simeval.store.tables import MetaCaptureRollup, MetaRollup

QUESTION = "What is the capital of France?"
ANSWERS = ("Paris is the capital of France.", "France is in Europe.")


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as s:
        for name, ref in (("capital", ANSWERS[0]), ("europe", ANSWERS[1])):
            s.create_eval(name, ref, threshold=0.5)
            s.test_eval(name, QUESTION, ref)
            s.activate_eval(name)
        yield s


def _meta(rng: random.Random, k: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "engine": rng.choice(["v1", "v2"]),
        "latency_ms": rng.randint(50, 5000) if k % 7 else 120,  # a few share a value
        "input_tokens": rng.randint(10, 900),
        "output_tokens": rng.randint(1, 400),
    }
    if rng.random() < 0.6:
        meta["team"] = rng.choice(["chat", "search"])
    return meta


def _capture(svc: Service, rng: random.Random, times: list[datetime]) -> None:
    capture_at(svc, rng, times, ANSWERS, _meta)


def _filters(svc: Service) -> list[str]:
    """Filters on every kind of key: measurement values held by one capture and by several,
    rolled-up defaults, a declared key."""
    every = stored(svc)
    shared = [f"latency_ms={m['latency_ms']}" for _, m, _, _ in every if m["latency_ms"] == 120]
    return [
        shared[0],
        f"latency_ms={every[3][1]['latency_ms']}",
        f"input_tokens={every[-1][1]['input_tokens']}",
        f"output_tokens={every[5][1]['output_tokens']}",
        "engine=v2",
        "team=chat",
    ]


def _assert_counts(svc: Service, filters: list[str], ranges: list[tuple[Any, Any]]) -> None:
    """``count_results`` (all, passed, per eval) and ``count_captures`` equal a direct scan of
    the stored captures' metadata, time and packed results."""
    every = stored(svc)
    with svc.store.read() as s:
        ids = dict(s.execute(sa.text("SELECT name, id FROM evals")).all())
    for meta in filters:
        pairs = parse_meta([meta])
        for since, until in ranges:
            inside = [
                blob
                for _, md, at, blob in every
                if meta_matches(md, pairs)
                and (since is None or at >= since)
                and (until is None or at < until)
            ]
            assert svc.count_captures(meta=[meta], since=utc(since), until=utc(until)) == len(
                inside
            ), (meta, since, until)
            rows = [r for blob in inside if blob for r in unpack_results(blob).rows()]
            for name, passed in ((None, None), (None, True), ("europe", None), ("europe", False)):
                want = sum(
                    1
                    for eval_id, _v, _score, ok, *_ in rows
                    if (name is None or eval_id == ids[name])
                    and (passed is None or bool(ok) == passed)
                )
                f = ResultFilter.parse(
                    eval_name=name, passed=passed, meta=[meta], since=since, until=until
                )
                assert svc.count_results(f) == want, (meta, since, until, name, passed)


def _assert_tables_exact(svc: Service) -> None:
    """Both rollup tables equal a recomputation from the captures up to the watermark, their
    metadata JSON and the declared keys, the measurement keys left out; none holds a row of
    a measurement key."""
    with svc.store.read() as s:
        mark = watermark(s)
        keys = [k for k in indexed_keys(declared(s)) if rolled_up(k)]
        results = held_results(s)
        held = held_captures(s)
        for table in (MetaRollup, MetaCaptureRollup):
            q = sa.select(sa.func.count()).where(table.key.in_(NOT_ROLLED_UP))
            assert s.scalar(q) == 0, table
    want_results: dict[tuple[Any, ...], list[int]] = {}
    want_held: dict[tuple[Any, ...], int] = {}
    for cid, meta, at, blob in stored(svc):
        if cid > mark:
            continue
        for key, value in index_entries(meta, keys):
            slot = (key, value, hour_start(at))
            want_held[slot] = want_held.get(slot, 0) + 1
            for eval_id, _v, _score, ok, *_ in unpack_results(blob).rows() if blob else ():
                acc = want_results.setdefault((*slot, eval_id), [0, 0])
                acc[0] += 1
                acc[1] += int(ok)
    assert results == want_results
    assert held == want_held


def _base(days: int) -> datetime:
    now = utc_now() - timedelta(days=days)
    return now.replace(tzinfo=None, minute=10, second=0, microsecond=0)


def test_measurement_keys_make_no_rollup_rows_and_count_exactly(svc: Service) -> None:
    rng = random.Random(17)
    base = _base(3)
    svc.update_settings(indexed_meta=["team"])
    _capture(svc, rng, [base + timedelta(minutes=9 * k) for k in range(60)])
    assert roll(svc) > 0
    _capture(svc, rng, [base + timedelta(minutes=9 * k + 4) for k in range(0, 60, 3)])
    with svc.store.read() as s:
        # the measurements are indexed (a filter on them reads the index) ...
        n = s.scalar(sa.text("SELECT count(*) FROM capture_meta WHERE key = 'latency_ms'"))
        assert n == len(stored(svc))
    _assert_tables_exact(svc)  # ... and not rolled up
    ranges = [
        (None, None),
        (base + timedelta(minutes=25), None),
        (base + timedelta(hours=1, minutes=5), base + timedelta(hours=6)),
        (hour_start(base) + timedelta(hours=2), hour_start(base) + timedelta(hours=2, minutes=40)),
    ]
    filters = _filters(svc)
    _assert_counts(svc, filters, ranges)

    # a rescore, a declared key dropped and declared again, a retention cleanup
    svc.create_eval("late", ANSWERS[1], threshold=0.4)
    svc.test_eval("late", QUESTION, ANSWERS[1])
    svc.activate_eval("late")
    assert svc.rescore("late", since="30d").added > 0
    _assert_tables_exact(svc)
    svc.update_settings(indexed_meta=[])
    svc.update_settings(indexed_meta=["team", "latency_ms"])  # a default declared: no rows
    _assert_tables_exact(svc)
    svc.update_settings(retention_days=7)
    cut = base + timedelta(hours=2, minutes=33)
    gone = [blob for _, _, at, blob in stored(svc) if at < cut]
    done = svc.cleanup(now=cut + timedelta(days=7))
    assert done.captures == len(gone) > 0
    assert done.results == sum(len(unpack_results(b)) for b in gone if b) > 0
    _assert_tables_exact(svc)
    _assert_counts(svc, filters, ranges[:3])


def test_a_0011_store_with_measurements_is_exact_at_the_head(db: str, svc: Service) -> None:
    rng = random.Random(23)
    base = _base(2)
    svc.update_settings(indexed_meta=["team"])
    _capture(svc, rng, [base + timedelta(minutes=11 * k) for k in range(50)])
    roll(svc)
    _capture(svc, rng, [base + timedelta(minutes=11 * k + 5) for k in range(8)])
    engine = make_engine(resolve_db_url(db))
    from alembic import command

    from simeval.store import alembic_config

    with engine.begin() as conn:  # down to 0011 (no rollup by value), then up to the head
        command.downgrade(alembic_config(conn), "0011")
        assert not sa.inspect(conn).has_table("meta_rollup")
        upgrade(conn, "head")
    engine.dispose()
    with Service(db) as again:
        _assert_tables_exact(again)
        _assert_counts(
            again,
            _filters(again),
            [(None, None), (base + timedelta(minutes=50), base + timedelta(hours=7))],
        )


def test_the_0012_fill_adds_its_sums_a_part_at_a_time(svc: Service) -> None:
    import importlib

    rng = random.Random(29)
    _capture(svc, rng, [_base(1) + timedelta(minutes=7 * k) for k in range(40)])
    roll(svc)
    fill = importlib.import_module("simeval.store.migrations.versions.v0012_meta_rollup")
    flushes: list[int] = []
    real_add = fill._add

    def add(conn: Any, total: dict[Any, list[int]]) -> None:
        flushes.append(len(total))
        real_add(conn, total)

    with svc.store.engine.begin() as conn:  # the fill again, flushing every 10 sums
        conn.execute(sa.delete(MetaRollup))
        old_flush, old_chunk, fill._FLUSH, fill._CHUNK, fill._add = (
            fill._FLUSH,
            fill._CHUNK,
            10,
            7,
            add,
        )
        try:
            fill._fill(conn)
        finally:
            fill._FLUSH, fill._CHUNK, fill._add = old_flush, old_chunk, real_add
        conn.execute(sa.delete(MetaRollup).where(MetaRollup.key.in_(NOT_ROLLED_UP)))  # 0015
    assert len(flushes) > 2
    _assert_tables_exact(svc)


def test_an_interrupted_drop_then_the_key_declared_again_counts_exactly(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    import simeval.service.settings as settings_module
    import simeval.store.settings_sql as settings_sql

    rng = random.Random(31)
    base = _base(1)
    svc.update_settings(indexed_meta=["team"])
    _capture(svc, rng, [base + timedelta(minutes=3 * k) for k in range(90)])
    roll(svc)
    want = sum(1 for _, m, _, _ in stored(svc) if m.get("team") == "chat")
    assert svc.count_captures(meta=["team=chat"]) == want > 20

    # the drop stops after its first chunk of 10 rows (a crash, a killed process)
    monkeypatch.setattr(settings_module, "_DROP_CHUNK", 10)
    calls = {"n": 0}
    real = settings_sql.drop_meta_key

    def once(conn: Any, key: str, limit: int) -> int:
        calls["n"] += 1
        if calls["n"] > 1:
            raise KeyboardInterrupt
        return real(conn, key, limit)

    monkeypatch.setattr(settings_sql, "drop_meta_key", once)
    with pytest.raises(KeyboardInterrupt):
        svc.update_settings(indexed_meta=[])
    monkeypatch.setattr(settings_sql, "drop_meta_key", real)
    with svc.store.read() as s:
        left = s.scalar(sa.text("SELECT count(*) FROM capture_meta WHERE key = 'team'"))
    assert left and left > 20  # rows of the dropped key are left over

    svc.update_settings(indexed_meta=["team"])
    _assert_tables_exact(svc)
    ranges = [(None, None), (base + timedelta(minutes=40), base + timedelta(hours=3))]
    _assert_counts(svc, ["team=chat", "team=search"], ranges)


def test_a_drop_waits_for_the_captures_in_flight_on_postgresql(db: str, svc: Service) -> None:
    """A capture transaction holds the capture lock shared to its commit; a drop of a key
    takes it exclusively (as the rollup step does), so a rollup cannot commit sums of rows
    the drop has deleted. Here the drop, with a lock timeout, fails while a capture holds it."""
    from tests.dbhelp import is_pg

    from simeval.store import CAPTURE_LOCK
    from simeval.store.summaries import drop_meta_key

    if not is_pg(db):
        pytest.skip("SQLite serialises writers: there is no capture lock")
    _capture(svc, random.Random(3), [_base(1) + timedelta(minutes=k) for k in range(5)])
    engine = svc.store.engine
    with engine.connect() as capture, engine.connect() as dropper:
        capture.exec_driver_sql(f"SELECT pg_advisory_xact_lock_shared({CAPTURE_LOCK})")
        dropper.exec_driver_sql("SET lock_timeout = '300ms'")
        with pytest.raises(sa.exc.OperationalError, match="lock timeout"):
            drop_meta_key(dropper, "engine", 10)
        dropper.rollback()
        capture.rollback()  # the capture commits: the drop goes through
        dropper.exec_driver_sql("SET lock_timeout = '5s'")
        assert drop_meta_key(dropper, "engine", 1000) == 5  # then rolled back
        dropper.rollback()
