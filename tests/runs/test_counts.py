"""A run's counts (rows, passed, sum of scores) are kept on the run by every write of its rows
(migration 0005), so listing runs reads them instead of every row. On SQLite and PostgreSQL
(``conftest.db``); the migration on a database made at revision 0004 with runs in it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dbhelp import sql
from simeval.runs import STORE_COLUMNS
from simeval.service import Service
from simeval.store import HEAD_REVISION, make_engine, resolve_db_url, upgrade

REF = "The capital of France is Paris."


def _scanned(db: Any, run_id: int) -> tuple[int, int, float | None]:
    ((n, p, mean),) = sql(
        db,
        "SELECT count(*), coalesce(sum(CASE WHEN passed THEN 1 ELSE 0 END), 0), avg(score) "
        "FROM results WHERE run_id = :r",
        {"r": run_id},
    )
    return int(n), int(p), None if mean is None else float(mean)


def _row(score: float, eval_name: str | None = None) -> tuple[Any, ...]:
    return (eval_name, 1 if eval_name else None, score, score >= 0.5, 0.5, "fp", 0, "q",
            f"answer {score}", REF, '{"case": {"ordinal": 0}}')  # fmt: skip


def test_every_write_of_a_runs_rows_keeps_its_counts(db: str) -> None:
    with Service(db) as svc:
        svc.create_eval("linked", REF)
        rid = svc.create_run("nightly", "cases.jsonl")
        assert (svc.get_run(rid).results, svc.get_run(rid).mean_score) == (0, None)
        plain = [_row(i / 10) for i in range(7)]
        linked = [_row(0.95, "linked"), _row(0.05, "unknown eval")]
        # several transactions (3 rows each), rows of no eval and rows of an eval
        assert svc.add_run_rows(rid, STORE_COLUMNS, [plain, linked], 3) == 9
        assert svc.add_run_results(rid, [{"score": 0.8, "reference": REF, "output": "o"}]) == 1
        n, p, mean = _scanned(db, rid)
        assert (n, p) == (10, 4)
        run = svc.get_run(rid)
        assert (run.results, run.passed) == (n, p)
        assert run.mean_score == pytest.approx(mean, abs=1e-12)
        assert run.pass_rate == pytest.approx(0.4)
        ((kept_n, kept_p, kept_sum),) = sql(
            db, "SELECT results_count, passed_count, score_sum FROM runs WHERE id = :r", {"r": rid}
        )
        assert (kept_n, kept_p) == (10, 4) and kept_sum == pytest.approx(mean * n)
        listed = {r.id: r for r in svc.list_runs()}
        assert (listed[rid].results, listed[rid].passed) == (10, 4)

        # a run whose counts are not kept (rows written by other means) is counted from its rows
        empty = svc.create_run("empty", "other.jsonl")
        sql(db, "UPDATE runs SET results_count = NULL WHERE id = :r", {"r": rid})
        listed = {r.id: r for r in svc.list_runs()}
        assert (listed[rid].results, listed[rid].passed) == (10, 4)
        assert listed[rid].mean_score == pytest.approx(mean, abs=1e-12)
        assert (listed[empty].results, listed[empty].pass_rate) == (0, None)

        # a discarded run takes its rows and its counts with it
        svc.discard_run(rid)
        assert _scanned(db, rid) == (0, 0, None)


def test_migration_counts_the_runs_of_an_existing_database(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    engine = make_engine(resolve_db_url(db))
    with engine.begin() as conn:
        upgrade(conn, "0004")
    engine.dispose()
    now = "2026-11-01 10:00:00.000000"
    con = sqlite3.connect(db)
    for rid, scores in ((1, [0.9, 0.2, 0.7]), (2, [])):
        con.execute(
            "INSERT INTO runs (id, name, source, options, summary, created_at, status) "
            "VALUES (?, ?, 'x.jsonl', '{}', ?, ?, 'complete')",
            (rid, f"run {rid}", json.dumps({"rows": len(scores)}), now),
        )
        for score in scores:
            con.execute(
                "INSERT INTO results (run_id, score, passed, threshold, fingerprint, "
                "matched_index, input, output, reference, created_at) "
                "VALUES (?, ?, ?, 0.5, 'fp', 0, 'q', 'o', ?, ?)",
                (rid, score, score >= 0.5, REF, now),
            )
    con.commit()
    con.close()
    with Service(db) as svc:
        assert svc.store.revision() == HEAD_REVISION
        runs = {r.id: r for r in svc.list_runs()}
        assert (runs[1].results, runs[1].passed) == (3, 2)
        assert runs[1].mean_score == pytest.approx(0.6)
        assert (runs[2].results, runs[2].passed, runs[2].mean_score) == (0, 0, None)
    con = sqlite3.connect(db)
    kept = con.execute("SELECT id, results_count, passed_count, score_sum FROM runs ORDER BY id")
    assert [(i, n, p, round(s, 9)) for i, n, p, s in kept] == [(1, 3, 2, 1.8), (2, 0, 0, 0.0)]
    con.close()
