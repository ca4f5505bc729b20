"""A real webhook receiver for the alert tests: an HTTP server on 127.0.0.1 (a free port) that
records every POST (headers and body) and answers with the status it is told, optionally
after a delay (a slow receiver)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """One POST the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def signed_with(self, secret: str) -> bool:
        """Whether its signature header is the HMAC-SHA256 of its body keyed with ``secret``."""
        want = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("x-simeval-signature", ""), want)


@dataclass
class Receiver:
    """The running receiver: its URL, what it got, and how it answers."""

    url: str
    got: list[Received] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def wait_for(self, n: int, timeout: float = 10.0) -> list[Received]:
        """The first ``n`` posts, waiting for them at most ``timeout`` seconds in all."""
        for _ in range(int(timeout / 0.02)):
            if len(self.got) >= n:
                break
            self.arrived.wait(0.02)
            self.arrived.clear()
        return list(self.got)


@contextmanager
def webhook_receiver(status: int = 200, delay: float = 0.0) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 for the ``with`` block."""
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            rec = holder["r"]
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            rec.got.append(Received(self.path, headers, body))
            rec.arrived.set()
            if rec.delay:
                rec.release.wait(rec.delay)  # a slow receiver, let go early by the test
            self.send_response(rec.status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    holder["r"] = Receiver(
        f"http://127.0.0.1:{server.server_port}/hook", status=status, delay=delay
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["r"]
    finally:
        holder["r"].release.set()
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    """The URL of a port on 127.0.0.1 nothing listens on (a receiver that is down)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
