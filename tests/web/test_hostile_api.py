"""Hostile input through the HTTP API and the studio, on SQLite and PostgreSQL (``conftest.db``):
every number, id, date and lookup text beyond what the store holds is a 4xx naming the problem
(never a 500), and nothing stored changes. The cases of issue 21's items 3, 4, 5, 11 and 13."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from dbhelp import table_counts
from simeval.checks import MAX_ID
from simeval.scoring.idf import fit_idf
from simeval.web.app import create_app

REF = "The capital of France is Paris."
Q = "What is the capital of France?"
TABLES = ("evals", "eval_versions", "eval_tests", "captures", "results", "reviews", "runs")
OVER = str(MAX_ID + 1)  # 2^31: past PostgreSQL's integer, below the 2^63-1 once accepted
HUGE = "9223372036854775807"


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    app = create_app(db=db)
    with TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False) as c:
        assert c.post("/api/evals", json={"name": "capital", "references": [REF]}).status_code
        assert c.post("/api/evals/capital/test", json={"input": Q, "output": REF}).json()["passed"]
        assert c.post("/api/evals/capital/activate").status_code == 200
        assert c.post("/api/capture", json={"input": Q, "output": REF}).status_code == 201
        yield c


def refused(r: Any, *codes: int) -> None:
    """A 4xx with a JSON error (or a studio page) naming the problem, never a 500. A studio
    page may also ignore a query parameter it does not take (200)."""
    allowed = codes or (400, 404, 422)
    if not r.request.url.path.startswith("/api/") and r.request.url.query:
        allowed = (*allowed, 200)
    assert r.status_code in allowed, (r.request.url, r.status_code, r.text)
    if r.request.url.path.startswith("/api/"):
        assert r.json()["error"], r.text


ENDS = [
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-05:00",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+05:00",
    "0999-12-31T23:59:59Z",
]


@pytest.mark.parametrize("when", ENDS)
def test_a_capture_at_the_calendars_ends_is_refused_and_the_dashboard_stays_up(
    client: TestClient, db: str, when: str
) -> None:
    before = table_counts(db, TABLES)
    r = client.post("/api/capture", json={"input": Q, "output": REF, "captured_at": when})
    refused(r, 400, 422)
    assert "captured_at" in r.json()["error"]
    batch = {"captures": [{"input": Q, "output": REF}, {"output": "x", "captured_at": when}]}
    r = client.post("/api/captures/batch", json=batch)
    refused(r, 400, 422)
    assert "captures[1]" in r.json()["error"] or "captures.1" in r.json()["error"]
    assert table_counts(db, TABLES) == before
    for page in ("/", "/dashboard", "/results", "/api/evals/capital/trend"):
        assert client.get(page).status_code == 200, page


ID_PATHS = [
    f"/api/runs/{OVER}",
    f"/api/captures/{OVER}",
    f"/api/results/r{OVER}",
    f"/api/results/{OVER}-1",
    f"/api/results/1-{OVER}",
    f"/api/evals/{OVER}",
    f"/api/evals/{OVER}/versions",
    f"/api/results?run_id={OVER}",
    f"/api/results/export?run_id={OVER}",
    f"/runs/{OVER}",
    f"/captures/{OVER}",
    f"/results/{OVER}-1",
    f"/results/r{OVER}",
    f"/results?run_id={OVER}",
    f"/evals/{OVER}",
]


@pytest.mark.parametrize("path", ID_PATHS)
def test_ids_past_the_id_columns_name_nothing(client: TestClient, db: str, path: str) -> None:
    before = table_counts(db, TABLES)
    refused(client.get(path))
    assert table_counts(db, TABLES) == before


def test_writes_to_ids_past_the_id_columns_name_nothing(client: TestClient, db: str) -> None:
    before = table_counts(db, TABLES)
    refused(client.delete(f"/api/runs/{OVER}"))
    refused(client.post(f"/api/results/r{OVER}/review", json={"score": 1.0}))
    refused(client.post(f"/api/results/{OVER}-1/review", json={"score": 1.0}))
    refused(client.post(f"/api/evals/{OVER}/activate"))
    assert table_counts(db, TABLES) == before


NUL_LOOKUPS = [
    "/api/evals/a%00",
    "/api/evals/a%00/versions",
    "/api/evals/a%00/trend",
    "/api/evals/%1C%C2%A04",  # str.strip takes U+001C and U+00A0 for spaces, int() does not
    "/api/results?eval=a%00",
    "/api/results/export?eval=a%00",
    "/api/conversations/a%00",
    "/api/captures?conversation_id=a%00",
    "/api/compare?a=run:latest&b=run:latest&eval=a%00",
    "/evals/a%00",
    "/results?eval=a%00",
    "/conversations/a%00",
]


@pytest.mark.parametrize("path", NUL_LOOKUPS)
def test_a_nul_in_a_lookup_names_nothing(client: TestClient, db: str, path: str) -> None:
    before = table_counts(db, TABLES)
    refused(client.get(path))
    assert table_counts(db, TABLES) == before


def test_a_nul_in_a_write_lookup_names_nothing(client: TestClient, db: str) -> None:
    before = table_counts(db, TABLES)
    refused(client.post("/api/rescore", json={"eval": "a\x00"}))
    refused(client.post("/api/evals/a%00/test", json={"output": REF}))
    refused(client.post("/api/evals/a%00/activate"))
    refused(client.patch("/api/evals/a%00", json={"threshold": 0.5}))
    refused(client.delete("/api/evals/a%00"))
    refused(client.post("/api/evals/a%00/backtest", json={}))
    assert table_counts(db, TABLES) == before


NUMBERS = [
    f"/api/results?offset={HUGE}",
    f"/api/captures?offset={HUGE}",
    f"/api/runs?offset={HUGE}",
    f"/api/conversations?offset={HUGE}",
    "/api/results?since=3000000d",
    "/api/results?until=0001-01-01T00:00:00%2B05:00",
    "/api/results?since=9999-12-31T23:59:59-05:00",
    "/api/results?since=99999999999999999999999999999999999w",
    "/api/captures?since=3000000d",
    "/api/captures?until=0001-01-01T00:00:00%2B05:00",
    "/api/results/export?since=99999999999d",
    "/api/results/export?until=0001-01-01T00:00:00%2B05:00",
    "/api/evals/capital/trend?since=99999999999d",
    "/api/evals/capital/trend?until=0001-01-01T00:00:00%2B05:00",
    "/api/evals/capital/trend?since=0001-01-01",
    "/results?page=99999999999999999999",
    "/results?since=3000000d",
    "/runs?page=99999999999999999999",
    "/conversations?page=99999999999999999999",
    "/evals/capital?since=99999999999d",
    # an integer in a query or a path is digits: not with Unicode whitespace (NEL, U+3000)
    # around it, nor "1_0" or "2.0", which pydantic's int parsing of text also takes
    "/api/results?run_id=2%C2%85",
    "/api/results?limit=1%E3%80%80",
    "/api/captures?offset=1_0",
    "/api/runs?limit=2.0",
    "/api/runs/1%C2%85",
    "/api/captures/%201",
    "/runs?page=2%C2%85",
    "/runs/1%C2%85",
]


@pytest.mark.parametrize("path", NUMBERS)
def test_numbers_and_dates_out_of_range_are_refused(client: TestClient, db: str, path: str) -> None:
    before = table_counts(db, TABLES)
    refused(client.get(path))
    assert table_counts(db, TABLES) == before


def test_rescore_and_backtest_times_out_of_range_are_refused(client: TestClient, db: str) -> None:
    before = table_counts(db, TABLES)
    for since in ("3000000d", "0001-01-01T00:00:00+05:00", "99999999999d"):
        refused(client.post("/api/rescore", json={"eval": "capital", "since": since}), 400)
    refused(client.post("/api/rescore", json={"eval": "capital", "until": "9999-12-31T23:59Z"}))
    refused(client.post("/api/evals/capital/backtest", json={"days": 10**12}), 422)
    assert table_counts(db, TABLES) == before


@pytest.mark.parametrize("name", [".", "..", "...", " .. "])
def test_eval_names_of_dots_are_refused(client: TestClient, db: str, name: str) -> None:
    before = table_counts(db, TABLES)
    r = client.post("/api/evals", json={"name": name, "references": [REF]})
    refused(r, 400)
    assert "dots" in r.json()["error"]
    refused(client.patch("/api/evals/capital", json={"name": name}), 400)
    assert table_counts(db, TABLES) == before
    assert client.get("/api/evals/capital").status_code == 200


@pytest.mark.parametrize("talk", [".", "..", "a/.", "../b", "a/./b", "a/../b"])
def test_conversation_ids_no_url_can_name_are_refused(
    client: TestClient, db: str, talk: str
) -> None:
    """A client takes a URL's "." and ".." segments away (``/api/conversations/.`` is the
    listing), so such an id is refused when captured, by the schema's pattern as well."""
    before = table_counts(db, TABLES)
    r = client.post("/api/capture", json={"input": Q, "output": REF, "conversation_id": talk})
    refused(r, 400, 422)
    assert "conversation_id" in r.json()["error"]
    batch = {"captures": [{"input": Q, "output": REF, "conversation_id": talk}]}
    refused(client.post("/api/captures/batch", json=batch), 400, 422)
    assert table_counts(db, TABLES) == before
    doc = client.get("/openapi.json").json()
    pattern = doc["components"]["schemas"]["CaptureIn"]["properties"]["conversation_id"]
    assert not re.fullmatch(pattern["pattern"], talk)


@pytest.mark.parametrize("talk", ["a/b", "/lead", "tail/", "a//b", "...", "v1.2/..x", ".a/b."])
def test_conversation_ids_with_slashes_are_served_by_the_api_and_the_studio(
    client: TestClient, talk: str
) -> None:
    r = client.post("/api/capture", json={"input": Q, "output": REF, "conversation_id": talk})
    assert r.status_code == 201, r.text
    (item,) = client.get("/api/conversations").json()["conversations"]
    assert item["id"] == talk
    path = quote(talk, safe="")
    conv = client.get(f"/api/conversations/{path}")
    assert conv.status_code == 200, conv.text
    assert conv.json()["id"] == talk and len(conv.json()["captures"]) == 1
    page = client.get(f"/conversations/{path}")
    assert page.status_code == 200 and "Paris" in page.text
    assert f'href="/conversations/{path}"' in client.get("/conversations").text
    doc = client.get("/openapi.json").json()
    pattern = doc["components"]["schemas"]["CaptureIn"]["properties"]["conversation_id"]
    assert re.fullmatch(pattern["pattern"], talk)


def test_an_idf_name_error_does_not_reveal_the_servers_paths(db: str, tmp_path: Path) -> None:
    idf_dir = tmp_path / "secret-place" / "idf"
    idf_dir.mkdir(parents=True)
    fit_idf([REF, "Rome is in Italy."]).save(idf_dir / "capitals.json")
    app = create_app(db=db, idf_dir=idf_dir)
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        before = table_counts(db, TABLES)
        for idf in ("missing.json", "../x.json", "/etc/passwd", str(idf_dir / "capitals.json")):
            body = {"name": "x", "references": [REF], "options": {"idf": idf}}
            r = c.post("/api/evals", json=body)
            refused(r, 400)
            assert "secret-place" not in r.text and str(tmp_path) not in r.text, r.text
        assert table_counts(db, TABLES) == before
        body = {"name": "x", "references": [REF], "options": {"idf": "capitals.json"}}
        r = c.post("/api/evals", json=body)
        assert r.status_code == 201, r.text
        # the stored option names the table, not where the server keeps it
        assert "secret-place" not in r.text and str(tmp_path) not in r.text, r.text
        assert "secret-place" not in c.get("/api/evals/x").text


def test_methods_a_route_does_not_take_are_405_with_the_right_allow(client: TestClient) -> None:
    for method, path in (
        ("PATCH", "/api/results"),
        ("PATCH", "/api/capture"),
        ("PUT", "/api/evals/capital"),
        ("PATCH", "/api/runs/1"),
        ("PATCH", "/api/health"),
        ("DELETE", "/api/settings"),
    ):
        before_allow = client.options(path)
        r = client.request(method, path, json={})
        assert r.status_code == 405, (method, path, r.status_code, r.text)
        allow = {m.strip() for m in r.headers["allow"].split(",")}
        assert method not in allow and allow, (path, allow)
        for other in allow - {"HEAD", "OPTIONS"}:  # each method Allow names is served
            probe = client.request(other, path, json={})
            assert probe.status_code != 405, (other, path, before_allow)


def test_an_evals_versions_are_gone_after_delete(client: TestClient, db: str) -> None:
    assert client.post("/api/evals", json={"name": "gone", "references": [REF]}).status_code == 201
    assert client.get("/api/evals/gone/versions").status_code == 200
    assert client.delete("/api/evals/gone").status_code == 200
    for path in ("/api/evals/gone", "/api/evals/gone/versions", "/api/evals/gone/trend"):
        refused(client.get(path), 404)
    refused(client.patch("/api/evals/gone", json={"threshold": 0.5}), 404)
    refused(client.post("/api/evals/gone/deactivate"), 404)  # not brought back over the API
    refused(client.get("/api/evals/gone"), 404)
    # archived, not erased: listed when asked, and its results are kept
    names = [e["name"] for e in client.get("/api/evals?include_archived=true").json()]
    assert "gone" in names


def test_body_types_are_as_the_schema_says(client: TestClient, db: str) -> None:
    before = table_counts(db, TABLES)
    for body in (
        {"name": "s", "references": 5},
        {"name": "s", "references": [5]},
        {"name": "s", "references": [REF], "threshold": "0.8"},
        {"name": 5, "references": [REF]},
    ):
        refused(client.post("/api/evals", json=body), 422)
    refused(client.patch("/api/evals/capital", json={"references": [None]}), 422)
    refused(client.patch("/api/settings", json={"auto_evaluate": "yes"}), 422)
    refused(client.post("/api/capture", json={"input": Q, "output": 5}), 422)
    # an empty key: the service's one-line refusal (the schema's pattern says the same)
    refused(client.post("/api/capture", json={"output": "a", "capture_key": ""}), 400, 422)
    refused(client.post("/api/results/1-1/review", json={"score": "1"}), 422)
    refused(client.post("/api/evals/capital/backtest", json={"days": True}), 422)
    refused(client.patch("/api/settings", json={"retention_days": True}), 422)
    refused(client.post("/api/capture", json={"input": Q, "output": REF, "captured_at": 0}), 422)
    assert table_counts(db, TABLES) == before
    # one reference as a string is one answer, and the schema says so
    refs = client.get("/openapi.json").json()["components"]["schemas"]["EvalIn"]
    single = [s for s in refs["properties"]["references"]["anyOf"] if s["type"] == "string"]
    assert single and single[0]["maxLength"] == 1_000_000


def test_the_schema_declares_the_bounds_the_code_enforces(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    text = json.dumps(doc)
    comps = doc["components"]["schemas"]
    assert comps["CaptureIn"]["properties"]["output"]["maxLength"] == 1_000_000
    assert comps["EvalIn"]["properties"]["name"]["maxLength"] == 200
    threshold = comps["EvalIn"]["properties"]["threshold"]
    assert threshold["minimum"] == 0 and threshold["maximum"] == 1
    assert comps["ReviewIn"]["properties"]["score"]["maximum"] == 1
    assert str(MAX_ID) in text  # ids and offsets bounded by the id columns
    params = {
        p["name"]: p["schema"]
        for p in doc["paths"]["/api/captures/{capture_id}"]["get"]["parameters"]
    }
    assert params["capture_id"]["maximum"] == MAX_ID
    # and what the service refuses that a type cannot say: a NUL in a text, a year outside
    # 1000-8999, a control character in a capture key, an unknown scorer option
    capture = comps["CaptureIn"]["properties"]
    assert capture["output"]["pattern"] == "^[^\\x00]*$"
    assert capture["captured_at"]["anyOf"][0]["pattern"] == "^[1-8][0-9]{3}-"
    assert "\\x00-\\x1f" in capture["capture_key"]["pattern"]
    options = comps["EvalIn"]["properties"]["options"]
    assert options["additionalProperties"] is False and "language" in options["properties"]


def test_logout_revokes_the_session_and_a_cookie_is_not_the_tokens_hash(db: str) -> None:
    app = create_app(db=db, token="s3cret-token")
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        html = c.get("/login").text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', html)
        assert csrf is not None
        form = {"csrf_token": csrf.group(1), "token": "s3cret-token", "next": "/"}
        assert c.post("/login", data=form, follow_redirects=False).status_code == 303
        first = c.cookies.get("simeval_session")
        assert c.post("/login", data=form, follow_redirects=False).status_code == 303
        second = c.cookies.get("simeval_session")
        assert first and second and first != second  # random per login, not from the token
        assert c.get("/api/evals").status_code == 200
        assert (
            c.post(
                "/logout", data={"csrf_token": csrf.group(1)}, follow_redirects=False
            ).status_code
            == 303
        )
    with TestClient(app, base_url="http://127.0.0.1:8000") as thief:
        # the copied cookie of the session that logged out no longer works
        thief.cookies.set("simeval_session", second)
        assert thief.get("/api/evals").status_code == 401
        # another session, not logged out, still does
        thief.cookies.set("simeval_session", first)
        assert thief.get("/api/evals").status_code == 200


@pytest.mark.parametrize("url", ["http://[::1", "http://host/a b", "http://h/\r\nX: 1", "ftp://h"])
def test_a_bad_otlp_export_url_is_a_4xx_and_the_setting_stays(client: TestClient, url: str) -> None:
    before = client.get("/api/settings").json()
    r = client.patch("/api/settings", json={"otlp_export": url})
    refused(r, 400, 422)
    assert "OTLP export URL" in r.json()["error"]
    assert client.get("/api/settings").json() == before


@pytest.mark.parametrize("listing", ["results", "captures", "conversations", "runs"])
def test_a_deep_offset_is_refused_naming_the_cursor(client: TestClient, listing: str) -> None:
    # an offset reads every row before it (seconds at 200,000 captures): past 10,000 the
    # answer says to page by cursor, which reads none
    assert client.get(f"/api/{listing}", params={"offset": 10_000}).status_code == 200
    r = client.get(f"/api/{listing}", params={"offset": 10_001})
    refused(r, 400, 422)
    assert "cursor=" in r.json()["error"] and "offset" in r.json()["error"]
    page = client.get(f"/{listing}" if listing != "captures" else "/results", params={"page": 400})
    assert page.status_code in (200, 400) and "Traceback" not in page.text


@pytest.mark.parametrize("run_id", [2**31, 2**63 - 1, 2**63, 2**64])
def test_compare_with_a_run_id_past_the_store_is_a_404(client: TestClient, run_id: int) -> None:
    for path in ("/api/compare", "/compare"):
        r = client.get(path, params={"a": f"run:{run_id}", "b": "run:latest"})
        assert r.status_code in (400, 404), (path, r.status_code, r.text[:200])
