"""Benchmark of `simeval serve --workers N`: reads and captures under load, N=1 against N=2.

For each backend (a fresh SQLite file; a throwaway PostgreSQL server started here as the tests
do, or --pg-url), one server creates EVALS active evals and stores SEED captures (batch API).
Then, in ROUNDS interleaved rounds (the order of N=1 and N=2 alternating), a real
`simeval serve --workers N` is started on the same database and two phases run against it:

- reads alone: READERS keep-alive clients `GET /api/results?limit=50` for SECONDS;
- mixed: WRITERS clients post single captures to `/api/capture` while READERS clients read,
  for SECONDS: captures/s, and the reads' median and p90 latency.

Reported: the median over the rounds of each figure per N, the ratio N=2 / N=1, and the load
average beside each round.

    .venv/bin/python benchmarks/bench_workers.py                      # both backends
    .venv/bin/python benchmarks/bench_workers.py --backend postgresql --rounds 5 --json

The load generator (stdlib asyncio streams, `bench_serve.RawClient`) shares the 2 cores with
the server processes and the database server; compare the figures of one run, not across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from bench_serve import RawClient, percentile, setup_evals

from simeval.scoring.bench import synthetic_texts
from simeval.web.server_process import running_server

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def postgres(given: str | None) -> Iterator[str]:
    """A fresh migrated PostgreSQL database's URL: on ``given``'s server, else on a throwaway
    server (``tests/conftest.PgServer``)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import PgDatabases, PgServer

    if given:
        dbs = PgDatabases(given.rsplit("/", 1)[0])
        try:
            yield dbs.create()
        finally:
            dbs.close()
        return
    found = shutil.which("pg_ctl")
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found and not versions:
        raise SystemExit("PostgreSQL's server binaries (pg_ctl, initdb) are not installed")
    bindir = Path(os.path.realpath(found)).parent if found else Path(versions[-1]).parent
    server = PgServer(bindir)
    server.start()
    try:
        dbs = PgDatabases(server.base_url)
        try:
            yield dbs.create()
        finally:
            dbs.close()
    finally:
        server.stop()


def seed(url: str, evals: int, captures: int) -> list[str]:
    """Create the evals and store ``captures`` captures through the batch API."""
    setup_evals(url, evals)
    texts = synthetic_texts(200, words=50, seed=5)
    with httpx.Client(base_url=url, timeout=120) as api:
        for start in range(0, captures, 500):
            batch = [
                {"input": f"seed {i}", "output": texts[i % len(texts)], "metadata": {"n": i}}
                for i in range(start, min(captures, start + 500))
            ]
            api.post("/api/captures/batch", json={"captures": batch}).raise_for_status()
    return texts


async def phase(url: str, writers: int, readers: int, seconds: float, texts: list[str]) -> Any:
    """``writers`` capture clients and ``readers`` read clients for ``seconds``."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    deadline = time.perf_counter() + seconds
    reads: list[float] = []
    stored: list[int] = []
    failed: dict[str, int] = {}

    async def client(write: bool, k: int) -> None:
        raw = RawClient(host, port)
        i = 0
        try:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                if write:
                    body = {"input": f"w{k}-{i}", "output": texts[(k * 7919 + i) % len(texts)]}
                    status, _ = await raw.request("POST", "/api/capture", body)
                    ok = status == 201
                    if ok:
                        stored.append(1)
                else:
                    status, _ = await raw.request("GET", "/api/results?limit=50", None)
                    ok = status == 200
                    if ok:
                        reads.append(time.perf_counter() - t0)
                if not ok:
                    failed[str(status)] = failed.get(str(status), 0) + 1
                i += 1
        finally:
            await raw.close()

    start = time.perf_counter()
    await asyncio.gather(
        *(client(True, k) for k in range(writers)), *(client(False, k) for k in range(readers))
    )
    elapsed = time.perf_counter() - start
    return {
        "captures_per_s": round(len(stored) / elapsed, 1),
        "reads_per_s": round(len(reads) / elapsed, 1),
        "read_p50_ms": round(percentile(reads, 50) * 1000, 1),
        "read_p90_ms": round(percentile(reads, 90) * 1000, 1),
        "failed": failed,
    }


def one_round(db: str, workers: int, opts: argparse.Namespace, texts: list[str]) -> dict[str, Any]:
    args = ("--workers", str(workers), "--alert-interval", "0")
    # a generous start-up time: on a loaded machine N fresh interpreters import the app slowly
    with running_server(db, *args, timeout=300) as (url, _proc):
        asyncio.run(phase(url, 0, opts.readers, 1.0, texts))  # warm every worker
        alone = asyncio.run(phase(url, 0, opts.readers, opts.seconds, texts))
        mixed = asyncio.run(phase(url, opts.writers, opts.readers, opts.seconds, texts))
    return {
        "workers": workers,
        "reads_alone_per_s": alone["reads_per_s"],
        "reads_alone_p50_ms": alone["read_p50_ms"],
        "mixed_captures_per_s": mixed["captures_per_s"],
        "mixed_reads_per_s": mixed["reads_per_s"],
        "mixed_read_p50_ms": mixed["read_p50_ms"],
        "mixed_read_p90_ms": mixed["read_p90_ms"],
        "failed": {**alone["failed"], **mixed["failed"]},
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


FIGURES = (
    "reads_alone_per_s",
    "reads_alone_p50_ms",
    "mixed_captures_per_s",
    "mixed_reads_per_s",
    "mixed_read_p50_ms",
    "mixed_read_p90_ms",
)


def run_backend(db: str, opts: argparse.Namespace) -> dict[str, Any]:
    """Seed ``db``, then the interleaved rounds; medians per N and the ratios."""
    with running_server(db, "--alert-interval", "0", timeout=300) as (url, _proc):
        texts = seed(url, opts.evals, opts.seed)
    rounds: list[dict[str, Any]] = []
    for r in range(opts.rounds):
        for workers in (1, 2) if r % 2 == 0 else (2, 1):
            result = one_round(db, workers, opts, texts)
            rounds.append(result)
            print(json.dumps(result), file=sys.stderr)
    medians = {
        n: {k: statistics.median(x[k] for x in rounds if x["workers"] == n) for k in FIGURES}
        for n in (1, 2)
    }
    ratios = {
        k: round(medians[2][k] / medians[1][k], 2) if medians[1][k] else None for k in FIGURES
    }
    return {"medians": medians, "ratio_2_over_1": ratios, "rounds": rounds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--evals", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20_000, help="captures stored before")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--pg-url", default=None, help="a PostgreSQL server to use instead")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(argv)
    report: dict[str, Any] = {"cpus": os.cpu_count(), "options": vars(opts)}
    if opts.backend in ("sqlite", "both"):
        tmp = Path(tempfile.mkdtemp(prefix="bench-workers-"))
        try:
            report["sqlite"] = run_backend(str(tmp / "evals.db"), opts)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if opts.backend in ("postgresql", "both"):
        with postgres(opts.pg_url) as url:
            report["postgresql"] = run_backend(url, opts)
    if opts.json:
        print(json.dumps(report, indent=2))
    else:
        for backend in ("sqlite", "postgresql"):
            if backend not in report:
                continue
            print(f"{backend}:")
            for key in FIGURES:
                m = report[backend]["medians"]
                print(
                    f"  {key:22} N=1 {m[1][key]:>9} N=2 {m[2][key]:>9}  "
                    f"x{report[backend]['ratio_2_over_1'][key]}"
                )
            loads = [r["load"] for r in report[backend]["rounds"]]
            print(f"  load average by round: {' | '.join(loads)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
