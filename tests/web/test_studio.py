"""Eval Studio end to end: a real ``simeval serve`` process, real headless Chromium.

The browser is Debian's ``chromium`` driven by Python Playwright (``executable_path``; no
Playwright browser download). Without it the test is skipped locally and fails under
``CI=true``. Screenshots go to ``test-artifacts/``. Every request the page makes to anything
but the studio server is blocked and recorded: the studio must work with no internet.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import browser
from browser import CHROMIUM_ARGS, need_browser, no_horizontal_scroll, shot
from simeval.web.server_process import running_server

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
REF = "Paris is the capital of France and its largest city."
POOR = "The weather in Spain is usually sunny in summer."
GOOD = "The capital of France is Paris, which is also its largest city."
CAPTURES = [
    ("What is the capital of France?", "Paris is the capital of France and its largest city."),
    ("Capital of France?", "France's capital is Paris, also the largest city."),
    ("Where is the French government?", "It sits in Paris, the capital of France."),
    ("Capital of France?", "I am not sure, maybe Lyon."),
    ("Capital of France?", "The capital of France is Paris."),
    ("Capital of France?", "Bananas are yellow."),
]


@pytest.mark.browser
def test_seed_flow_in_a_real_browser(tmp_path: Path) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    with running_server(tmp_path / "studio.db") as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(
            viewport={"width": 1360, "height": 900}, accept_downloads=True
        )
        page = context.new_page()
        problems: list[str] = []
        outside: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on(
            "console",
            lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None,
        )

        def only_local(route: Any) -> None:
            if route.request.url.startswith(base):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        context.route("**/*", only_local)

        # 1. The empty studio, then + New -> the Similarity type card.
        page.goto(base + "/")
        expect(page.get_by_text("No evals yet")).to_be_visible()
        shot(page, "01-empty-studio.png")
        page.click("#new-eval")
        expect(page.locator("#type-similarity")).to_be_visible()
        page.click("#type-similarity")

        # 2. Name, reference answer, threshold (the band follows the slider).
        page.fill("#name", "capital-answer")
        page.fill("textarea[name=references]", REF)
        page.fill("#threshold", "0.93")
        expect(page.locator("[data-band]")).to_have_text("Very strict")
        page.fill("#threshold", "0.80")  # the slider follows the number as typed
        expect(page.locator("[data-band]")).to_have_text("Strict")
        assert page.input_value("#threshold-range") == "0.8"
        page.locator("#threshold").blur()
        assert page.input_value("#threshold") == "0.80"  # never rewritten
        expect(page.locator("[data-band]")).to_have_text("Strict")
        shot(page, "02-new-eval-form.png")
        page.click("#create")
        expect(page.locator("#eval-status")).to_have_text("draft")

        # 3. Run Test with a poor output: fail, missing terms shown, Activate disabled.
        page.fill("#test-input", "What is the capital of France?")
        page.fill("#test-output", POOR)
        page.click("#run-test")
        expect(page.locator("#test-verdict")).to_contain_text("Fail")
        missing = page.locator("#missing-terms .chip.miss")
        assert missing.count() >= 3
        assert page.locator("[data-reference] mark.miss").count() >= 3
        expect(page.locator("#activate")).to_be_disabled()
        shot(page, "03-test-failed.png")

        # 4. Run Test with a good output: pass, then Activate.
        page.fill("#test-output", GOOD)
        page.click("#run-test")
        expect(page.locator("#test-verdict")).to_contain_text("Pass")
        assert page.locator("[data-output] mark.hit").count() >= 4
        expect(page.locator("#activate")).to_be_enabled()
        shot(page, "04-test-passed.png")
        page.click("#activate")
        expect(page.locator("#eval-status")).to_have_text("active")

        # 5. An engine posts captures to the API.
        with httpx.Client(base_url=base) as api:
            for prompt, output in CAPTURES:
                r = api.post(
                    "/api/capture",
                    json={"input": prompt, "output": output, "conversation_id": "e2e"},
                )
                assert r.status_code == 201, r.text
                assert len(r.json()["results"]) == 1
            stored = api.get("/api/results").json()
        assert stored["total"] == len(CAPTURES)
        failing = [r for r in stored["results"] if not r["passed"]]
        assert failing, "some captures fail the eval"

        # 6. The dashboard lists them and the trend chart renders.
        page.goto(base + "/dashboard")
        expect(page.locator("#captures-table tbody tr")).to_have_count(len(CAPTURES))
        expect(page.locator("#trend-chart")).to_have_attribute("data-rendered", "true")
        expect(page.locator("#hist-chart")).to_have_attribute("data-rendered", "true")
        assert page.locator("#trend-chart .main-svg").count() >= 1
        # mean score, pass rate and the threshold line
        assert page.locator("#trend-chart .scatterlayer .trace").count() == 3
        expect(page.locator("#trend-chart .legend")).to_contain_text("threshold 0.80")
        shot(page, "05-dashboard.png")

        # 7. A review turns a failing result into a pass.
        target = failing[0]
        page.click(f'#captures-table a.badge.fail[href="/results/{target["id"]}"]')
        expect(page.locator("#result-verdict")).to_contain_text("Fail")
        page.fill("#review-score", "0.95")
        page.fill("#review-note", "acceptable answer")
        page.click("#save-review")
        expect(page.locator("#result-verdict")).to_contain_text("Pass")
        shot(page, "06-result-reviewed.png")
        with httpx.Client(base_url=base) as api:
            after = api.get(f"/api/results/{target['id']}").json()
        assert after["passed"] is True and after["automated_passed"] is False
        assert after["review"]["note"] == "acceptable answer"

        # 8. Export downloads a CSV with every result.
        page.goto(base + "/results")
        with page.expect_download() as info:
            page.click("#export-csv")
        download = info.value
        assert download.suggested_filename.endswith(".csv")
        saved = ARTIFACTS / "export.csv"
        download.save_as(str(saved))
        rows = list(csv.DictReader(io.StringIO(saved.read_text(encoding="utf-8"))))
        assert len(rows) == len(CAPTURES)
        assert {"score", "pass", "human_override_score"} <= set(rows[0])
        reviewed = next(row for row in rows if row["result_id"] == str(target["id"]))
        assert reviewed["pass"] == "true" and reviewed["automated_pass"] == "false"
        assert float(reviewed["human_override_score"]) == 0.95

        # The eval page after activation, for the README and docs/getting-started.md.
        page.goto(base + "/evals/capital-answer")
        shot(page, "07-eval-active.png")
        browser.close()

    assert outside == [], f"the studio tried to reach the internet: {outside}"
    assert problems == [], problems


GOOD_ANSWERS = [
    "The capital of France is Paris, which is also its largest city.",
    "Paris is the capital of France and its largest city.",
    "France's capital is Paris, the largest city of France.",
]
NEW_PAGES = ["/compare", "/conversations", "/runs", "/", "/results", "/settings", "/evals/new"]


@pytest.mark.browser
def test_compare_conversations_runs_backtest_and_live_edit(new_sqlite: Callable[..., str]) -> None:
    """Two engines' captures with metadata → Compare shows B worse with its regressed cases →
    a conversation's turns in order → a stored run and run-vs-run compare → Backtest of a
    draft → an active eval edited keeps scoring until the new version is activated; every new
    page at 420 px wide without horizontal scrolling."""
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    from simeval.service import Service

    db = Path(new_sqlite("studio2.db"))
    with (
        running_server(db) as (base, _),
        sync_playwright() as pw,
        httpx.Client(base_url=base) as api,
    ):
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        page = context.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

        # An active eval, then two engines' captures: v2 is worse on 4 of 12 questions.
        assert (
            api.post(
                "/api/evals", json={"name": "capital", "references": [REF], "threshold": 0.6}
            ).status_code
            == 201
        )
        api.post("/api/evals/capital/test", json={"input": "q", "output": GOOD})
        assert api.post("/api/evals/capital/activate").status_code == 200
        for i in range(12):
            good = GOOD_ANSWERS[i % 3]
            for engine, output in (("v1", good), ("v2", POOR if i < 4 else good)):
                body = {
                    "input": f"Question {i}: what is the capital of France?",
                    "output": output,
                    "metadata": {"engine": engine},
                    "conversation_id": f"chat-{engine}",
                }
                assert api.post("/api/capture", json=body).status_code == 201

        # 1. Compare: B worse, with the four regressed cases and their missing terms.
        page.goto(base + "/compare")
        page.fill("#side-a", "captures:engine=v1")
        page.fill("#side-b", "captures:engine=v2")
        page.click("#compare-go")
        expect(page.locator("#overall-verdict")).to_have_text("B worse")
        rows = page.locator(".regressed-case")
        expect(rows).to_have_count(4)
        expect(rows.first).to_contain_text("pass→fail")
        assert rows.first.locator(".chip.miss").count() >= 2
        expect(page.locator(".compare-eval .bars.b .bar")).to_have_count(10)
        shot(page, "08-compare-engines.png")
        # a bad side is a visible one-line message
        page.goto(base + "/compare?a=run:x&b=captures")
        expect(page.locator("#compare-error")).to_contain_text("run:ID")

        # 2. A conversation's turns, in order, each with its verdict.
        page.goto(base + "/conversations")
        expect(page.locator("#conversations-table tbody tr")).to_have_count(2)
        page.click("text=chat-v2")
        turns = page.locator(".turn")
        expect(turns).to_have_count(12)
        expect(turns.nth(0)).to_contain_text("Question 0:")
        expect(turns.nth(11)).to_contain_text("Question 11:")
        expect(turns.nth(0).locator(".badge.fail")).to_have_count(1)
        expect(turns.nth(5).locator(".badge.pass")).to_have_count(1)
        shot(page, "09-conversation.png")

        # 3. Stored runs: a run's page, then run-vs-run compare.
        with Service(db) as svc:
            ids = []
            for scores in ([0.9] * 8 + [0.5] * 2, [0.9] * 4 + [0.2] * 6):
                run_id = svc.create_run("nightly", "answers.jsonl")
                svc.add_run_results(
                    run_id,
                    [
                        {
                            "eval_name": "capital",
                            "input": f"case {n}",
                            "output": "o",
                            "reference": REF,
                            "score": sc,
                            "threshold": 0.6,
                            "explanation": {"case": {"id": f"case-{n}"}},
                        }
                        for n, sc in enumerate(scores)
                    ],
                )
                svc.update_run_summary(run_id, {"status": "complete"})  # the run has finished
                ids.append(run_id)
        page.goto(base + "/runs")
        expect(page.locator("#runs-table tbody tr")).to_have_count(2)
        page.click(f'#runs-table a[href="/runs/{ids[1]}"]')
        expect(page.locator("#run-rows")).to_have_text("10")
        expect(page.locator("#run-pass-rate")).to_contain_text("40")
        expect(page.locator("#run-status")).to_have_text("complete")
        shot(page, "10-run.png")
        page.select_option("#compare-with-run", f"run:{ids[0]}")
        page.click("#compare-with-go")
        expect(page.locator("#overall-verdict")).to_have_text("B worse")
        shot(page, "11-run-vs-run.png")

        # 4. Backtest of a draft on recent captures (nothing stored).
        before = api.get("/api/results").json()["total"]
        api.post("/api/evals", json={"name": "strict", "references": [REF], "threshold": 0.9})
        page.goto(base + "/evals/strict")
        page.fill("#backtest-limit", "500")
        page.click("#run-backtest")
        expect(page.locator("#backtest-n")).to_have_text("24")
        expect(page.locator("#backtest-result .threshold-line")).to_have_count(1)
        assert page.locator("#backtest-result .backtest-cases .badge.fail").count() >= 4
        shot(page, "12-backtest.png")
        assert api.get("/api/results").json()["total"] == before

        # 5. A live edit: version 1 keeps scoring until version 2 is tested and activated.
        page.goto(base + "/evals/capital")
        page.click("#definition > summary")
        page.fill("#threshold", "0.5")
        page.click("#save")
        expect(page.locator("#eval-status")).to_have_text("active")
        expect(page.locator("#versions-in-force")).to_contain_text("version 2 is pending")
        expect(page.locator("#activate")).to_be_disabled()
        r = api.post("/api/capture", json={"input": "live", "output": GOOD}).json()
        assert [(x["eval_version"], x["threshold"]) for x in r["results"]] == [(1, 0.6)]
        shot(page, "13-live-edit-pending.png")
        page.fill("#test-output", GOOD)
        page.click("#run-test")
        expect(page.locator("#activate")).to_be_enabled()
        page.click("#activate")
        expect(page.locator("#versions-in-force")).to_contain_text("Version 2 is active")
        r = api.post("/api/capture", json={"input": "live", "output": GOOD}).json()
        assert [(x["eval_version"], x["threshold"]) for x in r["results"]] == [(2, 0.5)]

        # 6. 420 px wide: no horizontal scrolling on the new pages.
        page.set_viewport_size({"width": 420, "height": 900})
        urls = [
            *NEW_PAGES,
            "/compare?a=captures:engine=v1&b=captures:engine=v2",
            "/conversations/chat-v2",
            f"/runs/{ids[1]}",
            "/evals/capital",
            "/results?meta=engine%3Dv2",
            "/dashboard",
        ]
        for url in urls:
            page.goto(base + url)
            no_horizontal_scroll(page)
        page.goto(base + "/compare?a=captures:engine=v1&b=captures:engine=v2")
        shot(page, "14-compare-420px.png")
        browser.close()
    assert problems == [], problems


@pytest.mark.browser
def test_empty_database_offers_an_example(tmp_path: Path) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    with running_server(tmp_path / "example.db") as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.goto(base + "/")
        page.click("#create-example")
        expect(page.locator("#eval-status")).to_have_text("draft")
        expect(page.locator("#test-verdict")).to_contain_text("Pass")
        expect(page.locator("#activate")).to_be_enabled()
        page.click("#activate")
        expect(page.locator("#eval-status")).to_have_text("active")
        browser.close()


@pytest.mark.browser
def test_the_tester_scores_an_empty_output(new_sqlite: Callable[..., str]) -> None:
    """Run Test with the output left empty: scored 0 and failed, with the reason and the
    reference's terms missing at their shares of its weight (the form refused to send it)."""
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    from simeval.service import Service

    db = Path(new_sqlite("tester.db"))
    Service(db).create_eval("capital", "Paris is the capital of France.")
    with running_server(db) as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(base + "/evals/capital")
        page.fill("#test-input", "What is the capital of France?")
        page.click("#run-test")
        expect(page.locator("#test-score")).to_have_text("0.000")
        expect(page.locator("#test-verdict")).to_contain_text("Fail")
        expect(page.locator("#tester .explain .reason")).to_have_text("output is empty")
        weights = page.locator("#missing-terms li small").all_inner_texts()
        assert len(weights) == 6 and sum(float(w) for w in weights) == pytest.approx(1, abs=0.01)
        browser.close()


def test_missing_browser_fails_under_ci_and_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser, "chromium_path", lambda: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required under CI"):
        need_browser()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        need_browser()
