"""``simeval serve --workers N``: several processes on one port.

End to end on SQLite and on PostgreSQL: a real ``simeval serve --workers 2`` on 127.0.0.1,
where requests are answered by two worker processes (``/api/health`` names the one that
answered), captures from concurrent clients are each stored exactly once, the trend rollup
counts each once, one worker alone watches the alert rules (a real webhook receiver gets one
delivery per opening and closing; when that worker is killed another takes over and a new
worker replaces it), and SIGTERM or SIGINT stops every worker after it stored what it
acknowledged. In process: two apps of one run
(``worker_app``) share the studio's logins and CSRF secret, and the watcher moves to another
worker when its worker stops. A bad worker count is refused in one line.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from fastapi.testclient import TestClient

from simeval.cli import cli
from simeval.service import Service
from simeval.store import unpack_results
from simeval.store.rollups import ROLLUP_EVERY
from simeval.web.server_process import running_server
from simeval.web.workers import (
    POLL_S,
    RUN_DIR_ENV,
    SharedSessions,
    WorkerConfig,
    new_run_dir,
    new_secret,
    remove_run_dir,
    worker_app,
)
from webhook_receiver import webhook_receiver

REF = "Paris is the capital of France."
BAD = "Bananas grow on trees in warm tropical places."
SECRET = "alert-secret-for-workers"
TOKEN = "workers-test-token"


def seed(db: str, webhook: str | None = None) -> None:
    """One active eval and a rule that fires when its pass rate over 10 results drops."""
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")
        rule: dict[str, Any] = {
            "name": "capital-low",
            "eval": "capital",
            "when": "pass_rate < 0.8",
            "window": 10,
        }
        if webhook:
            rule.update(webhook=webhook, secret_env="SIMEVAL_ALERT_SECRET")
        svc.alerts.set_alert_rules([rule])


def worker_health(
    url: str, watchers: int = 1, seconds: float = 90.0, clients: int = 8
) -> dict[int, bool]:
    """The workers seen answering ``/api/health`` (pid -> runs the alert watcher), from
    ``clients`` concurrent new connections a round, until two are seen, ``watchers`` of them
    watching, or ``seconds`` passed (a worker starts slowly on a loaded machine)."""
    deadline = time.monotonic() + seconds
    seen: dict[int, bool] = {}
    lock = threading.Lock()

    def ask() -> None:
        with httpx.Client(base_url=url, timeout=10) as c:
            for _ in range(4):
                try:
                    r = c.get("/api/health", headers={"Connection": "close"})
                except httpx.TransportError:  # a worker killed under the request
                    continue
                worker = r.json()["worker"]
                with lock:
                    seen[worker["pid"]] = worker["alerts"]

    for _ in range(1000):  # bounded in count too
        threads = [threading.Thread(target=ask) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        if (len(seen) >= 2 and sum(seen.values()) == watchers) or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # the watcher's lock is taken as a worker starts
    return seen


def post_concurrently(url: str, clients: int, each: int, output: str, tag: str) -> list[int]:
    """``clients`` threads posting ``each`` captures (inputs ``tag-c-i``); the ids of the 201s."""
    ids: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def run(c: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as api:
            for i in range(each):
                r = api.post("/api/capture", json={"input": f"{tag}-{c}-{i}", "output": output})
                with lock:
                    (ids.append(r.json()["id"]) if r.status_code == 201 else errors.append(r.text))

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    return ids


def stored_inputs(db: str, prefix: str) -> dict[str, int]:
    """How many captures the database holds per input starting with ``prefix``."""
    engine = sa.create_engine(db if "://" in db else f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT input, COUNT(*) FROM captures WHERE input LIKE :p GROUP BY input"),
                {"p": prefix + "%"},
            ).all()
    finally:
        engine.dispose()
    return {str(i): int(n) for i, n in rows}


def scored(db: str, prefix: str) -> dict[int, int]:
    """The results each capture whose input starts with ``prefix`` holds, by id."""
    engine = sa.create_engine(db if "://" in db else f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT id, scores FROM captures WHERE input LIKE :p"), {"p": prefix + "%"}
            ).all()
    finally:
        engine.dispose()
    return {int(i): len(unpack_results(blob)) for i, blob in rows}


def watermark(db: str) -> int:
    """The trend rollup's watermark (the setting ``rollup_upto``)."""
    engine = sa.create_engine(db if "://" in db else f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            value = conn.execute(
                sa.text("SELECT value FROM settings WHERE key = 'rollup_upto'")
            ).scalar()
    finally:
        engine.dispose()
    return int(value or 0)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def wait_until(predicate: Any, seconds: float) -> bool:
    for _ in range(int(seconds / 0.05)):
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def stop(proc: subprocess.Popen[str], sig: int) -> int:
    proc.send_signal(sig)
    return proc.wait(timeout=60)


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("0", "between 1 and 64, not 0"),
        ("65", "between 1 and 64, not 65"),
        ("-3", "between 1 and 64, not -3"),
        ("two", "a whole number between 1 and 64, not 'two'"),
        ("1.5", "a whole number between 1 and 64, not '1.5'"),
        ("", "a whole number between 1 and 64, not ''"),
    ],
)
def test_a_bad_worker_count_is_one_line(value: str, problem: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["serve", "--workers", value, "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: --workers must be {problem}"
    assert not (tmp_path / "x.db").exists()


def test_workers_on_an_in_memory_database_are_refused() -> None:
    """Each worker would open its own private database: a capture sent to one would be
    missing from the others."""
    for db in (":memory:", "sqlite://", "sqlite:///:memory:"):
        result = CliRunner().invoke(cli, ["serve", "--workers", "2", "--db", db])
        assert result.exit_code == 2, (db, result.output)
        assert result.output.strip().startswith("error: --workers needs a database every worker")
        assert len(result.output.strip().splitlines()) == 1


def test_the_help_documents_workers() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--workers N" in text and "alert watcher" in text and "/api/health" in text


# -- two workers of one run, in process ---------------------------------------------------------


@pytest.fixture
def hook() -> Iterator[Any]:
    with webhook_receiver() as receiver:
        yield receiver


@pytest.fixture
def run_dir(
    new_sqlite: Callable[..., str], monkeypatch: pytest.MonkeyPatch, hook: Any
) -> Iterator[tuple[Path, str]]:
    monkeypatch.setenv("SIMEVAL_ALERT_SECRET", SECRET)
    db = new_sqlite("evals.db")
    seed(db, hook.url)
    config = WorkerConfig(
        db=db, workers=2, csrf_secret=new_secret(), token=TOKEN, alert_interval=600.0
    )
    run = new_run_dir(config)
    monkeypatch.setenv(RUN_DIR_ENV, str(run))
    try:
        yield run, db
    finally:
        remove_run_dir(run)


def _csrf(client: TestClient) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text)
    assert match
    return match.group(1)


def _watching(client: TestClient) -> bool:
    return bool(client.get("/api/health").json()["worker"]["alerts"])


@pytest.mark.process
def test_workers_share_logins_and_forms(run_dir: tuple[Path, str]) -> None:
    run, _ = run_dir
    assert oct(run.stat().st_mode & 0o777) == "0o700"
    assert oct((run / "config.json").stat().st_mode & 0o777) == "0o600"
    base = "http://127.0.0.1:8000"
    with (
        TestClient(worker_app(), base_url=base, follow_redirects=False) as a,
        TestClient(worker_app(), base_url=base, follow_redirects=False) as b,
    ):
        # a form served by A is accepted by B, and B's login works on A
        token = _csrf(a)
        b.cookies.update(a.cookies)
        r = b.post("/login", data={"csrf_token": token, "token": TOKEN, "next": "/"})
        assert r.status_code == 303 and "simeval_session" in b.cookies
        a.cookies.update(b.cookies)
        assert a.get("/api/evals").status_code == 200
        assert b.get("/api/evals").status_code == 200
        # logging out on A ends the session on B too
        assert a.post("/logout", data={"csrf_token": token}).status_code == 303
        assert b.get("/api/evals").status_code == 401


@pytest.mark.process
def test_one_worker_watches_and_another_takes_over(run_dir: tuple[Path, str], hook: Any) -> None:
    base = "http://127.0.0.1:8000"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    a = TestClient(worker_app(), base_url=base, headers=auth)
    b = TestClient(worker_app(), base_url=base, headers=auth)
    a.__enter__()
    a_open = True
    try:
        b.__enter__()
        try:
            assert [_watching(a), _watching(b)] == [True, False]  # the first to start
            # captures at B never wake A's watcher; an evaluation asked of B delivers itself
            for _ in range(10):
                assert b.post("/api/capture", json={"input": "q", "output": BAD}).status_code == 201
            check = b.post("/api/alerts/evaluate").json()
            assert [x["rule"] for x in check["opened"]] == ["capital-low"]
            (got,) = hook.wait_for(1)
            assert got.json()["event"] == "open" and got.signed_with(SECRET)
            assert a.post("/api/alerts/evaluate").json()["opened"] == []  # open already
            # A stops: B takes the watcher over within a poll or two
            a.__exit__(None, None, None)
            a_open = False
            assert wait_until(lambda: _watching(b), 3 * POLL_S)
        finally:
            b.__exit__(None, None, None)
    finally:
        if a_open:
            a.__exit__(None, None, None)
    assert [r.json()["event"] for r in hook.got] == ["open"]


def test_shared_sessions_expire_and_keep_a_limit(tmp_path: Path) -> None:
    one = SharedSessions(tmp_path / "s.db", limit=3)
    other = SharedSessions(tmp_path / "s.db", limit=3)
    sids = [one.new() for _ in range(4)]
    assert [other.valid(s) for s in sids] == [False, True, True, True]  # the oldest dropped
    assert sids[0] not in (tmp_path / "s.db").read_bytes().decode("latin-1")  # hashed
    short = SharedSessions(tmp_path / "s.db", max_age=-1)
    assert not other.valid(short.new())
    assert not other.valid(None) and not other.valid("made-up")


# -- a real multi-process server, on SQLite and on PostgreSQL -----------------------------------


@pytest.mark.process
def test_two_workers_serve_store_once_alert_once_and_stop_cleanly(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIMEVAL_ALERT_SECRET", SECRET)  # the server processes inherit it
    with webhook_receiver() as hook:
        seed(db, hook.url)
        args = ("--workers", "2", "--alert-interval", "0.5")
        with running_server(db, *args, timeout=180) as (url, proc):
            workers = worker_health(url)
            assert len(workers) == 2, workers  # two processes answer on the one port
            assert sorted(workers.values()) == [False, True]  # one of them watches
            assert proc.pid not in workers

            # concurrent clients: every capture stored exactly once
            # (over ROLLUP_EVERY of them: both workers move the trend rollup's watermark)
            ids = post_concurrently(url, clients=8, each=40, output=BAD, tag="load")
            assert len(ids) == 320 == len(set(ids))
            stored = stored_inputs(db, "load-")
            assert len(stored) == 320 and set(stored.values()) == {1}

            # the drop opens one alert, delivered once; a recovery closes it, delivered once
            got = hook.wait_for(1, timeout=30)
            post_concurrently(url, clients=4, each=5, output=REF, tag="good")
            got = hook.wait_for(2, timeout=30)
            time.sleep(1.0)  # and nothing more arrives
            events = [r.json()["event"] for r in hook.got]
            assert events == ["open", "closed"], events
            assert all(r.signed_with(SECRET) for r in got)
            alerts = httpx.get(url + "/api/alerts", timeout=10).json()
            assert len(alerts) == 1 and alerts[0]["status"] == "closed"
            deliveries = httpx.get(f"{url}/api/alerts/{alerts[0]['id']}/deliveries").json()
            assert len(deliveries) == 2

            # the watching worker killed: the other takes the watcher over, a new one replaces it
            watcher = next(pid for pid, watching in workers.items() if watching)
            os.kill(watcher, signal.SIGKILL)
            after = worker_health(url)
            assert watcher not in after and len(after) == 2, after
            assert sorted(after.values()) == [False, True]
            workers = after

            # SIGTERM while captures arrive: each worker stores what it acknowledged
            acked: list[int] = []

            def keep_posting(c: int) -> None:
                with httpx.Client(base_url=url, timeout=30) as api:
                    for i in range(200):
                        try:
                            r = api.post(
                                "/api/capture", json={"input": f"last-{c}-{i}", "output": REF}
                            )
                        except httpx.HTTPError:
                            return  # the server stopped listening
                        if r.status_code == 201:
                            acked.append(r.json()["id"])

            posters = [threading.Thread(target=keep_posting, args=(c,)) for c in range(4)]
            for t in posters:
                t.start()
            assert wait_until(lambda: len(acked) >= 20, 30)
            assert stop(proc, signal.SIGTERM) == 0
            for t in posters:
                t.join(60)
            assert wait_until(lambda: all(gone(pid) for pid in workers), 10)
    last = stored_inputs(db, "last-")
    assert len(acked) >= 20 and sum(last.values()) >= len(acked) and set(last.values()) == {1}
    kept = scored(db, "last-")
    assert set(acked) <= set(kept)
    assert all(kept[i] == 1 for i in acked)  # stored scored by the one eval, not half-written
    # the rollup, moved by both workers, counts every capture once
    every = scored(db, "")
    assert watermark(db) >= ROLLUP_EVERY
    with Service(db) as svc:
        assert sum(b.count for b in svc.trend("capital", bucket="day").buckets) == len(every)


@pytest.mark.process
def test_sigint_stops_every_worker(db: str) -> None:
    with running_server(db, "--workers", "2", "--alert-interval", "0", timeout=180) as (url, proc):
        workers = worker_health(url, watchers=0)
        assert len(workers) == 2 and not any(workers.values())  # no rules watched: no watcher
        assert stop(proc, signal.SIGINT) == 0
        assert wait_until(lambda: all(gone(pid) for pid in workers), 10)
