"""What the users and audit parts of the service return (pydantic, JSON-ready; the HTTP API's
response models too). Times are timezone-aware UTC."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Role = Literal["viewer", "reviewer", "editor", "admin", "ingest"]


class UserOut(BaseModel):
    """A user as listed: never its key or password, only the key's first characters."""

    model_config = ConfigDict(extra="forbid")

    name: str
    role: Role
    created_at: datetime
    last_used_at: datetime | None = None
    key_prefix: str | None = None
    has_password: bool = False
    disabled: bool = False


class NewKey(BaseModel):
    """A user's new API key: shown this once, stored only as a hash."""

    model_config = ConfigDict(extra="forbid")

    user: UserOut
    key: str


class AuditEntryOut(BaseModel):
    """One change in the audit log: when, who, what, to what, and its detail."""

    model_config = ConfigDict(extra="forbid")

    id: int
    at: datetime
    actor: str | None = None  # None: made without users (local mode, SIMEVAL_TOKEN)
    action: str
    target: str
    detail: dict[str, Any]


class AuditPage(BaseModel):
    """A page of the audit log, newest first; ``next_cursor`` continues it (None: the end)."""

    model_config = ConfigDict(extra="forbid")

    entries: list[AuditEntryOut]
    next_cursor: str | None = None
