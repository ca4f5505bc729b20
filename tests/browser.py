"""The headless browser of the studio tests: Debian's chromium driven by Python Playwright
(never Playwright's own download); under CI=true a missing browser fails rather than skips."""

from __future__ import annotations

import os
import shutil

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
