"""The database gone under a running server (PostgreSQL crashed; a SQLite file whose reads
fail with EIO): ``/api/health``, every page and the API say so (503 with Retry-After, never
"damaged" for a failing read), and all answer again once it is back, without a restart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from eiohelp import eio_env
from pghelp import PgServer, own_pg_server, pg_ctl
from simeval.service import Service
from simeval.web.server_process import running_server

PAGES = ("/dashboard", "/results", "/datasets")


def recovered(http: httpx.Client) -> dict[str, int]:
    """The status of health and of every page once they all answer 200, or after ~20 s."""
    statuses: dict[str, int] = {}
    for _ in range(100):  # bounded
        statuses = {p: http.get(p).status_code for p in ("/api/health", *PAGES)}
        if set(statuses.values()) == {200}:
            break
        time.sleep(0.2)
    return statuses


def stopped_and_said(server: PgServer, http: Any) -> None:
    """PostgreSQL crashed (stopped at once), and ``/api/health`` saying so: 503 naming the
    database, with Retry-After."""
    pg_ctl(server, "stop", mode="immediate")
    time.sleep(1.2)  # past the health check's cache
    health = http.get("/api/health")
    assert health.status_code == 503, health.text
    assert "database" in health.json()["error"]
    assert int(health.headers["retry-after"]) >= 1


@pytest.mark.process
def test_postgresql_crashed_is_503_everywhere_and_recovers() -> None:
    with own_pg_server() as server:
        url = f"{server.base_url}/postgres"
        with Service(url) as svc:
            svc.create_eval("capital", "The capital of France is Paris.", threshold=0.5)
        with (
            running_server(url) as (base, _proc),
            httpx.Client(base_url=base, timeout=30, trust_env=False) as http,
        ):
            for path in ("/api/health", *PAGES):
                assert http.get(path).status_code == 200, path
            stopped_and_said(server, http)
            for path in PAGES:
                page = http.get(path)
                assert page.status_code == 503, (path, page.text[:300])
                assert "database" in page.text and "Traceback" not in page.text
                assert int(page.headers["retry-after"]) >= 1
            api = http.get("/api/evals")
            assert api.status_code == 503 and "database" in api.json()["error"]
            pg_ctl(server, "start")
            statuses = recovered(http)
            assert set(statuses.values()) == {200}, statuses


@pytest.mark.process
def test_the_proxys_health_says_the_database_is_gone() -> None:
    """``simeval proxy``'s ``/api/health`` checks the database as ``serve``'s does: 503 naming
    it while PostgreSQL is down (it said "ok"), 200 once it is back."""
    from fastapi.testclient import TestClient

    from simeval.web.proxy import create_proxy_app

    with own_pg_server() as server:
        url = f"{server.base_url}/postgres"
        app = create_proxy_app("http://127.0.0.1:9/v1", url)
        with TestClient(app, base_url="http://127.0.0.1") as http:
            assert http.get("/api/health").json()["status"] == "ok"
            stopped_and_said(server, http)
            pg_ctl(server, "start")
            for _ in range(100):  # bounded: ~20 s
                if http.get("/api/health").status_code == 200:
                    break
                time.sleep(0.2)
            assert http.get("/api/health").json()["status"] == "ok"


@pytest.mark.process
def test_sqlite_failing_reads_are_503_not_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "evals.db"
    flag = tmp_path / "eio-on"
    with Service(db) as svc:
        svc.create_eval("capital", "The capital of France is Paris.", threshold=0.5)
    for name, value in eio_env(tmp_path / "build", data, flag).items():
        monkeypatch.setenv(name, value)
    with (
        running_server(db) as (base, _proc),
        httpx.Client(base_url=base, timeout=30, trust_env=False) as http,
    ):
        for path in ("/api/health", *PAGES):
            assert http.get(path).status_code == 200, path
        monkeypatch.delenv("LD_PRELOAD")  # this process reads and writes as usual
        with Service(db) as svc:  # a change, so the server reads the file again
            svc.create_eval("other", "Bananas grow on trees.", threshold=0.5)
        flag.touch()
        time.sleep(1.2)  # past the health check's cache
        for path in ("/api/health", *PAGES, "/api/evals"):
            r = http.get(path)
            assert r.status_code == 503, (path, r.status_code, r.text[:300])
            assert "database" in r.text and "damaged" not in r.text, (path, r.text[:300])
            assert "Traceback" not in r.text
            assert int(r.headers["retry-after"]) >= 1
        flag.unlink()
        statuses = recovered(http)
        assert set(statuses.values()) == {200}, statuses
    with Service(db) as svc:  # nothing stored lost
        assert {e.name for e in svc.list_evals()} == {"capital", "other"}
