"""The read tables of migration 0010 (``capture_meta``, ``conversations``) recomputed plainly
from the stored captures, to hold them against what the code under test keeps (both
backends)."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from simeval.store import (
    capture_meta_table,
    captures_table,
    conversations_table,
    index_entries,
    indexed_keys,
    resolve_db_url,
    unpack_results,
)


def _engine(db: str) -> sa.Engine:
    return sa.create_engine(resolve_db_url(db), poolclass=sa.pool.NullPool)


def stored(db: str) -> tuple[set[tuple[Any, ...]], dict[str, tuple[Any, ...]]]:
    """The two tables as stored: capture_meta rows and conversations by id."""
    engine = _engine(db)
    try:
        with engine.connect() as conn:
            meta = {tuple(r) for r in conn.execute(sa.select(capture_meta_table))}
            talks = {r[0]: tuple(r[1:]) for r in conn.execute(sa.select(conversations_table))}
    finally:
        engine.dispose()
    return meta, talks


def expected(db: str) -> tuple[set[tuple[Any, ...]], dict[str, tuple[Any, ...]]]:
    """The two tables recomputed from the captures and the settings, plainly."""
    engine = _engine(db)
    c = captures_table.c
    try:
        with engine.connect() as conn:
            declared = conn.execute(
                sa.text("SELECT value FROM settings WHERE key = 'indexed_meta'")
            ).scalar()
            caps = conn.execute(
                sa.select(c.id, c.conversation_id, c.metadata, c.captured_at, c.scores)
            ).all()
    finally:
        engine.dispose()
    if isinstance(declared, str):
        declared = json.loads(declared)
    keys = indexed_keys(declared or ())
    meta = set()
    talks: dict[str, list[Any]] = {}
    for cid, talk, md, at, blob in caps:
        meta.update((cid, k, v, at) for k, v in index_entries(md, keys))
        if talk is None:
            continue
        packed = unpack_results(blob)
        n, p = len(packed), sum(1 for ok in packed.passed if ok)
        mine = [cap for cap in caps if cap[1] == talk]
        last = max(mine, key=lambda cap: (cap[3], cap[0]))
        t = talks.setdefault(talk, [0, min(cap[3] for cap in mine), last[3], last[0], 0, 0])
        t[0] += 1
        t[4] += n
        t[5] += p
    return meta, {k: tuple(v) for k, v in talks.items()}


def assert_exact(db: str) -> None:
    meta, talks = stored(db)
    want_meta, want_talks = expected(db)
    assert meta == want_meta
    assert talks == want_talks
