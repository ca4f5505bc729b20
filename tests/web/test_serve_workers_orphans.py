"""``simeval serve --workers N`` killed by SIGKILL leaves no worker behind: a real server on
127.0.0.1, its parent killed, and within seconds its workers are gone, its port is free and
its run directory (which may hold the token) removed."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from simeval.service import Service
from simeval.web.server_process import running_server


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie nobody reaped yet does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def worker_pids(base: str, workers: int) -> set[int]:
    """The pids of the workers answering at ``base``, each on a new connection."""
    pids: set[int] = set()
    for _ in range(200):
        with httpx.Client(base_url=base, timeout=10, trust_env=False) as http:
            pids.add(http.get("/api/health").json()["worker"]["pid"])
        if len(pids) == workers:
            break
    return pids


@pytest.mark.process
def test_workers_die_with_a_killed_parent(
    tmp_path: Path, new_sqlite: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Path(new_sqlite("evals.db"))
    Service(db).close()
    temp = tmp_path / "tmp"  # where the server makes its run directory
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    with running_server(db, "--workers", "2") as (base, proc):
        port = urlsplit(base).port
        assert port is not None
        pids = worker_pids(base, 2)
        assert len(pids) == 2 and proc.pid not in pids
        assert [p.name[:14] for p in temp.iterdir()] == ["simeval-serve-"]
        try:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            left = pids
            for _ in range(150):  # at most ~15 s
                left = {pid for pid in pids if alive(pid)}
                if not left and port_free(port) and not any(temp.iterdir()):
                    break
                time.sleep(0.1)
            assert not left, f"workers {sorted(left)} outlived their parent"
            assert port_free(port), f"port {port} still bound"
            assert list(temp.iterdir()) == [], "the run directory was left behind"
        finally:
            for pid in pids:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
