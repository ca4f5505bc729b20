"""Damaged, foreign and read-only SQLite files: one line naming the file and the problem,
exit 2 (a 503 with a message from the server), and the file's bytes untouched. Real files."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from simeval.cli import cli
from simeval.service import Service
from simeval.web.app import create_app

REF = "The capital of France is Paris."


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line(res: Result, *needles: str) -> None:
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def simeval_db(tmp_path: Path, captures: int = 300) -> Path:
    db = tmp_path / "evals.db"
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")
        for i in range(captures):
            svc.capture("q", f"{REF} Number {i}. " + "padding " * 40)
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return db


def captures_pages(db: Path) -> list[int]:
    """The numbers of the file's pages that hold the captures table (SQLite's dbstat)."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT pageno FROM dbstat WHERE name = 'captures' ORDER BY pageno")
        return [pageno for (pageno,) in rows]
    finally:
        con.close()


def test_a_damaged_page_is_one_line_and_the_file_untouched(tmp_path: Path) -> None:
    db = simeval_db(tmp_path)
    pages = captures_pages(db)
    assert len(pages) > 8
    with db.open("r+b") as fh:  # garbage over pages in the middle of the captures
        for pageno in pages[len(pages) // 2 : len(pages) // 2 + 4]:
            fh.seek((pageno - 1) * 4096)
            fh.write(os.urandom(4096))
    for side in ("-wal", "-shm"):
        Path(str(db) + side).unlink(missing_ok=True)
    before = digest(db)
    for args in (["results", "list"], ["capture", "x"], ["trend", "capital"], ["evals", "list"]):
        res = CliRunner().invoke(cli, [*args, "--db", str(db)])
        one_line(res, str(db) if args == ["evals", "list"] else "", "damaged")
        assert "Traceback" not in res.output
    assert digest(db) == before


def test_a_foreign_sqlite_file_is_refused_before_the_switch_to_wal(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO customers (name) VALUES ('Ada')")
    con.commit()
    con.close()
    before = digest(db)
    one_line(CliRunner().invoke(cli, ["evals", "list", "--db", str(db)]), "not a simeval database")
    assert digest(db) == before  # still in its rollback-journal mode: not switched to WAL
    assert not Path(str(db) + "-wal").exists()
    text = tmp_path / "notes.db"
    text.write_text("just some notes " * 100)
    before = digest(text)
    one_line(CliRunner().invoke(cli, ["capture", "x", "--db", str(text)]), "not a SQLite file")
    assert digest(text) == before


def test_the_server_answers_a_damaged_file_with_a_message(tmp_path: Path) -> None:
    db = simeval_db(tmp_path)
    pages = captures_pages(db)
    assert len(pages) > 8
    with TestClient(create_app(db=str(db)), base_url="http://127.0.0.1:8000") as c:
        with db.open("r+b") as fh:  # garbage over four pages of the captures, wherever they are
            for pageno in pages[len(pages) // 2 : len(pages) // 2 + 4]:
                fh.seek((pageno - 1) * 4096)
                fh.write(os.urandom(4096))
        r = c.get("/api/results?limit=1000")
        assert r.status_code == 503 and "damaged" in r.json()["error"]


@pytest.mark.process
def test_a_read_only_file_is_one_line_and_untouched(tmp_path: Path) -> None:
    db = simeval_db(tmp_path, captures=3)
    for side in ("-wal", "-shm"):
        Path(str(db) + side).unlink(missing_ok=True)
    os.chmod(db, 0o444)
    immutable = False
    if os.geteuid() == 0:  # root writes any file: make it immutable instead
        chattr = shutil.which("chattr")
        if chattr is None or subprocess.run([chattr, "+i", str(db)]).returncode != 0:
            pytest.skip("root, and this filesystem cannot make a file immutable")
        immutable = True
    try:
        before = digest(db)
        res = CliRunner().invoke(cli, ["capture", "x", "--db", str(db)])
        one_line(res, str(db), "read-only")
        with pytest.raises(Exception, match="read-only"):
            create_app(db=str(db))
        assert digest(db) == before
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(db)], check=True)
