"""Is reading a gzip or zstd OTLP body linear in it, whatever its members? And do bodies sent
together wait for each other? (Issue 30: a body of many gzip members was inflated member by
member, copying the rest of the body each time, under the lock every OTLP request shares: 8
bodies of ~1 MiB sent at once queued past 5 s each.)

1. ``simeval.codings.inflate`` against the standard library's ``gzip.decompress`` (the
   baseline, which also copies the rest of the body for each member) on ~1 MiB of OTLP JSON in
   1, 100 and 1,000 gzip members (the most a body may have), and in zstd frames; medians of
   interleaved rounds.
2. A real ``simeval serve`` on a temporary SQLite file: 8 such bodies (1,000 gzip members
   each) posted at once, and a small OTLP post sent while they are in flight, against the same
   small post idle.

    .venv/bin/python benchmarks/bench_otlp_inflate.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable

import httpx
import zstandard

from simeval.codings import MAX_MEMBERS, inflate
from simeval.web.server_process import running_server

HEADERS = {"content-type": "application/json", "content-encoding": "gzip"}


def otlp_json(spans: int, text: str) -> bytes:
    """An OTLP JSON export of ``spans`` plain spans carrying ``text`` (no GenAI content)."""
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
                                "spanId": f"{i:016x}",
                                "name": "request",
                                "attributes": [{"key": "note", "value": {"stringValue": text}}],
                            }
                            for i in range(spans)
                        ]
                    }
                ]
            }
        ]
    }
    return json.dumps(doc).encode()


def in_members(body: bytes, n: int, compress: Callable[[bytes], bytes]) -> bytes:
    step = -(-len(body) // n)
    return b"".join(compress(body[i : i + step]) for i in range(0, len(body), step))


def timed(out: list[float], fn: Callable[..., object], *args: object) -> None:
    """``fn(*args)`` run once, its milliseconds appended to ``out``."""
    start = time.perf_counter()
    fn(*args)
    out.append((time.perf_counter() - start) * 1000)


def inflating(rounds: int) -> None:
    body = otlp_json(2000, "w " * 250)  # ~1 MiB
    limit = 64 * 1024 * 1024
    zstd = zstandard.ZstdCompressor()
    print(f"1. inflating {len(body) / 2**20:.2f} MiB of OTLP JSON (ms, median of {rounds})")
    print(
        f"{'members':>8} {'gzip.decompress':>16} {'simeval gzip':>13} {'ratio':>6} "
        f"{'simeval zstd':>13}"
    )
    for n in (1, 100, MAX_MEMBERS):
        gz = in_members(body, n, gzip.compress)
        zs = in_members(body, n, zstd.compress)
        base: list[float] = []
        ours: list[float] = []
        ours_zstd: list[float] = []
        for _ in range(rounds):  # interleaved
            timed(base, gzip.decompress, gz)
            timed(ours, inflate, gz, "gzip", limit)
            timed(ours_zstd, inflate, zs, "zstd", limit)
        b, o, z = (statistics.median(x) for x in (base, ours, ours_zstd))
        print(f"{n:>8} {b:>16.2f} {o:>13.2f} {b / o:>5.2f}x {z:>13.2f}")


def post(url: str, body: bytes, out: list[float]) -> None:
    with httpx.Client(timeout=120) as client:
        start = time.perf_counter()
        r = client.post(url + "/v1/traces", content=body, headers=HEADERS)
        out.append(time.perf_counter() - start)
        assert r.status_code == 200, (r.status_code, r.text[:200])


def together(rounds: int) -> None:
    big = in_members(otlp_json(2000, "w " * 250), MAX_MEMBERS, gzip.compress)
    small = gzip.compress(otlp_json(1, "one"))
    print(f"\n2. 8 bodies of {len(big) / 2**20:.2f} MiB ({MAX_MEMBERS} members) posted at once")
    with tempfile.TemporaryDirectory() as tmp, running_server(tmp + "/otlp.db") as (url, _):
        idle: list[float] = []
        busy: list[float] = []
        bigs: list[float] = []
        for _ in range(rounds):
            post(url, small, idle)
            threads = [threading.Thread(target=post, args=(url, big, bigs)) for _ in range(8)]
            for t in threads:
                t.start()
            time.sleep(0.05)
            post(url, small, busy)
            for t in threads:
                t.join()
        print(
            f"   each large body answered in: median {statistics.median(bigs):.2f} s, "
            f"slowest {max(bigs):.2f} s"
        )
        i, b = statistics.median(idle) * 1000, statistics.median(busy) * 1000
        print(f"   a small post: idle {i:.1f} ms, beside them {b:.1f} ms ({b / i:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    opts = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    inflating(opts.rounds)
    together(max(3, opts.rounds // 2))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
