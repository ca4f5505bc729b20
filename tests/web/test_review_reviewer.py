"""Reviews keep the reviewer: the API's optional ``reviewer`` (a 400 naming a bad one, a 422
for a non-string), and the studio's pages (the name asked once, kept in a cookie, stored with
a queue review and a one-click one; CSRF checked)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from simeval.web import create_app
from simeval.web.security import CSRF_FIELD

REF = "Paris is the capital of France and its largest city."


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as c:
        yield c


def _result(client: TestClient, output: str = "Bananas are yellow.") -> dict[str, Any]:
    if client.get("/api/evals/capital").status_code == 404:
        client.post("/api/evals", json={"name": "capital", "references": [REF], "threshold": 0.8})
        client.post("/api/evals/capital/test", json={"input": "q", "output": REF})
        assert client.post("/api/evals/capital/activate").status_code == 200
    got = client.post("/api/capture", json={"input": "q", "output": output})
    assert got.status_code == 201, got.text
    result: dict[str, Any] = got.json()["results"][0]
    return result


def _csrf(client: TestClient, path: str) -> dict[str, str]:
    """The CSRF field of the forms of page ``path`` (its cookie is now in the client)."""
    page = client.get(path)
    assert page.status_code == 200, page.text
    found = re.search(rf'name="{CSRF_FIELD}" value="([^"]+)"', page.text)
    assert found is not None, "no CSRF field on " + path
    return {CSRF_FIELD: found.group(1)}


def test_api_review_keeps_the_reviewer(client: TestClient) -> None:
    rid = _result(client)["id"]
    url = f"/api/results/{rid}/review"
    got = client.post(url, json={"score": 0.9, "note": "ok", "reviewer": " Grace "})
    assert got.status_code == 200, got.text
    assert got.json()["review"]["reviewer"] == "Grace"
    assert client.get(f"/api/results/{rid}").json()["review"]["reviewer"] == "Grace"
    # left out: none recorded (a new review replaces the old one, reviewer included)
    assert client.post(url, json={"score": 0.2}).json()["review"]["reviewer"] is None
    too_long = client.post(url, json={"score": 0.2, "reviewer": "x" * 201})
    assert too_long.status_code == 400 and "reviewer" in too_long.json()["error"]
    assert client.post(url, json={"score": 0.2, "reviewer": 7}).status_code == 422
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ReviewIn"]
    assert "reviewer" in schema["properties"] and schema["required"] == ["score"]


def test_studio_asks_the_name_once_and_stores_it_with_each_review(client: TestClient) -> None:
    first = _result(client)["id"]
    second = _result(client, "Trains run on rails.")["id"]
    page = client.get("/review")
    assert 'id="reviewer-name"' in page.text and 'id="review-item"' not in page.text
    csrf = _csrf(client, "/review")
    # refused without the CSRF token, refused blank
    assert client.post("/review/name", data={"reviewer": "Ada"}).status_code == 403
    blank = client.post("/review/name", data={**csrf, "reviewer": "  "})
    assert blank.status_code == 400 and "give your name" in blank.text
    saved = client.post(
        "/review/name", data={**csrf, "reviewer": "Ada Lovelace", "back": "/review"}
    )
    assert saved.status_code == 200 and 'id="review-item"' in saved.text  # redirected back
    assert "Ada Lovelace" in saved.text
    shown = re.search(r'data-result="([^"]+)"', saved.text)
    assert shown is not None and shown.group(1) in (first, second)
    done = client.post(f"/review/{shown.group(1)}", data={**csrf, "verdict": "fail"})
    assert done.status_code == 200 and "Reviewed as a fail." in done.text
    reviewed = client.get(f"/api/results/{shown.group(1)}").json()
    assert reviewed["review"]["reviewer"] == "Ada Lovelace" and reviewed["passed"] is False
    # a bad verdict is a message on the queue page, nothing stored
    other = second if shown.group(1) == first else first
    bad = client.post(f"/review/{other}", data={**csrf, "verdict": "maybe"})
    assert bad.status_code == 400 and "pass or fail" in bad.text
    assert client.get(f"/api/results/{other}").json()["review"] is None
    # one click from the results list, back to it
    click = client.post(
        f"/results/{other}/verdict",
        data={**csrf, "verdict": "pass", "back": "/results?reviewed=no"},
        follow_redirects=False,
    )
    assert click.status_code == 303 and click.headers["location"].startswith("/results?reviewed=no")
    one = client.get(f"/api/results/{other}").json()
    assert one["passed"] is True and one["review"]["reviewer"] == "Ada Lovelace"
    assert one["review"]["score"] == one["threshold"]
    # an outside address to go back to is not followed
    away = client.post(
        f"/results/{other}/verdict",
        data={**csrf, "verdict": "pass", "back": "//evil.example/x"},
        follow_redirects=False,
    )
    assert away.headers["location"].startswith(f"/results/{other}")
    # the eval page counts the reviews and offers calibrate on them
    ev = client.get("/evals/capital").text
    assert re.search(r'id="eval-review-count">2<', ev) and 'id="eval-calibrate"' in ev
    report = client.get("/review/calibrate?eval=capital")
    assert report.status_code == 200 and 'id="calibrate-suggested"' in report.text
    assert client.get("/review/calibrate?eval=nope").status_code == 404
