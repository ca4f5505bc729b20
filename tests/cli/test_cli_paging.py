"""``--cursor`` on the CLI's listing commands (``results list``, ``captures list``,
``conversations list``, ``runs list``) through the CLI runner, on a real SQLite file and a real
PostgreSQL database (``conftest.db``).

A script pages with ``--json`` (the rows beside ``total``, ``next_cursor`` and
``prev_cursor``, as the HTTP API answers them) and ``--cursor`` the previous page's
``next_cursor``: every row comes exactly once, in the listing's order, while new rows arrive
between pages; the table's "next page" line carries the same cursor; a bad cursor, another
listing's, or one with ``--offset`` is one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from simeval.checks import utc_now
from simeval.cli import cli
from simeval.service import Service
from simeval.web import create_app

PARIS = "The capital of France is Paris, which stands on the Seine."
QUESTION = "What is the capital of France?"
PAGES = 100  # bound of every paging loop: far more pages than any walk here needs


def run(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--db", db])


def ok(db: str, *args: str) -> Any:
    res = run(db, *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def one_line_error(res: Result, needle: str) -> None:
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], res.stderr
    assert "Traceback" not in res.output


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as s:
        s.create_eval("capital", PARIS, threshold=0.5)
        assert s.test_eval("capital", QUESTION, PARIS).passed
        s.activate_eval("capital")
        start = utc_now() - timedelta(hours=2)
        s.capture_many(
            [
                {
                    "input": QUESTION,
                    "output": f"Paris is the capital ({i}).",
                    "conversation_id": f"c{i % 11}",
                    # two captures at each minute: ties on the time
                    "captured_at": (start + timedelta(minutes=i // 2)).isoformat(),
                    "metadata": {"engine": f"v{i % 2}"},
                }
                for i in range(23)
            ]
        )
        for i in range(8):
            s.create_run(f"run {i}", "cases.jsonl")
        yield s


LISTINGS: dict[str, tuple[tuple[str, ...], str, Callable[[Any], Any]]] = {
    # listing: (command, the JSON's rows, a row's identity)
    "results": (("results", "list"), "results", lambda r: r["id"]),
    "captures": (("captures", "list", "--meta", "engine=v1"), "captures", lambda r: r["id"]),
    "conversations": (("conversations", "list"), "conversations", lambda r: r["id"]),
    "runs": (("runs", "list"), "runs", lambda r: r["id"]),
}


def _arrive(svc: Service, listing: str, n: int) -> None:
    """A new row of ``listing`` (newer than every page read so far)."""
    if listing == "runs":
        svc.create_run(f"meanwhile {n}", "cases.jsonl")
    else:  # a new capture (a result, and a new conversation)
        svc.capture(QUESTION, f"Paris again {n}", f"new{n}", {"engine": "v1"})


@pytest.mark.parametrize("listing", sorted(LISTINGS))
def test_json_pages_by_cursor_give_every_row_once_while_rows_arrive(
    svc: Service, db: str, listing: str
) -> None:
    command, field, ident = LISTINGS[listing]
    whole = ok(db, *command, "--limit", "1000")
    every = [ident(r) for r in whole[field]]
    assert whole["next_cursor"] is None and whole["prev_cursor"] is None
    assert len(every) == whole["total"] >= 8

    seen: list[Any] = []
    page = ok(db, *command, "--limit", "3")
    assert page["prev_cursor"] is None and page["limit"] == 3 and page["offset"] == 0
    for n in range(PAGES):
        seen += [ident(r) for r in page[field]]
        if page["next_cursor"] is None:
            break
        _arrive(svc, listing, n)
        page = ok(db, *command, "--limit", "3", "--cursor", page["next_cursor"])
        assert page["prev_cursor"] is not None
    else:
        raise AssertionError("paging did not end")
    assert seen == every  # once each, in order; what arrived meanwhile is not among them

    # back from the last page: the rows just above it
    back = ok(db, *command, "--limit", "3", "--cursor", page["prev_cursor"])
    assert [ident(r) for r in back[field]] == every[-len(page[field]) - 3 : -len(page[field])]


@pytest.mark.parametrize("listing", sorted(LISTINGS))
def test_the_table_prints_the_cursor_a_script_passes_back(
    svc: Service, db: str, listing: str
) -> None:
    command, field, ident = LISTINGS[listing]
    table = run(db, *command, "--limit", "2")
    assert table.exit_code == 0, table.output
    (older,) = re.findall(r"^next page \(older\): --cursor (\S+)$", table.stdout, re.M)
    assert "previous page" not in table.stdout
    assert older == ok(db, *command, "--limit", "2")["next_cursor"]
    second = run(db, *command, "--limit", "2", "--cursor", older)
    assert second.exit_code == 0, second.output
    assert re.search(r"^previous page \(newer\): --cursor \S+$", second.stdout, re.M)
    expected = [ident(r) for r in ok(db, *command, "--limit", "4")[field]][2:]
    assert expected == [
        ident(r) for r in ok(db, *command, "--limit", "2", "--cursor", older)[field]
    ]


def test_a_bad_cursor_is_one_line_and_exit_2(svc: Service, db: str) -> None:
    cursors = {
        name: ok(db, *command, "--limit", "1")["next_cursor"]
        for name, (command, _, _) in LISTINGS.items()
    }
    for name, (command, _, _) in LISTINGS.items():
        mine = cursors[name]
        for bad in ("garbage", "x" * 3000, mine[:-3]):
            one_line_error(run(db, *command, "--cursor", bad), "cursor")
        other = cursors["runs" if name != "runs" else "results"]
        one_line_error(run(db, *command, "--cursor", other), "is not one this listing gave")
        one_line_error(run(db, *command, "--cursor", mine, "--offset", "2"), "not both")


def test_conversations_show_gives_the_turns_the_api_does(svc: Service, db: str) -> None:
    shown = ok(db, "conversations", "show", "c3")
    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as client:
        assert shown == client.get("/api/conversations/c3").json()
    assert shown["turns"] == len(shown["captures"]) == 2  # the captures i = 3 and 14
    table = run(db, "conversations", "show", "c3")
    assert table.exit_code == 0 and "conversation c3: 2 turns" in table.stdout
    one_line_error(run(db, "conversations", "show", "nope"), "no conversation")
