"""What the faces (the CLI, the HTTP API and the studio) need to know of the database, without
reaching into the store: how to name it in a message, what a driver error says about the
file, and the error of a database kept locked by another process.

They are the store's own (``simeval.store.connection``), offered here so that the layers point one
way: the faces call the service, the service calls the store. Importing this module loads
SQLAlchemy's core, not its ORM or the models.
"""

from __future__ import annotations

from simeval.store import (
    DRIVER_ERRORS,
    DatabaseBusyError,
    database_problem,
    describe_url,
    is_locked,
    resolve_db_url,
    sqlite_file,
)

__all__ = [
    "DRIVER_ERRORS",
    "DatabaseBusyError",
    "database_problem",
    "describe_url",
    "is_locked",
    "resolve_db_url",
    "sqlite_file",
]
