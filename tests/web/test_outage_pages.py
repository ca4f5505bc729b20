"""The database gone under a running server: ``/api/health`` and every page say so (503 with
Retry-After), and all answer again once it is back, without restarting the server."""

from __future__ import annotations

import time

import httpx
import pytest

from pghelp import own_pg_server, pg_ctl
from simeval.service import Service
from simeval.web.server_process import running_server

PAGES = ("/dashboard", "/results", "/datasets")


@pytest.mark.slow
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
            pg_ctl(server, "stop", mode="immediate")
            time.sleep(1.2)  # past the health check's cache
            health = http.get("/api/health")
            assert health.status_code == 503, health.text
            assert "database" in health.json()["error"]
            assert int(health.headers["retry-after"]) >= 1
            for path in PAGES:
                page = http.get(path)
                assert page.status_code == 503, (path, page.text[:300])
                assert "database" in page.text and "Traceback" not in page.text
                assert int(page.headers["retry-after"]) >= 1
            api = http.get("/api/evals")
            assert api.status_code == 503 and "database" in api.json()["error"]
            pg_ctl(server, "start")
            statuses: dict[str, int] = {}
            for _ in range(100):  # at most ~20 s
                statuses = {p: http.get(p).status_code for p in ("/api/health", *PAGES)}
                if set(statuses.values()) == {200}:
                    break
                time.sleep(0.2)
            assert set(statuses.values()) == {200}, statuses
