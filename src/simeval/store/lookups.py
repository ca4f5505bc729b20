"""The lookups every part of the service shares (an eval by name or id, a row by id) and the
write step that turns a constraint's refusal into what the caller makes of it. Each function
works in the caller's session (and its transaction)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from simeval.store.database import Store, Tx
from simeval.store.tables import Capture, Eval, Result, Run

T = TypeVar("T")
M = TypeVar("M", Capture, Result, Run)


def eval_named(s: Tx, name: str) -> Eval | None:
    """The eval named ``name`` (exactly), or None."""
    return s.scalar(select(Eval).where(Eval.name == name))


def eval_by_id(s: Tx, eval_id: int) -> Eval | None:
    """The eval whose id is ``eval_id``, or None."""
    return s.get(Eval, eval_id)


def eval_names(s: Tx) -> list[str]:
    """Every eval's name (for a "did you mean" hint)."""
    return list(s.scalars(select(Eval.name)))


def row_by_id(s: Tx, model: type[M], row_id: int) -> M | None:
    """The row of ``model`` whose id is ``row_id``, or None."""
    return s.get(model, row_id)


def write_or_else(store: Store, fn: Callable[[Tx], T], refused: Callable[[str], T | None]) -> T:
    """What ``fn`` returns, run in a write transaction of ``store``. When the database
    refuses the write for a constraint (an IntegrityError: a race lost to another process),
    what ``refused`` makes of the driver's message (it may raise a simeval error instead);
    when that is None, the IntegrityError itself."""
    try:
        return store.run_write(fn)
    except IntegrityError as exc:
        instead = refused(str(exc.orig))
        if instead is None:
            raise
        return instead


def write_or_none(store: Store, fn: Callable[[Tx], T]) -> T | None:
    """What ``fn`` returns, run in a write transaction of ``store``; None when the database
    refuses the write for a constraint (another process wrote the same first)."""
    try:
        return store.run_write(fn)
    except IntegrityError:
        return None


def flush_changes(s: Tx) -> None:
    """Nothing: the transaction's pending changes written (flushed) to the database, so that
    a constraint refuses them now and new rows have their ids."""
    s.flush()
