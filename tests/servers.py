"""Processes the tests start and talk to on 127.0.0.1: a command whose address is read from
its output, the wait for a server's health, and the wait for its captures."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from typing import Any

import httpx


class Proc:
    """A subprocess whose output is collected all along; ``url`` from its first line that
    matches ``pattern``."""

    def __init__(self, cmd: list[str], pattern: str, timeout: float = 60.0):
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        found: queue.Queue[str | None] = queue.Queue()
        regex = re.compile(pattern)

        def pump() -> None:
            for line in self.proc.stdout or ():
                self.lines.append(line)
                match = regex.search(line)
                if match:
                    found.put(match.group(1))
            found.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            url = found.get(timeout=timeout)
        except queue.Empty:
            url = None
        if url is None:
            self.stop()
            raise RuntimeError(f"{cmd[-1]} did not start:\n" + "".join(self.lines))
        self.url: str = url

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wait_healthy(url: str) -> None:
    for _ in range(600):
        try:
            if httpx.get(url + "/api/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} never answered /api/health")


def wait_captures(url: str, count: int, seconds: float = 20.0) -> list[dict[str, Any]]:
    """The server's captures (newest first, up to 50) once there are ``count``, or what there
    is after ``seconds`` of polling (a call stored in the background, e.g. joined from two
    halves or queued by the proxy, is stored just after the request that brought it)."""
    found: list[dict[str, Any]] = []
    for _ in range(max(1, round(seconds / 0.1))):
        found = httpx.get(url + "/api/captures", params={"limit": 50}).json()["captures"]
        if len(found) >= count:
            break
        time.sleep(0.1)
    return found
