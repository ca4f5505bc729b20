"""The store: SQLAlchemy 2 models, the database engine and its Alembic migrations.

Everything that touches SQL lives here; ``simeval.service`` is the only caller. SQLite is the
embedded default; PostgreSQL (``postgresql+psycopg://...``, the ``simeval[postgres]`` extra) is
the team store, tested by the same suites. The SQL the service builds is portable; the
dialect-specific pieces (the trend's time buckets, the driver-level inserts, the capture lock)
are in this module.

On PostgreSQL, reads run at REPEATABLE READ (one snapshot per read, as SQLite's WAL gives), and
every capture transaction holds a shared transaction-level advisory lock (``CAPTURE_LOCK``)
that the trend rollup takes exclusively: ids come from a sequence and concurrent transactions
can commit them out of order, so the rollup must not move its watermark past an id whose
capture is still uncommitted. Under the exclusive lock no capture transaction is open, and any
later capture draws a larger id.

SQLite is opened in WAL mode (readers never wait for the writer), with a 30 s busy timeout and
foreign keys on. Write transactions start with ``BEGIN IMMEDIATE``: the write lock is taken up
front, so two processes writing at once queue on the busy timeout instead of failing with
"database is locked" when a read lock cannot be upgraded.

Schema changes are Alembic migrations shipped inside the package (``simeval/migrations``) and
run on open: a new database is created at the newest revision, an older one is upgraded, and a
database whose revision this code does not know (written by a newer simeval) is refused.

>>> store = Store(resolve_db_url(":memory:"))
>>> store.revision() == head_revision()
True
"""

from __future__ import annotations

import operator
import os
import struct
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    inspect,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.elements import ColumnElement

from simeval.errors import InvalidInput, SimevalError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
BUSY_TIMEOUT_S = 30.0
_LOCK_RETRIES = 3
# the advisory lock key (any constant bigint) shared by captures and the trend rollup
CAPTURE_LOCK = 0x5133_E7A1
MIGRATE_LOCK = 0x5133_E7A2
T = TypeVar("T")


class DatabaseBusyError(SimevalError):
    """Another process held the database's write lock for longer than the busy timeout."""

    status_code = 503


# -- models -------------------------------------------------------------------------------------
class Base(DeclarativeBase):
    """Declarative base with a naming convention, so migrations name constraints the same
    way on every backend."""

    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class Eval(Base):
    """An eval definition: the current version's fields, plus status and counters."""

    __tablename__ = "evals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    type: Mapped[str] = mapped_column(String(32), default="similarity")
    status: Mapped[str] = mapped_column(String(16), default="draft")
    version: Mapped[int] = mapped_column(Integer, default=1)
    # "references" is an SQL keyword; the column gets a name no dialect has to quote
    references: Mapped[list[str]] = mapped_column("reference_answers", JSON)
    threshold: Mapped[float] = mapped_column(Float)
    input_scope: Mapped[str | None] = mapped_column(Text, nullable=True)
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    fingerprint: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    # the version that scores captures while a newer one is pending (migration 0004); None:
    # the current version
    active_version: Mapped[int | None] = mapped_column(Integer, nullable=True)


class EvalVersion(Base):
    """One version of an eval, kept forever, with what changed from the previous one."""

    __tablename__ = "eval_versions"
    __table_args__ = (UniqueConstraint("eval_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    eval_id: Mapped[int] = mapped_column(ForeignKey("evals.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    references: Mapped[list[str]] = mapped_column("reference_answers", JSON)
    threshold: Mapped[float] = mapped_column(Float)
    input_scope: Mapped[str | None] = mapped_column(Text, nullable=True)
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    fingerprint: Mapped[str] = mapped_column(String(64))
    changes: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class EvalTest(Base):
    """A dry run of an eval version on a sample input and output."""

    __tablename__ = "eval_tests"
    __table_args__ = (Index("ix_eval_tests_eval_id_version", "eval_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    eval_id: Mapped[int] = mapped_column(ForeignKey("evals.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    input: Mapped[str] = mapped_column(Text)
    output: Mapped[str] = mapped_column(Text)
    score: Mapped[float] = mapped_column(Float)
    passed: Mapped[bool] = mapped_column(Boolean)
    threshold: Mapped[float] = mapped_column(Float)
    matched_index: Mapped[int] = mapped_column(Integer)
    explanation: Mapped[dict[str, Any]] = mapped_column(JSON)
    fingerprint: Mapped[str] = mapped_column(String(64))
    in_scope: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class Capture(Base):
    """One engine response."""

    __tablename__ = "captures"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    input: Mapped[str] = mapped_column(Text)
    output: Mapped[str] = mapped_column(Text)
    conversation_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    meta: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON, nullable=True)
    captured_at: Mapped[datetime] = mapped_column(DateTime)
    evaluated: Mapped[bool] = mapped_column(Boolean)
    # the capture's results, packed (``pack_results``; migration 0003): one row written per
    # capture however many evals scored it, so a capture's cost does not grow with the evals
    # or scatter writes across an index per eval
    scores: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    # a client-given key (migration 0004): a retried or replayed capture is stored once
    capture_key: Mapped[str | None] = mapped_column(String(200), nullable=True)


class Run(Base):
    """A batch of results scored together from a data-set file."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(Text)
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # running, complete or interrupted (migration 0004), with the last sign of life
    status: Mapped[str] = mapped_column(String(16), default="complete", server_default="complete")
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    # its rows' count, passed count and sum of scores, kept by every write of its rows in the
    # same transaction (migration 0005): listing runs reads these, not every row; null for a
    # run whose rows were written otherwise (then they are counted)
    results_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    passed_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    score_sum: Mapped[float | None] = mapped_column(Float, nullable=True)


class Result(Base):
    """One scored data-set row of a run (``id`` "r<id>" in the service).

    A run's row carries its own ``input``, ``output``, ``reference`` and ``explanation``.
    Captured results are not rows here: they are packed on their capture (``Capture.scores``,
    since migration 0003; ``capture_id`` is no longer written). The automated ``score`` and
    ``passed`` never change; a review overrides them in every view.
    """

    __tablename__ = "results"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    capture_id: Mapped[int | None] = mapped_column(
        ForeignKey("captures.id", ondelete="CASCADE"), nullable=True
    )
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), nullable=True
    )
    eval_id: Mapped[int | None] = mapped_column(ForeignKey("evals.id"), nullable=True)
    eval_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    eval_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    score: Mapped[float] = mapped_column(Float)
    passed: Mapped[bool] = mapped_column(Boolean)
    threshold: Mapped[float] = mapped_column(Float)
    fingerprint: Mapped[str] = mapped_column(String(64))
    matched_index: Mapped[int] = mapped_column(Integer)
    input: Mapped[str | None] = mapped_column(Text, nullable=True)
    output: Mapped[str | None] = mapped_column(Text, nullable=True)
    reference: Mapped[str | None] = mapped_column(Text, nullable=True)
    explanation: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)


results_table = cast(Table, Result.__table__)
captures_table = cast(Table, Capture.__table__)
_results = results_table.c
Index("ix_captures_capture_key", captures_table.c.capture_key, unique=True)
Index("ix_captures_captured_at", captures_table.c.captured_at)
Index("ix_runs_created_at", Run.__table__.c.created_at)
# Only run rows carry a run id: a partial index costs captures nothing.
Index(
    "ix_results_run_id",
    _results.run_id,
    sqlite_where=_results.run_id.isnot(None),
    postgresql_where=_results.run_id.isnot(None),
)
# Added by migration 0002: listing newest first. (Its per-eval index went in 0003: every
# capture wrote one entry per eval into pages scattered across it.)
Index("ix_results_created_at", _results.created_at)
Index("ix_captures_conversation_id", captures_table.c.conversation_id)


class Review(Base):
    """A person's override of a result's score (one per result; a new review replaces it).

    ``result_key`` is the result's id as the service shows it: "<capture>-<eval>" for a
    captured result (``capture_id``, ``eval_id`` set), "r<row>" for a run row (``result_id``).
    """

    __tablename__ = "reviews"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    result_id: Mapped[int | None] = mapped_column(
        ForeignKey("results.id", ondelete="CASCADE"), unique=True, nullable=True
    )
    result_key: Mapped[str] = mapped_column(String(64), unique=True)
    capture_id: Mapped[int | None] = mapped_column(
        ForeignKey("captures.id", ondelete="CASCADE"), nullable=True
    )
    eval_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    score: Mapped[float] = mapped_column(Float)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime)


Index("ix_reviews_capture_id", Review.__table__.c.capture_id)


class TrendRollup(Base):
    """Captured results summed per UTC hour, eval, eval version and scorer fingerprint.

    Kept by ``roll_up`` from the captures after a watermark (the setting ``rollup_upto``, the
    last capture id summed), so a capture writes nothing here; a trend reads a few hundred of
    these rows instead of every result. Automated scores only: reviews are applied on read.
    """

    __tablename__ = "trend_rollup"

    bucket: Mapped[datetime] = mapped_column(DateTime, primary_key=True)
    eval_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    eval_version: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    total: Mapped[float] = mapped_column(Float)
    passes: Mapped[int] = mapped_column(Integer)


class Setting(Base):
    """A key/value setting (added by migration 0002); values are JSON."""

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON, nullable=True)


# -- URLs and engines -----------------------------------------------------------------------------
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


def describe_url(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
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


QUICK_CHECK_BYTES = 64 * 1024 * 1024


def database_problem(exc: BaseException) -> str | None:
    """What a driver error says about the database file itself (damaged, read-only, not a
    database), in a few words; None for any other error."""
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
    return _driver_locked(exc.orig)


def _driver_locked(exc: BaseException | None) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text


# -- migrations -----------------------------------------------------------------------------------
def alembic_config(connection: Connection | None = None) -> Any:
    """An Alembic ``Config`` for the packaged migrations, bound to ``connection``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = connection
    return cfg


# The newest migration's id, known without reading the migration scripts (Alembic's import
# and the scripts' parse cost ~0.1 s of every process that opens a database at its head);
# tests hold it equal to ``head_revision()``.
HEAD_REVISION = "0005"


def head_revision() -> str:
    """The newest schema revision this code knows (read from the migration scripts)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def _known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def _current_revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


def _stored_revision(conn: Connection) -> str | None:
    """``_current_revision`` without importing Alembic: the one row of its version table,
    None without the table (or with other than one row: Alembic then decides)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    return str(rows[0][0]) if len(rows) == 1 else None


def upgrade(conn: Connection, revision: str = "head") -> None:
    """Run the packaged migrations on ``conn`` up to ``revision`` (in the caller's transaction)."""
    from alembic import command

    command.upgrade(alembic_config(conn), revision)


# -- bulk insert ----------------------------------------------------------------------------------
_NATIVE = (
    Integer,
    Float,
    String,
    Text,
    Boolean,
)  # the drivers take these Python values as they are
_BULK_CACHE: dict[tuple[str, str, tuple[str, ...]], tuple[str, list[str], list[Any]]] = {}


def _compiled_insert(
    dialect: Any, table: Table, names: tuple[str, ...], returning: bool = False
) -> tuple[str, list[str], list[Any]]:
    """An INSERT of ``names`` compiled once per dialect: SQL, parameter order, and the bind
    processor of each column that needs one (dates, JSON; None for plain values)."""
    key = (dialect.name, table.name + ("+id" if returning else ""), names)
    cached = _BULK_CACHE.get(key)
    if cached is None:
        stmt = insert(table).values({n: bindparam(n) for n in names})
        if returning:
            stmt = stmt.returning(table.c.id)
        compiled = stmt.compile(dialect=dialect)
        order = list(compiled.positiontup or []) if dialect.positional else list(names)
        processors = []
        for n in names:
            col_type = table.c[n].type
            native = isinstance(col_type, _NATIVE) and not isinstance(col_type, JSON)
            processors.append(None if native else col_type._cached_bind_processor(dialect))
        cached = (str(compiled), order, processors)
        _BULK_CACHE[key] = cached
    return cached


def insert_row(cursor: Any, dialect: Any, table: Table, values: Mapping[str, Any]) -> int:
    """Insert one row through a driver cursor with a cached statement; returns its ``id``.

    The capture's hot path: the same work as an ORM or Core insert without compiling or
    processing the statement again on each call.
    """
    names = tuple(values)
    sql, order, processors = _compiled_insert(dialect, table, names, returning=True)
    converted = {
        n: (p(values[n]) if p is not None and values[n] is not None else values[n])
        for n, p in zip(names, processors, strict=True)
    }
    params: Any = tuple(converted[n] for n in order) if dialect.positional else converted
    cursor.execute(sql, params)
    return int(cursor.fetchone()[0])


def bulk_insert(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    constants: Mapping[str, Any] | None = None,
) -> int:
    """Insert many rows with one driver-level ``executemany``; returns the row count.

    ``rows`` are tuples in the order of ``columns``; ``constants`` are values shared by every
    row (bound once). SQLAlchemy's per-row parameter processing is the cost this avoids: the
    values of plain columns (numbers, text, booleans) go to the driver as they are, and only
    columns whose type needs conversion (dates, JSON) are converted, once per value.
    """
    if not rows:
        return 0
    const = dict(constants or {})
    names = tuple(columns) + tuple(const)
    dialect = conn.dialect
    sql, order, processors = _compiled_insert(dialect, table, names)
    ncols = len(columns)
    const_values = []
    for i, n in enumerate(const, start=ncols):
        proc = processors[i]
        value = const[n]
        const_values.append(proc(value) if proc is not None and value is not None else value)
    row_procs = [(i, p) for i, p in enumerate(processors[:ncols]) if p is not None]
    if row_procs:
        converted: list[Sequence[Any]] = []
        for row in rows:
            r = list(row)
            for i, p in row_procs:
                if r[i] is not None:
                    r[i] = p(r[i])
            converted.append(r)
        rows = converted
    tail = tuple(const_values)
    if dialect.positional:
        position = {n: i for i, n in enumerate(names)}
        if order == list(names):
            params: list[Any] = [tuple(r) + tail for r in rows]
        else:
            idx = [position[n] for n in order]
            if len(idx) == 1:  # itemgetter of one index gives the value, not a tuple
                params = [((tuple(r) + tail)[idx[0]],) for r in rows]
            else:
                pick = operator.itemgetter(*idx)
                params = [pick(tuple(r) + tail) for r in rows]
    else:
        params = [dict(zip(names, tuple(r) + tail, strict=True)) for r in rows]
    conn.exec_driver_sql(sql, params)
    return len(rows)


# -- packed capture results -------------------------------------------------------------------
PACK_VERSION = 1
_PACK_HEAD = struct.Struct("<BBHI")  # format version, 0, fingerprints, results


@dataclass(frozen=True)
class PackedResults:
    """A capture's results, column by column (``unpack_results``). Entry ``i`` is one eval's
    result: ``eval_ids[i]``, ``versions[i]``, ``scores[i]``, ... ``fingerprints[fp_index[i]]``.
    """

    eval_ids: Sequence[int]
    versions: Sequence[int]
    scores: Sequence[float]
    thresholds: Sequence[float]
    matched: Sequence[int]
    passed: bytes
    fp_index: bytes
    fingerprints: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.eval_ids)

    def position(self, eval_id: int) -> int:
        """The entry of ``eval_id``, or -1."""
        try:
            return list(self.eval_ids).index(eval_id)
        except ValueError:
            return -1

    def rows(self) -> Iterator[tuple[int, int, float, bool, float, int, str]]:
        """(eval id, version, score, passed, threshold, matched index, fingerprint) per entry."""
        fps = self.fingerprints
        for i in range(len(self.eval_ids)):
            yield (
                self.eval_ids[i],
                self.versions[i],
                self.scores[i],
                bool(self.passed[i]),
                self.thresholds[i],
                self.matched[i],
                fps[self.fp_index[i]],
            )


def _le(arr: array[Any]) -> bytes:
    if sys.byteorder != "little":  # pragma: no cover - big-endian machines
        arr = array(arr.typecode, arr)
        arr.byteswap()
    return arr.tobytes()


def pack_parts(
    fingerprints: Sequence[str],
    eval_ids: bytes,
    versions: bytes,
    scores: bytes,
    thresholds: bytes,
    matched: bytes,
    passed: bytes,
    fp_index: bytes,
) -> bytes:
    """The stored form from its columns, each already in its little-endian array form
    (int64 ids, int32 versions, float64 scores and thresholds, int32 matched, uint8 passed and
    fingerprint index): the capture's hot path builds them without a per-result object."""
    n = len(passed)
    head = [_PACK_HEAD.pack(PACK_VERSION, 0, len(fingerprints), n)]
    for fp in fingerprints:
        raw = fp.encode("ascii")
        head.append(bytes((len(raw),)) + raw)
    return b"".join((*head, eval_ids, versions, scores, thresholds, matched, passed, fp_index))


def pack_results(rows: Iterable[tuple[int, int, float, bool, float, int, str]]) -> bytes:
    """Pack (eval id, version, score, passed, threshold, matched index, fingerprint) rows.

    >>> unpack_results(pack_results([(3, 1, 0.5, False, 0.8, 0, "abc")])).scores[0]
    0.5
    """
    rows = list(rows)
    fps: dict[str, int] = {}
    for r in rows:
        fps.setdefault(r[6], len(fps))
    if len(fps) > 255:
        raise InvalidInput("more than 255 scorer fingerprints in one capture")
    return pack_parts(
        list(fps),
        _le(array("q", (r[0] for r in rows))),
        _le(array("i", (r[1] for r in rows))),
        _le(array("d", (r[2] for r in rows))),
        _le(array("d", (r[4] for r in rows))),
        _le(array("i", (r[5] for r in rows))),
        bytes(bool(r[3]) for r in rows),
        bytes(fps[r[6]] for r in rows),
    )


def packed_fingerprints(blob: bytes, nfp: int) -> tuple[list[str], int]:
    """The ``nfp`` scorer fingerprints of a packed capture, and where its columns start."""
    at = _PACK_HEAD.size
    fps = []
    for _ in range(nfp):
        size = blob[at]
        fps.append(blob[at + 1 : at + 1 + size].decode("ascii"))
        at += 1 + size
    return fps, at


def unpack_results(blob: bytes | None) -> PackedResults:
    """The columns of a packed capture (an empty set for ``None``)."""
    if not blob:
        return PackedResults((), (), (), (), (), b"", b"", ())
    blob = bytes(blob)
    version, _, nfp, n = _PACK_HEAD.unpack_from(blob)
    if version != PACK_VERSION:
        raise SimevalError(f"packed results of format {version}, unknown to this simeval")
    fps, at = packed_fingerprints(blob, nfp)
    cols: list[Any] = []
    for code, width in (("q", 8), ("i", 4), ("d", 8), ("d", 8), ("i", 4)):
        arr = array(code)
        arr.frombytes(blob[at : at + n * width])
        if sys.byteorder != "little":  # pragma: no cover - big-endian machines
            arr.byteswap()
        cols.append(arr)
        at += n * width
    passed, fp_index = blob[at : at + n], blob[at + n : at + 2 * n]
    ids, versions, scores, thresholds, matched = cols
    return PackedResults(ids, versions, scores, thresholds, matched, passed, fp_index, tuple(fps))


# -- dialect-specific SQL -------------------------------------------------------------------------
def bucket_start(dialect: str, bucket: str, column: Any) -> ColumnElement[Any]:
    """SQL for the start of the UTC hour, day or week (Monday) that ``column`` falls in."""
    if dialect == "sqlite":
        if bucket == "hour":
            return func.strftime("%Y-%m-%d %H:00:00", column)
        if bucket == "day":
            return func.strftime("%Y-%m-%d 00:00:00", column)
        # 'weekday 0' moves forward to Sunday (or stays), then back to that week's Monday
        return func.strftime("%Y-%m-%d 00:00:00", column, "weekday 0", "-6 days")
    if dialect == "postgresql":
        return func.date_trunc(bucket, column)
    raise InvalidInput(f"trends are not supported on the {dialect} backend")


def parse_bucket(value: Any) -> datetime:
    """A bucket start as returned by ``bucket_start`` (a string on SQLite)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return datetime.fromisoformat(str(value))


# -- the store ------------------------------------------------------------------------------------
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
        self._raw: Any = None
        self._raw_busy_ms = int(BUSY_TIMEOUT_S * 1000)
        self._raw_lock = threading.Lock()
        self._keep_raw = self.dialect == "sqlite" and not isinstance(self.engine.pool, StaticPool)
        try:
            self._migrate()
        except BaseException:
            self.engine.dispose()
            raise

    def _where(self) -> str:
        return describe_url(self.url).removeprefix("sqlite:///")

    def _migrate(self) -> None:
        try:
            with self.engine.connect() as conn:
                current = _stored_revision(conn)
                conn.rollback()
            if current == HEAD_REVISION:
                return
            head = head_revision()
            for attempt in range(_LOCK_RETRIES):
                try:
                    with self.writer.connect() as conn, conn.begin():
                        if self.dialect == "postgresql":
                            # processes opening a new database at once migrate one at a time
                            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK})")
                        # read again under the write lock: another process may have migrated
                        current = _current_revision(conn)
                        if current == head:
                            return
                        if current is None:
                            tables = set(inspect(conn).get_table_names())
                            if tables - {"alembic_version"}:
                                raise InvalidInput(
                                    f"{self._where()} is not a simeval database "
                                    f"(it has tables {', '.join(sorted(tables)[:3])}... "
                                    "but no simeval schema revision)"
                                )
                        elif current not in _known_revisions():
                            raise InvalidInput(
                                f"database {self._where()} has schema revision {current!r}, "
                                "unknown to this simeval (a newer simeval wrote it); upgrade "
                                "simeval to open it - the database was not changed"
                            )
                        upgrade(conn, "head")
                    return
                except OperationalError as exc:
                    if not is_locked(exc) or attempt == _LOCK_RETRIES - 1:
                        raise
        except OperationalError as exc:
            if is_locked(exc):
                raise DatabaseBusyError(
                    f"database {self._where()} is locked by another process"
                ) from None
            problem = database_problem(exc)
            if problem:
                raise InvalidInput(f"database {self._where()} {problem}") from None
            raise InvalidInput(f"cannot open database {self._where()}: {exc.orig}") from None
        except DatabaseError as exc:
            raise InvalidInput(
                f"cannot open database {self._where()}: {exc.orig} (is it a SQLite file?)"
            ) from None

    def revision(self) -> str | None:
        """The schema revision stored in the database."""
        with self.engine.connect() as conn:
            return _current_revision(conn)

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read-only session (a consistent snapshot; never waits for writers in WAL)."""
        with Session(self.reader, expire_on_commit=False) as session:
            yield session

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
            raise

    @contextmanager
    def raw_write(self, lock_wait: float | None = None) -> Iterator[Any]:
        """A driver cursor in a write transaction: the capture's hot path, where SQLAlchemy's
        per-statement work cost more than the statements. Committed at the end, rolled back
        on error. Waiting for the write lock is retried, then ``DatabaseBusyError``.

        ``lock_wait`` (seconds) bounds the wait for the lock instead, with one attempt: a
        server answers 503 with Retry-After rather than hold a request for minutes. Nothing
        is written when the lock is not had."""
        if not self._keep_raw:  # an in-memory database: its one connection, from the pool
            raw = self.engine.raw_connection()
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
            raw, self._raw = self._raw, None
            if raw is None:
                raw = self.engine.raw_connection()
            try:
                yield from self._raw_transaction(raw, lock_wait, self)
            finally:  # kept after an error too: the transaction was rolled back
                self._raw = raw
        finally:
            self._raw_lock.release()

    def _busy_timeout(self, cur: Any, ms: int, kept: Store | None) -> None:
        if kept is None or kept._raw_busy_ms != ms:
            cur.execute(f"PRAGMA busy_timeout = {ms}")
            if kept is not None:
                kept._raw_busy_ms = ms

    def _raw_transaction(
        self, raw: Any, lock_wait: float | None, kept: Store | None
    ) -> Iterator[Any]:
        """One write transaction on ``raw`` (see ``raw_write``); ``kept`` when the connection
        is kept between transactions (its busy timeout is then set only when it changes)."""
        cur = raw.cursor()
        try:
            if self.dialect == "sqlite":
                attempts = _LOCK_RETRIES if lock_wait is None else 1
                wait_ms = (
                    int(BUSY_TIMEOUT_S * 1000)
                    if lock_wait is None
                    else max(1, int(lock_wait * 1000))
                )
                self._busy_timeout(cur, wait_ms, kept)
                try:
                    for attempt in range(attempts):
                        try:
                            cur.execute("BEGIN IMMEDIATE")
                            break
                        except Exception as exc:
                            if not _driver_locked(exc):
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
            elif self.dialect == "postgresql":
                if lock_wait is not None:
                    cur.execute(f"SET LOCAL lock_timeout = {max(1, int(lock_wait * 1000))}")
                # see the module doc: the rollup waits for open captures
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
            try:
                yield cur
                raw.commit()
            except BaseException:
                raw.rollback()
                raise
        finally:
            cur.close()

    def run_write(self, fn: Callable[[Session], T]) -> T:
        """``fn(session)`` in a write transaction, retried when the lock could not be taken."""
        for attempt in range(_LOCK_RETRIES):
            try:
                with self.write() as session:
                    return fn(session)
            except DatabaseBusyError:
                if attempt == _LOCK_RETRIES - 1:
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
