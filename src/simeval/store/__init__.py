"""The store: SQLAlchemy 2 models, the database engine and its Alembic migrations.

Everything that touches SQL lives here; ``simeval.service`` (and the run writer, through the
service's run part) is the only caller. SQLite is the embedded default; PostgreSQL
(``postgresql+psycopg://...``, the ``simeval[postgres]`` extra) is the team store, tested by
the same suites.

- ``tables``: the tables, as SQLAlchemy models (``Eval``, ``Capture``, ``Result``, ...).
- ``connection``: database URLs, SQLite's set-up (WAL, busy timeout, ``BEGIN IMMEDIATE``), the
  check of a SQLite file, what a driver error means (``database_problem``, ``is_locked``).
- ``migrate``: the packaged migrations (``migrations/``), run when a database is opened.
- ``database``: ``Store``, one database's read, write and driver-level write transactions.
- ``sql``: the inserts written through the driver (the hot paths), the trend's time buckets.
- ``packing``: the packed form of a capture's results.
- ``meta_index``: which capture metadata the ``capture_meta`` side table indexes.

Each name is imported from its module on first use, so a process pays only for the parts it
uses: the packing alone needs no SQLAlchemy, the engine's helpers no ORM.

>>> from simeval.store import Store, head_revision, resolve_db_url
>>> store = Store(resolve_db_url(":memory:"))
>>> store.revision() == head_revision()
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simeval.lazy import lazy_face

if TYPE_CHECKING:
    from simeval.store.connection import (
        BUSY_TIMEOUT_S,
        DRIVER_ERRORS,
        QUICK_CHECK_BYTES,
        DatabaseBusyError,
        check_sqlite_file,
        database_problem,
        default_db_path,
        describe_url,
        is_locked,
        make_engine,
        resolve_db_url,
        sqlite_file,
    )
    from simeval.store.database import CAPTURE_LOCK, Store, Tx
    from simeval.store.meta_index import (
        DEFAULT_INDEXED_KEYS,
        MAX_INDEXED_VALUE,
        answerable,
        index_entries,
        indexed_keys,
        meta_text,
    )
    from simeval.store.migrate import (
        HEAD_REVISION,
        MIGRATE_LOCK,
        MIGRATIONS_DIR,
        alembic_config,
        head_revision,
        upgrade,
    )
    from simeval.store.packing import (
        PackedResults,
        f64_bytes,
        i32_bytes,
        le_bytes,
        pack_parts,
        pack_results,
        packed_fingerprints,
        pick_entries,
        unpack_results,
    )
    from simeval.store.sql import (
        bind_processor,
        bucket_start,
        bulk_insert,
        insert_row,
        parse_bucket,
    )
    from simeval.store.tables import (
        Alert,
        AlertDelivery,
        AlertRule,
        AuditEntry,
        Base,
        Capture,
        CaptureMeta,
        Conversation,
        Dataset,
        DatasetCase,
        DatasetVersion,
        Eval,
        EvalTest,
        EvalVersion,
        Result,
        Review,
        Run,
        Setting,
        TrendRollup,
        User,
        capture_meta_table,
        captures_table,
        conversations_table,
        results_table,
    )

_MODULES = {
    "simeval.store.database": ("CAPTURE_LOCK", "Store", "Tx"),
    "simeval.store.connection": (
        "BUSY_TIMEOUT_S",
        "DRIVER_ERRORS",
        "DatabaseBusyError",
        "QUICK_CHECK_BYTES",
        "check_sqlite_file",
        "database_problem",
        "default_db_path",
        "describe_url",
        "is_locked",
        "make_engine",
        "resolve_db_url",
        "sqlite_file",
    ),
    "simeval.store.migrate": (
        "HEAD_REVISION",
        "MIGRATE_LOCK",
        "MIGRATIONS_DIR",
        "alembic_config",
        "head_revision",
        "upgrade",
    ),
    "simeval.store.tables": (
        "Alert",
        "AlertDelivery",
        "AlertRule",
        "AuditEntry",
        "Base",
        "Capture",
        "CaptureMeta",
        "Conversation",
        "Dataset",
        "DatasetCase",
        "DatasetVersion",
        "Eval",
        "EvalTest",
        "EvalVersion",
        "Result",
        "Review",
        "Run",
        "Setting",
        "TrendRollup",
        "User",
        "capture_meta_table",
        "captures_table",
        "conversations_table",
        "results_table",
    ),
    "simeval.store.meta_index": (
        "DEFAULT_INDEXED_KEYS",
        "MAX_INDEXED_VALUE",
        "answerable",
        "index_entries",
        "indexed_keys",
        "meta_text",
    ),
    "simeval.store.packing": (
        "PackedResults",
        "f64_bytes",
        "i32_bytes",
        "le_bytes",
        "pack_parts",
        "pack_results",
        "packed_fingerprints",
        "pick_entries",
        "unpack_results",
    ),
    "simeval.store.sql": (
        "bind_processor",
        "bucket_start",
        "bulk_insert",
        "insert_row",
        "parse_bucket",
    ),
}
# Each public name and the module it comes from, imported on first use (see the module doc).
_HOMES = {name: module for module, names in _MODULES.items() for name in names}


__getattr__, __dir__ = lazy_face(__name__, _HOMES)


__all__ = [
    "BUSY_TIMEOUT_S",
    "CAPTURE_LOCK",
    "DEFAULT_INDEXED_KEYS",
    "DRIVER_ERRORS",
    "HEAD_REVISION",
    "MAX_INDEXED_VALUE",
    "MIGRATE_LOCK",
    "MIGRATIONS_DIR",
    "QUICK_CHECK_BYTES",
    "Alert",
    "AlertDelivery",
    "AlertRule",
    "AuditEntry",
    "Base",
    "Capture",
    "CaptureMeta",
    "Conversation",
    "DatabaseBusyError",
    "Dataset",
    "DatasetCase",
    "DatasetVersion",
    "Eval",
    "EvalTest",
    "EvalVersion",
    "PackedResults",
    "Result",
    "Review",
    "Run",
    "Setting",
    "Store",
    "TrendRollup",
    "Tx",
    "User",
    "alembic_config",
    "answerable",
    "bind_processor",
    "bucket_start",
    "bulk_insert",
    "capture_meta_table",
    "captures_table",
    "check_sqlite_file",
    "conversations_table",
    "database_problem",
    "default_db_path",
    "describe_url",
    "f64_bytes",
    "head_revision",
    "i32_bytes",
    "index_entries",
    "indexed_keys",
    "insert_row",
    "is_locked",
    "le_bytes",
    "make_engine",
    "meta_text",
    "pack_parts",
    "pack_results",
    "packed_fingerprints",
    "parse_bucket",
    "pick_entries",
    "resolve_db_url",
    "results_table",
    "sqlite_file",
    "unpack_results",
    "upgrade",
]
