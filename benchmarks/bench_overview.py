"""How fast is the overview (every active eval at a glance) on a large store? 1,000 active
evals and 1M captured results (by default), timed warm through a real ``simeval serve``:
``/api/overview`` for each window beside ``/api/health``, in interleaved rounds (median of
each), with the load average. The target (issue 20): under 300 ms warm.

The store: the evals made through the service (create, test, activate); then captures
written straight into the captures table with their results packed as the capture path
packs them (``simeval.store.pack_results``; scoring a million results is not what is
measured), each scored by ``--per-capture`` evals, spread over the last ``--days`` days; the
rollup brought up to date (``roll_up``) but for the newest ``--tail`` captures, which the
overview reads past the watermark, as it would on a live server. The store file is kept
(``--store``) and reused by the next run with the same sizes.

    .venv/bin/python benchmarks/bench_overview.py [--evals 1000] [--results 1000000]
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from simeval.service import Service
from simeval.store import pack_results
from simeval.store.rollups import roll_up
from simeval.web.server_process import running_server

REF = "Paris is the capital of France and its largest city."
DONE = "bench_overview_built"


def build(path: Path, evals: int, results: int, per_capture: int, days: int, tail: int) -> None:
    """The store described in the module docstring (replaces a half-built file)."""
    path.unlink(missing_ok=True)
    svc = Service(path)
    started = time.perf_counter()
    for k in range(evals):
        name, question = f"eval-{k:04d}", f"question {k}"
        svc.create_eval(name, REF, threshold=0.6, input_scope=question)
        svc.test_eval(name, question, REF)
        svc.activate_eval(name)
    print(f"  {evals} evals made in {time.perf_counter() - started:.1f} s", flush=True)
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, version, threshold, fingerprint FROM evals").fetchall()
    svc.close()
    rng = random.Random(20)
    groups = max(1, len(rows) // per_capture)
    # each eval has its own steady pass rate; the evals of one group score the same captures
    rate = {r[0]: 0.5 + 0.5 * rng.random() for r in rows}
    captures = results // per_capture
    now = datetime.now(UTC).replace(tzinfo=None)
    span = timedelta(days=days).total_seconds()

    def capture(i: int) -> tuple[object, ...]:
        members = rows[(i % groups) * per_capture : (i % groups + 1) * per_capture]
        packed = []
        for eval_id, version, threshold, fp in members:
            score = min(1.0, max(0.0, rng.gauss(rate[eval_id], 0.2)))
            packed.append((eval_id, version, score, score >= threshold, threshold, 0, fp))
        at = now - timedelta(seconds=span * (1 - i / captures))
        return ("q", "an answer", at.isoformat(sep=" "), pack_results(packed))

    started = time.perf_counter()
    insert = (
        "INSERT INTO captures (input, output, captured_at, evaluated, scores) "
        "VALUES (?, ?, ?, 1, ?)"
    )
    with sqlite3.connect(path) as db:
        chunk = 20_000
        for start in range(0, captures - tail, chunk):
            db.executemany(
                insert, [capture(i) for i in range(start, min(start + chunk, captures - tail))]
            )
    print(f"  {captures - tail} captures in {time.perf_counter() - started:.1f} s", flush=True)
    started = time.perf_counter()
    svc = Service(path)
    svc.store.run_write(lambda s: roll_up(s.connection()))
    svc.close()
    with sqlite3.connect(path) as db:
        db.executemany(insert, [capture(i) for i in range(captures - tail, captures)])
        db.execute("INSERT INTO settings (key, value) VALUES (?, 'true')", (DONE,))
    print(f"  rolled up in {time.perf_counter() - started:.1f} s", flush=True)


def timed(client: httpx.Client, url: str) -> float:
    start = time.perf_counter()
    r = client.get(url)
    took = time.perf_counter() - start
    r.raise_for_status()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evals", type=int, default=1000)
    parser.add_argument("--results", type=int, default=1_000_000)
    parser.add_argument("--per-capture", type=int, default=5, help="evals scoring a capture")
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--tail", type=int, default=200, help="captures past the watermark")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--store", type=Path, default=None, help="the store file (kept)")
    parser.add_argument(
        "--page", action="store_true", help="time the whole /dashboard page too (slow)"
    )
    opts = parser.parse_args()
    store = opts.store or Path(tempfile.gettempdir()) / (
        f"simeval-bench-overview-{opts.evals}-{opts.results}-{opts.per_capture}-{opts.days}.db"
    )
    built = False
    if store.exists():
        with sqlite3.connect(store) as db:
            built = bool(db.execute("SELECT 1 FROM settings WHERE key = ?", (DONE,)).fetchone())
    if not built:
        print(f"building {store} …", flush=True)
        build(store, opts.evals, opts.results, opts.per_capture, opts.days, opts.tail)
    with sqlite3.connect(store) as db:
        rollup_rows = db.execute("SELECT count(*) FROM trend_rollup").fetchone()[0]
    urls = {
        "health": "/api/health",
        "overview 24h": "/api/overview?window=24h",
        "overview 7d": "/api/overview?window=7d",
        "overview 30d": "/api/overview?window=30d",
    }
    if opts.page:
        urls["dashboard page"] = "/dashboard"
    times: dict[str, list[float]] = {k: [] for k in urls}
    with running_server(store) as (base, _), httpx.Client(base_url=base, timeout=600) as client:
        for url in urls.values():  # warm: the first call of each builds what it caches
            timed(client, url)
        for _ in range(opts.rounds):
            for name, url in urls.items():
                times[name].append(timed(client, url))
        check = client.get("/api/overview").json()
    load = os.getloadavg()
    print(
        f"{opts.evals} active evals, {opts.results:,} results ({opts.per_capture} per capture, "
        f"{opts.days} days), {rollup_rows:,} rollup rows, {opts.tail} captures past the "
        f"watermark; {len(check['evals'])} evals in the overview"
    )
    for name, values in times.items():
        print(
            f"  {name:15s} median {statistics.median(values) * 1e3:7.1f} ms   "
            f"min {min(values) * 1e3:7.1f} ms   max {max(values) * 1e3:7.1f} ms"
        )
    print(f"  load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
