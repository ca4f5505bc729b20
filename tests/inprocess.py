"""The rule of ``make quick`` (``pytest --in-process-only``): a test starts no process and opens
no internet socket. A pytest plugin (``tests/conftest.py`` loads it).

``forbid()`` replaces the ways out of the process for the rest of the run: ``subprocess.Popen``
(and so ``subprocess.run``, ``asyncio``'s subprocesses), ``os.fork``, ``os.posix_spawn``,
``os.system``, ``multiprocessing``'s ``Process.start`` and ``socket.socket``'s ``connect``,
``connect_ex`` and ``bind`` for ``AF_INET``/``AF_INET6`` (``AF_UNIX`` stays allowed: an event
loop's self-pipe is one). Each attempt raises ``LeftTheProcess`` where it is made and is
recorded, and ``check()`` fails the test that made it, even when the code under test caught the
error (a background thread, a retry loop). A test that needs a process, a server, a browser or
a socket is marked ``process`` (or ``browser``, ``postgres``) and is run by ``make test``.
"""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

INET = (socket.AF_INET, socket.AF_INET6)

_attempts: list[str] = []
_attempts_lock = threading.Lock()


class LeftTheProcess(RuntimeError):
    """A test under ``--in-process-only`` tried to start a process or open a socket."""


def _refuse(what: str) -> LeftTheProcess:
    message = (
        f"{what}: under make quick (pytest --in-process-only) a test starts no process and "
        "opens no internet socket; mark it @pytest.mark.process"
    )
    with _attempts_lock:
        _attempts.append(message)
    return LeftTheProcess(message)


def _guard_socket(name: str) -> None:
    real = getattr(socket.socket, name)

    def guarded(self: socket.socket, *args: Any, **kwargs: Any) -> Any:
        if self.family in INET:
            raise _refuse(f"socket.{name}({args[0] if args else ''!r})")
        return real(self, *args, **kwargs)

    setattr(socket.socket, name, guarded)


def _guard_call(owner: Any, name: str, what: str) -> None:
    if not hasattr(owner, name):
        return

    def guarded(*args: Any, **kwargs: Any) -> Any:
        raise _refuse(what)

    setattr(owner, name, guarded)


def forbid() -> None:
    """Refuse processes and internet sockets from now on, in this interpreter."""
    for name in ("connect", "connect_ex", "bind"):
        _guard_socket(name)

    def popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        raise _refuse(f"subprocess.Popen({args!r})")

    subprocess.Popen.__init__ = popen_init  # type: ignore[assignment, method-assign]
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        _guard_call(os, name, f"os.{name}()")
    for name in ("execv", "execve", "execvp", "execvpe"):
        _guard_call(os, name, f"os.{name}()")
    _guard_call(multiprocessing.process.BaseProcess, "start", "multiprocessing Process.start()")


def take_attempts() -> list[str]:
    """The attempts recorded since the last call (and forget them)."""
    with _attempts_lock:
        taken = list(_attempts)
        _attempts.clear()
    return taken


def check(fail: Callable[[str], object]) -> None:
    """Call ``fail`` with the attempts recorded since the last check, if any."""
    taken = take_attempts()
    if taken:
        fail("; ".join(dict.fromkeys(taken)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--in-process-only",
        action="store_true",
        help="fail any test that starts a process or opens an internet socket (make quick)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("in_process_only"):
        forbid()


@pytest.fixture(autouse=True)
def in_process_only(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under ``--in-process-only``: fail the test that started a process or opened an internet
    socket (in its fixtures, its body or a thread of the code under test)."""
    if not request.config.getoption("in_process_only"):
        yield
        return
    check(pytest.fail)
    yield
    check(pytest.fail)
