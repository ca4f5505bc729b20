"""Benchmark: the library's ``Service.capture_many`` against the HTTP batch endpoint
(``POST /api/captures/batch`` of a real ``simeval serve`` on 127.0.0.1), same run.

Both sides store the same ROWS captures (~50-word outputs, each with metadata), each scored by
the same 10 active evals, into a fresh SQLite store each round (a copy of one template store
holding the 10 evals, made through the library's ``import_evals``):

- ``capture_many``: ``Service(db).capture_many(rows)`` in this process (its default chunk);
- ``batch endpoint``: ``simeval serve --db COPY`` started before the clock, then the rows
  posted in batches of ``--batch`` (the client's default, 1,000) on one kept-alive connection
  (stdlib ``http.client``), one after the other, as ``simeval.Client`` sends them.

Each side first stores one warm-up capture (the active evals are prepared then, on both
sides), then the clock runs over the ROWS rows. Rounds alternate the order of the sides; the
figure is the median rate of each side and the median of the per-round ratios
capture_many / batch endpoint, with the load average beside each round. The HTTP side pays
the client's JSON encoding in this process too, on the same 2 cores: the ratio is the figure,
not the absolute rates.

    .venv/bin/python benchmarks/bench_capture_many.py                 # 4000 rows, 5 rounds
    .venv/bin/python benchmarks/bench_capture_many.py --rows 2000 --rounds 3 --json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from simeval.scoring.bench import synthetic_texts
from simeval.service import Service
from simeval.web.server_process import running_server

EVALS = 10


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def template_store(tmp: Path) -> Path:
    """A store holding EVALS active similarity evals (distinct ~40-word references)."""
    db = tmp / "template.db"
    refs = synthetic_texts(EVALS, words=40, seed=11)
    doc = {
        "evals": [
            {
                "name": f"bench-{i:02d}",
                "references": [ref],
                "threshold": 0.5,
                "status": "active",
                "test": {"input": "q", "output": ref},
            }
            for i, ref in enumerate(refs)
        ]
    }
    with Service(db) as svc:
        report = svc.import_evals(doc)
        if len(report["activated"]) != EVALS:
            raise SystemExit(f"not every eval was activated: {report['not_activated']}")
    return db


def make_rows(n: int) -> list[dict[str, Any]]:
    outputs = synthetic_texts(256, words=50, seed=12)
    return [
        {
            "input": f"question {i % 997}",
            "output": outputs[i % len(outputs)],
            "metadata": {"engine": f"v{1 + i % 2}", "case_id": f"case-{i}"},
        }
        for i in range(n)
    ]


def library_round(db: Path, rows: list[dict[str, Any]]) -> float:
    """Seconds ``capture_many`` takes over ``rows`` (after one warm-up capture)."""
    with Service(db) as svc:
        svc.capture_many([{"input": "warm", "output": "warm up"}])
        t = time.perf_counter()
        report = svc.capture_many(rows)
        took = time.perf_counter() - t
    if report.captures != len(rows) or report.results != len(rows) * EVALS:
        raise SystemExit(f"capture_many stored {report}")
    return took


def http_round(db: Path, rows: list[dict[str, Any]], batch: int) -> float:
    """Seconds the batch endpoint takes over ``rows`` (server started before the clock)."""
    with running_server(db) as (url, _proc):
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=300)
        headers = {"Content-Type": "application/json"}

        def post(items: list[dict[str, Any]]) -> dict[str, Any]:
            conn.request("POST", "/api/captures/batch", json.dumps({"captures": items}), headers)
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 201:
                raise SystemExit(f"the batch endpoint answered {resp.status}: {body[:300]!r}")
            answer: dict[str, Any] = json.loads(body)
            return answer

        post([{"input": "warm", "output": "warm up"}])
        stored = 0
        t = time.perf_counter()
        for start in range(0, len(rows), batch):
            stored += post(rows[start : start + batch])["stored"]
        took = time.perf_counter() - t
        conn.close()
    if stored != len(rows):
        raise SystemExit(f"the batch endpoint stored {stored} of {len(rows)}")
    return took


def bench(rows_n: int, rounds: int, batch: int) -> dict[str, Any]:
    rows = make_rows(rows_n)
    out: dict[str, Any] = {"rows": rows_n, "evals": EVALS, "batch": batch, "rounds": []}
    with tempfile.TemporaryDirectory(prefix="bench-capture-many-") as tmp_s:
        tmp = Path(tmp_s)
        template = template_store(tmp)
        for k in range(rounds):
            sides = ["library", "http"] if k % 2 == 0 else ["http", "library"]
            took: dict[str, float] = {}
            for side in sides:
                db = tmp / f"{side}-{k}.db"
                shutil.copy(template, db)
                if side == "library":
                    took[side] = library_round(db, rows)
                else:
                    took[side] = http_round(db, rows, batch)
                db.unlink()
            out["rounds"].append(
                {
                    "library_per_s": rows_n / took["library"],
                    "http_per_s": rows_n / took["http"],
                    "ratio": took["http"] / took["library"],
                    "load": _load(),
                }
            )
    rs = out["rounds"]
    out["library_per_s"] = statistics.median(r["library_per_s"] for r in rs)
    out["http_per_s"] = statistics.median(r["http_per_s"] for r in rs)
    out["ratio_median"] = statistics.median(r["ratio"] for r in rs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1000, help="captures per HTTP request")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = bench(args.rows, args.rounds, args.batch)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['rows']} rows, {result['evals']} active evals, batches of {result['batch']}")
    for k, r in enumerate(result["rounds"]):
        print(
            f"  round {k}: capture_many {r['library_per_s']:7.0f}/s   batch endpoint "
            f"{r['http_per_s']:7.0f}/s   ratio {r['ratio']:.2f}   load {r['load']}"
        )
    print(
        f"median: capture_many {result['library_per_s']:.0f}/s, batch endpoint "
        f"{result['http_per_s']:.0f}/s, capture_many / batch endpoint = "
        f"{result['ratio_median']:.2f}x (target >= 0.9)"
    )


if __name__ == "__main__":
    main()
