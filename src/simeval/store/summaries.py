"""Keeping the read tables of migration 0010 (``capture_meta``, ``conversations``) exact in the
writes that are not a capture: a rescore that rewrites captures' packed results, a retention
cleanup that deletes captures, a change of the indexed metadata keys.

The capture's hot path adds to them row by row (``simeval.store.sql.upsert_conversation`` and
``insert_rows``); these rare bulk writes recompute instead: a conversation's summary is summed
again from its captures (``recompute_conversations``), so it is exact whatever the write did.
Each works on the caller's connection, inside its write transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TypedDict

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.engine.interfaces import DBAPICursor

from simeval.store.database import CAPTURE_LOCK
from simeval.store.meta_index import index_entries
from simeval.store.meta_rollup import MetaEntry, backfill_rollup, drop_rollup_key
from simeval.store.packing import unpack_results
from simeval.store.sql import insert_rows, upsert_conversation
from simeval.store.tables import capture_meta_table, captures_table, conversations_table

_IN_CHUNK = 500  # ids in one IN (...) list
_META_COLUMNS = ("capture_id", "key", "value", "captured_at")


class ConversationRow(TypedDict):
    """A ``conversations`` row: a conversation's summary."""

    conversation_id: str
    turns: int
    first_at: datetime
    last_at: datetime
    last_capture_id: int
    results: int
    passes: int


NewCapture = tuple[int, str | None, Mapping[str, object] | None, datetime, int, int]
"""A new capture as ``add_captures`` takes it: (id, conversation id, metadata, time (naive
UTC), results, automated passes)."""

_caps = captures_table.c
_talks = conversations_table.c
_meta = capture_meta_table.c


def conversations_of(conn: Connection, capture_ids: Sequence[int]) -> set[str]:
    """The conversation ids the captures ``capture_ids`` belong to."""
    found: set[str] = set()
    for start in range(0, len(capture_ids), _IN_CHUNK):
        part = capture_ids[start : start + _IN_CHUNK]
        q = select(_caps.conversation_id).where(
            _caps.id.in_(part), _caps.conversation_id.is_not(None)
        )
        found.update(str(c) for (c,) in conn.execute(q.distinct()))
    return found


def summarise(
    rows: Iterable[tuple[str | None, int, datetime, bytes | None]],
) -> dict[str, ConversationRow]:
    """The ``conversations`` rows of captures given as (conversation id, capture id, time,
    packed results): turns, first and last activity (the latest (time, id) is the last turn),
    results and automated passes."""
    counted: list[NewCapture] = []
    for talk, cid, at, blob in rows:
        if talk is None:
            continue
        packed = unpack_results(blob)
        counted.append((cid, talk, None, at, len(packed), sum(packed.passed)))
    return summarise_new(counted)


def recompute_conversations(conn: Connection, conversation_ids: Iterable[str]) -> int:
    """Sum the summary rows of ``conversation_ids`` again from their captures (a conversation
    with no capture left loses its row); returns how many rows were written."""
    ids = sorted(set(conversation_ids))
    written = 0
    for start in range(0, len(ids), _IN_CHUNK):
        part = ids[start : start + _IN_CHUNK]
        q = select(_caps.conversation_id, _caps.id, _caps.captured_at, _caps.scores).where(
            _caps.conversation_id.in_(part)
        )
        rows = summarise(conn.execute(q))
        conn.execute(delete(conversations_table).where(_talks.conversation_id.in_(part)))
        if rows:
            conn.execute(insert(conversations_table), list(rows.values()))
            written += len(rows)
    return written


def backfill_meta(conn: Connection, keys: Sequence[str], after: int, limit: int) -> int | None:
    """Add the ``capture_meta`` rows of ``keys`` for the ``limit`` captures after id ``after``
    (rows stored already are kept: a capture stored meanwhile wrote its own); returns the last
    capture id read, None when there was none."""
    q = (
        select(_caps.id, _caps.metadata, _caps.captured_at)
        .where(_caps.id > after, _caps.metadata.is_not(None))
        .order_by(_caps.id)
        .limit(limit)
    )
    caps = conn.execute(q).all()
    if not caps:
        return None
    entries: list[MetaEntry] = []
    for cid, meta, at in caps:
        if isinstance(meta, str):  # a JSON column read as text
            meta = json.loads(meta)
        entries.extend(
            {"capture_id": cid, "key": k, "value": v, "captured_at": at}
            for k, v in index_entries(meta, keys)
        )
    # the rows not stored yet; captures the rollups counted are counted under them too
    entries = backfill_rollup(conn, entries, after, int(caps[-1][0]))
    if entries:
        from sqlalchemy.dialects import postgresql, sqlite

        pg = conn.dialect.name == "postgresql"
        dialect_insert = postgresql.insert if pg else sqlite.insert
        conn.execute(dialect_insert(capture_meta_table).on_conflict_do_nothing(), entries)
    return int(caps[-1][0])


def drop_meta_key(conn: Connection, key: str, limit: int) -> int:
    """Delete up to ``limit`` ``capture_meta`` rows of ``key`` (a key no longer indexed);
    returns how many were deleted (fewer than ``limit``: none is left). On PostgreSQL the
    capture lock is taken exclusively first, as ``roll_up`` takes it: a rollup that read the
    key's rows before this deletes them cannot commit its sums after it."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({CAPTURE_LOCK})")
    drop_rollup_key(conn, key)  # every call: a rollup meanwhile counted rows not yet deleted
    some = select(_meta.capture_id).where(_meta.key == key).limit(limit)
    result = conn.execute(
        delete(capture_meta_table).where(_meta.key == key, _meta.capture_id.in_(some))
    )
    return int(result.rowcount)


def add_captures(
    cursor: DBAPICursor,
    dialect: Dialect,
    captures: Sequence[NewCapture],
    keys: Sequence[str],
) -> None:
    """Add new captures to ``capture_meta`` and ``conversations`` through the driver cursor of
    their transaction (the capture's hot path): each given as (id, conversation id, metadata,
    time (naive UTC), results, automated passes), ``keys`` the metadata keys indexed. One
    insert of every indexed value, one upsert per conversation (in the order of their ids).

    The upsert's row lock (PostgreSQL) is held to the commit: captures of one conversation
    in concurrent transactions take turns on that row only.
    """
    entries = [
        (cid, k, v, at)
        for cid, _, meta, at, _, _ in captures
        if meta
        for k, v in index_entries(meta, keys)
    ]
    if entries:
        insert_rows(cursor, dialect, capture_meta_table, _META_COLUMNS, entries)
    talks = summarise_new(captures)
    # in one order whatever the batch: two batches that share conversations lock their rows
    # (PostgreSQL) in the same order, so they wait for each other rather than deadlock
    for talk in sorted(talks):
        upsert_conversation(cursor, dialect, conversations_table, talks[talk])


def summarise_new(
    captures: Sequence[NewCapture],
) -> dict[str, ConversationRow]:
    """The summary rows of new captures given as ``add_captures`` takes them, per conversation
    (a batch may hold several turns of one)."""
    out: dict[str, ConversationRow] = {}
    for cid, talk, _, at, n, p in captures:
        if talk is None:
            continue
        row = out.get(talk)
        if row is None:
            out[talk] = {
                "conversation_id": talk,
                "turns": 1,
                "first_at": at,
                "last_at": at,
                "last_capture_id": cid,
                "results": n,
                "passes": p,
            }
            continue
        row["turns"] += 1
        row["first_at"] = min(row["first_at"], at)
        if (at, cid) > (row["last_at"], row["last_capture_id"]):
            row["last_at"], row["last_capture_id"] = at, cid
        row["results"] += n
        row["passes"] += p
    return out
