"""Time-range reads are planned by time: the queries the service runs for counts, trends,
listings and the overview with ``since``/``until`` are caught as they run (an SQLAlchemy
``before_cursor_execute`` listener on the store's engine) and each one reading captures, the
rollup or run rows is explained with its own parameters, on both backends:

- SQLite: ``EXPLAIN QUERY PLAN`` must not show ``SCAN captures`` / ``SCAN trend_rollup`` /
  ``SCAN results`` (a full scan of the table, or of one of its indexes), nor a walk of a
  range of ids where the statement bounds the time (``SEARCH captures USING INTEGER PRIMARY
  KEY (rowid>?)``: from the first capture, the time a filter). The service runs no
  ``ANALYZE``, so SQLite plans these without statistics, as it does here.
- PostgreSQL: ``EXPLAIN (FORMAT JSON)`` with ``enable_seqscan`` off (a table this small is
  cheapest read whole; the question is whether an index can answer the query at all) must
  show no ``Seq Scan`` of those tables, nor an index scan without an index condition (an
  index read whole), nor one on a range of ids where the statement bounds the time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from simeval.service import Service

CHECKED = ("captures", "trend_rollup", "results")
TIME = {"captures": "captured_at", "trend_rollup": "bucket", "results": "created_at"}
SQLITE_FULL_SCAN = re.compile(r"^SCAN (captures|trend_rollup|results)\b")
SQLITE_ID_RANGE = re.compile(r"^SEARCH (captures|results) USING INTEGER PRIMARY KEY \(rowid[<>]")


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    """A store of 3,000 captures over 30 days scored by 3 evals, rolled up but for the
    newest few, with a review and a data-set run's rows."""
    service = Service(db)
    for name, ref in (
        ("capital", "Paris is the capital of France."),
        ("river", "The Seine flows through Paris."),
        ("tower", "The Eiffel Tower is in Paris."),
    ):
        service.create_eval(name, ref, threshold=0.5)
        service.test_eval(name, "q", ref)
        service.activate_eval(name)
    now = datetime.now(UTC).replace(tzinfo=None)
    n = 3000
    service.capture_many(
        {
            "input": f"question {i}",
            "output": "Paris is the capital of France." if i % 3 else "Lyon, on the Rhone.",
            "conversation_id": f"talk-{i // 5}",
            "metadata": {"engine": "v2" if i % 2 else "v1"},
            "captured_at": (now - timedelta(days=30) * (1 - i / n)).isoformat(),
        }
        for i in range(n)
    )
    first = service.list_results(eval_name="capital", limit=1, explain=False)[0]
    service.review_result(first.id, 1.0, "right after all")
    yield service
    service.close()


def _statements(svc: Service, calls: list[Callable[[], Any]]) -> list[tuple[str, Any]]:
    """The SELECTs reading a checked table that ``calls`` run, with their parameters."""
    seen: list[tuple[str, Any]] = []

    def listen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool):
        text = statement.lstrip().upper()
        if not many and text.startswith("SELECT") and _reads_checked(statement):
            seen.append((statement, params))

    engine = svc.store.engine
    sa.event.listen(engine, "before_cursor_execute", listen)
    try:
        for call in calls:
            call()
    finally:
        sa.event.remove(engine, "before_cursor_execute", listen)
    return seen


def _reads_checked(statement: str) -> bool:
    return any(re.search(rf"\b(FROM|JOIN)\s+{t}\b", statement, re.I) for t in CHECKED)


def _ranged(statement: str, table: str) -> bool:
    """Whether ``statement`` bounds ``table``'s time column (it should then be read by it)."""
    return bool(re.search(rf"\b{table}\.{TIME[table]}\s*[<>]", statement))


def _full_scans(svc: Service, statement: str, params: Any) -> list[str]:
    """The full scans of checked tables in the plan of ``statement``: a table (or an index)
    read whole, or a range of ids walked where the statement bounds the time (a primary-key
    scan from the first row, filtered on the time)."""
    with svc.store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
            details = [row[-1] for row in plan]
            return [d for d in details if SQLITE_FULL_SCAN.match(d) or _id_walk(statement, d)]
        conn.exec_driver_sql("SET enable_seqscan = off")
        found = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, params).scalar()
        conn.rollback()
    scans: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        kind, table = node.get("Node Type"), node.get("Relation Name")
        cond = node.get("Index Cond") or node.get("Recheck Cond")
        if table in CHECKED and (
            kind == "Seq Scan"
            # an index read whole (no condition on it): a full scan too, in the index's order
            or (kind in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan") and cond is None)
            or (
                cond is not None
                and _ranged(statement, table)
                and TIME[table] not in cond
                and re.search(r"\bid [<>]", cond) is not None
            )
        ):
            scans.append(f"{kind} on {table} ({cond})")
        for child in node.get("Plans", ()):
            walk(child)

    walk(found[0]["Plan"])
    return scans


def _id_walk(statement: str, detail: str) -> bool:
    """A SQLite plan line walking a range of ids of a table whose time the statement bounds."""
    m = SQLITE_ID_RANGE.match(detail)
    return m is not None and _ranged(statement, m.group(1)) and TIME[m.group(1)] not in detail


def _time_range_calls(svc: Service) -> dict[str, Callable[[], Any]]:
    now = datetime.now(UTC).replace(tzinfo=None)
    # a range with partial hours at both ends, and one inside a single hour
    since = (now - timedelta(days=3, minutes=17)).isoformat()
    until = (now - timedelta(days=1, minutes=43)).isoformat()
    hour = (now - timedelta(days=2)).replace(minute=5).isoformat()
    hour_end = (now - timedelta(days=2)).replace(minute=50).isoformat()
    return {
        "count_results since": lambda: svc.count_results(since="7d"),
        "count_results eval since": lambda: svc.count_results(eval_name="capital", since="7d"),
        "count_results passed since until": lambda: svc.count_results(
            passed=False, since=since, until=until
        ),
        "count_results within an hour": lambda: svc.count_results(since=hour, until=hour_end),
        "trend since": lambda: svc.trend("capital", bucket="hour", since=since, until=until),
        "overview 24h": lambda: svc.overview("24h"),
        "overview 7d": lambda: svc.overview("7d"),
        "overview 30d": lambda: svc.overview("30d"),
        "list_results since": lambda: svc.list_results(since="7d", limit=20, explain=False),
        "list_results eval since until": lambda: svc.list_results(
            eval_name="capital", since=since, until=until, limit=20, explain=False
        ),
        "count_captures since": lambda: svc.count_captures(since="7d"),
        "list_captures since": lambda: svc.list_captures(since="7d", limit=20),
    }


def test_time_range_queries_are_planned_by_an_index(svc: Service) -> None:
    calls = _time_range_calls(svc)
    problems = []
    checked = 0
    for name, run in calls.items():
        for statement, params in _statements(svc, [run]):
            checked += 1
            scans = _full_scans(svc, statement, params)
            if scans:
                flat = " ".join(statement.split())
                problems.append(f"{name}: {', '.join(scans)} in {flat[:300]}")
    assert checked >= len(calls)  # every call read a checked table at least once
    assert not problems, "\n".join(problems)


def test_a_full_scan_is_caught(svc: Service) -> None:
    """The check itself: a time filter the index cannot serve (a function of the column) is
    reported as a full scan on either backend."""
    with svc.store.engine.connect() as conn:
        wrapped = (
            "SELECT count(*) FROM captures WHERE substr(captured_at, 1, 4) >= '2000'"
            if conn.dialect.name == "sqlite"
            else "SELECT count(*) FROM captures WHERE date_part('year', captured_at) >= 2000"
        )
    assert _full_scans(svc, wrapped, ()) != []
    if svc.store.dialect == "sqlite":
        # the shape the partial hours of a range were read with before (chunks by id, the
        # range a condition): SQLite walks the primary key from the first capture
        by_id = (
            "SELECT captures.id, captures.captured_at, captures.scores FROM captures WHERE "
            "captures.scores IS NOT NULL AND captures.captured_at >= ? AND "
            "captures.captured_at < ? AND captures.id > ? ORDER BY captures.id LIMIT ?"
        )
        params = ("2026-01-01 00:00:00", "2026-01-01 00:30:00", 0, 1000)
        assert _full_scans(svc, by_id, params) == [
            "SEARCH captures USING INTEGER PRIMARY KEY (rowid>?)"
        ]


def _sorts(svc: Service, statement: str, params: Any) -> list[str]:
    """The sorts in the plan of ``statement``: SQLite's temporary B-trees, PostgreSQL's
    Sort nodes (with sequential scans off, as above)."""
    with svc.store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
            return [row[-1] for row in plan if "TEMP B-TREE" in row[-1]]
        conn.exec_driver_sql("SET enable_seqscan = off")
        found = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, params).scalar()
        conn.rollback()
    sorts: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if "Sort" in str(node.get("Node Type")):
            sorts.append(f"{node['Node Type']} on {node.get('Sort Key')}")
        for child in node.get("Plans", ()):
            walk(child)

    walk(found[0]["Plan"])
    return sorts


def test_a_runs_page_reads_its_rows_in_order_without_sorting_the_run(svc: Service) -> None:
    """``/runs/{id}`` lists a run's rows newest first by a (created_at, id) keyset: the
    first page and a page from a cursor are read from the (run, time, id) index, in order,
    where an index on the run alone sorted every row of the run for each page."""
    other = svc.create_run("other", "other.jsonl")
    run = svc.create_run("cases", "cases.jsonl")
    for target in (other, run, other):
        svc.add_run_results(
            target,
            [
                {"eval_name": None, "input": f"case {i}", "output": f"answer {i}",
                 "reference": "The capital of France is Paris.", "score": i / 200,
                 "passed": i % 2 == 0, "threshold": 0.5}
                for i in range(200)
            ],
        )  # fmt: skip
    first = svc.page_results(run_id=run, limit=50, explain=False)
    assert first.next_cursor is not None
    statements = _statements(
        svc,
        [
            lambda: svc.page_results(run_id=run, limit=50, explain=False),
            lambda: svc.page_results(run_id=run, limit=50, cursor=first.next_cursor, explain=False),
        ],
    )
    runs_rows = [(st, p) for st, p in statements if "results.run_id" in st]
    assert len(runs_rows) >= 2
    problems = [
        f"{sorts} in {' '.join(st.split())[:300]}"
        for st, p in runs_rows
        if (sorts := _sorts(svc, st, p)) or _full_scans(svc, st, p)
    ]
    assert not problems, "\n".join(problems)
