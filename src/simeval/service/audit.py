"""The audit log read back: who changed what, and when (``AuditService.audit_log``). Entries
are written by ``simeval.service.actor.record`` in each change's own transaction and never
changed or deleted (the database's triggers refuse it, migration 0016)."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from simeval.checks import as_utc, check_lookup, naive_utc, parse_time
from simeval.errors import InvalidInput
from simeval.service.base import Part
from simeval.service.cursor import decode_cursor, encode_cursor
from simeval.service.user_models import AuditEntryOut, AuditPage
from simeval.store import AuditEntry
from simeval.store.audit_sql import read_entries

MAX_AUDIT_PAGE = 500


def _entry(row: AuditEntry) -> AuditEntryOut:
    return AuditEntryOut(
        id=row.id,
        at=as_utc(row.at),
        actor=row.actor,
        action=row.action,
        target=row.target,
        detail=row.detail or {},
    )


class AuditService(Part):
    """Reading the audit log."""

    def audit_log(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        target: str | None = None,
        since: object = None,
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
            before = cast(tuple[datetime, int], decode_cursor(cursor, (datetime, int)))
        named = {"actor": actor, "action": action, "target": target}
        if any(v and check_lookup(v, k) is None for k, v in named.items()):
            return AuditPage(entries=[], next_cursor=None)  # a NUL: no entry holds one
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
