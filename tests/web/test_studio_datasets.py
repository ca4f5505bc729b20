"""Captures → dataset in a real browser: a real ``simeval serve`` process, Debian's headless
Chromium driven by Playwright (see ``tests/browser.py``; skipped locally without it, failing
under ``CI=true``).

Select captures on the Results page → "Add to dataset" (a new one) → the Datasets tab shows
it with draft references → a draft accepted and another edited inline, each a new version →
version 1 still shows the drafts → more captures from a Conversation page added to the same
dataset. Every request to anything but the studio server is blocked and recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from browser import CHROMIUM_ARGS, need_browser
from simeval.web.server_process import running_server

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
REF = "Paris is the capital of France."


@pytest.mark.browser
def test_captures_to_a_dataset_edit_accept_and_versions(tmp_path: Path) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    with (
        running_server(tmp_path / "ds.db") as (base, _),
        sync_playwright() as pw,
        httpx.Client(base_url=base) as api,
    ):
        assert (
            api.post("/api/evals", json={"name": "capital", "references": [REF]}).status_code == 201
        )
        api.post("/api/evals/capital/test", json={"input": "q", "output": REF})
        assert api.post("/api/evals/capital/activate").status_code == 200
        ids = []
        for i in range(4):
            body = {
                "input": f"Question {i}: capital of France?",
                "output": f"Answer {i}: Paris is the capital of France.",
                "conversation_id": "chat-1" if i >= 2 else None,
            }
            resp = api.post("/api/capture", json=body)
            assert resp.status_code == 201
            ids.append(resp.json()["id"])

        chromium = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        context = chromium.new_context(viewport={"width": 1360, "height": 900})
        outside: list[str] = []
        problems: list[str] = []

        def only_local(route: Any) -> None:
            if route.request.url.startswith(base):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        context.route("**/*", only_local)
        page = context.new_page()
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

        # 1. Results: tick two captures, name a new dataset, Add to dataset.
        page.goto(base + "/results")
        for cid in ids[:2]:
            page.check(f"input[data-select-capture][value='{cid}']")
        # nothing named: a visible one-line message, nothing stored
        page.click("#to-dataset-add")
        expect(page.locator(".flash.err")).to_contain_text("name the dataset")
        page.click("#back")
        for cid in ids[:2]:
            page.check(f"input[data-select-capture][value='{cid}']")
        page.fill("#to-dataset-name", "from-prod")
        page.click("#to-dataset-add")
        expect(page.locator("#dataset-version")).to_have_text("version 1")
        expect(page.locator(".flash.ok")).to_contain_text("draft cases")
        cases = page.locator("#cases > li[data-case]")
        expect(cases).to_have_count(2)
        expect(page.locator("[data-draft]")).to_have_count(2)
        first = page.locator(f"li[data-case='capture-{ids[0]}']")
        expect(first.locator("textarea[data-reference]")).to_have_value(
            "Answer 0: Paris is the capital of France."
        )

        # 2. Accept the first draft: version 2, one draft left.
        first.locator("[data-accept]").click()
        expect(page.locator("#dataset-version")).to_have_text("version 2")
        expect(page.locator("[data-draft]")).to_have_count(1)

        # 3. Edit the second case's reference inline: version 3, no draft left. An emptied
        # reference is a visible message, and no version.
        second = page.locator(f"li[data-case='capture-{ids[1]}']")
        second.locator("textarea[data-reference]").fill(" ")
        second.locator("[data-save]").click()
        expect(page.locator("#dataset-error")).to_contain_text("references must be")
        expect(page.locator("#dataset-version")).to_have_text("version 2")
        second = page.locator(f"li[data-case='capture-{ids[1]}']")
        second.locator("textarea[data-reference]").fill("Paris.")
        second.locator("[data-save]").click()
        expect(page.locator("#dataset-version")).to_have_text("version 3")
        expect(page.locator("[data-draft]")).to_have_count(0)
        expect(
            page.locator(f"li[data-case='capture-{ids[1]}'] textarea[data-reference]")
        ).to_have_value("Paris.")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "20-dataset-edited.png"), full_page=True)

        # 4. Version 1 is unchanged and read-only.
        page.select_option("#version-select", "1")
        page.click("form.filters button[type=submit]")
        expect(page.locator("#dataset-version")).to_have_text("version 1")
        expect(page.locator("[data-draft]")).to_have_count(2)
        expect(page.locator("textarea")).to_have_count(0)
        expect(page.locator("#cases")).to_contain_text("Answer 1: Paris is the capital of France.")

        # 5. A conversation's turns added to the same (existing) dataset: version 4.
        page.goto(base + "/conversations/chat-1")
        page.check(f"input[data-select-capture][value='{ids[2]}']")
        page.check(f"input[data-select-capture][value='{ids[3]}']")
        page.fill("#to-dataset-name", "from-prod")
        page.click("#to-dataset-add")
        expect(page.locator("#dataset-version")).to_have_text("version 4")
        expect(page.locator("#cases > li[data-case]")).to_have_count(4)
        expect(page.locator("[data-draft]")).to_have_count(2)

        # 6. The Datasets tab lists it.
        page.click("#nav-datasets")
        row = page.locator("#datasets-table tr[data-dataset='from-prod']")
        expect(row).to_contain_text("4")
        expect(row).to_contain_text("2 drafts")

        # the API agrees: version 1 kept the captured outputs as drafts
        v1 = api.get("/api/datasets/from-prod", params={"version": 1}).json()
        assert [c["draft"] for c in v1["cases"]] == [True, True]
        v4 = api.get("/api/datasets/from-prod").json()
        assert [c["references"] for c in v4["cases"]][:2] == [
            ["Answer 0: Paris is the capital of France."],
            ["Paris."],
        ]
        # readable on a phone: no horizontal scrolling at 420 px
        page.set_viewport_size({"width": 420, "height": 900})
        for path in ("/datasets", "/datasets/from-prod", "/datasets/from-prod?version=1"):
            page.goto(base + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= page.evaluate("window.innerWidth"), f"{path}: {width} px wide"
        chromium.close()
        assert outside == []
        assert problems == []
