"""Benchmark of captures and result storage, each against a baseline measured in the same run.

(a) Capture with many active evals: one ~100-word output captured (stored and scored by 1,000
    active evals, the 1,000 results stored in the same transaction) against the baseline of
    calling ``simeval.score(output, reference)`` 1,000 times for the same output (warm: the
    scorer's caches filled by a first pass). Also reported: the scoring part of the capture
    alone (the output vectorised once, compared with the 1,000 prepared reference vectors), and
    "score + store naively": the 1,000 ``score`` calls plus the results stored one ORM object at
    a time, which is the same work as a capture done without the service.
(b) Bulk-storing results into SQLite: results/s of the capture path (``store.bulk_insert``)
    and of ``Service.add_run_results`` (data-set run rows), against two baselines in the same
    run: row-by-row ORM inserts (``session.add(Result(...))``) and SQLAlchemy Core
    ``conn.execute(insert(results), list_of_dicts)``. Every path stores the same rows into a
    fresh database, 10,000 per transaction.

    .venv/bin/python benchmarks/bench_capture.py            # a table
    .venv/bin/python benchmarks/bench_capture.py --json     # the figures as JSON

Absolute times on a shared machine are noise; the ratios of measurements made back to back are
the figures. Each timing is the median of several rounds, alternating the measured sides.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

import simeval
from simeval import store as store_mod
from simeval.bench import synthetic_texts
from simeval.scorer import get_scorer
from simeval.service import Service
from simeval.store import Result


def _time(fn: Callable[[], Any]) -> float:
    gc.collect()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_capture(tmp: Path, evals: int, rounds: int, words: int) -> dict[str, Any]:
    """(a): per-capture time with ``evals`` active evals vs ``evals`` score calls."""
    references = synthetic_texts(evals, words=words, seed=11)
    outputs = synthetic_texts(rounds + 1, words=words, seed=12)
    svc = Service(tmp / "capture.db")
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
    first = svc.capture("question", outputs[0])  # prepares the reference vectors, once
    assert len(first.results) == evals
    scorer = get_scorer()
    prepared = [scorer.prepare([r]) for r in references]
    for r in references:  # the baseline's warm-up: every reference seen once
        simeval.score(outputs[0], r)

    def score_loop(out: str) -> None:
        for r in references:
            simeval.score(out, r)

    def scoring_only(out: str) -> None:
        vec = scorer.vector(out)
        best = scorer.best_vector
        for p in prepared:
            best(vec, p)

    def naive(out: str) -> None:
        now = datetime.now(UTC).replace(tzinfo=None)
        with Session(svc.store.writer) as s, s.begin():
            cap = store_mod.Capture(input="question", output=out, captured_at=now, evaluated=True)
            s.add(cap)
            s.flush()
            for i, r in enumerate(references):
                sc = simeval.score(out, r)
                s.add(
                    Result(
                        capture_id=cap.id,
                        eval_id=i + 1,
                        eval_version=1,
                        score=sc,
                        passed=sc >= 0.8,
                        threshold=0.8,
                        fingerprint=scorer.fingerprint,
                        matched_index=0,
                        created_at=now,
                    )
                )

    cap_t: list[float] = []
    score_t: list[float] = []
    only_t: list[float] = []
    naive_t: list[float] = []
    for k in range(rounds):
        out = outputs[k + 1]
        sides = [
            (cap_t, lambda o=out: svc.capture("question", o)),
            (score_t, lambda o=out: score_loop(o)),
            (only_t, lambda o=out: scoring_only(o)),
            (naive_t, lambda o=out: naive(o)),
        ]
        if k % 2:
            sides.reverse()
        for bucket, fn in sides:
            bucket.append(_time(fn))
    stored = svc.count_results()
    svc.close()
    capture_s = statistics.median(cap_t)
    score_s = statistics.median(score_t)
    only_s = statistics.median(only_t)
    naive_s = statistics.median(naive_t)
    return {
        "active_evals": evals,
        "output_words": words,
        "rounds": rounds,
        "results_stored": stored,
        "capture_ms": capture_s * 1e3,
        "score_calls_ms": score_s * 1e3,
        "score_call_us": score_s / evals * 1e6,
        "ratio_capture_vs_score_calls": score_s / capture_s,
        "capture_scoring_only_ms": only_s * 1e3,
        "ratio_scoring_only_vs_score_calls": score_s / only_s,
        "naive_score_and_store_ms": naive_s * 1e3,
        "ratio_capture_vs_naive_score_and_store": naive_s / capture_s,
    }


def _result_rows(n: int, evals: int = 1000) -> list[tuple[Any, ...]]:
    return [
        (i % evals + 1, 1, (i % 997) / 997, (i % 997) >= 800, 0.8, 0, "0123456789ab")
        for i in range(n)
    ]


_COLUMNS = (
    "eval_id",
    "eval_version",
    "score",
    "passed",
    "threshold",
    "matched_index",
    "fingerprint",
)


def _fresh(tmp: Path, name: str, evals: int = 1000) -> tuple[Service, int]:
    """A new database with ``evals`` evals and one capture (results need both to exist)."""
    path = tmp / f"{name}.db"
    for leftover in tmp.glob(f"{name}.db*"):
        leftover.unlink()
    svc = Service(path)
    svc.import_evals({"evals": [{"name": f"e{i}", "reference": "x"} for i in range(evals)]})
    cap = svc.capture("q", "o")
    return svc, cap.id


def bench_bulk(tmp: Path, rows: int, repeat: int, chunk: int = 10_000) -> dict[str, Any]:
    """(b): results/s of the bulk paths against row-by-row ORM and Core executemany.

    Every path stores the same ``rows`` results into a fresh database, ``chunk`` rows per
    transaction; the median of ``repeat`` rounds, the order of the paths alternating.
    """
    now = datetime.now(UTC).replace(tzinfo=None)
    data = _result_rows(rows)
    chunks = [data[i : i + chunk] for i in range(0, rows, chunk)]
    run_rows = [
        {
            "eval_name": "e1",
            "input": "q",
            "output": "an output",
            "reference": "x",
            "score": d[2],
            "passed": d[3],
            "threshold": 0.8,
            "fingerprint": d[6],
            "explanation": None,
        }
        for d in data
    ]

    def bulk(svc: Service, cap_id: int) -> None:
        for part in chunks:
            with svc.store.write() as s:
                store_mod.bulk_insert(
                    s.connection(),
                    store_mod.results_table,
                    _COLUMNS,
                    part,
                    {"capture_id": cap_id, "created_at": now},
                )

    def add_run_results(svc: Service, cap_id: int) -> None:
        svc.add_run_results(svc.create_run("bench", "bench"), run_rows)

    def orm(svc: Service, cap_id: int) -> None:
        for part in chunks:
            with Session(svc.store.writer) as s, s.begin():
                for d in part:
                    s.add(
                        Result(
                            **dict(zip(_COLUMNS, d, strict=True)), capture_id=cap_id, created_at=now
                        )
                    )

    def core(svc: Service, cap_id: int) -> None:
        for part in chunks:
            dicts = [
                dict(zip(_COLUMNS, d, strict=True), capture_id=cap_id, created_at=now) for d in part
            ]
            with svc.store.writer.begin() as conn:
                conn.execute(insert(store_mod.results_table), dicts)

    paths: dict[str, Callable[[Service, int], None]] = {
        "bulk_insert": bulk,
        "add_run_results": add_run_results,
        "orm_row_by_row": orm,
        "core_executemany": core,
    }
    times: dict[str, list[float]] = {k: [] for k in paths}
    for k in range(repeat):
        order = list(paths) if k % 2 == 0 else list(reversed(paths))
        for name in order:
            svc, cap_id = _fresh(tmp, name)
            fn = paths[name]
            times[name].append(_time(lambda: fn(svc, cap_id)))  # noqa: B023 (called at once)
            svc.close()
    out: dict[str, Any] = {"rows": rows, "rows_per_transaction": chunk, "repeat": repeat}
    for name, ts in times.items():
        out[f"{name}_per_s"] = rows / statistics.median(ts)
    out["ratio_bulk_vs_orm"] = out["bulk_insert_per_s"] / out["orm_row_by_row_per_s"]
    out["ratio_bulk_vs_core"] = out["bulk_insert_per_s"] / out["core_executemany_per_s"]
    out["ratio_add_run_results_vs_orm"] = out["add_run_results_per_s"] / out["orm_row_by_row_per_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evals", type=int, default=1000, help="active evals (default 1000)")
    parser.add_argument("--rounds", type=int, default=15, help="timed captures (default 15)")
    parser.add_argument("--words", type=int, default=100, help="words per text (default 100)")
    parser.add_argument("--rows", type=int, default=50_000, help="results stored (default 50k)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of (b) (default 3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="simeval-bench-") as d:
        tmp = Path(d)
        cap = bench_capture(tmp, args.evals, args.rounds, args.words)
        bulk = bench_bulk(tmp, args.rows, args.repeat)
    if args.json:
        print(json.dumps({"capture": cap, "bulk": bulk}, indent=2))
        return
    n = cap["active_evals"]
    lines = [
        f"(a) one {cap['output_words']}-word output, {n} active evals "
        f"(median of {cap['rounds']} rounds)",
        f"    capture (score + store {n} results, one transaction)  {cap['capture_ms']:9.2f} ms",
        f"    baseline: simeval.score called {n} times              "
        f"{cap['score_calls_ms']:9.2f} ms",
        f"    ratio baseline / capture                              "
        f"{cap['ratio_capture_vs_score_calls']:9.2f}x",
        f"    the capture's scoring alone (prepared references)     "
        f"{cap['capture_scoring_only_ms']:9.2f} ms = "
        f"{cap['ratio_scoring_only_vs_score_calls']:.1f}x faster than the score calls",
        f"    score x {n} + each result stored as an ORM object    "
        f"{cap['naive_score_and_store_ms']:9.2f} ms: the capture is "
        f"{cap['ratio_capture_vs_naive_score_and_store']:.1f}x faster",
        f"(b) storing {bulk['rows']:,} results into SQLite, {bulk['rows_per_transaction']:,} per "
        f"transaction, results/s (median of {bulk['repeat']})",
        f"    store.bulk_insert (the capture path, 10k per txn)  "
        f"{bulk['bulk_insert_per_s']:12,.0f}",
        f"    Service.add_run_results (10k per txn)              "
        f"{bulk['add_run_results_per_s']:12,.0f}",
        f"    baseline: ORM objects row by row                   "
        f"{bulk['orm_row_by_row_per_s']:12,.0f}  (bulk_insert {bulk['ratio_bulk_vs_orm']:.1f}x)",
        f"    baseline: SQLAlchemy Core executemany              "
        f"{bulk['core_executemany_per_s']:12,.0f}  (bulk_insert {bulk['ratio_bulk_vs_core']:.1f}x)",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
