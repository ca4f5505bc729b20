"""Users' keys, passwords, names and roles: making and checking them, never storing them.

A key is ``simeval_`` and 43 characters of ``secrets.token_urlsafe`` (256 random bits): it is
stored as its SHA-256 (a slow hash adds nothing for a secret that cannot be guessed, and a
fast one lets every request be checked by one indexed lookup), with its first 12 characters
kept for listings. A password, which a person chooses and may be guessed, is stored as an
argon2id hash (``argon2-cffi``'s defaults).

>>> key = new_key()
>>> key.startswith(KEY_START) and len(key) == 51
True
>>> key_hash(key) == key_hash(key) != key_hash(new_key())
True
>>> check_user_name("ana@example.org")
'ana@example.org'
"""

from __future__ import annotations

import hashlib
import re
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from simeval.errors import InvalidInput

ROLES = ("viewer", "reviewer", "editor", "admin", "ingest")
KEY_START = "simeval_"
PREFIX_CHARS = 12  # what a listing shows of a key: "simeval_" and 4 random characters
MAX_PASSWORD = 1024
MIN_PASSWORD = 8
_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
_HASHER = PasswordHasher()


def check_user_name(name: object) -> str:
    """``name`` when it is 1-64 ASCII letters, digits, ``.``, ``-``, ``_`` or ``@``; else a
    one-line ``InvalidInput``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = name if isinstance(name, str) else type(name).__name__
        raise InvalidInput(
            f"invalid user name {shown[:80]!r}: use 1-64 letters, digits, '.', '-', '_' or '@'"
        )
    return name


def check_role(role: object) -> str:
    """``role`` when it is one of ``ROLES``, else a one-line ``InvalidInput``."""
    if role not in ROLES:
        shown = role if isinstance(role, str) else type(role).__name__
        raise InvalidInput(f"unknown role {str(shown)[:40]!r}: use one of {', '.join(ROLES)}")
    return str(role)


def check_password(password: object) -> str:
    """``password`` when it is text of ``MIN_PASSWORD`` to ``MAX_PASSWORD`` characters."""
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidInput(f"a password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters long")
    return password


def new_key() -> str:
    """A new random API key."""
    return KEY_START + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    """What is stored of ``key``: its SHA-256, in hex."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_prefix(key: str) -> str:
    """The first characters of ``key``, kept to tell keys apart in a listing."""
    return key[:PREFIX_CHARS]


def hash_password(password: str) -> str:
    """The argon2id hash stored for ``password``."""
    return _HASHER.hash(password)


def password_matches(stored: str | None, password: str) -> bool:
    """Whether ``password`` is the one ``stored`` (an argon2 hash, or None: no password)."""
    if not stored:
        return False
    try:
        return _HASHER.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False
