"""Benchmark: ``Service.compare("captures:engine=v1", "captures:engine=v2")`` on CASES cases per
side (10 active evals: 10 x CASES results per side), every case read, against a baseline
measured in the same run.

The store (built once, cached as ``benchmarks/.cache/compare-<CASES>-b<BUILDER>.db``): 10
active similarity evals (``import_evals``), then 2 x CASES captures stored with the library's
``capture_many``, case ``i`` once with metadata ``engine=v1`` and once with ``engine=v2``, both
with ``case_id=case-i`` (so the sides pair), the v2 output a different one of the same pool of
outputs (so scores move both ways and some verdicts flip).

Each round runs in a fresh subprocess (its own peak memory, ``ru_maxrss``):

- ``compare``: open the store, ``compare(A, B)`` (2,000 resamples, seed 0), the seconds of the
  call and the process's peak resident memory (and the memory before the call);
- ``baseline``: the floor of reading the same rows: stdlib ``sqlite3`` selects each side's
  captures through the metadata index (``capture_meta``), their ``case_id`` and packed results,
  joins each side's blobs into one numpy buffer and sorts the case keys with numpy; no
  statistics at all.

Rounds alternate the order; the figures are the medians, the ratio compare / baseline, the
load average beside each round. (The compare before this issue stopped at 100,000 results
per side and took 21 s on 10,000 of 500,000 cases per side; it cannot read every case, so it
is not rerun here.)

    .venv/bin/python benchmarks/bench_compare.py                      # 500,000 cases per side
    .venv/bin/python benchmarks/bench_compare.py --cases 50000 --rounds 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CACHE = Path(__file__).resolve().parent / ".cache"
BUILDER = 1  # bump when the store built changes: a new cache file
EVALS = 10
SIDES = ("captures:engine=v1", "captures:engine=v2")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _peak_mb() -> float:
    """This process's peak resident memory (``VmHWM``: of this program image, where
    ``ru_maxrss`` would carry the parent's from before the exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def store_path(cases: int) -> Path:
    return CACHE / f"compare-{cases}-b{BUILDER}.db"


def build(cases: int) -> Path:
    """The cached store of ``cases`` cases per side (built when missing)."""
    from simeval.scoring.bench import synthetic_texts
    from simeval.service import Service

    db = store_path(cases)
    if db.exists():
        return db
    CACHE.mkdir(exist_ok=True)
    part = db.with_suffix(".part")
    part.unlink(missing_ok=True)
    refs = synthetic_texts(EVALS, words=40, seed=11)
    outputs = synthetic_texts(512, words=50, seed=12)
    doc = {
        "evals": [
            {
                "name": f"bench-{i:02d}",
                "references": [ref],
                "threshold": 0.1,
                "status": "active",
                "test": {"input": "q", "output": ref},
            }
            for i, ref in enumerate(refs)
        ]
    }
    t = time.perf_counter()
    with Service(part) as svc:
        report = svc.import_evals(doc)
        if len(report["activated"]) != EVALS:
            raise SystemExit(f"not every eval was activated: {report['not_activated']}")
        step = 20_000
        for start in range(0, cases, step):
            rows = []
            for i in range(start, min(cases, start + step)):
                for engine, out in (("v1", i % 512), ("v2", (i * 7 + 3) % 512)):
                    rows.append(
                        {
                            "input": f"question {i}",
                            "output": outputs[out],
                            "metadata": {"engine": engine, "case_id": f"case-{i}"},
                        }
                    )
            svc.capture_many(rows)
            done = min(cases, start + step)
            print(
                f"  built {done}/{cases} cases per side, {time.perf_counter() - t:.0f} s",
                file=sys.stderr,
            )
    for suffix in ("-wal", "-shm"):
        Path(str(part) + suffix).unlink(missing_ok=True)
    part.rename(db)
    return db


def run_compare(db: str) -> dict[str, Any]:
    """One compare round (in a fresh process)."""
    from simeval.service import Service

    with Service(db) as svc:
        before = _peak_mb()
        t, cpu = time.perf_counter(), time.process_time()
        report = svc.compare(*SIDES)
        took, cpu = time.perf_counter() - t, time.process_time() - cpu
    evals = report.evals
    return {
        "seconds": took,
        "cpu_seconds": cpu,
        "peak_mb": _peak_mb(),
        "before_mb": before,
        "evals": len(evals),
        "cases_a": evals[0].a.n,
        "cases_b": evals[0].b.n,
        "total_a": evals[0].a.total,
        "pairs": evals[0].pairs,
        "sampled": report.sampled,
        "verdict": report.verdict,
    }


def run_baseline(db: str) -> dict[str, Any]:
    """The floor: the same rows read with sqlite3, their blobs into numpy, keys sorted."""
    import numpy as np

    t, cpu = time.perf_counter(), time.process_time()
    conn = sqlite3.connect(db)
    sizes = []
    for side in SIDES:
        value = side.split("=", 1)[1]
        rows = conn.execute(
            "SELECT c.id, json_extract(c.metadata, '$.case_id'), c.scores "
            "FROM capture_meta m JOIN captures c ON c.id = m.capture_id "
            "WHERE m.key = 'engine' AND m.value = ? ORDER BY m.captured_at, m.capture_id",
            (value,),
        ).fetchall()
        raw = np.frombuffer(b"".join(r[2] for r in rows), np.uint8)
        keys = np.array([r[1] for r in rows])
        np.argsort(keys, kind="stable")
        sizes.append((len(rows), raw.shape[0]))
    conn.close()
    return {
        "seconds": time.perf_counter() - t,
        "cpu_seconds": time.process_time() - cpu,
        "peak_mb": _peak_mb(),
        "rows": sizes,
    }


def child(kind: str, db: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--db", db],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def bench(cases: int, rounds: int) -> dict[str, Any]:
    db = str(build(cases))
    child("compare", db)  # warm-up: the store's pages in the OS cache for both
    out: dict[str, Any] = {"cases_per_side": cases, "evals": EVALS, "rounds": []}
    for k in range(rounds):
        order = ("compare", "baseline") if k % 2 == 0 else ("baseline", "compare")
        got: dict[str, Any] = {kind: child(kind, db) for kind in order}
        got["load"] = _load()
        out["rounds"].append(got)
    rs = out["rounds"]
    out["compare_s"] = statistics.median(r["compare"]["seconds"] for r in rs)
    out["baseline_s"] = statistics.median(r["baseline"]["seconds"] for r in rs)
    out["ratio"] = out["compare_s"] / out["baseline_s"]
    # CPU seconds: what the call costs when it has a core to itself (on a shared machine the
    # wall time waits for one)
    out["compare_cpu_s"] = statistics.median(r["compare"]["cpu_seconds"] for r in rs)
    out["baseline_cpu_s"] = statistics.median(r["baseline"]["cpu_seconds"] for r in rs)
    out["compare_peak_mb"] = max(r["compare"]["peak_mb"] for r in rs)
    out["compare_before_mb"] = max(r["compare"]["before_mb"] for r in rs)
    out["baseline_peak_mb"] = max(r["baseline"]["peak_mb"] for r in rs)
    out["last"] = rs[-1]["compare"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=500_000, help="cases per side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--child", choices=("compare", "baseline"), help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fn = run_compare if args.child == "compare" else run_baseline
        print(json.dumps(fn(args.db)))
        return
    if args.build_only:
        print(build(args.cases))
        return
    result = bench(args.cases, args.rounds)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    last = result["last"]
    print(
        f"compare {SIDES[0]} vs {SIDES[1]}: {result['cases_per_side']} cases per side, "
        f"{result['evals']} evals ({last['cases_a']} of {last['total_a']} cases of an eval "
        f"compared, {last['pairs']} pairs, sampled: {last['sampled'] or 'no'})"
    )
    for k, r in enumerate(result["rounds"]):
        print(
            f"  round {k}: compare {r['compare']['seconds']:6.2f} s "
            f"(cpu {r['compare']['cpu_seconds']:.2f} s, peak {r['compare']['peak_mb']:.0f} MB)   "
            f"baseline {r['baseline']['seconds']:6.2f} s "
            f"(cpu {r['baseline']['cpu_seconds']:.2f} s, "
            f"peak {r['baseline']['peak_mb']:.0f} MB)   load {r['load']}"
        )
    print(
        f"median: compare {result['compare_s']:.2f} s (cpu {result['compare_cpu_s']:.2f} s), "
        f"baseline (sqlite3 + numpy read of the same rows) {result['baseline_s']:.2f} s (cpu "
        f"{result['baseline_cpu_s']:.2f} s), ratio {result['ratio']:.2f}; compare peak "
        f"memory {result['compare_peak_mb']:.0f} MB ({result['compare_before_mb']:.0f} MB "
        f"before the call); verdict {last['verdict']}"
    )


if __name__ == "__main__":
    main()
