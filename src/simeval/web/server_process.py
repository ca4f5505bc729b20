"""``simeval serve`` in a child process, for end-to-end tests, benchmarks and demos.

Example::

    from simeval.web.server_process import running_server

    with running_server("evals.db") as (url, proc):
        httpx.post(url + "/api/capture", json={"input": "q", "output": "a"})
"""

from __future__ import annotations

import contextlib
import http.client
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ADDRESS = re.compile(r"Eval Studio: (http://\S+)")
# Loopback only: never through a proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _healthy(url: str) -> bool:
    try:
        with _OPENER.open(url + "/api/health", timeout=1) as r:
            return bool(r.status == 200)
    except (OSError, http.client.HTTPException):  # not listening yet, or an error status
        return False


def _db_arg(db: str | os.PathLike[str]) -> str:
    value = os.fspath(db)
    return value if "://" in value else str(Path(value))


@contextlib.contextmanager
def running_server(
    db: str | os.PathLike[str], *args: str, token: str | None = None, timeout: float = 60.0
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``simeval serve --port 0 --db DB ARGS`` in a subprocess, answering ``/api/health``.

    Yields the address the server prints and its process; stops it on exit. ``token`` is
    its ``SIMEVAL_TOKEN`` (one set in this process's environment is never passed on). Its
    output is read all along (a chatty log can never block it). ``RuntimeError`` when it does
    not come up within ``timeout`` seconds.
    """
    env = {k: v for k, v in os.environ.items() if k != "SIMEVAL_TOKEN"}
    if token:
        env["SIMEVAL_TOKEN"] = token
    cmd = [sys.executable, "-c", "from simeval.cli import main; main()", "serve"]
    proc = subprocess.Popen(
        [*cmd, "--port", "0", "--db", _db_arg(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    found: queue.Queue[tuple[str | None, str]] = queue.Queue()

    def pump() -> None:
        seen: list[str] | None = []
        for line in proc.stdout or ():
            if seen is None:
                continue  # the address is known: drain the rest
            match = ADDRESS.match(line)
            if match:
                found.put((match.group(1), ""))
                seen = None
            else:
                seen.append(line)
        if seen is not None:
            found.put((None, "".join(seen)))

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + timeout
        try:
            url, output = found.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError("the server printed no address in time") from None
        if url is None:
            raise RuntimeError("the server did not start:\n" + output)
        while not _healthy(url):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer {url}/api/health")
            time.sleep(0.05)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
