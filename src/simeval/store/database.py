"""The store: one database, its engine, its migrations on open, and its transactions.

On PostgreSQL, reads run at REPEATABLE READ (one snapshot per read, as SQLite's WAL gives), and
every capture transaction holds a shared transaction-level advisory lock (``CAPTURE_LOCK``)
that the trend rollup takes exclusively: ids come from a sequence and concurrent transactions
can commit them out of order, so the rollup must not move its watermark past an id whose
capture is still uncommitted. Under the exclusive lock no capture transaction is open, and any
later capture draws a larger id.

On SQLite, write transactions take the write lock up front (``BEGIN IMMEDIATE``, see
``simeval.store.connection``); one waiting past the busy timeout is tried again, then fails with
``DatabaseBusyError`` having written nothing.

>>> from simeval.store.connection import resolve_db_url
>>> from simeval.store.migrate import head_revision
>>> store = Store(resolve_db_url(":memory:"))
>>> store.revision() == head_revision()
True
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import text
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.pool import PoolProxiedConnection, StaticPool

from simeval.errors import Unavailable
from simeval.store.connection import (
    BUSY_TIMEOUT_S,
    LOCK_RETRIES,
    DatabaseBusyError,
    describe_url,
    driver_locked,
    is_locked,
    make_engine,
    outage_problem,
)
from simeval.store.migrate import current_revision, migrate
from simeval.store.read_probe import reads_fail

# the advisory lock key (any constant bigint) shared by captures and the trend rollup
CAPTURE_LOCK = 0x5133_E7A1
T = TypeVar("T")

Tx = Session
"""An open transaction of the store, as ``Store.read()``, ``Store.write()`` and
``Store.run_write`` hand it out. Code outside ``simeval.store`` holds one only to pass it to the
store's functions: every query is written here."""


class Store:
    """One database: an engine, its migrations, and read/write transactions.

    ``read()`` and ``write()`` yield a ``Session``. A write transaction holds the database's
    write lock from its first statement (SQLite ``BEGIN IMMEDIATE``); keep it short.
    """

    def __init__(self, url: str):
        self.url = url
        self.engine = make_engine(url)
        self.writer = self.engine.execution_options(simeval_write=True)
        self.dialect = self.engine.dialect.name
        self.reader = (
            self.engine.execution_options(isolation_level="REPEATABLE READ")
            if self.dialect == "postgresql"
            else self.engine
        )
        # raw_write's connection, kept between transactions (not checked out of the pool and
        # reset each time), with the busy timeout last set on it; one raw write at a time
        self._raw: PoolProxiedConnection | None = None
        self._raw_busy_ms = int(BUSY_TIMEOUT_S * 1000)
        self._raw_lock = threading.Lock()
        self._keep_raw = self.dialect == "sqlite" and not isinstance(self.engine.pool, StaticPool)
        try:
            migrate(self.engine, self.writer, self._where())
        except BaseException:
            self.engine.dispose()
            raise

    def _where(self) -> str:
        return describe_url(self.url).removeprefix("sqlite:///")

    def revision(self) -> str | None:
        """The schema revision stored in the database."""
        with self.engine.connect() as conn:
            return current_revision(conn)

    def ping(self) -> None:
        """One cheap statement that reads the database (its schema revision, one row; a bare
        ``SELECT 1`` would not read a SQLite file): ``Unavailable`` when the database cannot
        answer now (its server down, its disk failing), a driver's error for anything else."""
        with self.read() as s:
            s.execute(text("SELECT 1 FROM alembic_version LIMIT 1"))

    def _unavailable(self, exc: BaseException) -> Unavailable | None:
        """``Unavailable`` naming the outage ``exc`` reports (the server down or restarting,
        the disk full), else None: one line, without the statement or its parameters."""
        problem = outage_problem(exc)
        if problem is None and self._disk_refuses_reads(exc):
            problem = "is unavailable (disk I/O error: its reads fail); try again shortly"
        return None if problem is None else Unavailable(f"database {self._where()} {problem}")

    def _disk_refuses_reads(self, exc: BaseException) -> bool:
        """Whether SQLite's "malformed" is a failing read of the disk, not a damaged file."""
        text = str(getattr(exc, "orig", None) or exc).lower()
        damage = "malformed" in text or "file is not a database" in text
        database = self.engine.url.database
        if not damage or self.dialect != "sqlite" or not database or database == ":memory:":
            return False
        return reads_fail(database)

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read-only session (a consistent snapshot; never waits for writers in WAL)."""
        try:
            with Session(self.reader, expire_on_commit=False) as session:
                yield session
        except Exception as exc:  # a driver's or SQLAlchemy's; outage_problem tells
            outage = self._unavailable(exc)
            if outage is None:
                raise
            raise outage from None

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session in a write transaction, committed at the end, rolled back on error."""
        try:
            with Session(self.writer, expire_on_commit=False) as session, session.begin():
                yield session
        except OperationalError as exc:
            if is_locked(exc):
                raise DatabaseBusyError(
                    f"database {self._where()} stayed locked by another process for more than "
                    f"{BUSY_TIMEOUT_S:.0f} s; nothing was written"
                ) from None
            outage = self._unavailable(exc)
            if outage is None:
                raise
            raise outage from None

    @contextmanager
    def raw_write(self, lock_wait: float | None = None) -> Iterator[DBAPICursor]:
        """A driver cursor in a write transaction: the capture's hot path, where SQLAlchemy's
        per-statement work cost more than the statements. Committed at the end, rolled back
        on error. Waiting for the write lock is retried, then ``DatabaseBusyError``.

        ``lock_wait`` (seconds) bounds the wait for the lock instead, with one attempt: a
        server answers 503 with Retry-After rather than hold a request for minutes. Nothing
        is written when the lock is not had."""
        if not self._keep_raw:  # an in-memory database: its one connection, from the pool
            raw = self._raw_connection()
            try:
                yield from self._raw_transaction(raw, lock_wait, None)
            finally:
                raw.close()
            return
        if not self._raw_lock.acquire(timeout=-1 if lock_wait is None else lock_wait):
            raise DatabaseBusyError(
                f"database {self._where()}: another write of this process held it for more "
                f"than {lock_wait:g} s; nothing was written"
            )
        try:
            kept, self._raw = self._raw, None
            if kept is None:
                kept = self._raw_connection()
            try:
                yield from self._raw_transaction(kept, lock_wait, self)
            finally:  # kept after an error too: the transaction was rolled back
                self._raw = kept
        finally:
            self._raw_lock.release()

    def _raw_connection(self) -> PoolProxiedConnection:
        """A driver connection from the pool; an outage (the server down) as ``Unavailable``:
        the pool raises the driver's own error here, unwrapped."""
        try:
            return self.engine.raw_connection()
        except Exception as exc:
            outage = self._unavailable(exc)
            if outage is None:
                raise
            raise outage from None

    def _busy_timeout(self, cur: DBAPICursor, ms: int, kept: Store | None) -> None:
        if kept is None or kept._raw_busy_ms != ms:
            cur.execute(f"PRAGMA busy_timeout = {ms}")
            if kept is not None:
                kept._raw_busy_ms = ms

    def _raw_transaction(
        self, raw: PoolProxiedConnection, lock_wait: float | None, kept: Store | None
    ) -> Iterator[DBAPICursor]:
        """One write transaction on ``raw`` (see ``raw_write``); ``kept`` when the connection
        is kept between transactions (its busy timeout is then set only when it changes)."""
        try:
            yield from self._raw_transaction_on(raw, lock_wait, kept)
        except Exception as exc:  # a driver's or SQLAlchemy's; outage_problem tells
            outage = self._unavailable(exc)
            if outage is None:
                raise
            if self.dialect != "sqlite":  # the connection is likely dead: not back to the pool
                with contextlib.suppress(Exception):
                    raw.invalidate()
            raise outage from None

    def _raw_transaction_on(
        self, raw: PoolProxiedConnection, lock_wait: float | None, kept: Store | None
    ) -> Iterator[DBAPICursor]:
        cur = raw.cursor()
        try:
            if self.dialect == "sqlite":
                self._begin_sqlite(cur, lock_wait, kept)
            elif self.dialect == "postgresql":
                self._begin_postgresql(raw, cur, lock_wait)
            try:
                yield cur
                raw.commit()
            except BaseException:
                raw.rollback()
                raise
        finally:
            cur.close()

    def _begin_sqlite(self, cur: DBAPICursor, lock_wait: float | None, kept: Store | None) -> None:
        """``BEGIN IMMEDIATE`` on a raw SQLite cursor, waiting up to the busy timeout (or
        ``lock_wait``) for the write lock, tried again (unless ``lock_wait``)."""
        attempts = LOCK_RETRIES if lock_wait is None else 1
        wait_ms = int(BUSY_TIMEOUT_S * 1000) if lock_wait is None else max(1, int(lock_wait * 1000))
        self._busy_timeout(cur, wait_ms, kept)
        try:
            for attempt in range(attempts):
                try:
                    cur.execute("BEGIN IMMEDIATE")
                    break
                except Exception as exc:
                    if not driver_locked(exc):
                        raise
                    if attempt == attempts - 1:
                        waited = BUSY_TIMEOUT_S if lock_wait is None else lock_wait
                        raise DatabaseBusyError(
                            f"database {self._where()} stayed locked by another "
                            f"process for more than {waited:g} s; nothing was written"
                        ) from None
                    time.sleep(0.05 * (attempt + 1))
        finally:
            if kept is None and lock_wait is not None:  # the pool's connection as it was
                cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")

    def _begin_postgresql(
        self, raw: PoolProxiedConnection, cur: DBAPICursor, lock_wait: float | None
    ) -> None:
        """The capture lock, shared (see the module doc: the rollup waits for open captures),
        waiting at most ``lock_wait`` when given."""
        if lock_wait is not None:
            cur.execute(f"SET LOCAL lock_timeout = {max(1, int(lock_wait * 1000))}")
        try:
            cur.execute(f"SELECT pg_advisory_xact_lock_shared({CAPTURE_LOCK})")
        except Exception as exc:
            raw.rollback()
            if "lock timeout" in str(exc).lower():
                raise DatabaseBusyError(
                    f"database {self._where()} stayed locked for more than "
                    f"{lock_wait:g} s; nothing was written"
                ) from None
            raise

    def run_write(self, fn: Callable[[Session], T]) -> T:
        """``fn(session)`` in a write transaction, retried when the lock could not be taken."""
        for attempt in range(LOCK_RETRIES):
            try:
                with self.write() as session:
                    return fn(session)
            except DatabaseBusyError:
                if attempt == LOCK_RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Release every pooled connection."""
        with self._raw_lock:
            raw, self._raw = self._raw, None
            if raw is not None:
                raw.close()
        self.engine.dispose()
