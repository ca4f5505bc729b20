"""The CLI's tables and messages: long names kept when piped, the input a scoped eval asks for,
the small-sample warning of calibrate, the columns a run lacks. Through the CLI runner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from simeval.cli import cli

REF = "Paris is the capital of France and its largest city."
GOOD = "The capital of France is Paris, which is also its largest city."


def test_cli_tables_keep_long_names_when_piped(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "cli.db")]
    name = "refund-policy-for-enterprise-customers-in-europe"
    made = CliRunner().invoke(cli, ["evals", "create", name, "-r", REF, *db])
    assert made.exit_code == 0
    # the hint to run next is one line: it can be copied as it is
    assert f"next: simeval evals test {name} OUTPUT" in made.output.replace("\n", " ")
    assert f"next: simeval evals test {name} OUTPUT\n" in made.output
    listed = CliRunner().invoke(cli, ["evals", "list", *db])
    assert name in listed.output and "…" not in listed.output


def test_evals_test_asks_for_the_input_of_a_scoped_eval(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "cli.db")]
    CliRunner().invoke(cli, ["evals", "create", "cap", "-r", REF, "--scope", "Capital?", *db])
    res = CliRunner().invoke(cli, ["evals", "test", "cap", GOOD, *db])
    assert res.exit_code == 2 and "give the sample input with -i" in res.output
    ok = CliRunner().invoke(cli, ["evals", "test", "cap", GOOD, "-i", "Capital?", *db])
    assert ok.exit_code == 0 and "outside" not in ok.output


def test_calibrate_warns_on_a_small_sample(tmp_path: Path) -> None:
    data = tmp_path / "labels.jsonl"
    rows = [
        {"output": GOOD if i % 2 else "Bananas are yellow.", "reference": REF, "label": i % 2}
        for i in range(10)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = CliRunner().invoke(cli, ["calibrate", str(data), "--label-col", "label"])
    assert res.exit_code == 0, res.output
    assert "warning: only 10 labelled examples" in res.output


def test_run_with_a_missing_output_column_lists_the_columns(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "text": "t", "reference": "r"}\n', encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(data), "--output-col", "answer"])
    assert res.exit_code == 2
    assert "missing column 'answer' (columns: question, text, reference)" in res.output
