"""``simeval serve --workers N``: N server processes answering on one port.

The parent process (``simeval serve``) binds the port, migrates the database once, writes the
workers' configuration to a private run directory and hands the listening socket to uvicorn's
multi-process supervisor, which spawns the workers (``worker_app``, an app factory named by an
import string, as uvicorn requires), replaces one that dies, and on SIGINT/SIGTERM stops them
all (each worker's lifespan then flushes its capture writer, its proxy queue and its OTLP
exporter, as a single server's does).

What each worker holds for itself, and what is shared:

- Captures, reads, the trend rollup, the OTLP scores exporter and the proxy's capture queue run
  in every worker. The rollup is safe concurrently: it reads its watermark under the capture
  lock taken exclusively on PostgreSQL, under the file's write lock on SQLite
  (``simeval.store.rollups.roll_up``); each worker's exporter sends the captures that worker
  stored, so every result goes out once. On SQLite the workers' writes take the one write
  lock in turn (``--lock-wait`` bounds the wait, as for any other writer).
- The alert watcher runs in one worker only (else every opened alert would be delivered N
  times): the worker holding an exclusive ``flock`` on ``alerts.lock`` in the run directory.
  The others try again every ``POLL_S`` seconds, so when that worker stops or dies another
  takes over. It evaluates on its timer and after the captures its own worker stores.
- The studio's login sessions live in a small SQLite file in the run directory
  (``SharedSessions``) and its CSRF secret is the run's: a browser logged in through one worker
  is logged in on all of them, and a form served by one is accepted by another.
- Every worker follows the stored ``otlp_export`` setting within ``POLL_S`` seconds of it being
  changed through any worker (a single server follows it at once; ``--otlp-export`` pins it).

A worker stops when its parent does, even one killed by SIGKILL (``simeval.web.parent_watch``).

``/api/health`` of a multi-worker server says which worker answered:
``"worker": {"pid": ..., "workers": N, "alerts": true|false}``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import secrets
import shutil
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from simeval.errors import InvalidInput
from simeval.web.api import start_alerts, stop_alerts
from simeval.web.otlp_export import follow_setting
from simeval.web.parent_watch import die_with_parent, parent_gone
from simeval.web.security import SessionStore
from simeval.web.sso import UserHeader

log = logging.getLogger("simeval.workers")

RUN_DIR_ENV = "SIMEVAL_SERVE_RUN_DIR"  # where a worker finds its run's configuration
MAX_WORKERS = 64
POLL_S = 2.0  # how often a worker tries for the alert watcher and re-reads the OTLP setting
CONFIG_FILE = "config.json"


@dataclasses.dataclass(frozen=True)
class WorkerConfig:
    """What every worker of one ``simeval serve --workers N`` builds its app from."""

    db: str
    workers: int
    csrf_secret: str  # hex; one per run, so every worker signs and checks the same forms
    token: str | None = None
    max_body: int = 1_048_576
    lock_wait: float = 5.0
    idf_dir: str | None = None
    upstream: str | None = None
    otlp_export: str | None = None
    alert_interval: float | None = 30.0
    otlp_join_bytes: int = 64 * 1024 * 1024
    otlp_score_cut: bool = False
    user_header: str | None = None  # SSO through a proxy (simeval.web.sso)
    user_header_create: bool = True
    forwarded_allow_ips: str | None = None
    parent_pid: int | None = None  # the supervisor: a worker stops when it is gone


def check_workers(value: int | str) -> int:
    """The worker count ``value`` gives (a whole number from 1 to ``MAX_WORKERS``, as typed
    or as a number), else a one-line ``InvalidInput``."""
    try:
        n = int(value)  # "4", " 4", "04"; not "4.0" or "four"
    except ValueError:
        raise InvalidInput(
            f"--workers must be a whole number between 1 and {MAX_WORKERS}, not {value!r}"
        ) from None
    if not 1 <= n <= MAX_WORKERS:
        raise InvalidInput(f"--workers must be between 1 and {MAX_WORKERS}, not {n}")
    return n


def check_shared_db(url: str) -> None:
    """A one-line ``InvalidInput`` when the database of ``url`` (as ``resolve_db_url`` gives
    it) cannot be shared by several processes: an in-memory SQLite database is private to the
    process that opens it, so each worker would store and answer from its own."""
    if url.startswith("sqlite:") and (url == "sqlite://" or ":memory:" in url):
        raise InvalidInput(
            "--workers needs a database every worker opens: an in-memory database is private "
            "to one process; give a SQLite file or a PostgreSQL URL, or serve with --workers 1"
        )


def new_run_dir(config: WorkerConfig) -> Path:
    """A private directory (mode 0700) holding ``config`` (mode 0600: it may hold the token);
    ``remove_run_dir`` deletes it when the server stops."""
    run = Path(tempfile.mkdtemp(prefix="simeval-serve-"))
    path = run / CONFIG_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(dataclasses.asdict(config), f)
    return run


def remove_run_dir(run: Path) -> None:
    """Delete a run directory (its config, sessions and lock file)."""
    shutil.rmtree(run, ignore_errors=True)


def load_config(run: Path) -> WorkerConfig:
    """The configuration ``new_run_dir`` wrote in ``run``."""
    data = json.loads((run / CONFIG_FILE).read_text(encoding="utf-8"))
    return WorkerConfig(**data)


def worker_app() -> FastAPI:
    """The app of one worker (uvicorn's factory, ``simeval.web.workers:worker_app``): the
    run's configuration from the directory ``SIMEVAL_SERVE_RUN_DIR`` names."""
    from simeval.web.app import create_app

    run = Path(os.environ[RUN_DIR_ENV])
    config = load_config(run)
    if config.parent_pid is not None:
        die_with_parent(config.parent_pid)  # never an orphan keeping the port
    app = create_app(
        config.db,
        token=config.token,
        max_body=config.max_body,
        lock_wait=config.lock_wait,
        idf_dir=config.idf_dir,
        upstream=config.upstream,
        otlp_export=config.otlp_export,
        alert_interval=None,  # only the worker holding the lock watches (``WorkerRole``)
        sessions=SharedSessions(run / "sessions.db"),
        otlp_join_bytes=config.otlp_join_bytes,
        otlp_score_cut=config.otlp_score_cut,
        user_header=(
            UserHeader(
                config.user_header, config.forwarded_allow_ips or "", config.user_header_create
            )
            if config.user_header
            else None
        ),
    )
    app.state.csrf_secret = bytes.fromhex(config.csrf_secret)
    app.state.worker = WorkerRole(run / "alerts.lock", config.workers, config.alert_interval)
    if config.parent_pid is not None:
        # nor a run directory left behind (its config may hold the token): the supervisor
        # removes it when it stops, a worker when the supervisor died without doing so
        _cleaned_on_shutdown(app, run, config.parent_pid)
    return app


def _cleaned_on_shutdown(app: FastAPI, run: Path, parent_pid: int) -> None:
    """``app``'s shutdown also removes ``run`` once ``parent_pid`` is gone."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(the_app: FastAPI) -> Any:
        async with inner(the_app) as state:
            yield state
        if parent_gone(parent_pid):
            remove_run_dir(run)

    app.router.lifespan_context = lifespan


def new_secret() -> str:
    """A run's CSRF secret (hex)."""
    return secrets.token_hex(32)


class WorkerRole:
    """One worker's share of the background work: the alert watcher when it holds the run's
    lock, and following the stored OTLP export setting. ``start``/``stop`` from the app's
    lifespan."""

    def __init__(self, lock_path: Path, workers: int, alert_interval: float | None):
        self.lock_path = lock_path
        self.workers = workers
        self.alert_interval = alert_interval
        self._lock_fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._app: FastAPI | None = None

    @property
    def watching(self) -> bool:
        """Whether this worker runs the alert watcher."""
        return self._lock_fd is not None

    def health(self) -> dict[str, int | bool]:
        """What ``/api/health`` says of this worker: its pid, the run's worker count, and
        whether an alert watcher runs in it (its app's, whoever started it)."""
        app = self._app
        running = app is not None and getattr(app.state, "alerts", None) is not None
        return {"pid": os.getpid(), "workers": self.workers, "alerts": running}

    def start(self, app: FastAPI) -> None:
        """Try for the alert watcher now, then every ``POLL_S`` seconds on a thread."""
        self._app = app
        self._stop.clear()
        self._tick(app)
        self._thread = threading.Thread(
            target=self._loop, args=(app,), name="simeval-worker", daemon=True
        )
        self._thread.start()

    def stop(self, app: FastAPI) -> None:
        """Stop the thread and the watcher, and let another worker have the lock."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        stop_alerts(app)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _loop(self, app: FastAPI) -> None:
        while not self._stop.wait(POLL_S):
            self._tick(app)

    def _tick(self, app: FastAPI) -> None:
        try:
            if self.alert_interval is not None and self._lock_fd is None and self._take_lock():
                app.state.alert_interval = self.alert_interval
                start_alerts(app)
                log.info("worker %s runs the alert watcher", os.getpid())
            if not getattr(app.state, "otlp_export_pinned", False):
                follow_setting(app.state, app.state.service)
        except Exception as exc:  # the database down for a moment: the next tick tries again
            log.warning("worker %s: background round failed: %s", os.getpid(), exc)

    def _take_lock(self) -> bool:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another worker holds it
            os.close(fd)
            return False
        self._lock_fd = fd
        return True


class SharedSessions(SessionStore):
    """The studio's login sessions in a SQLite file the run's workers share (``SessionStore``'s
    rules: valid until revoked or ``max_age`` seconds old, ``limit`` at most). Ids are kept as
    their SHA-256, so the file holds nothing a cookie could be made from."""

    def __init__(self, path: Path, max_age: float = 30 * 86400, limit: int = 10_000):
        super().__init__(max_age, limit)
        self.path = path
        self._guard = threading.Lock()
        # autocommit; WAL so that a login never blocks another worker's checks
        self._db = sqlite3.connect(path, timeout=5, isolation_level=None, check_same_thread=False)
        with self._guard, contextlib.suppress(sqlite3.OperationalError):
            self._db.execute("PRAGMA journal_mode=WAL")
        with self._guard:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS sessions "
                "(id TEXT PRIMARY KEY, expires REAL NOT NULL, user TEXT)"
            )

    @staticmethod
    def _key(sid: str) -> str:
        return hashlib.sha256(sid.encode()).hexdigest()

    def new(self, user: str | None = None) -> str:
        """A new session's id (what its cookie holds), signed in as ``user``, valid in every
        worker."""
        sid = secrets.token_urlsafe(32)
        with self._guard:
            self._db.execute(
                "INSERT INTO sessions VALUES (?, ?, ?)",
                (self._key(sid), time.time() + self.max_age, user),
            )
            # the oldest dropped first past the limit (rowids grow with each login)
            self._db.execute(
                "DELETE FROM sessions WHERE rowid <= (SELECT max(rowid) FROM sessions) - ?",
                (self.limit,),
            )
        return sid

    def _row(self, sid: str | None) -> tuple[float, str | None] | None:
        if not sid:
            return None
        key = self._key(sid)
        with self._guard:
            row = self._db.execute(
                "SELECT expires, user FROM sessions WHERE id = ?", (key,)
            ).fetchone()
            if row is None:
                return None
            if row[0] < time.time():
                self._db.execute("DELETE FROM sessions WHERE id = ?", (key,))
                return None
        return (row[0], row[1])

    def valid(self, sid: str | None) -> bool:
        """Whether ``sid`` is a live session issued by any worker of this run."""
        return self._row(sid) is not None

    def user(self, sid: str | None) -> str | None:
        """The user a live session ``sid`` was signed in as, in any worker."""
        row = self._row(sid)
        return None if row is None else row[1]

    def revoke(self, sid: str | None) -> None:
        """End session ``sid`` (logout) in every worker."""
        if sid:
            with self._guard:
                self._db.execute("DELETE FROM sessions WHERE id = ?", (self._key(sid),))
