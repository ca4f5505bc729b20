"""Posting an alert to a webhook: the body (generic JSON, or Slack-compatible ``{"text": ...}``),
its signature, and the bounded retries with backoff.

The standard library's ``http.client`` posts: a webhook is one small POST, and httpx is only
in the optional ``proxy``/``engines`` extras, so a plain install can deliver alerts too. A
delivery never follows a redirect (a 3xx is a failed attempt, recorded with its status: the
body and its signature go to the URL the rule names and nowhere else), and each attempt has
one deadline for connecting, sending and the answer's status line and headers together
(``TIMEOUT_S``), whatever pace the receiver keeps. No HTTP proxy of the environment is used.

Signature: with a rule's ``secret_env`` set, the header ``X-Simeval-Signature`` carries
``sha256=<hex>``, the HMAC-SHA256 of the exact body bytes keyed with that variable's value. A
receiver recomputes it over the raw body and compares with ``hmac.compare_digest``. The body
carries ``sent_at``, so a receiver can refuse old replays. A rule whose variable is not set
sends nothing, at once and without retrying (one attempt, logged with that error, since the
variable is read once per delivery): an unsigned post to a receiver that
expects a signature would be refused anyway, and silently dropping the signature is worse.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

SIGNATURE_HEADER = "X-Simeval-Signature"
EVENT_HEADER = "X-Simeval-Event"
ATTEMPTS = 5
BACKOFF_S = 1.0  # the wait after the first failed attempt; doubled after each next one
MAX_BACKOFF_S = 30.0
TIMEOUT_S = 5.0
_ERROR_CHARS = 300


@dataclass
class Attempt:
    """One try: which (from 1), the HTTP status (None: no answer), and what went wrong."""

    attempt: int
    status: int | None
    ok: bool
    error: str | None


def sign(body: bytes, secret: str) -> str:
    """The signature header's value for ``body``.

    >>> sign(b'{}', 'k')[:15]
    'sha256=add853b1'
    """
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def is_slack(webhook: str, fmt: str) -> bool:
    """Whether to send Slack's ``{"text": ...}``: the rule says so, or the URL is Slack's."""
    return fmt == "slack" or (urlsplit(webhook).hostname or "").lower() == "hooks.slack.com"


def body_of(payload: Mapping[str, object], webhook: str, fmt: str) -> bytes:
    """The bytes posted: the payload as JSON, or Slack-compatible text made of its message."""
    doc: Mapping[str, object] = {"text": payload["message"]} if is_slack(webhook, fmt) else payload
    return json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8")


def _cut(conn: http.client.HTTPConnection, cut: threading.Event) -> None:
    # the deadline: a blocked connect, send or read fails at once
    cut.set()
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


def post_once(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Attempt:
    """One POST with one deadline of ``timeout`` seconds for the whole exchange; a 2xx answer
    is a success, a redirect is not followed. Never raises for a network problem."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn: http.client.HTTPConnection
    try:
        if parts.scheme == "https":
            context = ssl.create_default_context()
            conn = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=timeout, context=context
            )
        else:
            conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    except ValueError as exc:  # a URL stored before URLs were checked
        return Attempt(0, None, False, f"invalid webhook URL: {exc}"[:_ERROR_CHARS])
    cut = threading.Event()
    deadline = threading.Timer(timeout, _cut, (conn, cut))
    deadline.daemon = True
    deadline.start()
    try:
        conn.request("POST", target, body=body, headers=headers)
        answer = conn.getresponse()
        status = int(answer.status)
        if 200 <= status < 300:
            return Attempt(0, status, True, None)
        if 300 <= status < 400:
            error = f"HTTP {status} {answer.reason}: redirects are not followed"
        else:
            error = f"HTTP {status} {answer.reason}"
        return Attempt(0, status, False, error[:_ERROR_CHARS])
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if cut.is_set():
            return Attempt(0, None, False, f"no answer within {timeout:g} s")
        return Attempt(0, None, False, f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS])
    finally:
        deadline.cancel()
        conn.close()


def _retryable(result: Attempt) -> bool:
    # no answer, a server error, a timeout or too many requests: worth another try; any
    # other 4xx will answer the same again
    return result.status is None or result.status >= 500 or result.status in (408, 429)


def deliver(
    webhook: str,
    payload: Mapping[str, object],
    fmt: str,
    secret_env: str | None,
    log: Callable[[Attempt], None],
    attempts: int = ATTEMPTS,
    backoff: float = BACKOFF_S,
    timeout: float = TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Attempt]:
    """Post ``payload`` up to ``attempts`` times, waiting ``backoff`` seconds after the first
    failure and twice as long after each next one (at most ``MAX_BACKOFF_S``); ``log`` is
    called with every attempt as it ends. Returns the attempts; the last one's ``ok`` says
    whether it was delivered."""
    body = body_of(payload, webhook, fmt)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "simeval-alerts",
        EVENT_HEADER: str(payload.get("event", "")),
    }
    secret = os.environ.get(secret_env) if secret_env else None
    done: list[Attempt] = []
    wait = backoff
    if secret_env and not secret:  # read once: trying again would not find it either
        missing = Attempt(1, None, False, f"environment variable {secret_env} is not set")
        log(missing)
        return [missing]
    if secret:
        headers[SIGNATURE_HEADER] = sign(body, secret)
    for n in range(1, max(1, attempts) + 1):
        result = post_once(webhook, body, headers, timeout)
        result.attempt = n
        log(result)
        done.append(result)
        if result.ok or not _retryable(result) or n == attempts:
            break
        sleep(min(wait, MAX_BACKOFF_S))
        wait *= 2
    return done
