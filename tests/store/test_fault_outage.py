"""Outages as 503 with Retry-After, and recovery without a restart (issue 21 items 7 and 8).

- PostgreSQL stopped and started again under load: a real server, 8 clients posting keyed
  captures. While the database is down every answer is a 503 with ``Retry-After`` and a JSON
  error (never a 500, never a hang); once it is back the same server stores again, and after
  the clients send what was not acknowledged again (same keys), every capture is stored
  exactly once: nothing acknowledged is lost.
- A full filesystem under a real server (a small tmpfs, as root; skipped otherwise): 503
  with Retry-After and a JSON error, a page in the studio, nothing half-stored, and captures
  stored again once there is room.
- ``--lock-wait`` bounds the whole request: with the write lock held by another process,
  each of 9 captures sent at once gets its 503 within the bound, not after waiting behind
  the others.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from dbhelp import sql
from diskhelp import fill, small_disk
from pghelp import own_pg_server, pg_ctl
from simeval.service import Service
from simeval.web.server_process import running_server

REF = "The capital of France is Paris."
CLIENTS = 8


def _seed(db: str | Path) -> None:
    with Service(db) as svc:
        svc.create_eval("capital", REF, threshold=0.5)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")


def _post(http: httpx.Client, key: str) -> httpx.Response | None:
    try:
        return http.post(
            "/api/capture",
            json={"input": "q", "output": f"Paris {key}", "capture_key": key},
        )
    except httpx.HTTPError:
        return None


@pytest.mark.slow
def test_postgresql_stopped_and_restarted_under_load() -> None:
    with own_pg_server() as server:
        url = f"{server.base_url}/postgres"
        _seed(url)
        acknowledged: set[str] = set()
        pending: set[str] = set()
        outage: list[httpx.Response] = []
        others: list[tuple[int, str]] = []
        lock = threading.Lock()
        stop = threading.Event()
        down = threading.Event()

        def send(http: httpx.Client, key: str) -> None:
            r = _post(http, key)
            with lock:
                if r is not None and r.status_code in (200, 201):
                    acknowledged.add(key)
                    pending.discard(key)
                    return
                pending.add(key)
                if r is not None and r.status_code == 503:
                    outage.append(r)
                elif r is not None:
                    others.append((r.status_code, r.text[:200]))

        with running_server(url) as (base, _proc):

            def client(k: int) -> None:
                with httpx.Client(base_url=base, timeout=30, trust_env=False) as http:
                    i = 0
                    while not stop.is_set() and i < 2000:
                        send(http, f"c{k}-{i}")
                        i += 1
                        if down.is_set():
                            time.sleep(0.02)  # a client that backs off a little

            threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 30
            while len(acknowledged) < 200 and time.monotonic() < deadline:
                time.sleep(0.01)
            before_stop = len(acknowledged)
            assert before_stop >= 200
            down.set()
            pg_ctl(server, "stop")
            time.sleep(2)  # load while the database is down
            with httpx.Client(base_url=base, timeout=30, trust_env=False) as http:
                page = http.get("/results")
                health = http.get("/api/health")
            pg_ctl(server, "start")
            down.clear()
            deadline = time.monotonic() + 30
            while len(acknowledged) < before_stop + 200 and time.monotonic() < deadline:
                time.sleep(0.01)
            recovered = len(acknowledged) - before_stop
            stop.set()
            for t in threads:
                t.join(timeout=60)
            assert not any(t.is_alive() for t in threads)
            # the server came back by itself: new captures were stored after the restart
            assert recovered >= 200, recovered
            # while down: 503s with Retry-After and a JSON error, nothing else
            assert others == [], others[:5]
            assert outage, "no request met the outage"
            for r in outage:
                assert int(r.headers["retry-after"]) >= 1
                assert "database" in r.json()["error"], r.text
            assert page.status_code == 503 and "database" in page.text
            assert "retry-after" in page.headers
            assert health.status_code == 503 and "database" in health.json()["error"]
            # what was not acknowledged is sent again, same keys, to the same server
            with httpx.Client(base_url=base, timeout=30, trust_env=False) as http:
                for _ in range(3):
                    for key in sorted(pending):
                        send(http, key)
                    if not pending:
                        break
            assert not pending, sorted(pending)[:5]
        rows = sql(url, "SELECT capture_key FROM captures")
        stored = Counter(key for (key,) in rows)
        assert max(stored.values()) == 1
        assert set(stored) == acknowledged  # nothing acknowledged lost, nothing extra


# -- a full filesystem ------------------------------------------------------------------------
def count(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT count(*) FROM captures").fetchone()[0])
    finally:
        con.close()


@pytest.mark.slow
def test_a_full_disk_under_the_server_is_503_and_it_recovers(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        db = disk / "evals.db"
        _seed(db)
        big = "Paris is the capital of France. " * 1000
        with running_server(db) as (base, _proc):
            http = httpx.Client(base_url=base, timeout=30, trust_env=False)
            first = http.post(
                "/api/capture", json={"input": "q", "output": big, "capture_key": "k0"}
            )
            assert first.status_code == 201, first.text
            fill(disk)
            statuses = []
            for i in range(1, 20):
                body = {"input": "q", "output": f"{big} {i}", "capture_key": f"k{i}"}
                r = http.post("/api/capture", json=body)
                statuses.append(r.status_code)
                if r.status_code != 201:
                    assert r.status_code == 503, r.text
                    assert int(r.headers["retry-after"]) >= 1
                    assert "full" in r.json()["error"] or "disk" in r.json()["error"]
            assert 503 in statuses, statuses
            batch = {
                "captures": [
                    {"input": "q", "output": f"{big} b{i}", "capture_key": f"b{i}"}
                    for i in range(5)
                ]
            }
            r = http.post("/api/captures/batch", json=batch)
            assert r.status_code in (201, 503), r.text
            batch_stored = 5 if r.status_code == 201 else 0  # all of the batch or none
            # a page that writes (an eval created from the studio's API) is a 503 too, or stored
            r = http.post("/api/evals", json={"name": "new", "references": [big * 3]})
            assert r.status_code in (201, 503), r.text
            assert http.get("/api/health").status_code == 200
            stored_while_full = statuses.count(201)
            (disk / "filler").unlink()
            # room again: the same server stores, and a retry of what got 503 is stored once
            for i in range(1, 20):
                body = {"input": "q", "output": f"{big} {i}", "capture_key": f"k{i}"}
                assert http.post("/api/capture", json=body).status_code in (200, 201)
            http.close()
        assert count(db) == 20 + batch_stored
        assert stored_while_full < 19


# -- --lock-wait bounds the whole request --------------------------------------------------
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


@pytest.mark.slow
def test_lock_wait_bounds_the_whole_request(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("evals.db"))
    _seed(db)
    wait = 2.0
    with running_server(db, "--lock-wait", str(wait)) as (base, _proc):
        with httpx.Client(base_url=base, timeout=30, trust_env=False) as http:
            assert http.post("/api/capture", json={"input": "q", "output": REF}).status_code == 201
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(db), "12"], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            answers: list[tuple[int, float]] = []
            lock = threading.Lock()

            def one(i: int) -> None:
                with httpx.Client(base_url=base, timeout=30, trust_env=False) as http:
                    start = time.monotonic()
                    r = http.post("/api/capture", json={"input": "q", "output": f"Paris {i}"})
                    with lock:
                        answers.append((r.status_code, time.monotonic() - start))

            threads = [threading.Thread(target=one, args=(i,)) for i in range(9)]
            for t in threads:
                t.start()
                time.sleep(0.05)  # arriving one after another: some wait behind a batch
            for t in threads:
                t.join(timeout=60)
        finally:
            holder.kill()
            holder.wait()
    assert [status for status, _ in answers] == [503] * 9
    # each within its bound (plus the time to answer), none after twice the bound
    slowest = max(took for _, took in answers)
    assert slowest < wait * 1.5, answers
    assert count(db) == 1
