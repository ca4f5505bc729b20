"""The studio's threshold field in a real browser (issue 17, part 5): a value outside [0, 1]
is refused with the CLI's message and nothing is stored (1.5 once became 0.01 silently).

The real ``simeval serve`` process and Debian's Chromium, started as in tests/web/test_studio.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from browser import CHROMIUM_ARGS, need_browser
from simeval.cli import cli
from simeval.web.server_process import running_server

REF = "Paris is the capital of France."


def cli_message(db: Path, threshold: str) -> str:
    """The CLI's one-line error for this threshold (exit code 2)."""
    argv = ["evals", "create", "other", "--reference", REF, "-t", threshold, "--db", str(db)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0].removeprefix("error: ")


@pytest.mark.browser
def test_threshold_outside_unit_refused_in_browser(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    db = Path(new_sqlite("studio.db"))
    expected = cli_message(tmp_path / "cli.db", "1.5")
    assert "threshold must be a number in [0, 1], not 1.5" in expected
    with running_server(db) as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page()
        page.goto(base + "/evals/new/similarity")
        page.fill("#name", "capital")
        page.fill("textarea[name=references]", REF)
        page.fill("#threshold", "1.5")
        page.locator("#threshold").blur()
        assert page.input_value("#threshold") == "1.5"  # never rewritten to 0.01
        page.click("#create")
        error = page.locator("#form-error")
        expect(error).to_be_visible()
        expect(error).to_contain_text(expected)
        # what the user typed is still there to correct
        assert page.input_value("#threshold") == "1.5"
        assert page.input_value("#name") == "capital"
        # the API gives the same message for the same number, and nothing was stored
        api = httpx.post(
            base + "/api/evals", json={"name": "capital", "references": [REF], "threshold": 1.5}
        )
        assert api.status_code == 400
        assert api.json()["error"] == expected
        assert httpx.get(base + "/api/evals").json() == []
        # a value the CLI accepts (three decimals) the page accepts too
        page.fill("#threshold", "0.805")
        page.click("#create")
        expect(page.locator("#eval-status")).to_have_text("draft")
        stored = httpx.get(base + "/api/evals/capital").json()
        assert stored["threshold"] == 0.805
        browser.close()
