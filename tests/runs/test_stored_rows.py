"""`simeval run --store`: rows are written while the run is scored, stored without their
explanation, and explained when shown exactly as ``scorer.explain`` explains them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import simeval
from simeval import runs
from simeval.cli import cli
from simeval.scoring.bench import synthetic_texts
from simeval.service import Service

TEXTS = [
    *synthetic_texts(40, words=25, seed=31),
    "Tokyo is the capital of Japan.",
    "Japan's capital isn't Kyoto, it is Tokyo.",
    "The capital is not Tokyo.",
    "Café naïve 1,650 3.5 don't 中文 €",
    "  ",
]
QUESTIONS = [None, "", "What is the capital of Japan?", "capital Tokyo", TEXTS[3][:40]]


def _rows() -> list[dict[str, Any]]:
    rows = []
    for i, output in enumerate(TEXTS):
        refs = [TEXTS[(i * 7 + 3) % 40], TEXTS[40 + i % 3]] if i % 4 == 0 else TEXTS[(i + 1) % 43]
        row: dict[str, Any] = {"id": f"c{i}", "output": output, "reference": refs}
        question = QUESTIONS[i % len(QUESTIONS)]
        if question is not None:
            row["input"] = question
        rows.append(row)
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.process
@pytest.mark.parametrize(
    ("flags", "options"),
    [([], {}), (["--no-stemming", "--negation", "0.8"], {"stemming": False, "negation": 0.8})],
    ids=["default", "options"],
)
def test_stored_then_shown_explanation_is_explain(
    tmp_path: Path, new_sqlite: Callable[..., str], flags: list[str], options: dict[str, Any]
) -> None:
    db = new_sqlite("a.db")
    rows = _rows()
    src = _write(tmp_path / "cases.jsonl", rows)
    res = CliRunner().invoke(cli, ["run", str(src), "--store", "--db", db, "--json", *flags])
    assert res.exit_code in (0, 1), res.output
    run_id = json.loads(res.output)["run_id"]
    scorer = simeval.get_scorer(**options)
    with Service(db) as svc:
        assert svc.get_run(run_id).results == len(rows)
        bare = svc.list_results(run_id=run_id, limit=1000, explain=False)
        assert all(set(r.explanation or {}) == {"case"} for r in bare)  # nothing computed
        shown = svc.list_results(run_id=run_id, limit=1000)
        one = svc.get_result(shown[0].id)
    assert one.explanation == shown[0].explanation
    shown.sort(key=lambda r: (r.explanation or {})["case"]["ordinal"])
    for n, (got, row) in enumerate(zip(shown, rows, strict=True)):
        refs = row["reference"] if isinstance(row["reference"], list) else [row["reference"]]
        want = scorer.explain(row["output"], refs, top=10, input=row.get("input")).to_dict()
        want["case"] = {"id": row["id"], "row": f"{src} line {n + 1}", "ordinal": n}
        assert got.explanation == want
        assert got.matched_reference == refs[want["matched_reference"]]


@pytest.mark.process
def test_eval_file_run_rows_are_explained_with_each_evals_options(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    db = new_sqlite("a.db")
    evals = tmp_path / "evals.json"
    defs = [
        {"name": "plain", "references": [TEXTS[40], TEXTS[5]]},
        {"name": "nostem", "references": [TEXTS[41]], "options": {"stemming": False}},
    ]
    evals.write_text(json.dumps({"evals": defs}), encoding="utf-8")
    rows = [{"id": f"c{i}", "input": QUESTIONS[i % 5], "output": t} for i, t in enumerate(TEXTS)]
    src = _write(tmp_path / "cases.jsonl", rows)
    res = CliRunner().invoke(
        cli, ["run", str(src), "--evals", str(evals), "--store", "--db", db, "--json"]
    )
    assert res.exit_code in (0, 1), res.output
    run_id = json.loads(res.output)["run_id"]
    with Service(db) as svc:
        shown = svc.list_results(run_id=run_id, limit=1000)
    assert len(shown) == 2 * len(rows)
    by_name = {d["name"]: d for d in defs}
    for got in shown:
        d = by_name[got.eval_name or ""]
        scorer = simeval.get_scorer(**d.get("options", {}))
        row = rows[(got.explanation or {})["case"]["ordinal"]]
        want = scorer.explain(row["output"], d["references"], 10, row["input"]).to_dict()
        assert {k: v for k, v in (got.explanation or {}).items() if k != "case"} == want


@pytest.mark.process
def test_a_failed_stored_run_leaves_nothing(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    from simeval import runs

    db = new_sqlite("a.db")
    rows: list[Any] = [{"output": TEXTS[i], "reference": TEXTS[i + 1]} for i in range(30)]
    src = _write(tmp_path / "cases.jsonl", rows)
    with src.open("a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    res = CliRunner().invoke(cli, ["run", str(src), "--store", "--db", db])
    assert res.exit_code == 2 and "malformed JSON" in res.output
    with Service(db) as svc:
        # rows of the first chunks were written before the bad line was read: deleted again
        sink = runs.RunStore(svc, "bad", str(src))
        with pytest.raises(simeval.InvalidInput, match="malformed JSON"):
            runs.run_file(str(src), runs.RunOptions(store=sink, chunk_rows=7, write_results=False))
        assert svc.list_runs() == []
        assert svc.count_results() == 0


def test_store_thread_overlaps_chunks(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    """Several chunks, several transactions: every row stored once, in input order."""
    from simeval import runs

    db = new_sqlite("a.db")
    rows = [{"output": TEXTS[i % 40], "reference": TEXTS[(i * 3) % 40]} for i in range(250)]
    src = _write(tmp_path / "cases.jsonl", rows)
    with Service(db) as svc:
        sink = runs.RunStore(svc, "many", str(src))
        opts = runs.RunOptions(store=sink, chunk_rows=7, write_results=False)
        summary = runs.run_file(str(src), opts)
        got = svc.list_results(run_id=summary.run_id, limit=1000, explain=False)
        run = svc.get_run(summary.run_id)
    assert run.summary["status"] == "complete" and run.results == 250
    assert sorted((r.explanation or {})["case"]["ordinal"] for r in got) == list(range(250))
    assert run.options["scorer"] == {}


def test_fast_loop_writes_what_the_general_loop_writes(tmp_path: Path) -> None:
    """A plain JSONL run takes a tight loop unless JUnit (among others) is asked for: the
    same results file and summary from rows of every shape."""
    lines = []
    for i, row in enumerate(_rows()):
        row = {**row, "reference": row["reference"] if i % 4 else row["reference"][0]}
        text = json.dumps(row, ensure_ascii=i % 2 == 0)
        extra = [
            text,
            text.replace('": ', '":'),
            text[:-1] + ', "n": -0, "f": 1.50, "b": true, "l": [1, "x"], "d": {"k": null}}',
            text[:-1] + ', "id": "dup", "del": "a\x7fb", "esc": "q\\"\\\\/\\u00e9"}',
            text[:-1] + ', "id": 1e3}',
        ][i % 5]
        lines.append(extra)
    lines.insert(7, "")
    src = tmp_path / "cases.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outs = []
    for junit in (None, str(tmp_path / "j.xml")):
        res_path = tmp_path / f"r{junit is None}.jsonl"
        # a chunk a row: rows the tight loop leaves to the general one do not hide the others
        opts = runs.RunOptions(results=str(res_path), junit=junit, on_error="skip", chunk_rows=1)
        summary = runs.run_file(str(src), opts).to_dict()
        for k in ("elapsed_s", "rows_per_s", "junit_file", "results_file"):
            summary.pop(k, None)
        outs.append((res_path.read_bytes(), summary))
    assert outs[0] == outs[1]
    assert outs[0][1]["results"] > 30


def _cli(*args: str, timeout: float = 180) -> Any:
    """The real command in a fresh interpreter (nothing of the database layer imported yet)."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", "from simeval.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.process
def test_store_with_worker_processes_opens_the_database_while_scoring(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    # several chunks, two worker processes: the database is opened on the writer thread once
    # the workers are forked (a fork during an import could leave a worker holding its lock)
    n = 3 * runs.CHUNK_ROWS + 500
    src = tmp_path / "cases.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": i, "output": TEXTS[i % 40], "reference": TEXTS[(i * 7) % 40]}) + "\n"
            for i in range(n)
        ),
        encoding="utf-8",
    )
    db = Path(new_sqlite("runs.db"))
    done = _cli("run", str(src), "--store", "--db", str(db), "--workers", "2", "--json")
    assert done.returncode in (0, 1), done.stderr
    summary = json.loads(done.stdout)
    with Service(str(db)) as svc:
        run = svc.get_run(summary["run_id"])
        assert run.status == "complete"
        assert svc.count_results(run_id=run.id) == n


@pytest.mark.process
def test_store_into_a_bad_database_fails_in_one_line(tmp_path: Path) -> None:
    src = tmp_path / "cases.jsonl"
    src.write_text(
        "".join(
            json.dumps({"output": TEXTS[i % 40], "reference": TEXTS[1]}) + "\n"
            for i in range(2 * runs.CHUNK_ROWS + 10)
        ),
        encoding="utf-8",
    )
    bad = tmp_path / "notes.db"
    bad.write_bytes(b"not a database at all")
    out = tmp_path / "results.jsonl"
    done = _cli("run", str(src), "--store", "--db", str(bad), "-o", str(out), "--workers", "2")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "notes.db" in done.stderr
    assert "Traceback" not in done.stderr
    assert bad.read_bytes() == b"not a database at all"
    assert not out.exists()


@pytest.mark.process
def test_a_killed_stored_run_is_interrupted_and_its_writer_stops(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    # `run --store` writes through a writer process: when the run's process is killed, the
    # writer sees its pipe close and stops, so the run shows as interrupted, not running
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    n = 40 * runs.CHUNK_ROWS
    src = tmp_path / "cases.jsonl"
    src.write_text(
        "".join(
            json.dumps({"output": TEXTS[i % 40], "reference": TEXTS[(i * 7) % 40]}) + "\n"
            for i in range(n)
        ),
        encoding="utf-8",
    )
    db = Path(new_sqlite("runs.db"))
    proc = subprocess.Popen(
        [
            *(sys.executable, "-c", "from simeval.cli import main; main()", "run", str(src)),
            *("--store", "--db", str(db), "--workers", "2", "--no-results"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        stored = 0
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                with contextlib.suppress(sqlite3.Error), sqlite3.connect(db, timeout=1) as con:
                    stored = con.execute("SELECT count(*) FROM results").fetchone()[0]
            if stored:
                break
            time.sleep(0.05)
        assert stored and proc.poll() is None, "the run ended before any row was stored"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    with Service(str(db)) as svc:
        (run,) = svc.list_runs()
        shown = svc.get_run(run.id)
        deadline = time.monotonic() + 30
        while shown.status != "interrupted" and time.monotonic() < deadline:
            time.sleep(0.1)
            shown = svc.get_run(run.id)
        assert shown.status == "interrupted"  # the writer process is gone too
        assert 0 < svc.count_results(run_id=run.id) < n


@pytest.mark.process
def test_the_writer_ignores_modules_in_the_current_directory(
    tmp_path: Path, new_sqlite: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's database writer is a Python process of its own: a json.py (or any module
    name) in the directory the run is started from must not replace the standard library's
    there, as it does not in the command's own process."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "json.py").write_text("raise SystemExit('the json.py of the current directory')\n")
    db = new_sqlite("a.db")
    rows: list[Any] = [{"output": TEXTS[i], "reference": TEXTS[i + 1]} for i in range(20)]
    src = _write(tmp_path / "cases.jsonl", rows)
    monkeypatch.chdir(work)
    res = CliRunner().invoke(cli, ["run", str(src), "--store", "--db", db, "--no-results"])
    assert res.exit_code in (0, 1), res.output
    assert "stored as run 1" in res.output
    with Service(db) as svc:
        assert svc.get_run(1).results == 20
