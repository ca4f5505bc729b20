"""Batches: many captures stored and scored in one call (``capture --file``, a log backfill)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from simeval.models import CaptureReport
from simeval.service.capture import CaptureMixin
from simeval.service.checks import check_capture_row


class BatchMixin(CaptureMixin):
    """Batch capture."""

    def capture_many(
        self,
        rows: Iterable[dict[str, Any]],
        progress: Callable[[int, int], None] | None = None,
    ) -> CaptureReport:
        """Capture every row, each as ``capture`` does (its own transaction), after checking
        them all (``check_capture_row``): a bad row stores nothing. A row is a mapping with
        ``output`` and optionally ``input``, ``conversation_id``, ``metadata`` and ``at`` or
        ``captured_at``. ``progress(done, total)`` follows each capture.

        >>> from simeval.service import Service
        >>> svc = Service(":memory:")
        >>> svc.capture_many([{"input": "q", "output": "a"}, {"output": "b"}]).captures
        2
        """
        checked = [check_capture_row(row, f"row {i}") for i, row in enumerate(rows, 1)]
        captured = scored = passed = 0
        for i, row in enumerate(checked, 1):
            cap = self.capture(**row)
            captured += 1
            scored += len(cap.results)
            passed += sum(r.passed for r in cap.results)
            if progress:
                progress(i, len(checked))
        return CaptureReport(
            captures=captured, results=scored, passed=passed, failed=scored - passed
        )
