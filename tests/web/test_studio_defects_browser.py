"""The studio's visual defects of issue 20 (items 4, 9 and the copy button of 10) in real
headless Chromium (Debian's, driven by Playwright; see tests/browser.py) against a real
``simeval serve``, at 1280 and 420 px. Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from browser import CHROMIUM_ARGS, need_browser, shot
from simeval.service import Service
from simeval.web.server_process import running_server

REF = "Paris is the capital of France and its largest city."
LONG = ("capital_city_answers_" * 10)[:200]  # 200 characters with no place to break a line


def seed(db: str) -> None:
    with Service(db) as svc:
        for name in (LONG, "capital"):
            svc.create_eval(name, REF)
            svc.test_eval(name, "q", REF)
            svc.activate_eval(name)
        for output in (REF, "The capital is Paris.", "Bananas are yellow."):
            svc.capture("What is the capital of France, and which is its largest city?", output)


def box(page: Any, selector: str) -> dict[str, float]:
    got = page.locator(selector).first.bounding_box()
    assert got is not None, selector
    return got


@pytest.mark.browser
def test_long_names_narrow_screens_and_copyable_snippets(new_sqlite: Callable[..., str]) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    db = new_sqlite("visual.db")
    seed(db)
    with running_server(db) as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        page = context.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on(
            "console",
            lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None,
        )

        # 4. A 200-character name: every column of the Evals table stays in its card, the
        # name is cut with an ellipsis and given whole on hover; the dashboard's selector
        # keeps its size.
        page.goto(base + "/")
        shot(page, "defects-evals-1280.png")
        card = box(page, "#eval-table")
        last = box(page, "#eval-table thead th:last-child")
        card_right = page.evaluate(
            "document.querySelector('#eval-table').parentElement.getBoundingClientRect().right"
        )
        assert last["x"] + last["width"] <= card_right + 1, (last, card_right)
        assert card["width"] <= 1280
        name = page.locator(f'#eval-table a.eval-name[title="{LONG}"]')
        assert name.evaluate("el => getComputedStyle(el).textOverflow") == "ellipsis"
        assert name.evaluate("el => el.getBoundingClientRect().width") <= 420
        page.goto(base + "/dashboard?eval=capital")
        shot(page, "defects-dashboard-1280.png")
        assert box(page, "select[name=eval]")["width"] <= 360
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280

        # 10. The snippets are code blocks with a copy button (studio.js, no CDN).
        page.goto(base + "/settings")
        shot(page, "defects-settings-1280.png")
        copy = page.locator("#snippet-client-copy")
        expect(copy).to_be_visible()
        copy.click()
        expect(copy).to_have_text("Copied")
        want = page.locator("#snippet-client").inner_text()
        assert page.evaluate("navigator.clipboard.readText()") == want
        assert "simeval.Client(" in want

        # 9. At 420 px the nav (its shown links) takes at most two rows, the verdicts on screen.
        page.set_viewport_size({"width": 420, "height": 900})
        page.goto(base + "/dashboard")
        shot(page, "defects-dashboard-420.png")
        middles = page.evaluate(
            "[...document.querySelectorAll('.sidebar a')].filter(a => a.offsetParent !== null)"
            ".map(a => { const r = a.getBoundingClientRect(); return r.top + r.height / 2; })"
        )
        rows = [
            m for i, m in enumerate(sorted(middles)) if i == 0 or m - sorted(middles)[i - 1] > 12
        ]
        assert len(rows) <= 2, middles
        assert box(page, ".sidebar")["height"] <= 110
        verdict = box(page, "#captures-table tbody tr:first-child a.badge")
        recent = box(page, "#recent")
        assert verdict["x"] >= 0, verdict
        assert verdict["x"] + verdict["width"] <= recent["x"] + recent["width"], verdict
        assert page.evaluate("document.documentElement.scrollWidth") <= 420
        page.goto(base + "/")  # a short page: its spare height is not the nav's
        shot(page, "defects-evals-420.png")
        assert page.evaluate("document.documentElement.scrollWidth") <= 420
        assert box(page, ".sidebar")["height"] <= 110
        page.goto(base + "/settings")
        shot(page, "defects-settings-420.png")
        assert page.evaluate("document.documentElement.scrollWidth") <= 420
        browser.close()
    assert problems == []
