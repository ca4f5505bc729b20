"""Alembic environment for simeval's packaged migrations.

simeval runs the migrations itself when it opens a database (``simeval.store.Store``), passing
its own connection in ``config.attributes["connection"]``, inside a transaction it holds the
write lock of. No ``alembic.ini`` is needed.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from simeval.store.tables import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Migrate on the caller's connection (or on ``sqlalchemy.url`` when run by hand)."""
    connection = config.attributes.get("connection")
    if connection is None:
        engine = create_engine(config.get_main_option("sqlalchemy.url") or "sqlite://")
        with engine.begin() as conn:
            context.configure(
                connection=conn, target_metadata=target_metadata, render_as_batch=True
            )
            with context.begin_transaction():
                context.run_migrations()
        return
    # batch mode: SQLite cannot ALTER most things, batch operations copy the table instead
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("simeval migrations run online only (simeval opens the database itself)")
run_migrations_online()
