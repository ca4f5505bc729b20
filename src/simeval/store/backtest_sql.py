"""The SQL of backtest and rescore (``simeval.service.backtest``): captures read newest first
or by id in chunks, and a rescore's write: the capture lock (PostgreSQL), the blobs
rewritten in one executemany, the conversations and rollups they change."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, select, text, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

from simeval.store.database import CAPTURE_LOCK
from simeval.store.meta_rollup import add_capture_changes
from simeval.store.rollups import Key, Sums, add_sums
from simeval.store.summaries import conversations_of, recompute_conversations
from simeval.store.tables import Capture

# a counted capture's changes for ``meta_rollup``: per capture id, (its time, [entries])
CaptureChanges = dict[int, tuple[datetime, list[tuple[int, int, int]]]]


def recent_captures(s: Session, since: datetime) -> Iterator[Any]:
    """The captures since ``since``, newest first, streamed 1,000 at a time: (id, input,
    output, captured_at)."""
    q = (
        select(Capture.id, Capture.input, Capture.output, Capture.captured_at)
        .where(Capture.captured_at >= since)
        .order_by(Capture.captured_at.desc(), Capture.id.desc())
    )
    return iter(s.execute(q.execution_options(yield_per=1000)))


def inputs_and_scores(s: Session, since: datetime) -> Iterator[Row[str, bytes | None]]:
    """The captures since ``since``, streamed 2,000 at a time: (input, packed results)."""
    q = select(Capture.input, Capture.scores).where(Capture.captured_at >= since)
    return iter(s.execute(q.execution_options(yield_per=2000)))


def captures_to_rescore(
    s: Session, start: datetime, end: datetime | None, after: int, limit: int
) -> Sequence[Row[int, str, str, bytes | None]]:
    """Up to ``limit`` captures in [start, end) with ids past ``after``, by id: (id, input,
    output, packed results)."""
    q = select(Capture.id, Capture.input, Capture.output, Capture.scores).where(
        Capture.captured_at >= start, Capture.id > after
    )
    if end is not None:
        q = q.where(Capture.captured_at < end)
    return s.execute(q.order_by(Capture.id).limit(limit)).all()


def lock_captures(s: Session) -> None:
    """Nothing: on PostgreSQL the capture lock taken exclusively for the transaction, as the
    rollup does (``roll_up``); SQLite's writer lock already serialises every write."""
    if s.get_bind().dialect.name == "postgresql":
        # with the capture lock held exclusively no rollup moves the watermark meanwhile,
        # so a capture at or below it is one the rollup counted, and no other rescore
        # changes the same rows
        s.execute(text(f"SELECT pg_advisory_xact_lock({CAPTURE_LOCK})"))


def capture_blobs(s: Session, ids: Iterable[int]) -> Sequence[Row[int, datetime, bytes | None]]:
    """The captures ``ids`` as they are now: (id, captured_at, packed results)."""
    return s.execute(
        select(Capture.id, Capture.captured_at, Capture.scores).where(Capture.id.in_(ids))
    ).all()


def write_rescored(
    s: Session,
    blobs: Sequence[Mapping[str, object]],
    sums: dict[Key, Sums],
    by_capture: CaptureChanges,
) -> None:
    """Nothing: the captures' new packed results written (``blobs``: ``b_id`` and
    ``scores`` each), their conversations' counts summed again, the trend rollup's changes
    ``sums`` added and the metadata rollup's ``by_capture``."""
    if blobs:
        table = cast(Table, Capture.__table__)
        s.connection().execute(update(table).where(table.c.id == bindparam("b_id")), blobs)
        # their conversations' result and pass counts changed with the blobs
        touched = conversations_of(s.connection(), [cast(int, b["b_id"]) for b in blobs])
        recompute_conversations(s.connection(), touched)
    add_sums(s.connection(), sums)
    add_capture_changes(s.connection(), by_capture)
