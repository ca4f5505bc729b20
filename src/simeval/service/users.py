"""Users: people and services with a role and their own key (``simeval users``, the studio's
Users page, ``/api/users``). Keys and passwords are made and checked in
``simeval.service.credentials``; only their hashes reach the store (``simeval.store.users_sql``).
Every change is recorded in the audit log (``user.add``, ``user.role``, ``user.disable``,
``user.enable``, ``user.key``, ``user.password``)."""

from __future__ import annotations

import dataclasses

from simeval.checks import as_utc, utc_now
from simeval.errors import Conflict, NotFound
from simeval.service.actor import record
from simeval.service.base import Part
from simeval.service.credentials import (
    check_password,
    check_role,
    check_user_name,
    hash_password,
    key_hash,
    key_prefix,
    new_key,
    password_matches,
)
from simeval.service.user_models import NewKey, UserOut
from simeval.store import Tx
from simeval.store.lookups import write_or_else
from simeval.store.tables import User
from simeval.store.users_sql import (
    add_user,
    count_admins,
    count_users,
    find_user,
    list_users,
    touch_user,
    user_by_key,
)


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who a request acts for: a user's name, role and whether it is disabled."""

    name: str
    role: str
    disabled: bool = False


def _out(user: User) -> UserOut:
    return UserOut(
        name=user.name,
        role=user.role,  # type: ignore[arg-type]  # checked on every write
        created_at=as_utc(user.created_at),
        last_used_at=as_utc(user.last_used_at) if user.last_used_at else None,
        key_prefix=user.key_prefix,
        has_password=bool(user.password_hash),
        disabled=bool(user.disabled),
    )


def _identity(user: User | None) -> Identity | None:
    return None if user is None else Identity(user.name, user.role, bool(user.disabled))


class UserService(Part):
    """Users, their roles, keys and passwords."""

    def _user(self, s: Tx, name: object) -> User:
        user = find_user(s, check_user_name(name))
        if user is None:
            raise NotFound(f"no user named {name!r}")
        return user

    def has_users(self) -> bool:
        """Whether any user exists (then every request needs one, ``simeval.web.security``)."""
        with self.store.read() as s:
            return count_users(s) > 0

    def list_users(self) -> list[UserOut]:
        """Every user, by name."""
        with self.store.read() as s:
            return [_out(u) for u in list_users(s)]

    def get_user(self, name: str) -> UserOut:
        """One user (``NotFound`` when there is none of that name)."""
        with self.store.read() as s:
            return _out(self._user(s, name))

    def add_user(self, name: str, role: str, password: str | None = None) -> NewKey:
        """Make a user with a new key (returned once: only its hash is kept) and, when given,
        a password for the studio's sign-in."""
        check_user_name(name)
        check_role(role)
        hashed = hash_password(check_password(password)) if password is not None else None
        key = new_key()

        def write(s: Tx) -> NewKey:
            if find_user(s, name) is not None:
                raise Conflict(f"a user named {name!r} already exists")
            user = add_user(
                s,
                name,
                role,
                key_hash=key_hash(key),
                key_prefix=key_prefix(key),
                password_hash=hashed,
                at=utc_now(),
            )
            record(s, "user.add", f"user:{name}", role=role)
            return NewKey(user=_out(user), key=key)

        def refused(_message: str) -> NewKey:  # made meanwhile by another process
            raise Conflict(f"a user named {name!r} already exists") from None

        result: NewKey = write_or_else(self.store, write, refused)
        return result

    def set_user_role(self, name: str, role: str) -> UserOut:
        """Give user ``name`` another role (in force within a second on every server)."""
        check_role(role)

        def write(s: Tx) -> UserOut:
            user = self._user(s, name)
            if role != "admin":
                _keep_an_admin(s, user)
            before, user.role = user.role, role
            record(s, "user.role", f"user:{name}", role=role, was=before)
            return _out(user)

        result: UserOut = self.store.run_write(write)
        return result

    def set_user_disabled(self, name: str, disabled: bool) -> UserOut:
        """Disable user ``name`` (its key and sessions refused from the next request) or
        enable it again."""

        def write(s: Tx) -> UserOut:
            user = self._user(s, name)
            if disabled:
                _keep_an_admin(s, user)
            user.disabled = disabled
            record(s, "user.disable" if disabled else "user.enable", f"user:{name}")
            return _out(user)

        result: UserOut = self.store.run_write(write)
        return result

    def new_user_key(self, name: str) -> NewKey:
        """Replace user ``name``'s key with a new one (returned once); the old one stops
        working at once."""
        key = new_key()

        def write(s: Tx) -> NewKey:
            user = self._user(s, name)
            user.key_hash, user.key_prefix = key_hash(key), key_prefix(key)
            record(s, "user.key", f"user:{name}", key_prefix=key_prefix(key))
            return NewKey(user=_out(user), key=key)

        result: NewKey = self.store.run_write(write)
        return result

    def set_user_password(self, name: str, password: str) -> UserOut:
        """Set user ``name``'s studio password (stored as an argon2 hash)."""
        hashed = hash_password(check_password(password))

        def write(s: Tx) -> UserOut:
            user = self._user(s, name)
            user.password_hash = hashed
            record(s, "user.password", f"user:{name}")
            return _out(user)

        result: UserOut = self.store.run_write(write)
        return result

    def identity_by_key(self, key: str) -> Identity | None:
        """The user whose API key is ``key`` (disabled or not), or None."""
        with self.store.read() as s:
            return _identity(user_by_key(s, key_hash(key)))

    def identity(self, name: str) -> Identity | None:
        """The user named ``name``, or None (also for a name no user could have)."""
        try:
            check_user_name(name)
        except ValueError:
            return None
        with self.store.read() as s:
            return _identity(find_user(s, name))

    def identity_by_password(self, name: str, password: str) -> Identity | None:
        """The user ``name`` when ``password`` is theirs, else None."""
        try:
            check_user_name(name)
        except ValueError:
            return None
        with self.store.read() as s:
            user = find_user(s, name)
            stored = user.password_hash if user is not None else None
            found = _identity(user)
        return found if password_matches(stored, password) else None

    def ensure_user(self, name: str, role: str = "viewer") -> Identity:
        """The user ``name``, made with ``role`` and no key or password when there is none
        (a sign-in through the team's SSO proxy)."""
        check_user_name(name)
        found = self.identity(name)
        if found is not None:
            return found

        def write(s: Tx) -> Identity:
            user = find_user(s, name)
            if user is None:
                user = add_user(
                    s, name, role, key_hash=None, key_prefix=None, password_hash=None, at=utc_now()
                )
                record(s, "user.add", f"user:{name}", role=role, via="sso")
            ident = _identity(user)
            assert ident is not None
            return ident

        # made meanwhile by another worker: that user (None: the refusal is raised)
        made: Identity = write_or_else(self.store, write, lambda _message: self.identity(name))
        return made

    def touch_user(self, name: str) -> None:
        """Record that user ``name`` was just seen (its ``last_used_at``)."""
        self.store.run_write(lambda s: touch_user(s, name, utc_now()))


def _keep_an_admin(s: Tx, user: User) -> None:
    # a change that takes ``user``'s admin rights away must leave an enabled admin: without
    # one, users could be managed from the CLI alone, on the database's own machine
    if user.role == "admin" and not user.disabled and count_admins(s) <= 1:
        raise Conflict(f"{user.name!r} is the last enabled admin: make another user admin first")
