"""Who a request comes from, once users exist: the user behind an API key or a session, read
from the database at most ``ttl`` seconds earlier (default 1 s), so that a user disabled, a
role changed or a key replaced anywhere (the CLI, another worker) is in force on every worker
of a server within a second. Sign-in failures are counted per name (``SignInThrottle``).

Lookups are synchronous reads of one indexed row; the guard runs them off the event loop."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING, TypeVar

from starlette.concurrency import run_in_threadpool

from simeval.service.credentials import key_hash
from simeval.service.users import Identity

if TYPE_CHECKING:
    from simeval.service import Service

T = TypeVar("T")

TOUCH_EVERY_S = 60.0  # how often a user's "last used" is written, at most, per process
_MAX_CACHED = 10_000


class Identities:
    """The users of one service's database, cached for ``ttl`` seconds per lookup."""

    def __init__(self, service: Service, ttl: float = 1.0):
        self.service = service
        self.ttl = ttl
        self._lock = threading.Lock()
        self._exist: tuple[float, bool] | None = None
        self._by_key: dict[str, tuple[float, Identity | None]] = {}
        self._by_name: dict[str, tuple[float, Identity | None]] = {}
        self._touched: dict[str, float] = {}

    def _fresh(self, entry: tuple[float, object] | None) -> bool:
        return entry is not None and time.monotonic() - entry[0] < self.ttl

    def _peek(self, entry: tuple[float, T] | None) -> tuple[bool, T | None]:
        if entry is not None and self._fresh(entry):
            return True, entry[1]
        return False, None

    async def users_exist_now(self) -> bool:
        """``users_exist``, off the event loop when the database must be read."""
        hit, found = self._peek(self._exist)
        return bool(found) if hit else await run_in_threadpool(self.users_exist)

    async def by_key_now(self, key: str) -> Identity | None:
        """``by_key``, off the event loop when the database must be read."""
        hit, found = self._peek(self._by_key.get(key_hash(key)))
        return found if hit else await run_in_threadpool(self.by_key, key)

    async def by_name_now(self, name: str) -> Identity | None:
        """``by_name``, off the event loop when the database must be read."""
        hit, found = self._peek(self._by_name.get(name))
        return found if hit else await run_in_threadpool(self.by_name, name)

    def forget(self) -> None:
        """Drop everything cached: the next lookups read the database (after a change made
        through this process)."""
        with self._lock:
            self._exist = None
            self._by_key.clear()
            self._by_name.clear()

    def users_exist(self) -> bool:
        """Whether any user exists (then every request needs one)."""
        entry = self._exist
        if entry is not None and self._fresh(entry):
            return entry[1]
        found = self.service.users.has_users()
        self._exist = (time.monotonic(), found)
        return bool(found)

    def by_key(self, key: str) -> Identity | None:
        """The user whose API key is ``key``, or None."""
        digest = key_hash(key)
        entry = self._by_key.get(digest)
        if entry is not None and self._fresh(entry):
            return entry[1]
        found = self.service.users.identity_by_key(key)
        self._remember(self._by_key, digest, found)
        return found

    def by_name(self, name: str) -> Identity | None:
        """The user named ``name`` (a session's), or None."""
        entry = self._by_name.get(name)
        if entry is not None and self._fresh(entry):
            return entry[1]
        found = self.service.users.identity(name)
        self._remember(self._by_name, name, found)
        return found

    def _remember(
        self, cache: dict[str, tuple[float, Identity | None]], key: str, found: Identity | None
    ) -> None:
        with self._lock:
            if len(cache) >= _MAX_CACHED:
                cache.clear()
            cache[key] = (time.monotonic(), found)

    def due_touch(self, name: str) -> bool:
        """Whether ``seen(name)`` would write now (so the guard leaves the loop only then)."""
        last = self._touched.get(name)
        return last is None or time.monotonic() - last >= TOUCH_EVERY_S

    def seen(self, name: str) -> None:
        """Record that ``name`` made a request: its "last used" is written at most every
        ``TOUCH_EVERY_S`` seconds (not one write per request)."""
        now = time.monotonic()
        with self._lock:
            last = self._touched.get(name)
            if last is not None and now - last < TOUCH_EVERY_S:
                return
            if len(self._touched) >= _MAX_CACHED:
                self._touched.clear()
            self._touched[name] = now
        self.service.users.touch_user(name)


class SignInThrottle:
    """At most ``limit`` failed sign-ins per name in ``window`` seconds; past that, sign-ins
    of that name are refused until the oldest failure is ``window`` seconds old."""

    def __init__(self, limit: int = 10, window: float = 60.0):
        self.limit = limit
        self.window = window
        self._lock = threading.Lock()
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, name: str, now: float) -> deque[float]:
        failures = self._failures.setdefault(name, deque())
        while failures and now - failures[0] >= self.window:
            failures.popleft()
        return failures

    def wait(self, name: str) -> float:
        """Seconds before ``name`` may try again (0: now)."""
        now = time.monotonic()
        with self._lock:
            failures = self._recent(name, now)
            if len(failures) < self.limit:
                return 0.0
            return self.window - (now - failures[0])

    def failed(self, name: str) -> None:
        """Count a failed sign-in of ``name``."""
        now = time.monotonic()
        with self._lock:
            if len(self._failures) >= _MAX_CACHED:
                self._failures.clear()
            self._recent(name, now).append(now)
