"""Migration 0010 on a store made at revision 0009 with captures: ``capture_meta`` and
``conversations`` are filled with what a direct recomputation from the captures gives (the
declared keys of the setting included), on both backends; captures stored afterwards keep
them exact."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from tests.dbhelp import is_pg
from tests.readtables import assert_exact, expected, stored

from simeval.service import Service
from simeval.store import (
    captures_table,
    head_revision,
    make_engine,
    pack_results,
    resolve_db_url,
    upgrade,
)

FP = "0123456789ab"


def _at_0009(db: str) -> sa.Engine:
    """``db`` at revision 0009, empty (a fresh SQLite file, or a migrated PostgreSQL database
    taken back down)."""
    if not is_pg(db):  # a copy of the migrated template: built from an empty file instead
        Path(db).unlink()
    engine = make_engine(resolve_db_url(db))
    with engine.begin() as conn:
        if is_pg(db):
            from alembic import command

            from simeval.store import alembic_config

            command.downgrade(alembic_config(conn), "0009")
        else:
            upgrade(conn, "0009")
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == "0009"
    return engine


def test_a_0009_store_is_filled_as_a_recomputation_gives(db: str) -> None:
    engine = _at_0009(db)
    base = datetime(2026, 2, 1, 8, 0)
    rows = []
    for k in range(1, 131):  # more than one chunk of the fill is not needed: order is
        talk = None if k % 9 == 0 else f"talk-{k % 11}"
        meta = None if k % 10 == 0 else {"engine": f"v{k % 3}", "team": f"t{k % 4}", "n": k}
        if k % 13 == 0:
            meta = {"model": "m" * 201, "team": "long model"}  # too long to index
        entries = [(1, 1, 0.5 + (k % 5) / 10, k % 5 >= 2, 0.7, 0, FP)]
        if k % 2:
            entries.append((2, 1, 0.3, False, 0.7, 0, FP))
        rows.append(
            {
                "id": k,
                "input": f"q{k}",
                "output": f"out {k}",
                "conversation_id": talk,
                "metadata": meta,
                # out of id order in time, with ties: the last turn is the latest (time, id)
                "captured_at": base + timedelta(minutes=(k * 37) % 50),
                "evaluated": k % 7 != 0,
                "scores": pack_results(entries) if k % 7 != 0 else None,
            }
        )
    with engine.begin() as conn:
        conn.execute(sa.insert(captures_table), rows)
        if is_pg(db):  # ids given: the sequence goes on after them
            conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('captures', 'id'), max(id)) FROM captures"
            )
        conn.execute(
            sa.text("INSERT INTO settings (key, value) VALUES ('indexed_meta', :v)"),
            {"v": '["team"]'},
        )
        upgrade(conn, "head")
    engine.dispose()
    meta, talks = stored(db)
    want_meta, want_talks = expected(db)
    assert {r[1] for r in meta} == {"engine", "team"}
    assert len(talks) == 11 and sum(t[0] for t in talks.values()) == 130 - 130 // 9
    assert meta == want_meta
    assert talks == want_talks
    with Service(db) as svc:
        assert svc.store.revision() == head_revision()
        assert svc.get_settings().indexed_meta == ["team"]
        svc.capture("q", "a", "talk-1", {"team": "after", "engine": "v9"})
        listed = svc.list_conversations(limit=100)
        assert len(listed) == 11 == svc.count_conversations()
        assert listed[0].id == "talk-1" and listed[0].last_input == "q"
    assert_exact(db)
