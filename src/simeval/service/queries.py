"""The results query and its filters: the effective verdict (a review wins), the created-at
range, and the eval versions' references a result names."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, false, or_, select, true
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from simeval.models import ReviewOut
from simeval.service.base import ServiceBase
from simeval.service.checks import _check_id, _utc, parse_time
from simeval.store import Capture, Eval, EvalVersion, Result, Review


def _effective_pass() -> ColumnElement[bool]:
    """SQL: the result passes, a review's score deciding when there is one."""
    return or_(
        and_(Review.score.is_not(None), Review.score >= Result.threshold),
        and_(Review.score.is_(None), Result.passed == true()),
    )


def _effective_fail() -> ColumnElement[bool]:
    return or_(
        and_(Review.score.is_not(None), Review.score < Result.threshold),
        and_(Review.score.is_(None), Result.passed == false()),
    )


def _in_range(q: Any, start: datetime | None, end: datetime | None) -> Any:
    """``q`` limited to results created in [start, end) (either end may be open)."""
    if start is not None:
        q = q.where(Result.created_at >= start)
    if end is not None:
        q = q.where(Result.created_at < end)
    return q


def _effective_passed(r: Result, review: Review | None) -> bool:
    """A result's verdict, a review's score deciding when there is one (``_effective_pass``)."""
    return review.score >= r.threshold if review else r.passed


def _review_out(review: Review | None) -> ReviewOut | None:
    if review is None:
        return None
    return ReviewOut(score=review.score, note=review.note, created_at=_utc(review.created_at))


def _version_refs(s: Session, pairs: set[tuple[Any, Any]]) -> dict[tuple[int, int], list[str]]:
    eval_ids = {e for e, _ in pairs if e is not None}
    if not eval_ids:
        return {}
    q = select(EvalVersion.eval_id, EvalVersion.version, EvalVersion.references).where(
        EvalVersion.eval_id.in_(eval_ids)
    )
    return {(e, v): list(refs) for e, v, refs in s.execute(q) if (e, v) in pairs}


class QueriesMixin(ServiceBase):
    """The results query with its filters (eval, verdict, time, review, run)."""

    def _results_query(
        self,
        s: Session,
        eval_name: str | int | None = None,
        passed: bool | None = None,
        since: Any = None,
        until: Any = None,
        reviewed: bool | None = None,
        run_id: int | None = None,
    ) -> Any:
        q = (
            select(Result, Capture, Eval.name, Eval.type, Review)
            .outerjoin(Capture, Capture.id == Result.capture_id)
            .outerjoin(Eval, Eval.id == Result.eval_id)
            .outerjoin(Review, Review.result_id == Result.id)
        )
        if eval_name is not None:
            q = q.where(Result.eval_id == self._find_eval(s, eval_name).id)
        if passed is not None:
            q = q.where(_effective_pass() if passed else _effective_fail())
        q = _in_range(q, parse_time(since, "since"), parse_time(until, "until"))
        if reviewed is not None:
            q = q.where(Review.id.is_not(None) if reviewed else Review.id.is_(None))
        if run_id is not None:
            q = q.where(Result.run_id == _check_id(run_id, "run"))
        return q
