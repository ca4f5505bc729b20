"""The run's own fast paths give what the scorer's slow ones give: explanations, missing terms,
evals named by case id, stored rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import simeval
from simeval.cli import cli
from simeval.scoring.bench import synthetic_texts
from simeval.scoring.explain import explain, missing_terms, reference_explanation

OPTION_SETS: list[dict[str, Any]] = [
    {},
    {"stemming": False},
    {"prefix": 0, "stop_words": 50},
    {"sublinear_tf": False},
    {"language": "french"},
    {"ngram": 2},
    {"idf": "pair"},
]
ODD = ["", "  ", "the of and", "?!", "Café naïve 1,650 3.5 don't 中文", "ﬁne\u00a0x²  İstanbul"]


@pytest.mark.parametrize("options", OPTION_SETS, ids=repr)
def test_explanation_is_scorer_explain(options: dict[str, Any]) -> None:
    scorer = simeval.get_scorer(**options)
    texts = synthetic_texts(60, words=30, seed=11) + ODD
    refs_list = [[texts[i]] for i in range(0, 40, 2)] + [[texts[1], texts[3]], ["Café naïve"]]
    for output in texts[20:]:
        for refs in refs_list:
            want = reference_explanation(scorer, output, refs, 10).to_dict()
            assert explain(scorer, output, refs, 10).to_dict() == want


@pytest.mark.parametrize("options", OPTION_SETS[:5], ids=repr)
def test_missing_terms_on_odd_texts(options: dict[str, Any]) -> None:
    scorer = simeval.get_scorer(**options)
    texts = synthetic_texts(20, words=30, seed=12) + [t for t in ODD if t.strip()]
    for a in texts:
        for b in texts:
            if b.strip("?! ") and scorer.vector(b):
                want = [t.term for t in reference_explanation(scorer, a, b, top=7).missing]
                assert missing_terms(scorer, a, b, 7) == want


def test_a_case_id_names_a_scoped_eval(tmp_path: Path) -> None:
    evals = tmp_path / "evals.json"
    evals.write_text(
        json.dumps(
            {
                "evals": [
                    {"name": "paris", "references": ["Paris is in France."],
                     "input_scope": "Where is Paris?"},
                    {"name": "any", "references": ["An answer."], "options": {"stemming": False}},
                ]
            }
        ),
        encoding="utf-8",
    )  # fmt: skip
    src = tmp_path / "cases.jsonl"
    rows = [
        {"id": "paris", "input": "Something else", "output": "Paris is in France."},
        {"id": "x", "input": "where is  PARIS?", "output": "Paris, France."},
        {"id": "y", "input": "unrelated", "output": "An answer."},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(src), "--evals", str(evals), "--json"])
    assert res.exit_code == 0, res.output
    out = [json.loads(x) for x in (tmp_path / "cases.results.jsonl").read_text().splitlines()]
    assert [(r["id"], r["eval"]) for r in out] == [
        ("paris", "paris"),
        ("x", "paris"),
        ("x", "any"),
        ("y", "any"),
    ]
    assert out[0]["score"] == 1.0 and out[3]["score"] == 1.0


@pytest.mark.process
def test_stored_rows_match_the_results_file(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    from simeval.service import Service

    db = new_sqlite("evals.db")
    texts = synthetic_texts(300, words=20, seed=13)
    src = tmp_path / "cases.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": i, "output": texts[i], "reference": texts[(i * 7) % 300]}) + "\n"
            for i in range(300)
        ),
        encoding="utf-8",
    )
    res = CliRunner().invoke(cli, ["run", str(src), "--store", "--db", db, "--json"])
    assert res.exit_code in (0, 1), res.output
    run_id = json.loads(res.output)["run_id"]
    file_rows = [json.loads(x) for x in (tmp_path / "cases.results.jsonl").read_text().splitlines()]
    with Service(db) as svc:
        stored = svc.list_results(run_id=run_id, limit=1000)
        assert svc.get_run(run_id).results == 300
    stored.sort(key=lambda r: (r.explanation or {})["case"]["ordinal"])
    scorer = simeval.get_scorer()
    for got, want in zip(stored, file_rows, strict=True):
        assert got.score == want["score"] and got.automated_passed == want["pass"]
        assert got.matched_reference == want["matched_reference"]
        expl = scorer.explain(want["output"], [want["reference"]], top=10).to_dict()
        assert {k: v for k, v in (got.explanation or {}).items() if k != "case"} == expl
