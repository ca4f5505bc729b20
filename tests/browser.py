"""The headless browser of the studio tests: Debian's chromium driven by Python Playwright
(never Playwright's own download); under CI=true a missing browser fails rather than skips."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def need_browser() -> str:
    path = chromium_path()
    if path is None:
        message = "Debian chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + ": required under CI")
        pytest.skip(message)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("the playwright Python package is missing: required under CI")
        pytest.skip("the playwright Python package is missing")
    return path


ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


def shot(page: Any, name: str) -> None:
    """A screenshot of the whole page in one viewport, in test-artifacts/ (to look at).

    Not Playwright's ``full_page``: a full-page shot of a scrolled page draws the sticky,
    one-screen-high sidebar at the scroll offset, which no user ever sees."""
    ARTIFACTS.mkdir(exist_ok=True)
    size = page.viewport_size
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": max(height, size["height"])})
    page.screenshot(path=str(ARTIFACTS / name))
    page.set_viewport_size(size)


def no_horizontal_scroll(page: Any) -> None:
    """The page fits its window's width (a table may scroll inside its card)."""
    width = page.evaluate("document.documentElement.scrollWidth")
    inner = page.evaluate("window.innerWidth")
    assert width <= inner, f"{page.url}: {width} px wide in a {inner} px window"
