"""Does a large OTLP payload hold up the server? ``/api/health`` latency while 4 OTLP JSON
payloads (gzip, ~60 MB each inflated) are posted to ``/v1/traces`` at once, against the same
server idle (issue 21: they held it 0.8-2.6 s when inflating and parsing ran on the event loop).

A real ``simeval serve`` on a temporary SQLite file; a client polls ``/api/health`` every 10
ms throughout. Reports the largest and the 99th-percentile latency idle and under the posts,
and their ratio.

    .venv/bin/python benchmarks/bench_otlp_health.py [--payloads 4] [--megabytes 60]
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import threading
import time

import httpx

from simeval.web.server_process import running_server


def payload(megabytes: int) -> bytes:
    """An OTLP JSON export of 600 plain spans with one large attribute each, gzipped."""
    text = "w " * (megabytes * 1_000_000 // 1200)
    spans = [
        {
            "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
            "spanId": f"{i:016x}",
            "name": "request",
            "attributes": [{"key": "http.body", "value": {"stringValue": text}}],
        }
        for i in range(600)
    ]
    return gzip.compress(
        json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
    )


def poll(url: str, stop: threading.Event, out: list[float]) -> None:
    with httpx.Client() as client:
        while not stop.is_set():
            start = time.perf_counter()
            client.get(url + "/api/health")
            out.append(time.perf_counter() - start)
            time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payloads", type=int, default=4)
    parser.add_argument("--megabytes", type=int, default=60)
    opts = parser.parse_args()
    body = payload(opts.megabytes)
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    with tempfile.TemporaryDirectory() as tmp, running_server(tmp + "/otlp.db") as (url, _):
        idle: list[float] = []
        stop = threading.Event()
        poller = threading.Thread(target=poll, args=(url, stop, idle))
        poller.start()
        time.sleep(1.0)
        stop.set()
        poller.join()
        busy: list[float] = []
        stop = threading.Event()
        poller = threading.Thread(target=poll, args=(url, stop, busy))
        poller.start()
        statuses: list[int] = []

        def post() -> None:
            r = httpx.post(url + "/v1/traces", content=body, headers=headers, timeout=300)
            statuses.append(r.status_code)

        posts = [threading.Thread(target=post) for _ in range(opts.payloads)]
        started = time.perf_counter()
        for p in posts:
            p.start()
        for p in posts:
            p.join()
        took = time.perf_counter() - started
        stop.set()
        poller.join()
    idle.sort()
    busy.sort()
    p99 = busy[int(len(busy) * 0.99)]
    print(
        f"{opts.payloads} payloads of {len(body) / 1e3:.0f} KB gzip (~{opts.megabytes} MB JSON "
        f"each) answered {statuses} in {took:.1f} s; /api/health idle max "
        f"{idle[-1] * 1e3:.0f} ms, during the posts max {busy[-1] * 1e3:.0f} ms, p99 "
        f"{p99 * 1e3:.0f} ms over {len(busy)} requests (max ratio {busy[-1] / idle[-1]:.1f})"
    )


if __name__ == "__main__":
    main()
