"""``simeval.Client`` made before ``fork`` (gunicorn ``--preload``, Celery prefork,
``multiprocessing``): the child sends its own captures, the parent's are sent once, by the
parent. Against a real ``simeval serve`` on 127.0.0.1."""

from __future__ import annotations

import multiprocessing
import os
import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import simeval
from simeval.web.server_process import running_server

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stored_keys(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [k for (k,) in conn.execute("SELECT capture_key FROM captures")]


def _child_flushes(client: simeval.Client, out: Any) -> None:
    keys = [client.capture(f"q{i}", f"child answer {i}", capture_key=f"c{i}") for i in range(100)]
    flushed = client.flush(timeout=60)
    out.put((len(keys), flushed, client.sent, client.dropped, client.pending))


def _child_just_returns(client: simeval.Client) -> None:
    for i in range(100):
        client.capture(f"q{i}", f"child answer {i}", capture_key=f"e{i}")
    # no flush: the multiprocessing child's exit sends what is left


@pytest.mark.process
def test_a_forked_child_sends_its_own_and_the_parent_its_own_once(
    new_sqlite: Callable[..., str],
) -> None:
    assert FORK is not None
    db = Path(new_sqlite("fork.db"))
    port = free_port()
    # the server is not up yet: the parent's 10 are still queued when it forks
    client = simeval.Client(f"http://127.0.0.1:{port}", max_retry_delay=0.2, flush_timeout=5)
    for i in range(10):
        client.capture(f"q{i}", f"parent answer {i}", capture_key=f"p{i}")
    out = FORK.Queue()
    child = FORK.Process(target=_child_flushes, args=(client, out))
    child.start()
    try:
        with running_server(db, "--port", str(port)):
            queued, flushed, sent, dropped, pending = out.get(timeout=90)
            child.join(30)
            assert client.flush(timeout=60)
    finally:
        if child.is_alive():
            child.kill()
        client.close(timeout=0)
    assert child.exitcode == 0
    # the child acknowledged exactly its own 100: the parent's 10 were not sent from it
    assert (queued, flushed, sent, dropped, pending) == (100, True, 100, 0, 0)
    assert client.sent == 10
    stored = stored_keys(db)
    assert sorted(stored) == sorted([f"p{i}" for i in range(10)] + [f"c{i}" for i in range(100)])


@pytest.mark.process
def test_a_multiprocessing_child_is_flushed_when_it_ends(new_sqlite: Callable[..., str]) -> None:
    assert FORK is not None
    db = Path(new_sqlite("exit.db"))
    with running_server(db) as (url, _proc):
        client = simeval.Client(url, max_retry_delay=0.2)
        client.capture("q", "before the fork", capture_key="before")
        assert client.flush(timeout=30)
        child = FORK.Process(target=_child_just_returns, args=(client,))
        child.start()
        child.join(90)
        assert child.exitcode == 0
        client.close(timeout=5)
    stored = stored_keys(db)
    assert sorted(stored) == sorted(["before"] + [f"e{i}" for i in range(100)])


@pytest.mark.process
def test_an_os_fork_child_stores_100_of_100(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("osfork.db"))
    with running_server(db) as (url, _proc):
        client = simeval.Client(url, max_retry_delay=0.2)
        pid = os.fork()
        if pid == 0:  # the child: never back into pytest
            code = 1
            try:
                for i in range(100):
                    client.capture(f"q{i}", f"answer {i}", capture_key=f"f{i}")
                code = 0 if client.flush(timeout=60) and client.sent == 100 else 3
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert client.sent == 0 and client.pending == 0
        client.close(timeout=5)
    assert sorted(stored_keys(db)) == sorted(f"f{i}" for i in range(100))
