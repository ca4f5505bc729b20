"""Details of the studio's pages: histograms, archived evals restored, long texts cut, unscored
captures, metadata, visible errors. Real SQLite files, the ASGI app in process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import plotly.graph_objects as go
import pytest
from fastapi.testclient import TestClient

from simeval.service import Service
from simeval.web import create_app
from simeval.web.charts import histogram_spec

REF = "Paris is the capital of France and its largest city."
GOOD = "The capital of France is Paris, which is also its largest city."


@pytest.fixture
def client(new_sqlite: Callable[..., str]) -> Iterator[TestClient]:
    app = create_app(db=new_sqlite("fix.db"))
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        yield c


def active(svc: Service, name: str = "capital", **kw: Any) -> None:
    svc.create_eval(name, REF, **kw)
    svc.test_eval(name, kw.get("input_scope") or "q", REF)
    svc.activate_eval(name)


def test_histogram_shows_scores_of_exactly_1() -> None:
    fig = go.Figure(histogram_spec([1.0, 1.0, 1.0, 1.0, 0.2], 0.8))  # plotly validates it
    fail, passed = fig.data
    assert sum(passed.y) == 4 and passed.y[-1] == 4 and sum(fail.y) == 1
    assert max(passed.x) < 1.0 <= fig.layout.xaxis.range[1]  # the last bar lies on the axis


def test_an_archived_eval_can_be_restored_in_the_studio(client: TestClient) -> None:
    svc: Service = client.app.state.service  # type: ignore[attr-defined]
    active(svc)
    svc.archive_eval("capital")
    page = client.get("/evals/capital").text
    assert 'id="restore"' in page and 'action="/evals/capital/deactivate"' in page


def test_long_outputs_are_cut_on_list_pages_and_the_result_page(client: TestClient) -> None:
    svc: Service = client.app.state.service  # type: ignore[attr-defined]
    active(svc)
    words = ("paris france seine capital city museum bridge " * 20_000)[:900_000]
    cap = svc.capture("q", words)
    page = client.get(f"/results/{cap.results[0].id}")
    assert page.status_code == 200 and len(page.content) < 200_000
    assert 'id="show-all"' in page.text and "900,000 characters" in page.text
    full = client.get(f"/results/{cap.results[0].id}?full=1")
    assert len(full.content) > 900_000 and 'id="show-all"' not in full.text
    for url in ("/dashboard", "/results", "/conversations"):
        assert len(client.get(url).content) < 100_000, url


def test_captures_stored_with_evaluation_off_say_not_scored(client: TestClient) -> None:
    svc: Service = client.app.state.service  # type: ignore[attr-defined]
    active(svc)
    svc.update_settings(auto_evaluate=False)
    cap = svc.capture("q", GOOD)
    assert "not scored (automatic evaluation was off)" in client.get("/dashboard").text
    assert "not scored" in client.get(f"/captures/{cap.id}").text
    # the eval page offers to score them, and rescoring stores them once
    svc.update_settings(auto_evaluate=True)
    assert 'id="rescore"' in client.get("/evals/capital").text
    assert svc.rescore("capital", since="1d")["added"] == 1
    assert 'id="rescore"' not in client.get("/evals/capital").text


def test_metadata_is_shown_on_result_and_capture_pages(client: TestClient) -> None:
    svc: Service = client.app.state.service  # type: ignore[attr-defined]
    active(svc)
    cap = svc.capture("q", GOOD, metadata={"engine": "v2"}, conversation_id="c1")
    assert "engine=v2" in client.get(f"/captures/{cap.id}").text
    result = client.get(f"/results/{cap.results[0].id}").text
    assert 'id="result-metadata"' in result and "v2" in result
    assert "engine=v2" in client.get("/results", params={"meta": "engine=v2"}).text
    assert "1 result match" in client.get("/results", params={"meta": "engine=v2"}).text
    assert "0 results match" in client.get("/results", params={"meta": "engine=v1"}).text


def test_studio_errors_are_visible(client: TestClient) -> None:
    r = client.get("/compare", params={"a": "run:x", "b": "captures"})
    assert r.status_code == 400 and 'id="compare-error"' in r.text and "run:ID" in r.text
    assert client.get("/runs/9").status_code == 404
    assert client.get("/conversations/ghost").status_code == 404
