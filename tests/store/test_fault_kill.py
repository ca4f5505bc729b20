"""The real server, 16 clients posting keyed captures, killed with SIGKILL three times, on SQLite
and PostgreSQL (``conftest.db``): every capture it acknowledged (201, or 200 for a key stored
already) is stored, once, with all its results; every capture it did not acknowledge (the
connection dropped, a timeout, an error status) is sent again with the same key to the next
server, and after the last kill to a final one, until acknowledged: each is then stored exactly
once, whether or not the killed server had committed it."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx
import pytest

from dbhelp import sql
from simeval.service import Service
from simeval.store import unpack_results
from simeval.web.server_process import running_server

CLIENTS, ROUNDS, EVALS, MAX_PER_CLIENT = 16, 3, 3, 400
REF = "The capital of France is Paris."


def _post(http: httpx.Client, key: str) -> httpx.Response | None:
    """The answer to one keyed capture, or None when the server did not answer."""
    try:
        return http.post(
            "/api/capture",
            json={
                "input": "q",
                "output": f"Paris {key}",
                "conversation_id": key,
                "capture_key": key,
            },
        )
    except httpx.HTTPError:  # refused, reset, cut short or timed out: the server is gone
        return None


@pytest.mark.slow
def test_acknowledged_and_retried_captures_survive_sigkill_of_the_server(db: str) -> None:
    with Service(db) as svc:
        for i in range(EVALS):
            svc.create_eval(f"e{i}", f"{REF} Fact {i}.", threshold=0.5)
            svc.test_eval(f"e{i}", "q", f"{REF} Fact {i}.")
            svc.activate_eval(f"e{i}")
    acknowledged: set[str] = set()
    pending: set[str] = set()  # sent, not acknowledged: to be sent again with the same key
    retried: set[str] = set()  # every key sent more than once
    replays: list[dict] = []  # answers of 200: a retry of a capture the killed server stored
    lock = threading.Lock()

    def send(http: httpx.Client, key: str) -> bool:
        """Send ``key``'s capture; False when the server is gone (stop sending)."""
        with lock:
            if key in pending:
                retried.add(key)
        r = _post(http, key)
        with lock:
            if r is not None and r.status_code in (200, 201):
                acknowledged.add(key)
                pending.discard(key)
                if r.status_code == 200:
                    replays.append(r.json())
            else:
                pending.add(key)
        return r is not None

    for rnd in range(ROUNDS):
        with running_server(db) as (url, proc):
            stop = threading.Event()
            with lock:
                retries = sorted(pending)

            def client(
                k: int,
                url: str = url,
                rnd: int = rnd,
                stop: threading.Event = stop,
                retries: list[str] = retries,
            ) -> None:
                with httpx.Client(base_url=url, timeout=10, trust_env=False) as http:
                    # the captures the last server did not acknowledge, before new ones
                    for key in retries[k::CLIENTS]:
                        if stop.is_set() or not send(http, key):
                            return
                    for i in range(MAX_PER_CLIENT):
                        if stop.is_set() or not send(http, f"r{rnd}-c{k}-{i}"):
                            return

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
            assert not any(t.is_alive() for t in threads)
    assert len(acknowledged) >= 150 * ROUNDS
    lost = set(pending)
    assert lost  # 16 clients in flight: some of their captures were cut off by each kill
    with running_server(db) as (url, _), httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(3):  # a few passes: a 503 (the store busy) is retried too
            for key in sorted(pending):
                assert send(http, key), "the final server went away"
            if not pending:
                break
    assert not pending, f"never acknowledged: {sorted(pending)[:5]}"
    assert lost <= retried <= acknowledged

    rows = sql(db, "SELECT conversation_id, capture_key, scores FROM captures")
    stored = Counter(cid for cid, _, _ in rows)
    assert max(stored.values()) == 1  # none twice, retried or not
    assert all(key == cid for cid, key, _ in rows)
    assert acknowledged == set(stored)  # every acknowledged capture is there, nothing else
    assert {len(unpack_results(blob)) for _, _, blob in rows} == {EVALS}  # with all its results
    for body in replays:  # a replay answers the stored capture, with its results
        assert body["capture_key"] == body["conversation_id"] and len(body["results"]) == EVALS
