"""The studio with users: sign-in, the user and sign-out in the header, controls a role may not
use hidden (and their routes refusing), the admin's Users page (a new key shown once), the
Activity page and an eval's activity. The app in process on both backends, and real headless
Chromium against ``simeval serve`` for sign-in, a hidden control and a refused route."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from browser import CHROMIUM_ARGS, need_browser, shot
from simeval.service import Service
from simeval.service.actor import acting_as
from simeval.web import create_app
from simeval.web.server_process import running_server

BASE = "http://127.0.0.1:8000"
REF = "Paris is the capital of France."
PASSWORDS = {"ana": "ana-password", "vi": "vi-password"}


def seed(db: str) -> None:
    with Service(db) as svc:
        svc.users.add_user("ana", "admin", PASSWORDS["ana"])
        svc.users.add_user("vi", "viewer", PASSWORDS["vi"])
        with acting_as("ana", signed_in=True):
            svc.create_eval("cap", REF)
            svc.edit_eval("cap", threshold=0.7)


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    seed(db)
    with TestClient(create_app(db=db, identity_ttl=0, alert_interval=None), base_url=BASE) as c:
        yield c


def csrf(client: TestClient, path: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert match, path
    return match.group(1)


def sign_in(client: TestClient, name: str) -> None:
    form = {"csrf_token": csrf(client, "/login"), "name": name, "password": PASSWORDS[name]}
    assert client.post("/login", data=form, follow_redirects=False).status_code == 303


def test_a_viewer_sees_no_control_it_may_not_use(client: TestClient) -> None:
    sign_in(client, "vi")
    page = client.get("/evals/cap").text
    assert 'id="signed-in-user">vi<' in page and 'id="sign-out"' in page
    for control in ('id="edit-form"', 'id="run-test"', 'id="archive"', 'id="activate"'):
        assert control not in page, control
    assert 'id="eval-activity"' not in page  # the audit log is the admins'
    assert 'id="new-eval"' not in client.get("/").text
    settings = client.get("/settings").text
    assert 'id="settings-form"' not in settings and 'id="settings-read"' in settings
    assert 'id="nav-users"' not in settings and 'id="nav-activity"' not in settings
    assert client.get("/users").status_code == 403
    assert client.get("/activity").status_code == 403
    token = csrf(client, "/evals/cap")
    posted = client.post("/evals/cap/archive", data={"csrf_token": token})
    assert posted.status_code == 403 and "editor" in posted.text


def test_an_admin_sees_the_controls_versions_and_activity(client: TestClient) -> None:
    sign_in(client, "ana")
    page = client.get("/evals/cap").text
    assert 'id="edit-form"' in page and 'id="eval-activity"' in page
    assert 'class="small version-by">ana<' in page
    assert "eval.threshold" in page
    activity = client.get("/activity", params={"actor": "ana"}).text
    assert "eval.create" in activity and "eval.threshold" in activity
    assert 'id="nav-users"' in activity
    bad = client.get("/activity", params={"since": "whenever"})
    assert bad.status_code == 400 and "since" in bad.text


def test_the_users_page_adds_and_changes_users(db: str, client: TestClient) -> None:
    sign_in(client, "ana")
    token = csrf(client, "/users")
    made = client.post(
        "/users", data={"csrf_token": token, "name": "bo", "role": "reviewer", "password": ""}
    )
    assert made.status_code == 200
    key = re.search(r'id="new-key">([^<]+)<', made.text)
    assert key and key.group(1).startswith("simeval_")
    api = {"Authorization": f"Bearer {key.group(1)}"}
    assert client.get("/api/me", headers=api).json() == {"name": "bo", "role": "reviewer"}
    assert key.group(1) not in client.get("/users").text  # shown once
    client.post("/users/bo", data={"csrf_token": token, "action": "role", "role": "editor"})
    client.post("/users/bo", data={"csrf_token": token, "action": "disable"})
    with Service(db) as svc:
        bo = svc.users.get_user("bo")
        assert (bo.role, bo.disabled) == ("editor", True)
    assert client.get("/api/me", headers=api).status_code == 401
    renewed = client.post("/users/bo", data={"csrf_token": token, "action": "key"})
    assert 'id="new-key"' in renewed.text
    bad = client.post("/users", data={"csrf_token": token, "name": "no spaces", "role": "viewer"})
    assert bad.status_code == 400 and "invalid user name" in bad.text


@pytest.mark.browser
def test_sign_in_hidden_control_and_refused_route_in_chromium(
    new_sqlite: Callable[..., str],
) -> None:
    browser_path = need_browser()
    from playwright.sync_api import expect, sync_playwright

    db = new_sqlite("team.db")
    seed(db)
    with running_server(db) as (base, _), sync_playwright() as pw:
        assert httpx.get(base + "/api/evals").status_code == 401
        browser = pw.chromium.launch(
            executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(str(exc)))

        page.goto(base + "/evals/cap")  # sent to the sign-in form first
        expect(page).to_have_url(re.compile(r"/login\?next="))
        page.fill("input[name=name]", "vi")
        page.fill("input[name=password]", "wrong-password")
        page.click("#login-form button[type=submit]")
        expect(page.locator(".flash.err")).to_contain_text("wrong name or password")
        page.fill("input[name=password]", PASSWORDS["vi"])
        page.click("#login-form button[type=submit]")
        expect(page).to_have_url(re.compile(r"/evals/cap$"))
        expect(page.locator("#signed-in-user")).to_have_text("vi")
        expect(page.locator("#edit-form")).to_have_count(0)  # hidden from a viewer
        expect(page.locator("#archive")).to_have_count(0)
        shot(page, "users-viewer-eval-1280.png")

        refused = page.goto(base + "/users")  # an admin's page
        assert refused is not None and refused.status == 403
        expect(page.locator("main")).to_contain_text("admin")

        page.goto(base + "/")
        page.click("#sign-out")
        expect(page).to_have_url(re.compile(r"/login"))
        assert page.goto(base + "/results") is not None
        expect(page).to_have_url(re.compile(r"/login\?next="))

        # an admin signs in and sees the controls and the eval's activity
        page.fill("input[name=name]", "ana")
        page.fill("input[name=password]", PASSWORDS["ana"])
        page.click("#login-form button[type=submit]")
        page.goto(base + "/evals/cap")
        expect(page.locator("#edit-form")).to_have_count(1)
        expect(page.locator("#eval-activity")).to_contain_text("eval.threshold")
        shot(page, "users-admin-eval-1280.png")
        browser.close()
        assert problems == []
