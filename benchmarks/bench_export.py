"""How fast is the results export, and how much memory does the server hold while it runs?

A store of ``--captures`` captures scored by 10 active evals each (so 10 results per capture;
about half of them fail, and a failing row's reasoning names its missing terms), built with
the library's ``capture_many`` and kept under ``benchmarks/.cache/export-<N>.db`` for the next
run. Then, interleaved over ``--rounds`` rounds (medians reported):

- raw: ``sqlite3`` + ``csv`` reading the same rows (the captures with their packed results,
  unpacked with ``simeval.store.unpack_results``) and writing the same columns (eval names and
  matched references looked up in dicts; no reasoning): the rate the export is held to;
- library: ``Service.write_export`` to /dev/null (CSV);
- api: ``GET /api/results/export`` (CSV, and JSON with ``--json``) from a real ``simeval
  serve`` subprocess on 127.0.0.1, streamed to /dev/null; the server's peak resident memory
  (``VmHWM``, with its children's) read after each export.

Each line gives rows/s and the ratio to the raw rate of the same round; the load average is
printed beside (2 cores shared: a busy machine slows every side alike). The target (issue 22):
the export at >= 25% of the raw rate, and the server's peak under 300 MB at 10M results::

    .venv/bin/python benchmarks/bench_export.py [--captures 20000] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sqlite3
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psutil

from simeval.service import Service
from simeval.service.export import EXPORT_COLUMNS
from simeval.store import unpack_results
from simeval.web.server_process import running_server

CACHE = Path(__file__).parent / ".cache"
COLUMNS = EXPORT_COLUMNS  # the raw side writes the same columns
FACTS: list[tuple[str, str, dict[str, Any]]] = [
    ("capital", "Paris is the capital of France and sits on the Seine.", {}),
    ("tallest", "Mount Everest is the tallest mountain above sea level.", {}),
    ("largest", "Jupiter is the largest planet of the solar system.", {}),
    ("speed", "Light travels at about three hundred thousand kilometres per second.", {}),
    ("water", "Water boils at one hundred degrees Celsius at sea level.", {}),
    ("river", "The Nile is the longest river in Africa.", {"stemming": False}),
    ("author", "Hamlet was written by William Shakespeare.", {"stemming": False}),
    ("ocean", "The Pacific is the largest and deepest ocean.", {}),
    ("moon", "The Moon orbits the Earth about every twenty seven days.", {}),
    ("gold", "The chemical symbol of gold is Au.", {"required": ["Au"]}),
]
FILLER = [
    *("indeed", "well", "so", "perhaps", "answer", "think", "probably", "known", "fact"),
    *("usually", "people", "say", "often", "really", "quite", "certainly", "many", "about"),
    *("around", "there", "here", "which"),
]


def _output(rng: random.Random) -> str:
    """An answer mixing a few facts, some words dropped, some filler: each eval passes or
    fails it by how much of its reference the answer kept."""
    parts = []
    for _, ref, _ in rng.sample(FACTS, rng.randint(2, 6)):
        words = ref.rstrip(".").split()
        keep = rng.uniform(0.4, 1.0)
        parts.append(" ".join(w for w in words if rng.random() < keep))
    parts.append(" ".join(rng.choices(FILLER, k=rng.randint(0, 6))))
    return ". ".join(p for p in parts if p) + "."


def build(path: Path, captures: int) -> None:
    """The store described in the module docstring, written to a temporary name and renamed
    when complete (a half-built file is never taken for a built one)."""
    part = path.with_name(path.name + ".part")
    for p in (part, Path(f"{part}-wal"), Path(f"{part}-shm")):
        p.unlink(missing_ok=True)
    svc = Service(part)
    for name, ref, options in FACTS:
        svc.create_eval(name, ref, threshold=0.45, options=options)
        svc.test_eval(name, "q", ref)
        svc.activate_eval(name)
    rng = random.Random(22)
    start = datetime.now(UTC) - timedelta(days=30)
    step = timedelta(days=30) / max(captures, 1)
    started = time.perf_counter()
    chunk = 10_000
    for first in range(0, captures, chunk):
        rows = [
            {
                "input": f"Question {i % 997}: tell me a fact",
                "output": _output(rng),
                "conversation_id": f"conv-{i // 4}",
                "metadata": {"engine": "v2" if i % 3 else "v1", "model": f"m-{i % 5}"},
                "captured_at": (start + step * i).isoformat(),
            }
            for i in range(first, min(first + chunk, captures))
        ]
        svc.capture_many(rows)
        done = min(first + chunk, captures)
        rate = done / (time.perf_counter() - started)
        print(f"  {done:,} captures ({rate:,.0f}/s)", end="\r", flush=True)
    print()
    svc.close()
    with sqlite3.connect(part) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    part.rename(path)


def raw_export(path: Path, out: Any) -> int:
    """The raw rate: the same rows read with sqlite3 and written with csv."""
    db = sqlite3.connect(path)
    names = dict(db.execute("SELECT id, name FROM evals"))
    refs = {
        (e, v): json.loads(r)
        for e, v, r in db.execute("SELECT eval_id, version, reference_answers FROM eval_versions")
    }
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    n = 0
    q = (
        "SELECT id, input, output, conversation_id, metadata, captured_at, scores FROM captures"
        " WHERE scores IS NOT NULL ORDER BY captured_at, id"
    )
    for cid, input_, output, conv, meta, at, blob in db.execute(q):
        p = unpack_results(blob)
        fps = p.fingerprints
        for i in range(len(p.eval_ids)):
            eid, version, matched = p.eval_ids[i], p.versions[i], p.matched[i]
            ok = "true" if p.passed[i] else "false"
            writer.writerow(
                (
                    f"{cid}-{eid}", cid, "", "", conv, at, names.get(eid), "similarity",
                    version, input_, output, p.scores[i], ok, ok, p.thresholds[i], "", "", "",
                    fps[p.fp_index[i]], refs[eid, version][matched], meta, "", "",
                )
            )  # fmt: skip
            n += 1
    db.close()
    return n


def library_export(path: Path, out: Any) -> int:
    svc = Service(path)
    try:
        return svc.write_export(out, "csv")
    finally:
        svc.close()


def peak_mb(proc: psutil.Process) -> float:
    """The peak resident memory of a process and its children (VmHWM, else RSS now), MB."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            status = Path(f"/proc/{p.pid}/status").read_text()
            hwm = [line for line in status.splitlines() if line.startswith("VmHWM:")]
            total += int(hwm[0].split()[1]) * 1024 if hwm else p.memory_info().rss
        except (OSError, psutil.Error):
            continue
    return total / 2**20


def api_export(client: httpx.Client, fmt: str) -> int:
    """Stream the export to /dev/null; the count of rows is checked from the bytes' ends."""
    rows = 0
    with client.stream("GET", "/api/results/export", params={"format": fmt}) as r:
        r.raise_for_status()
        tail = b""
        for piece in r.iter_bytes(1 << 16):
            # a row ends with a newline outside quotes; the bench's texts have none inside
            rows += piece.count(b"\n")
            tail = piece[-4:]
    assert tail.endswith(b"\n")
    # CSV: the header line; JSON: "[" and "]" each end a line of their own
    return rows - 1 if fmt == "csv" else rows - 2


def server_cpu(proc: psutil.Process) -> float:
    """CPU seconds (user + system) a process and its children have used."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def timed(work: Callable[[], int], cpu: Callable[[], float]) -> tuple[int, float, float]:
    """(rows, wall seconds, CPU seconds of the side doing the work: ``cpu()`` before and
    after). On a shared machine the CPU rates compare sides that waited unequally."""
    started, cpu_started = time.perf_counter(), cpu()
    n = work()
    return n, time.perf_counter() - started, cpu() - cpu_started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captures", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="time the API's JSON export too")
    parser.add_argument("--skip-library", action="store_true", help="only raw and the API")
    parser.add_argument("--build-only", action="store_true", help="build the store, time nothing")
    opts = parser.parse_args()
    CACHE.mkdir(exist_ok=True)
    store = CACHE / f"export-{opts.captures}.db"
    if not store.exists():
        print(f"building {store} …", flush=True)
        started = time.perf_counter()
        build(store, opts.captures)
        print(f"  built in {time.perf_counter() - started:.0f} s", flush=True)
    if opts.build_only:
        return
    names = ["raw", "library", "api csv", "api json"]
    if not opts.json:
        names.remove("api json")
    if opts.skip_library:
        names.remove("library")
    rates: dict[str, list[float]] = {k: [] for k in names}
    cpu_rates: dict[str, list[float]] = {k: [] for k in names}
    ratios: dict[str, list[float]] = {k: [] for k in names[1:]}
    cpu_ratios: dict[str, list[float]] = {k: [] for k in names[1:]}
    peaks: list[float] = []
    loads: list[float] = []
    expected = 0
    with (
        running_server(store) as (base, proc),
        httpx.Client(base_url=base, timeout=None) as client,
        open(os.devnull, "w", encoding="utf-8") as null,
    ):
        server = psutil.Process(proc.pid)
        on_server = lambda: server_cpu(server)  # noqa: E731
        print(f"server up, {peak_mb(server):.0f} MB peak before any export", flush=True)
        for k in range(opts.rounds):
            got = {"raw": timed(lambda: raw_export(store, null), time.process_time)}
            if "library" in rates:
                got["library"] = timed(lambda: library_export(store, null), time.process_time)
            got["api csv"] = timed(lambda: api_export(client, "csv"), on_server)
            if opts.json:
                got["api json"] = timed(lambda: api_export(client, "json"), on_server)
            peaks.append(peak_mb(server))
            loads.append(os.getloadavg()[0])
            expected = got["raw"][0]
            raw_rate, raw_cpu = expected / got["raw"][1], expected / got["raw"][2]
            for name, (n, took, cpu) in got.items():
                if n != expected:
                    raise SystemExit(f"{name} exported {n} rows, not {expected}")
                rates[name].append(n / took)
                cpu_rates[name].append(n / cpu)
                if name != "raw":
                    ratios[name].append(n / took / raw_rate)
                    cpu_ratios[name].append(n / cpu / raw_cpu)
            print(
                f"round {k + 1}: "
                + ", ".join(
                    f"{name} {n / t:,.0f} rows/s ({t:.1f} s wall, {c:.1f} s CPU)"
                    for name, (n, t, c) in got.items()
                )
                + f"; server peak {peaks[-1]:.0f} MB; load {loads[-1]:.2f}",
                flush=True,
            )
    load = os.getloadavg()
    print(f"\n{opts.captures:,} captures, {expected:,} results, medians of {opts.rounds} rounds:")
    for name in names:
        line = f"  {name:9s} {statistics.median(rates[name]):>10,.0f} rows/s"
        line += f" ({statistics.median(cpu_rates[name]):>10,.0f} per CPU second)"
        if name in ratios:
            line += f"  {statistics.median(ratios[name]):6.1%} of raw"
            line += f" ({statistics.median(cpu_ratios[name]):6.1%} by CPU)"
        print(line)
    print(f"  server peak resident memory {max(peaks):.0f} MB (VmHWM, over every export)")
    print(f"  load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
