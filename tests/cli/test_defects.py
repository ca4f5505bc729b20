"""The CLI's defects of issue 20 (items 11 and 12): an export to a format it cannot write, an
empty capture, and a stored-run baseline that matches no stored run. Real SQLite files, the
click runner."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from simeval.cli import cli
from simeval.service import Service

REF = "Paris is the capital of France and its largest city."
ROWS = [
    {"id": "paris", "output": REF, "reference": REF},
    {"id": "lyon", "output": "Lyon is a large city in France.", "reference": REF},
]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_results_export_refuses_a_format_it_cannot_write(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    db = new_sqlite("x.db")
    with Service(db) as svc:
        svc.capture("q", REF)
    out = tmp_path / "out.xlsx"
    res = run("results", "export", str(out), "--db", db)
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: ") and "unsupported format" in res.output
    assert ".xlsx" in res.output and "--format" in res.output
    assert not out.exists() and not list(tmp_path.glob("*.partial"))
    # the formats it writes are unchanged; --format still decides for any file name
    assert run("results", "export", str(tmp_path / "out.csv"), "--db", db).exit_code == 0
    forced = tmp_path / "out.txt"
    assert run("results", "export", str(forced), "--format", "json", "--db", db).exit_code == 0
    assert isinstance(json.loads(forced.read_text(encoding="utf-8")), list)


def test_an_empty_capture_output_is_refused(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    db = new_sqlite("x.db")
    for args in ([""], ["   "], ["--output-file", str(tmp_path / "empty.txt")]):
        (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
        res = run("capture", *args, "-i", "q", "--db", db)
        assert res.exit_code == 2, (args, res.output)
        assert res.output.startswith("error: ") and "OUTPUT is empty" in res.output
    with Service(db) as svc:
        assert svc.count_captures() == 0


def _write(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


@pytest.mark.process
def test_a_stored_run_baseline_matching_no_stored_run_is_refused(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    db = new_sqlite("x.db")
    src = _write(tmp_path / "cases.jsonl")
    # the first run of all: nothing stored yet, every case is new (how a gate starts)
    first = run("run", str(src), "--store", "--db", db, "--baseline", "run:latest", "--json")
    assert first.exit_code in (0, 1), first.output
    assert json.loads(first.output)["baseline"]["new"] == 2
    # stored as "cases.jsonl": a baseline by the name "cases" would compare nothing
    res = run(
        "run", str(src), "--store", "--db", db, "--run-name", "cases",
        "--baseline", "run:latest", "--max-regressions", "0",
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: ") and "no stored run named 'cases'" in res.output
    assert "'cases.jsonl'" in res.output  # the closest stored name, to use instead
    with Service(db) as svc:
        assert svc.count_runs() == 1  # nothing stored for the refused run
    by_name = run(
        "run", str(src), "--store", "--db", db, "--run-name", "cases.jsonl",
        "--baseline", "run:latest", "--max-regressions", "0", "--json",
    )  # fmt: skip
    assert by_name.exit_code in (0, 1), by_name.output
    assert json.loads(by_name.output)["baseline"]["unchanged"] == 2
