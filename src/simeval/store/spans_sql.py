"""The SQL of rewriting one stored capture in place, for one call seen twice (by the proxy
and as a span: ``simeval.service.adopt``): the capture read with its row locked, the capture
lock taken as the rollups need it, and the tables read from the capture (its ``capture_meta``
rows, its conversations' summaries) following the change. Each function works in the
caller's write transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import delete, insert, text

from simeval.store.database import CAPTURE_LOCK, Tx
from simeval.store.meta_index import index_entries
from simeval.store.meta_rollup import watermark
from simeval.store.rollups import count_capture
from simeval.store.summaries import recompute_conversations
from simeval.store.tables import Capture, capture_meta_table


class Recount(Exception):
    """The rollups counted the capture while its rewrite waited for the capture lock: run it
    again (it then takes the lock exclusively)."""


def capture_for_update(s: Tx, capture_id: int) -> Capture | None:
    """The stored capture, its row locked until the commit (PostgreSQL), or None."""
    return s.get(Capture, capture_id, with_for_update=True)


def lock_for_rewrite(s: Tx, cap: Capture) -> bool:
    """The capture lock taken as ``rewrite_capture`` needs it (see
    ``simeval.service.adopt``); whether the rollups counted ``cap``. ``Recount`` when they
    counted it while this waited for the lock."""
    if s.get_bind().dialect.name != "postgresql":
        return cap.id <= watermark(s)  # SQLite: one writer at a time
    counted = cap.id <= watermark(s)
    lock = "pg_advisory_xact_lock" if counted else "pg_advisory_xact_lock_shared"
    s.execute(text(f"SELECT {lock}({CAPTURE_LOCK})"))
    if not counted and cap.id <= watermark(s):
        raise Recount(cap.id)
    return counted


def rewrite_capture(
    s: Tx,
    keys: Sequence[str],
    cap: Capture,
    change: Callable[[], None],
) -> None:
    """In the write transaction ``s``: ``change()`` edits the stored capture ``cap`` (read
    with its row locked: ``capture_for_update``); its ``capture_meta`` rows (of the indexed
    ``keys``) and its conversations' summaries follow. When the rollups counted it, it is
    taken out of them before and counted again after. ``Recount`` when it must be run
    again."""
    conn = s.connection()
    counted = lock_for_rewrite(s, cap)
    talks = {cap.conversation_id}
    if counted:
        count_capture(conn, cap, -1)
    change()
    s.flush()
    talks.add(cap.conversation_id)
    conn.execute(delete(capture_meta_table).where(capture_meta_table.c.capture_id == cap.id))
    entries = index_entries(cap.meta, keys)
    if entries:
        rows = [
            {"capture_id": cap.id, "key": k, "value": v, "captured_at": cap.captured_at}
            for k, v in entries
        ]
        conn.execute(insert(capture_meta_table), rows)
    if counted:
        count_capture(conn, cap, 1)
    recompute_conversations(conn, [t for t in talks if t is not None])
