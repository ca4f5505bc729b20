"""The store: one-transaction captures, two processes writing at once, migrations forward and
the refusal of a schema from a newer simeval. Real SQLite files and a real PostgreSQL server
(``conftest.db``), real processes."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dbhelp import WORKER, is_pg, sql, table_counts
from simeval import InvalidInput
from simeval import store as store_mod
from simeval.service import Service
from simeval.store import head_revision, make_engine, resolve_db_url, upgrade

QUESTION = "What is the capital of France?"
REFERENCE = "The capital of France is Paris."


def counts(db: Path | str) -> dict[str, int]:
    # captured results are packed on their capture (one row per capture)
    return table_counts(db, ("evals", "captures", "results", "reviews"), packed=True)


def active_evals(svc: Service, n: int) -> None:
    for i in range(n):
        svc.create_eval(f"eval-{i}", f"{REFERENCE} Fact number {i}.", threshold=0.5)
        svc.test_eval(f"eval-{i}", QUESTION, f"{REFERENCE} Fact number {i}.")
        svc.activate_eval(f"eval-{i}")


# -- atomicity ----------------------------------------------------------------------------------
def test_failure_between_capture_and_results_stores_neither(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Service(db) as svc:
        active_evals(svc, 3)
        svc.capture(QUESTION, REFERENCE)
        before = counts(db)
        assert (before["captures"], before["results"]) == (1, 3)

        original = store_mod.insert_row

        def broken(*args: Any, **kwargs: Any) -> int:
            # the capture row and its packed results are inserted in this transaction, then
            # the step after them fails
            original(*args, **kwargs)
            cursor = args[0]
            assert cursor.execute("SELECT count(*) FROM captures").fetchone()[0] == 2
            raise RuntimeError("disk fell off")

        monkeypatch.setattr(store_mod, "insert_row", broken)
        with pytest.raises(RuntimeError, match="disk fell off"):
            svc.capture(QUESTION, "Paris is the capital.")
        assert counts(db) == before
        monkeypatch.undo()
        # the service is still usable, and ids carry on
        assert len(svc.capture(QUESTION, REFERENCE).results) == 3
    assert counts(db)["results"] == 6


def test_a_result_the_database_rejects_rolls_back_the_capture(db: str) -> None:
    with Service(db) as svc:
        active_evals(svc, 2)
        before = counts(db)
        # a constraint the database itself enforces rejects the capture's row with its results
        if is_pg(db):
            sql(
                db,
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.output = 'refused' THEN "
                "RAISE EXCEPTION 'FOREIGN KEY constraint failed'; END IF; RETURN NEW; END $$",
            )
            sql(
                db,
                "CREATE TRIGGER refuse BEFORE INSERT ON captures "
                "FOR EACH ROW EXECUTE FUNCTION refuse()",
            )
        else:
            sql(
                db,
                "CREATE TRIGGER refuse BEFORE INSERT ON captures WHEN NEW.output = 'refused' "
                "BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed'); END",
            )
        with pytest.raises(Exception, match="FOREIGN KEY"):
            svc.capture(QUESTION, "refused")
        assert counts(db) == before


# -- concurrency --------------------------------------------------------------------------------


@pytest.mark.process
def test_two_processes_capture_into_one_database(db: str, tmp_path: Path) -> None:
    n, evals = 500, 4
    with Service(db) as svc:
        active_evals(svc, evals)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), str(n), tag, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("A", "B")
    ]
    time.sleep(0.5)  # both have opened the database
    go.touch()
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err.lower()
        assert int(out) == n * evals
    c = counts(db)
    assert c["captures"] == 2 * n
    assert c["results"] == 2 * n * evals
    per_capture = [
        len(store_mod.unpack_results(blob)) for (blob,) in sql(db, "SELECT scores FROM captures")
    ]
    assert set(per_capture) == {evals}  # every capture has all its results


# -- migrations ---------------------------------------------------------------------------------
def create_at_first_revision(db: Path) -> None:
    engine = make_engine(resolve_db_url(db))
    with engine.begin() as conn:
        upgrade(conn, "0001")
    engine.dispose()


def test_database_at_the_first_revision_is_migrated_forward(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    create_at_first_revision(db)
    con = sqlite3.connect(db)
    assert con.execute("SELECT version_num FROM alembic_version").fetchone() == ("0001",)
    assert "settings" not in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    now = "2026-01-05 10:00:00.000000"
    fp = "0123456789ab"
    refs = json.dumps([REFERENCE])
    con.executescript(
        f"""
        INSERT INTO evals (id, name, type, status, version, reference_answers, threshold,
            input_scope, options, fingerprint, created_at, updated_at)
        VALUES (1, 'capital', 'similarity', 'active', 1, '{refs}', 0.8, NULL, '{{}}', '{fp}',
            '{now}', '{now}');
        INSERT INTO eval_versions (eval_id, version, reference_answers, threshold, input_scope,
            options, fingerprint, changes, created_at)
        VALUES (1, 1, '{refs}', 0.8, NULL, '{{}}', '{fp}', '{{"created": true}}', '{now}');
        INSERT INTO eval_tests (eval_id, version, input, output, score, passed, threshold,
            matched_index, explanation, fingerprint, in_scope, created_at)
        VALUES (1, 1, 'q', '{REFERENCE}', 1.0, 1, 0.8, 0, '{{}}', '{fp}', 1, '{now}');
        INSERT INTO captures (id, input, output, conversation_id, metadata, captured_at, evaluated)
        VALUES (1, '{QUESTION}', 'Paris.', 'c1', '{{"k": 1}}', '{now}', 1);
        INSERT INTO results (id, capture_id, eval_id, eval_version, score, passed, threshold,
            fingerprint, matched_index, created_at)
        VALUES (1, 1, 1, 1, 0.42, 0, 0.8, '{fp}', 0, '{now}');
        INSERT INTO reviews (result_id, score, note, created_at)
        VALUES (1, 0.95, 'fine', '{now}');
        """
    )
    con.commit()
    con.close()

    with Service(db) as svc:
        assert svc.store.revision() == head_revision()
        ev = svc.get_eval("capital")
        assert (ev.status, ev.references, ev.threshold) == ("active", [REFERENCE], 0.8)
        (r,) = svc.list_results()
        assert (r.score, r.passed, r.automated_passed) == (0.42, True, False)
        assert r.review is not None and r.review.note == "fine"
        assert r.conversation_id == "c1" and r.matched_reference == REFERENCE
        assert svc.get_capture(1).metadata == {"k": 1}
        s = svc.get_settings()  # the settings table of revision 0002, with its defaults
        assert (s.auto_evaluate, s.retention_days) == (True, None)
        # and it works as a current database: the active eval scores a new capture
        assert len(svc.capture(QUESTION, REFERENCE).results) == 1
    with Service(db) as again:  # opening a current database changes nothing
        assert again.count_results() == 2


def _file_state(db: Path) -> tuple[str, list[Any]]:
    con = sqlite3.connect(db)
    dump = list(con.iterdump())
    con.close()
    return hashlib.sha256(db.read_bytes()).hexdigest(), dump


def test_unknown_newer_schema_is_refused_and_left_unaltered(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    with Service(db) as svc:
        svc.create_eval("capital", REFERENCE)
    con = sqlite3.connect(db)
    con.execute("UPDATE alembic_version SET version_num = '9000_from_the_future'")
    con.execute("CREATE TABLE future_things (id INTEGER PRIMARY KEY)")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before = _file_state(db)

    for _ in range(2):
        with pytest.raises(InvalidInput) as refused:
            Service(db)
        message = str(refused.value)
        assert "9000_from_the_future" in message and "newer simeval" in message
        assert "not changed" in message and "\n" not in message
    assert _file_state(db) == before


def test_a_sqlite_file_of_another_program_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(InvalidInput, match="not a simeval database"):
        Service(db)
    con = sqlite3.connect(db)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert tables == {"customers"}
    text = tmp_path / "notes.db"
    text.write_text("not a database at all, just some text that is long enough " * 20)
    with pytest.raises(InvalidInput, match="not a SQLite file"):
        Service(text)


def test_database_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIMEVAL_DATABASE_URL", f"sqlite:///{tmp_path / 'env.db'}")
    assert resolve_db_url(None) == f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.delenv("SIMEVAL_DATABASE_URL")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert resolve_db_url(None) == f"sqlite:///{tmp_path / 'data' / 'simeval' / 'simeval.db'}"
    with Service() as svc:
        svc.create_eval("x", REFERENCE)
    assert (tmp_path / "data" / "simeval" / "simeval.db").is_file()


def test_wal_and_busy_timeout(tmp_path: Path) -> None:
    with Service(tmp_path / "evals.db") as svc, svc.store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


@pytest.mark.process
def test_opening_a_database_twice_in_one_process_keeps_the_first_connections_locks(
    new_sqlite: Callable[..., str],
) -> None:
    """A second ``Service`` on a file this process already has open checks the file without
    dropping the first one's locks (closing any descriptor of a file drops all of a process's
    POSIX locks on it): another process that writes and closes must still see a reader, so it
    leaves the WAL in place, and the first service goes on reading a sound database."""
    db = Path(new_sqlite("evals.db"))
    first = Service(db)
    try:
        first.create_eval("before", REFERENCE)
        assert [e.name for e in first.list_evals()] == ["before"]  # a pooled connection, open
        with Service(db) as second:  # the check of the file happens here
            assert [e.name for e in second.list_evals()] == ["before"]
        # another process writes and closes: were this process's locks gone, it would be the
        # "last connection", checkpoint and delete the WAL and its index under `first`
        code = (
            "import sys; from simeval.service import Service\n"
            "with Service(sys.argv[1]) as svc: svc.create_eval('elsewhere', sys.argv[2])\n"
        )
        subprocess.run([sys.executable, "-c", code, str(db), REFERENCE], check=True, timeout=120)
        assert Path(f"{db}-wal").exists() and Path(f"{db}-shm").exists()
        first.create_eval("after", REFERENCE)
        assert sorted(e.name for e in first.list_evals()) == ["after", "before", "elsewhere"]
    finally:
        first.close()
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert sorted(r[0] for r in con.execute("SELECT name FROM evals")) == [
            "after",
            "before",
            "elsewhere",
        ]
    finally:
        con.close()


@pytest.mark.process
def test_the_head_revision_constant_is_the_scripts_head(new_sqlite: Callable[..., str]) -> None:
    """A database at the head opens without reading the migration scripts, so the constant
    naming the head must follow the newest script (add a migration: bump it)."""
    assert head_revision() == store_mod.HEAD_REVISION
    db = Path(new_sqlite("evals.db"))
    Service(db).close()
    code = (
        "import sys; from simeval.store import Store\n"
        "Store('sqlite:///' + sys.argv[1]).close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(db)], check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[]"  # opened at the head: Alembic not even imported
