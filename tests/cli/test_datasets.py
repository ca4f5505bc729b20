"""`simeval datasets import|list|show|export` through the CLI runner, on a real SQLite file."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dbhelp import sql, table_counts
from simeval.cli import cli
from simeval.service import Service

ROWS = [
    {"id": "fr", "input": "Capital of France?", "reference": "Paris is the capital of France."},
    {"id": "es", "input": "Capital of Spain?", "references": ["Madrid.", "It is Madrid."]},
]


def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--db", str(db)])


def ok(db: Path, *args: str) -> Any:
    res = run(db, *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def test_import_list_show_export(
    tmp_path: Path, new_sqlite: Callable[..., str], golden: Path
) -> None:
    db = Path(new_sqlite("s.db"))
    made = ok(db, "datasets", "import", str(golden), "--name", "golden")
    assert (made["name"], made["version"], made["cases"]) == ("golden", 1, 2)
    res = run(db, "datasets", "import", str(golden), "--name", "other")
    assert res.exit_code == 0 and "dataset other version 1: 2 cases" in res.output
    assert [d["name"] for d in ok(db, "datasets", "list")] == ["golden", "other"]
    listed = run(db, "datasets", "list")
    assert "golden" in listed.output and listed.exit_code == 0

    svc = Service(db)
    svc.edit_dataset_case("golden", "fr", references="Paris.")
    svc.close()
    shown = ok(db, "datasets", "show", "golden", "--version", "1")
    assert (shown["version"], shown["latest"], shown["total"]) == (1, 2, 2)
    assert shown["cases"][0]["references"] == ["Paris is the capital of France."]
    assert ok(db, "datasets", "show", "golden")["cases"][0]["references"] == ["Paris."]
    human = run(db, "datasets", "show", "golden")
    assert "version 2 of 2" in human.output and "edited case 'fr'" in human.output

    out = tmp_path / "v1.csv"
    res = run(db, "datasets", "export", "golden", "--version", "1", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert "version 1" in res.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert [r["reference"] for r in rows] == ["Paris is the capital of France.", "Madrid."]
    assert rows[1]["reference_2"] == "It is Madrid."
    stdout = run(db, "datasets", "export", "golden")
    lines = [json.loads(line) for line in stdout.stdout.splitlines()]
    assert lines[0] == {"id": "fr", "input": "Capital of France?", "reference": "Paris."}
    # the export is a file import reads: version 1 again, as a new dataset
    ok(db, "datasets", "import", str(out), "--name", "copy")
    assert ok(db, "datasets", "show", "copy")["cases"] == shown["cases"]


def test_replace_makes_a_new_version(new_sqlite: Callable[..., str], golden: Path) -> None:
    db = Path(new_sqlite("s.db"))
    ok(db, "datasets", "import", str(golden), "--name", "g")
    res = run(db, "datasets", "import", str(golden), "--name", "g")
    assert res.exit_code == 2 and "--replace" in res.stderr
    assert ok(db, "datasets", "import", str(golden), "--name", "g", "--replace")["version"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["datasets", "show", "nope"], "error: no dataset named 'nope'"),
        (["datasets", "show", "g", "--version", "7"], "error: dataset 'g' has no version 7"),
        (["datasets", "export", "nope"], "error: no dataset named 'nope'"),
        (["datasets", "import", "missing.jsonl", "--name", "x"], "input file not found"),
        (["datasets", "import", "{bad}", "--name", "x"], "line 2: malformed JSON"),
        (["datasets", "import", "{golden}", "--name", "a/b"], "dataset name contains '/'"),
        (["datasets", "import", "{golden}"], "Missing option '--name'"),
        (["datasets", "show", "g", "--version", "0"], "Invalid value for '--version'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, new_sqlite: Callable[..., str], golden: Path, args: list[str], message: str
) -> None:
    db = Path(new_sqlite("s.db"))
    ok(db, "datasets", "import", str(golden), "--name", "g")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n{oops\n", encoding="utf-8")
    argv = [a.format(bad=bad, golden=golden) for a in args]
    before = table_counts(db, ("dataset_versions", "dataset_cases"))
    res = run(db, *argv)
    assert res.exit_code == 2, res.output
    assert message in res.stderr
    assert "Traceback" not in res.output
    if not message.startswith(("Missing", "Invalid")):
        assert len(res.stderr.strip().splitlines()) == 1
    assert table_counts(db, ("dataset_versions", "dataset_cases")) == before


def test_help_has_examples() -> None:
    for sub in ([], ["import"], ["list"], ["show"], ["export"]):
        res = CliRunner().invoke(cli, ["datasets", *sub, "--help"])
        assert res.exit_code == 0
        assert "simeval datasets" in res.output and "Example" in res.output


@pytest.mark.process
def test_a_run_on_version_2_after_an_edit_says_so(
    tmp_path: Path, new_sqlite: Callable[..., str], golden: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`simeval run dataset:NAME[@V]` reads the version's cases (``Service.dataset_cases``)
    and the stored run records the version it used."""
    (tmp_path / "paris_engine.py").write_text(
        "def answer(case):\n    return 'Paris is the capital of France.'\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # a dataset run writes its results file here
    engines = tmp_path / "engines.yaml"
    engines.write_text("engines:\n  - name: local\n    python: paris_engine:answer\n")
    db = Path(new_sqlite("s.db"))
    ok(db, "datasets", "import", str(golden), "--name", "golden")
    args = ("--engines", str(engines), "--store", "--no-cache")
    first = ok(db, "run", "dataset:golden", *args)
    assert (first["source"], first["dataset_version"]) == ("dataset:golden@1", 1)
    svc = Service(db)
    svc.edit_dataset_case("golden", "es", references="Paris is the capital of France.")
    svc.close()
    second = ok(db, "run", "dataset:golden", *args)
    assert (second["source"], second["dataset_version"]) == ("dataset:golden@2", 2)
    again = ok(db, "run", "dataset:golden@1", *args)
    assert again["dataset_version"] == 1
    stored = sql(db, "SELECT dataset_name, dataset_version FROM runs ORDER BY id")
    assert stored == [("golden", 1), ("golden", 2), ("golden", 1)]
    # version 2's edit made its second case pass
    rates = [r["engines"][0]["run"]["pass_rate"] for r in (first, second)]
    assert rates[1] > rates[0]


FORMULAS = ['=HYPERLINK("http://x")', "+1+1", "-2", "@SUM(A1)", "\tx", "\rx", "'=quoted", "'plain"]


def test_csv_exports_never_hold_a_formula_and_import_back_the_same(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    # CLI and API alike: every text cell that a spreadsheet would run starts with "'"; the
    # file imports back as the very texts it was made from
    from fastapi.testclient import TestClient

    from simeval.web.app import create_app

    db = Path(new_sqlite("f.db"))
    cases = [
        {"id": f"c{i}", "input": text, "references": [text], "metadata": {"k": text}}
        for i, text in enumerate(FORMULAS)
    ]
    with Service(db) as svc:
        svc.create_dataset("sheet", cases)
    out = tmp_path / "sheet.csv"
    assert run(db, "datasets", "export", "sheet", "-o", str(out)).exit_code == 0
    with TestClient(create_app(db=str(db)), base_url="http://127.0.0.1:8000") as client:
        api = client.get("/api/datasets/sheet/export", params={"format": "csv"}).text
    assert api == out.read_bytes().decode("utf-8")
    rows = list(csv.DictReader(io.StringIO(api, newline="")))
    for row in rows:
        for col in ("id", "input", "reference", "metadata"):
            assert not row[col].startswith(("=", "+", "-", "@", "\t", "\r")), (col, row[col])
    assert [r["input"] for r in rows] == [
        "'" + t if not t.startswith("'p") else t for t in FORMULAS
    ]
    res = run(db, "datasets", "import", str(out), "--name", "again")
    assert res.exit_code == 0, res.output
    with Service(db) as svc:
        back = svc.show_dataset("again", None, limit=100, offset=0).cases
    assert [c.input for c in back] == FORMULAS
    assert [c.references for c in back] == [[t] for t in FORMULAS]
    assert [c.metadata for c in back] == [{"k": t} for t in FORMULAS]
