"""Benchmark of what the read tables of migration 0010 cost one capture.

One capture (a ~50-word output scored by EVALS active evals, default 10) through
``Service.capture`` on a fresh SQLite file (or ``--db URL``), in four shapes interleaved round by
round: plain (no conversation, no metadata), with a conversation id (the conversation's summary
row is upserted in the capture's transaction), with indexed metadata (``engine``, ``model``,
``provider``: three ``capture_meta`` rows), and with both. The difference between the plain
capture and the others is what keeping ``conversations`` and ``capture_meta`` costs.

    .venv/bin/python benchmarks/bench_capture_summary.py
    .venv/bin/python benchmarks/bench_capture_summary.py --rounds 2000 --json

Absolute times on a shared machine are noise: compare the shapes of one run (medians of
rounds that alternate them); the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from simeval.scoring.bench import synthetic_texts
from simeval.service import Service

META = {"engine": "v2", "model": "gpt-x", "provider": "acme", "other": "not indexed"}


def bench(db: str, evals: int, rounds: int) -> dict[str, Any]:
    """Median milliseconds of one capture in each shape, over ``rounds`` rounds."""
    references = synthetic_texts(evals, words=50, seed=11)
    outputs = synthetic_texts(64, words=50, seed=12)
    svc = Service(db)
    svc.import_evals(
        {
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
    )
    shapes = {
        "plain": lambda k: svc.capture("question", outputs[k % 64]),
        "conversation": lambda k: svc.capture(
            "question", outputs[k % 64], conversation_id=f"talk-{k % 500}"
        ),
        "metadata": lambda k: svc.capture("question", outputs[k % 64], metadata=META),
        "both": lambda k: svc.capture(
            "question", outputs[k % 64], conversation_id=f"talk-{k % 500}", metadata=META
        ),
    }
    for k in range(50):  # warm: the evals prepared, the statements compiled
        for fn in shapes.values():
            fn(k)
    times: dict[str, list[float]] = {name: [] for name in shapes}
    for k in range(rounds):
        for name, fn in shapes.items():
            start = time.perf_counter()
            fn(k)
            times[name].append(time.perf_counter() - start)
    svc.close()
    med = {name: statistics.median(v) * 1000 for name, v in times.items()}
    return {
        "evals": evals,
        "rounds": rounds,
        "ms": {k: round(v, 4) for k, v in med.items()},
        "extra_ms": {k: round(v - med["plain"], 4) for k, v in med.items() if k != "plain"},
        "load": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evals", type=int, default=10, help="active evals")
    parser.add_argument("--rounds", type=int, default=1000, help="captures per shape")
    parser.add_argument("--db", help="a database URL (default: a fresh SQLite file)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "bench.db")
        report = bench(db, args.evals, args.rounds)
    if args.json:
        print(json.dumps(report))
        return
    print(f"one capture, {report['evals']} active evals, median of {report['rounds']} rounds")
    for name, ms in report["ms"].items():
        extra = report["extra_ms"].get(name)
        print(f"  {name:<13} {ms:8.4f} ms" + (f"   (+{extra:.4f} ms)" if extra is not None else ""))
    print(f"  load average {report['load']}")


if __name__ == "__main__":
    main()
