"""A stored run read back as a baseline (``run:ID``, ``run:latest``) is the same baseline as
the results file the same run wrote: every case's key, score, verdict and name, repeated
inputs paired in the run's order (rows numbered past 9, where text order and numeric order
of the row ids differ), read in one pass (``Service.iter_run_cases``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simeval.cli import cli
from simeval.datafiles.columns import DEFAULT_COLUMNS
from simeval.runs import load_baseline, load_stored_baseline
from simeval.service import Service

REF = "Paris is the capital of France and its largest city."


@pytest.mark.process
def test_a_stored_baseline_equals_the_file_baseline_of_the_same_run(tmp_path: Path) -> None:
    rows = []
    for i in range(25):
        words = REF.split()
        # a few inputs repeat (paired in order), a few rows have no input (keyed by row)
        row = {
            "input": "" if i % 7 == 3 else f"question {i % 4}",
            "output": " ".join(words[: 3 + i % len(words)]),
            "reference": REF,
        }
        if i % 5 == 0:
            row["id"] = f"case-{i}"
        rows.append(row)
    src = tmp_path / "cases.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    db, results = str(tmp_path / "runs.db"), str(tmp_path / "cases.results.jsonl")
    res = CliRunner().invoke(cli, ["run", str(src), "--store", "--db", db, "-o", results, "--json"])
    assert res.exit_code in (0, 1), res.output
    run_id = json.loads(res.output)["run_id"]
    from_file = load_baseline(results, DEFAULT_COLUMNS)
    with Service(db) as svc:
        latest = load_stored_baseline(svc, "run:latest", "cases.jsonl")
        by_id = load_stored_baseline(svc, f"run:{run_id}")
        stored = list(svc.iter_run_cases(run_id))
    assert latest.rows == by_id.rows == from_file.rows == len(rows) == len(stored)
    assert latest.cases == by_id.cases
    # the same keys, scores and verdicts; the same names but for rows with neither id nor
    # input, named where they are (the data set's line, or the results file's)
    assert {k: v[:2] for k, v in latest.cases.items()} == {
        k: v[:2] for k, v in from_file.cases.items()
    }
    for key, (_, _, name) in from_file.cases.items():
        shown = latest.cases[key][2]
        if " line " in name:
            assert shown.rsplit(" line ", 1)[1] == name.rsplit(" line ", 1)[1]
        else:
            assert shown == name
    assert latest.fingerprints == from_file.fingerprints
    # the rows come back in the order they were stored, row ids counted as numbers
    assert [r[0] for r in stored] == sorted(r[0] for r in stored)
    scores = sorted({s for s, _, _ in from_file.cases.values()})
    assert len(scores) > 5  # the cases differ: a mispairing would show
