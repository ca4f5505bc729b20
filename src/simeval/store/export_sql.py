"""The SQL of the export (``simeval.service.export``): the captures' columns read straight from
the driver a chunk at a time (``simeval.store.sql.stream_rows``; on PostgreSQL a binary
server-side cursor), and what the rows name beyond their capture (eval names and types, eval
versions, runs), read once per export.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ClauseElement

from simeval.store.sql import stream_rows
from simeval.store.tables import Capture, EvalVersion, Run

# what the export reads of each capture, in this order
CAPTURE_COLUMNS: list[Any] = [
    Capture.id,
    Capture.input,
    Capture.output,
    Capture.conversation_id,
    Capture.meta,
    Capture.captured_at,
    Capture.scores,
]


def runs_of(s: Session, ids: set[int]) -> Iterator[Run]:
    """The stored runs of ``ids``."""
    yield from s.scalars(select(Run).where(Run.id.in_(ids)))


def versions_of_evals(s: Session, eval_ids: set[int]) -> Iterator[EvalVersion]:
    """Every version of the evals of ``eval_ids``."""
    yield from s.scalars(select(EvalVersion).where(EvalVersion.eval_id.in_(eval_ids)))


def gives_text(s: Session) -> bool:
    """Whether the driver of ``s`` gives JSON and times as their stored text (SQLite; the
    PostgreSQL driver gives Python values)."""
    return s.get_bind().dialect.name == "sqlite"


def stream_capture_rows(s: Session, q: ClauseElement, chunk: int) -> Iterator[Sequence[Any]]:
    """The rows of ``q`` in the read ``s``, ``chunk`` at a time, from the driver's cursor."""
    return stream_rows(s.connection(), q, chunk)
