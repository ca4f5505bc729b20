"""The SQL of ``users`` (migration 0016): people and services, their roles, and the hashes of
their keys and passwords. Each function works in the caller's session (and its transaction);
the service (``simeval.service.users``) makes the keys and hashes and checks the input."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from simeval.store.tables import User


def count_users(s: Session) -> int:
    """How many users exist (disabled ones included)."""
    return int(s.scalar(select(func.count()).select_from(User)) or 0)


def count_admins(s: Session) -> int:
    """How many enabled users have the admin role."""
    q = select(func.count()).select_from(User).where(User.role == "admin", User.disabled.is_(False))
    return int(s.scalar(q) or 0)


def find_user(s: Session, name: str) -> User | None:
    """The user named ``name`` (exactly), or None."""
    return s.scalar(select(User).where(User.name == name))


def user_by_key(s: Session, key_hash: str) -> User | None:
    """The user whose key hashes to ``key_hash``, or None."""
    return s.scalar(select(User).where(User.key_hash == key_hash))


def list_users(s: Session) -> list[User]:
    """Every user, by name."""
    return list(s.scalars(select(User).order_by(User.name)))


def add_user(
    s: Session,
    name: str,
    role: str,
    *,
    key_hash: str | None,
    key_prefix: str | None,
    password_hash: str | None,
    at: datetime,
) -> User:
    """Store a new user (a duplicate name fails on the unique constraint)."""
    user = User(
        name=name,
        role=role,
        key_hash=key_hash,
        key_prefix=key_prefix,
        password_hash=password_hash,
        created_at=at,
        disabled=False,
    )
    s.add(user)
    s.flush()
    return user


def touch_user(s: Session, name: str, at: datetime) -> None:
    """Record that user ``name`` was seen at ``at``."""
    s.execute(update(User).where(User.name == name).values(last_used_at=at))
