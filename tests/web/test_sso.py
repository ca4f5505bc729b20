"""SSO through the team's proxy: ``serve --user-header X-Forwarded-User`` with
``--forwarded-allow-ips``. The header names the user only on a request straight from an
allowed address (a forwarded address cannot fake one); an unknown name becomes a viewer unless
``--user-header-create no``. The app in process on both backends, and ``simeval serve``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from tests.clihelp import one_line_error

from simeval.cli import cli
from simeval.service import Service
from simeval.web import create_app
from simeval.web.server_process import running_server
from simeval.web.sso import UserHeader

BASE = "http://127.0.0.1:8000"
PROXY, ELSEWHERE = "10.0.0.5", "10.0.0.9"
WHO = "X-Forwarded-User"


def client_from(db: str, address: str, create: bool = True) -> TestClient:
    app = create_app(db=db, alert_interval=None, user_header=UserHeader(WHO, "10.0.0.0/29", create))
    return TestClient(app, base_url=BASE, client=(address, 40000))


@pytest.fixture
def proxy(db: str) -> Iterator[TestClient]:
    with client_from(db, PROXY) as c:
        yield c


@pytest.mark.slow
def test_the_proxy_names_the_user_who_is_made_a_viewer(db: str, proxy: TestClient) -> None:
    ana = {WHO: "ana@example.org"}
    r = proxy.get("/api/me", headers=ana)
    assert r.status_code == 200 and r.json() == {"name": "ana@example.org", "role": "viewer"}
    refused = proxy.post("/api/evals", json={"name": "x", "references": ["y"]}, headers=ana)
    assert refused.status_code == 403 and refused.json()["role_needed"] == "editor"
    with Service(db) as svc:
        assert svc.users.get_user("ana@example.org").role == "viewer"
        svc.users.set_user_role("ana@example.org", "editor")
        (made,) = [e for e in svc.audit_log().entries if e.action == "user.add"]
        assert made.detail == {"role": "viewer", "via": "sso"}
    proxy.app.state.identities.forget()  # type: ignore[attr-defined]
    r = proxy.post("/api/evals", json={"name": "x", "references": ["y"]}, headers=ana)
    assert r.status_code == 201, r.text
    versions = proxy.get("/api/evals/x/versions", headers=ana).json()
    assert versions[0]["created_by"] == "ana@example.org"
    page = proxy.get("/", headers=ana)
    assert 'id="signed-in-user">ana@example.org<' in page.text


def test_no_header_or_a_bad_name_needs_a_key(proxy: TestClient) -> None:
    assert proxy.get("/api/evals").status_code == 401  # even before any user exists
    assert proxy.get("/api/evals", headers={WHO: "not a name"}).status_code == 401
    assert proxy.get("/api/health").status_code == 200


def test_the_header_is_ignored_from_any_other_address(db: str) -> None:
    with client_from(db, ELSEWHERE) as c:
        assert c.get("/api/me", headers={WHO: "ana"}).status_code == 401
        # a forwarded address claiming to be the proxy changes nothing
        spoof = {WHO: "ana", "X-Forwarded-For": PROXY}
        assert c.get("/api/me", headers=spoof).status_code == 401
    with Service(db) as svc:
        assert svc.users.list_users() == []  # nobody was made


def test_behind_the_proxy_the_forwarded_client_is_applied(proxy: TestClient) -> None:
    r = proxy.get("/api/me", headers={WHO: "bo", "X-Forwarded-For": "203.0.113.7"})
    assert r.status_code == 200 and r.json()["name"] == "bo"


def test_without_create_an_unknown_name_is_refused(db: str) -> None:
    with Service(db) as svc:
        svc.users.add_user("known", "reviewer")
    with client_from(db, PROXY, create=False) as c:
        assert c.get("/api/me", headers={WHO: "stranger"}).status_code == 401
        assert c.get("/api/me", headers={WHO: "known"}).json() == {
            "name": "known",
            "role": "reviewer",
        }
    with Service(db) as svc:
        assert [u.name for u in svc.users.list_users()] == ["known"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--user-header", WHO), "--forwarded-allow-ips"),
        (("--user-header", WHO, "--forwarded-allow-ips", "proxy.local"), "not an IP address"),
        (("--user-header", "X User", "--forwarded-allow-ips", "127.0.0.1"), "not a header"),
        (("--user-header-create", "maybe"), "yes or no"),
    ],
)
def test_bad_serve_options_are_one_line(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    res = CliRunner().invoke(cli, ["serve", "--port", "0", "--db", str(tmp_path / "s.db"), *args])
    one_line_error(res, needle)


@pytest.mark.process
def test_serve_signs_in_from_the_allowed_address_only(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("sso.db"))
    options = ("--user-header", WHO, "--forwarded-allow-ips", "127.0.0.1")
    with running_server(db, *options) as (base, _):
        with httpx.Client(base_url=base) as proxy:
            r = proxy.get("/api/me", headers={WHO: "cy"})
            assert r.status_code == 200 and r.json() == {"name": "cy", "role": "viewer"}
        # another local address: the same header is not believed
        other = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=base, transport=other) as stranger:
            assert stranger.get("/api/me", headers={WHO: "cy"}).status_code == 401
            assert stranger.get("/api/health").status_code == 200
