"""The SQL of the settings (``settings``: a key and its JSON value), of declaring which
metadata keys are indexed, and of the retention cleanup. Each function works in the caller's
session (and its transaction); the service (``simeval.service.settings``) checks the values
and names the keys."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy.engine import CursorResult
from sqlalchemy.sql.expression import Executable

from simeval.store.database import CAPTURE_LOCK, Tx
from simeval.store.meta_rollup import cut_hours, hour_start
from simeval.store.packing import packed_count, packed_count_sql
from simeval.store.rollups import roll_up, sum_rows
from simeval.store.summaries import backfill_meta, drop_meta_key, recompute_conversations
from simeval.store.tables import Capture, Eval, EvalTest, Result, Run, Setting, TrendRollup

HOUR = timedelta(hours=1)


def setting_value(s: Tx, key: str) -> Any:
    """The value stored under ``key``, or None."""
    return s.scalar(select(Setting.value).where(Setting.key == key))


def settings_of(s: Tx, keys: Sequence[str] | None = None) -> dict[str, Any]:
    """The stored settings (only those of ``keys`` when given), by key."""
    q = select(Setting.key, Setting.value)
    if keys is not None:
        q = q.where(Setting.key.in_(keys))
    return dict(s.execute(q).all())


def put_setting(s: Tx, key: str, value: object) -> None:
    """Store ``value`` under ``key`` (None is stored as JSON null)."""
    row = s.get(Setting, key)
    if row is None:
        s.add(Setting(key=key, value=value))
    else:
        row.value = value


def set_flag(s: Tx, key: str, value: object) -> None:
    """Store a setting (None deletes it) in a write transaction. On PostgreSQL the capture
    lock is taken exclusively first: the captures under way, which read the indexed keys when
    they began, commit before this does, and the next ones read what this stores."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text(f"SELECT pg_advisory_xact_lock({CAPTURE_LOCK})"))
    row = s.get(Setting, key)
    if value is None:
        if row is not None:
            s.delete(row)
    elif row is None:
        s.add(Setting(key=key, value=value))
    else:
        row.value = value


def bump_counter(s: Tx, key: str) -> None:
    """Add 1 to the counter stored under ``key`` (made 1 when missing), its row locked
    (PostgreSQL) so that two writers count both."""
    row = s.scalar(select(Setting).where(Setting.key == key).with_for_update())
    if row is None:
        s.add(Setting(key=key, value=1))
    else:
        row.value = int(row.value or 0) + 1
    s.flush()


def backfill_meta_keys(s: Tx, keys: Sequence[str], after: int, limit: int) -> int | None:
    """``backfill_meta`` in ``s``'s transaction: the last capture id read, None when there
    was none."""
    return backfill_meta(s.connection(), keys, after, limit)


def drop_meta_rows(s: Tx, key: str, limit: int) -> int:
    """``drop_meta_key`` in ``s``'s transaction: how many rows were deleted."""
    return drop_meta_key(s.connection(), key, limit)


def _deleted(s: Tx, stmt: Executable) -> int:
    result = s.execute(stmt)
    assert isinstance(result, CursorResult)  # a DELETE's result
    return int(result.rowcount)


def delete_older(
    s: Tx,
    cutoff: datetime,
) -> tuple[int, int, int, int]:
    """The retention cleanup in ``s``'s write transaction: delete the captures with their
    results, the runs with theirs, and the tests of eval versions no longer current, older
    than ``cutoff``; the rollups follow (every capture taken into them first; the hour the
    cutoff falls in summed again from the captures it keeps). Returns how many captures,
    results, tests and runs went."""
    conn = s.connection()
    # the rollup first takes in every capture, then loses the deleted ones: whole hours
    # go, the hour the cutoff falls in is summed again from the captures it keeps
    roll_up(conn)
    # the deleted captures' results, from their packed header's count (the header's
    # last uint32), grouped in the database: no capture's results are read
    count_bytes = packed_count_sql(Capture.scores)
    counts = select(count_bytes, func.count()).where(
        Capture.captured_at < cutoff, Capture.scores.is_not(None)
    )
    results = sum(packed_count(n) * k for n, k in s.execute(counts.group_by(count_bytes)) if n)
    old_runs = select(Run.id).where(Run.created_at < cutoff)
    results += _deleted(s, delete(Result).where(Result.run_id.in_(old_runs)))
    old = select(Capture.conversation_id).where(
        Capture.captured_at < cutoff, Capture.conversation_id.is_not(None)
    )
    touched = [str(c) for (c,) in s.execute(old.distinct())]
    # their capture_meta rows go with them (ON DELETE CASCADE, foreign keys on in
    # SQLite too: store.engine); the conversations they were turns of are summed again
    captures = _deleted(s, delete(Capture).where(Capture.captured_at < cutoff))
    recompute_conversations(conn, touched)
    runs = _deleted(s, delete(Run).where(Run.created_at < cutoff))
    edge = hour_start(cutoff)
    s.execute(delete(TrendRollup).where(TrendRollup.bucket <= edge))
    cut_hours(conn, edge)  # meta_rollup the same way
    # always, also when the cutoff is on the hour: the hour ``edge`` was deleted
    # above and every capture of it is kept then
    kept = select(Capture.captured_at, Capture.scores).where(
        Capture.captured_at >= edge, Capture.captured_at < edge + HOUR
    )
    sum_rows(conn, ((when, blob) for when, blob in s.execute(kept)))
    current = select(Eval.version).where(Eval.id == EvalTest.eval_id).scalar_subquery()
    tests = _deleted(
        s, delete(EvalTest).where(EvalTest.created_at < cutoff, EvalTest.version < current)
    )
    return captures, results, tests, runs
