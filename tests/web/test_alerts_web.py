"""Alerts over HTTP and in the studio.

In-process (both backends): the ``/api/alerts`` routes, the watcher the app's lifespan starts
(woken by captures posted to the API), the Alerts page and the banner every page shows while
an alert is open. End to end: a real ``simeval serve`` process, a real webhook receiver on
127.0.0.1 and real headless Chromium: a rule fires on a drop, is delivered signed, shows in
the studio, and closes when the pass rate recovers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from browser import CHROMIUM_ARGS, need_browser, shot
from simeval.service import Service
from simeval.web.app import create_app
from simeval.web.server_process import running_server
from webhook_receiver import Received, webhook_receiver

REF = "Paris is the capital of France."
BAD = "Bananas grow on trees in warm tropical places."
SECRET = "alert-secret-for-tests"


def seed(db: str, webhook: str | None = None, window: int = 10) -> None:
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")
        rule: dict[str, Any] = {
            "name": "capital-low",
            "eval": "capital",
            "when": "pass_rate < 0.8",
            "window": window,
        }
        if webhook:
            rule.update(webhook=webhook, secret_env="SIMEVAL_ALERT_SECRET")
        svc.alerts.set_alert_rules([rule])


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    seed(db)
    # the timer is off (600 s): what the watcher does here, captures woke it to do
    app = create_app(db, alert_interval=600.0)
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        yield c


def post(client: Any, output: str, n: int) -> None:
    for _ in range(n):
        resp = client.post("/api/capture", json={"input": "q", "output": output})
        assert resp.status_code in (200, 201), resp.text


def wait_until(predicate: Any, seconds: float = 20.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_the_api_and_the_page_show_an_alert_the_captures_opened(client: TestClient) -> None:
    assert client.get("/api/alerts").json() == []
    assert [r["name"] for r in client.get("/api/alerts/rules").json()] == ["capital-low"]
    post(client, BAD, 10)
    assert wait_until(lambda: client.get("/api/alerts?status=open").json() != [])
    (alert,) = client.get("/api/alerts", params={"status": "open", "eval": "capital"}).json()
    assert alert["rule"] == "capital-low" and alert["value"] == 0.0
    assert client.get(f"/api/alerts/{alert['id']}").json()["status"] == "open"
    assert client.get(f"/api/alerts/{alert['id']}/deliveries").json() == []  # no webhook
    # every page shows the banner; the Alerts page lists it
    home = client.get("/").text
    assert 'id="alerts-banner"' in home and "1 open alert:" in home
    page = client.get("/alerts").text
    assert f'data-alert="{alert["id"]}" data-status="open"' in page
    assert "pass rate 0% &lt; 0.8 over the last 10 results" in page
    assert 'id="alerts-banner"' not in page
    # evaluating again opens nothing new; the recovery closes it
    assert client.post("/api/alerts/evaluate").json() == {"opened": [], "closed": []}
    post(client, REF, 10)
    assert wait_until(lambda: client.get("/api/alerts?status=closed").json() != [])
    assert client.get("/api/alerts?status=open").json() == []
    assert 'id="alerts-banner"' not in client.get("/").text
    assert 'data-status="closed"' in client.get("/alerts").text


def test_alerts_is_in_the_sidebar(client: TestClient) -> None:
    """Every page links to Alerts; on the alerts page the link is the one marked."""
    for path in ("/", "/dashboard", "/datasets"):
        assert 'class="nav " href="/alerts" id="nav-alerts">Alerts</a>' in client.get(path).text
    assert 'class="nav on" href="/alerts" id="nav-alerts"' in client.get("/alerts").text


def test_mistakes_get_a_json_error(client: TestClient) -> None:
    for url, status in (
        ("/api/alerts/999", 404),
        ("/api/alerts/999/deliveries", 404),
        ("/api/alerts?status=shut", 422),
        ("/api/alerts/0", 422),
    ):
        resp = client.get(url)
        assert resp.status_code == status, (url, resp.text)
        assert "error" in resp.json()
    resp = client.post("/api/alerts/rules/nope/test")
    assert resp.status_code == 404 and "no alert rule named 'nope'" in resp.json()["error"]
    resp = client.post("/api/alerts/rules/capital-low/test")
    assert resp.status_code == 400 and "has no webhook" in resp.json()["error"]


@pytest.mark.process
def test_the_test_route_posts_a_sample(
    new_sqlite: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIMEVAL_ALERT_SECRET", SECRET)
    db = new_sqlite("t.db")
    with webhook_receiver() as hook:
        seed(db, hook.url)
        with TestClient(create_app(db, alert_interval=None), base_url="http://127.0.0.1") as c:
            report = c.post("/api/alerts/rules/capital-low/test").json()
        (got,) = hook.wait_for(1)
    assert report["delivered"] and [a["status"] for a in report["attempts"]] == [200]
    assert got.signed_with(SECRET) and got.json()["event"] == "test"


def _events(hook: Any) -> list[str]:
    return [r.json()["event"] for r in hook.got]


@pytest.mark.browser
def test_a_drop_fires_is_delivered_shows_in_the_studio_and_closes(
    new_sqlite: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    monkeypatch.setenv("SIMEVAL_ALERT_SECRET", SECRET)  # the server process inherits it
    db = new_sqlite("studio.db")
    with webhook_receiver() as hook:
        seed(db, hook.url)
        # the timer is off (600 s): the stored captures wake the server's watcher
        with running_server(db, "--alert-interval", "600") as (base, _), sync_playwright() as pw:
            with httpx.Client(base_url=base, timeout=30) as api:
                post(api, REF, 10)
                post(api, BAD, 6)  # the last 10: 40% pass
                assert wait_until(lambda: "open" in _events(hook))
            opened: Received = hook.got[0]
            assert opened.signed_with(SECRET)
            body = opened.json()
            assert (body["event"], body["eval"], body["value"]) == ("open", "capital", 0.4)

            browser = pw.chromium.launch(
                executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
            )
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(base + "/")
            banner = page.locator("#alerts-banner")
            expect(banner).to_have_text("1 open alert: see Alerts")
            banner.click()
            expect(page).to_have_url(base + "/alerts")
            row = page.locator("#open-alerts tr[data-status='open']")
            expect(row).to_have_count(1)
            expect(row).to_contain_text("capital")
            expect(row).to_contain_text("pass rate 40% < 0.8 over the last 10 results")
            expect(row.locator("[data-delivery='open-1']")).to_contain_text("delivered (200)")
            shot(page, "alerts-open-1280.png")
            page.set_viewport_size({"width": 420, "height": 800})
            shot(page, "alerts-open-420.png")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 420 + 1, width  # the tables scroll inside their cards

            with httpx.Client(base_url=base, timeout=30) as api:
                post(api, REF, 10)  # recovered
                assert wait_until(lambda: "closed" in _events(hook))
            assert _events(hook) == ["open", "closed"]  # one alert, one close: no double fire
            assert all(r.signed_with(SECRET) for r in hook.got)
            page.set_viewport_size({"width": 1280, "height": 800})
            page.reload()
            expect(page.locator("#open-alerts tr[data-status='open']")).to_have_count(0)
            closed = page.locator("#closed-alerts tr[data-status='closed']")
            expect(closed).to_have_count(1)
            expect(closed.locator("[data-delivery='closed-1']")).to_contain_text("delivered")
            shot(page, "alerts-closed-1280.png")
            page.goto(base + "/")
            expect(page.locator("#alerts-banner")).to_have_count(0)
            browser.close()
