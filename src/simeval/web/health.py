"""Whether the database answers, for ``/api/health``: one cheap statement, its answer kept
for a second so a health poller never loads the database."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool

from simeval.errors import SimevalError
from simeval.service.store_names import database_problem

if TYPE_CHECKING:
    from simeval.service import Service

# Retry-After of a 503 for an outage (the database server restarting, the disk full): long
# enough not to hammer it, short enough that a restart is noticed soon
OUTAGE_RETRY_S = 5
CHECK_EVERY_S = 1.0  # how long one answer of the database stands


class DatabaseCheck:
    """``problem()``: None while the database answers, else one line saying why it does not
    (never a statement, never a traceback); asked at most once a ``CHECK_EVERY_S``."""

    def __init__(self, service: Service, every: float = CHECK_EVERY_S):
        self.service = service
        self.every = every
        self._lock = threading.Lock()
        self._at = -float("inf")
        self._problem: str | None = None

    def _check(self) -> str | None:
        try:
            self.service.ping()
        except SimevalError as exc:  # Unavailable: the outage, in one line
            return str(exc)
        except Exception as exc:  # any driver's error: the database cannot answer
            problem = database_problem(exc) or "cannot be reached"
            return f"database {problem}"
        return None

    def _fresh(self) -> str | None:
        with self._lock:  # one check at a time; the others take its answer
            if time.monotonic() - self._at >= self.every:
                self._problem = self._check()
                self._at = time.monotonic()
            return self._problem

    async def problem(self) -> str | None:
        if time.monotonic() - self._at < self.every:
            return self._problem
        return await run_in_threadpool(self._fresh)
