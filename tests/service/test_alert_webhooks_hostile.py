"""Webhooks that cannot be turned against their owner (issue 30, item 2), on both backends: a
receiver answering a redirect gets one failed attempt recorded with its status, and nothing
(no body, no signature) reaches the redirect's target; a receiver that trickles its answer a
byte at a time holds a delivery no longer than its one deadline."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from simeval.service import Service
from webhook_receiver import webhook_receiver

REF = "Paris is the capital of France."
SECRET = "s3cret-for-tests"


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    service = Service(db)
    service.create_eval("capital", REF)
    service.test_eval("capital", "q", REF)
    service.activate_eval("capital")
    yield service
    service.close()


def rule(webhook: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "low",
        "eval": "capital",
        "when": "pass_rate < 0.8",
        "window": 10,
        "webhook": webhook,
        **extra,
    }


@contextmanager
def raw_server(answer: Any) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that reads a request and then runs ``answer(conn)``; its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    answer(conn, stop)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.mark.process
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failed_delivery_and_never_followed(
    svc: Service, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIMEVAL_ALERT_SECRET", SECRET)
    with webhook_receiver() as target:

        def redirect(conn: socket.socket, stop: threading.Event) -> None:
            conn.sendall(
                f"HTTP/1.1 {status} Moved\r\nLocation: {target.url}\r\n"
                "Content-Length: 0\r\nConnection: close\r\n\r\n".encode()
            )

        with raw_server(redirect) as url:
            svc.alerts.set_alert_rules([rule(url, secret_env="SIMEVAL_ALERT_SECRET")])
            report = svc.alerts.test_alert("low", attempts=3, backoff=0.01)
        time.sleep(0.2)  # had it been followed, the target would have it by now
        assert target.got == []
    assert not report.delivered
    assert [(a.status, a.ok) for a in report.attempts] == [(status, False)]  # not retried
    assert "redirects are not followed" in (report.attempts[0].error or "")
    (logged,) = svc.alerts.alert_deliveries()
    assert logged.status == status and not logged.ok


@pytest.mark.process
def test_a_trickling_receiver_is_cut_at_the_deadline(svc: Service) -> None:
    def trickle(conn: socket.socket, stop: threading.Event) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100:  # never a whole header
            if stop.is_set():
                return
            conn.sendall(bytes([byte]))
            time.sleep(0.1)

    with raw_server(trickle) as url:
        svc.alerts.set_alert_rules([rule(url)])
        report = svc.alerts.test_alert("low", attempts=1, backoff=0.01, timeout=0.5)
    assert not report.delivered
    assert report.attempts[0].status is None
    # the receiver would take 10 s to send its 100 bytes, each well within a per-read
    # timeout: only the deadline for the whole exchange ends it
    assert report.attempts[0].error == "no answer within 0.5 s"
