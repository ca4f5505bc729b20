"""The SQL of the evals (``evals``), their versions kept for ever (``eval_versions``) and their
tests (``eval_tests``). Each function works in the caller's session (and its transaction); the
service (``simeval.service.evals``, ``evalfiles``) checks the input and decides."""

from __future__ import annotations

from sqlalchemy import and_, func, select, true

from simeval.store.database import Tx
from simeval.store.tables import Eval, EvalTest, EvalVersion


def latest_test(s: Tx, eval_id: int, version: int, passed: bool = False) -> EvalTest | None:
    """The latest test of the eval's version ``version`` (the latest passing one if asked),
    or None."""
    q = select(EvalTest).where(EvalTest.eval_id == eval_id, EvalTest.version == version)
    if passed:
        q = q.where(EvalTest.passed == true())
    return s.scalar(q.order_by(EvalTest.id.desc()).limit(1))


def latest_tests(s: Tx, eval_ids: list[int]) -> dict[int, EvalTest]:
    """The latest test of each eval's current version, by eval id (evals without one left
    out)."""
    tests: dict[int, EvalTest] = {}
    if eval_ids:
        latest = (
            select(func.max(EvalTest.id))
            .join(Eval, and_(Eval.id == EvalTest.eval_id, Eval.version == EvalTest.version))
            .where(EvalTest.eval_id.in_(eval_ids))
            .group_by(EvalTest.eval_id)
        )
        for t in s.scalars(select(EvalTest).where(EvalTest.id.in_(latest))):
            tests[t.eval_id] = t
    return tests


def eval_id_named(s: Tx, name: str, not_id: int | None = None) -> int | None:
    """The id of the eval named ``name`` (other than eval ``not_id`` when given), or None."""
    q = select(Eval.id).where(Eval.name == name)
    if not_id is not None:
        q = q.where(Eval.id != not_id)
    return s.scalar(q)


def list_evals(s: Tx, status: str | None, include_archived: bool) -> list[Eval]:
    """The evals by name: those of ``status`` when given, else all but the archived unless
    ``include_archived``."""
    q = select(Eval).order_by(Eval.name)
    if status is not None:
        q = q.where(Eval.status == status)
    elif not include_archived:
        q = q.where(Eval.status != "archived")
    return list(s.scalars(q))


def eval_versions(s: Tx, eval_id: int) -> list[EvalVersion]:
    """Every stored version of eval ``eval_id``, oldest first."""
    return list(
        s.scalars(
            select(EvalVersion).where(EvalVersion.eval_id == eval_id).order_by(EvalVersion.version)
        )
    )


def add_eval(s: Tx, ev: Eval) -> Eval:
    """``ev`` stored (flushed: it has its id)."""
    s.add(ev)
    s.flush()
    return ev


def add_version(s: Tx, version: EvalVersion) -> EvalVersion:
    """``version`` added to the transaction (written with the next flush or the commit)."""
    s.add(version)
    return version


def add_test(s: Tx, test: EvalTest) -> EvalTest:
    """``test`` stored (flushed: it has its id)."""
    s.add(test)
    s.flush()
    return test
