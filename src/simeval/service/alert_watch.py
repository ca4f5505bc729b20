"""The server's alert watcher: evaluates the rules off the capture path, as results arrive and
on a timer, and delivers what opened or closed from a thread of its own.

Captures only wake it: the listener it registers with ``Service.on_captured`` sets an event
and returns (no database access, no network), so a slow evaluation or a receiver that is down
or slow never delays a capture. A burst of captures makes one evaluation, not one each (at
least ``min_gap`` seconds between evaluations). Deliveries queue (bounded) for threads of
their own, one lane per rule (and so per receiver), so a receiver retried with backoff holds
up neither the next evaluation nor another rule's receiver: each lane delivers in order, at
most ``MAX_LANES`` lanes (past that, rules share them).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from typing import TYPE_CHECKING

from simeval.service import alert_delivery
from simeval.service.alert_models import AlertCheck

if TYPE_CHECKING:
    from simeval.service.facade import Service

log = logging.getLogger("simeval.alerts")

INTERVAL_S = 30.0
# at most one evaluation per this many seconds under a stream of captures: an evaluation is
# Python work in the server's process, and a busy server should spend its time on captures
MIN_GAP_S = 5.0
QUEUE_SIZE = 1000  # deliveries waiting in one lane
MAX_LANES = 16  # delivery threads at most: rules past that share a lane


class AlertWatcher:
    """Evaluates ``service``'s alert rules in the background (``start``/``stop``)."""

    def __init__(
        self,
        service: Service,
        interval: float = INTERVAL_S,
        min_gap: float = MIN_GAP_S,
        attempts: int = alert_delivery.ATTEMPTS,
        backoff: float = alert_delivery.BACKOFF_S,
        timeout: float = alert_delivery.TIMEOUT_S,
    ):
        self.service = service
        self.interval = interval
        self.min_gap = min_gap
        self.attempts, self.backoff, self.timeout = attempts, backoff, timeout
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lanes: dict[str, queue.Queue[tuple[int, str] | None]] = {}
        self._lanes_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.evaluations = 0  # how many evaluations ran (for tests and the log)

    def wake(self, batch: object = None) -> None:
        """The capture listener: ask for an evaluation soon, and return at once."""
        self._wake.set()

    def start(self) -> None:
        """Register the capture listener and start the evaluating thread (the delivering ones
        start with their rule's first delivery)."""
        self.service.on_captured(self.wake)
        thread = threading.Thread(target=self._evaluate_loop, name="simeval-alerts", daemon=True)
        thread.start()
        self._threads.append(thread)
        self._wake.set()  # a first evaluation at start

    def stop(self, wait: float = 5.0) -> None:
        """Stop the threads (a delivery under way finishes its attempt) and unregister."""
        self._stop.set()
        self._wake.set()
        with contextlib.suppress(ValueError):
            self.service.capture_listeners.remove(self.wake)
        with self._lanes_lock:
            lanes = list(self._lanes.values())
        for lane in lanes:
            with contextlib.suppress(queue.Full):
                lane.put_nowait(None)
        for thread in list(self._threads):
            thread.join(wait)

    def _evaluate_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            if self._stop.is_set():
                return
            self._wake.clear()
            self.run_once()
            # a burst of captures: at most one evaluation per ``min_gap``
            self._stop.wait(self.min_gap)

    def run_once(self) -> AlertCheck:
        """One evaluation, its openings and closings queued for delivery; never raises (a
        failed evaluation is logged and finds nothing)."""
        try:
            check: AlertCheck = self.service.alerts.evaluate_alerts()
        except Exception:
            log.exception("evaluating the alert rules failed; trying again on the next round")
            return AlertCheck()
        finally:
            self.evaluations += 1
        for alert in check.opened:
            log.warning("alert opened: %s: %s", alert.rule, alert.message)
            self._queue(alert.rule, alert.id, "open")
        for alert in check.closed:
            log.warning("alert closed: %s for %s", alert.rule, alert.eval_name)
            self._queue(alert.rule, alert.id, "closed")
        return check

    def _lane(self, rule: str) -> queue.Queue[tuple[int, str] | None]:
        """The delivery queue of ``rule`` (its thread started with it)."""
        with self._lanes_lock:
            if rule not in self._lanes and len(self._lanes) >= MAX_LANES:
                rule = sorted(self._lanes)[hash(rule) % MAX_LANES]  # a lane shared
            lane = self._lanes.get(rule)
            if lane is None:
                lane = self._lanes[rule] = queue.Queue(QUEUE_SIZE)
                thread = threading.Thread(
                    target=self._deliver_loop,
                    args=(lane,),
                    name=f"simeval-deliver-{len(self._lanes)}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)
            return lane

    def _queue(self, rule: str, alert_id: int, event: str) -> None:
        if self._stop.is_set():
            return
        try:
            self._lane(rule).put_nowait((alert_id, event))
        except queue.Full:
            log.error("alert %s: delivery queue full, %s not delivered", alert_id, event)

    def _deliver_loop(self, lane: queue.Queue[tuple[int, str] | None]) -> None:
        while True:
            item = lane.get()
            if item is None or self._stop.is_set():
                return
            try:
                self.service.alerts.deliver_alert(
                    item[0],
                    item[1],
                    attempts=self.attempts,
                    backoff=self.backoff,
                    timeout=self.timeout,
                )
            except Exception:
                log.exception("delivering alert %s failed", item[0])
