"""Many writers on one store, on SQLite and on PostgreSQL (``conftest.db``): 4 processes
capturing 500 each through the library while the real server captures over HTTP, with 4
active evals. Every capture is stored once with all its results, and the trend (kept by a
rollup that moves a watermark by capture id while captures commit) counts exactly what is
stored."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from dbhelp import WORKER, sql
from simeval.service import Service
from simeval.store import unpack_results
from simeval.store.rollups import roll_up
from simeval.web.server_process import running_server

QUESTION = "What is the capital of France?"
REFERENCE = "The capital of France is Paris."
PROCESSES, PER_PROCESS, EVALS = 4, 500, 4
HTTP_CLIENTS, PER_CLIENT = 4, 100


@pytest.mark.slow
def test_processes_and_the_server_capture_at_once(db: str, tmp_path: Path) -> None:
    with Service(db) as svc:
        for i in range(EVALS):
            name = f"eval-{i}"
            svc.create_eval(name, f"{REFERENCE} Fact number {i}.", threshold=0.5)
            svc.test_eval(name, QUESTION, f"{REFERENCE} Fact number {i}.")
            svc.activate_eval(name)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, db, str(PER_PROCESS), f"P{k}", str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(PROCESSES)
    ]
    acknowledged: list[str] = []
    errors: list[str] = []
    with running_server(db) as (url, _server):

        def client(k: int) -> None:
            with httpx.Client(base_url=url, timeout=60, trust_env=False) as http:
                for i in range(PER_CLIENT):
                    cid = f"H{k}-{i}"
                    r = http.post(
                        "/api/capture",
                        json={"input": QUESTION, "output": f"Paris {cid}", "conversation_id": cid},
                    )
                    if r.status_code == 201 and len(r.json()["results"]) == EVALS:
                        acknowledged.append(cid)
                    else:
                        errors.append(f"{r.status_code} {r.text[:200]}")

        threads = [threading.Thread(target=client, args=(k,)) for k in range(HTTP_CLIENTS)]
        time.sleep(0.5)  # the workers have opened the database
        go.touch()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        outs = [p.communicate(timeout=600) for p in procs]
    assert not errors, errors[:3]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert int(out) == PER_PROCESS * EVALS
    assert len(acknowledged) == HTTP_CLIENTS * PER_CLIENT

    rows = sql(db, "SELECT conversation_id, scores FROM captures")
    expected = {f"P{k}-{i}" for k in range(PROCESSES) for i in range(PER_PROCESS)}
    expected |= set(acknowledged)
    ids = [cid for cid, _ in rows]
    assert len(ids) == len(set(ids)) == len(expected)  # none twice
    assert set(ids) == expected  # none lost
    assert {len(unpack_results(blob)) for _, blob in rows} == {EVALS}  # all results

    # the trend, rolled up while the captures committed, equals a direct count
    total = len(expected)
    with Service(db) as svc:
        for i in range(EVALS):
            assert sum(b.count for b in svc.trend(f"eval-{i}", bucket="day").buckets) == total
        svc.store.run_write(lambda s: roll_up(s.connection()))
        rolled = sql(
            db, "SELECT eval_id, SUM(count) FROM trend_rollup GROUP BY eval_id ORDER BY eval_id"
        )
        assert [int(c) for _, c in rolled] == [total] * EVALS
