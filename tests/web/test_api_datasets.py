"""`/api/datasets…` through the real app and an in-process client, on both backends."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dbhelp import table_counts
from simeval.web.app import create_app

CASES = [
    {"id": "fr", "input": "Capital of France?", "references": "Paris is the capital of France."},
    {"id": "es", "input": "Capital of Spain?", "references": ["Madrid."], "metadata": {"t": 1}},
]
TABLES = ("datasets", "dataset_versions", "dataset_cases")


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    app = create_app(db)
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        yield c


def ok(resp: Any, status: int = 200) -> Any:
    assert resp.status_code == status, resp.text
    return resp.json()


def test_create_edit_versions_and_export(client: TestClient) -> None:
    made = ok(client.post("/api/datasets", json={"name": "golden", "cases": CASES}), 201)
    assert (made["version"], made["cases"], made["drafts"]) == (1, 2, 0)
    patched = ok(client.patch("/api/datasets/golden/cases/fr", json={"references": ["Paris."]}))
    assert patched["version"] == 2
    v1 = ok(client.get("/api/datasets/golden", params={"version": 1}))
    v2 = ok(client.get("/api/datasets/golden"))
    assert v1["cases"][0]["references"] == ["Paris is the capital of France."]
    assert v2["cases"][0]["references"] == ["Paris."]
    assert v2["cases"][0]["since_version"] == 2 and v2["cases"][1]["since_version"] == 1
    assert [v["version"] for v in v2["versions"]] == [2, 1]

    added = ok(
        client.post(
            "/api/datasets/golden/cases", json={"input": "q", "references": "r", "id": "new"}
        )
    )
    assert (added["version"], added["cases"]) == (3, 3)
    assert ok(client.delete("/api/datasets/golden/cases/new"))["version"] == 4

    exp = client.get("/api/datasets/golden/export", params={"version": 1, "format": "csv"})
    assert exp.status_code == 200 and exp.headers["content-type"].startswith("text/csv")
    assert 'filename="golden-v1.csv"' in exp.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(exp.text)))
    assert [r["reference"] for r in rows] == ["Paris is the capital of France.", "Madrid."]
    lines = client.get("/api/datasets/golden/export").text.splitlines()
    assert [json.loads(x)["reference"] for x in lines] == ["Paris.", "Madrid."]

    listed = ok(client.get("/api/datasets"))
    assert [(d["name"], d["version"], d["cases"]) for d in listed] == [("golden", 4, 2)]


def test_import_a_file_body_and_replace(client: TestClient) -> None:
    body = "".join(json.dumps(c) + "\n" for c in CASES).encode()
    made = ok(client.post("/api/datasets/up/import", content=body), 201)
    assert made["cases"] == 2
    again = client.post("/api/datasets/up/import", content=body)
    assert again.status_code == 409
    csv_body = b"id,input,reference\na,q,r\n"
    replaced = ok(client.post("/api/datasets/up/import?format=csv&replace=true", content=csv_body))
    assert (replaced["version"], replaced["cases"]) == (2, 1)
    bad = client.post("/api/datasets/other/import?format=csv", content=b"id,input\n1,2\n")
    assert bad.status_code == 400
    assert bad.json()["error"] == (
        "the uploaded file line 2: missing column 'reference' or 'references' (columns: id, input)"
    )


def test_a_name_in_other_letters_exports(client: TestClient) -> None:
    name = "données é"
    ok(client.post("/api/datasets", json={"name": name, "cases": CASES}), 201)
    exp = client.get(f"/api/datasets/{name}/export")
    assert exp.status_code == 200
    assert exp.headers["content-disposition"] == (
        'attachment; filename="donn_es _-v1.jsonl"; '
        "filename*=UTF-8''donn%C3%A9es%20%C3%A9-v1.jsonl"
    )
    assert len(exp.text.splitlines()) == 2


def test_a_file_not_utf8_is_named_in_a_json_error(client: TestClient) -> None:
    resp = client.post("/api/datasets/x/import?format=tsv", content=b"\x89PNG\r\n\x1a\n\x00")
    assert resp.status_code == 400
    assert "\\x89PNG" in resp.json()["error"]


def test_captures_to_a_dataset_and_accept(client: TestClient) -> None:
    ids = [
        ok(client.post("/api/capture", json={"input": f"q{i}", "output": f"answer {i}"}), 201)["id"]
        for i in range(3)
    ]
    made = ok(client.post("/api/datasets/prod/captures", json={"capture_ids": ids[:2]}), 201)
    assert (made["version"], made["drafts"], made["added"]) == (1, 2, 2)
    more = ok(client.post("/api/datasets/prod/captures", json={"capture_ids": ids}))
    assert (more["version"], more["added"], more["skipped"]) == (
        2,
        1,
        [f"capture-{ids[0]}", f"capture-{ids[1]}"],
    )
    case = ok(client.get("/api/datasets/prod"))["cases"][0]
    assert case["draft"] and case["references"] == ["answer 0"] and case["capture_id"] == ids[0]
    accepted = ok(client.post("/api/datasets/prod/accept", json={"id": f"capture-{ids[0]}"}))
    assert (accepted["version"], accepted["drafts"]) == (3, 2)
    assert (
        client.post("/api/datasets/prod/accept", json={"id": f"capture-{ids[0]}"}).status_code
        == 409
    )
    missing = client.post("/api/datasets/prod/captures", json={"capture_ids": [999999]})
    assert missing.status_code == 404 and "999999" in missing.json()["error"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("post", "/api/datasets", {"name": "x", "cases": []}, 422),
        ("post", "/api/datasets", {"name": "x", "cases": [{"input": "q"}]}, 422),
        ("post", "/api/datasets", {"name": "x", "cases": [{"input": "q", "references": ""}]}, 400),
        (
            "post",
            "/api/datasets",
            {"name": "a/b", "cases": [{"input": "q", "references": "r"}]},
            400,
        ),
        (
            "post",
            "/api/datasets",
            {"name": "x", "cases": [{"input": "q", "references": "r", "extra": 1}]},
            422,
        ),
        ("post", "/api/datasets", {"name": "g", "cases": [{"input": "q", "references": "r"}]}, 409),
        ("patch", "/api/datasets/g/cases/zz", {"input": "x"}, 404),
        ("patch", "/api/datasets/g/cases/1", {"references": [""]}, 400),
        ("patch", "/api/datasets/g/cases/1", {"references": []}, 400),  # not "no change"
        ("patch", "/api/datasets/nope/cases/1", {"input": "x"}, 404),
        ("delete", "/api/datasets/g/cases/1", None, 409),
        ("get", "/api/datasets/g?version=5", None, 404),
        ("get", "/api/datasets/g?version=0", None, 422),
        ("get", "/api/datasets/g/export?format=xml", None, 422),
        ("post", "/api/datasets/g/captures", {"capture_ids": []}, 422),
        ("post", "/api/datasets/g/captures", {"capture_ids": [0]}, 422),
        ("put", "/api/datasets/g", None, 405),
        ("options", "/api/datasets", None, 405),
        ("patch", "/api/datasets/g/accept", {"id": "1"}, 405),
    ],
)
def test_bad_requests(client: TestClient, method: str, path: str, body: Any, status: int) -> None:
    ok(
        client.post(
            "/api/datasets", json={"name": "g", "cases": [{"input": "q", "references": "r"}]}
        ),
        201,
    )
    before = table_counts(client.app.state.service.url, TABLES)  # type: ignore[attr-defined]
    kwargs = {"json": body} if body is not None else {}
    resp = client.request(method.upper(), path, **kwargs)
    assert resp.status_code == status, resp.text
    assert isinstance(resp.json()["error"], str)
    if status == 405:  # naming every method the path takes (simeval.web.methods)
        assert resp.headers["allow"] in {"GET", "GET, POST", "POST"}
    assert table_counts(client.app.state.service.url, TABLES) == before  # type: ignore[attr-defined]


def test_the_schema_names_the_routes(client: TestClient) -> None:
    paths = ok(client.get("/openapi.json"))["paths"]
    for path in (
        "/api/datasets",
        "/api/datasets/{name}",
        "/api/datasets/{name}/import",
        "/api/datasets/{name}/export",
        "/api/datasets/{name}/cases",
        "/api/datasets/{name}/cases/{case_id}",
        "/api/datasets/{name}/accept",
        "/api/datasets/{name}/captures",
    ):
        assert path in paths, path
    body = paths["/api/datasets"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("DatasetIn")
