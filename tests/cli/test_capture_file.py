"""``simeval capture --file`` resumes: a line without its own ``capture_key`` is keyed by the
file's content and its line number, so a run killed part-way, run again, stores every line
exactly once; ``--again`` stores another copy. On SQLite and PostgreSQL (``conftest.db``)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dbhelp import is_pg, sql
from simeval.cli import cli
from simeval.service import Service, file_key_prefix
from simeval.store import CAPTURE_LOCK, resolve_db_url, unpack_results

REF = "The capital of France is Paris."
OWN = 7  # the line (0-based) that carries its own capture key
CLI = "import sys; from simeval.cli import main; sys.argv[0] = 'simeval'; main()"


def _evals(db: str, n: int = 2) -> None:
    with Service(db) as svc:
        for i in range(n):
            svc.create_eval(f"e{i}", f"{REF} Fact {i}.", threshold=0.5)
            svc.test_eval(f"e{i}", "q", f"{REF} Fact {i}.")
            svc.activate_eval(f"e{i}")


def _file(path: Path, n: int) -> bytes:
    lines = []
    for i in range(n):
        line: dict[str, Any] = {"input": "q", "output": f"Paris {i}", "conversation_id": f"c{i}"}
        if i == OWN:
            line["capture_key"] = "own-key"
        lines.append(json.dumps(line))
    # a blank line part-way: line numbers, not row numbers, name the lines
    data = ("\n".join(lines[:10]) + "\n\n" + "\n".join(lines[10:]) + "\n").encode()
    path.write_bytes(data)
    return data


def _cli(db: str, *args: str) -> Any:
    res = CliRunner().invoke(cli, [*args, "--db", db])
    assert res.exit_code == 0, res.output
    return res


def _stored(db: str) -> list[tuple[str, str | None, bytes]]:
    rows = sql(db, "SELECT conversation_id, capture_key, scores FROM captures")
    return [(cid, key, blob) for cid, key, blob in rows]


def _count(db: str) -> int:
    return int(sql(db, "SELECT count(*) FROM captures")[0][0])


class _Watch:
    """One connection of the test's own that holds writes — SQLite's write lock, or
    PostgreSQL's capture lock taken exclusively (captures take it shared) — from before the
    process starts, and lets them through in windows of a fraction of a millisecond until
    one transaction has landed. The process is then caught between two of its transactions
    however fast it runs and however loaded the machine is: it cannot commit anything while
    the test is not looking."""

    def __init__(self, db: str) -> None:
        self.pg = is_pg(db)
        if self.pg:
            import psycopg

            url = resolve_db_url(db).replace("postgresql+psycopg://", "postgresql://", 1)
            self.conn: Any = psycopg.connect(url, autocommit=True)
        else:
            # no busy wait of its own: a taken lock is answered at once, and tried again
            self.conn = sqlite3.connect(db, timeout=0, isolation_level=None)
        while not self._take():
            time.sleep(0.001)

    def _take(self) -> bool:
        if self.pg:
            got = self.conn.execute(f"SELECT pg_try_advisory_lock({CAPTURE_LOCK})").fetchone()
            return bool(got[0])
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # the writer is inside a transaction
            return False
        return True

    def _release(self) -> None:
        unlock = f"SELECT pg_advisory_unlock({CAPTURE_LOCK})" if self.pg else "ROLLBACK"
        self.conn.execute(unlock)

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM captures").fetchone()[0])

    def after_first_transaction(self, proc: subprocess.Popen[bytes], seconds: float) -> int:
        """What is stored once a transaction has landed, counted and returned with writes
        held again; or, if the process ended or time ran out first, what was stored then."""
        deadline = time.monotonic() + seconds
        while (stored := self.count()) == 0 and proc.poll() is None:
            if time.monotonic() > deadline:
                break
            self._release()
            time.sleep(0.0002)  # the window: a waiting writer takes the lock in it
            while not self._take():  # the writer's transaction: wait for its commit
                time.sleep(0.0002)
        return stored

    def close(self) -> None:
        self.conn.close()


@pytest.mark.slow
def test_a_killed_capture_file_run_again_stores_every_line_once(db: str, tmp_path: Path) -> None:
    n = 4000  # 20 transactions of 200
    _evals(db)
    path = tmp_path / "captures.jsonl"
    data = _file(path, n)
    watch = _Watch(db)  # writes held before the process starts
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "capture", "--file", str(path), "--db", db],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # held again, the writer cannot commit another transaction: what is stored is what
        # it left
        before = watch.after_first_transaction(proc, 60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        watch.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    assert 0 < before < n
    assert before % 200 == 0  # whole transactions, nothing of the one cut short

    again = json.loads(_cli(db, "capture", "--file", str(path), "--json").stdout)
    assert again["captures"] == n - before and again["replayed"] == before
    rows = _stored(db)
    assert Counter(cid for cid, _, _ in rows) == Counter(f"c{i}" for i in range(n))
    assert {len(unpack_results(blob)) for _, _, blob in rows} == {2}
    prefix = file_key_prefix(data)
    keys = {cid: key for cid, key, _ in rows}
    assert keys[f"c{OWN}"] == "own-key"  # a line's own key wins
    assert keys["c0"] == f"{prefix}:1" and keys["c10"] == f"{prefix}:12"  # after the blank line

    done = _cli(db, "capture", "--file", str(path))
    assert "nothing new" in done.stdout and f"all {n} captures" in done.stdout
    assert _count(db) == n


def test_capture_file_again_and_own_keys(db: str, tmp_path: Path) -> None:
    _evals(db, 1)
    path = tmp_path / "c.jsonl"
    _file(path, 12)
    first = _cli(db, "capture", "--file", str(path))
    assert first.stdout.startswith("captured 12 outputs: 12 results")
    rerun = _cli(db, "capture", "--file", str(path))
    assert rerun.stdout.strip() == (
        f"nothing new: all 12 captures of {path} were stored already "
        "(--again stores them once more)"
    )
    copy = json.loads(_cli(db, "capture", "--file", str(path), "--again", "--json").stdout)
    assert (copy["captures"], copy["replayed"]) == (11, 1)  # the line with its own key: once
    rows = _stored(db)
    assert len(rows) == 23
    assert sum(key is None for _, key, _ in rows) == 11  # the copy has no derived keys
    # a file with one more line is another file: its lines are keyed anew
    with path.open("a") as fh:
        fh.write(json.dumps({"output": "Paris 12", "conversation_id": "c12"}) + "\n")
    grown = json.loads(_cli(db, "capture", "--file", str(path), "--json").stdout)
    assert (grown["captures"], grown["replayed"]) == (12, 1)
    res = CliRunner().invoke(cli, ["capture", "Paris", "--again", "--db", db])
    assert res.exit_code == 2 and "--again goes with --file" in res.stderr
    help_text = CliRunner().invoke(cli, ["capture", "--help"]).output
    assert "--again" in help_text and "stores only the lines" in help_text


def test_capture_file_lines_end_at_newlines_only(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    """JSON may hold U+2028 and U+0085 unescaped; CRLF files read as LF files."""
    db = new_sqlite("n.db")
    path = tmp_path / "c.jsonl"
    outputs = ["line\u2028separator", "next\x85line"]
    text = "\r\n".join(json.dumps({"output": o}, ensure_ascii=False) for o in outputs) + "\r\n"
    path.write_bytes(text.encode())
    out = json.loads(_cli(db, "capture", "--file", str(path), "--json").stdout)
    assert out["captures"] == 2
    stored = sorted(o for (o,) in sql(db, "SELECT output FROM captures"))
    assert stored == sorted(outputs)
    keys = sorted(k for (k,) in sql(db, "SELECT capture_key FROM captures"))
    assert [k.rsplit(":", 1)[1] for k in keys] == ["1", "2"]


def test_a_byte_order_mark_is_not_part_of_line_one(tmp_path: Path) -> None:
    from simeval.service import read_capture_lines

    text = '\ufeff{"input": "q", "output": "Paris"}\n{"output": "Lyon"}\n'
    assert [r["output"] for r in read_capture_lines(text)] == ["Paris", "Lyon"]
