"""The run report's HTML page in real headless Chromium (Debian's, driven by Playwright; see
tests/browser.py), opened from a ``file://`` path as a CI artifact is: no request leaves the
page, a failing row is found by typing in the search box, the rows sort by score both ways
and page on, the regressed rows are one click away, and a hostile output stays text.
Screenshots at 1280 and 420 px go to ``test-artifacts/``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from browser import CHROMIUM_ARGS, need_browser, no_horizontal_scroll, shot
from clihelp import invoke

REF = "Paris is the capital of France and its largest city."
BAD = "Bananas are yellow."
NEEDLE = "A zebra answered instead, about Paris."
HOSTILE = (
    '</script><img src="https://example.invalid/x.png" onerror="window.pwned=1">'
    "<script>window.pwned=2</script><!--"
)
ROWS = 250


def write_cases(path: Path, outputs: dict[str, str]) -> None:
    path.write_text(
        "".join(
            json.dumps({"id": k, "input": f"Capital of France? {k}", "output": v, "reference": REF})
            + "\n"
            for k, v in outputs.items()
        )
    )


def scores_shown(page: Any) -> list[float]:
    return [float(t) for t in page.locator("#rows tbody td.score").evaluate_all(
        "cells => cells.map(c => c.firstChild.textContent)"
    )]  # fmt: skip


@pytest.mark.browser
def test_the_report_page_from_disk(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    ids = [f"case-{i:03d}" for i in range(ROWS)]
    v1 = dict.fromkeys(ids, REF)
    # every fifth case regresses; one fails with a word to search, one with hostile markup
    v2 = {k: BAD if i % 5 == 0 else REF for i, k in enumerate(ids)}
    v2["case-123"], v2["case-200"] = NEEDLE, HOSTILE
    failed = sum(1 for v in v2.values() if v != REF)
    db = new_sqlite("runs.db")
    write_cases(tmp_path / "v1.jsonl", v1)
    write_cases(tmp_path / "v2.jsonl", v2)
    assert (
        invoke(
            "run", str(tmp_path / "v1.jsonl"), "--store", "--db", db, "--run-name", "g"
        ).exit_code
        == 0
    )
    html = tmp_path / "report.html"
    res = invoke(
        "run", str(tmp_path / "v2.jsonl"), "--store", "--db", db, "--run-name", "g",
        "--baseline", "run:latest", "--html", str(html),
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    url = html.resolve().as_uri()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        requested: list[str] = []
        problems: list[str] = []

        def route(r: Any) -> None:
            requested.append(r.request.url)
            if r.request.url == url:
                r.continue_()
            else:
                r.abort()

        context.route("**/*", route)
        page = context.new_page()
        page.on("request", lambda r: requested.append(r.url))
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on(
            "console",
            lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None,
        )
        page.goto(url)
        info = page.locator("#page-info")
        expect(info).to_have_text(f"rows 1–100 of {ROWS} (page 1 of 3)")
        # the failing rows first, lowest score first
        expect(page.locator("#rows tbody tr.failed")).to_have_count(failed)
        assert page.locator("#rows tbody tr").nth(failed).get_attribute("class") == "passed"
        shown = scores_shown(page)
        assert shown[:failed] == sorted(shown[:failed])
        shot(page, "report-01-rows-1280.png")

        # search: one failing row, found by a word of its output
        page.locator("#search").fill("zebra")
        expect(info).to_have_text("rows 1–1 of 1 (page 1 of 1)")
        row = page.locator("#rows tbody tr")
        expect(row).to_have_count(1)
        expect(row).to_have_class("failed")
        expect(row.locator("td.case")).to_contain_text("case-123")
        expect(row.locator("td.why .terms.missing")).to_contain_text("largest")
        expect(row.locator(".badge")).to_have_text("FAIL")

        # the hostile output is text in its cell, and nothing of it ran or was fetched
        page.locator("#search").fill("example.invalid")
        expect(info).to_have_text("rows 1–1 of 1 (page 1 of 1)")
        expect(page.locator("#rows tbody tr td .text").nth(1)).to_have_text(HOSTILE)
        assert page.locator("#rows img").count() == 0
        assert page.evaluate("window.pwned") is None

        # sort by score: ascending, then descending, over every row
        page.locator("#search").fill("")
        expect(info).to_have_text(f"rows 1–100 of {ROWS} (page 1 of 3)")
        page.locator("#sort-score").click()
        expect(page.locator("#rows th[data-sort=score]")).to_have_attribute(
            "aria-sort", "ascending"
        )
        shown = scores_shown(page)
        assert shown == sorted(shown) and shown[0] == 0.0 and len(shown) == 100
        page.locator("#sort-score").click()
        expect(page.locator("#rows th[data-sort=score]")).to_have_attribute(
            "aria-sort", "descending"
        )
        shown = scores_shown(page)
        assert shown == sorted(shown, reverse=True) and shown[0] == 1.0
        page.locator("#next-page").click()
        expect(info).to_have_text(f"rows 101–200 of {ROWS} (page 2 of 3)")

        # the baseline's regressed rows, one click away
        page.get_by_role("button", name="Show the regressed rows").click()
        expect(page.locator("#view")).to_have_value("regressed")
        expect(info).to_have_text(f"rows 1–{failed} of {failed} (page 1 of 1)")
        expect(page.locator("#rows tbody tr.failed")).to_have_count(failed)

        page.set_viewport_size({"width": 420, "height": 900})
        page.locator("#view").select_option("all")
        no_horizontal_scroll(page)
        shot(page, "report-02-rows-420.png")
        browser.close()
    assert requested and set(requested) == {url}, requested
    assert problems == []
