"""The SQL of the overview of every active eval (``simeval.service.overview``).

The trend rollup's hourly rows of every eval are summed into the overview's slots in one
grouped query (the slots worked out in the database where the dialect has date arithmetic
this knows: SQLite, PostgreSQL), so it returns about (evals × slots) rows whatever the number
of results.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from sqlalchemy import (
    ColumnElement,
    Integer,
    String,
    case,
    cast,
    extract,
    func,
    literal,
    select,
    type_coerce,
)
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

from simeval.store.meta_rollup import hour_start
from simeval.store.tables import Eval, TrendRollup

_EPOCH = datetime(1970, 1, 1)


class SlotBoard(Protocol):
    """Where the rollup's sums go: per eval and slot (-1: the previous window), and the
    newest hour with results per eval."""

    def add(self, eval_id: int, k: int, count: int, total: float, passes: int) -> None: ...

    def seen(self, eval_id: int, hour: datetime) -> None: ...


def active_evals(s: Session) -> Sequence[Row[int, str, float]]:
    """(id, name, threshold) of every active eval."""
    return s.execute(
        select(Eval.id, Eval.name, Eval.threshold).where(Eval.status == "active")
    ).all()


def slot_of(hour: datetime, start: datetime, per: int) -> int:
    """The slot of ``hour``: -1 before ``start`` (the previous window), else its number of
    ``per``-hour slots after ``start``."""
    if hour < start:
        return -1
    return int((hour - start).total_seconds() // 3600) // per


def _hour_index(dialect: str, start: datetime) -> ColumnElement[int] | None:
    """The rollup bucket as a whole number of hours after ``start``, in SQL; None when the
    dialect has no date arithmetic this knows (the buckets are then slotted in Python)."""
    bucket = TrendRollup.bucket
    if dialect == "sqlite":
        j0 = (start - _EPOCH).total_seconds() / 86400 + 2440587.5
        return cast(func.round((func.julianday(bucket) - literal(j0)) * 24), Integer)
    if dialect == "postgresql":
        e0 = (start - _EPOCH).total_seconds()
        return cast(func.round((extract("epoch", bucket) - literal(e0)) / 3600), Integer)
    return None


def rollup_slots(
    s: Session, board: SlotBoard, prev: datetime, start: datetime, end: datetime, per: int
) -> None:
    """Add the rollup's sums in [prev, end) to ``board``: one grouped query, a row per eval
    and slot, the slots worked out in the database."""
    index = _hour_index(s.get_bind().dialect.name, start)
    in_range = (TrendRollup.bucket >= prev) & (TrendRollup.bucket < end) & (TrendRollup.count > 0)
    if index is None:  # no date arithmetic: hourly rows, slotted here
        q = (
            select(
                TrendRollup.eval_id,
                TrendRollup.bucket,
                func.sum(TrendRollup.count),
                func.sum(TrendRollup.total),
                func.sum(TrendRollup.passes),
            )
            .where(in_range)
            .group_by(TrendRollup.eval_id, TrendRollup.bucket)
        )
        for eval_id, bucket, c, t, p in s.execute(q):
            hour = hour_start(bucket)
            board.add(eval_id, slot_of(hour, start, per), int(c), float(t or 0.0), int(p or 0))
            board.seen(eval_id, hour)
        return
    slot = case((TrendRollup.bucket < start, -1), else_=index // per)
    grouped = (
        select(
            TrendRollup.eval_id,
            slot,
            func.sum(TrendRollup.count),
            func.sum(TrendRollup.total),
            func.sum(TrendRollup.passes),
            # as stored (SQLite's text sorts as its time): parsed once per eval, below
            type_coerce(func.max(TrendRollup.bucket), String),
        )
        .where(in_range)
        .group_by(TrendRollup.eval_id, slot)
    )
    newest: dict[int, str] = {}
    for eval_id, k, c, t, p, last in s.execute(grouped):
        board.add(eval_id, int(k), int(c), float(t or 0.0), int(p or 0))
        old = newest.get(eval_id)
        if old is None or last > old:
            newest[eval_id] = last
    for eval_id, last in newest.items():
        board.seen(eval_id, hour_start(last))
