"""Helpers for tests that run on either backend (see ``conftest.db``): plain SQL on the test's
database, not through the code under test."""

from __future__ import annotations

import textwrap
from typing import Any

# a process capturing n outputs through the library once a file appears (concurrency tests):
# argv db, n, tag, go-file; prints the number of results stored
WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from simeval.service import Service

    db, n, tag, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    svc = Service(db)
    while not go.exists():  # start together
        time.sleep(0.005)
    stored = 0
    for i in range(n):
        cap = svc.capture("What is the capital of France?", f"Paris is the capital {tag} {i}",
                          conversation_id=f"{tag}-{i}")
        stored += len(cap.results)
    svc.close()
    print(stored)
    """
)


def is_pg(db: Any) -> bool:
    return str(db).startswith("postgresql")


def sql(db: Any, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement on ``db`` with a plain connection (not through the code under test);
    returns its rows (committed)."""
    import sqlalchemy as sa

    from simeval.store import resolve_db_url

    engine = sa.create_engine(resolve_db_url(db), poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(statement), params or {})
            return [tuple(r) for r in result] if result.returns_rows else []
    finally:
        engine.dispose()


def table_counts(db: Any, tables: tuple[str, ...], packed: bool = False) -> dict[str, int]:
    """Rows per table; with ``packed``, ``results`` also counts the captured results packed
    on captures."""
    from simeval.store import unpack_results

    out = {t: int(sql(db, f"SELECT count(*) FROM {t}")[0][0]) for t in tables}
    if packed and "results" in out:
        for (blob,) in sql(db, "SELECT scores FROM captures"):
            out["results"] += len(unpack_results(blob))
    return out
