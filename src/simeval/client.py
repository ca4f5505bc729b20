"""``simeval.Client``: captures from a Python engine to a simeval server, never blocking it.

``client.capture(...)`` checks the capture, gives it a key and returns at once; a background
thread sends what has gathered to ``POST /api/captures/batch`` (up to 1,000 captures a
request), retrying with exponential backoff while the server is down or busy. Because every
capture carries its key from the start, a batch sent again after a lost answer is stored once:
each capture arrives exactly once. What is still queued is sent when the program exits
(``flush_timeout`` seconds at most) or when ``flush()`` is called.

A client made before ``fork`` (gunicorn ``--preload``, Celery's prefork pool,
``multiprocessing``) works in the child too: the child gets a sender thread of its own and
an empty queue (what the parent had queued is the parent's to send, so nothing is sent twice).
A child that ends with ``os._exit`` (a Celery worker, ``os.fork`` without ``sys.exit``) should
call ``flush()`` first; a ``multiprocessing`` child and a gunicorn worker are flushed at exit.

Example::

    import simeval

    client = simeval.Client("http://127.0.0.1:8000")
    client.capture("Capital of France?", "Paris.", conversation_id="c-1", metadata={"v": 2})
    client.flush()  # optional: wait until everything is stored

Only the standard library is used (``http.client``), so an engine adds no dependency.
"""

from __future__ import annotations

import atexit
import collections
import http.client
import json
import logging
import os
import random
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from datetime import UTC, date, datetime
from urllib.parse import urlsplit

from simeval.checks import check_capture, check_capture_key
from simeval.errors import InvalidInput
from simeval.keepalive import KeepAlive

log = logging.getLogger("simeval.client")

BATCH_PATH = "/api/captures/batch"
MAX_BATCH = 1000  # the server's limit per request


class Client:
    """Sends captures to the simeval server at ``url`` from a background thread.

    ``token``: the server's ``SIMEVAL_TOKEN``, if it has one. ``batch_size`` (at most 1,000)
    and ``max_batch_bytes`` bound one request (stay under the server's ``--max-body``);
    ``max_queue`` captures wait at most (more are dropped, counted in ``dropped``, and
    logged); a failed send is retried after 0.1 s, doubling up to ``max_retry_delay``;
    ``flush_timeout`` seconds are spent sending what is left at exit.

    >>> client = Client("http://127.0.0.1:9", flush_timeout=0)
    >>> key = client.capture("Capital of France?", "Paris.")
    >>> client.pending
    1
    >>> client.close(timeout=0)
    False
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        batch_size: int = MAX_BATCH,
        max_batch_bytes: int = 900_000,
        max_queue: int = 100_000,
        timeout: float = 30.0,
        max_retry_delay: float = 10.0,
        flush_timeout: float = 30.0,
    ):
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput(f"url must be http(s)://host[:port], not {url!r}")
        if not 1 <= batch_size <= MAX_BATCH:
            raise InvalidInput(f"batch_size must be in [1, {MAX_BATCH}], not {batch_size!r}")
        self.url = url.rstrip("/")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self.batch_size = batch_size
        self.max_batch_bytes = max_batch_bytes
        self.max_queue = max_queue
        self.timeout = timeout
        self.max_retry_delay = max_retry_delay
        self.flush_timeout = flush_timeout
        self.sent = 0  # captures the server acknowledged (stored now or before)
        self.dropped = 0  # captures given up: queue full, or refused by the server
        self._queue: collections.deque[bytes] = collections.deque()
        self._inflight = 0
        self._cond = threading.Condition()
        self._closing = False
        self._deadline = float("inf")  # when sending stops trying, once closing
        self._http = KeepAlive(parts._replace(path=parts.path + BATCH_PATH, query=""), timeout)
        self._thread = self._start_sender()
        ref = weakref.ref(self)
        self._exit_hook = lambda: _at_exit(ref)
        atexit.register(self._exit_hook)
        _CLIENTS.add(self)

    def _start_sender(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="simeval-client", daemon=True)
        thread.start()
        return thread

    def _after_fork_in_child(self) -> None:
        """In a forked child: the parent's sender thread does not exist here, and its lock
        may have been held at the fork. A fresh lock, an empty queue (the parent sends what
        it had queued), no connection (the socket is the parent's), and a new sender."""
        self._cond = threading.Condition()
        self._queue = collections.deque()
        self._inflight = 0
        self.sent = self.dropped = 0
        self._http.forget()  # not closed: closing would not touch the parent's, but is not ours
        self._thread = self._start_sender()  # closed already: it ends at once, queue empty
        util = sys.modules.get("multiprocessing.util")
        if util is not None:
            # a multiprocessing child ends with os._exit (no atexit): flush by its own exit
            # hook, registered once its bootstrap has cleared the parent's finalizers
            util.register_after_fork(self, _flush_at_child_exit)

    @property
    def pending(self) -> int:
        """Captures not yet acknowledged by the server."""
        with self._cond:
            return len(self._queue) + self._inflight

    def capture(
        self,
        input: str,
        output: str,
        conversation_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        *,
        capture_key: str | None = None,
        captured_at: datetime | date | str | None = None,
    ) -> str:
        """Queue one capture and return its key at once (a new random one unless given).

        Bad input (not text, too long, metadata that is not JSON) raises ``InvalidInput`` or
        ``InvalidType`` here, so that the server never refuses what was queued. The capture
        is dated now (or ``captured_at``), not when it reaches the server.
        """
        checked = check_capture(input, output, conversation_id, metadata, captured_at)
        key = check_capture_key(capture_key) or f"client-{uuid.uuid4().hex}"
        when = checked[4] or _utcnow()
        row = {
            "input": checked[0],
            "output": checked[1],
            "conversation_id": checked[2],
            "metadata": checked[3],
            "captured_at": when.isoformat() + "Z",
            "capture_key": key,
        }
        encoded = json.dumps(row, ensure_ascii=False, allow_nan=False).encode()
        with self._cond:
            if self._closing:
                raise InvalidInput("the client is closed")
            if len(self._queue) >= self.max_queue:
                self.dropped += 1
                log.warning("simeval client queue full (%d): a capture was dropped", self.max_queue)
                return key
            self._queue.append(encoded)
            self._cond.notify_all()
        return key

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued capture is acknowledged; False if ``timeout`` ran out."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queue or self._inflight:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.05 if left is None else min(left, 0.05))
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Send what is queued (``flush_timeout`` seconds at most by default) and stop;
        True when nothing was left unsent."""
        wait = self.flush_timeout if timeout is None else timeout
        with self._cond:
            if not self._closing:
                self._closing = True
                self._deadline = time.monotonic() + wait
            self._cond.notify_all()
        self._thread.join(max(wait, 0) + self.timeout + 1)
        atexit.unregister(self._exit_hook)
        with self._cond:
            left = len(self._queue) + self._inflight
        if left:
            log.warning("simeval client closed with %d captures unsent", left)
        return left == 0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the sending thread ------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return  # closing, nothing left
                batch: list[bytes] = []
                size = 0
                while self._queue and len(batch) < self.batch_size:
                    nxt = len(self._queue[0]) + 1
                    if batch and size + nxt > self.max_batch_bytes:
                        break
                    batch.append(self._queue.popleft())
                    size += nxt
                self._inflight = len(batch)
            done = self._deliver(batch)
            with self._cond:
                self._inflight = 0
                if not done:  # closing and out of time: what is left is given up
                    self._queue.extendleft(reversed(batch))
                    self._cond.notify_all()
                    return
                self._cond.notify_all()

    def _deliver(self, batch: list[bytes]) -> bool:
        """Send ``batch`` until the server has it (split when it is refused as too large or
        invalid); False when closing ran out of time."""
        delay = 0.1
        while True:
            status, detail = self._post(batch)
            if status in (200, 201):
                with self._cond:
                    self.sent += len(batch)
                return True
            if status in (400, 413, 422):
                if len(batch) == 1:
                    with self._cond:
                        self.dropped += 1
                    log.warning("simeval server refused a capture (%d): %s", status, detail)
                    return True
                half = len(batch) // 2
                return self._deliver(batch[:half]) and self._deliver(batch[half:])
            with self._cond:
                if self._closing and time.monotonic() + delay > self._deadline:
                    return False
            log.info("simeval server unavailable (%s); retrying in %.1f s", detail, delay)
            with self._cond:
                self._cond.wait_for(lambda: False, delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, self.max_retry_delay)

    def _post(self, batch: list[bytes]) -> tuple[int, str]:
        body = b'{"captures":[' + b",".join(batch) + b"]}"
        try:
            status, text, _ = self._http.post(body, self._headers)
        except (OSError, http.client.HTTPException) as exc:
            return 0, f"{type(exc).__name__}: {exc}"
        if status in (200, 201):
            return status, ""
        try:
            detail = str(json.loads(text).get("error", text[:200]))
        except (ValueError, AttributeError):
            detail = text[:200].decode("utf-8", "replace")
        return status, f"HTTP {status}: {detail}"


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _at_exit(ref: weakref.ref[Client]) -> None:
    client = ref()
    if client is not None:
        client.close()


# every live client, so that a forked child can restart each one's sender
_CLIENTS: weakref.WeakSet[Client] = weakref.WeakSet()


def _restart_in_child() -> None:
    for client in list(_CLIENTS):
        client._after_fork_in_child()


def _flush_at_child_exit(client: Client) -> None:
    from multiprocessing import util

    util.Finalize(None, _at_exit, args=(weakref.ref(client),), exitpriority=10)


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_restart_in_child)
