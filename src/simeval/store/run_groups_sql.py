"""The SQL of run groups (``simeval.service.run_groups``): a group's runs, the groups listed
newest first, and a page of a group's cases chosen in the database: the group's rows
grouped by case (ordinal and eval), filtered and ordered there, keyset-paged; then only that
page's cells read by id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, case, distinct, false, func, or_, select, true
from sqlalchemy.orm import Session

from simeval.store.tables import Result, Review, Run

_CELLS_PER_QUERY = 500


def group_runs(s: Session, group: str, limit: int) -> list[Run]:
    """The first ``limit`` runs of the group ``group``, in the order they were stored."""
    q = select(Run).where(Run.group_name == group).order_by(Run.id).limit(limit)
    return list(s.scalars(q))


def newest_group_names(s: Session, limit: int, offset: int) -> list[str]:
    """A page of the groups' names, the group with the newest run first."""
    newest = func.max(Run.created_at)
    q = (
        select(Run.group_name)
        .where(Run.group_name.is_not(None))
        .group_by(Run.group_name)
        .order_by(newest.desc(), Run.group_name)
        .limit(limit)
        .offset(offset)
    )
    return [n for n in s.scalars(q) if n is not None]


def runs_of_groups(s: Session, names: Sequence[str]) -> list[Run]:
    """The runs of the groups ``names``, in the order they were stored."""
    return list(s.scalars(select(Run).where(Run.group_name.in_(names)).order_by(Run.id)))


def count_groups(s: Session) -> int:
    """How many groups of runs are stored."""
    return int(s.scalar(select(func.count(distinct(Run.group_name)))) or 0)


def pick_group_cases(
    s: Session,
    ids: Sequence[int],
    differ: bool,
    failing: bool,
    search: str | None,
    after: tuple[int, str] | None,
    limit: int,
    only: tuple[int, str] | None = None,
) -> list[tuple[Any, ...]]:
    """The page's cases of the runs ``ids``: (ordinal, eval or "", the row id of each run's
    cell or None, whether the engines differ, whether one fails), grouped, filtered and
    ordered by the database."""
    ordinal = func.coalesce(Result.explanation[("case", "ordinal")].as_integer(), -Result.id)
    eval_name = func.coalesce(Result.eval_name, "")
    passes = case(
        (and_(Review.score.is_not(None), Review.score >= Result.threshold), 1),
        (and_(Review.score.is_(None), Result.passed == true()), 1),
        else_=0,
    )
    columns = [
        ordinal.label("o"),
        eval_name.label("e"),
        Result.id.label("row"),
        Result.run_id.label("run"),
        passes.label("p"),
    ]
    if search:
        case_id = Result.explanation[("case", "id")].as_string()
        hit = or_(
            Result.input.icontains(search, autoescape=True),
            Result.output.icontains(search, autoescape=True),
            case_id.icontains(search, autoescape=True),
        )
        columns.append(case((hit, 1), else_=0).label("hit"))
    rows = (
        select(*columns)
        .select_from(Result)
        .outerjoin(Review, Review.result_id == Result.id)
        .where(Result.run_id.in_(ids))
    )
    if only is not None:
        rows = rows.where(ordinal == only[0], eval_name == only[1])
    if after is not None:
        rows = rows.where(or_(ordinal > after[0], and_(ordinal == after[0], eval_name > after[1])))
    inner = rows.subquery()
    count, passed = func.count(inner.c.row), func.sum(inner.c.p)
    engines = func.count(distinct(inner.c.run))
    differs = or_(and_(passed > 0, passed < count), engines < len(ids))
    fails = or_(passed < count, engines < len(ids))
    cells = [func.min(case((inner.c.run == rid, inner.c.row), else_=None)) for rid in ids]
    q = select(
        inner.c.o,
        inner.c.e,
        case((differs, true()), else_=false()),
        case((fails, true()), else_=false()),
        *cells,
    ).group_by(inner.c.o, inner.c.e)
    wanted = []
    if differ:
        wanted.append(differs)
    if failing:
        wanted.append(fails)
    if search:
        wanted.append(func.max(inner.c.hit) == 1)
    if wanted:
        q = q.having(and_(*wanted))
    q = q.order_by(inner.c.o, inner.c.e).limit(limit)
    return [tuple(r) for r in s.execute(q)]


def rows_with_reviews(s: Session, ids: Sequence[int]) -> dict[int, tuple[Result, Review | None]]:
    """The rows ``ids`` by id, each with its review (None without one), read 500 at a time."""
    rows: dict[int, tuple[Result, Review | None]] = {}
    for start in range(0, len(ids), _CELLS_PER_QUERY):
        q = (
            select(Result, Review)
            .outerjoin(Review, Review.result_id == Result.id)
            .where(Result.id.in_(ids[start : start + _CELLS_PER_QUERY]))
        )
        rows.update({r.id: (r, review) for r, review in s.execute(q)})
    return rows
