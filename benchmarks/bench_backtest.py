"""Backtest benchmark: an eval scored on the last 500 captures of a store where 10 active evals
scored every capture, against the baseline of scoring the same 500 outputs one by one with
``simeval.score`` (no store, no eval-set engine), in the same run.

Texts: the student answers of ``answers-dev/mohler-odd.csv`` (real, varied lengths) when
present, else generated sentences. 2,000 captures are stored first (each scored by the 10
active evals), then a draft eval is backtested on the most recent 500
(``Service.backtest_eval``) several times; the median time is reported with the baseline's
and their ratio.

    .venv/bin/python benchmarks/bench_backtest.py
    .venv/bin/python benchmarks/bench_backtest.py --captures 500 --json
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import simeval
from simeval.service import Service

DATA = Path("/work/shared/data/answers-dev/mohler-odd.csv")
WORDS = "paris france capital city river seine tower museum bridge art history light".split()  # noqa: SIM905


def texts(n: int, seed: int = 7) -> list[str]:
    """``n`` answer texts: the data set's student answers (repeated in order as needed) when
    the file can be read, else generated sentences."""
    found: list[str] = []
    if DATA.is_file():
        with DATA.open(encoding="utf-8", errors="replace", newline="") as fh:
            found = [r["student_answer"] for r in csv.DictReader(fh) if r.get("student_answer")]
    if found:
        return [found[i % len(found)] for i in range(n)]
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60))) for _ in range(n)]


def references(n: int) -> list[str]:
    """``n`` reference answers: the data set's desired answers, else generated ones."""
    found: list[str] = []
    if DATA.is_file():
        with DATA.open(encoding="utf-8", errors="replace", newline="") as fh:
            for r in csv.DictReader(fh):
                if r.get("desired_answer") and r["desired_answer"] not in found:
                    found.append(r["desired_answer"])
    found += texts(n, seed=11)
    return found[:n]


def run(
    captures: int = 2000, window: int = 500, evals: int = 10, repeat: int = 5
) -> dict[str, Any]:
    outputs = texts(captures)
    refs = references(evals + 1)
    with tempfile.TemporaryDirectory() as tmp, Service(Path(tmp) / "bench.db") as svc:
        for i in range(evals):
            svc.create_eval(f"eval-{i}", refs[i], threshold=0.5)
            svc.test_eval(f"eval-{i}", "", refs[i])
            svc.activate_eval(f"eval-{i}")
        rows = [{"input": f"question {n % 50}", "output": o} for n, o in enumerate(outputs)]
        svc.capture_many(rows)
        svc.create_eval("draft", refs[evals], threshold=0.5)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            report = svc.backtest_eval("draft", limit=window)
            times.append(time.perf_counter() - started)
    recent = outputs[-window:]
    base = []
    for _ in range(repeat):
        started = time.perf_counter()
        for o in recent:
            simeval.score(o, refs[evals])
        base.append(time.perf_counter() - started)
    backtest_s, baseline_s = statistics.median(times), statistics.median(base)
    return {
        "captures_stored": captures,
        "active_evals": evals,
        "backtested": report["n"],
        "backtest_seconds_median": backtest_s,
        "baseline_score_one_by_one_seconds_median": baseline_s,
        "ratio_backtest_to_baseline": backtest_s / baseline_s,
        "pass_rate": report["pass_rate"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captures", type=int, default=2000)
    parser.add_argument("--window", type=int, default=500)
    parser.add_argument("--evals", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = run(args.captures, args.window, args.evals)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"backtest of 1 eval on {out['backtested']} recent captures "
        f"({out['captures_stored']} stored, {out['active_evals']} active evals): "
        f"{out['backtest_seconds_median'] * 1000:.0f} ms (median); baseline simeval.score one by "
        f"one: {out['baseline_score_one_by_one_seconds_median'] * 1000:.0f} ms; ratio "
        f"{out['ratio_backtest_to_baseline']:.2f}"
    )


if __name__ == "__main__":
    main()
