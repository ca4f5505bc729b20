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
import time
from collections.abc import Sequence

from simeval.checks import CheckedCapture, KeyedCapture
from simeval.errors import Unavailable
from simeval.service import Service
from simeval.service.models import CaptureOut
from simeval.service.store_names import DatabaseBusyError

MAX_BATCH = 256  # captures per transaction at most
LOCK_WAIT_S = 5.0  # the longest a capture waits for the write lock before a 503
MIN_LOCK_WAIT_S = 0.01  # less left than this: 503 at once rather than a try doomed to wait


class CaptureWriter:
    """Batches checked captures into transactions on one writer thread (see the module doc)."""

    def __init__(self, service: Service, lock_wait: float = LOCK_WAIT_S):
        self.service = service
        self.lock_wait = lock_wait
        # each capture with its deadline (``lock_wait`` after it arrived) and its answer
        self._pending: list[
            tuple[CheckedCapture | KeyedCapture, float, asyncio.Future[CaptureOut]]
        ] = []
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
        self._pending.append((item, time.monotonic() + self.lock_wait, future))
        if not self._flushing:
            self._flushing = True
            self._task = loop.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch = self._due(time.monotonic())
                if not batch:
                    continue
                # the whole request is bounded by lock_wait, the wait behind earlier batches
                # included: this batch waits for the lock only what its oldest capture has left
                left = min(deadline for _, deadline, _ in batch) - time.monotonic()
                outs: list[CaptureOut | Exception] = []
                try:
                    outs += await loop.run_in_executor(
                        self._thread, self._store, [item for item, _, _ in batch], left
                    )
                except Exception as exc:
                    if len(batch) == 1 or isinstance(exc, DatabaseBusyError | Unavailable):
                        # one, busy or unavailable (nothing was stored): each gets the error
                        for _, _, future in batch:
                            _settle(future, exc)
                        continue
                    # nothing of the batch was stored: each capture alone, so that one the
                    # database refuses does not fail the others
                    outs = []
                    for item, _, _ in batch:
                        try:
                            outs += await loop.run_in_executor(
                                self._thread, self._store, [item], None
                            )
                        except Exception as one:
                            outs.append(one)
                for (_, _, future), out in zip(batch, outs, strict=True):
                    _settle(future, out)
        finally:
            self._flushing = False

    def _due(
        self, now: float
    ) -> list[tuple[CheckedCapture | KeyedCapture, float, asyncio.Future[CaptureOut]]]:
        """The next batch to store, the captures whose deadline has passed while they waited
        answered 503 at once instead (nothing of them stored)."""
        batch = self._pending[:MAX_BATCH]
        del self._pending[:MAX_BATCH]
        late = [entry for entry in batch if entry[1] - now < MIN_LOCK_WAIT_S]
        for _, _, future in late:
            _settle(
                future,
                DatabaseBusyError(
                    f"the database stayed locked by other writes for more than "
                    f"{self.lock_wait:g} s; nothing was written"
                ),
            )
        return [entry for entry in batch if entry[1] - now >= MIN_LOCK_WAIT_S]

    async def capture_batch(
        self, items: list[KeyedCapture], *, score: bool = True
    ) -> list[CaptureOut]:
        """Store a client's batch in one transaction on the writer thread (between the
        gathered single captures, never beside them): all of it or, on an error, none.
        ``score=False``: stored unscored (texts that arrived cut)."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.lock_wait
        outs: list[CaptureOut] = await loop.run_in_executor(
            self._executor(), self._store_by, items, deadline, score
        )
        return outs

    def _store(
        self,
        items: Sequence[CheckedCapture | KeyedCapture],
        left: float | None,
        score: bool = True,
    ) -> list[CaptureOut]:
        wait = self.lock_wait if left is None else max(MIN_LOCK_WAIT_S, left)
        return self.service.capture_checked(items, lock_wait=wait, score=score)

    def _store_by(
        self, items: Sequence[KeyedCapture], deadline: float, score: bool = True
    ) -> list[CaptureOut]:
        """A client's batch, run on the writer thread once the captures before it are done:
        it waits for the lock only what is left of its ``lock_wait``."""
        left = deadline - time.monotonic()
        if left < MIN_LOCK_WAIT_S:
            raise DatabaseBusyError(
                f"the database stayed locked by other writes for more than "
                f"{self.lock_wait:g} s; nothing was written"
            )
        return self._store(items, left, score)

    def close(self) -> None:
        """Finish what was handed over and stop the thread."""
        self._closed = True
        self._thread.shutdown(wait=True)


def _settle(future: asyncio.Future[CaptureOut], outcome: CaptureOut | BaseException) -> None:
    if future.done():  # the client went away
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
