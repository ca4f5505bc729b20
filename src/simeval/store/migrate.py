"""The schema: Alembic migrations shipped inside the package, run when a database is opened.

A new database is created at the newest revision, an older one is upgraded, and a database
whose revision this code does not know (written by a newer simeval) is refused. A database
already at the head is recognised without importing Alembic or reading the migration scripts
(``HEAD_REVISION``): that costs ~0.1 s of every process that opens one.

The scripts are in ``simeval/store/migrations`` (``MIGRATIONS_DIR``); no ``alembic.ini`` is
needed, ``alembic_config`` builds the configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DatabaseError, OperationalError

from simeval.errors import InvalidInput
from simeval.store.connection import LOCK_RETRIES, DatabaseBusyError, database_problem, is_locked

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# the advisory lock key (any constant bigint) that processes migrating one PostgreSQL database
# at once take in turn
MIGRATE_LOCK = 0x5133_E7A2
# The newest migration's id, known without reading the migration scripts (Alembic's import
# and the scripts' parse cost ~0.1 s of every process that opens a database at its head);
# tests hold it equal to ``head_revision()``.
HEAD_REVISION = "0016"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic ``Config`` for the packaged migrations, bound to ``connection``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest schema revision this code knows (read from the migration scripts)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def known_revisions() -> set[str]:
    """Every schema revision of the migration scripts."""
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def current_revision(conn: Connection) -> str | None:
    """The schema revision stored in the database (None for a database without one)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


def stored_revision(conn: Connection) -> str | None:
    """``current_revision`` without importing Alembic: the one row of its version table,
    None without the table (or with other than one row: Alembic then decides)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    return str(rows[0][0]) if len(rows) == 1 else None


def upgrade(conn: Connection, revision: str = "head") -> None:
    """Run the packaged migrations on ``conn`` up to ``revision`` (in the caller's transaction)."""
    from alembic import command

    command.upgrade(alembic_config(conn), revision)


def migrate(engine: Engine, writer: Engine, where: str) -> None:
    """Bring the database of ``engine`` to the head revision, or refuse it with one line.

    ``writer`` is the engine's write side (its transactions take the write lock first);
    ``where`` names the database in messages. Refused (``InvalidInput``): a database of
    another program, one of a newer simeval (left unchanged), a damaged or unreadable file.
    ``DatabaseBusyError`` when another process kept it locked.
    """
    try:
        with engine.connect() as conn:
            current = stored_revision(conn)
            conn.rollback()
        if current == HEAD_REVISION:
            return
        head = head_revision()  # read before the write lock is taken
        for attempt in range(LOCK_RETRIES):
            try:
                with writer.connect() as conn, conn.begin():
                    _upgrade_locked(conn, head, where)
                return
            except OperationalError as exc:
                if not is_locked(exc) or attempt == LOCK_RETRIES - 1:
                    raise
    except OperationalError as exc:
        if is_locked(exc):
            raise DatabaseBusyError(f"database {where} is locked by another process") from None
        problem = database_problem(exc)
        if problem:
            raise InvalidInput(f"database {where} {problem}") from None
        raise InvalidInput(f"cannot open database {where}: {exc.orig}") from None
    except DatabaseError as exc:
        raise InvalidInput(
            f"cannot open database {where}: {exc.orig} (is it a SQLite file?)"
        ) from None


def _upgrade_locked(conn: Connection, head: str, where: str) -> None:
    """``migrate``'s step under the write lock (in ``conn``'s transaction)."""
    if conn.dialect.name == "postgresql":
        # processes opening a new database at once migrate one at a time
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK})")
    # read again under the write lock: another process may have migrated
    current = current_revision(conn)
    if current == head:
        return
    if current is None:
        tables = set(inspect(conn).get_table_names())
        if tables - {"alembic_version"}:
            raise InvalidInput(
                f"{where} is not a simeval database "
                f"(it has tables {', '.join(sorted(tables)[:3])}... "
                "but no simeval schema revision)"
            )
    elif current not in known_revisions():
        raise InvalidInput(
            f"database {where} has schema revision {current!r}, "
            "unknown to this simeval (a newer simeval wrote it); upgrade "
            "simeval to open it - the database was not changed"
        )
    upgrade(conn, "head")
