"""Who a change is made by, and its entry in the audit log (the write side of
``simeval.service.audit``, kept apart so that every module that records a change imports no
more than it needs: a run's writer process stores run deletions without pydantic).

Every change made through the service records an entry in the same write transaction as the
change (``record``): ``{at, actor, action, target, detail}``. The actor is whoever the code
running the change acts for (``acting_as``): the HTTP API and the studio set the signed-in
user for each request, the CLI its operating-system account as ``cli:NAME``; None when
nobody is named (a server without users).

>>> with acting_as("ana"):
...     current_actor()
'ana'
>>> current_actor() is None
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from simeval.checks import utc_now
from simeval.store import Tx
from simeval.store.audit_sql import add_entry

_ACTOR: ContextVar[str | None] = ContextVar("simeval_actor", default=None)
_SIGNED_IN: ContextVar[bool] = ContextVar("simeval_signed_in", default=False)


def current_actor() -> str | None:
    """Who the running code acts for (``acting_as``), or None."""
    return _ACTOR.get()


def signed_in_user() -> str | None:
    """The user a server request was signed in as (a key, a session, the SSO header), or
    None: then a name a caller gives (a reviewer's) is taken as given."""
    return _ACTOR.get() if _SIGNED_IN.get() else None


@contextlib.contextmanager
def acting_as(actor: str | None, *, signed_in: bool = False) -> Iterator[None]:
    """Changes made inside the block are recorded as made by ``actor``; ``signed_in``: a
    user the server authenticated (``signed_in_user``)."""
    token, signed = _ACTOR.set(actor), _SIGNED_IN.set(signed_in and actor is not None)
    try:
        yield
    finally:
        _ACTOR.reset(token)
        _SIGNED_IN.reset(signed)


def record(s: Tx, action: str, target: str, **detail: Any) -> None:
    """Append an audit entry for a change made in ``s``'s write transaction, by the current
    actor. ``action``: ``area.verb`` (``eval.edit``); ``target``: ``kind:name``
    (``eval:greeting``); ``detail``: JSON-ready values."""
    add_entry(s, at=utc_now(), actor=current_actor(), action=action, target=target, detail=detail)
