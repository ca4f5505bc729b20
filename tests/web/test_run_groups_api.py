"""The run groups' JSON API (``/api/run-groups…``) through the real app on SQLite and
PostgreSQL: a group of three engines' runs stored through the run storing API, listed, read
side by side with its filters and paging, one case with its explanations, and every bad
request answered with a one-line JSON error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from simeval import runs
from simeval.service import Service
from simeval.web import create_app

GROUP = "nightly/2026-12-01"  # a slash in a group's name: the path's rest
URL = "/api/run-groups/" + quote(GROUP, safe="")
CASES = [
    ("paris", "Capital of France?", "Paris is the capital of France."),
    ("water", "Boiling point of water?", "Water boils at 100 degrees Celsius."),
    ("jupiter", "Largest planet?", "Jupiter is the largest planet."),
]
WRONG = {"a": {"jupiter": "Saturn has rings."}, "b": {"paris": "Lyon is in France."}, "c": {}}


def _store(db: str, tmp_path: Path) -> list[int]:
    ids = []
    with Service(db) as svc:
        for engine in "abc":
            src = tmp_path / f"{engine}.jsonl"
            src.write_text(
                "".join(
                    json.dumps(
                        {"id": i, "input": q, "reference": r, "output": WRONG[engine].get(i, r)}
                    )
                    + "\n"
                    for i, q, r in CASES
                )
            )
            sink = runs.RunStore(svc, f"run {engine}", str(src), {"engine": engine, "group": GROUP})
            summary = runs.run_file(str(src), runs.RunOptions(store=sink))
            assert summary.run_id is not None
            ids.append(summary.run_id)
    return ids


@pytest.fixture
def client(db: str, tmp_path: Path) -> Iterator[TestClient]:
    _store(db, tmp_path)
    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as c:
        yield c


def error_of(r: object, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.text)  # type: ignore[attr-defined]
    body = r.json()  # type: ignore[attr-defined]
    assert isinstance(body["error"], str) and body["error"] and "\n" not in body["error"]
    return str(body["error"])


def test_groups_listed_and_read_side_by_side(client: TestClient) -> None:
    listed = client.get("/api/run-groups").json()
    assert listed["total"] == 1 and listed["limit"] == 50
    (group,) = listed["groups"]
    assert group["name"] == GROUP
    assert [(e["engine"], e["results"], e["passed"]) for e in group["engines"]] == [
        ("a", 3, 2), ("b", 3, 2), ("c", 3, 3),
    ]  # fmt: skip
    assert client.get(URL).json() == group

    runs_listed = client.get("/api/runs").json()["runs"]
    assert {(r["engine"], r["group"]) for r in runs_listed} == {(e, GROUP) for e in "abc"}

    page = client.get(URL + "/cases").json()
    assert page["engines"] == ["a", "b", "c"] and page["next"] is None
    assert [c["case_id"] for c in page["cases"]] == ["paris", "water", "jupiter"]
    paris = page["cases"][0]
    assert [c["passed"] for c in paris["cells"]] == [True, False, True]
    assert paris["differs"] and "paris" in paris["cells"][1]["missing_terms"]
    assert paris["cells"][1]["output"] == "Lyon is in France."

    def keys(query: str) -> list[str]:
        r = client.get(URL + "/cases?" + query)
        assert r.status_code == 200, r.text
        return [c["case_id"] for c in r.json()["cases"]]

    assert keys("differ=true") == ["paris", "jupiter"]
    assert keys("failing=true") == ["paris", "jupiter"]
    assert keys("q=SATURN") == ["jupiter"] and keys("q=boiling") == ["water"]
    assert keys("q=wat&differ=true") == []
    first = client.get(URL + "/cases?limit=2").json()
    assert first["next"] == "1"
    assert keys("limit=2&after=1") == ["jupiter"]

    detail = client.get(URL + "/cases/" + paris["key"]).json()
    assert detail["engines"] == ["a", "b", "c"] and detail["case"]["key"] == paris["key"]
    wrong = detail["results"][1]
    assert wrong["id"] == paris["cells"][1]["result_id"] and not wrong["passed"]
    assert "paris" in [m["term"] for m in wrong["explanation"]["missing"]]


def test_bad_requests_get_a_one_line_error(client: TestClient) -> None:
    assert "no run group named 'nope'" in error_of(client.get("/api/run-groups/nope"), 404)
    error_of(client.get("/api/run-groups/nope/cases"), 404)
    assert "no case '7'" in error_of(client.get(URL + "/cases/7"), 404)
    assert "case key" in error_of(client.get(URL + "/cases/first"), 400)
    assert "case key" in error_of(client.get(URL + "/cases/1:a%00b"), 400)
    assert "case key" in error_of(client.get(URL + "/cases?after=first"), 400)
    for query in ("limit=0", "limit=501", "limit=x", "differ=maybe"):
        error_of(client.get(URL + "/cases?" + query), 422)
    assert "search" in error_of(client.get(URL + "/cases?q=" + "x" * 201), 400)
    assert "NUL" in error_of(client.get(URL + "/cases?q=a%00b"), 422)  # as every stored text
    for query in ("limit=0", "limit=1001", "offset=-1"):
        error_of(client.get("/api/run-groups?" + query), 422)
    for name, status in (("n" * 201, 400), ("%20%20", 400), ("a%00b", 404)):
        assert "run group" in error_of(client.get("/api/run-groups/" + name), status)
        assert "run group" in error_of(client.get(f"/api/run-groups/{name}/cases"), status)
    assert client.post(URL + "/cases").status_code == 405


def test_the_schema_declares_the_bounds(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    cases = paths["/api/run-groups/{name}/cases"]["get"]["parameters"]
    by_name = {p["name"]: p["schema"] for p in cases}
    assert by_name["limit"]["maximum"] == 500 and by_name["limit"]["minimum"] == 1
    assert by_name["name"]["maxLength"] == 200
    assert by_name["q"]["maxLength"] == 200 and by_name["q"]["pattern"] == "^[^\\x00]*$"
    assert by_name["after"]["pattern"].startswith("^(-?[0-9]{1,18}")
    for path in ("/api/run-groups", "/api/run-groups/{name}", "/api/run-groups/{name}/cases/{key}"):
        assert "get" in paths[path]


def test_the_pages_answer_a_bad_request_with_a_page(client: TestClient) -> None:
    page = "/run-groups/" + quote(GROUP, safe="")
    ok = client.get(page + "?differ=1&q=lyon")
    assert ok.status_code == 200 and "Lyon is in France." in ok.text
    assert 'data-case="0"' in ok.text and 'data-case="1"' not in ok.text
    assert client.get(page + "/cases/0").status_code == 200
    run_id = client.get("/api/runs").json()["runs"][0]["id"]
    run_page = client.get(f"/runs/{run_id}").text
    assert f'id="run-group" href="{page}"' in run_page  # a grouped run links to its group
    assert f'href="{page}"' in client.get("/runs").text
    for url, status, text in (
        ("/run-groups/nope", 404, "no run group named"),
        (page + "?after=later", 400, "case key must be"),
        (page + "?differ=maybe", 400, "differ"),
        (page + "/cases/9", 404, "has no case"),
        (page + "?q=" + "x" * 201, 400, "search is longer"),
    ):
        r = client.get(url)
        assert r.status_code == status, (url, r.status_code)
        assert r.headers["content-type"].startswith("text/html") and text in r.text
        assert "Traceback" not in r.text
