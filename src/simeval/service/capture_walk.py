"""Captures in time order, a chunk at a time, selected in the database: the walk under every
listing, count and export of captures and captured results.

A walk goes newest (or oldest) first by the key ``(captured_at, id)``, each step starting
after the last capture read (a keyset: no row is skipped one by one, and captures stored
meanwhile do not shift it). A metadata filter is answered from ``capture_meta`` (migration
0010, ``simeval.store.meta_index``) when its key is indexed and its value short enough: the
first such pair walks that table's index (key, value, captured_at, capture_id), the others
are ``EXISTS`` on its primary key (capture_id, key), so a selective filter reads only the
captures it returns. A pair the index cannot answer (a key not indexed, a value over 200
characters) is checked on the captures read, as before: correct, and slower.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from simeval.service.filters import meta_matches
from simeval.service.settings import answered_meta_keys
from simeval.store import Capture, Tx
from simeval.store.capture_reads import (
    CaptureScope,
    Pair,
    count_captures_in_scope,
    result_count_groups,
    scope_blobs,
    select_in_scope,
    step_by_meta,
    step_by_time,
)
from simeval.store.meta_index import answerable
from simeval.store.packing import entry_count, packed_count

FIRST_CHUNK = 32  # captures read by a walk's first step: a page of results needs a few
MOST_CHUNK = 512  # ... doubling up to this many for a long walk

__all__ = [
    "FIRST_CHUNK",
    "MOST_CHUNK",
    "CaptureScope",
    "Pair",
    "capture_chunks",
    "count_in_scope",
    "count_results_in_scope",
    "scope_select",
    "split_pairs",
]


def split_pairs(s: Tx, pairs: tuple[Pair, ...]) -> tuple[list[Pair], list[Pair]]:
    """``pairs`` as (answered by ``capture_meta``, checked on the captures read)."""
    keys = answered_meta_keys(s) if pairs else ()
    served = [p for p in pairs if answerable(p, keys)]
    return served, [p for p in pairs if p not in served]


def capture_chunks(
    s: Tx,
    scope: CaptureScope,
    *,
    newest: bool = True,
    after: tuple[datetime, int] | None = None,
    first: int = FIRST_CHUNK,
) -> Iterator[list[Capture]]:
    """The captures in ``scope``, newest (or oldest) first, in lists of a few, starting after
    the key ``after`` = (captured_at, id) in the walk's direction (None: from the start)."""
    served, checked = split_pairs(s, scope.meta)
    size = first
    last = after
    while True:
        if served:
            caps, last = step_by_meta(s, scope, served, newest, last, size)
        else:
            caps, last = step_by_time(s, scope, newest, last, size)
        if last is None:
            return
        if checked:
            caps = [c for c in caps if meta_matches(c.meta, tuple(checked))]
        if caps:
            yield caps
        size = min(size * 2, MOST_CHUNK)


def count_in_scope(s: Tx, scope: CaptureScope) -> int:
    """How many captures ``capture_chunks`` gives: a COUNT over ``capture_meta``'s index when
    the index answers every metadata pair, else the captures' count (or the walk)."""
    served, checked = split_pairs(s, scope.meta)
    if checked:
        return sum(len(c) for c in capture_chunks(s, scope, first=MOST_CHUNK))
    return count_captures_in_scope(s, scope, served)


def count_results_in_scope(s: Tx, scope: CaptureScope, eval_id: int | None) -> int:
    """How many captured results (of ``eval_id``, or all) the captures in ``scope`` hold,
    from each capture's packed results' header (their count, grouped in the database: one
    row per distinct count) or their eval ids column, not from the captures' rows."""
    served, checked = split_pairs(s, scope.meta)
    if eval_id is None and not checked:
        return sum(packed_count(n) * k for n, k in result_count_groups(s, scope, served) if n)
    pairs, total = tuple(checked), 0
    for row in scope_blobs(s, scope, served, bool(checked)):
        if row[0] is None or (checked and not meta_matches(row[1], pairs)):
            continue
        total += entry_count(bytes(row[0]), eval_id)
    return total


def scope_select(
    s: Tx, scope: CaptureScope, columns: list[Any], *, newest: bool = False
) -> tuple[Any, tuple[Pair, ...]]:
    """A select of ``columns`` (of ``Capture``) over every capture in ``scope``, in time
    order (oldest first unless ``newest``), for a reader of whole columns (compare) that
    streams them without an object per capture; and the metadata pairs ``capture_meta``
    cannot answer: then ``Capture.meta`` is selected last, for the caller to check them
    (``meta_matches``)."""
    served, checked = split_pairs(s, scope.meta)
    return select_in_scope(scope, served, bool(checked), columns, newest), tuple(checked)
