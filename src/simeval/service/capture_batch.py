"""Batches: many captures stored and scored in one call (``capture --file``, a log backfill)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from simeval.checks import KeyedCapture, check_capture_row
from simeval.service.base import Core, Part
from simeval.service.capture import CaptureService
from simeval.service.models import CaptureReport

# rows per transaction: a killed batch loses at most one transaction's work, and a long one
# does not hold the write lock for its whole length
CAPTURE_CHUNK = 200


class BatchService(Part):
    """Batch capture."""

    def __init__(self, core: Core, captures: CaptureService):
        super().__init__(core)
        self.captures = captures

    def capture_many(
        self,
        rows: Iterable[dict[str, Any]],
        progress: Callable[[int, int], None] | None = None,
        *,
        chunk: int = CAPTURE_CHUNK,
    ) -> CaptureReport:
        """Capture every row as ``capture`` does, after checking them all
        (``check_capture_row``): a bad row stores nothing. A row is a mapping with ``output``
        and optionally ``input``, ``conversation_id``, ``metadata``, ``capture_key`` and ``at``
        or ``captured_at``.

        Rows are stored ``chunk`` at a time, each chunk in one transaction
        (``capture_checked``): an interrupted batch keeps the chunks committed before it
        stopped. A row whose ``capture_key`` is stored already is not stored again; it counts
        as ``replayed``, so a batch of keyed rows run again stores only the rows missing.
        ``results``, ``passed`` and ``failed`` count the results of the captures stored by
        this call. ``progress(done, total)`` follows each chunk.

        >>> from simeval.service import Service
        >>> svc = Service(":memory:")
        >>> svc.capture_many([{"input": "q", "output": "a"}, {"output": "b"}]).captures
        2
        >>> keyed = [{"output": "a", "capture_key": "k1"}, {"output": "b", "capture_key": "k2"}]
        >>> svc.capture_many(keyed[:1]).captures
        1
        >>> again = svc.capture_many(keyed)
        >>> (again.captures, again.replayed)
        (1, 1)
        """
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive integer, not {chunk!r}")
        checked = [check_capture_row(row, f"row {i}") for i, row in enumerate(rows, 1)]
        items: list[KeyedCapture] = [
            (
                row["input"],
                row["output"],
                row["conversation_id"],
                row["metadata"],
                row["captured_at"],
                row.get("capture_key"),
            )
            for row in checked
        ]
        captured = replayed = scored = passed = 0
        for start in range(0, len(items), chunk):
            for cap in self.captures.capture_checked(items[start : start + chunk]):
                if cap.replayed:
                    replayed += 1
                    continue
                captured += 1
                # counted from the packed verdicts (what the batch endpoint answers), not
                # from result objects made only to be counted
                results, passes = cap.result_counts()
                scored += results
                passed += passes
            if progress:
                progress(min(start + chunk, len(items)), len(items))
        return CaptureReport(
            captures=captured,
            results=scored,
            passed=passed,
            failed=scored - passed,
            replayed=replayed,
        )
