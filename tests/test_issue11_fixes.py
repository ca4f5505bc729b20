"""The bugs of issue 11, each with a test: real SQLite files, the ASGI app in process, the CLI
through its runner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from simeval.cli import cli
from simeval.service import Service
from simeval.web import create_app
from simeval.web.charts import histogram_figure

REF = "Paris is the capital of France and its largest city."
GOOD = "The capital of France is Paris, which is also its largest city."


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(db=str(tmp_path / "fix.db"))
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        yield c


def active(svc: Service, name: str = "capital", **kw: Any) -> None:
    svc.create_eval(name, REF, **kw)
    svc.test_eval(name, kw.get("input_scope") or "q", REF)
    svc.activate_eval(name)


def test_histogram_shows_scores_of_exactly_1() -> None:
    fig = histogram_figure([1.0, 1.0, 1.0, 1.0, 0.2], 0.8)
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


def test_cli_tables_keep_long_names_when_piped(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "cli.db")]
    name = "refund-policy-for-enterprise-customers-in-europe"
    made = CliRunner().invoke(cli, ["evals", "create", name, "-r", REF, *db])
    assert made.exit_code == 0
    # the hint to run next is one line: it can be copied as it is
    assert f"next: simeval evals test {name} OUTPUT" in made.output.replace("\n", " ")
    assert f"next: simeval evals test {name} OUTPUT\n" in made.output
    listed = CliRunner().invoke(cli, ["evals", "list", *db])
    assert name in listed.output and "…" not in listed.output


def test_evals_test_asks_for_the_input_of_a_scoped_eval(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "cli.db")]
    CliRunner().invoke(cli, ["evals", "create", "cap", "-r", REF, "--scope", "Capital?", *db])
    res = CliRunner().invoke(cli, ["evals", "test", "cap", GOOD, *db])
    assert res.exit_code == 2 and "give the sample input with -i" in res.output
    ok = CliRunner().invoke(cli, ["evals", "test", "cap", GOOD, "-i", "Capital?", *db])
    assert ok.exit_code == 0 and "outside" not in ok.output


def test_calibrate_warns_on_a_small_sample(tmp_path: Path) -> None:
    data = tmp_path / "labels.jsonl"
    rows = [
        {"output": GOOD if i % 2 else "Bananas are yellow.", "reference": REF, "label": i % 2}
        for i in range(10)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = CliRunner().invoke(cli, ["calibrate", str(data), "--label-col", "label"])
    assert res.exit_code == 0, res.output
    assert "warning: only 10 labelled examples" in res.output


def test_run_with_a_missing_output_column_lists_the_columns(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "text": "t", "reference": "r"}\n', encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(data), "--output-col", "answer"])
    assert res.exit_code == 2
    assert "missing column 'answer' (columns: question, text, reference)" in res.output
