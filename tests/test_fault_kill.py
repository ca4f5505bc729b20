"""The real server, 16 clients posting captures, killed with SIGKILL three times, on SQLite
and PostgreSQL (``conftest.db``): every capture it acknowledged (201) is stored, once, with all
its results. (Keyed retries of the unacknowledged ones belong to idempotent capture keys.)"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from dbhelp import sql
from simeval.service import Service
from simeval.store import unpack_results
from simeval.web.server_process import running_server

CLIENTS, ROUNDS, EVALS, MAX_PER_CLIENT = 16, 3, 3, 400
REF = "The capital of France is Paris."


@pytest.mark.slow
def test_acknowledged_captures_survive_sigkill_of_the_server(db: str) -> None:
    with Service(db) as svc:
        for i in range(EVALS):
            svc.create_eval(f"e{i}", f"{REF} Fact {i}.", threshold=0.5)
            svc.test_eval(f"e{i}", "q", f"{REF} Fact {i}.")
            svc.activate_eval(f"e{i}")
    acknowledged: set[str] = set()
    lock = threading.Lock()
    for rnd in range(ROUNDS):
        with running_server(db) as (url, proc):
            stop = threading.Event()

            def client(
                k: int, url: str = url, rnd: int = rnd, stop: threading.Event = stop
            ) -> None:
                with httpx.Client(base_url=url, timeout=10, trust_env=False) as http:
                    for i in range(MAX_PER_CLIENT):
                        if stop.is_set():
                            return
                        cid = f"r{rnd}-c{k}-{i}"
                        try:
                            r = http.post(
                                "/api/capture",
                                json={
                                    "input": "q",
                                    "output": f"Paris {cid}",
                                    "conversation_id": cid,
                                },
                            )
                        except httpx.HTTPError:
                            return  # the server is gone
                        if r.status_code == 201:
                            with lock:
                                acknowledged.add(cid)

            threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 30
            target = 150 * (rnd + 1)
            while len(acknowledged) < target and time.monotonic() < deadline:
                time.sleep(0.01)
            proc.kill()  # SIGKILL, mid-flight
            proc.wait(timeout=30)
            stop.set()
            for t in threads:
                t.join(timeout=60)
    assert len(acknowledged) >= 150 * ROUNDS
    rows = sql(db, "SELECT conversation_id, scores FROM captures")
    stored = [cid for cid, _ in rows]
    assert len(stored) == len(set(stored))  # none twice
    assert acknowledged <= set(stored)  # every acknowledged capture is there
    assert {len(unpack_results(blob)) for _, blob in rows} == {EVALS}  # with all its results
