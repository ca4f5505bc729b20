"""Benchmark of the capture path at 1,000 active evals, against baselines measured in the same run.

(a) One ~100-word output captured (scored by 1,000 active evals, its 1,000 results stored in
    the same transaction) against the baseline of calling ``simeval.score(output, reference)``
    1,000 times for the same output, warm (every reference seen once before). Measured on an
    empty database, then again after 1,000 more captures (1M results): the capture's cost must
    not grow with the database. Also reported: the scoring part alone through the eval-set
    engine, and the same scoring done one eval at a time with ``Scorer.best_vector`` (what the
    capture did before the engine), and the first capture after opening the database (cold:
    the 1,000 evals are prepared then).
(b) Reading a grown database of 1M results: one eval's trend, the count of all results, and
    the eval list with its per-eval stats, each cold (first call on a freshly opened database)
    and warm (median of rounds).

    .venv/bin/python benchmarks/bench_capture.py            # a table
    .venv/bin/python benchmarks/bench_capture.py --json     # the figures as JSON

Absolute times on a shared machine are noise; the ratios of measurements made back to back are
the figures. Each timing is the median of rounds that alternate the measured sides; the load
average is printed beside them.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import simeval
from simeval.scoring.bench import synthetic_texts
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.scorer import get_scorer
from simeval.service import Service


def _time(fn: Callable[[], Any]) -> float:
    gc.collect()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _interleaved(sides: dict[str, Callable[[int], Any]], rounds: int) -> dict[str, float]:
    """Median seconds of each side over ``rounds``, the order of the sides alternating."""
    times: dict[str, list[float]] = {k: [] for k in sides}
    for k in range(rounds):
        order = list(sides) if k % 2 == 0 else list(reversed(sides))
        for name in order:
            fn = sides[name]
            times[name].append(_time(lambda: fn(k)))  # noqa: B023 (called at once)
    return {k: statistics.median(v) for k, v in times.items()}


def bench(tmp: Path, evals: int, rounds: int, words: int, grow: int) -> dict[str, Any]:
    references = synthetic_texts(evals, words=words, seed=11)
    outputs = synthetic_texts(64, words=words, seed=12)
    db = tmp / "capture.db"
    svc = Service(db)
    doc = {
        "evals": [
            {
                "name": f"eval-{i:04d}",
                "references": [ref],
                "threshold": 0.8,
                "status": "active",
                "test": {"input": "", "output": ref},
            }
            for i, ref in enumerate(references)
        ]
    }
    report = svc.import_evals(doc)
    assert len(report["activated"]) == evals, report["not_activated"]
    cold_capture = _time(lambda: svc.capture("question", outputs[0]))
    scorer = get_scorer()
    prepared = [scorer.prepare([r]) for r in references]
    engine = EvalSet([EvalSpec(i, f"e{i}", 1, (r,), 0.8) for i, r in enumerate(references)])
    for r in references:  # the baseline's warm-up: every reference seen once
        simeval.score(outputs[0], r)

    def out(k: int) -> str:
        return outputs[1 + k % (len(outputs) - 1)]

    def score_calls(k: int) -> None:
        o = out(k)
        for r in references:
            simeval.score(o, r)

    def one_at_a_time(k: int) -> None:
        vec = scorer.vector(out(k))
        for p in prepared:
            scorer.best_vector(vec, p)

    sides: dict[str, Callable[[int], Any]] = {
        "capture": lambda k: svc.capture("question", out(k)),
        "score_calls": score_calls,
        "engine_scoring": lambda k: list(engine.score_arrays(out(k))),
        "per_eval_scoring": one_at_a_time,
    }
    empty = _interleaved(sides, rounds)
    empty_load = _load()
    t = time.perf_counter()
    for k in range(grow):
        svc.capture("question", outputs[k % len(outputs)])
    grow_s = time.perf_counter() - t
    grown = _interleaved(sides, rounds)
    grown_load = _load()
    stored = svc.count_results()
    svc.close()

    # (b) reads on the grown database: cold = the first call after opening it
    reads: dict[str, Callable[[Service], Any]] = {
        "trend_one_eval": lambda s: s.trend("eval-0007", bucket="hour"),
        "count_all_results": lambda s: s.count_results(),
        "list_evals_with_stats": lambda s: s.list_evals(),
    }
    read_cold: dict[str, float] = {}
    read_warm: dict[str, float] = {}
    for name, fn in reads.items():
        fresh = Service(db)
        read_cold[name] = _time(lambda: fn(fresh))  # noqa: B023 (called at once)
        read_warm[name] = statistics.median(
            _time(lambda: fn(fresh))  # noqa: B023 (called at once)
            for _ in range(max(3, rounds // 3))
        )
        fresh.close()
    size_mb = db.stat().st_size / 1e6
    return {
        "active_evals": evals,
        "output_words": words,
        "rounds": rounds,
        "results_stored": stored,
        "database_mb": size_mb,
        "grow_captures": grow,
        "grow_seconds": grow_s,
        "cold_first_capture_ms": cold_capture * 1e3,
        "empty": {k: v * 1e3 for k, v in empty.items()},
        "grown": {k: v * 1e3 for k, v in grown.items()},
        "ratio_score_calls_vs_capture_empty": empty["score_calls"] / empty["capture"],
        "ratio_score_calls_vs_capture_grown": grown["score_calls"] / grown["capture"],
        "ratio_grown_vs_empty_capture": grown["capture"] / empty["capture"],
        "ratio_per_eval_vs_engine_scoring": empty["per_eval_scoring"] / empty["engine_scoring"],
        "load_empty": empty_load,
        "load_grown": grown_load,
        "reads_cold_ms": {k: v * 1e3 for k, v in read_cold.items()},
        "reads_warm_ms": {k: v * 1e3 for k, v in read_warm.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evals", type=int, default=1000, help="active evals (default 1000)")
    parser.add_argument("--rounds", type=int, default=30, help="timed rounds (default 30)")
    parser.add_argument("--words", type=int, default=100, help="words per text (default 100)")
    parser.add_argument(
        "--grow", type=int, default=1000, help="captures added between the two phases (1000)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="simeval-bench-") as d:
        r = bench(Path(d), args.evals, args.rounds, args.words, args.grow)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    n = r["active_evals"]
    e, g = r["empty"], r["grown"]
    lines = [
        f"(a) one {r['output_words']}-word output, {n} active evals, median of {r['rounds']} "
        "interleaved rounds",
        "                                            empty db     grown db",
        f"    capture (score + store {n} results)  {e['capture']:9.3f} ms {g['capture']:9.3f} ms",
        f"    baseline: simeval.score x {n}        {e['score_calls']:9.2f} ms "
        f"{g['score_calls']:9.2f} ms",
        f"    ratio baseline / capture             {r['ratio_score_calls_vs_capture_empty']:9.1f}x"
        f"    {r['ratio_score_calls_vs_capture_grown']:9.1f}x",
        f"    load average                          {r['load_empty']}   {r['load_grown']}",
        f"    grown db: +{r['grow_captures']} captures in {r['grow_seconds']:.1f} s, "
        f"{r['results_stored']:,} results, {r['database_mb']:.0f} MB; capture grown/empty "
        f"{r['ratio_grown_vs_empty_capture']:.2f}x",
        f"    scoring alone: eval-set engine {e['engine_scoring']:.3f} ms, one eval at a time "
        f"{e['per_eval_scoring']:.2f} ms ({r['ratio_per_eval_vs_engine_scoring']:.1f}x)",
        f"    cold: first capture after opening (prepares {n} evals) "
        f"{r['cold_first_capture_ms']:.0f} ms",
        f"(b) reads of the grown database ({r['results_stored']:,} results)   cold      warm",
    ]
    for name in r["reads_cold_ms"]:
        lines.append(
            f"    {name:<40} {r['reads_cold_ms'][name]:7.1f} ms {r['reads_warm_ms'][name]:7.1f} ms"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
