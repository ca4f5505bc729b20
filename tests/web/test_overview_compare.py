"""The dashboard's overview (every active eval, worst first) and Compare's side pickers: the
pages through the in-process app, then in real headless Chromium at 1280 and 420 px."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from browser import CHROMIUM_ARGS, need_browser, shot
from simeval.service import Service
from simeval.web import create_app
from simeval.web.server_process import running_server

REF = "Paris is the capital of France and its largest city."
GOOD = "The capital of France is Paris, which is also its largest city."
POOR = "The weather in Spain is usually sunny in summer."
FALLING = "eval-07"


def build(svc: Service, evals: int = 25, per_window: int = 20) -> None:
    """``evals`` active evals, each scoring its own question; each fails the same share of
    its answers in the window before and the last 24 hours (engine v1, then v2), except
    ``FALLING``, which passed everything before and fails most now."""
    for k in range(evals):
        name, question = f"eval-{k:02d}", f"question {k}"
        svc.create_eval(name, REF, threshold=0.6, input_scope=question)
        svc.test_eval(name, question, REF)
        svc.activate_eval(name)
    now = datetime.now(UTC)
    items = []
    for k in range(evals):
        question = f"question {k}"
        for i in range(per_window):
            # an hour apart: the sparkline has a point per slot of 2 hours
            before = now - timedelta(hours=47) + timedelta(minutes=60 * i)
            after = now - timedelta(hours=23) + timedelta(minutes=60 * i)
            # the same share fails either side, not the same cases: some improve, some regress
            fails_before = i < k % 4
            fails_after = (per_window - 1 - i) < k % 4
            if f"eval-{k:02d}" == FALLING:
                fails_before, fails_after = False, i >= 6
            for at, fails, engine in ((before, fails_before, "v1"), (after, fails_after, "v2")):
                meta = {"engine": engine, "case_id": f"{k}-{i}"}
                items.append((question, POOR if fails else GOOD, None, meta, at))
    for start in range(0, len(items), 100):
        svc.capture_checked(items[start : start + 100])


@pytest.fixture
def client(new_sqlite: Callable[..., str]) -> Iterator[TestClient]:
    app = create_app(db=new_sqlite("overview.db"))
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        yield c


def _order(html: str) -> list[str]:
    table = html[html.index('id="overview-table"') :]
    table = table[: table.index("</table>")]
    return re.findall(r'<tr data-eval="([^"]+)"', table)


def test_overview_lists_every_active_eval_worst_first(client: TestClient) -> None:
    svc: Service = client.app.state.service  # type: ignore[attr-defined]
    build(svc, evals=6, per_window=12)
    svc.create_eval("a-draft", REF)  # drafts are not in the overview
    page = client.get("/dashboard")
    assert page.status_code == 200
    order = _order(page.text)
    assert len(order) == 6 and "a-draft" not in order
    # nothing dropped: the lowest pass rate first (eval-03 fails 3 of 12), ties by name
    assert order[:3] == ["eval-03", "eval-02", "eval-01"]
    by_rate = _order(client.get("/dashboard?sort=pass_rate").text)
    rows = {r.eval_name: r for r in svc.overview().evals}
    assert [rows[n].pass_rate for n in by_rate] == sorted(r.pass_rate for r in rows.values())
    # the sorted column's link turns the order round; the window is kept in the links
    week = client.get("/dashboard?window=7d&sort=pass_rate").text
    assert 'href="/dashboard?window=7d&amp;sort=-pass_rate#overview"' in week
    assert "Every active eval, last 7d" in week and week.count('class="sparkline"') == 6
    # the overview and the health section below keep each other's choices
    both = client.get("/dashboard?eval=eval-02&window=7d&sort=name").text
    assert '<input type="hidden" name="eval" value="eval-02">' in both
    assert '<input type="hidden" name="window" value="7d">' in both
    assert "sort=-name&amp;eval=eval-02#overview" in both and "Health: " in both
    bad = client.get("/dashboard?sort=loudest&window=1y")
    assert bad.status_code == 200 and 'id="overview-error"' in bad.text
    assert "window must be one of 24h, 7d, 30d" in bad.text


def test_overview_marks_the_drop_with_its_interval(client: TestClient) -> None:
    svc: Service = client.app.state.service  # type: ignore[attr-defined]
    build(svc, evals=8, per_window=12)
    html = client.get("/dashboard").text
    assert _order(html)[0] == FALLING
    row = html[html.index(f'<tr data-eval="{FALLING}"') :]
    row = row[: row.index("</tr>")]
    assert 'data-trend="dropped"' in row and "-50.0 pts" in row and "badge fail" in row
    lo, hi = (float(x) for x in re.findall(r"\[([-+0-9.]+), ([-+0-9.]+)\]", row)[0])
    assert lo < -50.0 < hi < 0


def test_overview_counts_open_alerts(client: TestClient) -> None:
    svc: Service = client.app.state.service  # type: ignore[attr-defined]
    build(svc, evals=8, per_window=12)
    svc.alerts.set_alert_rules(
        [{"name": "low", "eval": "*", "when": "pass_rate < 0.72", "window": 20}]
    )
    svc.alerts.evaluate_alerts()
    assert [a.eval_name for a in svc.alerts.open_alerts()] == [FALLING]
    html = client.get("/dashboard").text
    assert '<th class="num">Open alerts</th>' in html
    row = html[html.index(f'<tr data-eval="{FALLING}"') :]
    assert '<td class="num"><span class="badge fail">1</span></td>' in row[: row.index("</tr>")]
    assert html.count('<td class="num">0</td>') == 7


def test_overview_api(client: TestClient) -> None:
    svc: Service = client.app.state.service  # type: ignore[attr-defined]
    build(svc, evals=8, per_window=12)
    r = client.get("/api/overview", params={"window": "7d", "sort": "-results"})
    assert r.status_code == 200
    body = r.json()
    assert body["window"] == "7d" and body["sort"] == "-results" and len(body["evals"]) == 8
    assert all(len(e["sparkline"]) == 14 for e in body["evals"])
    worst = client.get("/api/overview").json()["evals"][0]
    assert worst["eval_name"] == FALLING and worst["trend"] == "dropped"
    assert worst["open_alerts"] == 0 and worst["change_ci"][1] < 0
    for params in ({"window": "1y"}, {"sort": "loudest"}):
        bad = client.get("/api/overview", params=params)
        assert 400 <= bad.status_code < 500 and "error" in bad.json(), params


def test_compare_pickers_make_the_side_specs(client: TestClient) -> None:
    svc: Service = client.app.state.service  # type: ignore[attr-defined]
    build(svc, evals=8, per_window=12)
    page = client.get("/compare").text
    assert '<option value="engine=v1"' in page and '<option value="engine=v2"' in page
    assert "case_id=" not in page  # case ids name cases, not sides
    picked = client.get(
        "/compare",
        params={
            "a_kind": "captures",
            "a_meta": "engine=v1",
            "b_kind": "captures",
            "b_since": "24h",
            "eval": FALLING,
        },
    )
    assert picked.status_code == 200, picked.text
    html = picked.text
    assert "A = captures:engine=v1 · B = captures:since=24h" in html
    assert 'id="overall-verdict">B worse' in html
    assert html.count('class="threshold-line" style="left: 60.0%"') == 2
    assert '<option value="engine=v1" selected>' in html  # the pickers show the sides
    assert '<option value="24h" selected>' in html
    # another eval both improves and regresses: both lists
    both = client.get(
        "/compare",
        params={
            "a_kind": "captures",
            "a_meta": "engine=v1",
            "b_kind": "captures",
            "b_meta": "engine=v2",
            "eval": "eval-03",
        },
    ).text
    assert both.count('class="regressed-case"') == 3 and both.count('class="improved-case"') == 3
    assert "fail→pass" in both and "pass→fail" in both
    # B − A is that of the paired subset, and the page says how cases pair
    assert "the paired subset: the 12 cases on both sides" in both
    assert "cases paired by case id (else input) plus occurrence" in both
    api = client.get(
        "/api/compare",
        params={"a": "captures:engine=v1", "b": "captures:engine=v2", "eval": "eval-03"},
    ).json()
    assert "plus occurrence" in api["pairing"] and api["evals"][0]["repeated_pairs"] == 0
    assert api["evals"][0]["pairs"] == 12
    for params, message in (
        ({"a_kind": "run", "b_kind": "captures"}, "side A: pick a stored run"),
        ({"a_kind": "captures", "b_kind": "captures", "b_until": "3y"}, "side B: until must be"),
        ({"a_kind": "rows", "b_kind": "captures"}, "side A: pick a stored run or captured"),
    ):
        bad = client.get("/compare", params=params)
        assert bad.status_code == 400 and message in bad.text, params
        assert 'id="compare-error"' in bad.text


def test_metadata_values_are_bounded_and_fit_side_specs(tmp_path: Path) -> None:
    svc = Service(tmp_path / "meta.db")
    svc.create_eval("e", REF)
    metas = [
        {"engine": "v1", "region": "eu,west", "since": "x", "case_id": "1", "n": 2, "ok": True},
        {"engine": "v2", "deep": {"a": 1}, "long": "x" * 300},
        {"engine": "v3"},
    ]
    for meta in metas:
        svc.capture("q", GOOD, metadata=meta)
    seen = svc.metadata_values()
    assert seen == {"engine": ["v1", "v2", "v3"], "n": ["2"], "ok": ["true"]}
    assert svc.metadata_values(recent=1) == {"engine": ["v3"]}  # the newest capture only
    # the commonest values; among equals, the most recently seen
    assert svc.metadata_values(values=2)["engine"] == ["v2", "v3"]
    svc.capture("q", GOOD, metadata={"engine": "v1"})
    assert svc.metadata_values(values=1)["engine"] == ["v1"]


@pytest.mark.browser
def test_overview_and_compare_pickers_in_chromium(new_sqlite: Callable[..., str]) -> None:
    """25 evals, one dropping: the overview lists it first, with its interval; the eval's
    link opens its health below; Compare through the pickers shows B worse, the threshold
    line and both case lists; at 1280 and 420 px without horizontal scrolling."""
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    db = Path(new_sqlite("overview.db"))
    build(Service(db))
    with running_server(db) as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.goto(base + "/dashboard")
        rows = page.locator("#overview-table tbody tr")
        expect(rows).to_have_count(25)
        expect(rows.first).to_have_attribute("data-eval", FALLING)
        expect(rows.first.locator("[data-change]")).to_contain_text("dropped")
        expect(rows.first.locator("svg.sparkline polyline")).to_have_count(1)
        assert page.locator('#overview-table tr[data-trend="dropped"]').count() == 1
        shot(page, "20-overview-1280.png")
        # sort by name through the header link, then back to worst first
        page.click('#overview-table th a[data-sort="name"]')
        expect(rows.first).to_have_attribute("data-eval", "eval-00")
        page.click('a[data-sort="worst"]')
        expect(rows.first).to_have_attribute("data-eval", FALLING)
        # the window selector submits itself
        page.select_option("#overview-window", "7d")
        expect(page.locator("#overview h2")).to_have_text("Every active eval, last 7d")
        page.click(f'#overview-table a[title="{FALLING}"]')
        expect(page.locator("#health h2")).to_contain_text(FALLING)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280

        # Compare through the pickers: A = engine v1, B = the last 24 hours
        page.goto(base + "/compare")
        page.check('#pick-a input[value="captures"]')
        page.select_option("#a-meta", "engine=v1")
        page.select_option("#b-since", "24h")
        page.select_option("#pick-eval", FALLING)
        page.click("#compare-pick-go")
        expect(page.locator("#overall-verdict")).to_have_text("B worse")
        expect(page.locator(".compare-eval .threshold-line")).to_have_count(2)
        expect(page.locator(".regressed-case")).to_have_count(14)  # failing from case 6 on
        expect(page.locator("#a-meta")).to_have_value("engine=v1")
        shot(page, "21-compare-pickers-1280.png")
        page.select_option("#pick-eval", "eval-03")
        page.select_option("#b-meta", "engine=v2")
        page.select_option("#b-since", "")
        page.click("#compare-pick-go")
        expect(page.locator(".improved-case")).to_have_count(3)
        expect(page.locator(".regressed-case")).to_have_count(3)

        phone = browser.new_context(viewport={"width": 420, "height": 800}).new_page()
        phone.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        phone.goto(base + "/dashboard")
        expect(phone.locator("#overview-table tbody tr").first).to_have_attribute(
            "data-eval", FALLING
        )
        # the table scrolls inside its card; the page itself does not
        assert phone.evaluate("document.documentElement.scrollWidth") <= 420
        shot(phone, "22-overview-420.png")
        phone.goto(page.url)
        expect(phone.locator(".improved-case")).to_have_count(3)
        assert phone.evaluate("document.documentElement.scrollWidth") <= 420
        shot(phone, "23-compare-pickers-420.png")
        browser.close()
        assert not problems, problems
