"""Conversations read from their summaries, paged by keyset cursor (service, API, studio, and
the ``indexed_meta`` setting on the API, CLI and studio faces).

The documented semantics (``Service.page_conversations``): a cursor's page holds the
conversations whose last activity comes after the cursor's in the listing's order (last
activity, newest first, then id). A conversation with a new turn moves to the top, above the
cursor: it is not given twice, and is on the first page of a new listing; a conversation whose
activity does not change while a reader pages is given exactly once.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from simeval.cli import cli
from simeval.errors import InvalidInput
from simeval.service import Service
from simeval.web import create_app

BASE = datetime(2026, 4, 1, 9, 0)


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    service = Service(db)
    yield service
    service.close()


def seed(svc: Service, n: int) -> None:
    """``n`` conversations of one to three turns; every fifth shares its last time with the
    next one (ties are ordered by id)."""
    items = []
    for k in range(n):
        last = BASE + timedelta(minutes=k - (k % 5 == 1))  # ties between k and k - 1
        for turn in range(1 + k % 3):
            items.append(("q", f"turn {turn}", f"c{k:03d}", None, last - timedelta(hours=turn)))
    svc.capture_checked(items)


def test_cursor_pages_give_each_steady_conversation_once_while_captures_arrive(
    svc: Service,
) -> None:
    seed(svc, 40)
    assert svc.count_conversations() == 40
    seen: list[str] = []
    moved: set[str] = set()
    page = svc.page_conversations(limit=7)
    assert page.prev_cursor is None
    step = 0
    while True:
        seen.extend(c.id for c in page.items)
        if page.next_cursor is None:
            break
        step += 1
        later = BASE + timedelta(days=1, minutes=step)
        # captures arrive between pages: a turn of a conversation seen already, one of a
        # conversation not reached yet (both move to the top), a new conversation (at the
        # top), a turn dated before an unreached conversation's last (it does not move)
        done = seen[step % len(seen)]
        ahead = f"c{40 - 7 * step - 3:03d}" if 40 - 7 * step - 3 >= 0 else None
        svc.capture("q", "later", done, captured_at=later)
        moved.add(done)
        if ahead is not None and ahead not in seen:
            svc.capture("q", "later", ahead, captured_at=later)
            moved.add(ahead)
        svc.capture("q", "new", f"new-{step}", captured_at=later)
        svc.capture("q", "old", "c000", captured_at=BASE - timedelta(days=3))
        page = svc.page_conversations(limit=7, cursor=page.next_cursor)
    assert len(seen) == len(set(seen)), "a conversation was given twice"
    steady = {f"c{k:03d}" for k in range(40)} - moved
    assert steady <= set(seen)  # every conversation whose activity did not change, once
    assert not {c for c in seen if c.startswith("new-")}  # above the cursor when they came
    # a new listing starts with what moved up and what is new, most recent first
    top = svc.list_conversations(limit=100)
    assert len(top) == svc.count_conversations() == 40 + step
    order = [(c.last_at, c.id) for c in top]
    assert order == sorted(order, key=lambda k: (-k[0].timestamp(), k[1]))
    assert {c.id for c in top[: len(moved) + step]} == moved | {
        f"new-{i}" for i in range(1, 1 + step)
    }


def test_cursor_pages_equal_offset_pages_and_go_back(svc: Service) -> None:
    seed(svc, 23)
    by_offset = [c.id for k in range(0, 23, 5) for c in svc.list_conversations(5, k)]
    pages, cursor = [], None
    while True:
        page = svc.page_conversations(limit=5, cursor=cursor)
        pages.append(page)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert [c.id for p in pages for c in p.items] == by_offset
    assert len(pages) == 5 and len(pages[-1].items) == 3
    back = svc.page_conversations(limit=5, cursor=pages[2].prev_cursor)
    assert [c.id for c in back.items] == [c.id for c in pages[1].items]
    first = svc.page_conversations(limit=5, cursor=pages[1].prev_cursor)
    assert [c.id for c in first.items] == [c.id for c in pages[0].items]
    assert first.prev_cursor is None  # the top again
    ties = [(c.last_at, c.id) for c in svc.list_conversations(100)]
    assert any(a[0] == b[0] for a, b in itertools.pairwise(ties))  # ties exercised


def test_a_bad_cursor_is_refused(svc: Service) -> None:
    seed(svc, 3)
    runs = svc.page_runs(limit=1)
    good = svc.page_conversations(limit=1).next_cursor
    assert good is not None
    for bad in ("nope", "", good[:-3] + "A", "!!", "x" * 3000):
        with pytest.raises(InvalidInput, match="cursor") as err:
            svc.page_conversations(cursor=bad)
        assert "\n" not in str(err.value)
    if runs.next_cursor is not None:
        with pytest.raises(InvalidInput):
            svc.page_conversations(cursor=runs.next_cursor)
    with pytest.raises(InvalidInput, match="not both"):
        svc.page_conversations(offset=1, cursor=good)
    with pytest.raises(InvalidInput, match="offset"):
        svc.list_conversations(offset=-1)


def test_the_api_and_the_studio_page_by_cursor(db: str) -> None:
    with Service(db) as s:
        seed(s, 120)
    app = create_app(db=db)
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        ids: list[str] = []
        url = "/api/conversations?limit=50"
        while True:
            body = client.get(url).json()
            assert body["total"] == 120 and body["limit"] == 50
            ids.extend(c["id"] for c in body["conversations"])
            if body["next_cursor"] is None:
                break
            url = f"/api/conversations?limit=50&cursor={body['next_cursor']}"
        assert len(ids) == len(set(ids)) == 120
        bad = client.get("/api/conversations?cursor=bm9wZQ")
        assert bad.status_code == 400 and "cursor" in bad.json()["error"]
        assert "\n" not in bad.json()["error"]
        assert client.get("/api/conversations?cursor=a%20b").status_code in (400, 422)
        # the studio: Older/Newer by cursor, no page numbers
        page = client.get("/conversations").text
        assert 'id="older-page"' in page and 'id="newer-page"' not in page
        older = re.search(r'id="older-page" href="([^"]+)"', page)
        assert older is not None
        second = client.get(older.group(1).replace("&amp;", "&")).text
        assert 'id="newer-page"' in second and ids[50] in second and ids[49] not in second
        wrong = client.get("/conversations?cursor=bm9wZQ")
        assert wrong.status_code == 400 and "cursor" in wrong.text


def test_indexed_meta_on_the_api_the_cli_and_the_studio(db: str) -> None:
    app = create_app(db=db)
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        client.post("/api/capture", json={"input": "q", "output": "a", "metadata": {"team": "x"}})
        r = client.patch("/api/settings", json={"indexed_meta": ["team", "region"]})
        assert r.status_code == 200 and r.json()["indexed_meta"] == ["team", "region"]
        assert client.get("/api/settings").json()["indexed_meta"] == ["team", "region"]
        bad = client.patch("/api/settings", json={"indexed_meta": ["k" * 65]})
        assert bad.status_code == 400 and "64 characters" in bad.json()["error"]
        assert client.patch("/api/settings", json={"indexed_meta": "team"}).status_code == 422
        assert (
            client.patch("/api/settings", json={"indexed_meta": None}).json()["indexed_meta"] == []
        )
        page = client.get("/settings").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token and 'id="indexed-meta"' in page
        form: dict[str, Any] = {"csrf_token": token.group(1), "retention_days": ""}
        good = client.post("/settings", data={**form, "indexed_meta": "team,\n region\n"})
        assert good.status_code in (200, 303)
        assert app.state.service.get_settings().indexed_meta == ["team", "region"]
        assert "team, region" in client.get("/settings").text
        wrong = client.post("/settings", data={**form, "indexed_meta": "k" * 65})
        assert wrong.status_code == 400 and "64 characters" in wrong.text
        assert app.state.service.get_settings().indexed_meta == ["team", "region"]
    runner = CliRunner()
    out = runner.invoke(cli, ["settings", "--db", db, "--indexed-meta", "team", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["indexed_meta"] == ["team"]
    shown = runner.invoke(cli, ["settings", "--db", db])
    assert "indexed metadata keys (beside the defaults): team" in shown.output
    refused = runner.invoke(cli, ["settings", "--db", db, "--indexed-meta", "k" * 65])
    assert refused.exit_code == 2 and "64 characters" in refused.output
    assert "Traceback" not in refused.output
    cleared = runner.invoke(cli, ["settings", "--db", db, "--indexed-meta", "", "--json"])
    assert json.loads(cleared.stdout)["indexed_meta"] == []
