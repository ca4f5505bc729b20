"""Users with ``serve --workers``: a session signed in through one worker is the same user on
every worker, and a disabled user or a replaced key is refused by every worker within the
identity cache's second (real worker apps of one run; then ``simeval serve --workers 2``)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from simeval.service import Service
from simeval.web.server_process import running_server
from simeval.web.workers import (
    RUN_DIR_ENV,
    WorkerConfig,
    new_run_dir,
    new_secret,
    remove_run_dir,
    worker_app,
)

BASE = "http://127.0.0.1:8000"


@pytest.fixture
def run(db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with Service(db) as svc:
        keys = {"ana": svc.users.add_user("ana", "editor", "ana-password").key}
    config = WorkerConfig(db=db, workers=2, csrf_secret=new_secret(), alert_interval=None)
    path = new_run_dir(config)
    monkeypatch.setenv(RUN_DIR_ENV, str(path))
    try:
        yield keys
    finally:
        remove_run_dir(path)


def test_a_session_is_the_same_user_on_every_worker_until_disabled(
    db: str, run: dict[str, str]
) -> None:
    with (
        TestClient(worker_app(), base_url=BASE, follow_redirects=False) as a,
        TestClient(worker_app(), base_url=BASE, follow_redirects=False) as b,
    ):
        match = re.search(r'name="csrf_token" value="([^"]+)"', a.get("/login").text)
        assert match
        form = {"csrf_token": match.group(1), "name": "ana", "password": "ana-password"}
        b.cookies.update(a.cookies)
        assert b.post("/login", data=form).status_code == 303
        a.cookies.update(b.cookies)
        assert a.get("/api/me").json() == {"name": "ana", "role": "editor"}
        key = {"Authorization": f"Bearer {run['ana']}"}
        assert b.get("/api/me", headers=key).status_code == 200
        with Service(db) as other:
            other.users.set_user_disabled("ana", True)
        time.sleep(1.05)  # past each worker's cache second (no time bound is asserted)
        for worker in (a, b):
            assert worker.get("/api/me").status_code == 401
            assert worker.get("/api/me", headers=key).status_code == 401


@pytest.mark.process
def test_serve_workers_refuse_a_replaced_key_on_every_worker(
    new_sqlite: Callable[..., str],
) -> None:
    db = Path(new_sqlite("team.db"))
    with Service(str(db)) as svc:
        old = svc.users.add_user("collector", "ingest").key
    args = ("--workers", "2", "--alert-interval", "0")
    with running_server(db, *args, timeout=180) as (url, _), httpx.Client(base_url=url) as c:
        body = {"input": "q", "output": "a"}
        for _ in range(20):
            r = c.post("/api/capture", json=body, headers={"Authorization": f"Bearer {old}"})
            assert r.status_code == 201, r.text
        with Service(str(db)) as other:
            new = other.users.new_user_key("collector").key
        time.sleep(1.05)
        for _ in range(20):
            r = c.post("/api/capture", json=body, headers={"Authorization": f"Bearer {old}"})
            assert r.status_code == 401
            r = c.post("/api/capture", json=body, headers={"Authorization": f"Bearer {new}"})
            assert r.status_code == 201
        assert c.get("/api/evals", headers={"Authorization": f"Bearer {new}"}).status_code == 403
