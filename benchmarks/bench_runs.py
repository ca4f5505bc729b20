"""Scale benchmark of `simeval run`: a large generated JSONL file, one worker against two.

Generates (once, cached) a JSONL file of ROWS rows whose output and reference are ~100-word
texts (the output is the reference with a share of its words replaced, so scores spread over
the whole range), then runs the real command line, `simeval run FILE --workers N`, as a
subprocess for N = 1 and N = 2, alternating, and samples the memory of the whole process tree
(the command and its worker processes) every 0.2 s. Reports rows/s, the ratio of two workers
to one measured in the same run (the baseline), and the peak memory: the sum of the resident
set sizes of all processes (shared pages counted in each process, so an upper bound) and the
sum of their unique set sizes.

    .venv/bin/python benchmarks/bench_runs.py                 # 1,000,000 rows in /tmp
    .venv/bin/python benchmarks/bench_runs.py --rows 100000 --repeat 1 --json

Needs psutil (the `bench` extra). Absolute speeds on a shared machine are noise; the ratio of
runs made back to back is the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from simeval.bench import synthetic_texts


def generate(path: Path, rows: int, words: int = 100, seed: int = 5) -> None:
    """Write the data set: id, input, output (~``words`` words) and reference."""
    pool = synthetic_texts(5000, words=words, seed=seed)
    vocab = " ".join(synthetic_texts(50, words=200, seed=seed + 1)).split()
    rng = random.Random(seed)
    tmp = path.with_suffix(".partial")
    with tmp.open("w", encoding="utf-8") as fh:
        for i in range(rows):
            reference = pool[i % len(pool)]
            words_out = reference.split()
            share = rng.random() * 0.6  # 0-60% of the words replaced
            for k in range(len(words_out)):
                if rng.random() < share:
                    words_out[k] = rng.choice(vocab)
            row = {
                "id": i,
                "input": f"question {i % 9973}",
                "output": " ".join(words_out),
                "reference": reference,
            }
            fh.write(json.dumps(row) + "\n")
    tmp.replace(path)


def measure(args: list[str]) -> dict[str, Any]:
    """Run a command; wall time and peak memory of its process tree (sampled every 0.2 s)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    root = psutil.Process(proc.pid)
    peak_rss = peak_uss = 0
    tick = 0
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            rss = uss = 0
            for p in tree:
                try:
                    if tick % 5 == 0:  # USS reads /proc/PID/smaps: dearer, sample it less
                        info = p.memory_full_info()
                        uss += info.uss
                        rss += info.rss
                    else:
                        rss += p.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
            peak_rss = max(peak_rss, rss)
            peak_uss = max(peak_uss, uss)
        except psutil.NoSuchProcess:
            pass
        tick += 1
        time.sleep(0.2)
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return {
        "seconds": seconds,
        "peak_rss_mb": peak_rss / 1e6,
        "peak_uss_mb": peak_uss / 1e6,
        "summary": json.loads(out),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2, help="runs per worker count")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the data set goes")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    opts = parser.parse_args()
    data = Path(opts.dir) / f"simeval-bench-{opts.rows}.jsonl"
    if not data.exists():
        print(f"generating {data} ...", file=sys.stderr)
        generate(data, opts.rows)
    results = Path(opts.dir) / f"simeval-bench-{opts.rows}.results.jsonl"
    simeval = str(Path(sys.executable).with_name("simeval"))
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    # the machine may be shared: the load before the runs says whether the figures are clean
    load_before = os.getloadavg()
    for r in range(opts.repeat):
        for workers in (1, 2):
            print(f"run {r + 1}/{opts.repeat}, --workers {workers} ...", file=sys.stderr)
            m = measure(
                [
                    simeval,
                    "run",
                    str(data),
                    "--workers",
                    str(workers),
                    "--json",
                    "-o",
                    str(results),
                    "--worst",
                    "5",
                ]
            )
            m["rows_per_s"] = opts.rows / m["seconds"]
            runs[workers].append(m)
            print(
                f"  {m['seconds']:.1f} s, {m['rows_per_s']:,.0f} rows/s, peak RSS "
                f"{m['peak_rss_mb']:.0f} MB (USS {m['peak_uss_mb']:.0f} MB)",
                file=sys.stderr,
            )
    best = {w: min(runs[w], key=lambda m: m["seconds"]) for w in runs}
    pairs = [runs[1][i]["seconds"] / runs[2][i]["seconds"] for i in range(opts.repeat)]
    first = best[1]["summary"]
    report = {
        "rows": opts.rows,
        "file_mb": data.stat().st_size / 1e6,
        "cores": os.cpu_count(),
        "loadavg_before": load_before,
        "pass_rate": first["pass_rate"],
        "mean_score": first["mean_score"],
        "workers_1": {
            k: best[1][k] for k in ("seconds", "rows_per_s", "peak_rss_mb", "peak_uss_mb")
        },
        "workers_2": {
            k: best[2][k] for k in ("seconds", "rows_per_s", "peak_rss_mb", "peak_uss_mb")
        },
        "speedup_2_vs_1_best": best[1]["seconds"] / best[2]["seconds"],
        "speedup_2_vs_1_per_pair": pairs,
        "peak_rss_mb_max": max(m["peak_rss_mb"] for w in runs for m in runs[w]),
        "same_numbers": all(
            m["summary"]["mean_score"] == first["mean_score"] for w in runs for m in runs[w]
        ),
    }
    results.unlink(missing_ok=True)
    if opts.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{opts.rows:,} rows ({report['file_mb']:.0f} MB JSONL), pass rate "
        f"{report['pass_rate']:.3f}, mean score {report['mean_score']:.4f}; "
        f"{report['cores']} cores, load average before the runs "
        f"{' '.join(f'{x:.2f}' for x in load_before)}"
    )
    for w in (1, 2):
        b = report[f"workers_{w}"]
        print(
            f"--workers {w}: {b['rows_per_s']:,.0f} rows/s ({b['seconds']:.1f} s), peak RSS "
            f"{b['peak_rss_mb']:.0f} MB, peak USS {b['peak_uss_mb']:.0f} MB"
        )
    print(
        f"--workers 2 vs --workers 1: {report['speedup_2_vs_1_best']:.2f}x (best runs); "
        f"per back-to-back pair: {', '.join(f'{p:.2f}x' for p in pairs)}"
    )
    print(
        f"highest peak RSS of any run (process tree): {report['peak_rss_mb_max']:.0f} MB; "
        f"identical numbers in every run: {report['same_numbers']}"
    )


if __name__ == "__main__":
    main()
