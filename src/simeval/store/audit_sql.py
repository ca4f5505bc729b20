"""The SQL of the audit log (``audit_log``, migration 0016): entries are added and read, never
changed (triggers refuse an update or a delete). Each function works in the caller's session,
so an entry commits or rolls back with the change it records."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from simeval.jsontypes import JSONObject
from simeval.store.tables import AuditEntry


def add_entry(
    s: Session,
    *,
    at: datetime,
    actor: str | None,
    action: str,
    target: str,
    detail: JSONObject,
) -> AuditEntry:
    """Append one entry."""
    entry = AuditEntry(at=at, actor=actor, action=action, target=target, detail=detail)
    s.add(entry)
    s.flush()
    return entry


def read_entries(
    s: Session,
    *,
    limit: int,
    before: tuple[datetime, int] | None = None,
    actor: str | None = None,
    action: str | None = None,
    target: str | None = None,
    since: datetime | None = None,
) -> list[AuditEntry]:
    """Up to ``limit`` entries, newest first, older than the keyset cursor ``before`` (the
    (time, id) of the last entry of the previous page); ``action`` matches a whole action
    (``eval.edit``) or a family (``eval``: every ``eval.*``)."""
    q = select(AuditEntry)
    if actor is not None:
        q = q.where(AuditEntry.actor == actor)
    if action is not None:
        q = q.where(
            or_(
                AuditEntry.action == action,
                AuditEntry.action.startswith(action + ".", autoescape=True),
            )
        )
    if target is not None:
        q = q.where(AuditEntry.target == target)
    if since is not None:
        q = q.where(AuditEntry.at >= since)
    if before is not None:
        at, entry_id = before
        q = q.where(or_(AuditEntry.at < at, (AuditEntry.at == at) & (AuditEntry.id < entry_id)))
    q = q.order_by(AuditEntry.at.desc(), AuditEntry.id.desc()).limit(limit)
    return list(s.scalars(q))
