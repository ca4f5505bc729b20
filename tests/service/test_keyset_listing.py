"""Keyset (cursor) paging of results, captures and runs, and metadata filters served by the
``capture_meta`` index, through the library on a real SQLite file and a real PostgreSQL
database (``conftest.db``); the API's ``cursor`` and ``next_cursor`` through the real app.

Paging is checked while captures (and run rows, and runs) arrive between pages: each row is
read exactly once, in order, and the rows stored meanwhile (newer than the first page) are
not read. Metadata filters are checked against a direct scan of generated captures (several
keys, numbers, booleans, values over 200 characters, keys not indexed, keys missing).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from simeval import InvalidInput
from simeval.checks import utc_now
from simeval.service import ResultFilter, Service
from simeval.service.cursor import OLDER, listing_cursor
from simeval.service.filters import meta_matches
from simeval.web import create_app

PARIS = "The capital of France is Paris, which stands on the Seine."
SEINE = "The Seine flows through Paris."
QUESTION = "What is the capital of France?"
ANSWERS = ("Paris is the capital of France.", "France is in Europe.", "The Seine is a river.")
PAGES = 200  # bound of every paging loop: far more pages than any walk here needs


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as s:
        for name, ref in (("capital", PARIS), ("river", SEINE)):
            s.create_eval(name, ref, threshold=0.5)
            assert s.test_eval(name, QUESTION, ref).passed
            s.activate_eval(name)
        yield s


def _run_row(score: float) -> dict[str, Any]:
    return {
        "eval_name": "capital",
        "input": QUESTION,
        "output": f"answer scored {score}",
        "reference": PARIS,
        "score": score,
        "passed": score >= 0.5,
        "threshold": 0.5,
        "fingerprint": "f" * 16,
        "matched_reference": PARIS,
        "explanation": None,
    }


def _fill(svc: Service, start: datetime, n: int, meta: Any = None) -> None:
    """``n`` captures, three at each minute from ``start`` (ties on the time)."""
    svc.capture_many(
        [
            {
                "input": QUESTION,
                "output": ANSWERS[i % 3],
                "captured_at": (start + timedelta(minutes=i // 3)).isoformat(),
                "metadata": meta(i) if meta else {"engine": f"v{i % 2}"},
            }
            for i in range(n)
        ]
    )


def _walk_older(page_of: Any, arrive: Any) -> tuple[list[Any], Any]:
    """Every item of the pages ``page_of(cursor)`` gives from the first page on, calling
    ``arrive()`` between pages; and the last page."""
    seen: list[Any] = []
    page = page_of(None)
    for _ in range(PAGES):
        seen += page.items
        if page.next_cursor is None:
            return seen, page
        arrive()
        page = page_of(page.next_cursor)
    raise AssertionError("paging did not end")


def _walk_newer(page_of: Any, page: Any) -> list[Any]:
    """The items from ``page`` up to the first page by ``prev_cursor``, in listing order
    (the first page is full: it may repeat rows of the page below it, taken once here)."""
    seen = list(page.items)
    for _ in range(PAGES):
        if page.prev_cursor is None:
            return seen
        page = page_of(page.prev_cursor)
        ids = {x.id for x in seen}
        seen = [x for x in page.items if x.id not in ids] + seen
    raise AssertionError("paging back did not end")


def test_results_by_cursor_exactly_once_while_captures_arrive(svc: Service) -> None:
    now = utc_now().replace(microsecond=0)
    _fill(svc, now - timedelta(hours=2), 25)
    run = svc.create_run("cases", "cases.jsonl")
    svc.add_run_results(run, [_run_row(x / 10) for x in range(6)])  # one time, six rows
    run_at = svc.list_results(run_id=run, limit=1, explain=False)[0].created_at
    # captures at exactly the run rows' time: the listing orders the two stores on ties
    svc.capture_many([{"output": ANSWERS[i], "captured_at": run_at.isoformat()} for i in range(2)])
    _fill(svc, run_at - timedelta(minutes=3), 9)  # between the others and the run rows
    for where in (
        ResultFilter(),
        ResultFilter.parse(eval_name="capital"),
        ResultFilter.parse(passed=False),
    ):
        expected = [r.id for r in svc.list_results(where, limit=10_000, explain=False)]
        assert len(expected) > 14 and len(set(expected)) == len(expected)
        arrivals = iter(range(PAGES))

        def arrive(arrivals: Iterator[int] = arrivals) -> None:
            # newer than the first page: never read by this walk
            i = next(arrivals)
            svc.capture(QUESTION, ANSWERS[i % 3], metadata={"engine": "v9"})
            if i % 3 == 0:
                svc.add_run_results(run, [_run_row(0.3)])

        def page_of(cursor: str | None, where: ResultFilter = where) -> Any:
            return svc.page_results(where, limit=7, cursor=cursor, explain=False)

        seen, last = _walk_older(page_of, arrive)
        assert [r.id for r in seen] == expected
        # back up by prev_cursor: the same rows in the same order, the new ones on top
        back = [r.id for r in _walk_newer(page_of, last)]
        assert len(set(back)) == len(back)
        assert [i for i in back if i in set(expected)] == expected
        now_listed = [r.id for r in svc.list_results(where, limit=10_000, explain=False)]
        assert back[: len(now_listed)] == now_listed


def test_captures_and_runs_by_cursor_exactly_once_while_more_arrive(svc: Service) -> None:
    start = utc_now().replace(microsecond=0) - timedelta(hours=1)
    _fill(svc, start, 23)
    for since, meta in ((None, None), (start + timedelta(minutes=2), None), (None, "engine=v1")):
        expected = [c.id for c in svc.list_captures(limit=1000, since=since, meta=meta)]
        assert len(expected) > 8

        def page_of(cursor: str | None, since: Any = since, meta: Any = meta) -> Any:
            return svc.page_captures(4, since=since, meta=meta, cursor=cursor)

        seen, last = _walk_older(
            page_of, lambda: svc.capture(QUESTION, ANSWERS[0], metadata={"engine": "v1"})
        )
        assert [c.id for c in seen] == expected
        back = [c.id for c in _walk_newer(page_of, last)]
        assert len(set(back)) == len(back) and [i for i in back if i in set(expected)] == expected

    for i in range(8):
        svc.create_run(f"run {i}", "cases.jsonl")
    expected = [r.id for r in svc.list_runs(limit=1000)]
    seen, last = _walk_older(
        lambda cursor: svc.page_runs(3, cursor=cursor),
        lambda: svc.create_run("meanwhile", "cases.jsonl"),
    )
    assert [r.id for r in seen] == expected
    back = [r.id for r in _walk_newer(lambda cursor: svc.page_runs(3, cursor=cursor), last)]
    assert back == [r.id for r in svc.list_runs(limit=1000)]


def test_an_offset_page_answers_a_cursor_to_go_on(svc: Service) -> None:
    _fill(svc, utc_now() - timedelta(hours=1), 12)
    every = [r.id for r in svc.list_results(limit=1000, explain=False)]
    first = svc.page_results(limit=5, offset=5, explain=False)
    assert [r.id for r in first.items] == every[5:10] and first.prev_cursor is not None
    rest = svc.page_results(limit=1000, cursor=first.next_cursor, explain=False)
    assert [r.id for r in rest.items] == every[10:] and rest.next_cursor is None
    assert svc.page_results(limit=1000, explain=False).prev_cursor is None


def test_a_bad_cursor_is_a_clear_error(svc: Service) -> None:
    _fill(svc, utc_now() - timedelta(hours=1), 6)
    captures = svc.page_captures(2).next_cursor
    results = svc.page_results(limit=2, explain=False).next_cursor
    assert captures and results
    for call, cursor in (
        (lambda c: svc.page_results(cursor=c), captures),  # another listing's
        (lambda c: svc.page_captures(cursor=c), results),
        (lambda c: svc.page_runs(cursor=c), captures),
        (lambda c: svc.page_results(cursor=c), "not-a-cursor"),
        (lambda c: svc.page_captures(cursor=c), captures[:-3]),  # cut
        (lambda c: svc.page_runs(cursor=c), "x" * 5000),
    ):
        with pytest.raises(InvalidInput, match="cursor"):
            call(cursor)
    with pytest.raises(InvalidInput, match="cursor or an offset"):
        svc.page_captures(2, offset=2, cursor=captures)


def _meta(rng: random.Random, i: int) -> dict[str, Any] | None:
    if i % 11 == 0:
        return None
    meta: dict[str, Any] = {}
    choices: dict[str, list[Any]] = {
        "engine": ["v1", "v2", 2, True, "é" * 201],  # a number, a boolean, one too long
        "model": ["m-0", "m-1", "m-2"],
        "input_tokens": [1, 2, 3.5],
        "team": ["search", "chat", False],  # declared below
        "region": ["eu", "us"],  # not indexed: checked on the captures read
    }
    for key, values in choices.items():
        if rng.random() < 0.8:  # some captures lack a key
            meta[key] = rng.choice(values)
    return meta


FILTERS: list[list[str]] = [
    ["engine=v2"],
    ["engine=2"],
    ["engine=true"],
    ["engine=" + "é" * 201],
    ["input_tokens=3.5"],
    ["team=chat"],
    ["team=false"],
    ["region=eu"],
    ["engine=v1", "model=m-1"],
    ["engine=v2", "region=us"],
    ["model=m-0", "team=search", "input_tokens=1"],
    ["nobody=1"],
    ["engine=v3"],
]


@pytest.mark.slow
def test_metadata_filters_equal_a_direct_scan(svc: Service) -> None:
    svc.update_settings(indexed_meta=["team"])
    rng = random.Random(22)
    start = utc_now().replace(microsecond=0) - timedelta(days=2)
    _fill(svc, start, 150, lambda i: _meta(rng, i))
    svc.update_settings(indexed_meta=["team", "later"])  # declared after the captures
    _fill(svc, start + timedelta(days=1), 30, lambda i: {"later": i % 2, **(_meta(rng, i) or {})})
    every = svc.list_captures(limit=1000)
    results = svc.list_results(limit=10_000, explain=False)
    by_capture = {c.id: c.metadata for c in every}
    times = [None, start + timedelta(minutes=7), start + timedelta(days=1, minutes=3)]
    for filters in [*FILTERS, ["later=1"], ["later=0", "engine=v2"]]:
        pairs = ResultFilter.parse(meta=filters).meta
        for since in times:
            for until in (None, start + timedelta(days=1, minutes=5)):
                when: dict[str, Any] = {"since": since, "until": until}
                inside = [
                    c
                    for c in every
                    if (since is None or c.captured_at >= _utc(since))
                    and (until is None or c.captured_at < _utc(until))
                ]
                want = [c.id for c in inside if meta_matches(c.metadata, pairs)]
                got = [c.id for c in svc.list_captures(limit=1000, meta=filters, **when)]
                assert got == want, (filters, since, until)
                assert svc.count_captures(meta=filters, **when) == len(want)
                wanted = set(want)
                for name in (None, "river"):
                    rows = [
                        r.id
                        for r in results
                        if r.capture_id in wanted and (name is None or r.eval_name == name)
                    ]
                    f = ResultFilter.parse(eval_name=name, meta=filters, **when)
                    listed = svc.list_results(f, limit=10_000, explain=False)
                    assert [r.id for r in listed] == rows, (filters, name, since, until)
                    assert svc.count_results(f) == len(rows)
                failing = [r.id for r in results if r.capture_id in wanted and not r.passed]
                f = ResultFilter.parse(passed=False, meta=filters, **when)
                assert [r.id for r in svc.list_results(f, limit=10_000, explain=False)] == failing
                assert svc.count_results(f) == len(failing)
        # by cursor, a few at a time: the same captures
        pages, cursor = [], None
        for _ in range(PAGES):
            page = svc.page_captures(3, meta=filters, cursor=cursor)
            pages += [c.id for c in page.items]
            if (cursor := page.next_cursor) is None:
                break
        assert pages == [c.id for c in every if meta_matches(by_capture[c.id], pairs)]


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


# -- the API --------------------------------------------------------------------------------


def test_the_api_pages_by_cursor_and_refuses_a_bad_one(db: str) -> None:
    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as client:
        svc = client.app.state.service  # type: ignore[attr-defined]
        svc.create_eval("capital", PARIS, threshold=0.5)
        assert svc.test_eval("capital", QUESTION, PARIS).passed
        svc.activate_eval("capital")
        _fill(svc, utc_now() - timedelta(hours=1), 11)
        for path, field in (("/api/results", "results"), ("/api/captures", "captures")):
            every = [x["id"] for x in client.get(path, params={"limit": 1000}).json()[field]]
            seen: list[Any] = []
            params: dict[str, Any] = {"limit": 4, "meta": "engine:v1"}
            for _ in range(PAGES):
                body = client.get(path, params=params).json()
                seen += [x["id"] for x in body[field]]
                if body["next_cursor"] is None:
                    break
                params["cursor"] = body["next_cursor"]
            else:
                raise AssertionError("paging did not end")
            assert seen == [i for i in every if i in set(seen)] and seen
            assert len(seen) == body["total"]
            edited = [  # well-formed, but an id past what the columns hold (was a 500)
                listing_cursor(field, OLDER, (utc_now(), *ints))
                for ints in ((2**63, 0, 0), (1, 2**40, 0), (-1, 1, 0))
            ]
            if field == "captures":
                edited = [listing_cursor(field, OLDER, (utc_now(), 2**63))]
            for bad in ("garbage", "x" * 3000, "abc!", body["prev_cursor"][:-2], *edited):
                r = client.get(path, params={"cursor": bad})
                assert r.status_code in (400, 422), r.text
                assert "cursor" in str(r.json()).lower()
            r = client.get(path, params={"cursor": body["prev_cursor"], "offset": 3})
            assert r.status_code == 400 and "offset" in r.json()["error"]
        results_cursor = client.get("/api/results", params={"limit": 1}).json()["next_cursor"]
        for path in ("/api/captures", "/api/runs"):
            r = client.get(path, params={"cursor": results_cursor})
            assert r.status_code == 400, r.text
            assert "is not one this listing gave" in r.json()["error"]
        body = client.get("/api/runs").json()
        assert body["next_cursor"] is None and body["prev_cursor"] is None
