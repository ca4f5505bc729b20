"""Hostile input through the API and the CLI, on SQLite and PostgreSQL (``conftest.db``):
text the store cannot hold and give back is refused before anything is written (never stored
and then answered with 500), ids beyond any stored id name nothing, eval names are limited to a
safe set while an older name with another character stays reachable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from dbhelp import sql, table_counts
from simeval.cli import cli
from simeval.scoring.idf import fit_idf
from simeval.web.app import create_app
from simeval.web.idf_files import MAX_IDF_BYTES

REF = "The capital of France is Paris."
Q = "What is the capital of France?"
TABLES = ("evals", "eval_versions", "eval_tests", "captures", "results", "reviews")


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as c:
        r = c.post("/api/evals", json={"name": "capital", "references": [REF]})
        assert r.status_code == 201, r.text
        assert c.post("/api/evals/capital/test", json={"input": Q, "output": REF}).json()["passed"]
        assert c.post("/api/evals/capital/activate").status_code == 200
        yield c


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def post_raw(client: TestClient, path: str, text: str) -> Any:
    return client.post(path, content=text.encode(), headers={"content-type": "application/json"})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"input": "q", "output": "\\udc00"}', "output"),
        ('{"input": "\\ud800x", "output": "a"}', "input"),
        ('{"input": "q", "output": "a", "conversation_id": "\\udfff"}', "conversation_id"),
        ('{"input": "q", "output": "a", "metadata": {"k": "\\udc00"}}', "metadata"),
        ('{"input": "q", "output": "a", "metadata": {"\\udc00": 1}}', "metadata"),
        ('{"input": "q", "output": "nul \\u0000 here"}', "output"),
        ('{"input": "q", "output": "a", "metadata": {"x": NaN}}', "metadata"),
        ('{"input": "q", "output": "a", "metadata": {"x": [Infinity]}}', "metadata"),
        (json.dumps({"input": "q", "output": "a", "metadata": deep(300)}), "metadata"),
    ],
)
def test_capture_the_store_cannot_hold_is_422_and_nothing_stored(
    client: TestClient, db: str, body: str, field: str
) -> None:
    before = table_counts(db, TABLES)
    r = post_raw(client, "/api/capture", body)
    assert r.status_code == 422, r.text
    # named by the check, or refused by the JSON parser itself (the capture route's)
    assert field in r.text or "Invalid JSON" in r.text, r.text
    assert table_counts(db, TABLES) == before
    assert client.get("/api/results").status_code == 200


def test_a_surrogate_in_an_eval_is_refused_and_listings_keep_working(
    client: TestClient, db: str
) -> None:
    before = table_counts(db, TABLES)
    r = post_raw(client, "/api/evals", '{"name": "x", "references": ["Paris \\udc00"]}')
    assert r.status_code == 422 and "reference answer" in r.json()["error"]
    r = client.patch(
        "/api/evals/capital",
        content=b'{"references": ["\\ud800"]}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    r = post_raw(client, "/api/evals/capital/test", '{"input": "q", "output": "\\udc00"}')
    assert r.status_code == 422
    assert table_counts(db, TABLES) == before
    assert client.get("/api/evals").status_code == 200
    assert client.get("/evals/capital").status_code == 200


def test_ids_out_of_range_name_nothing(client: TestClient) -> None:
    huge = str(2**64)
    for path in (
        f"/api/results/{huge}-1",
        f"/api/results/1-{huge}",
        f"/api/results/r{huge}",
        f"/api/evals/{huge}",
        f"/results/{huge}-1",
    ):
        r = client.get(path)
        assert r.status_code == 404, (path, r.status_code, r.text)
    r = client.post(f"/api/results/{huge}-1/review", json={"score": 1.0})
    assert r.status_code == 404
    for query in (f"run_id={huge}", f"offset={huge}", "run_id=0"):
        assert client.get(f"/api/results?{query}").status_code == 422, query
    assert client.get(f"/api/results?eval={huge}").status_code == 404


def test_eval_names_are_a_safe_set_and_old_names_stay_reachable(
    client: TestClient, db: str
) -> None:
    r = client.post("/api/evals", json={"name": "a/b", "references": [REF]})
    assert r.status_code == 400
    assert "letters, digits, '-', '_', '.' and spaces" in r.json()["error"]
    ok = client.post("/api/evals", json={"name": "Capital v1.2_b-3 é", "references": [REF]})
    assert ok.status_code == 201, ok.text
    # a name stored before names were limited
    now = datetime(2024, 1, 1)
    sql(
        db,
        "UPDATE evals SET name = :name, updated_at = :now WHERE name = :old",
        {"name": "a/b?#%", "now": now, "old": "Capital v1.2_b-3 é"},
    )
    quoted = "a%2Fb%3F%23%25"
    assert client.get(f"/api/evals/{quoted}").json()["name"] == "a/b?#%"
    assert client.get(f"/api/evals/{quoted}/versions").status_code == 200
    assert client.get(f"/api/evals/{quoted}/trend").status_code == 200
    r = client.post(f"/api/evals/{quoted}/test", json={"input": Q, "output": REF})
    assert r.status_code == 200 and r.json()["passed"]
    assert client.post(f"/api/evals/{quoted}/activate").json()["status"] == "active"
    assert client.get(f"/evals/{quoted}").status_code == 200
    assert client.patch(f"/api/evals/{quoted}", json={"threshold": 0.7}).status_code == 200


def test_cli_bad_line_is_one_line_and_nothing_stored(db: str, tmp_path: Path) -> None:
    lines = [
        json.dumps({"input": Q, "output": REF}),
        json.dumps({"input": Q, "output": "Paris."}),
        '{"input": "q", "output": "\\udc00"}',
    ]
    path = tmp_path / "captures.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert CliRunner().invoke(cli, ["evals", "list", "--db", db]).exit_code == 0
    res = CliRunner().invoke(cli, ["capture", "--file", str(path), "--db", db])
    assert res.exit_code == 2, res.output
    assert "line 3" in res.stderr and "surrogate" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert table_counts(db, ("captures",)) == {"captures": 0}
    res = CliRunner().invoke(cli, ["evals", "create", "a/b", "-r", REF, "--db", db])
    assert res.exit_code == 2 and "letters, digits" in res.stderr


def test_idf_over_the_api_only_by_name_from_the_idf_dir(db: str, tmp_path: Path) -> None:
    idf_dir = tmp_path / "idf"
    idf_dir.mkdir()
    fit_idf([REF, "Berlin is the capital of Germany.", "Rome is in Italy."]).save(
        idf_dir / "capitals.json"
    )
    (idf_dir / "sub").mkdir()
    with (idf_dir / "big.json").open("wb") as big:
        big.truncate(MAX_IDF_BYTES + 1)  # sparse: no 64 MB written
    outside = tmp_path / "outside.json"
    fit_idf([REF, "Other text."]).save(outside)
    with TestClient(create_app(db=db, idf_dir=idf_dir), base_url="http://127.0.0.1:8000") as c:
        before = table_counts(db, TABLES)
        for idf in (
            "/dev/zero",
            str(outside),
            "../outside.json",
            "sub",
            "big.json",
            "missing.json",
            str(idf_dir / "capitals.json"),
        ):
            body = {"name": "x", "references": [REF], "options": {"idf": idf}}
            r = c.post("/api/evals", json=body)
            assert r.status_code == 400, (idf, r.status_code)
            assert "IDF directory" in r.json()["error"]
        assert table_counts(db, TABLES) == before
        body = {"name": "x", "references": [REF], "options": {"idf": "capitals.json"}}
        r = c.post("/api/evals", json=body)
        assert r.status_code == 201, r.text
        assert c.post("/api/evals/x/test", json={"input": Q, "output": REF}).json()["passed"]
        r = c.patch("/api/evals/x", json={"options": {"idf": "/etc/passwd"}})
        assert r.status_code == 400
        assert c.patch("/api/evals/x", json={"options": {"idf": "pair"}}).status_code == 200
