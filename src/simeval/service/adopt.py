"""One call seen twice, by the proxy and as a span: the proxy's capture, stored first (with
the exact text it passed on), takes what only the span knows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from simeval.store import Capture, capture_meta_table
from simeval.store.meta_index import index_entries
from simeval.store.summaries import recompute_conversations


def adopt_span(
    s: Session,
    keys: Sequence[str],
    capture_id: int,
    conversation_id: str | None,
    span_meta: dict[str, Any],
) -> bool:
    """In the write transaction ``s``: the capture ``capture_id`` takes the span's
    ``conversation_id`` where it has none, and the keys of ``span_meta`` its metadata lacks
    (trace and span id, span name); its texts and results stay. Its conversation's summary is
    summed again and the added metadata of ``keys`` (the indexed ones) indexed. True when the
    capture changed."""
    cap = s.get(Capture, capture_id)
    if cap is None:
        return False
    meta = dict(cap.meta or {})
    added = {k: v for k, v in span_meta.items() if k not in meta and v is not None}
    talk = conversation_id if cap.conversation_id is None and conversation_id else None
    if not added and talk is None:
        return False
    if added:
        cap.meta = {**meta, **added}
    if talk is not None:
        cap.conversation_id = talk
    s.flush()
    entries = index_entries(added, keys)
    if entries:
        rows = [
            {"capture_id": cap.id, "key": k, "value": v, "captured_at": cap.captured_at}
            for k, v in entries
        ]
        s.execute(insert(capture_meta_table), rows)
    if talk is not None:
        recompute_conversations(s.connection(), [talk])
    return True
