"""Processes on this machine: whether one still exists (a run's storing process, the owner
of a temp file). Kept apart from the service so the data-set runner does not import the
database layer to ask it."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
