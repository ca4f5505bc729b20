"""One kept-alive HTTP(S) connection to a server, for the senders that post in a background
thread: ``simeval.Client`` (captures to a server) and the scores-out exporter (results to an
OTLP collector). The standard library's ``http.client``: the client must load nothing more.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
from urllib.parse import SplitResult


class KeepAlive:
    """A connection to ``parts``' host, opened on first use and kept between requests;
    dropped after an error or a ``Connection: close`` answer, so the next request opens a
    new one.

    >>> from urllib.parse import urlsplit
    >>> KeepAlive(urlsplit("http://127.0.0.1:9/v1/logs"), timeout=1).path
    '/v1/logs'
    """

    def __init__(self, parts: SplitResult, timeout: float):
        self.parts = parts
        self.timeout = timeout
        self.path = parts.path + (f"?{parts.query}" if parts.query else "")
        self._conn: http.client.HTTPConnection | None = None

    def post(self, body: bytes, headers: dict[str, str], limit: int = -1) -> tuple[int, bytes, str]:
        """POST ``body`` to the URL's path: (status, the answer's first ``limit`` bytes, its
        Retry-After header or ""). ``OSError`` or ``http.client.HTTPException`` when it
        cannot be sent or answered (the connection is dropped first)."""
        try:
            conn = self._connection()
            conn.request("POST", self.path, body, headers)
            response = conn.getresponse()
            text = response.read(limit) if limit >= 0 else response.read()
            if response.getheader("connection", "").lower() == "close":
                self.reset()
            return response.status, text, response.getheader("retry-after") or ""
        except (OSError, http.client.HTTPException):
            self.reset()
            raise

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            https = self.parts.scheme == "https"
            cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
            self._conn = cls(self.parts.hostname or "", self.parts.port, timeout=self.timeout)
        return self._conn

    def reset(self) -> None:
        """Close the connection (the next request opens another)."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def forget(self) -> None:
        """Drop the connection without closing it: in a forked child, the socket is the
        parent's."""
        self._conn = None

    def interrupt(self) -> None:
        """Wake a request waiting on a server that hangs (from another thread): its read then
        fails at once. Closing alone would not wake it."""
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
