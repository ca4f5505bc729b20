"""``simeval captures list`` and ``simeval conversations list|show``, and what every listing
command shares for keyset paging: the ``--cursor`` option, the ``--json`` page (the rows
beside ``total``, ``next_cursor`` and ``prev_cursor``, as the HTTP API answers them) and the
cursor lines under a table.

A script pages on by passing a page's ``next_cursor`` back as ``--cursor``; ``null`` (JSON)
or no "next page" line (table) is the end. A cursor that is cut, edited or from another
listing, or one given with ``--offset``, is a one-line error with exit code 2 (the service's
``InvalidInput``, through ``Group``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.markup import escape
from rich.table import Table

from simeval.cli.common import (
    Group,
    console,
    db_option,
    dump,
    json_option,
    percent,
    print_json,
    service_at,
    short,
    verdict,
)

if TYPE_CHECKING:  # pydantic models load with the service, not with every command
    from pydantic import BaseModel

    from simeval.service.cursor import Page

_F = TypeVar("_F", bound=Callable[..., object])
_M = TypeVar("_M", bound="BaseModel")

cursor_option = click.option(
    "--cursor",
    default=None,
    metavar="CURSOR",
    help="Start after a previous page: its next_cursor (older rows) or prev_cursor (newer).",
)


def page_json(name: str, page: Page[_M], total: int, limit: int, offset: int) -> dict[str, object]:
    """A page as ``--json`` prints it: the rows under ``name`` with the cursors going on from
    them (null at the ends), in the shape of the HTTP API's answer."""
    return {
        "total": total,
        "limit": limit,
        "offset": offset,
        name: [dump(item) for item in page.items],
        "next_cursor": page.next_cursor,
        "prev_cursor": page.prev_cursor,
    }


def print_cursors(page: Page[_M]) -> None:
    """The lines under a listing's table that page on from it (none on a single page)."""
    if page.next_cursor is not None:
        click.echo(f"next page (older): --cursor {page.next_cursor}")
    if page.prev_cursor is not None:
        click.echo(f"previous page (newer): --cursor {page.prev_cursor}")


def _page_options(func: _F) -> _F:
    func = click.option(
        "--offset", default=0, show_default=True, type=click.IntRange(0), help="Rows to skip."
    )(func)
    func = click.option(
        "--limit", default=50, show_default=True, type=click.IntRange(1, 1000), help="Page size."
    )(func)
    return cursor_option(func)


# -- captures -------------------------------------------------------------------------------
@click.group(cls=Group)
def captures() -> None:
    """List stored captures (newest first) with their verdicts.

    \b
    Example:
        simeval captures list --meta engine=v2 --since 1d
        simeval captures list --json --limit 1000 --cursor "$(jq -r .next_cursor page.json)"
    """


@captures.command("list")
@click.option(
    "--meta",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only captures with this metadata (repeatable; all must hold).",
)
@click.option("--conversation-id", default=None, help="Only this conversation's turns.")
@click.option("--since", default=None, help="From this time: ISO 8601 or an age (7d).")
@click.option("--until", default=None, help="Before this time: ISO 8601 or an age.")
@_page_options
@db_option
@json_option
def list_captures(
    meta: tuple[str, ...],
    conversation_id: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    offset: int,
    cursor: str | None,
    db: str | None,
    as_json: bool,
) -> None:
    """Captures, newest first: time, conversation, output and each eval's verdict; page on
    with ``--cursor`` the previous page's next_cursor."""
    filters: dict[str, Any] = {
        "meta": list(meta) or None,
        "conversation_id": conversation_id,
        "since": since,
        "until": until,
    }
    with service_at(db) as svc:
        page = svc.page_captures(limit=limit, offset=offset, cursor=cursor, **filters)
        total = svc.count_captures(**filters)
    if as_json:
        print_json(page_json("captures", page, total, limit, offset))
        return
    if not page.items:
        console.print("no captures")
        print_cursors(page)
        return
    table = Table("id", "time (UTC)", "conversation", "output", "results")
    for c in page.items:
        table.add_row(
            str(c.id),
            c.captured_at.strftime("%Y-%m-%d %H:%M"),
            escape(short(c.conversation_id, 20) if c.conversation_id else "-"),
            escape(short(c.output, 40)),
            " ".join(f"{escape(r.eval_name)} {verdict(r.passed)}" for r in c.results) or "-",
        )
    console.print(table)
    console.print(f"{len(page.items)} of {total} captures")
    print_cursors(page)


# -- conversations --------------------------------------------------------------------------
@click.group(cls=Group)
def conversations() -> None:
    """List conversations (most recently active first) and show one turn by turn.

    \b
    Example:
        simeval conversations list
        simeval conversations show c42
    """


@conversations.command("list")
@_page_options
@db_option
@json_option
def list_conversations(
    limit: int, offset: int, cursor: str | None, db: str | None, as_json: bool
) -> None:
    """Conversations, most recently active first: turns, pass rate, last activity, last
    input; page on with ``--cursor`` the previous page's next_cursor (a conversation with a
    new turn moves to the top and is not given twice)."""
    with service_at(db) as svc:
        page = svc.page_conversations(limit=limit, offset=offset, cursor=cursor)
        total = svc.count_conversations()
    if as_json:
        print_json(page_json("conversations", page, total, limit, offset))
        return
    if not page.items:
        console.print("no conversations (captures with a conversation id)")
        print_cursors(page)
        return
    table = Table("id", "turns", "last activity (UTC)", "pass rate", "last input")
    for c in page.items:
        table.add_row(
            escape(short(c.id, 30)),
            str(c.turns),
            c.last_at.strftime("%Y-%m-%d %H:%M"),
            percent(c.pass_rate),
            escape(short(c.last_input, 40)),
        )
    console.print(table)
    console.print(f"{len(page.items)} of {total} conversations")
    print_cursors(page)


@conversations.command("show")
@click.argument("conversation_id")
@db_option
@json_option
def show_conversation(conversation_id: str, db: str | None, as_json: bool) -> None:
    """A conversation's turns in order (at most 1,000), each with its verdicts."""
    with service_at(db) as svc:
        conv = svc.get_conversation(conversation_id)
    if as_json:
        print_json(dump(conv))
        return
    console.print(
        f"conversation {escape(conv.id)}: {conv.turns} turns, pass rate "
        f"{percent(conv.pass_rate)}, {conv.first_at:%Y-%m-%d %H:%M} to "
        f"{conv.last_at:%Y-%m-%d %H:%M} UTC",
        soft_wrap=True,
    )
    for c in conv.captures:
        verdicts = " ".join(f"{escape(r.eval_name)} {verdict(r.passed)}" for r in c.results)
        console.print(
            f"[bold]{c.id}[/bold] {c.captured_at:%H:%M:%S} {verdicts or '-'}", soft_wrap=True
        )
        console.print(f"  input: {escape(short(c.input, 200))}", soft_wrap=True)
        console.print(f"  output: {escape(short(c.output, 200))}", soft_wrap=True)


COMMANDS: tuple[click.Command, ...] = (captures, conversations)
