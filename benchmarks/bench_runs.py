"""Scale benchmark of `simeval run`: one worker against two, `--store` against none, and the
run's per-row cost against `score_many` on the same rows.

Generates (once, cached) a JSONL file of ROWS rows whose output and reference are ~100-word
texts (the output is the reference with a share of its words replaced, so scores spread over
the whole range), then, in interleaved rounds, runs the real command line as a subprocess:

- `simeval run FILE --workers 1` and `--workers 2` (rows/s, peak memory of the process tree:
  the sum of the resident and of the unique set sizes of all its processes);
- `simeval run FILE --store --db TMP` against the same command without `--store` (default
  workers): the figure is the ratio of their times, at most 1.5 by issue 8;
- `score_many(outputs, references, inputs, workers=1)` on the same rows, in a fresh process,
  against `simeval run --workers 1`: the ratio of run rows/s to score_many pairs/s, at least
  0.5 (the same numbers: the report checks the mean scores are equal).

Times are medians over the rounds; the two ratios are medians of each round's own ratio, its
two runs made back to back, first one then the other in turn (the machine may be shared and
its speed drift: absolute speeds are noise, ratios of runs made back to back are the figures).
The load average is printed beside them.

With ``--baselines`` it measures instead what a baseline costs (issue 21): the rows stored
once (`simeval run FILE --store`, which also writes the results file), then in interleaved
rounds `simeval run FILE --baseline run:latest` (the stored run read back from the database)
against `simeval run FILE --baseline RESULTS` (the same rows' results file); the figure is
the median of each round's ratio of the two, at most 2 by issue 21.

    .venv/bin/python benchmarks/bench_runs.py                    # 100,000 rows, 5 rounds
    .venv/bin/python benchmarks/bench_runs.py --rows 20000 --repeat 1 --json
    .venv/bin/python benchmarks/bench_runs.py --baselines --rows 300000 --repeat 3

Needs psutil (the `bench` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from simeval.scoring.bench import synthetic_texts


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


SCORE_MANY = """
import json, sys, time
from simeval import score_many
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
outputs = [r["output"] for r in rows]
references = [r["reference"] for r in rows]
inputs = [r.get("input") for r in rows]  # a run scores each row with its input (the question)
score_many(outputs[:2000], references[:2000], inputs[:2000], workers=1)  # warm, as a run warms
start = time.perf_counter()
scores = score_many(outputs, references, inputs, workers=1)
print(json.dumps({"seconds": time.perf_counter() - start, "mean_score": sum(scores) / len(scores)}))
"""


def score_many_seconds(data: Path) -> dict[str, Any]:
    """``score_many`` over the data set's pairs on one worker, in a fresh process (timed
    inside it: reading the file is not part of the figure)."""
    out = subprocess.run(
        [sys.executable, "-c", SCORE_MANY, str(data)], check=True, capture_output=True
    )
    return dict(json.loads(out.stdout))


def median(values: list[float]) -> float:
    return statistics.median(values)


def _ratios(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[float]:
    """Each round's time of ``a`` over its time of ``b``."""
    return [x["seconds"] / y["seconds"] for x, y in zip(a, b, strict=True)]


def _listed(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def baselines(data: Path, rows: int, repeat: int) -> dict[str, Any]:
    """A stored-run baseline (``run:latest``) against a results-file baseline of the same
    rows, in interleaved rounds (ABBA); the report of ``--baselines``."""
    simeval = str(Path(sys.executable).with_name("simeval"))
    kinds = ("file_baseline", "stored_baseline")
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    loads: list[tuple[float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        db, results = str(Path(tmp) / "runs.db"), str(Path(tmp) / "base.results.jsonl")
        # run:latest is the newest stored run named as the file (no --run-name without --store)
        common = [simeval, "run", str(data), "--json", "--db", db]
        print("storing the baseline run ...", file=sys.stderr)
        stored = measure([*common, "--store", "-o", results])
        assert stored["summary"]["results"] == rows, stored["summary"]
        for r in range(repeat):
            loads.append(os.getloadavg())
            for kind in kinds if r % 2 == 0 else kinds[::-1]:
                print(f"round {r + 1}/{repeat}: {kind} ...", file=sys.stderr)
                spec = results if kind == "file_baseline" else "run:latest"
                m = measure([*common, "--baseline", spec, "-o", str(Path(tmp) / "out.jsonl")])
                report = m["summary"]["baseline"]
                # both baselines hold the same rows: every case compared, none new or removed
                assert report["compared"] == rows and report["new"] == report["removed"] == 0
                runs[kind].append(m)
                print(f"  {m['seconds']:.1f} s", file=sys.stderr)
    ratios = _ratios(runs["stored_baseline"], runs["file_baseline"])
    return {
        "rows": rows,
        "rounds": repeat,
        "cores": os.cpu_count(),
        "loadavg_per_round": loads,
        "store_seconds": stored["seconds"],
        "median_seconds": {k: median([m["seconds"] for m in runs[k]]) for k in kinds},
        "stored_vs_file_baseline": median(ratios),
        "stored_vs_file_baseline_per_round": ratios,
        "peak_rss_mb": {k: max(m["peak_rss_mb"] for m in runs[k]) for k in kinds},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the data set goes")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--baselines",
        action="store_true",
        help="measure a stored-run baseline against a results-file baseline instead",
    )
    opts = parser.parse_args()
    data = Path(opts.dir) / f"simeval-bench-{opts.rows}.jsonl"
    if not data.exists():
        print(f"generating {data} ...", file=sys.stderr)
        generate(data, opts.rows)
    if opts.baselines:
        found = baselines(data, opts.rows, opts.repeat)
        if opts.json:
            print(json.dumps(found, indent=2))
            return
        sec = found["median_seconds"]
        print(
            f"{opts.rows:,} rows; {found['cores']} cores; medians of {opts.repeat} interleaved "
            f"rounds (load average at each round "
            + "; ".join(" ".join(f"{x:.2f}" for x in la) for la in found["loadavg_per_round"])
            + f"): run --baseline run:latest {sec['stored_baseline']:.1f} s, --baseline "
            f"RESULTS_FILE {sec['file_baseline']:.1f} s; ratio "
            f"{found['stored_vs_file_baseline']:.2f} (median of the rounds' "
            f"{_listed(found['stored_vs_file_baseline_per_round'])}; issue 21: <= 2)"
        )
        return
    results = Path(opts.dir) / f"simeval-bench-{opts.rows}.results.jsonl"
    simeval = str(Path(sys.executable).with_name("simeval"))
    base = [simeval, "run", str(data), "--json", "-o", str(results), "--worst", "5"]
    kinds = ("workers_1", "workers_2", "default", "store", "score_many")
    # the two pairs whose ratios are the figures run back to back, in turn first and second
    # (ABBA): a machine whose speed drifts within a round weighs on both sides alike
    orders = (
        ("workers_1", "score_many", "workers_2", "default", "store"),
        ("score_many", "workers_1", "workers_2", "store", "default"),
    )
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    loads: list[tuple[float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(opts.repeat):
            loads.append(os.getloadavg())
            for kind in orders[r % 2]:
                print(f"round {r + 1}/{opts.repeat}: {kind} ...", file=sys.stderr)
                if kind == "score_many":
                    m = score_many_seconds(data)
                else:
                    args = list(base)
                    if kind.startswith("workers_"):
                        args += ["--workers", kind[-1]]
                    if kind == "store":
                        # a fresh database each round: the write cost of an empty file
                        args += ["--store", "--db", str(Path(tmp) / f"round{r}.db")]
                    m = measure(args)
                m["rows_per_s"] = opts.rows / m["seconds"]
                runs[kind].append(m)
                print(f"  {m['seconds']:.1f} s, {m['rows_per_s']:,.0f} rows/s", file=sys.stderr)
    med = {k: median([m["seconds"] for m in runs[k]]) for k in kinds}
    first = runs["workers_1"][0]["summary"]
    report = {
        "rows": opts.rows,
        "rounds": opts.repeat,
        "file_mb": data.stat().st_size / 1e6,
        "cores": os.cpu_count(),
        "loadavg_per_round": loads,
        "loadavg_after": os.getloadavg(),
        "pass_rate": first["pass_rate"],
        "mean_score": first["mean_score"],
        "median_seconds": med,
        "median_rows_per_s": {k: opts.rows / med[k] for k in kinds},
        "speedup_2_vs_1": med["workers_1"] / med["workers_2"],
        # the figures: medians of each round's own ratio (its two runs made back to back)
        "store_vs_no_store": median(_ratios(runs["store"], runs["default"])),
        "run_vs_score_many": median(_ratios(runs["score_many"], runs["workers_1"])),
        "store_vs_no_store_per_round": _ratios(runs["store"], runs["default"]),
        "run_vs_score_many_per_round": _ratios(runs["score_many"], runs["workers_1"]),
        "peak_rss_mb_max": max(m["peak_rss_mb"] for k in kinds[:4] for m in runs[k]),
        "peak_uss_mb_max": max(m["peak_uss_mb"] for k in kinds[:4] for m in runs[k]),
        "same_numbers": all(
            m["summary"]["mean_score"] == first["mean_score"] for k in kinds[:4] for m in runs[k]
        ),
        "score_many_same_mean": all(
            abs(m["mean_score"] - first["mean_score"]) < 1e-9 for m in runs["score_many"]
        ),
        "stored_rows": [m["summary"].get("results") for m in runs["store"]],
    }
    results.unlink(missing_ok=True)
    if opts.json:
        print(json.dumps(report, indent=2))
        return
    rate = report["median_rows_per_s"]
    print(
        f"{opts.rows:,} rows ({report['file_mb']:.0f} MB JSONL), pass rate "
        f"{report['pass_rate']:.3f}, mean score {report['mean_score']:.4f}; {report['cores']} "
        f"cores; medians of {opts.repeat} interleaved rounds; load average at each round "
        + "; ".join(" ".join(f"{x:.2f}" for x in la) for la in loads)
    )
    print(
        f"run --workers 1: {rate['workers_1']:,.0f} rows/s ({med['workers_1']:.1f} s); "
        f"score_many (1 worker, same pairs): {rate['score_many']:,.0f} pairs/s "
        f"({med['score_many']:.1f} s); run / score_many = {report['run_vs_score_many']:.2f} "
        f"(median of the rounds' {_listed(report['run_vs_score_many_per_round'])}; issue 8: "
        f">= 0.5); same mean score: {report['score_many_same_mean']}"
    )
    print(
        f"run --store: {med['store']:.1f} s, without --store: {med['default']:.1f} s "
        f"(default workers); ratio {report['store_vs_no_store']:.2f} (median of the rounds' "
        f"{_listed(report['store_vs_no_store_per_round'])}; issue 8: <= 1.5)"
    )
    print(
        f"--workers 2: {rate['workers_2']:,.0f} rows/s, {report['speedup_2_vs_1']:.2f}x "
        f"--workers 1; highest peak RSS of any run (process tree) "
        f"{report['peak_rss_mb_max']:.0f} MB (USS {report['peak_uss_mb_max']:.0f} MB); "
        f"identical numbers in every run: {report['same_numbers']}"
    )


if __name__ == "__main__":
    main()
