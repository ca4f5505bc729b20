"""The number of captures under one metadata filter (``count_captures(meta=...)``, the total of
``/api/captures?meta=``), summed by hour from ``meta_capture_rollup`` (migration 0013), on a
real SQLite file and a real PostgreSQL database (``conftest.db``).

Each count equals a direct scan of the stored captures (their metadata JSON and time, read
from ``captures``, not from the index) for time ranges straddling hours, on the hour and
within one hour, with the watermark in the middle of the captures and unscored captures among
them; and stays so after a rescore, the declaration of a key and its removal, and retention
cleanups (cutoff within an hour and on the hour). The table itself equals a recomputation
from the captures up to the watermark. A store taken down to 0012 is filled by the upgrade
as a recomputation gives. The queries of such a count are explained on both backends: none
reads ``capture_meta`` or ``meta_capture_rollup`` whole.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from tests.dbhelp import is_pg
from tests.rollups import capture_at, declared, held_captures, mixed_meta, roll, stored, utc

from simeval.checks import utc_now
from simeval.service import Service
from simeval.service.filters import meta_matches, parse_meta
from simeval.store import index_entries, indexed_keys, make_engine, resolve_db_url, upgrade
from simeval.store.meta_rollup import hour_start, watermark
from simeval.store.tables import MetaCaptureRollup

QUESTION = "What is the capital of France?"
ANSWERS = ("Paris is the capital of France.", "France is in Europe.")
FILTERS = ["engine=v2", "model=3", "engine=" + "é" * 201, "team=chat"]


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as s:
        s.create_eval("capital", ANSWERS[0], threshold=0.5)
        s.test_eval("capital", QUESTION, ANSWERS[0])
        s.activate_eval("capital")
        yield s


def _capture(svc: Service, rng: random.Random, times: list[datetime]) -> None:
    capture_at(svc, rng, times, ANSWERS, mixed_meta)


def _assert_counts(svc: Service, filters: list[str], ranges: list[tuple[Any, Any]]) -> None:
    """``count_captures`` equals a direct scan for each filter and range, and the listing
    gives as many captures."""
    every = stored(svc)
    for meta in filters:
        pairs = parse_meta([meta])
        for since, until in ranges:
            want = sum(
                1
                for _, md, at, _ in every
                if meta_matches(md, pairs)
                and (since is None or at >= since)
                and (until is None or at < until)
            )
            got = svc.count_captures(meta=[meta], since=utc(since), until=utc(until))
            assert got == want, (meta, since, until)


def _assert_table_exact(svc: Service) -> None:
    """``meta_capture_rollup`` holds the captures up to the watermark per indexed (key,
    value, hour), recomputed from their metadata JSON and the declared keys."""
    with svc.store.read() as s:
        mark = watermark(s)
        keys = indexed_keys(declared(s))
        got = held_captures(s)
    want: dict[tuple[str, str, datetime], int] = {}
    for cid, meta, at, _ in stored(svc):
        if cid <= mark:
            for key, value in index_entries(meta, keys):
                want[(key, value, hour_start(at))] = want.get((key, value, hour_start(at)), 0) + 1
    assert got == want


def test_capture_counts_under_one_filter_equal_a_direct_scan(db: str, svc: Service) -> None:
    rng = random.Random(5)
    base = (utc_now() - timedelta(days=3)).replace(tzinfo=None, minute=10, second=0, microsecond=0)
    hour = hour_start(base)
    _capture(svc, rng, [base + timedelta(minutes=7 * k) for k in range(80)])
    svc.update_settings(auto_evaluate=False)  # unscored captures count as captures
    _capture(svc, rng, [base + timedelta(minutes=7 * k + 2) for k in range(0, 80, 3)])
    svc.update_settings(auto_evaluate=True)
    assert roll(svc) > 0
    # more captures past the watermark, interleaved in time, and one on an hour exactly
    _capture(svc, rng, [base + timedelta(minutes=7 * k + 3) for k in range(0, 80, 2)])
    _capture(svc, rng, [hour + timedelta(hours=3)])
    svc.update_settings(auto_evaluate=False)  # and unscored ones past the watermark too
    _capture(svc, rng, [base + timedelta(minutes=7 * k + 5) for k in range(0, 80, 4)])
    svc.update_settings(auto_evaluate=True)
    with svc.store.read() as s:
        assert watermark(s) < max(c[0] for c in stored(svc))
    assert any(blob is None for *_, blob in stored(svc))
    ranges = [
        (None, None),
        (base + timedelta(minutes=25), None),  # from the middle of an hour
        (None, hour + timedelta(hours=5, minutes=20)),  # up to the middle of an hour
        (hour + timedelta(hours=2), hour + timedelta(hours=7)),  # on the hour
        (base + timedelta(hours=1, minutes=5), base + timedelta(hours=6)),  # both partial
        (hour + timedelta(hours=3), hour + timedelta(hours=3, minutes=50)),  # within one
    ]
    _assert_counts(svc, FILTERS[:3], ranges)
    _assert_table_exact(svc)

    # a rescore moves no capture
    svc.create_eval("late", ANSWERS[1], threshold=0.4)
    svc.test_eval("late", QUESTION, ANSWERS[1])
    svc.activate_eval("late")
    assert svc.rescore("late", since="30d").added > 0
    _assert_table_exact(svc)
    _assert_counts(svc, FILTERS[:2], ranges[:4])

    # a key declared after the captures: filled in and counted; more captures; dropped again
    svc.update_settings(indexed_meta=["team"])
    _assert_table_exact(svc)
    _assert_counts(svc, FILTERS[3:], ranges)
    roll(svc)
    _capture(svc, rng, [base + timedelta(hours=2, minutes=k) for k in range(5)])
    _assert_counts(svc, FILTERS[3:], ranges[:3])
    svc.update_settings(indexed_meta=[])
    _assert_table_exact(svc)
    with svc.store.read() as s:
        assert not s.scalar(sa.select(sa.func.count()).where(MetaCaptureRollup.key == "team"))
    _assert_counts(svc, FILTERS[3:], ranges[:2])  # walked now, still right

    # retention: the cutoff within an hour, then on the hour
    svc.update_settings(retention_days=7)
    for cut in (base + timedelta(hours=1, minutes=33), hour + timedelta(hours=4)):
        assert svc.cleanup(now=cut + timedelta(days=7)).captures > 0
        _assert_table_exact(svc)
        _assert_counts(svc, FILTERS[:2], ranges[:5])
    svc.update_settings(retention_days=None)


def test_a_0012_store_is_filled_as_a_recomputation_gives(db: str, svc: Service) -> None:
    rng = random.Random(9)
    base = (utc_now() - timedelta(days=2)).replace(tzinfo=None, minute=40, second=0, microsecond=0)
    svc.update_settings(indexed_meta=["team"])
    _capture(svc, rng, [base + timedelta(minutes=11 * k) for k in range(70)])
    svc.update_settings(auto_evaluate=False)
    _capture(svc, rng, [base + timedelta(minutes=13 * k) for k in range(10)])
    roll(svc)
    _capture(svc, rng, [base + timedelta(minutes=11 * k + 5) for k in range(10)])
    ranges = [(None, None), (base + timedelta(minutes=50), base + timedelta(hours=9))]
    before = {
        (m, i): svc.count_captures(meta=[m], since=utc(a), until=utc(b))
        for m in FILTERS
        for i, (a, b) in enumerate(ranges)
    }
    engine = make_engine(resolve_db_url(db))
    from alembic import command

    from simeval.store import alembic_config

    with engine.begin() as conn:  # down to 0012 (no meta_capture_rollup), then up: filled
        command.downgrade(alembic_config(conn), "0012")
        assert not sa.inspect(conn).has_table("meta_capture_rollup")
        upgrade(conn, "head")
    engine.dispose()
    with Service(db) as again:
        _assert_table_exact(again)
        after = {
            (m, i): again.count_captures(meta=[m], since=utc(a), until=utc(b))
            for m in FILTERS
            for i, (a, b) in enumerate(ranges)
        }
        _assert_counts(again, FILTERS, ranges)
    assert after == before
    assert all(after[(m, 0)] > 0 for m in FILTERS if m != FILTERS[2])


def test_the_model_matches_the_migration(svc: Service) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from simeval.store import Base

    with svc.store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert [d for d in diff if "meta_capture_rollup" in repr(d)] == []


def _statements(svc: Service, call: Any) -> list[tuple[str, Any]]:
    """The SELECTs ``call`` runs that read ``capture_meta`` or ``meta_capture_rollup``."""
    seen: list[tuple[str, Any]] = []

    def listen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool):
        if statement.lstrip().upper().startswith("SELECT") and (
            "capture_meta" in statement or "meta_capture_rollup" in statement
        ):
            seen.append((statement, params))

    sa.event.listen(svc.store.engine, "before_cursor_execute", listen)
    try:
        call()
    finally:
        sa.event.remove(svc.store.engine, "before_cursor_execute", listen)
    return seen


def _plan(svc: Service, statement: str, params: Any) -> list[str]:
    """The plan's lines (SQLite) or its scan nodes as ``kind table (condition)`` (PostgreSQL,
    sequential scans off: whether an index can answer at all)."""
    with svc.store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            return [
                str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params)
            ]
        conn.exec_driver_sql("SET enable_seqscan = off")
        found = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, params).scalar()
        conn.rollback()
    lines: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name"):
            cond = node.get("Index Cond") or node.get("Recheck Cond")
            index = node.get("Index Name", "")
            lines.append(f"{node['Node Type']} {node['Relation Name']} {index} ({cond})")
        for child in node.get("Plans", ()):
            walk(child)

    walk(found[0]["Plan"])
    return lines


def test_a_count_reads_ranges_of_indexes_only(db: str, svc: Service) -> None:
    base = (utc_now() - timedelta(days=1)).replace(tzinfo=None, minute=0, second=0, microsecond=0)
    rng = random.Random(3)
    _capture(svc, rng, [base - timedelta(minutes=9 * k) for k in range(120)])
    roll(svc)
    _capture(svc, rng, [base - timedelta(minutes=9 * k + 4) for k in range(10)])
    since = utc(base - timedelta(hours=10, minutes=17))
    until = utc(base - timedelta(hours=2, minutes=41))
    seen = _statements(
        svc, lambda: svc.count_captures(meta=["engine=v2"], since=since, until=until)
    )
    # the two partial hours, the captures past the watermark, the whole hours' sum
    assert len(seen) == 4
    pg = is_pg(db)
    for statement, params in seen:
        plan = _plan(svc, statement, params)
        text = " | ".join(plan)
        for table in ("capture_meta", "meta_capture_rollup"):
            assert f"SCAN {table}" not in text, (text, statement)
            assert f"Seq Scan {table}" not in text, (text, statement)
            assert "(None)" not in text, (text, statement)  # an index read whole
        if "meta_capture_rollup" in statement:
            # SQLite (no statistics) takes the primary key's range; PostgreSQL may take the
            # hours' index on a table this small, a range too (checked above: a condition)
            want = "meta_capture_rollup" if pg else "key=? AND value=?"
            assert "meta_capture_rollup" in text and want in text, text
        elif "count(*)" in statement.lower():  # a partial hour: the lookup index's range
            assert "captured_at" in text, text
        else:  # past the watermark: the primary key's range of capture ids
            assert ("capture_id >" if pg else "capture_id>?") in text, text
