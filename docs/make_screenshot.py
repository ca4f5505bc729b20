"""Take docs/studio.png: the real studio in headless Chromium, on a week of example captures.

Starts `simeval serve` on a temporary SQLite file, creates, tests and activates three evals
through the HTTP API (each scoped to one question), posts captures to `POST /api/capture` (a
dip on day 4, a threshold change on day 5), then spreads the stored captures and results over
the past seven days with one SQL update (the API stamps everything "now", and a screenshot of
one hour shows no trend). Needs the test extra (playwright) and Debian's chromium.

    .venv/bin/python docs/make_screenshot.py            # writes docs/studio.png
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from simeval.web.server_process import running_server

HERE = Path(__file__).resolve().parent
EVALS = {
    "capital-answer": (
        "Paris is the capital of France and its largest city.",
        [
            "The capital of France is Paris, which is also its largest city.",
            "Paris is the capital of France.",
            "France's capital and largest city is Paris.",
        ],
        ["I think it is Lyon.", "France is a country in Europe.", "The capital is Marseille."],
    ),
    "refund-policy": (
        "Refunds are issued within 14 days of purchase to the original payment method.",
        [
            "We issue refunds within 14 days of purchase, to the original payment method.",
            "Refunds go to the original payment method within 14 days of the purchase.",
            "A refund is issued to your original payment method within 14 days.",
        ],
        ["Please contact support about refunds.", "Refunds take a while.", "No refunds."],
    ),
    "shipping-time": (
        "Standard shipping takes 3 to 5 business days; express shipping takes 1 to 2 days.",
        [
            "Standard shipping takes 3-5 business days and express shipping 1-2 days.",
            "Express shipping takes 1 to 2 days, standard shipping 3 to 5 business days.",
        ],
        ["Shipping is fast.", "It depends on where you live.", "Orders ship from our warehouse."],
    ),
}
DAYS = 7
PER_DAY = 14


def question(name: str) -> str:
    """The input each eval is scoped to: one eval per question, as an engine would have it."""
    return {
        "capital-answer": "What is the capital of France?",
        "refund-policy": "How do refunds work?",
        "shipping-time": "How long does shipping take?",
    }[name]


def fill(api: httpx.Client) -> list[int]:
    """The evals and a week of captures; returns the capture ids in the order posted."""
    for name, (ref, good, _poor) in EVALS.items():
        body = {"name": name, "references": [ref], "input_scope": question(name)}
        api.post("/api/evals", json=body).raise_for_status()
        assert api.post(f"/api/evals/{name}/test", json={"output": good[0]}).json()["passed"]
        api.post(f"/api/evals/{name}/activate").raise_for_status()
    rng = random.Random(4)
    ids = []
    for day in range(DAYS):
        if day == 4:  # a new version of one eval: the chart marks it
            api.patch("/api/evals/capital-answer", json={"threshold": 0.75})
            api.post(
                "/api/evals/capital-answer/test", json={"output": EVALS["capital-answer"][1][0]}
            )
            api.post("/api/evals/capital-answer/activate")
        poor_share = 0.55 if day == 3 else 0.15  # an engine regression on day 4
        for i in range(PER_DAY):
            name = list(EVALS)[i % len(EVALS)]
            ref, good, poor = EVALS[name]
            output = rng.choice(poor if rng.random() < poor_share else good)
            body = {"input": question(name), "output": output}
            ids.append(
                api.post("/api/capture", json={**body, "conversation_id": f"c{i}"}).json()["id"]
            )
    return ids


def spread(db: Path, ids: list[int]) -> None:
    """Stamp the captures (and their results) over the past DAYS days, in posting order."""
    now = datetime.now(UTC).replace(tzinfo=None, minute=0, second=0, microsecond=0)
    first = now - timedelta(days=DAYS - 1, hours=now.hour) + timedelta(hours=8)
    with sqlite3.connect(db) as conn:
        for k, cid in enumerate(ids):
            day, i = divmod(k, PER_DAY)
            when = first + timedelta(days=day, minutes=40 * i)
            stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f")
            conn.execute("UPDATE captures SET captured_at = ? WHERE id = ?", (stamp, cid))
            conn.execute("UPDATE results SET created_at = ? WHERE capture_id = ?", (stamp, cid))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "demo.db"
        with running_server(db) as (url, _):
            with httpx.Client(base_url=url) as api:
                ids = fill(api)
            spread(db, ids)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": 1280, "height": 820})
                page.goto(url + "/dashboard?eval=capital-answer&bucket=day")
                page.wait_for_selector("#trend-chart[data-rendered=true]")
                page.wait_for_selector("#hist-chart[data-rendered=true]")
                page.screenshot(path=str(HERE / "studio.png"))
                browser.close()
    print(HERE / "studio.png", (HERE / "studio.png").stat().st_size, "bytes")


if __name__ == "__main__":
    main()
