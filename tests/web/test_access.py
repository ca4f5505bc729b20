"""Users and roles in force: once one user exists every call needs a user with the role its
route needs (``simeval.web.access``), on every host; only ``GET /api/health`` stays open.
The real app through the in-process client, on both backends."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.routing import Mount

from simeval.service import Service
from simeval.web import create_app
from simeval.web.access import ROUTE_ROLES, required_role, unmapped

BASE = "http://127.0.0.1:8000"
REF = "Paris is the capital of France."
ROLES = ("viewer", "reviewer", "editor", "admin", "ingest")


def app_routes(routes: Iterable[Any], prefix: str = "") -> Iterator[tuple[list[str], str]]:
    """(methods, path template) of every route the app serves, into included routers."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from app_routes(inner.routes, prefix)
        elif isinstance(route, Mount):
            yield ["GET", "POST"], prefix + route.path + "/{path:path}"
        else:
            yield sorted(route.methods or ["GET"]), prefix + route.path


def test_every_route_has_a_role(new_sqlite: Callable[..., str]) -> None:
    app = create_app(new_sqlite("r.db"), upstream="http://127.0.0.1:9/v1", alert_interval=None)
    routes = list(app_routes(app.routes))
    assert len(routes) > 100
    assert unmapped(routes) == []
    # and each resolves to its own entry, not to an earlier, wider one
    for methods, path in routes:
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        for method in methods:
            declared = [r for ms, t, r in ROUTE_ROLES if t == path and method in ms]
            assert required_role(method, concrete) == declared[0], (method, path)


def test_a_route_missing_from_the_table_is_caught() -> None:
    assert unmapped([(["POST"], "/api/new-thing")]) == [("POST", "/api/new-thing")]


@pytest.fixture
def keys(db: str) -> dict[str, str]:
    """A user of each role (name = role) and their keys; an active eval with one result."""
    with Service(db) as svc:
        made = {role: svc.users.add_user(role, role, "password-" + role).key for role in ROLES}
        svc.create_eval("capital", REF, threshold=0.8)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")
    return made


@pytest.fixture
def client(db: str, keys: dict[str, str]) -> Iterator[TestClient]:
    app = create_app(db=db, identity_ttl=0, alert_interval=None)
    with TestClient(app, base_url=BASE) as c:
        yield c


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_only_health_is_open_on_loopback_too(client: TestClient) -> None:
    assert client.get("/api/health").status_code == 200
    for path in ("/api/evals", "/api/results", "/api/settings", "/openapi.json", "/api/me"):
        r = client.get(path)
        assert r.status_code == 401, (path, r.status_code)
        assert "error" in r.json() and r.headers["www-authenticate"] == "Bearer"
    r = client.post("/api/capture", json={"input": "q", "output": REF})
    assert r.status_code == 401
    assert client.get("/api/evals", headers=auth("simeval_not-a-key")).status_code == 401
    page = client.get("/results", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/login?next=")


def test_any_host_name_is_served_once_users_exist(client: TestClient, keys: dict[str, str]) -> None:
    r = client.get("/api/me", headers={**auth(keys["viewer"]), "Host": "evals.example.org"})
    assert r.status_code == 200 and r.json() == {"name": "viewer", "role": "viewer"}


CALLS: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("GET", "/api/evals", None, "viewer"),
    ("GET", "/api/results", None, "viewer"),
    ("POST", "/api/evals", {"name": "new", "references": [REF]}, "editor"),
    ("PATCH", "/api/evals/capital", {"threshold": 0.7}, "editor"),
    ("PATCH", "/api/settings", {"auto_evaluate": True}, "admin"),
    ("POST", "/api/cleanup", None, "admin"),
    ("GET", "/api/users", None, "admin"),
    ("GET", "/api/audit", None, "admin"),
    ("POST", "/api/capture", {"input": "q", "output": REF}, "ingest"),
]


@pytest.mark.parametrize("role", ROLES)
def test_each_role_does_exactly_what_it_may(
    client: TestClient, keys: dict[str, str], role: str
) -> None:
    rank = {"viewer": 1, "reviewer": 2, "editor": 3, "admin": 4}
    for method, path, body, needed in CALLS:
        if needed == "ingest":
            allowed = role in ("ingest", "editor", "admin")
        else:
            allowed = role != "ingest" and rank[role] >= rank[needed]
        r = client.request(method, path, json=body, headers=auth(keys[role]))
        if allowed:
            assert r.status_code < 400, (role, method, path, r.status_code, r.text)
        else:
            assert r.status_code == 403, (role, method, path, r.status_code)
            assert r.json()["role_needed"] == needed and needed in r.json()["error"]


def test_a_review_needs_a_reviewer(client: TestClient, keys: dict[str, str]) -> None:
    cap = client.post(
        "/api/capture", json={"input": "q", "output": "Bananas."}, headers=auth(keys["ingest"])
    )
    rid = cap.json()["results"][0]["id"]
    body = {"score": 1.0}
    r = client.post(f"/api/results/{rid}/review", json=body, headers=auth(keys["viewer"]))
    assert r.status_code == 403 and r.json()["role_needed"] == "reviewer"
    r = client.post(f"/api/results/{rid}/review", json=body, headers=auth(keys["reviewer"]))
    assert r.status_code == 200, r.text


def test_a_disabled_user_or_a_replaced_key_is_refused_on_the_next_request(
    db: str, client: TestClient, keys: dict[str, str]
) -> None:
    assert client.get("/api/evals", headers=auth(keys["viewer"])).status_code == 200
    with Service(db) as other:  # another process's change (the CLI, another worker)
        other.users.set_user_disabled("viewer", True)
        new = other.users.new_user_key("editor").key
    r = client.get("/api/evals", headers=auth(keys["viewer"]))
    assert r.status_code == 401 and "disabled" in r.json()["error"]
    assert client.get("/api/evals", headers=auth(keys["editor"])).status_code == 401
    assert client.get("/api/evals", headers=auth(new)).status_code == 200


def test_a_worker_sees_a_revocation_within_its_cache_second(db: str, keys: dict[str, str]) -> None:
    with TestClient(create_app(db=db, alert_interval=None), base_url=BASE) as c:
        assert c.get("/api/evals", headers=auth(keys["viewer"])).status_code == 200
        with Service(db) as other:
            other.users.set_user_disabled("viewer", True)
        time.sleep(1.05)  # past the cache's second: no wall-clock bound is asserted
        assert c.get("/api/evals", headers=auth(keys["viewer"])).status_code == 401


def test_the_token_opens_nothing_once_users_exist(
    db: str, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(db=db, token="team-token", identity_ttl=0, alert_interval=None)
    with TestClient(app, base_url=BASE) as c:
        assert c.get("/api/evals", headers=auth("team-token")).status_code == 401
        assert c.get("/api/evals", headers={"X-Simeval-Token": keys["viewer"]}).status_code == 200


def test_the_token_still_works_without_users(new_sqlite: Callable[..., str]) -> None:
    app = create_app(db=new_sqlite("t.db"), token="team-token", alert_interval=None)
    with TestClient(app, base_url=BASE) as c:
        assert c.get("/api/evals").status_code == 401
        assert c.get("/api/evals", headers=auth("team-token")).status_code == 200
        assert c.get("/api/me", headers=auth("team-token")).json() == {"name": None, "role": None}


def test_last_used_is_recorded(db: str, client: TestClient, keys: dict[str, str]) -> None:
    client.get("/api/evals", headers=auth(keys["reviewer"]))
    with Service(db) as svc:
        assert svc.users.get_user("reviewer").last_used_at is not None
        assert svc.users.get_user("viewer").last_used_at is None


def csrf_of(client: TestClient, path: str = "/login") -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text)
    assert match
    return match.group(1)


def sign_in(client: TestClient, name: str, password: str) -> Any:
    form = {"csrf_token": csrf_of(client), "name": name, "password": password, "next": "/"}
    return client.post("/login", data=form, follow_redirects=False)


def test_sign_in_with_a_password_then_pages_follow_the_role(db: str, client: TestClient) -> None:
    assert "Password" in client.get("/login").text
    assert sign_in(client, "viewer", "wrong-password").status_code == 401
    r = sign_in(client, "viewer", "password-viewer")
    assert r.status_code == 303, r.text
    page = client.get("/results")
    assert page.status_code == 200 and 'id="signed-in-user">viewer<' in page.text
    refused = client.get("/evals/new")
    assert refused.status_code == 403 and "editor" in refused.text
    api = client.post("/api/evals", json={"name": "x", "references": [REF]})
    assert api.status_code == 403 and api.json()["role_needed"] == "editor"
    with Service(db) as other:
        other.users.set_user_disabled("viewer", True)
    assert client.get("/results", follow_redirects=False).status_code == 303  # to sign-in


@pytest.mark.slow
def test_failed_sign_ins_are_throttled_per_name(client: TestClient) -> None:
    for _ in range(10):
        assert sign_in(client, "admin", "not-the-password").status_code == 401
    r = sign_in(client, "admin", "password-admin")  # right, but too late
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert sign_in(client, "editor", "password-editor").status_code == 303  # another name


def test_the_standalone_proxy_needs_an_ingest_key_once_users_exist(
    db: str, keys: dict[str, str]
) -> None:
    from simeval.web.proxy import create_proxy_app

    app = create_proxy_app("http://127.0.0.1:9/v1", db)
    with TestClient(app, base_url=BASE) as c:
        assert c.get("/api/health").status_code == 200
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        assert c.post("/v1/chat/completions", json=body).status_code == 401
        viewer = {"X-Simeval-Token": keys["viewer"]}
        r = c.post("/v1/chat/completions", json=body, headers=viewer)
        assert r.status_code == 403 and r.json()["role_needed"] == "ingest"
        ingest = {"X-Simeval-Token": keys["ingest"]}
        r = c.post(
            "/v1/traces", content=b"", headers={**ingest, "Content-Type": "application/json"}
        )
        assert r.status_code not in (401, 403), r.text


def test_an_admin_manages_users_through_the_api(client: TestClient, keys: dict[str, str]) -> None:
    admin = auth(keys["admin"])
    body = {"name": "dana@example.org", "role": "viewer", "password": "a long password"}
    assert client.post("/api/users", json=body, headers=auth(keys["editor"])).status_code == 403
    r = client.post("/api/users", json=body, headers=admin)
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["user"]["role"] == "viewer" and made["key"].startswith(made["user"]["key_prefix"])
    dana = auth(made["key"])
    me = client.get("/api/me", headers=dana).json()
    assert me == {"name": "dana@example.org", "role": "viewer"}
    listed = {u["name"]: u for u in client.get("/api/users", headers=admin).json()}
    assert listed["dana@example.org"]["role"] == "viewer"
    assert made["key"] not in client.get("/api/users", headers=admin).text
    # refused: the same name again, a bad name, a role that does not exist, an unknown user
    assert client.post("/api/users", json=body, headers=admin).status_code == 409
    for bad in ({**body, "name": "no spaces"}, {**body, "role": "owner"}):
        r = client.post("/api/users", json=bad, headers=admin)
        assert 400 <= r.status_code < 500 and "error" in r.json(), r.text
    r = client.patch("/api/users/nobody", json={"role": "editor"}, headers=admin)
    assert r.status_code == 404, r.text

    r = client.patch("/api/users/dana@example.org", json={"role": "editor"}, headers=admin)
    assert r.status_code == 200 and r.json()["role"] == "editor"
    assert client.get("/api/me", headers=dana).json()["role"] == "editor"
    r = client.patch("/api/users/dana@example.org", json={"disabled": True}, headers=admin)
    assert r.status_code == 200 and r.json()["disabled"] is True
    assert client.get("/api/me", headers=dana).status_code == 401
    client.patch("/api/users/dana@example.org", json={"disabled": False}, headers=admin)
    r = client.post("/api/users/dana@example.org/key", headers=admin)
    assert r.status_code == 200, r.text
    assert client.get("/api/me", headers=dana).status_code == 401  # the old key stopped
    assert client.get("/api/me", headers=auth(r.json()["key"])).status_code == 200
    # the last enabled admin cannot take its own rights away (409, nothing changed)
    for change in ({"role": "editor"}, {"disabled": True}):
        r = client.patch("/api/users/admin", json=change, headers=admin)
        assert r.status_code == 409 and "last enabled admin" in r.json()["error"], r.text
    assert client.get("/api/me", headers=admin).json() == {"name": "admin", "role": "admin"}
    entries = client.get("/api/audit", headers=admin).json()["entries"]
    mine = [e["action"] for e in entries if e["target"] == "user:dana@example.org"]
    assert mine == ["user.key", "user.enable", "user.disable", "user.role", "user.add"]
    assert {e["actor"] for e in entries if e["target"] == "user:dana@example.org"} == {"admin"}
