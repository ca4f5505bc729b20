"""A data-set row whose id names an eval is scored as a capture of it would be: with the row's
input as the question (a gate must not pass what production fails)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from simeval.cli import cli
from simeval.scoring.bench import synthetic_texts
from simeval.service import Service

QUESTIONS = [
    "What is the capital of France?",
    "When did the bridge open?",
    "What does a compiler do?",
    "Who painted the ceiling of the chapel?",
]
REFS = ["Paris", "It opened in 1912.", "It translates source code to machine code.", "Michelangelo"]


def test_run_by_eval_id_scores_as_a_capture(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    evals = [{"name": f"e{i}", "references": [r]} for i, r in enumerate(REFS)]
    (tmp_path / "evals.json").write_text(json.dumps({"evals": evals}), encoding="utf-8")
    noise = synthetic_texts(40, 12, seed=3)
    rows = []
    for n in range(80):
        i = n % len(REFS)
        # the reference inside a longer answer, or an unrelated answer
        output = f"{noise[n % 40]} {REFS[i]}" if n % 3 else noise[(n + 7) % 40]
        rows.append({"id": f"e{i}", "input": QUESTIONS[i], "output": output})
    src = tmp_path / "cases.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(
        cli, ["run", str(src), "--evals", str(tmp_path / "evals.json"), "-o", str(out)]
    )
    assert res.exit_code in (0, 1), res.output
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(got) == len(rows)
    db = new_sqlite("prod.db")
    with Service(db) as svc:
        for i, ref in enumerate(REFS):
            name = f"e{i}"
            svc.create_eval(name, ref, input_scope=QUESTIONS[i])
            svc.test_eval(name, QUESTIONS[i], ref)
            svc.activate_eval(name)
        for row, result in zip(rows, got, strict=True):
            cap = svc.capture(row["input"], row["output"])
            (stored,) = cap.results
            assert stored.eval_name == result["eval"] == row["id"]
            assert stored.score == result["score"], row
            assert stored.passed == result["pass"]
