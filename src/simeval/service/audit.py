"""The audit log: who changed what, and when.

Every change made through the service records an entry in the same write transaction as the
change (``record``): ``{at, actor, action, target, detail}``. The actor is whoever the code
running the change acts for (``acting_as``): the HTTP API and the studio set the signed-in
user for each request, the CLI its operating-system account as ``cli:NAME``; None when
nobody is named (a server without users). Entries are never changed or deleted (the
database's triggers refuse it, migration 0016).

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
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from simeval.checks import as_utc, naive_utc, parse_time, utc_now
from simeval.errors import InvalidInput
from simeval.service.base import ServiceBase
from simeval.service.cursor import decode_cursor, encode_cursor
from simeval.service.user_models import AuditEntryOut, AuditPage
from simeval.store.audit import add_entry, read_entries

_ACTOR: ContextVar[str | None] = ContextVar("simeval_actor", default=None)
_SIGNED_IN: ContextVar[bool] = ContextVar("simeval_signed_in", default=False)
MAX_AUDIT_PAGE = 500


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


def record(s: Session, action: str, target: str, **detail: Any) -> None:
    """Append an audit entry for a change made in ``s``'s write transaction, by the current
    actor. ``action``: ``area.verb`` (``eval.edit``); ``target``: ``kind:name``
    (``eval:greeting``); ``detail``: JSON-ready values."""
    add_entry(s, at=utc_now(), actor=current_actor(), action=action, target=target, detail=detail)


def _entry(row: Any) -> AuditEntryOut:
    return AuditEntryOut(
        id=row.id,
        at=as_utc(row.at),
        actor=row.actor,
        action=row.action,
        target=row.target,
        detail=row.detail or {},
    )


class AuditMixin(ServiceBase):
    """Reading the audit log."""

    def audit_log(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        target: str | None = None,
        since: Any = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> AuditPage:
        """A page of the audit log, newest first, filtered by actor, action (``eval.edit`` or
        ``eval`` for every eval change), target (``eval:greeting``) and ``since`` (a time or
        an age like ``7d``); ``cursor`` is the previous page's ``next_cursor``."""
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_AUDIT_PAGE
        ):
            raise InvalidInput(f"limit must be between 1 and {MAX_AUDIT_PAGE}")
        start = parse_time(since, "since") if since not in (None, "") else None
        before = None
        if cursor:
            before = decode_cursor(cursor, (datetime, int))
        with self.store.read() as s:
            rows = read_entries(
                s,
                limit=limit + 1,
                before=(before[0], before[1]) if before else None,
                actor=actor or None,
                action=action or None,
                target=target or None,
                since=naive_utc(start) if start is not None else None,
            )
        more = len(rows) > limit
        rows = rows[:limit]
        entries = [_entry(r) for r in rows]
        next_cursor = encode_cursor((rows[-1].at, rows[-1].id)) if more and rows else None
        return AuditPage(entries=entries, next_cursor=next_cursor)
