"""Posting an alert to a webhook: the body (generic JSON, or Slack-compatible ``{"text": ...}``),
its signature, and the bounded retries with backoff.

The standard library's ``urllib`` posts: a webhook is one small POST, and httpx is only in the
optional ``proxy``/``engines`` extras, so a plain install can deliver alerts too.

Signature: with a rule's ``secret_env`` set, the header ``X-Simeval-Signature`` carries
``sha256=<hex>``, the HMAC-SHA256 of the exact body bytes keyed with that variable's value. A
receiver recomputes it over the raw body and compares with ``hmac.compare_digest``. The body
carries ``sent_at``, so a receiver can refuse old replays. A rule whose variable is not set
sends nothing (each attempt is logged with that error): an unsigned post to a receiver that
expects a signature would be refused anyway, and silently dropping the signature is worse.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
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


def body_of(payload: dict[str, Any], webhook: str, fmt: str) -> bytes:
    """The bytes posted: the payload as JSON, or Slack-compatible text made of its message."""
    doc: dict[str, Any] = {"text": payload["message"]} if is_slack(webhook, fmt) else payload
    return json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8")


def post_once(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Attempt:
    """One POST; a 2xx answer is a success. Never raises for a network problem."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return Attempt(0, int(answer.status), 200 <= answer.status < 300, None)
    except urllib.error.HTTPError as exc:
        return Attempt(0, exc.code, False, f"HTTP {exc.code} {exc.reason}"[:_ERROR_CHARS])
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Attempt(0, None, False, f"{type(exc).__name__}: {reason}"[:_ERROR_CHARS])


def _retryable(result: Attempt) -> bool:
    # no answer, a server error, a timeout or too many requests: worth another try; any
    # other 4xx will answer the same again
    return result.status is None or result.status >= 500 or result.status in (408, 429)


def deliver(
    webhook: str,
    payload: dict[str, Any],
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
    for n in range(1, max(1, attempts) + 1):
        if secret_env and not secret:
            result = Attempt(n, None, False, f"environment variable {secret_env} is not set")
        else:
            if secret:
                headers[SIGNATURE_HEADER] = sign(body, secret)
            result = post_once(webhook, body, headers, timeout)
            result.attempt = n
        log(result)
        done.append(result)
        if result.ok or not _retryable(result) or n == attempts:
            break
        sleep(min(wait, MAX_BACKOFF_S))
        wait *= 2
    return done
