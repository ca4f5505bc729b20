"""A run group side by side in a real browser: a real ``simeval serve`` process, Debian's
headless Chromium through Playwright. Three engines' runs of one data set are stored through
the run storing API; the Runs page links to their group, whose page shows cases as rows and
engines as columns, filters them ("only where they differ", "only failing", a search), pages
on, and opens a case's explanation per engine; at 420 px the page itself never scrolls
sideways (the table scrolls inside its card). Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from browser import CHROMIUM_ARGS, need_browser, no_horizontal_scroll, shot
from simeval import runs
from simeval.service import Service
from simeval.web.server_process import running_server

GROUP = "golden/2026-12-01"
FACTS = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("At what temperature does water boil?", "Water boils at 100 degrees Celsius at sea level."),
    ("Which is the largest planet?", "Jupiter is the largest planet of the solar system."),
    ("Who wrote Hamlet?", "William Shakespeare wrote the play Hamlet."),
    ("What is the capital of Japan?", "Tokyo is the capital of Japan."),
]
N = 60  # cases: more than one page of 50


def _answer(engine: str, i: int, ref: str) -> str:
    """a answers every case; b misses every 4th; c every 6th (so they differ on some)."""
    if engine == "b" and i % 4 == 0:
        return "I am not sure, maybe Lyon."
    if engine == "c" and i % 6 == 0:
        return "Bananas are yellow and rich in potassium."
    return ref


def _store_group(db: Path, tmp_path: Path) -> None:
    with Service(str(db)) as svc:
        for engine in "abc":
            src = tmp_path / f"{engine}.jsonl"
            with src.open("w", encoding="utf-8") as fh:
                for i in range(N):
                    question, ref = FACTS[i % len(FACTS)]
                    row = {"id": f"case-{i:02d}", "input": question, "reference": ref,
                           "output": _answer(engine, i, ref)}  # fmt: skip
                    fh.write(json.dumps(row) + "\n")
            labels = {"engine": f"engine-{engine}", "group": GROUP, "dataset": "golden",
                      "dataset_version": 1}  # fmt: skip
            sink = runs.RunStore(svc, f"golden on {engine}", str(src), labels)
            runs.run_file(str(src), runs.RunOptions(store=sink, threshold=0.8))


def _ids(page: Any) -> list[str]:
    return [str(t).strip() for t in page.locator("#group-table a.case-link").all_inner_texts()]


@pytest.mark.browser
def test_a_run_group_side_by_side_in_a_real_browser(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    db = Path(new_sqlite("groups.db"))
    _store_group(db, tmp_path)
    differ = [f"case-{i:02d}" for i in range(N) if i % 4 == 0 or i % 6 == 0]
    with running_server(db) as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on(
            "console",
            lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None,
        )

        # the Runs page links each run of a group to the group's page
        page.goto(base + "/runs")
        links = page.locator("#runs-table a.group-link")
        expect(links).to_have_count(3)
        expect(links.first).to_contain_text(f"engine-c in {GROUP}")
        links.first.click()
        expect(page.locator("#group-name")).to_have_text(GROUP)
        headers = page.locator("#group-table thead th").all_inner_texts()
        assert [h.strip().lower() for h in headers] == ["case", "engine-a", "engine-b", "engine-c"]
        assert _ids(page) == [f"case-{i:02d}" for i in range(50)]
        row = page.locator('#group-table tr[data-case="4"]')
        cells = row.locator("td.cell")
        expect(cells.nth(0)).to_contain_text("pass")
        expect(cells.nth(1)).to_contain_text("fail")
        expect(cells.nth(1)).to_contain_text("I am not sure, maybe Lyon.")
        expect(cells.nth(1).locator(".cell-missing .chip").first).to_be_visible()
        expect(cells.nth(1)).to_contain_text("tokyo")  # what the wrong answer lacks
        shot(page, "run-group-1280.png")

        # next page, then back to the first
        page.click("#next-page")
        assert _ids(page) == [f"case-{i:02d}" for i in range(50, N)]
        page.click("#first-page")
        assert _ids(page)[0] == "case-00"

        # only where they differ (and every such row shows one pass and one fail at least)
        page.check("#only-differ")
        page.click("#group-filter")
        assert _ids(page) == differ
        for key in page.locator("#group-table tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.case)"
        ):
            verdicts = page.locator(f'#group-table tr[data-case="{key}"] .cell-head .badge')
            texts = {t.split()[-1] for t in verdicts.all_inner_texts()}
            assert texts == {"pass", "fail"}, (key, texts)
        shot(page, "run-group-differ-1280.png")

        # only failing with a search: the search box keeps its text
        page.uncheck("#only-differ")
        page.check("#only-failing")
        page.fill("#group-search", "BANANAS")
        page.click("#group-filter")
        assert _ids(page) == [f"case-{i:02d}" for i in range(0, N, 6)]
        expect(page.locator("#group-search")).to_have_value("BANANAS")
        page.fill("#group-search", "no such text anywhere")
        page.click("#group-filter")
        expect(page.locator("#no-cases")).to_contain_text("No case matches these filters")

        # a case's row opens its explanation per engine
        page.goto(base + "/run-groups/" + GROUP.replace("/", "%2F") + "?failing=1")
        page.locator('#group-table tr[data-case="12"] a.case-link').click()
        expect(page.locator("#case-input")).to_have_text(FACTS[12 % 5][0])
        expect(page.locator(".engine-explain")).to_have_count(3)
        expect(page.locator("#engine-0")).to_contain_text("Pass")
        expect(page.locator("#engine-1")).to_contain_text("Fail")
        expect(page.locator("#engine-2")).to_contain_text("Fail")
        expect(page.locator("#e1-missing-terms .chip.miss").first).to_be_visible()
        expect(page.locator("#e2-extra-terms")).to_contain_text("bananas")
        expect(page.locator("#case-differs")).to_be_visible()
        shot(page, "run-group-case-1280.png")
        page.click("#back-to-group")
        expect(page.locator("#group-name")).to_have_text(GROUP)

        # 420 px: the page does not scroll sideways; the table scrolls in its card
        page.set_viewport_size({"width": 420, "height": 900})
        group_url = "/run-groups/" + GROUP.replace("/", "%2F")
        for url in (
            "/runs",
            "/run-groups",
            group_url,
            group_url + "?differ=1",
            group_url + "/cases/12",
        ):
            page.goto(base + url)
            no_horizontal_scroll(page)
        page.goto(base + group_url + "?differ=1")
        scroller = page.locator("section.table-wrap").first
        assert scroller.evaluate("el => el.scrollWidth > el.clientWidth")
        shot(page, "run-group-420.png")
        page.goto(base + group_url + "/cases/12")
        shot(page, "run-group-case-420.png")
        browser.close()
    assert problems == [], problems
