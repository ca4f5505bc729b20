"""A PostgreSQL server of one test alone, stopped and started again mid-test (outage tests)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from conftest import PgServer, pg_bin


@contextlib.contextmanager
def own_pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server of this test alone (it is stopped mid-test)."""
    if os.environ.get("SIMEVAL_TEST_POSTGRES_URL"):
        pytest.skip("stops its own PostgreSQL server; not one given by URL")
    bindir = pg_bin()
    if bindir is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("PostgreSQL is required under CI=true", pytrace=False)
        pytest.skip("PostgreSQL's server binaries are not installed")
    server = PgServer(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def pg_ctl(server: PgServer, action: str, mode: str = "fast") -> None:
    """Stop (``fast``: sessions cut, as a restart does; ``immediate``: as a crash) or start
    the server again."""
    pg_bin_ctl = str(server.bindir / "pg_ctl")
    if action == "stop":
        server._run(pg_bin_ctl, "-D", str(server.data), "-m", mode, "-w", "stop")
        return
    opts = (
        f"-c listen_addresses=127.0.0.1 -c port={server.port} "
        f"-c unix_socket_directories={server.dir} -c fsync=off -c max_connections=200"
    )
    log = str(server.dir / "log")
    server._run(pg_bin_ctl, "-D", str(server.data), "-o", opts, "-l", log, "-w", "start")
