"""A run killed while its rows are being stored: marked ``interrupted`` (its process is gone),
shown as such by ``runs``, ``results list``, exports and the API, and deletable; the hidden
temp files a killed run leaves are removed by the next run. On SQLite and PostgreSQL
(``conftest.db``); a real process killed with SIGKILL."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from dbhelp import table_counts
from simeval.cli import cli
from simeval.web.app import create_app

KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from simeval.runs import STORE_COLUMNS, store_run
    from simeval.service import Service

    svc = Service(sys.argv[1])
    row = (None, None, 0.5, True, 0.4, "fp", 0, "q", "a", "ref", None)

    def batches():
        for i in range(2):  # one transaction of rows (about 50,000) is committed
            yield [row] * 30_000
        print("killing", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # mid-way: the summary is never written
        yield [row]

    store_run(svc, "nightly", "cases.jsonl", batches(), {"rows": 1_000_000})
    """
)


def run_cli(db: str, *args: str) -> object:
    res = CliRunner().invoke(cli, [*args, "--db", db])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout) if "--json" in args else res.stdout


@pytest.mark.process
def test_a_killed_run_is_interrupted_everywhere_and_can_be_deleted(db: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILLED, db], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == -9, proc.stderr
    stored = table_counts(db, ("runs", "results"))
    assert stored["runs"] == 1 and 0 < stored["results"] < 1_000_000

    runs_page = run_cli(db, "runs", "list", "--json")
    assert isinstance(runs_page, dict) and runs_page["next_cursor"] is None
    runs = runs_page["runs"]
    assert isinstance(runs, list) and [r["status"] for r in runs] == ["interrupted"]
    run_id = runs[0]["id"]
    assert "interrupted" in str(run_cli(db, "runs", "show", str(run_id)))
    assert "interrupted" in str(run_cli(db, "runs", "list"))
    listed_page = run_cli(db, "results", "list", "--run", str(run_id), "--limit", "3", "--json")
    assert isinstance(listed_page, dict) and listed_page["next_cursor"] is not None
    listed = listed_page["results"]
    assert isinstance(listed, list) and {r["run_status"] for r in listed} == {"interrupted"}

    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as c:
        assert c.get(f"/api/runs/{run_id}").json()["status"] == "interrupted"
        page = c.get(f"/api/results?run_id={run_id}&limit=2").json()["results"]
        assert {r["run_status"] for r in page} == {"interrupted"}
        exported = c.get(f"/api/results/export?run_id={run_id}").text
        first = next(csv.DictReader(io.StringIO(exported)))
        assert first["run_status"] == "interrupted"
        # the studio says so on the result's page
        assert "was interrupted" in c.get(f"/results/{page[0]['id']}").text
        assert c.delete(f"/api/runs/{2**64}").status_code == 422
        assert c.delete(f"/api/runs/{run_id + 1}").status_code == 404
        deleted = c.delete(f"/api/runs/{run_id}")
        assert deleted.status_code == 200 and deleted.json()["status"] == "interrupted"
        assert c.get(f"/api/runs/{run_id}").status_code == 404
    assert table_counts(db, ("runs", "results")) == {"runs": 0, "results": 0}


def test_a_run_being_stored_cannot_be_deleted_and_a_finished_one_is_complete(db: str) -> None:
    from simeval.runs import STORE_COLUMNS, store_run
    from simeval.service import Service

    with Service(db) as svc:
        run_id = svc.create_run("live", "cases.jsonl")
        assert svc.get_run(run_id).status == "running"  # this process is alive
        res = CliRunner().invoke(cli, ["runs", "delete", str(run_id), "--db", db])
        assert res.exit_code == 2 and "still being stored" in res.stderr
        row = (None, None, 0.5, True, 0.4, "fp", 0, "q", "a", "ref", None)
        done = store_run(svc, "done", "cases.jsonl", [[row] * 3], {"rows": 3})
        assert len(STORE_COLUMNS) == len(row)
        assert svc.get_run(done).status == "complete"
    out = run_cli(db, "runs", "delete", str(done), "--json")
    assert isinstance(out, dict) and out["results"] == 3


@pytest.mark.process
def test_temp_files_of_dead_processes_are_removed_by_the_next_run(tmp_path: Path) -> None:
    src = tmp_path / "cases.jsonl"
    src.write_text(json.dumps({"output": "Paris.", "reference": "Paris."}) + "\n")
    dest = tmp_path / "out.jsonl"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    orphan = tmp_path / f".out.jsonl.{dead_pid}.abc123.tmp"
    orphan.write_bytes(b"x" * 1000)
    cases = tmp_path / f".out.jsonl.{dead_pid}.def456.cases"
    cases.write_bytes(b"x")
    alive = tmp_path / f".out.jsonl.{os.getpid()}.ghi789.tmp"  # a live process's: kept
    alive.write_bytes(b"x")
    res = CliRunner().invoke(cli, ["run", str(src), "-o", str(dest)])
    assert res.exit_code == 0, res.output
    assert dest.exists() and not orphan.exists() and not cases.exists() and alive.exists()
