"""The SQL written below the ORM: driver-level inserts compiled once, and the dialect-specific
time buckets.

The capture's hot path and a run's rows insert through the driver (``insert_row``,
``bulk_insert``) with a statement SQLAlchemy compiled once per dialect, table and column set:
SQLAlchemy's per-statement and per-row work cost more than the statements. The SQL the service
builds otherwise is portable; ``bucket_start`` is the one expression that differs between
SQLite and PostgreSQL.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeAlias, cast

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    Integer,
    String,
    Table,
    Text,
    bindparam,
    case,
    func,
    insert,
    tuple_,
)
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement, ColumnElement

from simeval.errors import InvalidInput

_NATIVE = (
    Integer,
    Float,
    String,
    Text,
    Boolean,
)  # the drivers take these Python values as they are
_STREAMS = itertools.count(1)  # names of server-side cursors, unique in the process
BindProcessor: TypeAlias = Callable[[object], object]
"""How a dialect converts a column's Python value for the driver (``bind_processor``)."""

CompiledInsert: TypeAlias = tuple[str, list[str], list[BindProcessor | None]]
"""A statement compiled once: its SQL, its parameters' order, each column's processor."""


class ServerCursor(DBAPICursor, Protocol):
    """A psycopg named (server-side) cursor: it fetches ``itersize`` rows a round trip."""

    itersize: int


_BULK_CACHE: dict[tuple[str, str, tuple[str, ...]], CompiledInsert] = {}


def bind_processor(column: ColumnElement[object], dialect: Dialect) -> BindProcessor | None:
    """How ``dialect`` converts ``column``'s Python values before the driver sees them (a date
    to SQLAlchemy's text of it on SQLite, a JSON value to its text); None when none is needed."""
    return column.type.dialect_impl(dialect).bind_processor(dialect)


def stream_rows(conn: Connection, query: ClauseElement, chunk: int) -> Iterator[Sequence[Any]]:
    """The rows of the SELECT ``query`` read in ``conn``'s transaction, ``chunk`` at a time,
    straight from the driver: SQLAlchemy's work per row costs more than the database's on a
    large read (compare's sides, the export). Values come as the driver gives them (on SQLite
    dates and JSON as text, on PostgreSQL as Python values); memory stays bounded: on
    PostgreSQL a named, server-side cursor in binary form (bytea is not hex-encoded)."""
    dialect = conn.dialect
    compiled = query.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
    assert isinstance(compiled, SQLCompiler)  # a SELECT's compiler
    values = compiled.construct_params()
    bound: dict[str, object] = {}
    for name, value in values.items():  # each value as SQLAlchemy would bind it
        # an IN list's values are named after its parameter, ``ids_1`` -> ``ids_1_1``, ...
        param = compiled.binds.get(name)
        if param is None:
            param = compiled.binds[name.rpartition("_")[0]]
        process = param.type.dialect_impl(dialect).bind_processor(dialect)
        bound[name] = value if process is None else process(value)
    params: Sequence[object] | Mapping[str, object] = (
        tuple(bound[n] for n in compiled.positiontup or ()) if dialect.positional else bound
    )
    raw = conn.connection.dbapi_connection
    assert raw is not None  # a connection in a transaction holds its driver connection
    cur: DBAPICursor
    if dialect.name == "postgresql":
        named = cast(ServerCursor, raw.cursor(name=f"simeval_stream_{next(_STREAMS)}", binary=True))
        named.itersize = chunk
        cur = named
    else:
        cur = raw.cursor()
    try:
        cur.execute(str(compiled), params)
        while rows := cur.fetchmany(chunk):
            yield rows
    finally:
        cur.close()


def _compiled_insert(
    dialect: Dialect, table: Table, names: tuple[str, ...], returning: bool = False
) -> CompiledInsert:
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
        processors: list[BindProcessor | None] = []
        for n in names:
            col_type = table.c[n].type
            native = isinstance(col_type, _NATIVE) and not isinstance(col_type, JSON)
            processors.append(None if native else bind_processor(table.c[n], dialect))
        cached = (str(compiled), order, processors)
        _BULK_CACHE[key] = cached
    return cached


def insert_row(
    cursor: DBAPICursor, dialect: Dialect, table: Table, values: Mapping[str, object]
) -> int:
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
    params: Sequence[object] | Mapping[str, object] = (
        tuple(converted[n] for n in order) if dialect.positional else converted
    )
    cursor.execute(sql, params)
    row = cursor.fetchone()
    assert row is not None  # INSERT ... RETURNING gives the row's id
    return int(row[0])


def _compiled_upsert(dialect: Dialect, table: Table) -> CompiledInsert:
    """The conversation summary's upsert (``upsert_conversation``), compiled once per dialect."""
    key = (dialect.name, table.name + "+upsert", ())
    cached = _BULK_CACHE.get(key)
    if cached is None:
        names = tuple(c.name for c in table.c)
        from sqlalchemy.dialects import postgresql, sqlite

        pg = dialect.name == "postgresql"
        dialect_insert = postgresql.insert if pg else sqlite.insert
        # SQLite's min/max of two values are PostgreSQL's least/greatest
        low = func.least if pg else func.min
        high = func.greatest if pg else func.max
        t = table.c
        stmt = dialect_insert(table).values({n: bindparam(n) for n in names})
        new = stmt.excluded
        # a capture dated before the conversation's last turn (a log read late) does not
        # become its last turn: the later of (time, id) wins; every right-hand side reads the
        # row as it was before this update
        later = tuple_(new.last_at, new.last_capture_id) > tuple_(t.last_at, t.last_capture_id)
        stmt = stmt.on_conflict_do_update(
            index_elements=[t.conversation_id],
            set_={
                "turns": t.turns + new.turns,
                "first_at": low(t.first_at, new.first_at),
                "last_at": high(t.last_at, new.last_at),
                "last_capture_id": case((later, new.last_capture_id), else_=t.last_capture_id),
                "results": t.results + new.results,
                "passes": t.passes + new.passes,
            },
        )
        compiled = stmt.compile(dialect=dialect)
        order = list(compiled.positiontup or []) if dialect.positional else list(names)
        processors: list[BindProcessor | None] = []
        for n in names:
            native = isinstance(table.c[n].type, _NATIVE)
            processors.append(None if native else bind_processor(table.c[n], dialect))
        cached = (str(compiled), order, processors)
        _BULK_CACHE[key] = cached
    return cached


def upsert_conversation(
    cursor: DBAPICursor, dialect: Dialect, table: Table, values: Mapping[str, object]
) -> None:
    """Add a capture to its conversation's summary row (``conversations``, migration 0010)
    through a driver cursor, in the capture's transaction: ``values`` holds every column,
    the capture's own (``turns`` 1, its time as ``first_at`` and ``last_at``, its id as
    ``last_capture_id``, its result and pass counts). A new conversation's row is inserted;
    a stored one adds the turn, its counts, and its time if it is the latest."""
    sql, order, processors = _compiled_upsert(dialect, table)
    names = [c.name for c in table.c]
    converted = {
        n: (p(values[n]) if p is not None and values[n] is not None else values[n])
        for n, p in zip(names, processors, strict=True)
    }
    params: Sequence[object] | Mapping[str, object] = (
        tuple(converted[n] for n in order) if dialect.positional else converted
    )
    cursor.execute(sql, params)


def insert_rows(
    cursor: DBAPICursor,
    dialect: Dialect,
    table: Table,
    names: tuple[str, ...],
    rows: Sequence[tuple[object, ...]],
) -> None:
    """Insert ``rows`` (tuples in the order of ``names``) through a driver cursor with one
    cached statement (a capture's indexed metadata, ``capture_meta``): one ``executemany``,
    each column's value converted once when rows repeat it (a capture's time)."""
    if not rows:
        return
    sql, order, processors = _compiled_insert(dialect, table, names)
    convert = [(i, p) for i, p in enumerate(processors) if p is not None]
    if convert:
        seen: dict[tuple[int, object], object] = {}
        fixed = []
        for row in rows:
            r = list(row)
            for i, p in convert:
                v = r[i]
                if v is not None:
                    k = (i, v)
                    if k not in seen:
                        seen[k] = p(v)
                    r[i] = seen[k]
            fixed.append(tuple(r))
        rows = fixed
    if dialect.positional:
        if order != list(names):
            pick = operator.itemgetter(*(names.index(n) for n in order))
            rows = [pick(r) for r in rows]
        params: Sequence[Sequence[object]] | Sequence[Mapping[str, object]] = rows
    else:
        params = [dict(zip(names, r, strict=True)) for r in rows]
    if len(params) == 1:
        cursor.execute(sql, params[0])
    else:
        cursor.executemany(sql, params)


def bulk_insert(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    constants: Mapping[str, object] | None = None,
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
        converted: list[Sequence[object]] = []
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
            params: Sequence[Sequence[object]] | Sequence[Mapping[str, object]] = [
                tuple(r) + tail for r in rows
            ]
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


def bucket_start(
    dialect: str, bucket: str, column: ColumnElement[datetime]
) -> ColumnElement[object]:
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


def parse_bucket(value: object) -> datetime:
    """A bucket start as returned by ``bucket_start`` (a string on SQLite)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return datetime.fromisoformat(str(value))
