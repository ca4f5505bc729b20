"""``simeval users`` and ``simeval audit``: a team's users, their roles, keys and passwords,
and the log of who changed what. A thin layer over ``Service``."""

from __future__ import annotations

import sys

import click
from rich.markup import escape

from simeval.cli.common import console, db_option, dump, json_option, print_json, service_at
from simeval.service.user_models import AuditEntryOut, UserOut


def _when(value: object) -> str:
    return "-" if value is None else str(value)[:19].replace("T", " ")


@click.group("users")
def users() -> None:
    """People and services with a role and their own API key.

    Once one user exists, every API call and studio page needs a user (its key as
    'Authorization: Bearer KEY', or the studio's sign-in); only GET /api/health stays open.

    \b
    Roles: viewer (reads), reviewer (+ review verdicts), editor (+ evals, datasets, runs,
    alerts), admin (+ users, settings, retention, cleanup), ingest (only writes captures).

    \b
    Examples:
        simeval users add ana --role admin
        simeval users password ana
        simeval users add collector --role ingest > collector.key
    """


@users.command("add")
@click.argument("name")
@click.option("--role", required=True, help="viewer, reviewer, editor, admin or ingest.")
@db_option
def add(name: str, role: str, db: str | None) -> None:
    """Add user NAME; print its new API key (and nothing else) on stdout.

    The key is shown this once: only its hash is stored. Give the user a studio password
    with `simeval users password NAME`.
    """
    with service_at(db) as svc:
        made = svc.users.add_user(name, role)
    click.echo(made.key)
    click.echo(
        f"user {name!r} added as {role}; the key above is shown once (only its hash is kept). "
        f"For the studio: simeval users password {name}",
        err=True,
    )


@users.command("list")
@db_option
@json_option
def list_(db: str | None, as_json: bool) -> None:
    """List the users: name, role, created, last used, key prefix, disabled."""
    with service_at(db) as svc:
        found = svc.users.list_users()
    if as_json:
        print_json([dump(u) for u in found])
        return
    if not found:
        console.print("No users: the server runs in local mode (or with SIMEVAL_TOKEN).")
        return
    _table(found)


def _table(found: list[UserOut]) -> None:
    from rich.table import Table

    table = Table("name", "role", "created", "last used", "key", "disabled")
    for u in found:
        table.add_row(
            escape(u.name),
            u.role,
            _when(u.created_at),
            _when(u.last_used_at),
            escape(u.key_prefix + "…") if u.key_prefix else "-",
            "yes" if u.disabled else "",
        )
    console.print(table)


@users.command("role")
@click.argument("name")
@click.argument("role")
@db_option
def role(name: str, role: str, db: str | None) -> None:
    """Give user NAME the role ROLE."""
    with service_at(db) as svc:
        svc.users.set_user_role(name, role)
    console.print(f"{escape(name)} is now {role}.")


@users.command("disable")
@click.argument("name")
@db_option
def disable(name: str, db: str | None) -> None:
    """Disable user NAME: its key and its studio sessions are refused from now on."""
    with service_at(db) as svc:
        svc.users.set_user_disabled(name, True)
    console.print(f"{escape(name)} is disabled.")


@users.command("enable")
@click.argument("name")
@db_option
def enable(name: str, db: str | None) -> None:
    """Enable user NAME again."""
    with service_at(db) as svc:
        svc.users.set_user_disabled(name, False)
    console.print(f"{escape(name)} is enabled.")


@users.command("key")
@click.argument("name")
@db_option
def key(name: str, db: str | None) -> None:
    """Give user NAME a new API key (printed on stdout); the old one stops working at once."""
    with service_at(db) as svc:
        made = svc.users.new_user_key(name)
    click.echo(made.key)
    click.echo(f"new key for {name!r}; the old one no longer works", err=True)


@users.command("password")
@click.argument("name")
@db_option
def password(name: str, db: str | None) -> None:
    """Set user NAME's studio password: typed at a prompt, or read from stdin (one line)."""
    if sys.stdin.isatty():
        given = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    else:
        given = sys.stdin.readline().rstrip("\r\n")
    with service_at(db) as svc:
        svc.users.set_user_password(name, given)
    click.echo(f"password set for {name!r}", err=True)


@click.command("audit")
@click.option("--since", default=None, help="From this time: ISO 8601 or an age (7d).")
@click.option("--actor", default=None, help="Only the changes made by this user.")
@click.option("--action", default=None, help="Only this action (eval.edit) or family (eval).")
@click.option("--target", default=None, help="Only changes to this target (eval:NAME).")
@click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(1, 500), help="Entries."
)
@db_option
@json_option
def audit(
    since: str | None,
    actor: str | None,
    action: str | None,
    target: str | None,
    limit: int,
    db: str | None,
    as_json: bool,
) -> None:
    """Show the audit log, newest first: who changed what, and when.

    \b
    Examples:
        simeval audit --since 7d
        simeval audit --actor ana --json
        simeval audit --target eval:greeting
    """
    with service_at(db) as svc:
        page = svc.audit_log(since=since, actor=actor, action=action, target=target, limit=limit)
    if as_json:
        print_json([dump(e) for e in page.entries])
        return
    if not page.entries:
        console.print("No changes recorded.")
        return
    _audit_table(page.entries)


def _audit_table(entries: list[AuditEntryOut]) -> None:
    from rich.table import Table

    table = Table("at", "actor", "action", "target", "detail")
    for e in entries:
        detail = ", ".join(f"{k}={v}" for k, v in e.detail.items())
        table.add_row(
            _when(e.at), escape(e.actor or "-"), e.action, escape(e.target), escape(detail[:80])
        )
    console.print(table)


COMMANDS = (users, audit)
