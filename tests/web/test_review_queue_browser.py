"""The review queue in a real browser (Debian's chromium via Playwright): the reviewer's name
asked once, then ten results reviewed by keyboard alone (with a skip and a note), borderline
ones first; the reviews stored with the reviewer's name; one-click pass/fail on the results
pages; the eval page's review count and calibration; screenshots at 1280 and 420 px."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from browser import CHROMIUM_ARGS, need_browser, no_horizontal_scroll, shot
from simeval.web.server_process import running_server

REF = "Paris is the capital of France and its largest city."
GOOD = "Paris is the capital of France and its largest city."
# near the 0.8 threshold (scores 0.71 to 0.90), and far below it
PARTIAL = [
    "Paris.",
    "The capital is Paris.",
    "France: Paris.",
    "It is a large city in France.",
    "The largest city of France.",
    "France capital",
    "capital city",
    "Lyon is the largest city of France.",
]
POOR = [
    "The weather in Spain is usually sunny in summer.",
    "Bananas are yellow.",
    "Trains run on rails.",
    "Paris is big.",
]
NAME = "Ada Lovelace"


@pytest.mark.browser
def test_review_queue_by_keyboard_alone(tmp_path: Path) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    with (
        running_server(tmp_path / "review.db") as (base, _),
        sync_playwright() as pw,
        httpx.Client(base_url=base) as api,
    ):
        created = api.post(
            "/api/evals",
            # scored as sentence pairs (the inputs are placeholders, not the question)
            json={
                "name": "capital",
                "references": [REF],
                "threshold": 0.8,
                "options": {"answer": False},
            },
        )
        assert created.status_code == 201
        api.post("/api/evals/capital/test", json={"input": "q", "output": GOOD})
        assert api.post("/api/evals/capital/activate").status_code == 200
        scores: dict[str, float] = {}
        for i, output in enumerate([GOOD, *PARTIAL, "Paris is the capital of France.", *POOR]):
            body = {"input": f"Question {i}", "output": output, "metadata": {"engine": "v1"}}
            got = api.post("/api/capture", json=body)
            assert got.status_code == 201, got.text
            (result,) = got.json()["results"]
            scores[result["id"]] = result["score"]
        queued = {k for k, s in scores.items() if s <= 0.9}  # borderline (±0.1) or failing
        assert len(queued) >= 11, scores

        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

        # the name, asked once: typed into the focused field, Enter
        page.goto(base + "/review?eval=capital")
        expect(page.locator("#reviewer-name")).to_be_focused()
        shot(page, "review-01-name-1280.png")
        page.keyboard.type(NAME)
        with page.expect_navigation():
            page.keyboard.press("Enter")
        expect(page.locator("#reviewing-as")).to_contain_text(NAME)
        expect(page.locator("#review-keys")).to_contain_text("pass")
        expect(page.locator("#count-remaining")).to_have_text(str(len(queued)))
        shot(page, "review-02-item-1280.png")

        # s: skip the first one (it stays unreviewed)
        skipped = page.locator("#review-item").get_attribute("data-result")
        with page.expect_navigation():
            page.keyboard.press("s")
        expect(page.locator("#count-skipped")).to_have_text("1")

        verdicts: dict[str, bool] = {}
        reasons: list[str] = []
        for i in range(10):
            item = page.locator("#review-item")
            rid = item.get_attribute("data-result")
            assert rid is not None and rid != skipped and rid not in verdicts
            reasons.append(page.locator("#review-reason").inner_text())
            key = "p" if i % 2 == 0 else "f"
            if i == 3:  # n: a note, Enter back to the keys, then the verdict
                page.keyboard.press("n")
                expect(page.locator("#review-note")).to_be_focused()
                page.keyboard.type("right city, missing 'largest'")
                page.keyboard.press("Enter")
                expect(page.locator("#review-note")).not_to_be_focused()
            with page.expect_navigation():
                page.keyboard.press(key)
            verdicts[rid] = key == "p"
            expect(page.locator("#count-reviewed")).to_have_text(str(i + 1))
            if i == 0:
                expect(page.locator(".flash.ok")).to_have_text("Reviewed as a pass.")
        assert reasons == sorted(reasons), reasons  # every borderline one before the failing
        assert "borderline" in reasons and "failing" in reasons
        expect(page.locator("#count-remaining")).to_have_text(str(len(queued) - 11))

        # stored: ten reviews, each with the reviewer's name and the verdict pressed
        listed = api.get("/api/results", params={"reviewed": "true", "limit": 100}).json()[
            "results"
        ]
        got = {r["id"]: r for r in listed}
        assert set(got) == set(verdicts)
        for rid, passed in verdicts.items():
            assert got[rid]["review"]["reviewer"] == NAME
            assert got[rid]["passed"] is passed
            assert (got[rid]["review"]["score"] >= got[rid]["threshold"]) is passed
        noted = [r for r in got.values() if r["review"]["note"]]
        assert [r["review"]["note"] for r in noted] == ["right city, missing 'largest'"]
        assert skipped not in got  # skipped: still unreviewed

        # 420 px: the item, the keys, no sideways scrolling
        page.set_viewport_size({"width": 420, "height": 900})
        page.reload()
        no_horizontal_scroll(page)
        shot(page, "review-03-item-420.png")

        # one-click pass / fail on the results list and on a result's page
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(base + "/results?eval=capital&reviewed=no")
        row = page.locator("#results-table tbody tr").first
        target = row.locator("a").first.get_attribute("href")
        assert target is not None
        with page.expect_navigation():
            row.locator("[data-verdict-fail]").click()
        expect(page.locator(".flash.ok")).to_have_text("Reviewed as a fail.")
        assert "reviewed=no" in page.url  # back on the same list
        one = api.get("/api" + target).json()
        assert one["review"]["reviewer"] == NAME and one["passed"] is False
        shot(page, "review-04-results-1280.png")
        page.goto(base + target)
        with page.expect_navigation():
            page.click("#one-click-pass")
        expect(page.locator("#reviewer")).to_have_text(NAME)
        expect(page.locator("#result-verdict")).to_contain_text("Pass")
        page.set_viewport_size({"width": 420, "height": 900})
        page.goto(base + "/results?eval=capital")
        no_horizontal_scroll(page)  # the table scrolls inside its card
        button = page.locator("#results-table [data-verdict-pass]").first
        button.scroll_into_view_if_needed()
        expect(button).to_be_in_viewport()
        shot(page, "review-05-results-420.png")
        page.set_viewport_size({"width": 1280, "height": 900})

        # the eval page: how many reviews, and calibrate on them
        page.goto(base + "/evals/capital")
        expect(page.locator("#eval-review-count")).to_have_text("11")
        page.click("#eval-calibrate")
        expect(page.locator("#calibrate-reviews")).to_have_text("11")
        shot(page, "review-06-calibrate-1280.png")
        suggested = float(page.locator("#calibrate-suggested").inner_text())
        if page.locator("#calibrate-apply").is_enabled():
            with page.expect_navigation():
                page.click("#calibrate-apply")
            expect(page.locator(".flash.ok")).to_contain_text("calibrated")
            versions = api.get("/api/evals/capital/versions").json()
            assert versions[-1]["threshold"] == suggested

        assert problems == [], problems
        browser.close()
