"""The studio's defects of issue 20 (items 1-3, 5-8, 10 and the studio's part of 11), each
reproduced on the real app in process (FastAPI TestClient) over a real SQLite file; the
visual ones (4, 9, the copy button of 10) are in test_studio_defects_browser.py."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from simeval.cli import cli
from simeval.service import Service
from simeval.web import create_app

REF = "Paris is the capital of France and its largest city."
GOOD = "The capital of France is Paris, which is also its largest city."
POOR = "Its largest city is Marseille."


@pytest.fixture
def db(new_sqlite: Callable[..., str]) -> str:
    return new_sqlite("defects.db")


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as c:
        yield c


def service(client: TestClient) -> Service:
    return client.app.state.service  # type: ignore[attr-defined]


def active(svc: Service, name: str = "capital", **kw: Any) -> None:
    svc.create_eval(name, REF, **kw)
    svc.test_eval(name, kw.get("input_scope") or "q", REF)
    svc.activate_eval(name)


def csrf(client: TestClient, path: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert match, path
    return match.group(1)


def stored_run(tmp_path: Path, db: str, outputs: list[str], name: str) -> int:
    rows = [{"id": f"c{i}", "output": o, "reference": REF} for i, o in enumerate(outputs)]
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(src), "--store", "--db", db, "--json"])
    assert res.exit_code in (0, 1), res.output
    return int(json.loads(res.output)["run_id"])


def section(html: str, start: str, end: str = "</table>") -> str:
    at = html.index(start)
    return html[at : html.index(end, at)]


# 1 ---------------------------------------------------------------------------------------------
@pytest.mark.process
def test_run_worst_cases_and_run_compare_show_missing_terms(
    client: TestClient, db: str, tmp_path: Path
) -> None:
    a = stored_run(tmp_path, db, [REF, REF, GOOD], "before")
    b = stored_run(tmp_path, db, [REF, "Bananas are yellow.", GOOD], "after")
    worst = section(client.get(f"/runs/{b}").text, 'id="worst-table"')
    assert 'class="chip miss"' in worst and "capital" in worst
    page = client.get("/compare", params={"a": f"run:{a}", "b": f"run:{b}"})
    assert page.status_code == 200
    regressed = section(page.text, "Regressed cases")
    assert 'class="chip miss">capital<' in regressed or 'class="chip miss">paris<' in regressed
    heading = re.findall(r'<div class="card-head"><h2>(.*?)</h2>', page.text)
    assert heading and all("(no eval)" not in h for h in heading), heading


# 2 ---------------------------------------------------------------------------------------------
def test_health_distribution_colours_each_result_by_its_own_threshold(
    client: TestClient,
) -> None:
    svc = service(client)
    active(svc, threshold=0.5)
    for output in (REF, GOOD, "The capital is Paris.", "Paris is a city.", POOR):
        svc.capture("q", output)
    svc.edit_eval("capital", threshold=0.95)
    svc.test_eval("capital", "q", REF)
    svc.activate_eval("capital")
    svc.capture("q", GOOD)  # 0.97: passes the new threshold too
    html = client.get("/dashboard?eval=capital").text
    data = re.search(r'<script type="application/json" id="hist-data">(.*?)</script>', html, re.S)
    assert data is not None
    fig = json.loads(data.group(1))
    by_name = {t["name"]: sum(t["y"]) for t in fig["data"]}
    passed = svc.count_results(eval_name="capital", passed=True)
    assert passed == 6
    assert by_name == {"pass": passed, "fail": 0}


# 3 ---------------------------------------------------------------------------------------------
def test_rescore_button_counts_only_captures_in_the_evals_scope(client: TestClient) -> None:
    svc = service(client)
    active(svc, input_scope="Capital of France?")
    for n in range(4):
        svc.capture(f"another question {n}", GOOD)  # outside the scope: never this eval's
    assert 'id="rescore"' not in client.get("/evals/capital").text
    svc.update_settings(auto_evaluate=False)
    svc.capture("Capital of France?", GOOD)
    svc.capture("  capital of france?", REF)
    svc.update_settings(auto_evaluate=True)
    page = client.get("/evals/capital").text
    button = re.search(r'id="rescore">Score (\d+) unscored', page)
    assert button is not None and button.group(1) == "2"
    assert svc.count_unscored("capital", since="7d") == 2
    assert svc.rescore("capital", since="7d").added == 2
    assert 'id="rescore"' not in client.get("/evals/capital").text


# 5 ---------------------------------------------------------------------------------------------
def test_backtest_borderline_is_distinct_cases_from_both_sides(client: TestClient) -> None:
    svc = service(client)
    active(svc)
    for _ in range(6):
        svc.capture("q", REF)  # six identical captures scoring 1.000
    svc.capture("q", POOR)  # 0.66
    svc.capture("q", "I am not sure, maybe Lyon.")  # 0.0
    border = svc.backtest_eval("capital").borderline
    texts = [(c.input, c.output) for c in border]
    assert len(texts) == len(set(texts)) == 3, texts
    assert {c.passed for c in border} == {True, False}
    assert border[0].output == POOR  # the closest to the threshold first


# 6 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "query",
    [{"since": "yesterday-ish"}, {"meta": "novalue"}, {"until": "2026-13-45"}],
    ids=["since", "meta", "until"],
)
def test_a_bad_results_filter_is_shown_on_the_results_page(
    client: TestClient, query: dict[str, str]
) -> None:
    r = client.get("/results", params=query)
    assert 400 <= r.status_code < 500
    assert 'id="results-error"' in r.text and 'id="meta-filter"' in r.text
    assert "Bad request" not in r.text
    value = next(iter(query.values()))
    assert f'value="{value}"' in r.text  # the filters as typed, to correct


# 7 ---------------------------------------------------------------------------------------------
def test_a_failed_test_is_not_announced_in_green_and_weights_have_a_legend(
    client: TestClient,
) -> None:
    service(client).create_eval("capital", REF)
    token = csrf(client, "/evals/capital")
    failed = client.post(
        "/evals/capital/test", data={"csrf_token": token, "input": "q", "output": POOR}
    )
    assert failed.status_code == 200 and 'id="test-verdict"' in failed.text
    assert '<div class="flash ok" role="status">' not in failed.text
    assert re.search(r'class="flash err"[^>]*>Test recorded: it failed', failed.text)
    passed = client.post(
        "/evals/capital/test", data={"csrf_token": token, "input": "q", "output": GOOD}
    )
    assert '<div class="flash ok" role="status">Test recorded: it passed' in passed.text
    legend = re.search(r'<p[^>]*id="weights-legend"[^>]*>(.*?)</p>', passed.text, re.S)
    assert legend is not None and "share of the cosine" in legend.group(1)


# 8 ---------------------------------------------------------------------------------------------
def test_capture_breadcrumb_follows_the_nav_and_reviews_are_marked(client: TestClient) -> None:
    svc = service(client)
    active(svc)
    cap = svc.capture("q", GOOD)
    svc.review_result(cap.results[0].id, 0.2, "wrong city")
    html = client.get(f"/captures/{cap.id}").text
    crumbs = re.search(r'<p class="crumbs">(.*?)</p>', html, re.S)
    assert crumbs is not None and '<a href="/conversations">Conversations</a>' in crumbs.group(1)
    assert "Dashboard" not in crumbs.group(1)
    assert re.search(r'class="nav on" href="/conversations"', html)
    for page in (f"/captures/{cap.id}", "/dashboard"):
        badge = re.search(
            r'<a class="badge [^"]*" href="/results/[^"]+"[^>]*>(.*?)</a>', client.get(page).text
        )
        assert badge is not None, page
        assert "0.200" in badge.group(1) and "reviewed" in badge.group(1), badge.group(1)


# 10 --------------------------------------------------------------------------------------------
def test_settings_snippets_are_copyable_code_blocks_and_v1_needs_an_upstream(
    client: TestClient,
) -> None:
    html = client.get("/settings").text
    blocks = re.findall(r'<pre class="snippet copyable"[^>]*><code id="(snippet-[a-z]+)"', html)
    assert set(blocks) >= {"snippet-otlp", "snippet-client"}
    # no upstream: the /v1 snippet is not offered as if it worked; what to do instead is said
    assert 'id="snippet-openai"' not in html
    assert 'id="openai-needs-upstream"' in html and "--upstream" in html and "404" in html
    js = client.get("/static/studio.js")
    assert js.status_code == 200 and "data-copy" in js.text and "clipboard" in js.text


def test_settings_openai_snippet_is_shown_with_an_upstream(new_sqlite: Callable[..., str]) -> None:
    app = create_app(db=new_sqlite("up.db"), upstream="http://127.0.0.1:9/v1")
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        html = c.get("/settings").text
    assert re.search(r'<pre class="snippet copyable"[^>]*><code id="snippet-openai"', html)
    assert 'base_url="http://127.0.0.1:8000/v1"' in html


# 11 (the studio's part) -------------------------------------------------------------------------
def test_studio_tester_asks_for_the_input_of_a_scoped_eval(client: TestClient) -> None:
    svc = service(client)
    svc.create_eval("capital", REF, input_scope="Capital of France?")
    token = csrf(client, "/evals/capital")
    r = client.post("/evals/capital/test", data={"csrf_token": token, "input": " ", "output": GOOD})
    assert r.status_code == 400
    error = re.search(r'id="test-error">(.*?)</div>', r.text, re.S)
    assert error is not None and "Capital of France?" in error.group(1)
    assert svc.get_eval("capital").last_test is None  # nothing recorded
