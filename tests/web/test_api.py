"""The JSON API through the real ASGI app on a real SQLite file (in-process client)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from simeval.web import create_app

REF = "Paris is the capital of France and its largest city."
GOOD = "The capital of France is Paris, which is also its largest city."
POOR = "I think the weather in Spain is usually sunny."


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    app = create_app(db=db)
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        yield c


def make_eval(client: TestClient, name: str = "capital", **extra: Any) -> dict[str, Any]:
    body = {"name": name, "references": [REF], "threshold": 0.8, **extra}
    r = client.post("/api/evals", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def activate(client: TestClient, name: str = "capital") -> dict[str, Any]:
    r = client.post(f"/api/evals/{name}/test", json={"input": "Capital?", "output": GOOD})
    assert r.status_code == 200 and r.json()["passed"], r.text
    r = client.post(f"/api/evals/{name}/activate")
    assert r.status_code == 200, r.text
    return r.json()


def error_of(r: Any, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert isinstance(body["error"], str) and body["error"]
    assert "\n" not in body["error"] and "Traceback" not in body["error"]
    return body["error"]


# -- meta ----------------------------------------------------------------------------------
def test_health_and_openapi(client: TestClient) -> None:
    assert client.get("/api/health").json()["status"] == "ok"
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in (
        "/api/evals",
        "/api/capture",
        "/api/results",
        "/api/results/export",
        "/api/evals/{name}/trend",
        "/api/results/{result_id}/review",
        "/api/settings",
    ):
        assert path in paths
    assert not any(p.startswith("/evals") for p in paths)  # pages stay out of the API docs


# Every API endpoint and the tests that exercise it, success and errors. A new route without
# an entry here fails test_every_api_route_is_covered.
COVERED: dict[tuple[str, str], str] = {
    ("GET", "/api/health"): "test_health_and_openapi",
    ("GET", "/api/me"): "test_access: test_an_admin_manages_users_through_the_api",
    ("GET", "/api/users"): "test_access: test_an_admin_manages_users_through_the_api",
    ("POST", "/api/users"): "test_access: test_an_admin_manages_users_through_the_api",
    ("PATCH", "/api/users/{name}"): "test_access: test_an_admin_manages_users_through_the_api",
    ("POST", "/api/users/{name}/key"): "test_access: test_an_admin_manages_users_through_the_api",
    ("GET", "/api/audit"): "test_signed_actions: test_the_log_filters_and_pages, test_bad_audit…",
    ("GET", "/api/evals"): "test_create_get_list_eval, test_list_evals_rejects_a_bad_status",
    ("POST", "/api/evals"): "test_create_eval_errors, test_create_eval_rejects_bad_json…",
    ("GET", "/api/evals/{name}"): "test_create_get_list_eval, test_get_missing_eval_is_404",
    ("PATCH", "/api/evals/{name}"): "test_edit_eval_makes_versions, test_edit_eval_errors",
    ("DELETE", "/api/evals/{name}"): "test_delete_archives_and_keeps_results",
    ("GET", "/api/evals/{name}/versions"): "test_edit_eval_makes_versions",
    ("POST", "/api/evals/{name}/test"): "test_test_then_activate_lifecycle, test_test_eval_errors",
    ("POST", "/api/evals/{name}/activate"): "test_test_then_activate_lifecycle",
    ("POST", "/api/evals/{name}/deactivate"): "test_test_then_activate_lifecycle",
    ("POST", "/api/evals/{name}/archive"): "test_test_then_activate_lifecycle",
    ("GET", "/api/evals/{name}/trend"): "test_trend",
    ("POST", "/api/capture"): "test_capture_*, test_capture_keys.py",
    ("POST", "/api/captures/batch"): "test_capture_keys.py::test_batch_*",
    ("POST", "/v1/traces"): "test_otlp.py",
    ("POST", "/v1/logs"): "test_otlp_logs.py, test_instrumentations.py",
    ("POST", "/v1/metrics"): "test_otlp_logs.py::test_metrics_are_answered_and_not_stored",
    ("GET", "/api/results"): "test_results_listing_*",
    ("GET", "/api/results/export"): "test_export_csv_and_json",
    ("GET", "/api/results/{result_id}"): "test_result_detail_and_review, test_result_errors",
    ("POST", "/api/results/{result_id}/review"): "test_result_detail_and_review",
    ("GET", "/api/settings"): "test_settings",
    ("PATCH", "/api/settings"): "test_settings",
    ("POST", "/api/cleanup"): "test_cleanup",
    ("GET", "/api/compare"): "test_compare_two_engines_by_metadata, test_compare_errors",
    ("GET", "/api/captures"): "test_captures_with_metadata",
    ("GET", "/api/captures/{capture_id}"): "test_captures_with_metadata",
    ("GET", "/api/conversations"): "test_conversations",
    ("GET", "/api/conversations/{conversation_id}"): "test_conversations",
    ("GET", "/api/runs"): "test_runs_listing_and_page",
    ("GET", "/api/runs/{run_id}"): "test_runs_listing_and_page",
    ("POST", "/api/evals/{name}/backtest"): "test_backtest_and_rescore",
    ("POST", "/api/rescore"): "test_backtest_and_rescore",
    ("DELETE", "/api/runs/{run_id}"): "test_interrupted_runs.py",
    ("GET", "/api/run-groups"): "test_run_groups_api.py",
    ("GET", "/api/run-groups/{name}"): "test_run_groups_api.py",
    ("GET", "/api/run-groups/{name}/cases"): "test_run_groups_api.py",
    ("GET", "/api/run-groups/{name}/cases/{key}"): "test_run_groups_api.py",
    ("GET", "/api/datasets"): "test_api_datasets.py::test_create_edit_versions_and_export",
    ("POST", "/api/datasets"): "test_api_datasets.py::test_create_*, test_bad_requests",
    ("GET", "/api/datasets/{name}"): "test_api_datasets.py::test_create_*, test_bad_requests",
    ("POST", "/api/datasets/{name}/import"): "test_api_datasets.py::test_import_*",
    ("GET", "/api/datasets/{name}/export"): "test_api_datasets.py::test_create_*, test_a_name_*",
    ("POST", "/api/datasets/{name}/cases"): "test_api_datasets.py::test_create_*",
    ("PATCH", "/api/datasets/{name}/cases/{case_id}"): "test_api_datasets.py::test_create_*",
    ("DELETE", "/api/datasets/{name}/cases/{case_id}"): "test_api_datasets.py::test_create_*",
    ("POST", "/api/datasets/{name}/accept"): "test_api_datasets.py::test_captures_*",
    ("POST", "/api/datasets/{name}/captures"): "test_api_datasets.py::test_captures_*",
    ("GET", "/api/alerts"): "test_alerts_web.py::test_the_api_and_the_page_show_an_alert_*",
    ("GET", "/api/alerts/rules"): "test_alerts_web.py::test_the_api_and_the_page_show_an_alert_*",
    ("POST", "/api/alerts/rules/{name}/test"): "test_alerts_web.py::test_the_test_route_*",
    ("POST", "/api/alerts/evaluate"): "test_alerts_web.py::test_the_api_and_the_page_show_*",
    ("GET", "/api/alerts/{alert_id}"): "test_alerts_web.py::test_mistakes_get_a_json_error",
    ("GET", "/api/alerts/{alert_id}/deliveries"): "test_alerts_web.py::test_a_drop_fires_*",
    ("GET", "/api/overview"): "test_overview_compare.py::test_overview_api",
}


def test_every_api_route_is_covered(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    routes = {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}
    assert routes == set(COVERED)


def test_docs_are_served_without_internet(client: TestClient) -> None:
    html = client.get("/docs").text
    assert "/vendor/docs/swagger-ui-bundle.js" in html
    assert "cdn." not in html and "https://" not in html.split("<body>")[0]
    js = client.get("/vendor/docs/swagger-ui-bundle.js")
    assert js.status_code == 200 and len(js.content) > 100_000
    redoc = client.get("/redoc").text
    assert "/vendor/docs/redoc.standalone.js" in redoc


def test_plotly_bundle_is_served_from_the_installed_package(client: TestClient) -> None:
    r = client.get("/vendor/plotly.min.js")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/javascript")
    assert b"plotly" in r.content[:2000].lower() and len(r.content) > 1_000_000


def test_unknown_api_path_and_method(client: TestClient) -> None:
    assert "not found" in error_of(client.get("/api/nope"), 404)
    error_of(client.put("/api/capture", json={}), 405)


# -- evals ---------------------------------------------------------------------------------
def test_create_get_list_eval(client: TestClient) -> None:
    ev = make_eval(client, input_scope=None, options={"ngram": 2})
    assert ev["name"] == "capital" and ev["status"] == "draft" and ev["version"] == 1
    assert ev["references"] == [REF] and ev["threshold"] == 0.8
    assert ev["options"].get("ngram") == 2 and ev["can_activate"] is False
    assert client.get("/api/evals/capital").json()["id"] == ev["id"]
    assert [e["name"] for e in client.get("/api/evals").json()] == ["capital"]
    assert client.get("/api/evals", params={"status": "active"}).json() == []


def test_list_evals_rejects_a_bad_status(client: TestClient) -> None:
    assert "status" in error_of(client.get("/api/evals", params={"status": "gone"}), 422)
    error_of(client.get("/api/evals", params={"include_archived": "perhaps"}), 422)


def test_create_accepts_a_single_reference_string(client: TestClient) -> None:
    r = client.post("/api/evals", json={"name": "one", "references": REF})
    assert r.status_code == 201 and r.json()["references"] == [REF]
    assert r.json()["threshold"] == 0.8  # the default


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"name": "x", "references": [REF], "threshold": 1.5}, 400, "threshold"),
        ({"name": "x", "references": [REF], "threshold": -0.1}, 400, "threshold"),
        ({"name": "x", "references": []}, 400, "reference"),
        ({"name": "x", "references": ["  "]}, 400, "reference"),
        ({"name": "", "references": [REF]}, 400, "name"),
        ({"name": "x", "references": [REF], "options": {"colour": 1}}, 400, "colour"),
        ({"name": "x", "references": [REF], "options": {"ngram": 9}}, 400, "ngram"),
        ({"name": "x"}, 422, "references"),
        ({"references": [REF]}, 422, "name"),
        ({"name": "x", "references": [REF], "threshold": "high"}, 422, "threshold"),
        ({"name": "x", "references": [REF], "surprise": 1}, 422, "surprise"),
        ({"name": "x", "references": [REF], "type": "regex"}, 422, "type"),
    ],
)
def test_create_eval_errors(
    client: TestClient, body: dict[str, Any], status: int, needle: str
) -> None:
    assert needle in error_of(client.post("/api/evals", json=body), status).lower()
    assert client.get("/api/evals").json() == []  # nothing half-written


def test_create_eval_rejects_bad_json_and_duplicates(client: TestClient) -> None:
    r = client.post(
        "/api/evals", content=b"{not json", headers={"content-type": "application/json"}
    )
    error_of(r, 422)
    make_eval(client)
    assert "capital" in error_of(
        client.post("/api/evals", json={"name": "capital", "references": [REF]}), 409
    )


def test_get_missing_eval_is_404(client: TestClient) -> None:
    for method, path in [
        ("get", "/api/evals/ghost"),
        ("patch", "/api/evals/ghost"),
        ("delete", "/api/evals/ghost"),
        ("get", "/api/evals/ghost/versions"),
        ("post", "/api/evals/ghost/activate"),
        ("post", "/api/evals/ghost/deactivate"),
        ("post", "/api/evals/ghost/archive"),
        ("get", "/api/evals/ghost/trend"),
    ]:
        kwargs: dict[str, Any] = {"json": {"threshold": 0.5}} if method == "patch" else {}
        assert "ghost" in error_of(getattr(client, method)(path, **kwargs), 404)
    error_of(client.post("/api/evals/ghost/test", json={"output": "x"}), 404)


def test_edit_eval_makes_versions(client: TestClient) -> None:
    make_eval(client)
    r = client.patch("/api/evals/capital", json={"threshold": 0.7})
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["threshold"] == 0.7
    r = client.patch(
        "/api/evals/capital", json={"references": [REF, "Paris."], "input_scope": "capital"}
    )
    assert r.json()["version"] == 3 and r.json()["input_scope"] == "capital"
    r = client.patch("/api/evals/capital", json={"input_scope": None})
    assert r.json()["input_scope"] is None
    r = client.patch("/api/evals/capital", json={"name": "capital-fr"})
    assert r.json()["name"] == "capital-fr"
    versions = client.get("/api/evals/capital-fr/versions").json()
    assert [v["version"] for v in versions][:3] == [1, 2, 3]
    assert "threshold" in versions[1]["changes"]
    error_of(client.get("/api/evals/capital"), 404)
    error_of(client.patch("/api/evals/capital-fr", json={"threshold": 2}), 400)
    error_of(client.patch("/api/evals/capital-fr", json={"threshold": "x"}), 422)


def test_edit_eval_errors(client: TestClient) -> None:
    make_eval(client)
    make_eval(client, "other")
    assert "other" in error_of(client.patch("/api/evals/capital", json={"name": "other"}), 409)
    assert "reference" in error_of(client.patch("/api/evals/capital", json={"references": []}), 400)
    assert "ngram" in error_of(
        client.patch("/api/evals/capital", json={"options": {"ngram": 9}}), 400
    )
    error_of(client.patch("/api/evals/capital", json={"status": "active"}), 422)
    error_of(client.patch("/api/evals/capital", json=["threshold"]), 422)
    ev = client.get("/api/evals/capital").json()
    assert ev["version"] == 1 and ev["references"] == [REF]  # nothing half-written


def test_archived_eval_cannot_be_activated(client: TestClient) -> None:
    make_eval(client)
    client.post("/api/evals/capital/test", json={"input": "q", "output": GOOD})
    client.post("/api/evals/capital/archive")
    assert "archived" in error_of(client.post("/api/evals/capital/activate"), 409)


def test_test_then_activate_lifecycle(client: TestClient) -> None:
    make_eval(client)
    poor = client.post("/api/evals/capital/test", json={"input": "Capital?", "output": POOR})
    assert poor.status_code == 200
    t = poor.json()
    assert t["passed"] is False and t["score"] < 0.8 and t["version"] == 1
    assert t["explanation"]["missing"], "a failing test names the missing terms"
    assert client.get("/api/evals/capital").json()["can_activate"] is False
    assert "test" in error_of(client.post("/api/evals/capital/activate"), 409).lower()
    ev = activate(client)
    assert ev["status"] == "active"
    assert client.get("/api/evals", params={"status": "active"}).json()[0]["name"] == "capital"
    assert client.post("/api/evals/capital/deactivate").json()["status"] == "draft"
    assert client.post("/api/evals/capital/archive").json()["status"] == "archived"
    assert client.get("/api/evals").json() == []
    archived = client.get("/api/evals", params={"include_archived": True}).json()
    assert archived[0]["status"] == "archived"


def test_test_eval_errors(client: TestClient) -> None:
    make_eval(client)
    error_of(client.post("/api/evals/capital/test", json={"input": "x"}), 422)
    error_of(client.post("/api/evals/capital/test", json={"output": 3}), 422)


def test_edit_after_test_needs_a_new_test(client: TestClient) -> None:
    make_eval(client)
    client.post("/api/evals/capital/test", json={"input": "q", "output": GOOD})
    assert client.get("/api/evals/capital").json()["can_activate"] is True
    client.patch("/api/evals/capital", json={"threshold": 0.99})
    assert client.get("/api/evals/capital").json()["can_activate"] is False
    error_of(client.post("/api/evals/capital/activate"), 409)


def test_delete_archives_and_keeps_results(client: TestClient) -> None:
    make_eval(client)
    activate(client)
    client.post("/api/capture", json={"input": "q", "output": GOOD})
    r = client.delete("/api/evals/capital")
    assert r.status_code == 200 and r.json()["status"] == "archived"
    assert client.get("/api/results").json()["total"] == 1


# -- captures and results ------------------------------------------------------------------
def test_capture_scores_every_active_eval(client: TestClient) -> None:
    make_eval(client)
    make_eval(client, "draft-only")
    make_eval(client, "strict", threshold=0.99)
    activate(client)
    client.post("/api/evals/strict/test", json={"input": "q", "output": REF})
    client.post("/api/evals/strict/activate")
    r = client.post(
        "/api/capture",
        json={
            "input": "Capital of France?",
            "output": GOOD,
            "conversation_id": "conv-1",
            "metadata": {"engine": "v2"},
        },
    )
    assert r.status_code == 201, r.text
    cap = r.json()
    assert cap["evaluated"] is True and cap["conversation_id"] == "conv-1"
    assert cap["metadata"] == {"engine": "v2"}
    by_eval = {res["eval_name"]: res for res in cap["results"]}
    assert set(by_eval) == {"capital", "strict"}
    assert by_eval["capital"]["passed"] is True and by_eval["strict"]["passed"] is False
    assert by_eval["capital"]["score"] == by_eval["strict"]["score"]


@pytest.mark.parametrize(
    "body",
    [
        {"input": "q"},
        {"input": "q", "output": None},
        {"input": "q", "output": "a", "metadata": "flat"},
        [],
        "text",
    ],
)
def test_capture_rejects_malformed_bodies(client: TestClient, body: Any) -> None:
    error_of(client.post("/api/capture", json=body), 422)
    assert client.get("/api/results").json()["total"] == 0


def test_a_capture_without_input_is_stored_as_a_capture_file_line_is(
    client: TestClient,
) -> None:
    """``input`` may be left out, as a line of ``simeval capture --file`` may: no input."""
    r = client.post("/api/capture", json={"output": "a"})
    assert r.status_code == 201, r.text
    assert r.json()["input"] == ""
    batch = client.post("/api/captures/batch", json={"captures": [{"output": "b"}]})
    assert batch.status_code == 201, batch.text
    assert sorted(c["input"] for c in client.get("/api/captures").json()["captures"]) == ["", ""]


@pytest.mark.parametrize("when", ["1", 1, "1714560000", 1714560000.5, True, "05/01/2024"])
def test_a_capture_time_is_iso_text_as_the_schema_says(client: TestClient, when: Any) -> None:
    """``captured_at`` is ISO 8601 text with a four-digit year: pydantic alone would read a
    number, or text of digits, as seconds since 1970 (``"1"``: 1970-01-01T00:00:01)."""
    error_of(client.post("/api/capture", json={"output": "a", "captured_at": when}), 422)
    item = {"output": "a", "captured_at": when}
    error_of(client.post("/api/captures/batch", json={"captures": [item]}), 422)
    ok = client.post("/api/capture", json={"output": "a", "captured_at": "2024-05-01T12:00:00Z"})
    assert ok.status_code == 201 and ok.json()["captured_at"].startswith("2024-05-01T12:00:00")


def test_capture_rejects_bad_values(client: TestClient) -> None:
    make_eval(client)
    activate(client)
    long_id = {"input": "q", "output": GOOD, "conversation_id": "c" * 201}
    assert "conversation_id" in error_of(client.post("/api/capture", json=long_id), 400)
    assert client.get("/api/results").json()["total"] == 0


def test_capture_requires_a_json_body(client: TestClient) -> None:
    r = client.post(
        "/api/capture",
        content=b'{"input": "q", "output": "a"}',
        headers={"content-type": "text/plain"},
    )
    error_of(r, 422)
    r = client.post("/api/capture", data={"input": "q", "output": "a"})
    error_of(r, 422)


def test_capture_input_scope(client: TestClient) -> None:
    make_eval(client, input_scope="Capital of France?")
    activate(client)
    # The scope is the input itself, compared without regard to case and spacing.
    inside = client.post("/api/capture", json={"input": " capital of  FRANCE? ", "output": GOOD})
    outside = client.post("/api/capture", json={"input": "Capital of Peru?", "output": GOOD})
    assert len(inside.json()["results"]) == 1
    assert outside.json()["results"] == []


def _fill(client: TestClient) -> None:
    make_eval(client)
    activate(client)
    for output in (GOOD, POOR, GOOD, POOR, POOR):
        assert client.post("/api/capture", json={"input": "q", "output": output}).status_code == 201


def test_results_listing_and_filters(client: TestClient) -> None:
    _fill(client)
    page = client.get("/api/results").json()
    assert page["total"] == 5 and len(page["results"]) == 5
    times = [r["created_at"] for r in page["results"]]
    assert times == sorted(times, reverse=True)
    assert client.get("/api/results", params={"passed": "true"}).json()["total"] == 2
    assert client.get("/api/results", params={"passed": "false"}).json()["total"] == 3
    assert client.get("/api/results", params={"eval": "capital"}).json()["total"] == 5
    two = client.get("/api/results", params={"limit": 2, "offset": 1}).json()
    assert two["total"] == 5 and len(two["results"]) == 2
    assert two["results"][0]["id"] == page["results"][1]["id"]
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert client.get("/api/results", params={"since": future}).json()["total"] == 0
    assert client.get("/api/results", params={"since": past}).json()["total"] == 5
    assert client.get("/api/results", params={"until": past}).json()["total"] == 0
    assert client.get("/api/results", params={"reviewed": "true"}).json()["total"] == 0


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 5000},
        {"offset": -1},
        {"passed": "maybe"},
        {"run_id": "x"},
    ],
)
def test_results_listing_rejects_bad_filters(client: TestClient, params: dict[str, Any]) -> None:
    error_of(client.get("/api/results", params=params), 422)


def test_results_for_unknown_eval(client: TestClient) -> None:
    assert "ghost" in error_of(client.get("/api/results", params={"eval": "ghost"}), 404)
    export = client.get("/api/results/export", params={"eval": "ghost", "format": "csv"})
    assert "ghost" in error_of(export, 404)


def test_result_detail_and_review(client: TestClient) -> None:
    _fill(client)
    failing = client.get("/api/results", params={"passed": "false"}).json()["results"][0]
    detail = client.get(f"/api/results/{failing['id']}").json()
    assert detail["passed"] is False and detail["review"] is None
    assert detail["explanation"]["missing"]
    assert detail["threshold"] == 0.8 and detail["eval_version"] == 1
    r = client.post(f"/api/results/{failing['id']}/review", json={"score": 0.95, "note": "fine"})
    assert r.status_code == 200, r.text
    reviewed = r.json()
    assert reviewed["passed"] is True and reviewed["automated_passed"] is False
    assert reviewed["score"] == detail["score"]  # the raw score never changes
    assert reviewed["review"]["score"] == 0.95 and reviewed["review"]["note"] == "fine"
    assert client.get("/api/results", params={"reviewed": "true"}).json()["total"] == 1
    assert client.get("/api/results", params={"passed": "true"}).json()["total"] == 3


def test_result_errors(client: TestClient) -> None:
    _fill(client)
    rid = client.get("/api/results").json()["results"][0]["id"]
    error_of(client.get("/api/results/999999"), 404)
    error_of(client.get("/api/results/abc"), 422)
    error_of(client.post("/api/results/999999/review", json={"score": 0.5}), 404)
    assert (
        "score"
        in error_of(client.post(f"/api/results/{rid}/review", json={"score": 1.5}), 400).lower()
    )
    error_of(client.post(f"/api/results/{rid}/review", json={"note": "x"}), 422)
    assert client.get(f"/api/results/{rid}").json()["review"] is None


def test_trend(client: TestClient) -> None:
    _fill(client)
    client.patch("/api/evals/capital", json={"threshold": 0.5})
    client.post("/api/evals/capital/test", json={"input": "q", "output": GOOD})
    client.post("/api/evals/capital/activate")
    client.post("/api/capture", json={"input": "q", "output": GOOD})
    for bucket in ("hour", "day", "week"):
        t = client.get("/api/evals/capital/trend", params={"bucket": bucket}).json()
        assert t["eval_name"] == "capital" and t["bucket"] == bucket and t["threshold"] == 0.5
        assert sum(b["count"] for b in t["buckets"]) == 6
        assert set().union(*(b["versions"] for b in t["buckets"])) == {1, 2}
    error_of(client.get("/api/evals/capital/trend", params={"bucket": "minute"}), 422)
    assert "since" in error_of(
        client.get("/api/evals/capital/trend", params={"since": "soon"}), 400
    )
    assert client.get("/api/evals/capital/trend", params={"since": "30d"}).status_code == 200


def test_export_csv_and_json(client: TestClient) -> None:
    _fill(client)
    r = client.get("/api/results/export", params={"format": "csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    assert r.headers["content-disposition"].endswith('.csv"')
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert len(rows) == 5 and {"score", "pass", "eval_name", "output"} <= set(rows[0])
    assert sorted(r["pass"].lower() for r in rows).count("true") == 2
    r = client.get("/api/results/export", params={"format": "json", "passed": "true"})
    assert r.headers["content-type"].startswith("application/json")
    data = json.loads(r.text)
    items = data if isinstance(data, list) else data.get("results", data)
    assert len(items) == 2
    error_of(client.get("/api/results/export", params={"format": "xml"}), 422)


# -- settings ------------------------------------------------------------------------------
def test_settings(client: TestClient) -> None:
    s = client.get("/api/settings").json()
    assert s == {
        "auto_evaluate": True,
        "retention_days": None,
        "otlp_export": None,
        "indexed_meta": [],
    }
    s = client.patch("/api/settings", json={"retention_days": 30}).json()
    assert s["retention_days"] == 30 and s["auto_evaluate"] is True
    s = client.patch("/api/settings", json={"auto_evaluate": False}).json()
    assert s == {
        "auto_evaluate": False,
        "retention_days": 30,
        "otlp_export": None,
        "indexed_meta": [],
    }
    s = client.patch("/api/settings", json={"retention_days": None}).json()
    assert s["retention_days"] is None
    s = client.patch("/api/settings", json={"otlp_export": "http://127.0.0.1:4318"}).json()
    assert s["otlp_export"] == "http://127.0.0.1:4318" and s["retention_days"] is None
    assert "OTLP" in error_of(client.patch("/api/settings", json={"otlp_export": "c:4318"}), 400)
    assert client.patch("/api/settings", json={"otlp_export": ""}).json()["otlp_export"] is None
    assert (
        "retention"
        in error_of(client.patch("/api/settings", json={"retention_days": 12}), 400).lower()
    )
    error_of(client.patch("/api/settings", json={"auto_evaluate": "sometimes"}), 422)
    error_of(client.patch("/api/settings", json={"colour": "red"}), 422)


def test_auto_evaluate_off_stores_without_scoring(client: TestClient) -> None:
    make_eval(client)
    activate(client)
    client.patch("/api/settings", json={"auto_evaluate": False})
    cap = client.post("/api/capture", json={"input": "q", "output": GOOD}).json()
    assert cap["evaluated"] is False and cap["results"] == []
    assert client.get("/api/results").json()["total"] == 0


def test_cleanup(client: TestClient) -> None:
    _fill(client)
    out = client.post("/api/cleanup").json()
    assert out["results"] == 0 and out["captures"] == 0  # retention: forever
    client.patch("/api/settings", json={"retention_days": 7})
    out = client.post("/api/cleanup").json()
    assert out["results"] == 0  # everything is younger than a week
    assert client.get("/api/results").json()["total"] == 5


# -- the pages answer with pages, errors included --------------------------------------------
def test_pages_render_and_page_errors_are_pages(client: TestClient) -> None:
    _fill(client)
    rid = client.get("/api/results").json()["results"][0]["id"]
    for path in (
        "/",
        "/evals/new",
        "/evals/new/similarity",
        "/evals/capital",
        "/dashboard",
        "/dashboard?eval=capital&bucket=week",
        "/results",
        "/results?outcome=fail&since=2020-01-01",
        f"/results/{rid}",
        "/settings",
        "/login",
    ):
        r = client.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-type"].startswith("text/html"), path
    for path, status, needle in [
        ("/evals/ghost", 404, "ghost"),
        ("/results/999999", 404, "999999"),
        ("/dashboard?eval=ghost", 404, "ghost"),
        ("/results?since=yesterday", 400, "since"),
    ]:
        r = client.get(path)
        assert r.status_code == status, path
        assert r.headers["content-type"].startswith("text/html"), path
        assert needle in r.text and "Traceback" not in r.text, path


def test_results_since_takes_an_age_like_the_cli(client: TestClient) -> None:
    _fill(client)
    assert client.get("/api/results", params={"since": "30d"}).json()["total"] == 5
    assert "since" in error_of(client.get("/api/results", params={"since": "yesterday"}), 400)


def _engines(client: TestClient, worse: int = 4, n: int = 12) -> None:
    make_eval(client, threshold=0.6)
    activate(client)
    for i in range(n):
        for engine, output in (("v1", GOOD), ("v2", POOR if i < worse else GOOD)):
            body = {
                "input": f"question {i}",
                "output": output,
                "metadata": {"engine": engine, "n": i},
                "conversation_id": f"conv-{engine}",
            }
            assert client.post("/api/capture", json=body).status_code == 201


def test_compare_two_engines_by_metadata(client: TestClient) -> None:
    _engines(client)
    r = client.get("/api/compare", params={"a": "captures:engine=v1", "b": "captures:engine=v2"})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["verdict"] == "B worse" and report["worse"] is True
    (e,) = report["evals"]
    assert e["eval"] == "capital" and e["paired"] and e["pairs"] == 12
    assert (e["a"]["n"], e["b"]["n"], e["flips_to_fail"], e["flips_to_pass"]) == (12, 12, 4, 0)
    assert e["regressed_count"] == 4 and len(e["regressed"]) == 4
    assert {c["case"] for c in e["regressed"]} == {f"question {i}" for i in range(4)}
    assert "paris" in e["regressed"][0]["missing_terms"]
    assert e["score_ci"][1] < 0 and e["a"]["pass_rate"] == 1.0
    same = client.get(
        "/api/compare", params={"a": "captures:engine=v1", "b": "captures:engine=v2,n=2"}
    )
    assert same.json()["evals"][0]["verdict"] == "not enough data"
    # a metadata filter on results, and the export's metadata and reasoning columns
    page = client.get("/api/results", params={"meta": "engine:v2", "passed": "false"}).json()
    assert page["total"] == 4 and page["results"][0]["metadata"]["engine"] == "v2"
    text = client.get("/api/results/export", params={"meta": "engine=v2"}).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 12 and json.loads(rows[0]["metadata"])["engine"] == "v2"
    failed = [r for r in rows if r["pass"] == "false"]
    assert failed[0]["reasoning"].startswith(f"{float(failed[0]['score']):.2f} < 0.60: missing ")


def test_compare_errors(client: TestClient) -> None:
    _engines(client, n=3)
    q = {"a": "captures:engine=v1"}
    assert "run:ID" in error_of(client.get("/api/compare", params={**q, "b": "run:x"}), 400)
    assert "no run with id 9" in error_of(
        client.get("/api/compare", params={**q, "b": "run:9"}), 404
    )
    # the server reads no files named by a request
    err = error_of(client.get("/api/compare", params={**q, "b": "/etc/passwd"}), 400)
    assert "CLI" in err
    err = error_of(client.get("/api/compare", params={**q, "b": "captures:oops"}), 400)
    assert "KEY=VALUE" in err
    error_of(client.get("/api/compare", params=q), 422)
    error_of(client.get("/api/compare", params={**q, "b": "captures", "resamples": 5}), 422)
    err = error_of(client.get("/api/compare", params={**q, "b": "captures", "eval": "ghost"}), 404)
    assert "ghost" in err


def test_captures_with_metadata(client: TestClient) -> None:
    _engines(client, n=3)
    page = client.get("/api/captures", params={"meta": "engine:v2"}).json()
    assert page["total"] == 3 and all(c["metadata"]["engine"] == "v2" for c in page["captures"])
    assert page["captures"][0]["results"][0]["eval_name"] == "capital"
    both = client.get("/api/captures", params=[("meta", "engine:v2"), ("meta", "n=1")]).json()
    assert both["total"] == 1 and both["captures"][0]["input"] == "question 1"
    one = client.get(f"/api/captures/{both['captures'][0]['id']}").json()
    assert one["metadata"] == {"engine": "v2", "n": 1} and len(one["results"]) == 1
    assert "capture" in error_of(client.get("/api/captures/999"), 404)
    error_of(client.get("/api/captures/x"), 422)
    assert "KEY=VALUE" in error_of(client.get("/api/captures", params={"meta": "engine"}), 400)


def test_conversations(client: TestClient) -> None:
    _engines(client, n=3)
    page = client.get("/api/conversations").json()
    assert page["total"] == 2
    assert {c["id"]: (c["turns"], c["pass_rate"]) for c in page["conversations"]} == {
        "conv-v1": (3, 1.0),
        "conv-v2": (3, 0.0),
    }
    conv = client.get("/api/conversations/conv-v2").json()
    assert [t["input"] for t in conv["captures"]] == ["question 0", "question 1", "question 2"]
    assert conv["captures"][0]["results"][0]["passed"] is False
    assert "conversation" in error_of(client.get("/api/conversations/ghost"), 404)
    error_of(client.get("/api/conversations", params={"limit": 0}), 422)


def test_runs_listing_and_page(client: TestClient) -> None:
    service = client.app.state.service  # type: ignore[attr-defined]
    run_id = service.create_run("nightly", "data.jsonl")
    rows = [
        {"eval_name": "capital", "input": f"q{i}", "output": "o", "reference": REF,
         "score": s, "threshold": 0.5}
        for i, s in enumerate((0.9, 0.2, 0.7))
    ]  # fmt: skip
    service.add_run_results(run_id, rows)
    service.update_run_summary(run_id, {"status": "complete"})  # the run has finished
    page = client.get("/api/runs").json()
    assert page["total"] == 1
    (run,) = page["runs"]
    assert (run["name"], run["results"], run["passed"], run["status"]) == (
        "nightly",
        3,
        2,
        "complete",
    )
    assert abs(run["mean_score"] - 0.6) < 1e-9
    one = client.get(f"/api/runs/{run_id}").json()
    assert [w["score"] for w in one["worst"]] == [0.2, 0.7, 0.9]
    assert "run" in error_of(client.get("/api/runs/77"), 404)
    error_of(client.get("/api/runs/x"), 422)
    error_of(client.get("/api/runs", params={"limit": 0}), 422)


def test_backtest_and_rescore(client: TestClient) -> None:
    _engines(client, n=4, worse=2)
    client.patch("/api/settings", json={"auto_evaluate": False})
    client.post("/api/capture", json={"input": "late", "output": GOOD})
    client.patch("/api/settings", json={"auto_evaluate": True})
    make_eval(client, "strict", threshold=0.95)
    r = client.post("/api/evals/strict/backtest", json={"limit": 5})
    assert r.status_code == 200, r.text
    bt = r.json()
    assert (bt["n"], bt["version"], bt["status"], bt["threshold"]) == (5, 1, "draft", 0.95)
    assert sum(bt["histogram"]) == 5 and len(bt["worst"]) == 5
    assert bt["worst"][0]["score"] <= bt["worst"][-1]["score"]
    assert client.post("/api/evals/strict/backtest").json()["n"] == 9
    assert client.get("/api/results").json()["total"] == 8  # the backtest stored nothing
    error_of(client.post("/api/evals/strict/backtest", json={"limit": 0}), 422)
    assert "ghost" in error_of(client.post("/api/evals/ghost/backtest"), 404)
    # rescore: the capture stored while evaluation was off gets its result, once
    first = client.post("/api/rescore", json={"eval": "capital", "since": "1d"}).json()
    assert (first["added"], first["scanned"]) == (1, 9)
    assert client.post("/api/rescore", json={"eval": "capital", "since": "1d"}).json()["added"] == 0
    assert client.get("/api/results", params={"eval": "capital"}).json()["total"] == 9
    assert "since" in error_of(
        client.post("/api/rescore", json={"eval": "capital", "since": "x"}), 400
    )
    error_of(client.post("/api/rescore", json={"since": "1d"}), 422)
