"""Which capture metadata the database indexes (``capture_meta``, migration 0010).

A metadata filter (``meta=engine:v2``) is answered from the ``capture_meta`` side table when
its key is indexed: one row per capture and indexed key, ordered by the capture's time, so a
selective filter reads what it returns instead of every capture's JSON. The keys indexed are
``DEFAULT_INDEXED_KEYS`` (the keys people filter on, and the normalised keys of
``simeval.vocabulary``) plus the ones a user declares (the setting ``indexed_meta``). A value
is stored as a filter compares it (``meta_text``: strings as they are, anything else as JSON)
when that text is at most ``MAX_INDEXED_VALUE`` characters; a filter on a longer value, or on
a key not indexed, is answered by reading the captures. Nothing here touches SQL.

>>> index_entries({"engine": "v2", "n": 3, "other": "x"}, ("engine", "n"))
[('engine', 'v2'), ('n', '3')]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

# Adding a key here needs a migration that fills its ``capture_meta`` rows (and its rollup
# rows, unless it is in NOT_ROLLED_UP) for the stored captures: the readers take a default
# key as answered on every store (``answered_meta_keys``), so without one a filter on it
# would silently miss every capture stored before the change. Migration 0010 fills its own
# frozen copy of the list, so a change here does not change what it did.
DEFAULT_INDEXED_KEYS: tuple[str, ...] = (
    "engine",
    "model",
    "provider",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "latency_ms",
)
# Indexed keys whose values are per-capture measurements (nearly every capture its own
# value): ``meta_rollup`` / ``meta_capture_rollup`` would keep about one row per capture,
# eval and key for them, doubling the capture path's cost for sums nobody reads in bulk, so
# they are not rolled up. A filter on one of them selects few captures and is counted from
# the index alone. Every other indexed key (the other defaults, every declared key) is
# rolled up.
NOT_ROLLED_UP: tuple[str, ...] = ("input_tokens", "output_tokens", "latency_ms")
MAX_INDEXED_VALUE = 200  # characters of a value's text (the column's width)
MAX_INDEXED_KEY = 64  # characters of a key (the column's width)


def meta_text(value: object) -> str:
    """A metadata value as a filter compares it: strings as they are, anything else as JSON
    (``2`` matches ``engine=2``, ``true`` matches ``flag=true``)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def indexed_keys(declared: Iterable[str] | None = None) -> tuple[str, ...]:
    """The keys indexed: the defaults, then the ``declared`` ones (in order, once each)."""
    out = list(DEFAULT_INDEXED_KEYS)
    for key in declared or ():
        if key not in out:
            out.append(key)
    return tuple(out)


def index_entries(meta: Mapping[str, object] | None, keys: Iterable[str]) -> list[tuple[str, str]]:
    """The ``(key, text)`` rows of ``capture_meta`` for a capture's metadata ``meta``."""
    if not isinstance(meta, dict) or not meta:
        return []
    out = []
    for key in keys:
        if key in meta:
            text = meta_text(meta[key])
            if len(text) <= MAX_INDEXED_VALUE:
                out.append((key, text))
    return out


def rolled_up(key: str) -> bool:
    """Whether the rollups by metadata value count the indexed ``key`` (``NOT_ROLLED_UP``)."""
    return key not in NOT_ROLLED_UP


def answerable(pair: tuple[str, str], keys: Iterable[str]) -> bool:
    """Whether the filter ``(key, value)`` can be answered from the index of ``keys``."""
    key, value = pair
    return key in tuple(keys) and len(value) <= MAX_INDEXED_VALUE
