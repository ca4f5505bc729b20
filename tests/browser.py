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


# What overflows, read in the page: a table wider than its box that no box around it scrolls
# (cut off by a card, or pushing past the window); a form control or a button that reaches
# past the window or is squeezed below a usable width; on a phone, form fields side by side.
_OVERFLOWS = """() => {
  const problems = [];
  const inner = window.innerWidth;
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (el.name ? '[name=' + el.name + ']' : '');
  const visible = (el) => { const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden'; };
  const scroller = (el) => { for (let p = el.parentElement; p && p !== document.body;
      p = p.parentElement) { const o = getComputedStyle(p).overflowX;
      if ((o === 'auto' || o === 'scroll') && p.scrollWidth > p.clientWidth - 1) return p; }
    return null; };
  if (document.documentElement.scrollWidth > inner)
    problems.push('the page is ' + document.documentElement.scrollWidth + ' px wide');
  for (const t of document.querySelectorAll('table')) {
    if (!visible(t)) continue;
    const box = t.parentElement.getBoundingClientRect();
    const r = t.getBoundingClientRect();
    if ((r.right > box.right + 1 || r.right > inner + 1) && !scroller(t))
      problems.push(name(t) + ' is ' + Math.round(r.width) + ' px wide and nothing scrolls it');
  }
  for (const c of document.querySelectorAll('input, select, textarea, button')) {
    if (!visible(c) || c.type === 'hidden' || c.type === 'radio' || c.type === 'checkbox')
      continue;
    if (scroller(c)) continue;  // in a table that scrolls in its box
    const r = c.getBoundingClientRect();
    if (r.right > inner + 1 || r.left < -1)
      problems.push(name(c) + ' reaches past the window (' + Math.round(r.left) + '..'
        + Math.round(r.right) + ')');
    else if ((c.tagName === 'TEXTAREA' || c.tagName === 'INPUT') && r.width < 90)
      problems.push(name(c) + ' is squeezed to ' + Math.round(r.width) + ' px');
    else if (c.tagName === 'SELECT' && c.scrollWidth > c.clientWidth + 1)
      problems.push(name(c) + ' is cut to ' + Math.round(r.width) + ' px');
  }
  if (inner <= 600) {  // a phone: the fields of a form stack, one under the other
    const fields = [...document.querySelectorAll('.content input, .content select, '
      + '.content textarea')].filter((c) => visible(c) && !scroller(c)
      // a slider goes with the number field beside it: one field
      && !['hidden', 'radio', 'checkbox', 'range'].includes(c.type));
    for (const a of fields) for (const b of fields) {
      const ra = a.getBoundingClientRect(), rb = b.getBoundingClientRect();
      if (a !== b && ra.right <= rb.left && ra.bottom > rb.top && rb.bottom > ra.top)
        problems.push(name(a) + ' and ' + name(b) + ' side by side');
    }
  }
  return problems;
}"""


def fits_its_window(page: Any) -> None:
    """At any width: the page never scrolls sideways, a wide table scrolls inside its box
    (not cut off by it), and every form control stays inside the window at a usable width;
    at a phone's (600 px or less) the fields of a form stack."""
    problems = page.evaluate(_OVERFLOWS)
    assert problems == [], f"{page.url} at {page.viewport_size['width']} px: {problems}"
