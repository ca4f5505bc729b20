"""The SQL of ``Service.compare`` (``simeval.service.compare_sides``): a side's rows read
straight from the driver a chunk at a time (``simeval.store.sql.stream_rows``), the case key
of a captured result, and the few lookups around them (a run, its rows, the reviews, the
metadata a side picker offers).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Text, case, cast, func, select
from sqlalchemy import text as sql_text
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.elements import ClauseElement

from simeval.jsontypes import JSONObject
from simeval.store.database import Store
from simeval.store.sql import stream_rows
from simeval.store.tables import Capture, Eval, Result, Review, Run

_CASE_ID = '"case_id"'  # the metadata key naming a captured result's case, as JSON text


def shares_one_connection(store: Store) -> bool:
    """Whether every session of ``store`` shares one connection (a ``:memory:`` store):
    such a store cannot be read twice at once."""
    return isinstance(store.engine.pool, StaticPool)


def recent_metadata(s: Session, recent: int) -> Iterator[JSONObject | None]:
    """The metadata of the ``recent`` newest captures that have any, newest first."""
    q = (
        select(Capture.meta)
        .where(Capture.meta.is_not(None))
        .order_by(Capture.id.desc())
        .limit(recent)
    )
    for (meta,) in s.execute(q):
        yield meta


def latest_run(s: Session) -> Run | None:
    """The newest stored run (None: none is stored)."""
    return s.scalar(select(Run).order_by(Run.created_at.desc(), Run.id.desc()).limit(1))


def run_of(s: Session, run_id: int) -> Run | None:
    """The stored run ``run_id`` (None: no such run)."""
    return s.get(Run, run_id)


def run_side_rows(
    s: Session, run_id: int, eval_name: str | None, chunk: int
) -> Iterator[Sequence[Any]]:
    """(row id, eval name, case key, score, passed) of a run's rows (of the eval named
    ``eval_name`` alone, if given) in id order, ``chunk`` at a time: the case key is the
    row's case id, else its input."""
    case_id = Result.explanation[("case", "id")].as_string()
    q = (
        select(
            Result.id,
            Result.eval_name,
            func.coalesce(case_id, func.nullif(Result.input, "")),
            Result.score,
            Result.passed,
        )
        .where(Result.run_id == run_id)
        .order_by(Result.id)
    )
    if eval_name is not None:
        q = q.where(Result.eval_name == eval_name)
    return stream_side_rows(s, q, chunk)


def results_by_id(s: Session, ids: Sequence[int]) -> dict[int, Result]:
    """The run rows of ``ids`` still stored, by id."""
    return {r.id: r for r in s.scalars(select(Result).where(Result.id.in_(ids)))}


def result_of(s: Session, result_id: int) -> Result | None:
    """The run row ``result_id`` (None: not stored)."""
    return s.get(Result, result_id)


def eval_names(s: Session) -> dict[int, str]:
    """Every eval's name, by id."""
    return {i: name for i, name in s.execute(select(Eval.id, Eval.name))}


def capture_review_scores(s: Session) -> dict[tuple[int, int], float]:
    """The score of every review of a captured result, by (capture id, eval id)."""
    reviews: dict[tuple[int, int], float] = {}
    for c, e, score in s.execute(
        select(Review.capture_id, Review.eval_id, Review.score).where(
            Review.capture_id.is_not(None), Review.eval_id.is_not(None)
        )
    ):
        reviews[(int(c or 0), int(e or 0))] = float(score)
    return reviews


def _case_key(dialect: str) -> ColumnElement[str]:
    """A captured result's case key in SQL: its metadata's ``case_id``, else its input. The
    metadata is parsed only when its text holds ``"case_id"`` (a search of the stored text;
    as ``json.dumps`` writes a key, always so): most captures carry none, and parsing every
    capture's JSON was the dearest part of reading a side on PostgreSQL."""
    text = cast(Capture.meta, Text)
    found = func.strpos(text, _CASE_ID) if dialect == "postgresql" else func.instr(text, _CASE_ID)
    case_id = case((found > 0, Capture.meta["case_id"].as_string()))
    return func.coalesce(case_id, func.nullif(Capture.input, ""))


def side_columns(s: Session) -> list[Any]:
    """The columns a side reads of each capture: its id, its case key, its packed results."""
    return [Capture.id, _case_key(s.get_bind().dialect.name), Capture.scores]


def no_jit(s: Session) -> None:
    """On PostgreSQL, no JIT for the rest of the transaction ``s`` (elsewhere nothing)."""
    if s.get_bind().dialect.name == "postgresql":
        # a side's read: its per-row expressions are trivial, and at 1M captures the plan's
        # cost sits at the threshold above which PostgreSQL spends the time of optimising
        # and inlining the JIT code
        s.execute(sql_text("SET LOCAL jit = off"))


def stream_side_rows(s: Session, q: ClauseElement, chunk: int) -> Iterator[Sequence[Any]]:
    """The rows of ``q`` in the read ``s``, a chunk at a time, from the driver's cursor."""
    return stream_rows(s.connection(), q, chunk)
