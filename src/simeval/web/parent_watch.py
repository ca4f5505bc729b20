"""A worker of ``simeval serve --workers N`` dies with its parent.

Killed by SIGKILL, the parent cannot stop its workers: left alone they would keep the port
bound and answer with no supervisor. So each worker asks the kernel (Linux
``PR_SET_PDEATHSIG``) for a SIGTERM when its parent dies: uvicorn's own handler then stops it
gracefully, as a Ctrl+C would, flushing what it holds. The kernel sends it when the *thread*
that started the worker exits; uvicorn's supervisor starts and restarts its workers from its
main thread, whose end is the process's. A thread in the worker also looks every
``WATCH_S`` seconds whether its parent is still the one that started it (the fallback where
there is no prctl, and for a parent gone before the worker asked): if not, the same SIGTERM,
then, should a shutdown hang, an exit ``FORCE_AFTER_S`` later.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading

log = logging.getLogger("simeval.workers")

WATCH_S = 0.5
FORCE_AFTER_S = 10.0
PR_SET_PDEATHSIG = 1


def ask_death_signal() -> bool:
    """SIGTERM to this process when its parent dies (Linux); False where it cannot be had."""
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError):
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0)
    return False


def parent_gone(parent_pid: int) -> bool:
    """Whether the process that started this one has gone (this one re-parented)."""
    return os.getppid() != parent_pid


def die_with_parent(parent_pid: int) -> threading.Thread:
    """Stop this process (SIGTERM to itself, a forced exit if that hangs) once ``parent_pid``
    is no longer its parent: the kernel's death signal, and a watching thread (returned)."""
    ask_death_signal()
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(WATCH_S):
            if parent_gone(parent_pid):
                log.warning("worker %s: its parent %s is gone; stopping", os.getpid(), parent_pid)
                os.kill(os.getpid(), signal.SIGTERM)
                stop.wait(FORCE_AFTER_S)
                os._exit(1)

    thread = threading.Thread(target=watch, name="simeval-parent-watch", daemon=True)
    thread.start()
    if parent_gone(parent_pid):  # gone before the death signal was asked for
        os.kill(os.getpid(), signal.SIGTERM)
    return thread
