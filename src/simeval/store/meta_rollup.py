"""Captured results counted per indexed metadata value, UTC hour and eval (``meta_rollup``).

``trend_rollup`` (``simeval.service.rollup``) sums every capture up to a watermark (the setting
``rollup_upto``, a capture id); ``meta_rollup`` holds the same captures counted by each of
their ``capture_meta`` rows (key, value): a capture with two indexed values is counted under
both. It is kept in the same transactions as ``trend_rollup``: when the watermark moves
(``roll_up``), when a rescore rewrites a counted capture's results, when the retention cleanup
deletes old hours, and when a declared key's ``capture_meta`` rows are filled in or dropped,
so for every indexed key it counts exactly the captures at or below the watermark.
A count under one metadata filter (``simeval.service.meta_counts``) then sums the whole hours
of one value from the primary key's range (key, value, bucket) and reads only the partial
hours and the captures past the watermark.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from simeval.store.database import CAPTURE_LOCK
from simeval.store.models import (
    Setting,
    capture_meta_table,
    captures_table,
    meta_rollup_table,
)
from simeval.store.packing import PACK_HEAD, PACK_VERSION

WATERMARK_KEY = "rollup_upto"  # the setting ``simeval.service.rollup`` moves (ROLLUP_KEY)
_IN_CHUNK = 500  # ids in one IN (...) list

Pairs = tuple[tuple[str, str], ...]
MetaKey = tuple[str, str, datetime, int]  # (key, value, hour, eval id)

_meta = capture_meta_table.c
_caps = captures_table.c
_roll = meta_rollup_table.c


def hour_start(when: datetime | str) -> datetime:
    """The start of the UTC hour ``when`` falls in (naive, as stored); ``when`` may be the
    text SQLite stores (``YYYY-MM-DD HH:MM:SS.ffffff``)."""
    if isinstance(when, str):
        return datetime.fromisoformat(when[:13] + ":00:00")
    return when.replace(minute=0, second=0, microsecond=0, tzinfo=None)


class MetaTally:
    """Counts and passes of packed capture results per (key, value, hour, eval id).

    Captures of one hour with the same eval ids column and the same metadata pairs share a
    slot: their pass columns are kept as raw bytes and summed in one numpy call at the end,
    so a capture costs the same however many evals scored it."""

    def __init__(self) -> None:
        self._acc: dict[tuple[datetime, bytes, Pairs], list[Any]] = {}
        self._hours: dict[str, datetime] = {}

    def add(self, when: datetime | str, blob: bytes | None, pairs: Pairs) -> None:
        """Count one capture's packed results (captured at ``when``) under each of ``pairs``."""
        if not blob or not pairs:
            return
        blob = bytes(blob)
        version, _, nfp, n = PACK_HEAD.unpack_from(blob)
        if version != PACK_VERSION or n == 0:
            return
        at = PACK_HEAD.size
        for _ in range(nfp):
            at += 1 + blob[at]
        passed_at = at + 12 * n + 8 * n + 8 * n + 4 * n  # ids, versions, scores, ..., passed
        if isinstance(when, str):
            hour = self._hours.get(when[:13])
            if hour is None:
                hour = self._hours[when[:13]] = hour_start(when)
        else:
            hour = hour_start(when)
        slot = self._acc.setdefault((hour, blob[at : at + 8 * n], pairs), [0, []])
        slot[0] += 1
        slot[1].append(blob[passed_at : passed_at + n])

    def sums(self) -> dict[MetaKey, list[int]]:
        """[count, passes] per (key, value, hour, eval id)."""
        out: dict[MetaKey, list[int]] = {}
        for (hour, ids, pairs), (count, passed) in self._acc.items():
            n = len(ids) // 8
            eval_ids = np.frombuffer(ids, "<i8").tolist()
            passes = np.frombuffer(b"".join(passed), "u1").reshape(-1, n).sum(axis=0).tolist()
            for key, value in pairs:
                for eval_id, p in zip(eval_ids, passes, strict=True):
                    s = out.setdefault((key, value, hour, eval_id), [0, 0])
                    s[0] += count
                    s[1] += p
        return out


def merge_sums(into: dict[MetaKey, list[int]], more: dict[MetaKey, list[int]]) -> None:
    """Add ``more`` to ``into``."""
    for k, (c, p) in more.items():
        s = into.setdefault(k, [0, 0])
        s[0] += c
        s[1] += p


def add_meta_sums(conn: Connection, sums: dict[MetaKey, list[int]]) -> None:
    """Add ``sums`` to their ``meta_rollup`` rows (created when missing): one upsert."""
    rows = [
        {"key": k, "value": v, "bucket": b, "eval_id": e, "count": c, "passes": p}
        for (k, v, b, e), (c, p) in sums.items()
        if c or p
    ]
    if not rows:
        return
    from sqlalchemy.dialects import postgresql, sqlite

    pg = conn.dialect.name == "postgresql"
    stmt: Any = (postgresql.insert if pg else sqlite.insert)(meta_rollup_table)
    stmt = stmt.on_conflict_do_update(
        index_elements=[_roll.key, _roll.value, _roll.bucket, _roll.eval_id],
        set_={
            "count": _roll.count + stmt.excluded.count,
            "passes": _roll.passes + stmt.excluded.passes,
        },
    )
    conn.execute(stmt, rows)


def pairs_between(conn: Connection, after: int, upto: int) -> dict[int, Pairs]:
    """The ``capture_meta`` pairs of the captures with ids in (after, upto] (its primary key's
    range), per capture id."""
    q = select(_meta.capture_id, _meta.key, _meta.value).where(
        _meta.capture_id > after, _meta.capture_id <= upto
    )
    return _grouped(conn.execute(q))


def pairs_of(conn: Connection, capture_ids: Iterable[int]) -> dict[int, Pairs]:
    """The ``capture_meta`` pairs of ``capture_ids``, per capture id."""
    ids = sorted(set(capture_ids))
    rows: list[Any] = []
    for i in range(0, len(ids), _IN_CHUNK):
        part = ids[i : i + _IN_CHUNK]
        q = select(_meta.capture_id, _meta.key, _meta.value).where(_meta.capture_id.in_(part))
        rows.extend(conn.execute(q))
    return _grouped(rows)


def _grouped(rows: Iterable[Any]) -> dict[int, Pairs]:
    out: dict[int, list[tuple[str, str]]] = {}
    for cid, key, value in rows:
        out.setdefault(int(cid), []).append((str(key), str(value)))
    return {cid: tuple(sorted(p)) for cid, p in out.items()}


def tally_rows(
    conn: Connection, rows: Sequence[tuple[int, Any, bytes | None]], after: int | None = None
) -> dict[MetaKey, list[int]]:
    """The sums of captures ``rows`` = (id, captured_at, packed results) under their
    ``capture_meta`` pairs; ``after``: the rows are every capture with an id in
    (after, last id] (their pairs read as one range), else any captures."""
    if not rows:
        return {}
    if after is None:
        pairs = pairs_of(conn, [r[0] for r in rows])
    else:
        pairs = pairs_between(conn, after, int(rows[-1][0]))
    tally = MetaTally()
    for cid, when, blob in rows:
        mine = pairs.get(int(cid))
        if mine:
            tally.add(when, blob, mine)
    return tally.sums()


def stored_watermark(conn: Connection) -> int:
    """The rollup's watermark: the last capture id both rollups count."""
    value = conn.execute(select(Setting.value).where(Setting.key == WATERMARK_KEY)).scalar()
    return int(value or 0)


def backfill_rollup(
    conn: Connection, entries: list[dict[str, Any]], after: int, last: int
) -> list[dict[str, Any]]:
    """For a chunk of a declared key's backfill (the captures with ids in (after, last]):
    ``entries`` (``capture_meta`` rows to add) less those already stored, and the captures at
    or below the watermark counted under the new ones. On PostgreSQL the capture lock is
    taken exclusively first, as ``roll_up`` takes it: the watermark does not move meanwhile
    and no capture of the chunk is still being written."""
    if not entries:
        return entries
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({CAPTURE_LOCK})")
    keys = sorted({e["key"] for e in entries})
    stored = set(
        conn.execute(
            select(_meta.capture_id, _meta.key).where(
                _meta.capture_id > after, _meta.capture_id <= last, _meta.key.in_(keys)
            )
        ).all()
    )
    fresh = [e for e in entries if (e["capture_id"], e["key"]) not in stored]
    mark = stored_watermark(conn)
    counted: dict[int, list[tuple[str, str]]] = {}
    for e in fresh:
        if e["capture_id"] <= mark:
            counted.setdefault(e["capture_id"], []).append((e["key"], e["value"]))
    tally = MetaTally()
    ids = sorted(counted)
    for i in range(0, len(ids), _IN_CHUNK):
        q = select(_caps.id, _caps.captured_at, _caps.scores).where(
            _caps.id.in_(ids[i : i + _IN_CHUNK])
        )
        for cid, when, blob in conn.execute(q):
            tally.add(when, blob, tuple(sorted(counted[cid])))
    add_meta_sums(conn, tally.sums())
    return fresh


def drop_rollup_key(conn: Connection, key: str) -> None:
    """Delete the ``meta_rollup`` rows of ``key`` (a key no longer indexed)."""
    conn.execute(delete(meta_rollup_table).where(_roll.key == key))


def add_capture_changes(
    conn: Connection, changes: dict[int, tuple[datetime, list[tuple[int, int, int]]]]
) -> None:
    """Apply changes of counted captures' results (a rescore): per capture id, its hour and
    (eval id, change of the count, change of the passes) entries, under its pairs."""
    if not changes:
        return
    sums: dict[MetaKey, list[int]] = {}
    for cid, pairs in pairs_of(conn, changes).items():
        hour, deltas = changes[cid]
        for key, value in pairs:
            for eval_id, d_count, d_passes in deltas:
                s = sums.setdefault((key, value, hour_start(hour), eval_id), [0, 0])
                s[0] += d_count
                s[1] += d_passes
    add_meta_sums(conn, sums)


def cut_hours(conn: Connection, edge: datetime) -> None:
    """The retention cleanup's step: delete the hours up to ``edge`` (inclusive) and sum the
    hour starting at ``edge`` again from the captures it keeps (every capture is counted: the
    cleanup rolled up first)."""
    conn.execute(delete(meta_rollup_table).where(_roll.bucket <= edge))
    q = select(_caps.id, _caps.captured_at, _caps.scores).where(
        _caps.captured_at >= edge,
        _caps.captured_at < edge + timedelta(hours=1),
        _caps.scores.is_not(None),
    )
    rows = [tuple(r) for r in conn.execute(q)]
    add_meta_sums(conn, tally_rows(conn, rows))
