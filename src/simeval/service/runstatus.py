"""A stored run's status: ``running`` while its rows are being stored, ``complete`` once they
all are, ``interrupted`` when the process storing it is gone (killed, crashed, the machine
rebooted) before it finished: then its rows are incomplete and it is no baseline.

A storing process records its pid and host in the run's summary and moves the run's
``heartbeat_at`` with every transaction of rows. A running run is interrupted when its process
no longer exists on this host, or when its heartbeat is older than ``STALE`` (another host).
The status shown is computed on read; a new run writes it down (``mark_interrupted``).
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from simeval.checks import utc_now
from simeval.processes import pid_alive
from simeval.store import Run, Tx
from simeval.store.runs_sql import running_runs

STALE = timedelta(minutes=10)


def process_info() -> dict[str, object]:
    """What a storing run records about its process."""

    return {"pid": os.getpid(), "host": socket.gethostname()}


def effective_status(run: Run, now: datetime | None = None) -> str:
    """``run``'s status as it stands (see the module doc)."""
    if run.status != "running":
        return run.status
    info = run.summary if isinstance(run.summary, dict) else {}
    pid = info.get("pid")
    if info.get("host") == socket.gethostname() and isinstance(pid, int) and not pid_alive(pid):
        return "interrupted"
    beat = run.heartbeat_at or run.created_at
    current = now or utc_now()
    if beat is not None and current - beat > STALE:
        return "interrupted"
    return "running"


def mark_interrupted(s: Tx) -> int:
    """Write ``interrupted`` on every running run whose process is gone; returns how many."""
    marked = 0
    for run in running_runs(s):
        if effective_status(run) == "interrupted":
            run.status = "interrupted"
            marked += 1
    return marked
