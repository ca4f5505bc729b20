"""The SQL of results (``simeval.service.queries`` and ``simeval.service.results``): a
data-set run's rows selected by a result filter, the reviews of captured results, the
reference answers and scorer options of eval versions, the rows a result id names, and the
reviews themselves.

A captured result is read from its capture's packed results (``packing``); only its review,
eval and version are rows of their own."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Select, and_, bindparam, false, func, or_, select, true, tuple_
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import BindParameter, ColumnElement

from simeval.store.tables import Capture, Eval, EvalVersion, Result, Review, Run


class RunRowFilter(Protocol):
    """The filters a data-set run's rows are selected by (``ResultFilter`` holds them)."""

    @property
    def passed(self) -> bool | None: ...
    @property
    def since(self) -> datetime | None: ...
    @property
    def until(self) -> datetime | None: ...
    @property
    def reviewed(self) -> bool | None: ...
    @property
    def run_id(self) -> int | None: ...


def _effective_pass() -> ColumnElement[bool]:
    """SQL on run rows: the row passes, a review's score deciding when there is one."""
    return or_(
        and_(Review.score.is_not(None), Review.score >= Result.threshold),
        and_(Review.score.is_(None), Result.passed == true()),
    )


def _effective_fail() -> ColumnElement[bool]:
    return or_(
        and_(Review.score.is_not(None), Review.score < Result.threshold),
        and_(Review.score.is_(None), Result.passed == false()),
    )


def version_refs(
    s: Session, pairs: AbstractSet[tuple[int | None, int | None]]
) -> dict[tuple[int, int], list[str]]:
    """The reference answers of each (eval id, version) of ``pairs``: what a captured result
    matched, and what its explanation is computed from."""
    eval_ids = {e for e, _ in pairs if e is not None}
    if not eval_ids:
        return {}
    q = select(EvalVersion.eval_id, EvalVersion.version, EvalVersion.references).where(
        EvalVersion.eval_id.in_(eval_ids)
    )
    return {(e, v): list(refs) for e, v, refs in s.execute(q) if (e, v) in pairs}


def version_options(
    s: Session, pairs: AbstractSet[tuple[int | None, int | None]]
) -> dict[tuple[int, int], dict[str, Any]]:
    """The scorer options of each (eval id, version) of ``pairs``, in one query: what a
    page of captured results is explained with."""
    eval_ids = {e for e, _ in pairs if e is not None}
    if not eval_ids:
        return {}
    q = select(EvalVersion.eval_id, EvalVersion.version, EvalVersion.options).where(
        EvalVersion.eval_id.in_(eval_ids)
    )
    return {(e, v): dict(o or {}) for e, v, o in s.execute(q) if (e, v) in pairs}


def capture_reviews(s: Session, capture_ids: list[int]) -> dict[tuple[int, int], Review]:
    """The reviews of ``capture_ids`` by (capture, eval). The ids (integers the store gave)
    are written into the SQL: a driver that parses its placeholders (psycopg) spent more on
    the 500 of an export's chunk than the query took."""
    if not capture_ids:
        return {}
    ids: BindParameter[list[int]] = bindparam("ids", capture_ids, literal_execute=True)
    q = select(Review).where(Review.capture_id.in_(ids))
    return {(r.capture_id, r.eval_id): r for r in s.scalars(q)}  # type: ignore[misc]


def _run_query(f: RunRowFilter, eval_id: int | None) -> Select[Result, Review]:
    q = (
        select(Result, Review)
        .outerjoin(Review, Review.result_id == Result.id)
        .where(Result.capture_id.is_(None))
    )
    if eval_id is not None:
        q = q.where(Result.eval_id == eval_id)
    if f.passed is not None:
        q = q.where(_effective_pass() if f.passed else _effective_fail())
    if f.since is not None:
        q = q.where(Result.created_at >= f.since)
    if f.until is not None:
        q = q.where(Result.created_at < f.until)
    if f.reviewed is not None:
        q = q.where(Review.id.is_not(None) if f.reviewed else Review.id.is_(None))
    if f.run_id is not None:
        q = q.where(Result.run_id == f.run_id)
    return q


def run_rows(
    s: Session,
    f: RunRowFilter,
    eval_id: int | None,
    newest: bool,
    after: tuple[datetime, int, int, int] | None,
    limit: int | None = None,
) -> Iterator[tuple[Result, Review | None]]:
    """(run row, its review or None) of the data-set run rows matching ``f`` (of
    ``eval_id``, or all), newest (or oldest) first, past the result key ``after`` (time,
    kind: 0 a run's row or 1 a captured result, row or capture id, entry index); at most
    ``limit`` rows."""
    q = _run_query(f, eval_id)
    if limit is not None:
        # the database stops (or keeps a top-N sort) at what the page reads, where a
        # whole run's rows were sorted for a page of 50
        q = q.limit(limit)
    if after is not None:
        at, kind, ident, _ = after
        key = tuple_(Result.created_at, Result.id)
        if kind == 0:  # after a run's row: the rows past it
            q = q.where(key < tuple_(at, ident) if newest else key > tuple_(at, ident))
        else:  # after a captured result: run rows of that time come after it (newest first)
            q = q.where(Result.created_at <= at if newest else Result.created_at > at)
    if newest:
        q = q.order_by(Result.created_at.desc(), Result.id.desc())
    else:
        q = q.order_by(Result.created_at, Result.id)
    yield from s.execute(q.execution_options(yield_per=1000))


def count_run_rows(s: Session, f: RunRowFilter, eval_id: int | None) -> int:
    """How many data-set run rows match ``f`` (of ``eval_id``, or all)."""
    query = _run_query(f, eval_id).subquery()
    return int(s.scalar(select(func.count()).select_from(query)) or 0)


def eval_names_types(s: Session, ids: Iterable[int]) -> dict[int, tuple[str, str]]:
    """(name, type) of the evals ``ids``, by id."""
    q = select(Eval.id, Eval.name, Eval.type).where(Eval.id.in_(ids))
    return {i: (n, t) for i, n, t in s.execute(q)}


def stored_run_options(
    s: Session, run_ids: Iterable[int | None]
) -> dict[int | None, dict[str, Any]]:
    """The stored ``options`` of the runs ``run_ids``, by id."""
    q = select(Run.id, Run.options).where(Run.id.in_(run_ids))
    return {i: o for i, o in s.execute(q)}


def runs_by_id(s: Session, run_ids: Iterable[int | None]) -> list[Run]:
    """The runs ``run_ids`` (those that exist)."""
    return list(s.scalars(select(Run).where(Run.id.in_(run_ids))))


def worst_run_rows(s: Session, run_id: int, limit: int) -> list[tuple[Result, Review | None]]:
    """(run row, its review or None) of a run's ``limit`` lowest-scoring rows (automated
    scores), worst first."""
    q = (
        select(Result, Review)
        .outerjoin(Review, Review.result_id == Result.id)
        .where(Result.run_id == run_id)
        .order_by(Result.score, Result.id)
        .limit(limit)
    )
    return list(s.execute(q).all())


def run_row_with_review(s: Session, row_id: int) -> tuple[Result, Review | None] | None:
    """(run row, its review or None) of the data-set run row ``row_id``, None when there is
    no such row."""
    return s.execute(
        select(Result, Review)
        .outerjoin(Review, Review.result_id == Result.id)
        .where(Result.id == row_id, Result.capture_id.is_(None))
    ).first()


def capture_by_id(s: Session, capture_id: int) -> Capture | None:
    """The capture ``capture_id``, None when there is none."""
    return s.get(Capture, capture_id)


def review_by_key(s: Session, result_key: str) -> Review | None:
    """The review of the result ``result_key`` ("<capture>-<eval>" or "r<row>"), if any."""
    return s.scalar(select(Review).where(Review.result_key == result_key))


def add_review(
    s: Session,
    *,
    result_key: str,
    result_id: int | None,
    capture_id: int | None,
    eval_id: int | None,
    score: float,
    note: str,
    created_at: datetime,
    reviewer: str | None,
) -> Review:
    """The new review, added to the caller's transaction."""
    review = Review(
        result_key=result_key,
        result_id=result_id,
        capture_id=capture_id,
        eval_id=eval_id,
        score=score,
        note=note,
        created_at=created_at,
        reviewer=reviewer,
    )
    s.add(review)
    return review


def reviewed_captures(s: Session, eval_id: int) -> Iterator[tuple[Review, Capture]]:
    """(review, its capture) of each review of an eval's captured results, by capture id."""
    q = (
        select(Review, Capture)
        .join(Capture, Capture.id == Review.capture_id)
        .where(Review.eval_id == eval_id)
        .order_by(Capture.id)
    )
    yield from s.execute(q)


def reviewed_run_scores(s: Session, eval_id: int) -> Iterator[tuple[float, bool]]:
    """(automated score, whether the review passes it) of each reviewed data-set run row of
    an eval, by row id."""
    q = (
        select(Result.score, Review.score >= Result.threshold)
        .join(Review, Review.result_id == Result.id)
        .where(Result.eval_id == eval_id)
        .order_by(Result.id)
    )
    yield from s.execute(q)
