"""Compare: the statistics against a direct implementation, and `simeval compare` as a CI gate
on hand-built results files."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import binomtest

from simeval.cli import cli
from simeval.scoring.compare import Case, compare_eval, histogram, mcnemar_p
from simeval.service import Service


def direct_percentile(values: list[float], q: float) -> float:
    """numpy's default ("linear") percentile, by hand."""
    xs = sorted(values)
    pos = q / 100 * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def direct_paired_ci(
    a: list[float], b: list[float], seed: int, resamples: int
) -> tuple[float, float]:
    """Bootstrap of the mean paired difference, one draw at a time."""
    rng = np.random.default_rng(seed)
    n = len(a)
    stats = []
    for _ in range(resamples):
        total = 0.0
        for _ in range(n):
            i = int(rng.integers(0, n))
            total += b[i] - a[i]
        stats.append(total / n)
    return direct_percentile(stats, 2.5), direct_percentile(stats, 97.5)


def direct_unpaired_ci(
    a: list[float], b: list[float], seed: int, resamples: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws_a = [[a[int(rng.integers(0, len(a)))] for _ in a] for _ in range(resamples)]
    draws_b = [[b[int(rng.integers(0, len(b)))] for _ in b] for _ in range(resamples)]
    stats = [sum(y) / len(y) - sum(x) / len(x) for x, y in zip(draws_a, draws_b, strict=True)]
    return direct_percentile(stats, 2.5), direct_percentile(stats, 97.5)


def cases(scores: list[float], threshold: float = 0.5, prefix: str = "c") -> list[Case]:
    return [Case(f"{prefix}{i}", f"{prefix}{i}", s, s >= threshold) for i, s in enumerate(scores)]


@pytest.mark.parametrize("seed", [0, 7, 12345])
def test_paired_interval_matches_a_direct_bootstrap(seed: int) -> None:
    rng = np.random.default_rng(99)
    a = rng.uniform(0.3, 1.0, 40).round(3).tolist()
    b = [max(0.0, x - d) for x, d in zip(a, rng.uniform(-0.1, 0.2, 40).tolist(), strict=True)]
    out = compare_eval(cases(a), cases(b), seed=seed, resamples=400)
    assert out["paired"] and out["pairs"] == 40
    lo, hi = direct_paired_ci(a, b, seed, 400)
    assert out["score_ci"] == pytest.approx([lo, hi], abs=1e-12)
    pa = [float(x >= 0.5) for x in a]
    pb = [float(x >= 0.5) for x in b]
    assert out["pass_rate_ci"] == pytest.approx(list(direct_paired_ci(pa, pb, seed, 400)))
    assert out["score_diff"] == pytest.approx(sum(b) / 40 - sum(a) / 40)


def test_unpaired_interval_matches_a_direct_bootstrap() -> None:
    a = [0.9, 0.8, 0.85, 0.7, 0.95, 0.6, 0.88]
    b = [0.5, 0.7, 0.4, 0.65, 0.3]
    out = compare_eval(cases(a, prefix="a"), cases(b, prefix="b"), seed=3, resamples=300)
    assert not out["paired"] and out["mcnemar_p"] is None
    assert out["score_ci"] == pytest.approx(list(direct_unpaired_ci(a, b, 3, 300)), abs=1e-12)
    assert out["verdict"] == "B worse"


def test_mcnemar_matches_the_exact_binomial_test() -> None:
    for f, g in [(0, 0), (1, 0), (5, 1), (8, 0), (10, 10), (30, 12), (3, 17)]:
        expected = 1.0 if f + g == 0 else binomtest(f, f + g, 0.5).pvalue
        assert mcnemar_p(f, g) == pytest.approx(expected, rel=1e-12)


def test_repeated_inputs_pair_in_order_and_the_histogram_keeps_1() -> None:
    a = [Case("same", "same", s, True) for s in (0.9, 0.8)]
    b = [Case("same", "same", s, True) for s in (0.7, 0.6)]
    out = compare_eval(a, b, resamples=100)
    assert out["pairs"] == 2 and out["score_diff"] == pytest.approx(-0.2)
    assert histogram([Case(None, "", 1.0, True), Case(None, "", 0.0, False)], 20)[-1] == 1


def write_results(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def side(path: Path, scores: dict[str, float]) -> str:
    rows = [
        {
            "id": cid,
            "input": f"question {cid}",
            "eval": "capital",
            "score": s,
            "pass": s >= 0.7,
            "missing_terms": [] if s >= 0.7 else ["paris", "seine"],
        }
        for cid, s in scores.items()
    ]
    return write_results(path, rows)


def test_cli_gate_fails_when_b_is_worse_and_lists_the_cases(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    base = {f"case-{i:02d}": 0.8 + 0.005 * (i % 7) for i in range(40)}
    worse = dict(base)
    regressed = ["case-03", "case-11", "case-17", "case-22", "case-30", "case-38"]
    for cid in regressed:
        worse[cid] = 0.3
    a, b = side(tmp_path / "a.jsonl", base), side(tmp_path / "b.jsonl", worse)
    db = new_sqlite("s.db")
    res = CliRunner().invoke(cli, ["compare", a, b, "--db", db, "--json"])
    assert res.exit_code == 1, res.output
    report = json.loads(res.output)
    (e,) = report["evals"]
    assert report["verdict"] == "B worse" and e["flips_to_fail"] == 6 and e["flips_to_pass"] == 0
    assert e["regressed_count"] == 6
    assert sorted(c["case"] for c in e["regressed"]) == regressed
    assert e["regressed"][0]["missing_terms"] == ["paris", "seine"]
    text = CliRunner().invoke(cli, ["compare", a, b, "--db", db])
    assert text.exit_code == 1
    assert "capital: B worse" in text.output and "case-22" in text.output
    assert "missing: paris, seine" in text.output


def test_cli_gate_passes_with_no_clear_difference(tmp_path: Path) -> None:
    base = {f"case-{i:02d}": 0.75 + 0.01 * (i % 10) for i in range(30)}
    # the same cases, a little up and a little down: no clear difference
    shuffled = {k: v + (0.01 if i % 2 else -0.01) for i, (k, v) in enumerate(base.items())}
    a, b = side(tmp_path / "a.jsonl", base), side(tmp_path / "b.jsonl", shuffled)
    res = CliRunner().invoke(cli, ["compare", a, b, "--db", str(tmp_path / "s.db")])
    assert res.exit_code == 0, res.output
    assert "capital: no clear difference" in res.output
    assert res.output.rstrip().endswith("verdict: no clear difference")


def test_cli_bad_sides_are_one_line_errors(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "s.db")]
    for args, words in (
        (["run:x", "run:1"], "run:ID"),
        (["run:4", "run:1"], "no run with id 4"),
        (["nothing.jsonl", "run:1"], "no such results file"),
        (["captures:engine", "captures"], "KEY=VALUE"),
    ):
        res = CliRunner().invoke(cli, ["compare", *args, *db])
        assert res.exit_code == 2, res.output
        assert words in res.output and "Traceback" not in res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "output": "o"}\n', encoding="utf-8")
    res = CliRunner().invoke(cli, ["compare", str(bad), str(bad), *db])
    assert res.exit_code == 2 and "not a results file" in res.output


def test_compare_stored_runs(new_sqlite: Callable[..., str]) -> None:
    db = new_sqlite("s.db")
    with Service(db) as svc:
        ids = []
        for name, scores in (("a", [0.9] * 10), ("b", [0.9] * 7 + [0.2] * 3)):
            run_id = svc.create_run(name, "data.jsonl")
            rows = [
                {"eval_name": "capital", "input": f"q{i}", "output": "o", "reference": "r",
                 "score": s, "threshold": 0.5, "explanation": {"case": {"id": f"id{i}"}}}
                for i, s in enumerate(scores)
            ]  # fmt: skip
            svc.add_run_results(run_id, rows)
            ids.append(run_id)
        report = svc.compare(f"run:{ids[0]}", "run:latest", resamples=200)
    (e,) = report["evals"]
    assert report["b"].startswith(f"run:{ids[1]} ") and e["pairs"] == 10
    assert [c["case"] for c in e["regressed"]] == ["id7", "id8", "id9"]


def test_equal_pass_rates_are_no_regression(tmp_path: Path) -> None:
    """Every case passes on both sides, B a little lower: the scores moved, the pass rate did
    not: said so, and the gate holds (it exited 1)."""
    base = {f"case-{i:02d}": 0.95 for i in range(20)}
    lower = {k: 0.9 for k in base}
    a, b = side(tmp_path / "a.jsonl", base), side(tmp_path / "b.jsonl", lower)
    db = ["--db", str(tmp_path / "s.db")]
    res = CliRunner().invoke(cli, ["compare", a, b, *db, "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["verdict"] == "lower scores, same pass rate" and report["worse"] is False
    assert report["evals"][0]["score_ci"][1] < 0  # the scores did drop
    # as many pass→fail as fail→pass flips: equal pass rates too
    flips = [Case(f"c{i}", "", 0.9, i != 0) for i in range(10)]
    other = [Case(f"c{i}", "", 0.5 if i == 1 else 0.85, i != 1) for i in range(10)]
    out = compare_eval(flips, other, resamples=200)
    assert out["pass_rate_diff"] == 0 and out["verdict"] == "lower scores, same pass rate"
    # a pass rate that fell is still a regression
    fell = {k: (0.3 if k in ("case-01", "case-02", "case-03") else v) for k, v in lower.items()}
    worse = CliRunner().invoke(cli, ["compare", a, side(tmp_path / "c.jsonl", fell), *db])
    assert worse.exit_code == 1 and "verdict: B worse" in worse.output


def test_repeated_keys_pair_by_occurrence_and_the_paired_subset_is_named(
    tmp_path: Path,
) -> None:
    rows_a = [
        {"input": "hi", "eval": "e", "score": 0.9, "pass": True},
        {"input": "hi", "eval": "e", "score": 0.8, "pass": True},
        *({"input": f"q{i}", "eval": "e", "score": 0.8, "pass": True} for i in range(4)),
    ]
    # B lacks q3: the differences are those of the five paired cases
    rows_b = [{**r, "score": r["score"] - 0.1} for r in rows_a if r["input"] != "q3"] + [
        {"input": "new", "eval": "e", "score": 0.1, "pass": False}
    ]
    a = write_results(tmp_path / "a.jsonl", rows_a)
    b = write_results(tmp_path / "b.jsonl", rows_b)
    db = ["--db", str(tmp_path / "s.db")]
    res = CliRunner().invoke(cli, ["compare", a, b, *db, "--json"])
    report = json.loads(res.output)
    (e,) = report["evals"]
    assert e["pairs"] == 5 and e["repeated_pairs"] == 1 and e["paired"] is True
    assert "plus occurrence" in report["pairing"]
    text = CliRunner().invoke(cli, ["compare", a, b, *db])
    out = " ".join(text.output.split())
    assert "cases paired by case id (else input) plus occurrence" in out
    assert "B − A, paired subset │ 5 paired" in out
    assert "1 pairs share a repeated key: paired in order (key plus occurrence)" in out
