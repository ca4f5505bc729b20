"""How big is the run report's HTML page, how long does it take to write, and is it usable in a
browser, at ``--rows`` rows (100,000 by default)?

A data set of ``--rows`` question-answer rows (about a fifth failing, texts of 60-200
characters) is scored once with ``simeval run`` (its results file kept under
``benchmarks/.cache/report-<N>/``), stored too with ``--stored``. Then the report of that
run is made as ``simeval run --html`` makes it (rows read back from the results file, or
from the database with ``--stored``), and timed in its steps: reading and explaining the rows
(``build_report``), laying out the page (``render_html``), writing it; the Markdown summary
beside. With ``--browser`` the page is opened from disk in Debian's Chromium (Playwright)
and the time to its first page of rows, to a search over every row and to a sort by score
are read from the page itself.

The load average is printed beside (2 cores shared with other work slow every step)::

    .venv/bin/python benchmarks/bench_report.py [--rows 100000] [--stored] [--browser]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import time
from pathlib import Path

from simeval.report import build_report, file_rows, render_html, render_markdown, write_text
from simeval.report.rows import run_options, stored_rows
from simeval.runs import RunRequest, run_request
from simeval.service import Service

CACHE = Path(__file__).parent / ".cache"
FACTS = [
    ("What is the capital of France?", "Paris is the capital of France and sits on the Seine."),
    ("Which mountain is the tallest?", "Mount Everest is the tallest mountain above sea level."),
    ("Which planet is the largest?", "Jupiter is the largest planet of the solar system."),
    ("How fast is light?", "Light travels at about three hundred thousand kilometres a second."),
    ("When does water boil?", "Water boils at one hundred degrees Celsius at sea level."),
    ("Which river is the longest in Africa?", "The Nile is the longest river in Africa."),
]
FILLER = [
    "indeed",
    "as",
    "noted",
    "above",
    "the",
    "answer",
    "depends",
    "on",
    "the",
    "source",
    "and",
    "on",
    "how",
    "one",
    "counts",
    "it",
    "with",
    "some",
    "care",
    "taken",
    "over",
    "units",
    "names",
    "and",
    "dates",
    "in",
    "the",
    "records",
    "kept",
]


def make_cases(path: Path, rows: int) -> None:
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(rows):
            question, answer = FACTS[i % len(FACTS)]
            words = answer.split()
            if rng.random() < 0.2:  # a wrong answer: another fact, or half of this one
                other = FACTS[(i + 1) % len(FACTS)][1].split()
                words = other if rng.random() < 0.5 else words[: len(words) // 2]
            tail = rng.sample(FILLER, rng.randrange(0, 18))
            case = {
                "id": f"case-{i:06d}",
                "input": f"{question} (variant {i % 97})",
                "output": " ".join(words + tail),
                "reference": answer,
            }
            fh.write(json.dumps(case) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--stored", action="store_true", help="read the rows from a stored run")
    parser.add_argument("--browser", action="store_true", help="open the page in Chromium")
    args = parser.parse_args()
    work = CACHE / f"report-{args.rows}"
    work.mkdir(parents=True, exist_ok=True)
    cases, results, db = work / "cases.jsonl", work / "cases.results.jsonl", work / "runs.db"
    if not cases.exists():
        make_cases(cases, args.rows)
    request = RunRequest(str(cases), results=str(results), store=args.stored, db=str(db))
    t0 = time.perf_counter()
    summary = run_request(request)
    took = time.perf_counter() - t0
    print(f"run: {summary.results:,} results, {summary.failed:,} failed, {took:.1f} s")

    t0 = time.perf_counter()
    if args.stored:
        svc = Service(str(db))
        assert summary.run_id is not None
        rows = stored_rows(svc, summary.run_id)
        options = svc.get_run(summary.run_id).options
    else:
        rows = file_rows(str(results))
        options = run_options({}, None)
    made = build_report(summary, rows, options)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = render_html(made)
    t_render = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = work / "report.html"
    size = write_text(str(out), page)
    t_write = time.perf_counter() - t0
    md = write_text(str(work / "summary.md"), render_markdown(made))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    total = t_build + t_render + t_write
    print(
        f"report ({'stored run' if args.stored else 'results file'}): {len(made.rows):,} rows, "
        f"{made.failed:,} failed; HTML {size / 1e6:.1f} MB, Markdown {md / 1e3:.1f} kB"
    )
    print(
        f"  read + explain {t_build:.1f} s, render {t_render:.1f} s, write {t_write:.2f} s: "
        f"{total:.1f} s in all; peak RSS {peak:,.0f} MB; load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    if args.browser:
        in_browser(out)


def in_browser(path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        t0 = time.perf_counter()
        page.goto(path.resolve().as_uri())
        page.wait_for_selector("#rows tbody tr")
        loaded = time.perf_counter() - t0
        t0 = time.perf_counter()
        info = page.locator("#page-info")
        page.fill("#search", "case-099999")
        # polled from here: the page's CSP allows no eval, which wait_for_function needs
        expect(info).to_have_text("rows 1–1 of 1 (page 1 of 1)", timeout=120_000)
        searched = time.perf_counter() - t0
        page.fill("#search", "")
        expect(info).not_to_have_text("rows 1–1 of 1 (page 1 of 1)", timeout=120_000)
        t0 = time.perf_counter()
        page.click("#sort-score")
        page.wait_for_selector("#rows th[aria-sort=ascending]")
        sorted_in = time.perf_counter() - t0
        heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
        browser.close()
    print(
        f"  Chromium: first page of rows {loaded:.1f} s after opening, search over every row "
        f"{searched:.2f} s (with the 0.12 s pause after typing), sort by score {sorted_in:.2f} s; "
        f"JS heap {heap / 1e6:.0f} MB"
    )


if __name__ == "__main__":
    main()
