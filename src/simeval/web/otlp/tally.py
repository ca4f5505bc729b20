"""What the OTLP ingest did not make a scored capture of, counted by reason and said once per
reason: shown on ``/api/health`` (its ``otlp`` block), so that nothing is lost without a trace.

- ``dropped``: model calls that became no capture — no message content (an instrumentation
  with its content capture off), or a record that names no span and joins none;
- ``rejected``: spans and log records refused on their own (their batch's others stored), as
  the export's partial success says too;
- ``unscored``: calls stored but left out of scores, trends, alerts and exports — text cut by
  the sender or over the store's limit, no input text.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

log = logging.getLogger("simeval.otlp")
KINDS = ("dropped", "rejected", "unscored")


class Tally:
    """Counters by kind and reason; thread-safe (payloads are read on worker threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}

    def count(self, kind: str, reason: str, note: str | None = None, n: int = 1) -> None:
        """``n`` more of ``kind`` for ``reason``; with a ``note`` (what it was, what to do
        about it), the first of each reason is logged at warning level."""
        with self._lock:
            first = reason not in self._counts[kind]
            self._counts[kind][reason] += n
        if first and note:
            log.warning("OTLP: %s: %s", reason, note)

    def get(self, kind: str, reason: str) -> int:
        with self._lock:
            return self._counts[kind][reason]

    def stats(self) -> dict[str, dict[str, int]]:
        """Each kind's counts by reason (a kind with none: an empty mapping)."""
        with self._lock:
            return {kind: dict(sorted(counts.items())) for kind, counts in self._counts.items()}
