"""The server never stalls on SQLite's write lock: while another process holds
``BEGIN IMMEDIATE`` for 10 s, health and pages answer within a second and a capture gets 503
with Retry-After after a bounded wait, nothing of it stored. A real server, a real second
process."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from simeval.service import Service
from simeval.web.server_process import running_server

HOLDER = textwrap.dedent(
    """
    import sqlite3, sys, time
    con = sqlite3.connect(sys.argv[1], isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    con.execute("ROLLBACK")
    """
)
REF = "The capital of France is Paris."


def count(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT count(*) FROM captures").fetchone()[0])
    finally:
        con.close()


@pytest.mark.slow
def test_health_and_pages_answer_while_another_process_holds_the_write_lock(
    new_sqlite: Callable[..., str],
) -> None:
    db = Path(new_sqlite("evals.db"))
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")
    with running_server(db, "--lock-wait", "2") as (url, _proc):
        http = httpx.Client(base_url=url, timeout=30, trust_env=False)
        assert http.post("/api/capture", json={"input": "q", "output": REF}).status_code == 201
        pages = ("/api/health", "/", "/results", "/api/evals")
        for path in pages:  # warm (templates compiled, modules loaded): the bound is the lock's
            assert http.get(path).status_code == 200, path
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(db), "10"], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            held_at = time.monotonic()
            r = http.post("/api/capture", json={"input": "q", "output": "Paris it is."})
            assert r.status_code == 503, r.text
            assert int(r.headers["retry-after"]) >= 1 and "locked" in r.json()["error"]
            # health and pages answer promptly, also while a capture waits for the lock
            waiting = httpx.Client(base_url=url, timeout=30, trust_env=False)
            statuses: list[int] = []
            t = threading.Thread(
                target=lambda: statuses.append(
                    waiting.post("/api/capture", json={"input": "q", "output": "x"}).status_code
                )
            )
            t.start()
            for path in pages:
                start = time.monotonic()
                assert http.get(path).status_code == 200, path
                # the bound: within 1 s each (typically a few milliseconds)
                assert time.monotonic() - start < 1.0, path
            t.join(30)
            assert statuses == [503]
            assert time.monotonic() - held_at < 10  # all of this while the lock was held
        finally:
            holder.wait(timeout=30)
        assert count(db) == 1  # nothing of the refused captures was stored
        assert http.post("/api/capture", json={"input": "q", "output": REF}).status_code == 201
        assert count(db) == 2
