"""The run's fast paths write what the slow ones would, byte for byte: missing terms and
explanations with a question (input) and negation, JSONL lines, stored explanations, and rows
stored through ``Service.add_run_rows``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import simeval
from simeval import runs
from simeval.cli import cli
from simeval.runs.encode import origin_json
from simeval.scoring.bench import synthetic_texts
from simeval.scoring.explain import (
    Reference,
    explain,
    explainer,
    judge,
    missing_terms,
    reference_explanation,
)

OPTION_SETS: list[dict[str, Any]] = [
    {},
    {"stemming": False},
    {"tokenizer": "words", "input_weight": 1.0, "negation": 1.0},
    {"language": "german"},
]
TEXTS = [
    *synthetic_texts(30, words=25, seed=21),
    "Tokyo is the capital of Japan.",
    "Japan's capital isn't Kyoto, it is Tokyo.",
    "The capital is not Tokyo.",
    "Café naïve 1,650 3.5 don't 中文 €",
    "  ",
]
INPUTS = [None, "", "What is the capital of Japan?", "capital Tokyo", TEXTS[3][:40], "中文 €?"]


@pytest.mark.parametrize("options", OPTION_SETS, ids=repr)
def test_missing_terms_and_explanations_with_an_input(options: dict[str, Any]) -> None:
    scorer = simeval.get_scorer(**options)
    refs_list = [[TEXTS[i]] for i in range(0, 12, 3)] + [[TEXTS[30], TEXTS[31]], [TEXTS[32]]]
    for output in TEXTS[10:]:
        for refs in refs_list:
            for question in INPUTS:
                _, at = scorer.score_detail(output, refs, question)
                want = reference_explanation(scorer, output, refs, 10, question)
                got = scorer.explain(output, refs, top=10, input=question)
                assert got.to_dict() == want.to_dict()
                missing = missing_terms(scorer, output, refs[at], 6, question)
                assert missing == [
                    m.term
                    for m in reference_explanation(scorer, output, refs[at], 6, question).missing
                ]


def test_stored_explanation_text_is_the_json_of_explain() -> None:
    scorer = simeval.get_scorer()
    terms = explainer(scorer)
    assert terms is not None
    seen: set[str] = set()
    for output in TEXTS[5:]:
        for ref_text in TEXTS[:8] + TEXTS[30:33]:
            for question in INPUTS[:4]:
                score, at = scorer.score_detail(output, [ref_text], question)
                ref = Reference(ref_text, scorer.vector(ref_text))
                origin = origin_json("case é", "f.jsonl line 3", 2)
                if output.strip():  # a row already scored: the fast path from its vectors
                    vec, asked = scorer.vector(output), scorer.input_terms(question)
                    exp = terms.explain_scored(output, vec, ref, score, at, asked)
                    judge(scorer, exp, output, question)  # what explain adds: coverage, veto
                else:
                    exp = explain(scorer, output, [ref_text], input=question)
                text = json.dumps(exp.to_dict())[:-1] + f', "case": {origin}}}'
                want = reference_explanation(scorer, output, [ref_text], 10, question).to_dict()
                want["case"] = {"id": "case é", "row": "f.jsonl line 3", "ordinal": 2}
                assert text == json.dumps(want)
                seen.update(k for k in ("demoted", "reason") if want[k])
                seen.update(["negation"] if want["negation"] != 1.0 else [])
    assert seen == {"demoted", "reason", "negation"}  # the question and negation paths ran


def _old_line(row: dict[str, Any], result: dict[str, Any]) -> str:
    return json.dumps({**row, **result}, ensure_ascii=False, default=str)


@pytest.mark.parametrize("non_ascii", [False, True])
def test_jsonl_lines_are_the_row_with_its_result(tmp_path: Path, non_ascii: bool) -> None:
    texts = synthetic_texts(20, words=12, seed=22)
    rows: list[dict[str, Any]] = []
    for i in range(20):
        row: dict[str, Any] = {"id": i, "output": texts[i], "reference": texts[(i * 3) % 20]}
        if i % 4 == 1:
            row["input"] = "Quelle est la capitale ? \u00e9t\u00e9" if non_ascii else "why?"
        if i % 5 == 2:
            row["score"] = "an input column named like a result field"
        if i % 7 == 3:
            row["meta"] = {"n": [1, 2.5, None, True], "s": 'tab\there \\ "q"'}
        rows.append(row)
    src = tmp_path / "cases.jsonl"
    lines = [json.dumps(r, ensure_ascii=not non_ascii) for r in rows]
    lines[6] = lines[6].replace("}", ', "x": "\\u00e9"}', 1) if not non_ascii else lines[6]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(src), "--json"])
    assert res.exit_code in (0, 1), res.output
    got = (tmp_path / "cases.results.jsonl").read_text(encoding="utf-8").splitlines()
    scorer = simeval.get_scorer()
    for line, text in zip(lines, got, strict=True):
        row = json.loads(line)
        score, at = scorer.score_detail(row["output"], [row["reference"]], row.get("input"))
        passed = score >= 0.8
        missing = (
            []
            if passed
            else missing_terms(scorer, row["output"], row["reference"], 5, row.get("input"))
        )
        result = {
            "score": score,
            "pass": passed,
            "threshold": 0.8,
            "matched_index": at,
            "matched_reference": row["reference"],
            "missing_terms": missing,
            "fingerprint": scorer.fingerprint,
        }
        assert text == _old_line(row, result)


def test_add_run_rows_stores_what_add_run_results_does(tmp_path: Path) -> None:
    from simeval.service import Service

    scorer = simeval.get_scorer()
    rows = []
    for i, (output, ref) in enumerate(zip(TEXTS[:10], TEXTS[10:20], strict=True)):
        score, at = scorer.score_detail(output, [ref])
        explained = scorer.explain(output, [ref]).to_dict()
        explained["case"] = {"id": str(i), "row": f"x line {i + 1}", "ordinal": i}
        name = "stored" if i % 2 else None
        rows.append(
            (name, 3 if name else None, score, score >= 0.8, 0.8, scorer.fingerprint, at,
             "q?" if i % 3 else None, output, ref, json.dumps(explained))
        )  # fmt: skip
    with Service(str(tmp_path / "a.db")) as svc:
        svc.create_eval("stored", "A reference.")
        fast = svc.create_run("fast", "x")
        assert svc.add_run_rows(fast, runs.STORE_COLUMNS, [rows[:4], rows[4:]]) == 10
        slow = svc.create_run("slow", "x")
        svc.add_run_results(
            slow,
            [
                {
                    **dict(zip(runs.STORE_COLUMNS[:-1], r[:-1], strict=True)),
                    "matched_reference": r[9],
                    "explanation": json.loads(r[10]),
                }
                for r in rows
            ],
        )
        a = svc.list_results(run_id=fast, limit=100)
        b = svc.list_results(run_id=slow, limit=100)
    assert len(a) == len(b) == 10
    keep = (
        "eval_id", "eval_name", "eval_version", "score", "automated_passed", "threshold",
        "fingerprint", "matched_index", "matched_reference", "input", "output", "explanation",
    )  # fmt: skip

    def order(r: Any) -> int:
        return int((r.explanation or {})["case"]["ordinal"])

    for x, y in zip(sorted(a, key=order), sorted(b, key=order), strict=True):
        assert {k: getattr(x, k) for k in keep} == {k: getattr(y, k) for k in keep}
    assert any(r.eval_id is not None for r in a)


def test_absent_is_its_python_reference() -> None:
    from array import array

    from simeval.scoring import _vector

    scorer = simeval.get_scorer()
    vecs = [scorer.vector(t) for t in TEXTS] + [b""]
    for a in vecs:
        for b in vecs[::3]:
            ranked = array("Q", reversed(array("Q", b)[0::3])).tobytes()
            for top in (0, 1, 5, 100):
                assert _vector.absent(a, ranked, top) == _vector.absent_py(a, ranked, top)


@pytest.mark.parametrize("options", OPTION_SETS, ids=repr)
def test_missing_of_is_missing_in_and_missing_asked(options: dict[str, Any]) -> None:
    scorer = simeval.get_scorer(**options)
    terms = explainer(scorer)
    assert terms is not None
    for output in TEXTS:
        vec = scorer.vector(output)
        if not vec:
            continue
        for ref_text in TEXTS[::4]:
            ref = Reference(ref_text, scorer.vector(ref_text))
            if not ref.vec:
                continue
            for question in INPUTS:
                asked = scorer.input_terms(question)
                for top in (0, 3, 5):
                    got = terms.missing_of(ref, vec, asked, top)
                    exp = reference_explanation(scorer, output, ref_text, top, question)
                    want = [m.term for m in exp.missing]
                    assert got == want
