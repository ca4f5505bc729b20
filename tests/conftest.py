"""Shared fixtures: the database every store/service/API/CLI test runs on, once per backend.

``db`` is parametrised: ``sqlite`` (a file in the test's temp dir) and ``postgresql`` (a fresh
database on a real PostgreSQL server started for the whole run, in a temp dir, on a free port
of 127.0.0.1). Root cannot run ``initdb``, so as root the server runs as an unprivileged user
(``postgres`` when the Debian package created it, else a ``simeval-pg`` user made here).

Without PostgreSQL's binaries the ``postgresql`` cases are skipped, except under ``CI=true``
where they fail: CI must not pass by testing one backend. ``SIMEVAL_TEST_POSTGRES_URL`` points
the suite at an existing server instead (a URL of a database the user may create databases
from, e.g. ``postgresql+psycopg://me@127.0.0.1:5432/postgres``).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# make quick (--in-process-only): the rule and its hooks
pytest_plugins = ["inprocess"]
BACKENDS = ("sqlite", pytest.param("postgresql", marks=pytest.mark.postgres))
_TEMPLATE = "simeval_template"
_counter = itertools.count()


def pg_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_user() -> str | None:
    """The user the server runs as: None (this one) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "simeval-pg"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "simeval-pg"],
        check=True,
        capture_output=True,
    )
    return "simeval-pg"


class PgServer:
    """A throwaway PostgreSQL cluster: ``initdb`` in a temp dir, ``pg_ctl start`` on a port."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.user = _server_user()
        self.dir = Path(tempfile.mkdtemp(prefix="simeval-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        if self.user is not None:
            info = pwd.getpwnam(self.user)
            os.chown(self.dir, info.pw_uid, info.pw_gid)
        self.base_url = f"postgresql+psycopg://simeval@127.0.0.1:{self.port}"

    def _run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cmd = list(argv)
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(
            cmd, check=True, capture_output=True, text=True, timeout=timeout, cwd=self.dir
        )

    def start(self) -> None:
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "simeval",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )
        opts = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.dir} -c fsync=off "
            "-c max_connections=200 -c shared_buffers=32MB"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            opts,
            "-l",
            str(self.dir / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


class PgDatabases:
    """Fresh databases on one server, each a copy of a migrated template (fast to create)."""

    def __init__(self, base_url: str):
        import sqlalchemy as sa

        self.base_url = base_url.rstrip("/")
        self.admin = sa.create_engine(f"{self.base_url}/postgres", isolation_level="AUTOCOMMIT")
        deadline = time.monotonic() + 30
        while True:
            try:
                with self.admin.connect() as conn:
                    conn.exec_driver_sql("SELECT 1")
                break
            except sa.exc.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {_TEMPLATE} WITH (FORCE)")
            conn.exec_driver_sql(f"CREATE DATABASE {_TEMPLATE}")
        from simeval.store import Store

        Store(f"{self.base_url}/{_TEMPLATE}").close()

    def create(self) -> str:
        name = f"t{os.getpid()}_{next(_counter)}"
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name} TEMPLATE {_TEMPLATE}")
        return f"{self.base_url}/{name}"

    def drop(self, url: str) -> None:
        from simeval.service.facade import _SERVICES, _SERVICES_LOCK

        with _SERVICES_LOCK:
            svc = _SERVICES.pop(url, None)
        if svc is not None:
            svc.store.close()
        name = url.rsplit("/", 1)[1]
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def close(self) -> None:
        self.admin.dispose()


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL is required under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[PgDatabases | str]:
    """The run's PostgreSQL server (started once), or the reason there is none."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        yield "psycopg is not installed (pip install 'simeval[postgres]')"
        return
    given = os.environ.get("SIMEVAL_TEST_POSTGRES_URL")
    if given:
        dbs = PgDatabases(given.rsplit("/", 1)[0])
        yield dbs
        dbs.close()
        return
    bindir = pg_bin()
    if bindir is None:
        yield "PostgreSQL's server binaries (pg_ctl, initdb) are not installed"
        return
    server = PgServer(bindir)
    try:
        server.start()
        dbs = PgDatabases(server.base_url)
    except BaseException:
        log = server.dir / "log"
        print(log.read_text() if log.exists() else "no server log")
        server.stop()
        raise
    try:
        yield dbs
    finally:
        dbs.close()
        server.stop()


@pytest.fixture
def pg_url(pg_databases: PgDatabases | str) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database's URL."""
    if isinstance(pg_databases, str):
        _missing(pg_databases)
        raise AssertionError("unreachable")
    url = pg_databases.create()
    try:
        yield url
    finally:
        pg_databases.drop(url)


# docstring examples that leave the process (they cannot carry a marker): the Client's starts
# its sending thread, which connects to 127.0.0.1:9
PROCESS_EXAMPLES = {"simeval.client.Client"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # a test on the run's PostgreSQL server, whichever way it reaches it
        if {"pg_url", "pg_databases"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)
        if isinstance(item, pytest.DoctestItem) and item.name in PROCESS_EXAMPLES:
            item.add_marker(pytest.mark.process)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to the newest revision once per run, for ``new_sqlite`` to copy.

    Its write-ahead log is checkpointed into the file and removed before it is copied, so a
    copy of the one file is the whole database.
    """
    from simeval.store import Store, resolve_db_url

    path = tmp_path_factory.mktemp("template") / "template.db"
    store = Store(resolve_db_url(str(path)))
    try:
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        store.close()
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists() and side.stat().st_size:
            raise AssertionError(f"the template left {side.name} behind after close")
    return path


@pytest.fixture
def new_sqlite(sqlite_template: Path, tmp_path: Path) -> Callable[..., str]:
    """``new_sqlite(name="evals.db", directory=tmp_path)``: the path of a fresh SQLite database
    at the newest revision, a copy of ``sqlite_template`` (no migration run per test). The code
    under test opens it as it would any database; tests of the migrations themselves build
    their old files and do not use this."""

    def make(name: str = "evals.db", directory: Path | None = None) -> str:
        path = (directory or tmp_path) / name
        shutil.copyfile(sqlite_template, path)
        return str(path)

    return make


@pytest.fixture
def db(backend: str, request: pytest.FixtureRequest) -> str:
    """The test's database: a fresh SQLite file's path (a copy of the migrated template), or a
    fresh PostgreSQL database's URL."""
    if backend == "sqlite":
        return str(request.getfixturevalue("new_sqlite")())
    return str(request.getfixturevalue("pg_url"))
