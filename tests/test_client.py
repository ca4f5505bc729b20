"""``simeval.Client`` against real ``simeval serve`` processes: batches, a server killed and
restarted while captures keep coming, the flush at exit, and bad input."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import simeval
from simeval.errors import InvalidInput, InvalidType
from simeval.web.server_process import running_server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stored_keys(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [k for (k,) in conn.execute("SELECT capture_key FROM captures")]


@pytest.mark.slow
def test_captures_arrive_exactly_once_across_a_restart(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("client.db"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    client = simeval.Client(url, max_retry_delay=0.5)
    keys: list[str] = []
    with running_server(db, "--port", str(port)) as (_url, proc):
        keys += [client.capture(f"q{i}", f"answer {i}", metadata={"i": i}) for i in range(500)]
        assert client.flush(timeout=60)
        assert client.sent == 500
        # killed while a batch may be in flight: its answer may be lost after the commit
        keys += [client.capture(f"q{i}", f"answer {i}") for i in range(500, 1000)]
        proc.kill()
        proc.wait()
    # the server is down: captures keep coming and the caller never waits
    keys += [client.capture(f"q{i}", f"answer {i}") for i in range(1000, 3000)]
    assert client.pending >= 2000
    time.sleep(2)
    assert client.pending >= 2000
    with running_server(db, "--port", str(port)) as _:
        assert client.flush(timeout=120)
    assert client.close(timeout=5)
    stored = stored_keys(db)
    assert len(stored) == len(set(stored)) == 3000  # every one, none twice
    assert set(stored) == set(keys)
    assert client.dropped == 0


@pytest.mark.process
def test_flush_at_exit_and_batches(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("exit.db"))
    script = (
        "import sys, simeval\n"
        "c = simeval.Client(sys.argv[1], batch_size=40)\n"
        "for i in range(250):\n"
        "    c.capture('q', f'a{i}', conversation_id='conv', capture_key=f'k{i}')\n"
        "print('queued', c.pending)\n"
    )
    with running_server(db) as (url, _proc):
        done = subprocess.run(
            [sys.executable, "-c", script, url], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("queued")
    assert sorted(stored_keys(db)) == sorted(f"k{i}" for i in range(250))


@pytest.mark.process
def test_bad_input_is_refused_at_once() -> None:
    client = simeval.Client("http://127.0.0.1:9", flush_timeout=0)
    try:
        with pytest.raises(InvalidType):
            client.capture("q", None)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            client.capture("q", "a", capture_key="")
        with pytest.raises(InvalidType):
            client.capture("q", "a", metadata={"x": object()})
        assert client.pending == 0
        client.capture("q", "a")
        assert not client.flush(timeout=0.2)  # nothing listens on port 9
    finally:
        assert not client.close(timeout=0)
    with pytest.raises(InvalidInput):
        simeval.Client("localhost:8000")
    with pytest.raises(InvalidInput):
        simeval.Client("http://127.0.0.1:8000", batch_size=1001)
