"""`simeval users` and `simeval audit`: users with roles and their own keys, kept only as
hashes, on both backends; bad input is one line, exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result
from tests.clihelp import one_line_error

from simeval.cli import cli
from simeval.service import Service
from simeval.store import resolve_db_url


def run(db: str, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, [*args, "--db", db], input=input)


def add(db: str, name: str, role: str) -> str:
    res = run(db, "users", "add", name, "--role", role)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_add_prints_only_the_key_which_names_the_user(db: str) -> None:
    out = add(db, "ana@example.org", "admin")
    key = out.strip()
    assert out == key + "\n" and key.startswith("simeval_") and len(key) > 40
    with Service(db) as svc:
        found = svc.users.identity_by_key(key)
        assert found is not None and (found.name, found.role) == ("ana@example.org", "admin")
        assert svc.users.identity_by_key(key + "x") is None


def test_list_shows_each_user_without_the_key(db: str) -> None:
    key = add(db, "ana", "admin").strip()
    add(db, "collector", "ingest")
    res = run(db, "users", "list", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [(r["name"], r["role"], r["disabled"]) for r in rows] == [
        ("ana", "admin", False),
        ("collector", "ingest", False),
    ]
    assert rows[0]["key_prefix"] == key[:12] and key not in res.stdout
    assert set(rows[0]) >= {"created_at", "last_used_at", "key_prefix"}
    table = run(db, "users", "list")
    assert "collector" in table.stdout and "ingest" in table.stdout


def test_role_disable_enable_and_a_new_key(db: str) -> None:
    old = add(db, "bo", "viewer").strip()
    assert run(db, "users", "role", "bo", "editor").exit_code == 0
    assert run(db, "users", "disable", "bo").exit_code == 0
    with Service(db) as svc:
        found = svc.users.identity_by_key(old)
        assert found is not None and found.role == "editor" and found.disabled
    assert run(db, "users", "enable", "bo").exit_code == 0
    res = run(db, "users", "key", "bo")
    new = res.stdout.strip()
    assert res.exit_code == 0 and new != old and res.stdout == new + "\n"
    with Service(db) as svc:
        assert svc.users.identity_by_key(old) is None  # the old key stops at once
        again = svc.users.identity_by_key(new)
        assert again is not None and not again.disabled


def test_password_from_stdin_signs_in(db: str) -> None:
    add(db, "ana", "reviewer")
    res = run(db, "users", "password", "ana", input="correct horse\n")
    assert res.exit_code == 0, res.output
    with Service(db) as svc:
        assert svc.users.identity_by_password("ana", "correct horse") is not None
        assert svc.users.identity_by_password("ana", "correct horse ") is None
        assert svc.users.identity_by_password("nobody", "correct horse") is None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("users", "add", "a b", "--role", "viewer"), "invalid user name"),
        (("users", "add", "x" * 65, "--role", "viewer"), "invalid user name"),
        (("users", "add", "", "--role", "viewer"), "invalid user name"),
        (("users", "add", "ana", "--role", "boss"), "unknown role 'boss'"),
        (("users", "role", "ghost", "admin"), "no user named 'ghost'"),
        (("users", "disable", "ghost"), "no user named 'ghost'"),
        (("users", "key", "bad name"), "invalid user name"),
        (("audit", "--since", "yesterday"), "since"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    one_line_error(run(str(tmp_path / "e.db"), *args), needle)


def test_a_duplicate_or_a_short_password_is_one_line(new_sqlite: Callable[..., str]) -> None:
    db = new_sqlite("e.db")
    add(db, "ana", "admin")
    one_line_error(run(db, "users", "add", "ana", "--role", "viewer"), "already exists")
    one_line_error(run(db, "users", "password", "ana", input="short\n"), "8 to 1024")


def test_the_last_enabled_admin_keeps_its_rights(db: str) -> None:
    add(db, "ana", "admin")
    add(db, "bo", "editor")
    one_line_error(run(db, "users", "role", "ana", "editor"), "last enabled admin")
    one_line_error(run(db, "users", "disable", "ana"), "last enabled admin")
    assert run(db, "users", "role", "bo", "admin").exit_code == 0  # another admin first
    assert run(db, "users", "disable", "ana").exit_code == 0
    one_line_error(run(db, "users", "role", "bo", "viewer"), "last enabled admin")
    assert run(db, "users", "enable", "ana").exit_code == 0
    assert run(db, "users", "role", "bo", "viewer").exit_code == 0
    with Service(db) as svc:
        assert {u.name: (u.role, u.disabled) for u in svc.users.list_users()} == {
            "ana": ("admin", False),
            "bo": ("viewer", False),
        }


def test_no_key_or_password_is_in_the_file(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("e.db"))
    keys = [add(str(db), f"u{i}", "editor").strip() for i in range(3)]
    keys.append(run(str(db), "users", "key", "u0").stdout.strip())
    password = "a very particular password"
    assert run(str(db), "users", "password", "u1", input=password + "\n").exit_code == 0
    with Service(str(db)) as svc:  # checkpointed and closed: every byte is in the file
        svc.store.engine.dispose()
    data = b"".join(p.read_bytes() for p in tmp_path.glob("e.db*"))
    for secret in [*keys, password]:
        assert secret.encode() not in data
        assert secret[12:].encode() not in data  # not even past the listed prefix
    assert b"argon2id" in data  # the password is there, as its hash


def test_the_audit_log_records_user_changes_and_refuses_edits(db: str) -> None:
    add(db, "ana", "viewer")
    run(db, "users", "role", "ana", "admin")
    res = run(db, "audit", "--json")
    entries = json.loads(res.stdout)
    assert [(e["action"], e["target"]) for e in entries] == [
        ("user.role", "user:ana"),
        ("user.add", "user:ana"),
    ]
    assert entries[0]["detail"] == {"role": "admin", "was": "viewer"}
    assert entries[0]["actor"].startswith("cli")
    assert json.loads(run(db, "audit", "--actor", "nobody", "--json").stdout) == []
    engine = sa.create_engine(resolve_db_url(db))
    try:
        for statement in ("UPDATE audit_log SET actor = 'x'", "DELETE FROM audit_log"):
            with pytest.raises(sa.exc.DBAPIError, match="append-only"), engine.begin() as c:
                c.execute(sa.text(statement))
    finally:
        engine.dispose()
