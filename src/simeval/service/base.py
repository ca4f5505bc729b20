"""What every part of the service shares.

``Core`` is one database's store with the steps every part takes: the write step (a lost race
for a name is a ``Conflict``), the lookup of an eval by name or id, the listeners of committed
captures. A ``Part`` is one concern's methods over a ``Core`` (``EvalService``,
``CaptureService``...): a part that needs another says so in its constructor, and the
``Service`` façade (``simeval.service.facade``) builds them all and offers their methods."""

from __future__ import annotations

import difflib
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from simeval.checks import MAX_ID, check_id, check_lookup
from simeval.errors import Conflict, InvalidType, NotFound
from simeval.store import Capture, Eval, Result, Run, Store, Tx, resolve_db_url
from simeval.store.lookups import eval_by_id, eval_named, eval_names, row_by_id, write_or_else

if TYPE_CHECKING:
    from simeval.service.filters import ResultFilter

_M = TypeVar("_M", Capture, Result, Run)
_T = TypeVar("_T")


class Core:
    """One database's store and the steps every part of the service shares."""

    def __init__(self, db: str | os.PathLike[str] | None = None):
        self.url = resolve_db_url(db)
        self.store = Store(self.url)
        # held while the active evals are prepared again (``CaptureService``)
        self.lock = threading.Lock()
        # called with each committed batch of captures (``CaptureService.on_captured``)
        self.capture_listeners: list[Callable[[list[Any]], None]] = []

    def close(self) -> None:
        """Close the database connections."""
        self.store.close()

    def find_eval(self, s: Tx, name_or_id: Any) -> Eval:
        """The eval named ``name_or_id`` (or of that id) in ``s``, else ``NotFound`` naming the
        closest name."""
        if isinstance(name_or_id, Eval):
            return name_or_id
        if isinstance(name_or_id, bool) or not isinstance(name_or_id, str | int):
            raise InvalidType(f"eval name must be a string, not {type(name_or_id).__name__}")
        if isinstance(name_or_id, str) and check_lookup(name_or_id, "eval name") is None:
            raise NotFound(f"no eval named {name_or_id!r}")  # no stored name holds a NUL
        if isinstance(name_or_id, str):
            found = eval_named(s, name_or_id.strip())
            if found is not None:
                return found
        digits = isinstance(name_or_id, int) or (
            name_or_id.strip().isascii() and (name_or_id.strip().isdigit())
        )
        # the stripped digits: str.strip drops characters int() does not (U+001C, U+00A0...)
        number = 0
        if digits:
            number = int(name_or_id.strip() if isinstance(name_or_id, str) else name_or_id)
        if 0 < number <= MAX_ID:
            by_id = eval_by_id(s, number)
            if by_id is not None:
                return by_id
        names = eval_names(s)
        close = difflib.get_close_matches(str(name_or_id), names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise NotFound(f"no eval named {str(name_or_id)!r}{hint}")

    def write(self, fn: Callable[[Tx], _T]) -> _T:
        """``fn(s)`` in a write transaction (retried while the lock is busy); a constraint's
        refusal naming a name is a ``Conflict``."""
        return write_or_else(self.store, fn, _name_conflict)


class Part:
    """One concern's methods over the ``Core`` of a database."""

    def __init__(self, core: Core):
        self.core = core
        self.store = core.store

    def _write(self, fn: Callable[[Tx], _T]) -> _T:
        return self.core.write(fn)

    def _find_eval(self, s: Tx, name_or_id: Any) -> Eval:
        return self.core.find_eval(s, name_or_id)

    def _eval_id(self, s: Tx, f: ResultFilter) -> int | None:
        """The id of the eval ``f`` names (``NotFound`` when there is none), None for all."""
        return None if f.eval_name is None else self._find_eval(s, f.eval_name).id


def _name_conflict(message: str) -> None:
    """A write refused for a constraint (a race lost to another process): ``Conflict`` as
    the check would have said when the driver's ``message`` names a name; else None (the
    refusal is raised as it is)."""
    if "name" in message.lower():
        raise Conflict("an eval with that name already exists") from None


def get_row(s: Tx, model: type[_M], value: Any, what: str) -> _M:
    """The row of ``model`` whose id is ``value`` (checked by ``check_id``), else
    ``NotFound`` naming ``what``."""
    row = row_by_id(s, model, check_id(value, what))
    if row is None:
        raise NotFound(f"no {what} with id {value}")
    return row
