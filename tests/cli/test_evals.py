"""`simeval evals|capture|results|trend|settings|cleanup` through the CLI runner, on a real
SQLite file."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dbhelp import sql, table_counts
from simeval.cli import cli
from simeval.cli.results import sparkline

REFERENCE = "The capital of France is Paris, which stands on the Seine."
QUESTION = "What is the capital of France?"
POOR = "France is a large country in western Europe."
GOOD = "Paris, on the Seine, is the capital of France."


def run(db: Path | str | None, *args: str, input: str | bytes | None = None) -> Result:
    argv = list(args) + (["--db", str(db)] if db is not None else [])
    return CliRunner().invoke(cli, argv, input=input)


def ok(db: Path | str, *args: str) -> Any:
    res = run(db, *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def counts(db: Path | str) -> dict[str, int]:
    tables = ("evals", "eval_versions", "eval_tests", "captures", "results", "reviews")
    out = table_counts(db, tables)
    settings = sql(db, "SELECT key, CAST(value AS TEXT) FROM settings ORDER BY key")
    out["settings"] = hash(tuple(settings))
    return out


def one_line_error(res: Result, *needles: str) -> None:
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_seed_flow_through_the_cli(db: str, tmp_path: Path) -> None:
    created = ok(db, "evals", "create", "capital", "-r", REFERENCE, "--threshold", "0.8")
    assert (created["status"], created["version"], created["threshold"]) == ("draft", 1, 0.8)

    poor = run(db, "evals", "test", "capital", POOR, "-i", QUESTION)
    assert poor.exit_code == 1
    assert "FAIL" in poor.stdout and "missing from output: seine" in poor.stdout
    assert "paris (0." in poor.stdout
    poor_json = run(db, "evals", "test", "capital", POOR, "--json")
    assert poor_json.exit_code == 1
    data = json.loads(poor_json.stdout)
    assert data["passed"] is False and data["explanation"]["missing"][0]["term"]

    refused = run(db, "evals", "activate", "capital")
    assert refused.exit_code == 1
    assert "cannot activate" in refused.stderr and "failed" in refused.stderr
    assert ok(db, "evals", "show", "capital")["status"] == "draft"

    good = run(db, "evals", "test", "capital", GOOD, "-i", QUESTION)
    assert good.exit_code == 0 and "PASS" in good.stdout
    activated = run(db, "evals", "activate", "capital")
    assert activated.exit_code == 0 and "is active" in activated.stdout

    outputs = [GOOD, "Paris is the French capital.", "I do not know."]
    caps = [
        ok(db, "capture", o, "-i", QUESTION, "--conversation-id", f"c{i}")
        for i, o in enumerate(outputs)
    ]
    assert [c["results"][0]["passed"] for c in caps] == [True, False, False]
    human = run(db, "capture", GOOD, "-i", QUESTION)
    assert human.exit_code == 0 and "PASS" in human.stdout and "capital" in human.stdout

    listed = ok(db, "results", "list", "--eval", "capital")["results"]
    assert len(listed) == 4
    table = run(db, "results", "list", "--eval", "capital", "--failed")
    assert table.exit_code == 0 and "2 of 2 results" in table.stdout

    target = caps[1]["results"][0]["id"]
    reviewed = ok(db, "results", "review", str(target), "--score", "0.9", "--note", "fine")
    assert reviewed["passed"] is True and reviewed["automated_passed"] is False
    assert reviewed["score"] == caps[1]["results"][0]["score"]
    assert ok(db, "results", "show", str(target))["review"]["note"] == "fine"
    assert len(ok(db, "results", "list", "--passed")["results"]) == 3
    assert [r["id"] for r in ok(db, "results", "list", "--reviewed")["results"]] == [target]

    trend = ok(db, "trend", "capital", "--bucket", "day")
    (bucket,) = trend["buckets"]
    assert (bucket["count"], bucket["reviewed"], bucket["pass_rate"]) == (4, 1, 0.75)
    shown = run(db, "trend", "capital")
    assert shown.exit_code == 0 and "mean score" in shown.stdout and "pass rate" in shown.stdout
    assert any(ch in shown.stdout for ch in "▁▂▃▄▅▆▇█")

    out_csv = tmp_path / "results.csv"
    exp = run(db, "results", "export", str(out_csv))
    assert exp.exit_code == 0 and "wrote 4 results" in exp.stderr
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text(encoding="utf-8"))))
    assert len(rows) == 4
    row = next(r for r in rows if r["result_id"] == str(target))
    assert row["pass"] == "true" and row["human_override_score"] == "0.9"
    assert row["human_override_note"] == "fine" and row["conversation_id"] == "c1"
    assert row["eval_name"] == "capital" and row["eval_version"] == "1"
    json_out = run(db, "results", "export", "--format", "json")
    assert json_out.exit_code == 0
    exported = json.loads(json_out.stdout)
    assert len(exported) == 4 and {r["output"] for r in exported} >= set(outputs)
    assert not list(tmp_path.glob("*.partial"))

    # retention: two captures from 40 days ago are cleaned up, the four of today stay
    old = (datetime.now(UTC) - timedelta(days=40)).isoformat()
    for _ in range(2):
        ok(db, "capture", GOOD, "-i", QUESTION, "--at", old)
    assert ok(db, "cleanup")["captures"] == 0  # forever by default
    settings = ok(db, "settings", "--retention", "30")
    assert settings["retention_days"] == 30 and str(db) in settings["database"]
    cleaned = ok(db, "cleanup")
    assert (cleaned["captures"], cleaned["results"]) == (2, 2)
    assert ok(db, "results", "list")["total"] == 4
    again = run(db, "cleanup")
    assert again.exit_code == 0 and "0 captures" in again.stdout


def test_evals_list_show_edit_archive(db: str) -> None:
    ok(db, "evals", "create", "capital", "-r", REFERENCE, "-r", "Paris.", "--scope", QUESTION)
    ok(db, "evals", "create", "greeting", "-r", "Hello, how can I help?", "--ngram", "2")
    names = [e["name"] for e in ok(db, "evals", "list")]
    assert names == ["capital", "greeting"]
    assert ok(db, "evals", "show", "greeting")["options"] == {"ngram": 2}
    edited = ok(db, "evals", "edit", "greeting", "--threshold", "0.7", "--stemming")
    assert edited["version"] == 2 and edited["options"] == {"ngram": 2, "stemming": True}
    assert set(edited["changes"]) >= {"threshold", "options"}
    same = run(db, "evals", "edit", "greeting", "--threshold", "0.7")
    assert same.exit_code == 0 and "no change" in same.stdout
    shown = ok(db, "evals", "show", "greeting")
    assert [v["version"] for v in shown["versions"]] == [1, 2]
    reset = ok(db, "evals", "edit", "greeting", "--reset-options", "--no-scope")
    assert reset["options"] == {} and reset["version"] == 3
    unscoped = ok(db, "evals", "edit", "capital", "--no-scope")
    assert unscoped["input_scope"] is None
    text = run(db, "evals", "show", "capital")
    assert text.exit_code == 0 and "reference 2: Paris." in text.stdout and "created" in text.stdout
    assert ok(db, "evals", "archive", "greeting")["status"] == "archived"
    assert [e["name"] for e in ok(db, "evals", "list")] == ["capital"]
    assert len(ok(db, "evals", "list", "--all")) == 2
    assert ok(db, "evals", "deactivate", "greeting")["status"] == "draft"
    table = run(db, "evals", "list")
    assert table.exit_code == 0 and "capital" in table.stdout and "greeting" in table.stdout


def test_reference_file_and_stdin(db: str, tmp_path: Path) -> None:
    ref = tmp_path / "ref.txt"
    ref.write_text(REFERENCE, encoding="utf-8")
    ev = ok(db, "evals", "create", "capital", "--reference-file", str(ref))
    assert ev["references"] == [REFERENCE]
    res = run(db, "evals", "test", "capital", "--output-file", "-", input=GOOD)
    assert res.exit_code == 0
    out = tmp_path / "out.txt"
    out.write_text(GOOD, encoding="utf-8")
    assert run(db, "evals", "test", "capital", "--output-file", str(out)).exit_code == 0


def test_export_and_import_evals(db: str, tmp_path: Path) -> None:
    ok(db, "evals", "create", "capital", "-r", REFERENCE)
    run(db, "evals", "test", "capital", GOOD)
    run(db, "evals", "activate", "capital")
    ok(db, "evals", "create", "greeting", "-r", "Hello, how can I help?")
    path = tmp_path / "evals.yaml"
    assert run(db, "evals", "export", str(path)).exit_code == 0
    text = path.read_text(encoding="utf-8")
    assert "name: capital" in text and "status: active" in text

    other = tmp_path / "other.db"
    first = ok(other, "evals", "import", str(path))
    assert first["created"] == ["capital", "greeting"] and first["activated"] == ["capital"]
    second = ok(other, "evals", "import", str(path))
    assert second["unchanged"] == ["capital", "greeting"] and not second["created"]
    as_json = run(db, "evals", "export", "--format", "json")
    assert json.loads(as_json.stdout)["evals"][0]["name"] == "capital"
    third = run(other, "evals", "import", "-", input=as_json.stdout)
    assert third.exit_code == 0 and "unchanged: capital, greeting" in third.stdout

    # an eval the file wants active whose test fails: imported, not activated, exit 1
    gated = tmp_path / "gated.yaml"
    gated.write_text(
        "evals:\n  - name: strict\n    references: [Paris is the capital.]\n"
        "    status: active\n    test: {input: q, output: bananas}\n",
        encoding="utf-8",
    )
    res = run(other, "evals", "import", str(gated))
    assert res.exit_code == 1 and "not activated" in res.stdout and "strict" in res.stdout
    assert ok(other, "evals", "show", "strict")["status"] == "draft"


def test_settings_and_auto_eval(db: str) -> None:
    ok(db, "evals", "create", "capital", "-r", REFERENCE)
    run(db, "evals", "test", "capital", REFERENCE)
    run(db, "evals", "activate", "capital")
    shown = run(db, "settings")
    assert shown.exit_code == 0 and "automatic evaluation: on" in shown.stdout
    assert "retention: forever" in shown.stdout
    assert ok(db, "settings", "--no-auto-eval")["auto_evaluate"] is False
    cap = ok(db, "capture", GOOD)
    assert cap["evaluated"] is False and cap["results"] == []
    assert "not scored" in run(db, "capture", GOOD).stdout
    assert ok(db, "settings", "--auto-eval", "--retention", "forever")["retention_days"] is None
    assert len(ok(db, "capture", GOOD)["results"]) == 1
    for days in ("7", "30", "90", "180"):
        assert ok(db, "settings", "--retention", days)["retention_days"] == int(days)
    bad = run(db, "settings", "--retention", "60")
    assert bad.exit_code == 2


def test_capture_from_a_jsonl_file(db: str, tmp_path: Path) -> None:
    ok(db, "evals", "create", "capital", "-r", REFERENCE)
    run(db, "evals", "test", "capital", REFERENCE)
    run(db, "evals", "activate", "capital")
    lines = [
        {"input": QUESTION, "output": GOOD, "conversation_id": "a"},
        {"output": "no idea", "metadata": {"model": "x"}, "at": "2026-01-01T00:00:00Z"},
    ]
    path = tmp_path / "captures.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    summary = ok(db, "capture", "--file", str(path))
    assert summary == {"captures": 2, "results": 2, "passed": 1, "failed": 1, "replayed": 0}
    before = counts(db)
    path.write_text(json.dumps(lines[0]) + "\n{not json\n", encoding="utf-8")
    one_line_error(run(db, "capture", "--file", str(path)), "line 2")
    assert counts(db) == before  # the first line was not captured either
    # a line only the service's own checks refuse is caught before anything is stored too
    long_id = {"output": GOOD, "conversation_id": "c" * 201}
    path.write_text(json.dumps(lines[0]) + "\n" + json.dumps(long_id) + "\n", encoding="utf-8")
    one_line_error(run(db, "capture", "--file", str(path)), "line 2", "conversation_id")
    assert counts(db) == before


def test_help_has_an_example_for_every_command() -> None:
    commands = [
        ["evals"],
        *[["evals", c] for c in ("list", "create", "show", "edit", "test", "activate")],
        *[["evals", c] for c in ("deactivate", "archive", "export", "import")],
        ["capture"],
        ["results"],
        *[["results", c] for c in ("list", "show", "export", "review")],
        ["trend"],
        ["settings"],
        ["cleanup"],
    ]
    for argv in commands:
        res = CliRunner().invoke(cli, [*argv, "--help"])
        assert res.exit_code == 0, argv
        assert "Example" in res.output and "simeval " in res.output, argv
        if len(argv) > 1 or argv[0] not in ("evals", "results"):
            assert "--db" in res.output, argv


# -- bad input: exit 2, one line, nothing changed ------------------------------------------------
@pytest.fixture
def seeded(db: str) -> str:
    ok(db, "evals", "create", "capital", "-r", REFERENCE)
    run(db, "evals", "test", "capital", REFERENCE)
    run(db, "evals", "activate", "capital")
    ok(db, "capture", GOOD)
    return db


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("evals", "show", "capitol"), ("no eval named 'capitol'", "did you mean 'capital'")),
        (("evals", "test", "nope", "x"), ("no eval named 'nope'",)),
        (("evals", "activate", "nope"), ("no eval named 'nope'",)),
        (("trend", "nope"), ("no eval named 'nope'",)),
        (("results", "list", "--eval", "nope"), ("no eval named 'nope'",)),
        (("evals", "create", "capital", "-r", "x"), ("already exists",)),
        (("evals", "create", "new", "-r", "   "), ("reference answer is empty",)),
        (("evals", "create", "new", "-r", "a", "-r", ""), ("reference answer 2 is empty",)),
        (("evals", "create", "new"), ("at least one reference",)),
        (("evals", "create", "", "-r", "a"), ("name is empty",)),
        (("evals", "create", "new", "-r", "a", "-t", "1.5"), ("threshold", "not 1.5")),
        (("evals", "create", "new", "-r", "a", "-t", "-0.1"), ("threshold", "not -0.1")),
        (("evals", "create", "new", "-r", "a", "-t", "nan"), ("threshold", "not nan")),
        (("evals", "create", "new", "-r", "a", "--ngram", "7"), ("ngram",)),
        (("evals", "edit", "capital", "-t", "nan"), ("threshold",)),
        (("evals", "edit", "capital", "--scope", "x", "--no-scope"), ("--no-scope",)),
        (("results", "review", "1", "--score", "1.5"), ("review score",)),
        (("results", "review", "99", "--score", "0.5"), ("no result with id 99",)),
        (("results", "show", "x"), ("result id",)),
        (("results", "list", "--since", "yesterday"), ("since",)),
        (("capture", "x", "--metadata", "[1]"), ("--metadata must be a JSON object",)),
        (("capture", "x", "--at", "soon"), ("captured_at",)),
        (("capture",), ("missing OUTPUT",)),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    seeded: str, args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    before = counts(seeded)
    one_line_error(run(seeded, *args), *needles)
    assert counts(seeded) == before


def test_bad_files_are_one_line_exit_2_and_change_nothing(seeded: str, tmp_path: Path) -> None:
    before = counts(seeded)
    broken = tmp_path / "evals.yaml"
    broken.write_text(
        "evals:\n  - name: a\n    references: [one]\n  - name: b\n    references: [x\n",
        encoding="utf-8",
    )
    one_line_error(run(seeded, "evals", "import", str(broken)), "invalid YAML", "line 6")
    bad_json = tmp_path / "evals.json"
    bad_json.write_text('{"evals": [\n  {"name": "a",}\n]}', encoding="utf-8")
    one_line_error(run(seeded, "evals", "import", str(bad_json)), "invalid JSON", "line 2")
    half = tmp_path / "half.yaml"  # the first entry is fine, the second is not: nothing lands
    half.write_text(
        "evals:\n  - name: fine\n    references: [ok]\n  - name: bad\n    references: []\n",
        encoding="utf-8",
    )
    one_line_error(run(seeded, "evals", "import", str(half)), "eval 2 ('bad')")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Réponse: Paris est la capitale.".encode("latin-1"))
    one_line_error(run(seeded, "evals", "import", str(latin1)), "not UTF-8")
    one_line_error(run(seeded, "capture", "--output-file", str(latin1)), "not UTF-8")
    one_line_error(
        run(seeded, "evals", "create", "n", "--reference-file", str(latin1)), "not UTF-8"
    )
    one_line_error(run(seeded, "evals", "test", "capital", "--output-file", str(latin1)), "UTF-8")
    one_line_error(run(seeded, "evals", "import", str(tmp_path / "missing.yaml")), "not found")
    one_line_error(run(seeded, "evals", "import", "-", input=b"\xff\xfe\x00"), "not UTF-8")
    assert counts(seeded) == before


def test_ten_megabyte_output_is_refused(seeded: str, tmp_path: Path) -> None:
    before = counts(seeded)
    big = tmp_path / "big.txt"
    big.write_text("Paris is the capital of France. " * 330_000, encoding="utf-8")
    assert big.stat().st_size > 10_000_000
    res = run(seeded, "capture", "--output-file", str(big), "-i", QUESTION)
    one_line_error(res, "output has 10,560,000 characters", "1,000,000", "nothing was stored")
    one_line_error(run(seeded, "evals", "test", "capital", "--output-file", str(big)), "at most")
    assert counts(seeded) == before


def test_database_errors_are_one_line(tmp_path: Path) -> None:
    one_line_error(
        run(tmp_path / "no" / "such" / "dir.db", "evals", "list"),
        "directory of the database does not exist",
    )
    newer = tmp_path / "newer.db"
    ok(newer, "evals", "list")
    con = sqlite3.connect(newer)
    con.execute("UPDATE alembic_version SET version_num = 'ffff'")
    con.commit()
    con.close()
    one_line_error(run(newer, "evals", "list"), "'ffff'", "newer simeval")


def test_database_from_the_environment(
    new_sqlite: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = Path(new_sqlite("env.db"))
    monkeypatch.setenv("SIMEVAL_DATABASE_URL", str(path))
    res = run(None, "evals", "create", "capital", "-r", REFERENCE)
    assert res.exit_code == 0, res.output
    assert counts(path)["evals"] == 1


def test_sparkline() -> None:
    assert sparkline([0.0, 0.25, 0.5, 0.75, 1.0]) == "▁▃▅▆█"
    assert sparkline([1.0, 0.0], [False, True]) == "█│▁"
    assert sparkline([]) == ""


def test_db_may_come_before_the_command(tmp_path: Path) -> None:
    """``simeval --db X COMMAND`` is ``simeval COMMAND --db X``; the command's own wins."""
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    made = CliRunner().invoke(cli, ["--db", str(first), "evals", "create", "e", "-r", REFERENCE])
    assert made.exit_code == 0, made.output
    listed = CliRunner().invoke(cli, ["--db", str(first), "evals", "list", "--json"])
    assert [e["name"] for e in json.loads(listed.output)] == ["e"]
    own = CliRunner().invoke(
        cli, ["--db", str(first), "evals", "list", "--json", "--db", str(second)]
    )
    assert own.exit_code == 0 and json.loads(own.output) == []
    assert run(first, "evals", "list", "--json").output == listed.output


def test_json_may_come_before_the_command(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    """``simeval --json COMMAND`` is ``simeval COMMAND --json``; a command with no JSON to
    print says so in one line instead of printing text."""
    db = Path(new_sqlite("e.db"))
    made = CliRunner().invoke(cli, ["--db", str(db), "evals", "create", "e", "-r", REFERENCE])
    assert made.exit_code == 0, made.output
    listed = CliRunner().invoke(cli, ["--json", "--db", str(db), "evals", "list"])
    assert listed.exit_code == 0 and [e["name"] for e in json.loads(listed.output)] == ["e"]
    scored = CliRunner().invoke(cli, ["--json", "score", "Paris.", "Paris."])
    assert scored.exit_code == 0 and json.loads(scored.output)["pass"] is True
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"output": "Paris.", "reference": "Paris."}) + "\n")
    ran = CliRunner().invoke(cli, ["--json", "run", str(cases), "--no-results"])
    assert ran.exit_code == 0 and json.loads(ran.output)["passed"] == 1
    plain = CliRunner().invoke(cli, ["score", "Paris.", "Paris."])
    assert not plain.output.startswith("{")  # the flag of one call does not stay for the next
    res = CliRunner().invoke(cli, ["--json", "--db", str(db), "evals", "export"])
    one_line_error(res, "--json", "evals export` has no JSON output")
