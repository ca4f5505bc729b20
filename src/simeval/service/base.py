"""What every part of the service shares: the store, the write step, the lookups (an eval by
name or id, a row by id), and the process's registry of open services."""

from __future__ import annotations

import difflib
import os
import threading
from collections.abc import Callable
from typing import Any, Self, TypeVar

from simeval.checks import MAX_ID, check_id, check_lookup
from simeval.errors import Conflict, InvalidType, NotFound
from simeval.store import Capture, Eval, Result, Run, Store, Tx, resolve_db_url
from simeval.store.lookups import eval_by_id, eval_named, eval_names, row_by_id, write_or_else

_M = TypeVar("_M", Capture, Result, Run)


class ServiceBase:
    """The store of one database and the steps every part of the service shares."""

    def __init__(self, db: str | os.PathLike[str] | None = None):
        self.url = resolve_db_url(db)
        self.store = Store(self.url)
        self._lock = threading.Lock()
        # called with each committed batch of captures (``CaptureMixin.on_captured``)
        self.capture_listeners: list[Callable[[list[Any]], None]] = []

    def close(self) -> None:
        """Close the database connections."""
        self.store.close()
        with _SERVICES_LOCK:
            if _SERVICES.get(self.url) is self:
                del _SERVICES[self.url]

    def ping(self) -> None:
        """``Unavailable`` when the database cannot answer now (see ``Store.ping``)."""
        self.store.ping()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lookups --------------------------------------------------------------------------------
    def _find_eval(self, s: Tx, name_or_id: Any) -> Eval:
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

    def _write(self, fn: Callable[[Tx], Any]) -> Any:
        return write_or_else(self.store, fn, _name_conflict)


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


_SERVICES: dict[str, ServiceBase] = {}
_SERVICES_LOCK = threading.Lock()
_S = TypeVar("_S", bound=ServiceBase)


def shared_service(url: str, kind: type[_S]) -> _S:
    """The process's open ``kind`` for the database ``url``: made the first time, then the
    same one (a service closed since is made again)."""
    with _SERVICES_LOCK:
        svc = _SERVICES.get(url)
        if not isinstance(svc, kind):
            svc = kind(url)
            _SERVICES[url] = svc
        return svc
