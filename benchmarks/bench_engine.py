"""Benchmark of engine runs (`simeval run FILE --engine URL --model M`, issue 18).

Starts the OpenAI-compatible upstream of the tests (tests/openai_upstream.py) as a
subprocess on 127.0.0.1, then runs the real command line as subprocesses:

1. Throughput: 1,000 cases, `--concurrency 32`, against the model ``slow-200`` (the upstream
   answers each request after 200 ms): the ideal is 32 / 0.2 s = 160 cases/s. The figure is
   the answering phase's cases/s (the run's own count, from its ``--json``) over 160; the
   target is at least 0.85. The whole command's cases/s (start-up, scoring and the results
   file included) is shown beside it.
2. Overhead per case: against a model the upstream answers at once, with `--store`, the
   marginal time of a case: (time of N cases − time of N/10 cases) / (0.9 N), the two runs
   back to back in alternating order, the figure the median of the rounds (start-up and
   the fixed costs cancel out; what is left is answer + score + store per case, the
   upstream's own work on the shared cores included). Target: at most 2 ms.
3. Memory: the peak resident memory of the command's whole process tree (sampled every
   0.2 s) at 1,000 and at 100,000 cases, with a Python engine answering at once (so 100,000
   cases take seconds, not minutes; the run streams the same way whatever the engine) and
   `--store`. Flat means the ratio stays near 1 (the run holds a bounded window of cases,
   not all of them).

    .venv/bin/python benchmarks/bench_engine.py               # all three, 3 rounds
    .venv/bin/python benchmarks/bench_engine.py --only throughput --json

The machine may be shared: the load average is printed with each figure (absolute speeds are
noise on a loaded machine; the ratios of runs made back to back are the figures).
Needs psutil (the `bench` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from servers import Proc  # noqa: E402  (the tests' subprocess helper)

KEY = "sk-bench-engine"
SIMEVAL = [sys.executable, "-c", "from simeval.cli import main; main()"]
INSTANT = """
def answer(case):
    return "Paris is the capital of France." if "France" in case["input"] else "I do not know."
"""


def cases(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            country = "France" if i % 2 == 0 else "Japan"
            fh.write(
                json.dumps(
                    {
                        "id": f"c{i}",
                        # a bounded vocabulary, as real questions have: a number per case
                        # would be a new term per case, which the scorer's term table keeps
                        "input": f"What is the capital of {country}? (variant {i % 100})",
                        "reference": "Paris is the capital of France."
                        if country == "France"
                        else "Tokyo is the capital of Japan.",
                    }
                )
                + "\n"
            )
    return path


def measure(args: list[str], cwd: Path) -> dict[str, Any]:
    """Run a command; its wall time, peak RSS of its process tree and its JSON summary."""
    env = {**os.environ, "BENCH_ENGINE_KEY": KEY}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env)
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            rss = 0
            for p in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    rss += p.memory_info().rss
            peak = max(peak, rss)
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.2)
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    # the CPU of the command's whole tree (its writer process is reaped by it, and counted);
    # the upstream is this process's child too, but is reaped only at the end
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_rss_mb": peak / 1e6,
        "summary": json.loads(out),
    }


def http_run(url: str, model: str, data: Path, work: Path, *more: str) -> dict[str, Any]:
    args = [*SIMEVAL, "run", str(data), "--engine", url, "--model", model]
    args += ["--api-key-env", "BENCH_ENGINE_KEY", "--no-cache", "--no-results", "--json"]
    return measure(args + list(more), work)


def throughput(url: str, work: Path, rounds: int) -> dict[str, Any]:
    data = cases(work / "t1000.jsonl", 1000)
    per_round = []
    for _ in range(rounds):
        load = os.getloadavg()[0]
        got = http_run(url, "slow-200", data, work, "--concurrency", "32")
        answering = got["summary"]["engines"][0]["answering"]
        per_round.append(
            {
                "answering_cases_per_s": answering["cases_per_s"],
                "ratio_to_ideal": answering["cases_per_s"] / 160,
                "command_cases_per_s": 1000 / got["seconds"],
                "errors": answering["errors"],
                "loadavg": load,
            }
        )
    return {
        "ratio_to_ideal_median": statistics.median(r["ratio_to_ideal"] for r in per_round),
        "rounds": per_round,
    }


def overhead(url: str, work: Path, rounds: int, n: int) -> dict[str, Any]:
    big, small = cases(work / "o-big.jsonl", n), cases(work / "o-small.jsonl", n // 10)
    per_round = []
    for i in range(rounds):
        load = os.getloadavg()[0]
        db = ["--store", "--db", str(work / f"o{i}.db"), "--concurrency", "32"]
        pair = [("big", big), ("small", small)]
        got: dict[str, dict[str, Any]] = {}
        for which, data in pair if i % 2 == 0 else pair[::-1]:
            got[which] = http_run(url, "instant", data, work, *db)
        extra = n - n // 10
        per_round.append(
            {
                "per_case_ms": (got["big"]["seconds"] - got["small"]["seconds"]) / extra * 1000,
                "cpu_per_case_ms": (got["big"]["cpu_seconds"] - got["small"]["cpu_seconds"])
                / extra
                * 1000,
                "seconds": {k: v["seconds"] for k, v in got.items()},
                "loadavg": load,
            }
        )
    return {
        "cases": n,
        "per_case_ms_median": statistics.median(r["per_case_ms"] for r in per_round),
        "cpu_per_case_ms_median": statistics.median(r["cpu_per_case_ms"] for r in per_round),
        "rounds": per_round,
    }


def memory(work: Path, sizes: tuple[int, ...]) -> dict[str, Any]:
    (work / "instant_engine.py").write_text(INSTANT)
    (work / "e.yaml").write_text("engines:\n  - name: p\n    python: instant_engine:answer\n")
    out = {}
    for n in sizes:
        data = cases(work / f"m{n}.jsonl", n)
        load = os.getloadavg()[0]
        args = [*SIMEVAL, "run", str(data), "--engines", "e.yaml", "--no-cache", "--json"]
        # one scoring process in both: a big file would otherwise get a pool of workers
        args += ["--store", "--db", str(work / f"m{n}.db"), "--no-results", "--workers", "1"]
        got = measure(args, work)
        out[n] = {
            "peak_rss_mb": got["peak_rss_mb"],
            "seconds": got["seconds"],
            "rows": got["summary"]["engines"][0]["run"]["rows"],
            "loadavg": load,
        }
    first, last = out[sizes[0]], out[sizes[-1]]
    return {"by_cases": out, "ratio": last["peak_rss_mb"] / first["peak_rss_mb"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["throughput", "overhead", "memory"], default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--overhead-cases", type=int, default=5000)
    ap.add_argument(
        "--memory-cases",
        default="1000,10000,100000",
        help="Case counts of the memory runs, comma-separated (the ratio: last over first).",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ["UPSTREAM_KEY"] = KEY
    upstream = Proc(
        [sys.executable, str(ROOT / "tests" / "openai_upstream.py")], r"upstream: (\S+)"
    )
    found: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
            work = Path(tmp)
            if args.only in (None, "throughput"):
                found["throughput"] = throughput(upstream.url, work, args.rounds)
            if args.only in (None, "overhead"):
                found["overhead"] = overhead(upstream.url, work, args.rounds, args.overhead_cases)
            if args.only in (None, "memory"):
                sizes = tuple(int(n) for n in args.memory_cases.split(","))
                found["memory"] = memory(work, sizes)
    finally:
        upstream.stop()
    found["loadavg_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(found, indent=2))
        return
    if "throughput" in found:
        t = found["throughput"]
        print(
            f"throughput, 1,000 cases at concurrency 32, 200 ms per answer: "
            f"{t['ratio_to_ideal_median']:.3f} of the ideal 160 cases/s (target >= 0.85); rounds: "
            + "; ".join(
                f"{r['answering_cases_per_s']:.1f}/s answering, {r['command_cases_per_s']:.1f}/s "
                f"whole command, load {r['loadavg']:.1f}"
                for r in t["rounds"]
            )
        )
    if "overhead" in found:
        o = found["overhead"]
        print(
            f"overhead per case (answer + score + store, upstream answering at once): "
            f"{o['per_case_ms_median']:.2f} ms median wall time (target <= 2), "
            f"{o['cpu_per_case_ms_median']:.2f} ms of the run's CPU; rounds: "
            + "; ".join(
                f"{r['per_case_ms']:.2f} ms wall, {r['cpu_per_case_ms']:.2f} ms CPU, load "
                f"{r['loadavg']:.1f}"
                for r in o["rounds"]
            )
        )
    if "memory" in found:
        m = found["memory"]
        print(
            "peak memory (RSS of the process tree): "
            + ", ".join(
                f"{n:,} cases {v['peak_rss_mb']:.0f} MB ({v['seconds']:.1f} s, load "
                f"{v['loadavg']:.1f})"
                for n, v in m["by_cases"].items()
            )
            + f"; ratio {m['ratio']:.2f}"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in found['loadavg_after'])}")


if __name__ == "__main__":
    main()
