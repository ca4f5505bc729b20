"""A pass means a right answer (issue 29) through the HTTP API and the studio's tester: the
veto and the answer's coverage are named wherever a result is explained."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from simeval.web import create_app

REF = "The capital of France is Paris."
QUESTION = "What is the capital of France?"


@pytest.fixture
def client(new_sqlite: Callable[..., str]) -> Iterator[TestClient]:
    with TestClient(create_app(db=new_sqlite("answers.db")), base_url="http://127.0.0.1:8000") as c:
        yield c


def make_eval(client: TestClient, name: str, reference: str) -> None:
    r = client.post("/api/evals", json={"name": name, "references": [reference], "threshold": 0.8})
    assert r.status_code == 201, r.text


def test_the_api_tester_names_the_veto_and_the_coverage(client: TestClient) -> None:
    make_eval(client, "capital", REF)
    r = client.post(
        "/api/evals/capital/test",
        json={"input": QUESTION, "output": "The capital of France is not Paris."},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["passed"] is False and body["score"] < 0.7
    assert body["explanation"]["veto"] == 'contradiction: "not" only in the output'
    make_eval(client, "paris", "Paris")
    long = "The capital of France is Paris, a city on the Seine known for the Eiffel Tower."
    r = client.post("/api/evals/paris/test", json={"input": QUESTION, "output": long})
    assert r.json()["passed"] is True
    assert r.json()["explanation"]["coverage"] == 1.0 and r.json()["explanation"]["veto"] is None


def test_a_capture_is_judged_as_its_test_is(client: TestClient) -> None:
    make_eval(client, "paris", "Paris")
    long = "The capital of France is Paris, a city on the Seine known for the Eiffel Tower."
    r = client.post("/api/evals/paris/test", json={"input": QUESTION, "output": long})
    assert client.post("/api/evals/paris/activate").status_code == 200, r.text
    got = client.post("/api/capture", json={"input": QUESTION, "output": long}).json()
    (result,) = got["results"]
    assert result["passed"] is True and result["score"] == r.json()["score"]
    wrong = client.post("/api/capture", json={"input": QUESTION, "output": "It is Lyon."}).json()
    assert wrong["results"][0]["passed"] is False


def test_the_studio_tester_shows_the_veto(client: TestClient) -> None:
    make_eval(client, "capital", REF)
    page = client.get("/evals/capital").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token is not None
    r = client.post(
        "/evals/capital/test",
        data={
            "csrf_token": token.group(1),
            "input": "",
            "output": "The capital of France is Lyon.",
        },
    )
    assert r.status_code == 200
    veto = re.search(r'<p class="reason" id="veto"[^>]*>(.*?)</p>', r.text, re.S)
    assert veto is not None and veto.group(1) == "Vetoed: name: lyon vs paris"
