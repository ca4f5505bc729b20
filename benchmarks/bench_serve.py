"""Load benchmark of `simeval serve`: concurrent engines posting captures to /api/capture.

Starts the real server (`simeval serve --port 0` as a subprocess, uvicorn, loopback only) on a
fresh SQLite file, creates, tests and activates EVALS similarity evals, then runs CLIENTS
concurrent clients (httpx, async, keep-alive) that post CAPTURES captures of ~50-word outputs,
bounded by a request count and a time limit. Reports:

- sustained captures/s and the p50/p99 latency of the capture requests;
- the baseline measured in the same run, against the same server: `GET /api/health` (the
  framework and the client alone, no scoring, no database), in rounds interleaved with the
  capture rounds, and the median over the rounds of the ratio captures/health (the load
  average beside each round);
- the check for loss: the server is stopped, then the SQLite file is opened and the captures
  and results counted; every accepted capture (201) must be stored with EVALS results, and
  nothing else may be stored.

    .venv/bin/python benchmarks/bench_serve.py                  # 3000 captures, 16 clients
    .venv/bin/python benchmarks/bench_serve.py --captures 1000 --clients 8 --json

The client shares the machine with the server: on 2 cores it takes a good part of one, so the
figures are a floor for the server. Absolute figures on a shared machine are noise; compare
runs made back to back, and the ratio to the health baseline. The CPU time per request of the
server and of the client is reported too (psutil, the `bench` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil

from simeval.scoring.bench import synthetic_texts
from simeval.store import unpack_results
from simeval.web.server_process import running_server


def setup_evals(url: str, n: int) -> list[str]:
    """Create, test and activate ``n`` evals with distinct ~40-word reference answers."""
    refs = synthetic_texts(n, words=40, seed=11)
    names = []
    with httpx.Client(base_url=url, timeout=30) as api:
        for i, ref in enumerate(refs):
            name = f"bench-{i:02d}"
            r = api.post("/api/evals", json={"name": name, "references": [ref], "threshold": 0.5})
            r.raise_for_status()
            t = api.post(f"/api/evals/{name}/test", json={"input": "q", "output": ref})
            if not t.json().get("passed"):
                raise SystemExit(f"the test of {name} did not pass: {t.text}")
            api.post(f"/api/evals/{name}/activate").raise_for_status()
            names.append(name)
    return names


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


class RawClient:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams (stdlib only).

    The load generator shares the 2 cores with the server: httpx costs ~2 ms of CPU per request
    at 16 connections, more than the server spends on a capture, so the figures would measure
    the client. This one costs a small fraction of that. It speaks only what the benchmark
    needs: a request with a Content-Length body, a response with a Content-Length body.
    """

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: Any) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        data = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode()
        self.writer.write(head + data)
        status_line = await self.reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        while True:
            line = await self.reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()


async def load(
    url: str, clients: int, requests: int, seconds: float, make: Any, kind: str = "raw"
) -> dict[str, Any]:
    """``clients`` concurrent keep-alive clients sending ``make(i)`` requests until ``requests``
    were sent or ``seconds`` passed. Returns the latencies, statuses and accepted ids."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    accepted: list[int] = []
    errors: list[str] = []
    counter = iter(range(requests))
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    start = time.perf_counter()
    deadline = start + seconds

    async def worker(send: Any) -> None:
        for i in counter:
            if time.perf_counter() > deadline:
                return
            method, path, body = make(i)
            t0 = time.perf_counter()
            try:
                status, content = await send(method, path, body)
            except (OSError, asyncio.IncompleteReadError, httpx.HTTPError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - t0)
            statuses[status] = statuses.get(status, 0) + 1
            if status == 201:
                accepted.append(json.loads(content)["id"])

    if kind == "httpx":
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

            async def via_httpx(method: str, path: str, body: Any) -> tuple[int, bytes]:
                r = await client.request(method, path, json=body)
                return r.status_code, r.content

            await asyncio.gather(*(worker(via_httpx) for _ in range(clients)))
    else:
        raw = [RawClient(host, port) for _ in range(clients)]
        try:
            await asyncio.gather(*(worker(c.request) for c in raw))
        finally:
            for c in raw:
                await c.close()
    elapsed = time.perf_counter() - start
    done = len(latencies)
    return {
        "requests": done,
        "seconds": round(elapsed, 3),
        "per_s": round(done / elapsed, 1) if elapsed else 0.0,
        "p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
        "statuses": statuses,
        "errors": errors[:5],
        "error_count": len(errors),
        "accepted": accepted,
    }


def _median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds of one side as one: medians of the rates, latencies and CPU, summed counts."""
    out: dict[str, Any] = {}
    for key in ("per_s", "p50_ms", "p99_ms", "server_cpu_ms", "client_cpu_ms"):
        out[key] = round(statistics.median(r[key] for r in rounds), 3)
    out["requests"] = sum(r["requests"] for r in rounds)
    out["seconds"] = round(sum(r["seconds"] for r in rounds), 3)
    statuses: dict[int, int] = {}
    for r in rounds:
        for code, n in r["statuses"].items():
            statuses[code] = statuses.get(code, 0) + n
    out["statuses"] = statuses
    out["errors"] = [e for r in rounds for e in r["errors"]][:5]
    out["error_count"] = sum(r["error_count"] for r in rounds)
    out["accepted"] = [a for r in rounds for a in r["accepted"]]
    return out


def cpu_of(pid: int, job: Any) -> dict[str, Any]:
    """Run the load ``job``; add the CPU time per request of the server and of this client."""
    server = psutil.Process(pid)
    s0, c0 = server.cpu_times(), time.process_time()
    out: dict[str, Any] = asyncio.run(job)
    s1, c1 = server.cpu_times(), time.process_time()
    n = max(out["requests"], 1)
    out["server_cpu_ms"] = round(((s1.user + s1.system) - (s0.user + s0.system)) / n * 1000, 3)
    out["client_cpu_ms"] = round((c1 - c0) / n * 1000, 3)
    return out


def count_stored(db: Path, accepted: list[int], evals: int) -> dict[str, Any]:
    """Captures and results in the database, and whether every accepted capture is complete."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        captures = conn.execute("SELECT COUNT(*) FROM captures").fetchone()[0]
        # a capture's results are packed on it (simeval.store.pack_results)
        per_capture = {
            cid: len(unpack_results(blob))
            for cid, blob in conn.execute("SELECT id, scores FROM captures")
        }
        results = sum(per_capture.values())
        ids = set(per_capture)
    missing = [c for c in accepted if c not in ids]
    incomplete = [c for c in accepted if per_capture.get(c, 0) != evals]
    unexpected = len(ids - set(accepted))
    return {
        "accepted": len(accepted),
        "captures_stored": captures,
        "results_stored": results,
        "expected_results": len(accepted) * evals,
        "missing_captures": len(missing),
        "incomplete_captures": len(incomplete),
        "unexpected_captures": unexpected,
        "no_loss": not missing and not incomplete and unexpected == 0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--captures", type=int, default=6000, help="captures to post over all rounds (max)"
    )
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    parser.add_argument("--evals", type=int, default=10, help="active evals")
    parser.add_argument("--seconds", type=float, default=60, help="time limit of the load phase")
    parser.add_argument("--warmup", type=int, default=200, help="captures posted first, untimed")
    parser.add_argument(
        "--rounds", type=int, default=6, help="interleaved rounds of health and captures (6)"
    )
    parser.add_argument("--target", type=float, default=300, help="captures/s to reach")
    parser.add_argument(
        "--client",
        choices=["raw", "httpx"],
        default="raw",
        help="load generator: a minimal asyncio HTTP/1.1 client (default) or httpx.AsyncClient",
    )
    parser.add_argument("--serve-arg", action="append", default=[], help="extra serve option")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)

    outputs = synthetic_texts(500, words=50, seed=23)
    prompts = [f"question {i}" for i in range(97)]

    def capture(i: int) -> tuple[str, str, dict[str, Any]]:
        body = {
            "input": prompts[i % len(prompts)],
            "output": outputs[i % len(outputs)],
            "conversation_id": f"conv-{i % 50}",
            "metadata": {"engine": "bench", "n": i},
        }
        return "POST", "/api/capture", body

    def health(i: int) -> tuple[str, str, None]:
        return "GET", "/api/health", None

    with tempfile.TemporaryDirectory(prefix="simeval-bench-serve-") as tmp:
        db = Path(tmp) / "bench.db"
        with running_server(db, "--host", "127.0.0.1", *args.serve_arg) as (url, proc):
            setup_evals(url, args.evals)
            kind = args.client
            warm = asyncio.run(load(url, args.clients, args.warmup, args.seconds, capture, kind))
            # interleaved rounds, health and captures alternating: the machine's noise falls on
            # both sides alike; the figures are the medians over the rounds
            per_round = max(1, args.captures // args.rounds)
            bases, runs, ratios, loads = [], [], [], []
            offset = 0
            for k in range(args.rounds):
                sides = ["health", "captures"] if k % 2 == 0 else ["captures", "health"]
                for side in sides:
                    if side == "health":
                        b = cpu_of(
                            proc.pid,
                            load(url, args.clients, per_round, args.seconds, health, kind),
                        )
                        bases.append(b)
                    else:
                        start = offset

                        def make(i: int, start: int = start) -> Any:
                            return capture(start + i)

                        r = cpu_of(
                            proc.pid, load(url, args.clients, per_round, args.seconds, make, kind)
                        )
                        offset += per_round
                        runs.append(r)
                ratios.append(runs[-1]["per_s"] / bases[-1]["per_s"] if bases[-1]["per_s"] else 0)
                loads.append(os.getloadavg()[0])
        # The server is stopped: everything it acknowledged must now be on disk.
        accepted_all = warm["accepted"] + [a for r in runs for a in r["accepted"]]
        stored = count_stored(db, accepted_all, args.evals)

    run = _median_round(runs)
    base = _median_round(bases)
    accepted_run = run.pop("accepted")
    base.pop("accepted")
    ratio = round(statistics.median(ratios), 3)
    run["ratios_per_round"] = [round(x, 3) for x in ratios]
    run["load_average"] = [round(x, 2) for x in loads]
    report = {
        "client": args.client,
        "clients": args.clients,
        "evals": args.evals,
        "captures": {**run, "accepted": len(accepted_run)},
        "baseline_health": base,
        "ratio_captures_to_health": ratio,
        "stored": stored,
        "target_per_s": args.target,
        "target_met": run["per_s"] >= args.target,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        c, b, s = report["captures"], base, stored
        print(
            f"captures: {c['requests']} in {c['seconds']} s, median {c['per_s']} captures/s "
            f"over {args.rounds} rounds interleaved with health ({args.clients} {args.client} "
            f"clients, {args.evals} active evals, {args.evals} results each)"
        )
        print(
            f"  captures/health per round {c['ratios_per_round']}, load average {c['load_average']}"
        )
        print(f"  latency p50 {c['p50_ms']} ms, p99 {c['p99_ms']} ms; statuses {c['statuses']}")
        print(
            f"  CPU per capture: server {c['server_cpu_ms']} ms, client {c['client_cpu_ms']} ms "
            f"(health: server {b['server_cpu_ms']} ms, client {b['client_cpu_ms']} ms)"
        )
        if c["error_count"]:
            print(f"  transport errors: {c['error_count']}, e.g. {c['errors'][0]}")
        print(
            f"baseline GET /api/health: {b['per_s']} req/s, p50 {b['p50_ms']} ms, "
            f"p99 {b['p99_ms']} ms; captures/health (median of rounds) = "
            f"{report['ratio_captures_to_health']}"
        )
        print(
            f"stored: {s['captures_stored']} captures, {s['results_stored']} results "
            f"(accepted {s['accepted']} incl. warm-up, expected {s['expected_results']} results); "
            f"missing {s['missing_captures']}, incomplete {s['incomplete_captures']}, "
            f"unexpected {s['unexpected_captures']} -> {'no loss' if s['no_loss'] else 'LOSS'}"
        )
        print(f"target {args.target:g} captures/s: {'met' if report['target_met'] else 'NOT met'}")
    return 0 if stored["no_loss"] else 1


if __name__ == "__main__":
    sys.exit(main())
