"""The one-run page ``/runs/{id}`` pages its rows by keyset cursor (Older/Newer links, as
``/results`` and ``/runs`` do), through the real app on a real SQLite file and a real
PostgreSQL database (``conftest.db``).

Walking the Older links gives each of the run's rows exactly once, in the order of
``/api/results?run_id=``, while rows keep arriving in the run (they are newer than the first
page: on a new first page, never on the next one); Newer goes back; ``page=N`` still reads a
shallow page by offset; a bad cursor or another listing's is a 400 with the message shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from simeval.service import Service
from simeval.web import create_app

PAGES = 50  # bound of the paging loop: far more pages than the walk needs
PER_PAGE = 50  # rows on one page of a list (web.pages._render.PER_PAGE)


def _row(i: int) -> dict[str, Any]:
    return {
        "eval_name": None,
        "input": f"case {i}",
        "output": f"answer {i}",
        "reference": "The capital of France is Paris.",
        "score": (i % 10) / 10,
        "passed": i % 10 >= 5,
        "threshold": 0.5,
        "fingerprint": "f" * 16,
        "matched_reference": "The capital of France is Paris.",
        "explanation": None,
    }


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as c:
        yield c


def _service(client: TestClient) -> Service:
    return client.app.state.service  # type: ignore[attr-defined,no-any-return]


def _shown(html: str) -> tuple[list[str], str | None, str | None]:
    """The result ids in the page's results table, and its Older and Newer links."""
    table = html.split('id="run-results"', 1)[1].split("</table>", 1)[0]
    ids = re.findall(r'href="/results/([^"]+)"', table)
    links = dict(re.findall(r'id="(older|newer)-page" href="([^"]+)"', html))
    return ids, links.get("older"), links.get("newer")


def test_older_links_give_each_row_once_while_rows_arrive(client: TestClient) -> None:
    svc = _service(client)
    other = svc.create_run("other", "other.jsonl")
    svc.add_run_results(other, [_row(i) for i in range(30)])
    run = svc.create_run("cases", "cases.jsonl")
    for start in range(0, 130, 10):  # 13 transactions: rows of several times
        svc.add_run_results(run, [_row(i) for i in range(start, start + 10)])
    every = [r["id"] for r in client.get(f"/api/results?run_id={run}&limit=1000").json()["results"]]
    assert len(every) == 130

    seen: list[str] = []
    url: str | None = f"/runs/{run}"
    pages = []
    for n in range(PAGES):
        if url is None:
            break
        answer = client.get(url)
        assert answer.status_code == 200, answer.text
        ids, url, newer = _shown(answer.text)
        assert (newer is None) == (n == 0)
        assert ids and len(ids) <= PER_PAGE
        seen += ids
        pages.append((ids, newer))
        svc.add_run_results(run, [_row(1000 + n)])  # arrives between pages
    else:
        raise AssertionError("paging did not end")
    assert seen == every  # once each, in order; the rows stored meanwhile are not in it
    assert len(pages) == 3 and [len(ids) for ids, _ in pages] == [50, 50, 30]

    # Newer from the last page is the page before it
    back, _, _ = _shown(client.get(pages[-1][1] or "").text)
    assert back == pages[1][0]
    # a new first page starts with the rows that arrived
    first, _, _ = _shown(client.get(f"/runs/{run}").text)
    assert len(first) == PER_PAGE and first[0] not in seen


def test_page_n_still_reads_by_offset_and_a_bad_cursor_is_a_400(client: TestClient) -> None:
    svc = _service(client)
    run = svc.create_run("cases", "cases.jsonl")
    svc.add_run_results(run, [_row(i) for i in range(70)])
    every = [r["id"] for r in client.get(f"/api/results?run_id={run}&limit=1000").json()["results"]]
    ids, older, newer = _shown(client.get(f"/runs/{run}?page=2").text)
    assert ids == every[50:] and older is None and newer is not None
    assert _shown(client.get(newer).text)[0] == every[:50]

    svc.create_run("later", "later.jsonl")
    runs_cursor = client.get("/api/runs", params={"limit": 1}).json()["next_cursor"]
    assert runs_cursor is not None  # the runs listing's: not one of a run's rows
    for bad in ("garbage", "x" * 3000, runs_cursor, newer.split("cursor=")[1][:-3]):
        answer = client.get(f"/runs/{run}", params={"cursor": bad})
        assert answer.status_code == 400, answer.text
        assert "cursor" in answer.text and 'role="alert"' in answer.text
    # a cursor says where: a page number beside it is not read
    _, first_older, _ = _shown(client.get(f"/runs/{run}").text)
    assert _shown(client.get(f"{first_older}&page=3").text)[0] == every[50:]
