"""The database engine: where the database is, how SQLite is set up, and what errors mean.

SQLite is opened in WAL mode (readers never wait for the writer), with a 30 s busy timeout and
foreign keys on. Write transactions start with ``BEGIN IMMEDIATE``: the write lock is taken up
front, so two processes writing at once queue on the busy timeout instead of failing with
"database is locked" when a read lock cannot be upgraded. A SQLite file is checked before
anything writes to it (``check_sqlite_file``). A ``postgresql+psycopg://`` URL selects
PostgreSQL (the ``simeval[postgres]`` extra).

>>> resolve_db_url(":memory:")
'sqlite://'
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from simeval.errors import InvalidInput, SimevalError

BUSY_TIMEOUT_S = 30.0
# how often a write that found the database locked past the busy timeout is tried in all
LOCK_RETRIES = 3
# a SQLite file up to this size has every page checked when it is opened
QUICK_CHECK_BYTES = 64 * 1024 * 1024


# what a driver error can be, raised through SQLAlchemy or by the driver itself (the capture
# path writes through the driver): ``database_problem`` tells whether it is about the database
DRIVER_ERRORS: tuple[type[Exception], ...] = (DBAPIError, sqlite3.DatabaseError)


class DatabaseBusyError(SimevalError):
    """Another process held the database's write lock for longer than the busy timeout."""

    status_code = 503


def default_db_path() -> Path:
    """The per-user default database file: ``<user data dir>/simeval/simeval.db``.

    On Linux that is ``~/.local/share/simeval/simeval.db`` (``$XDG_DATA_HOME`` is honoured).
    """
    import platformdirs

    return Path(platformdirs.user_data_dir("simeval", appauthor=False)) / "simeval.db"


def resolve_db_url(db: str | os.PathLike[str] | None = None) -> str:
    """The SQLAlchemy URL for ``db``: a file path, a URL, or None.

    None means the environment variable ``SIMEVAL_DATABASE_URL``, else the per-user default file
    (``default_db_path()``). ``:memory:`` is a private in-memory SQLite database.

    >>> resolve_db_url("postgresql+psycopg://u@localhost/evals")
    'postgresql+psycopg://u@localhost/evals'
    >>> resolve_db_url(":memory:")
    'sqlite://'
    """
    if db is None:
        db = os.environ.get("SIMEVAL_DATABASE_URL") or None
        if db is None:
            path = default_db_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            return f"sqlite:///{path}"
    value = os.fspath(db)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("the database path is empty")
    if "://" in value:
        return value
    if value == ":memory:":
        return "sqlite://"
    return f"sqlite:///{Path(value).expanduser().resolve()}"


def sqlite_file(url: str) -> str | None:
    """The file of a SQLite URL: its path, ``""`` for an in-memory database, None for any other
    backend.

    >>> sqlite_file("sqlite:////tmp/evals.db"), sqlite_file("sqlite://")
    ('/tmp/evals.db', '')
    >>> sqlite_file("postgresql+psycopg://u@localhost/evals") is None
    True
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    return "" if database == ":memory:" else database


def describe_url(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _sqlite_connect(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's implicit BEGIN is deferred)
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.execute("PRAGMA journal_mode = WAL")
    # WAL + NORMAL: a commit survives a crash of the process; only a power cut can lose the
    # last transactions, never corrupt the file
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get("simeval_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


# what a driver says when the database cannot serve now (SQLite, psycopg, the server's own
# messages while it stops, restarts or recovers); the first line of its message is kept
_OUTAGES = (
    "database or disk is full",
    "disk i/o error",  # SQLite's word for a write the disk refused
    "no space left on device",
    "disk quota exceeded",
    "connection refused",
    "could not connect",
    "connection failed",
    "connection is closed",
    "connection is lost",
    "connection is bad",  # psycopg, once the server went away under a pooled connection
    "connection to server",  # ... at "127.0.0.1", port 5432 failed / was lost
    "could not receive data",
    "could not send data",
    "network is unreachable",
    "no route to host",
    "connection timeout",
    "server closed the connection",
    "terminating connection",
    "the database system is",  # ... shutting down / starting up / in recovery mode
    "consuming input failed",
    "sending query failed",
    "ssl connection has been closed",
    "no connection to the server",
    "cannot execute",  # ... in a read-only transaction (a standby after a failover)
)


def outage_problem(exc: BaseException) -> str | None:
    """What a driver error says of an outage (the server down or restarting, the disk full)
    in a few words, never with the statement or its parameters; None for any other error."""
    driver = getattr(exc, "orig", None) or exc
    # only the driver's errors of the connection or the server (OperationalError,
    # InterfaceError in DB-API terms), never one whose message may quote stored data
    kinds = {cls.__name__ for cls in type(driver).__mro__}
    if not kinds & {"OperationalError", "InterfaceError"}:
        return None
    text = str(driver).strip()
    first = text.splitlines()[0] if text else type(driver).__name__
    low = text.lower()
    if "disk is full" in low or "no space left" in low or "quota exceeded" in low:
        return f"is full ({first[:200]}); free some space, then try again"
    if any(marker in low for marker in _OUTAGES):
        return f"is unavailable ({first[:200]}); try again shortly"
    return None


def database_problem(exc: BaseException) -> str | None:
    """What a driver error says about the database itself (damaged, read-only, not a
    database, full, its server unavailable), in a few words; None for any other error."""
    outage = outage_problem(exc)
    if outage is not None:
        return outage
    text = str(getattr(exc, "orig", None) or exc).lower()
    if "malformed" in text or "file is not a database" in text or "corrupt" in text:
        return "is damaged (" + text.splitlines()[0] + "); restore it from a backup"
    if "readonly" in text or "read-only" in text:
        return "is read-only; simeval needs to write to it and its directory"
    if "unable to open database file" in text:
        return "cannot be opened (" + text.splitlines()[0] + ")"
    return None


def check_sqlite_file(path: Path) -> None:
    """Refuse a file that is not a simeval database before anything writes to it: a file
    that is not SQLite, a damaged one, another program's database, or one this process may
    not write. Read-only, so the file's bytes are untouched (the switch to WAL comes after).

    The file is read through SQLite only, never opened and closed by Python: closing any
    descriptor of a file drops every POSIX lock this process holds on it, so a plain read
    here would silently unlock a connection the process already has open to the same
    database, and another process could then checkpoint and delete the WAL under it.
    """
    if not path.exists():
        return
    where = str(path)
    if path.stat().st_size == 0:
        return
    import sqlite3

    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InvalidInput(f"database {where} cannot be opened ({exc})") from None
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "alembic_version" not in tables:
            shown = ", ".join(sorted(tables)[:3])
            raise InvalidInput(
                f"{where} is not a simeval database (it has tables {shown}... but no simeval "
                "schema revision); it was not changed"
            )
        if path.stat().st_size <= QUICK_CHECK_BYTES:
            # every page read once (milliseconds at this size); a larger file is checked as
            # it is read, and a damaged page found then is reported in one line the same way
            found = con.execute("PRAGMA quick_check(1)").fetchone()[0]
            if found != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed ({found})")
    except sqlite3.DatabaseError as exc:
        if "file is not a database" in str(exc).lower():  # SQLite's answer to a wrong header
            raise InvalidInput(f"{where} is not a simeval database (not a SQLite file)") from None
        problem = database_problem(exc) or f"cannot be read ({exc})"
        raise InvalidInput(f"database {where} {problem}") from None
    finally:
        con.close()
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        raise InvalidInput(
            f"database {where} is read-only (no write permission on the file or its "
            "directory); simeval needs to write to it"
        )


def make_engine(url: str) -> Engine:
    """An engine for ``url``, with SQLite set up for concurrent use (see the module doc)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InvalidInput(f"not a database path or URL: {url!r}") from None
    try:
        if parsed.get_backend_name() == "sqlite":
            database = parsed.database or ""
            memory = database in ("", ":memory:") or database.startswith("file::memory:")
            if not memory:
                path = Path(database)
                if path.is_dir():
                    raise InvalidInput(f"database path {database} is a directory, not a file")
                if not path.parent.is_dir():
                    raise InvalidInput(f"directory of the database does not exist: {path.parent}")
                check_sqlite_file(path)
            kwargs: dict[str, Any] = {
                "connect_args": {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
            }
            if memory:
                kwargs["poolclass"] = StaticPool
            engine = create_engine(parsed, **kwargs)
            event.listen(engine, "connect", _sqlite_connect)
            event.listen(engine, "begin", _sqlite_begin)
            return engine
        return create_engine(parsed, pool_pre_ping=True)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        raise InvalidInput(f"cannot open {describe_url(url)}: {exc}") from None


def is_locked(exc: OperationalError) -> bool:
    """Whether SQLAlchemy's error is SQLite's "locked" or "busy"."""
    return driver_locked(exc.orig)


def driver_locked(exc: BaseException | None) -> bool:
    """Whether a driver's own error (not wrapped by SQLAlchemy) is SQLite's "locked" or
    "busy": what a raw cursor raises when the write lock cannot be had."""
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text
