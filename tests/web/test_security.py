"""Security defaults: escaping, bind refusal, token, CSRF and origin checks, body limit."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from simeval.cli import cli
from simeval.web import create_app
from simeval.web.security import CSRF_COOKIE, check_bind, is_loopback
from simeval.web.server_process import running_server

BASE = "http://127.0.0.1:8000"
REF = "Paris is the capital of France."
XSS = "<script>alert('x')</script><img src=x onerror=alert(1)>"


@pytest.fixture
def db(new_sqlite: Callable[..., str]) -> str:
    return new_sqlite("sec.db")


@pytest.fixture
def client(db: str) -> Iterator[TestClient]:
    with TestClient(create_app(db=db), base_url=BASE) as c:
        yield c


def csrf_of(client: TestClient, path: str = "/evals/new/similarity") -> str:
    """Load a form page; return the CSRF token of its form (the cookie is now set)."""
    html = client.get(path).text
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "the form carries a CSRF token"
    assert client.cookies.get(CSRF_COOKIE)  # the session it is tied to
    return match.group(1)


def eval_form(token: str, name: str = "capital") -> dict[str, str]:
    return {"csrf_token": token, "name": name, "references": REF, "threshold": "0.8"}


# -- escaping ------------------------------------------------------------------------------
def test_user_text_is_escaped_in_every_page(client: TestClient) -> None:
    r = client.post(
        "/api/evals", json={"name": "xss", "references": [XSS, REF], "input_scope": XSS}
    )
    assert r.status_code == 201, r.text
    client.post("/api/evals/xss/test", json={"input": XSS, "output": REF})
    client.post("/api/evals/xss/activate")
    cap = client.post(
        "/api/capture", json={"input": XSS, "output": XSS + " " + REF, "conversation_id": XSS}
    ).json()
    rid = cap["results"][0]["id"]
    client.post(f"/api/results/{rid}/review", json={"score": 0.1, "note": XSS})
    pages = ["/", "/evals/xss", "/dashboard", "/dashboard?eval=xss", "/results", f"/results/{rid}"]
    for page in pages:
        html = client.get(page).text
        assert "<script>alert" not in html, page
        assert "<img src=x" not in html, page
    html = client.get("/evals/xss").text
    assert "&lt;script&gt;alert(" in html  # rendered as text, visible to the user
    assert "&lt;script&gt;alert(" in client.get(f"/results/{rid}").text


def test_pages_send_a_strict_content_security_policy(client: TestClient) -> None:
    r = client.get("/")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "<script>" not in r.text  # no inline script: the policy allows none
    assert r.headers["x-content-type-options"] == "nosniff"


def test_chart_data_cannot_break_out_of_its_script_element(client: TestClient) -> None:
    name = "chart-xss"
    client.post("/api/evals", json={"name": name, "references": [REF]})
    client.post(f"/api/evals/{name}/test", json={"input": "q", "output": REF})
    client.post(f"/api/evals/{name}/activate")
    client.post("/api/capture", json={"input": "q", "output": REF})
    html = client.get(f"/dashboard?eval={name}").text
    blocks = re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', html, re.S)
    assert len(blocks) == 2
    assert all("<" not in b for b in blocks)


# -- bind ----------------------------------------------------------------------------------
def test_is_loopback() -> None:
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2", "[::1]"):
        assert is_loopback(host)
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        assert not is_loopback(host)


def test_non_loopback_bind_without_token_refuses_to_start(db: str, monkeypatch: Any) -> None:
    monkeypatch.delenv("SIMEVAL_TOKEN", raising=False)
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--port", "0", "--db", db])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: refusing to listen on 0.0.0.0")
    assert "SIMEVAL_TOKEN" in lines[0]
    with pytest.raises(Exception, match="SIMEVAL_TOKEN"):
        check_bind("192.168.1.10", None)
    check_bind("192.168.1.10", "a-token")  # with a token it may
    check_bind("127.0.0.1", None)


def test_unknown_host_names_are_refused_without_token(client: TestClient) -> None:
    # A DNS-rebinding page reaches 127.0.0.1 under its own name: refused.
    r = client.get("/api/evals", headers={"host": "evil.example:8000"})
    assert r.status_code == 400 and "host" in r.json()["error"]
    assert client.get("/api/evals", headers={"host": "localhost:8000"}).status_code == 200


# -- token ---------------------------------------------------------------------------------
@pytest.fixture
def locked(db: str) -> Iterator[TestClient]:
    with TestClient(
        create_app(db=db, token="s3cret-token"),
        base_url="http://10.0.0.5:8000",
        follow_redirects=False,
    ) as c:
        yield c


def test_api_requires_the_token(locked: TestClient) -> None:
    for method, path in [
        ("get", "/api/evals"),
        ("post", "/api/capture"),
        ("get", "/api/results"),
        ("get", "/api/settings"),
        ("get", "/openapi.json"),
        ("post", "/evals"),
    ]:
        r = getattr(locked, method)(path)
        assert r.status_code == 401, (path, r.status_code)
        assert "token" in r.json()["error"]
    bad = locked.get("/api/evals", headers={"Authorization": "Bearer wrong"})
    assert bad.status_code == 401
    assert locked.get("/api/evals", headers={"Authorization": "Bearer s3cret-token"}).json() == []
    assert locked.get("/api/evals", headers={"X-Simeval-Token": "s3cret-token"}).json() == []
    r = locked.post(
        "/api/capture",
        json={"input": "q", "output": "a"},
        headers={"Authorization": "Bearer s3cret-token"},
    )
    assert r.status_code == 201
    assert locked.get("/api/health").status_code == 200  # the probe stays open


def test_pages_require_the_token(locked: TestClient) -> None:
    for page in ("/dashboard", "/", "/results", "/settings", "/docs"):
        r = locked.get(page)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), page
    assert locked.get("/static/studio.css").status_code == 200  # assets stay public
    # ?token= once: traded for the session cookie, dropped from the URL.
    r = locked.get("/dashboard?token=wrong")
    assert r.headers["location"].startswith("/login")
    r = locked.get("/dashboard?token=s3cret-token&eval=x")
    assert r.status_code == 303 and r.headers["location"] == "/dashboard?eval=x"
    assert "s3cret-token" not in r.headers["set-cookie"]  # the cookie holds a digest
    assert locked.get("/").status_code == 200
    assert locked.get("/api/evals").status_code == 200  # the session works for the API too


def test_login_form(locked: TestClient) -> None:
    html = locked.get("/login?next=/results").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
    r = locked.post("/login", data={"csrf_token": token, "token": "nope", "next": "/results"})
    assert r.status_code == 401 and "wrong token" in r.text
    assert locked.get("/").status_code == 303
    r = locked.post(
        "/login", data={"csrf_token": token, "token": "s3cret-token", "next": "//evil.example/"}
    )
    assert r.status_code == 303 and r.headers["location"] == "/"  # no open redirect
    assert locked.get("/").status_code == 200
    r = locked.post("/logout", data={"csrf_token": token})
    assert r.status_code == 303
    locked.cookies.delete("simeval_session")
    assert locked.get("/").status_code == 303


# -- CSRF and origin -----------------------------------------------------------------------
def test_forged_form_posts_are_rejected(client: TestClient) -> None:
    token = csrf_of(client)
    # No token in the form.
    r = client.post("/evals", data={"name": "a", "references": REF, "threshold": "0.8"})
    assert r.status_code == 403 and "CSRF" in r.text
    # A token that is not this browser's.
    r = client.post("/evals", data=eval_form("x" * 43))
    assert r.status_code == 403
    # The right token, but posted from another site's page.
    r = client.post("/evals", data=eval_form(token), headers={"origin": "http://evil.example"})
    assert r.status_code == 403
    r = client.post("/evals", data=eval_form(token), headers={"sec-fetch-site": "cross-site"})
    assert r.status_code == 403
    # A cookie-less browser (the attacker cannot set ours).
    client.cookies.clear()
    r = client.post("/evals", data=eval_form(token))
    assert r.status_code == 403
    assert client.get("/api/evals").json() == []
    # The genuine form works.
    token = csrf_of(client)
    r = client.post("/evals", data=eval_form(token), follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/evals/capital")
    assert [e["name"] for e in client.get("/api/evals").json()] == ["capital"]


def test_every_form_action_checks_csrf(client: TestClient) -> None:
    client.post("/api/evals", json={"name": "c", "references": [REF]})
    client.post("/api/evals/c/test", json={"input": "q", "output": REF})
    client.post("/api/evals/c/activate")
    rid = client.post("/api/capture", json={"input": "q", "output": REF}).json()["results"][0]["id"]
    for path in [
        "/examples",
        "/evals",
        "/evals/c/edit",
        "/evals/c/test",
        "/evals/c/activate",
        "/evals/c/deactivate",
        "/evals/c/archive",
        f"/results/{rid}/review",
        "/settings",
        "/settings/cleanup",
        "/logout",
    ]:
        r = client.post(path, data={"score": "0.1", "output": "x"})
        assert r.status_code == 403, path
    assert client.get("/api/evals/c").json()["status"] == "active"
    assert client.get(f"/api/results/{rid}").json()["review"] is None


def test_cross_origin_api_calls_are_refused(client: TestClient) -> None:
    body = {"name": "a", "references": [REF]}
    r = client.post("/api/evals", json=body, headers={"origin": "http://evil.example"})
    assert r.status_code == 403 and r.json()["error"] == "cross-origin request refused"
    r = client.post("/api/evals", json=body, headers={"origin": "null"})
    assert r.status_code == 403
    # A same-origin call (the studio's own page) and a non-browser client pass.
    r = client.post("/api/evals", json=body, headers={"origin": BASE})
    assert r.status_code == 201
    # text/plain (what a cross-site form or no-cors fetch can send) is not accepted as JSON.
    r = client.post(
        "/api/evals",
        content=b'{"name": "b", "references": ["x"]}',
        headers={"content-type": "text/plain"},
    )
    assert r.status_code == 422
    assert [e["name"] for e in client.get("/api/evals").json()] == ["a"]


# -- body limit ----------------------------------------------------------------------------
def test_oversized_body_gets_413(db: str) -> None:
    with TestClient(create_app(db=db, max_body=2048), base_url=BASE) as c:
        big = {"input": "q", "output": "word " * 1000}
        r = c.post("/api/capture", json=big)
        assert r.status_code == 413 and "2048" in r.json()["error"]
        ok = c.post("/api/capture", json={"input": "q", "output": "word " * 100})
        assert ok.status_code == 201

        def chunks() -> Iterator[bytes]:  # streamed: no Content-Length to check up front
            yield b'{"input": "q", "output": "'
            for _ in range(100):
                yield b"word " * 10
            yield b'"}'

        r = c.post("/api/capture", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        # A form post over the limit too.
        token = csrf_of(c)
        r = c.post("/evals", data={**eval_form(token), "references": "x " * 3000})
        assert r.status_code == 413
        assert c.get("/api/results").json()["total"] == 0
        assert c.get("/api/evals").json() == []


def test_default_limit_is_one_mebibyte(client: TestClient) -> None:
    r = client.post("/api/capture", json={"input": "q", "output": "a" * (1_048_576 + 10)})
    assert r.status_code == 413
    r = client.post("/api/capture", json={"input": "q", "output": "a " * 400_000})
    assert r.status_code == 201


# -- the real server: `simeval serve` options and environment -------------------------------
@pytest.mark.process
def test_served_body_limit_and_token(new_sqlite: Callable[..., str]) -> None:
    db = new_sqlite("served.db")
    with running_server(db, "--max-body", "4096", token="served-token") as (url, _):
        auth = {"Authorization": "Bearer served-token"}
        api = httpx.Client(base_url=url, headers=auth)
        assert api.post("/api/evals", json={"name": "c", "references": [REF]}).status_code == 201
        assert api.post("/api/evals/c/test", json={"output": REF}).json()["passed"]
        assert api.post("/api/evals/c/activate").status_code == 200
        body = {"input": "q", "output": REF}
        r = httpx.post(url + "/api/capture", json=body)
        assert r.status_code == 401 and "token" in r.json()["error"]
        assert httpx.post(url + "/api/capture", json=body, headers=auth).status_code == 201
        big = {"input": "q", "output": "word " * 2000}
        r = httpx.post(url + "/api/capture", json=big, headers=auth)
        assert r.status_code == 413 and "4096" in r.json()["error"]
        r = httpx.get(url + "/dashboard", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
        assert api.get("/api/results").json()["total"] == 1  # the accepted capture only
        api.close()


# -- issue 10: CSRF tied to the session, Secure cookies, the docs' headers, CSV formulas --------
def test_a_made_up_equal_cookie_and_field_pair_is_refused(client: TestClient) -> None:
    for forged in ("", "x", "A" * 43, "A" * 43 + ".deadbeef"):
        client.cookies.clear()
        client.cookies.set(CSRF_COOKIE, forged)
        r = client.post("/evals", data=eval_form(forged))
        assert r.status_code == 403, forged
        client.cookies.clear()
    # a genuine session's token does not work with another session's cookie
    token = csrf_of(client)
    client.cookies.clear()
    csrf_of(client)  # a new session
    assert client.post("/evals", data=eval_form(token)).status_code == 403
    assert client.get("/api/evals").json() == []
    # the session id is 32 random bytes, signed; the form's token is not the cookie
    sid, _, sig = (client.cookies.get(CSRF_COOKIE) or "").partition(".")
    assert len(sid) >= 43 and len(sig) == 64
    assert csrf_of(client) not in (client.cookies.get(CSRF_COOKIE), sid)


def test_cookies_are_secure_over_https(db: str) -> None:
    with TestClient(create_app(db=db), base_url="https://127.0.0.1") as c:
        r = c.get("/evals/new/similarity")
        assert "secure" in r.headers["set-cookie"].lower()
    with TestClient(create_app(db=db), base_url="http://127.0.0.1") as c:
        assert "secure" not in c.get("/evals/new/similarity").headers["set-cookie"].lower()
    with TestClient(
        create_app(db=db, token="s3cret-token"),
        base_url="https://10.0.0.5",
        follow_redirects=False,
    ) as c:
        r = c.get("/results?token=s3cret-token")
        assert r.status_code == 303 and "secure" in r.headers["set-cookie"].lower()


def test_docs_cannot_be_framed_and_run_only_their_own_scripts(client: TestClient) -> None:
    for path in ("/docs", "/redoc"):
        r = client.get(path)
        assert r.status_code == 200
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp
        assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
        assert r.headers["x-frame-options"] == "DENY"
        assert int(r.headers["content-length"]) == len(r.content)
    assert "'sha256-" in client.get("/docs").headers["content-security-policy"]


def test_csv_export_neutralises_formulas(client: TestClient) -> None:
    client.post("/api/evals", json={"name": "c", "references": [REF]})
    client.post("/api/evals/c/test", json={"input": "q", "output": REF})
    client.post("/api/evals/c/activate")
    evil = ['=HYPERLINK("http://evil")', "+1+1", "-2+3", "@SUM(A1)", "\t=1"]
    for text in evil:
        assert client.post("/api/capture", json={"input": text, "output": text}).status_code == 201
    rows = list(csv.DictReader(io.StringIO(client.get("/api/results/export").text)))
    assert sorted(r["output"] for r in rows) == sorted("'" + t for t in evil)
    assert all(not r["input"].startswith(("=", "+", "-", "@", "\t")) for r in rows)
    # JSON keeps the text as it is
    assert sorted(r["output"] for r in client.get("/api/results/export?format=json").json()) == (
        sorted(evil)
    )
