"""The studio at a phone's width (420 px) and a laptop's (1280 px), in real headless Chromium:
on every main page the page never scrolls sideways, a wide table scrolls inside its box (not
cut off by it), and the forms stack, every control inside the window at a usable width."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from browser import CHROMIUM_ARGS, fits_its_window, need_browser, shot
from simeval.cli import cli
from simeval.service import Service
from simeval.web.server_process import running_server

REF = "Paris is the capital of France and its largest city, on the Seine."
LONG = "A very long answer that goes on " + "and on " * 60 + "about Paris."
WIDE = "https://example.com/" + "x" * 200  # one unbreakable word


def build(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Evals, captures (with metadata, a conversation, long and unbreakable texts), a data
    set, a stored run and an engine run group, an alert rule: every main page has rows."""
    db = tmp_path / "narrow.db"
    svc = Service(db)
    svc.create_eval("capital-of-france-with-a-long-name", REF, threshold=0.7)
    svc.test_eval("capital-of-france-with-a-long-name", "Capital?", REF)
    svc.activate_eval("capital-of-france-with-a-long-name")
    svc.create_eval("draft", REF, input_scope="Where is the Eiffel Tower?")
    ids = []
    for i, out in enumerate([REF, LONG, WIDE, "Lyon.", REF]):
        meta = {"engine": f"v{i % 2}", "url": WIDE[:80], "case_id": f"c{i}"}
        cap = svc.capture(f"What is the capital of France? {WIDE if i == 2 else ''}", out,
                          conversation_id="chat-1", metadata=meta)  # fmt: skip
        ids.append(cap.id)
    svc.create_dataset("golden", [{"input": "Capital of France?", "reference": REF}] * 3)
    svc.alerts.set_alert_rules(
        [
            {
                "name": "capital-drop",
                "eval": "capital-of-france-with-a-long-name",
                "when": "pass_rate < 0.99",
                "window": "24h",
            }
        ]
    )
    svc.close()
    cases = tmp_path / "cases.jsonl"
    rows = [{"id": f"c{i}", "input": f"Capital {i}? {WIDE}", "output": out, "reference": REF}
            for i, out in enumerate([REF, LONG, "Lyon."])]  # fmt: skip
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", str(cases), "--store", "--db", str(db), "--json"])
    run_id = json.loads(res.output)["run_id"]
    (tmp_path / "fixed.py").write_text("def answer(case):\n    return 'Paris, on the Seine.'\n")
    engines = tmp_path / "e.yaml"
    engines.write_text(
        textwrap.dedent("""\
        engines:
          - {name: fixed, python: "fixed:answer"}
          - {name: same, python: "fixed:answer"}
        """)
    )
    sys.path.insert(0, str(tmp_path))
    try:
        res = CliRunner().invoke(cli, ["run", str(cases), "--engines", str(engines), "--store",
                                       "--db", str(db), "--no-cache", "--json"])  # fmt: skip
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("fixed", None)
    group = json.loads(res.output)["group"]
    return db, {"run": str(run_id), "capture": str(ids[2]), "group": group}


def main_pages(ids: dict[str, str]) -> list[str]:
    from urllib.parse import quote

    return [
        "/",
        "/dashboard",
        "/evals/new",
        "/evals/new/similarity",
        "/evals/capital-of-france-with-a-long-name",
        "/evals/draft",
        "/results",
        "/results?meta=engine%3Dv1",
        f"/captures/{ids['capture']}",
        "/conversations",
        "/conversations/chat-1",
        "/compare?a=captures:engine=v0&b=captures:engine=v1",
        "/runs",
        f"/runs/{ids['run']}",
        "/run-groups",
        f"/run-groups/{quote(ids['group'])}",
        "/datasets",
        "/datasets/golden",
        "/review",
        "/alerts",
        "/settings",
    ]


@pytest.mark.browser
@pytest.mark.parametrize("width", [420, 1280])
def test_main_pages_fit_the_window(tmp_path: Path, width: int) -> None:
    browser_path = need_browser()
    from playwright.sync_api import sync_playwright

    db, ids = build(tmp_path)
    with running_server(db) as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": width, "height": 900})
        failed = []
        for url in main_pages(ids):
            response = page.goto(base + url)
            assert response is not None and response.status == 200, url
            try:
                fits_its_window(page)
            except AssertionError as exc:
                failed.append(str(exc))
        page.goto(base + f"/runs/{ids['run']}")
        shot(page, f"narrow-run-{width}.png")
        page.goto(base + "/evals/capital-of-france-with-a-long-name")
        shot(page, f"narrow-eval-{width}.png")
        browser.close()
    assert failed == [], "\n".join(failed)
