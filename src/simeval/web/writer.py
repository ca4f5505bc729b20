"""The server's capture writer: captures that arrive together are stored together.

Each ``POST /api/capture`` hands its checked capture to the writer and waits. One thread
(never the event loop) stores what has gathered in one transaction, ``Service.capture_checked``,
and answers every waiting request; requests that arrive meanwhile form the next batch. Under
load a commit then serves many captures instead of one, and while another process holds the
database's write lock the event loop keeps answering health checks and pages. A capture is
acknowledged only after the transaction that stored it has committed. A capture that cannot
get the write lock within ``lock_wait`` seconds gets 503 with ``Retry-After`` (nothing of it
stored), so a request is never held for minutes behind another process's long write.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Sequence
from typing import Any

from simeval.service import Service
from simeval.service.checks import CheckedCapture, KeyedCapture
from simeval.service.models import CaptureOut
from simeval.store import DatabaseBusyError

MAX_BATCH = 256  # captures per transaction at most
LOCK_WAIT_S = 5.0  # the longest a capture waits for the write lock before a 503


class CaptureWriter:
    """Batches checked captures into transactions on one writer thread (see the module doc)."""

    def __init__(self, service: Service, lock_wait: float = LOCK_WAIT_S):
        self.service = service
        self.lock_wait = lock_wait
        self._pending: list[tuple[CheckedCapture | KeyedCapture, asyncio.Future[CaptureOut]]] = []
        self._flushing = False
        self._task: asyncio.Task[None] | None = None
        self._thread = self._new_thread()
        self._closed = False

    @staticmethod
    def _new_thread() -> concurrent.futures.ThreadPoolExecutor:
        return concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="simeval-capture"
        )

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._closed:  # the app is serving again after its lifespan ended (a test client)
            self._thread, self._closed = self._new_thread(), False
        return self._thread

    async def capture(self, item: CheckedCapture | KeyedCapture) -> CaptureOut:
        """Store one capture with the others waiting; its answer once committed."""
        loop = asyncio.get_running_loop()
        self._executor()
        future: asyncio.Future[CaptureOut] = loop.create_future()
        self._pending.append((item, future))
        if not self._flushing:
            self._flushing = True
            self._task = loop.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch = self._pending[:MAX_BATCH]
                del self._pending[:MAX_BATCH]
                try:
                    outs: list[Any] = await loop.run_in_executor(
                        self._thread, self._store, [item for item, _ in batch]
                    )
                except Exception as exc:
                    if len(batch) == 1 or isinstance(exc, DatabaseBusyError):
                        # one, or busy (nothing was stored): each capture gets the error
                        for _, future in batch:
                            _settle(future, exc)
                        continue
                    # nothing of the batch was stored: each capture alone, so that one the
                    # database refuses does not fail the others
                    outs = []
                    for item, _ in batch:
                        try:
                            outs += await loop.run_in_executor(self._thread, self._store, [item])
                        except Exception as one:
                            outs.append(one)
                for (_, future), out in zip(batch, outs, strict=True):
                    _settle(future, out)
        finally:
            self._flushing = False

    async def capture_batch(self, items: list[KeyedCapture]) -> list[CaptureOut]:
        """Store a client's batch in one transaction on the writer thread (between the
        gathered single captures, never beside them): all of it or, on an error, none."""
        loop = asyncio.get_running_loop()
        outs: list[CaptureOut] = await loop.run_in_executor(self._executor(), self._store, items)
        return outs

    def _store(self, items: Sequence[CheckedCapture | KeyedCapture]) -> list[CaptureOut]:
        return self.service.capture_checked(items, lock_wait=self.lock_wait)

    def close(self) -> None:
        """Finish what was handed over and stop the thread."""
        self._closed = True
        self._thread.shutdown(wait=True)


def _settle(future: asyncio.Future[CaptureOut], outcome: Any) -> None:
    if future.done():  # the client went away
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
