"""Captured results counted per indexed metadata value, UTC hour and eval (``meta_rollup``).

``trend_rollup`` (``simeval.store.rollups``) sums every capture up to a watermark (the setting
``rollup_upto``, a capture id); ``meta_rollup`` holds the same captures counted by each of
their ``capture_meta`` rows (key, value): a capture with two indexed values is counted under
both. It is kept in the same transactions as ``trend_rollup``: when the watermark moves
(``roll_up``), when a rescore rewrites a counted capture's results, when the retention cleanup
deletes old hours, and when a declared key's ``capture_meta`` rows are filled in or dropped,
so for every rolled-up key it counts exactly the captures at or below the watermark. Keys
whose values are per-capture measurements (``meta_index.NOT_ROLLED_UP``: latency, tokens)
are not counted: they would add about one row per capture and eval.
``meta_capture_rollup`` (migration 0013) counts the captures themselves per (key, value, hour),
scored or not, in the same transactions (a rescore leaves it alone: it moves no capture).
A count under one metadata filter (``simeval.service.meta_counts``) then sums the whole hours
of one value from the primary key's range (key, value, bucket) and reads only the partial
hours and the captures past the watermark.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypedDict

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.engine import Connection, Row
from sqlalchemy.orm import Session

from simeval.checks import naive_utc
from simeval.store.database import CAPTURE_LOCK
from simeval.store.meta_index import NOT_ROLLED_UP, rolled_up
from simeval.store.packing import packed_ids_and_verdicts
from simeval.store.tables import (
    Setting,
    capture_meta_table,
    captures_table,
    meta_capture_rollup_table,
    meta_rollup_table,
)

ROLLUP_KEY = "rollup_upto"  # the setting holding the watermark (``simeval.store.rollups``)
_IN_CHUNK = 500  # ids in one IN (...) list
_HOUR = timedelta(hours=1)

Pairs = tuple[tuple[str, str], ...]
MetaKey = tuple[str, str, datetime, int]  # (key, value, hour, eval id)
CaptureKey = tuple[str, str, datetime]  # (key, value, hour)


class MetaEntry(TypedDict):
    """A ``capture_meta`` row: a capture's indexed metadata value (its text) under a key."""

    capture_id: int
    key: str
    value: str
    captured_at: datetime


_meta = capture_meta_table.c
_caps = captures_table.c
_roll = meta_rollup_table.c
_held = meta_capture_rollup_table.c


def hour_start(when: datetime | str) -> datetime:
    """The start of the UTC hour ``when`` falls in (naive, as stored; an aware time converted
    to UTC first); ``when`` may be the text SQLite stores (``YYYY-MM-DD HH:MM:SS.ffffff``)."""
    if isinstance(when, str):
        return datetime.fromisoformat(when[:13] + ":00:00")
    return naive_utc(when).replace(minute=0, second=0, microsecond=0)


def whole_hours(
    start: datetime | None, end: datetime | None
) -> tuple[datetime | None, datetime | None, bool]:
    """The whole hours [h1, h2) of [start, end) (None: open) a rollup answers, and whether the
    range lies within one hour (then its captures are read instead)."""
    h1 = (
        None
        if start is None
        else (start if start == hour_start(start) else hour_start(start) + _HOUR)
    )
    h2 = None if end is None else hour_start(end)
    if h1 is not None and h2 is not None and h1 >= h2:
        return None, None, True
    return h1, h2, False


class MetaTally:
    """Counts and passes of packed capture results per (key, value, hour, eval id).

    Captures of one hour with the same eval ids column and the same metadata pairs share a
    slot: their pass columns are kept as raw bytes and summed in one numpy call at the end,
    so a capture costs the same however many evals scored it. The captures themselves are
    counted per (hour, pairs), with results or without (``capture_sums``)."""

    def __init__(self) -> None:
        self._acc: dict[tuple[datetime, bytes, Pairs], list[Any]] = {}
        self._caps: dict[tuple[datetime, Pairs], int] = {}
        self._hours: dict[str, datetime] = {}

    def add(self, when: datetime | str, blob: bytes | None, pairs: Pairs) -> None:
        """Count one capture (captured at ``when``) and its packed results under each of
        ``pairs``."""
        if not pairs:
            return
        if isinstance(when, str):
            hour = self._hours.get(when[:13])
            if hour is None:
                hour = self._hours[when[:13]] = hour_start(when)
        else:
            hour = hour_start(when)
        self._caps[(hour, pairs)] = self._caps.get((hour, pairs), 0) + 1
        if not blob:
            return
        columns = packed_ids_and_verdicts(bytes(blob))
        if columns is None:
            return
        ids, passed = columns
        slot = self._acc.setdefault((hour, ids, pairs), [0, []])
        slot[0] += 1
        slot[1].append(passed)

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

    def capture_sums(self) -> dict[CaptureKey, int]:
        """Captures per (key, value, hour)."""
        out: dict[CaptureKey, int] = {}
        for (hour, pairs), count in self._caps.items():
            for key, value in pairs:
                out[(key, value, hour)] = out.get((key, value, hour), 0) + count
        return out

    def both(self) -> MetaSums:
        """``sums`` and ``capture_sums`` together."""
        return MetaSums(self.sums(), self.capture_sums())


@dataclass
class MetaSums:
    """What some captures add to ``meta_rollup`` (``results``: [count, passes] per (key,
    value, hour, eval id)) and to ``meta_capture_rollup`` (``captures``: per (key, value,
    hour))."""

    results: dict[MetaKey, list[int]] = field(default_factory=dict)
    captures: dict[CaptureKey, int] = field(default_factory=dict)

    def merge(self, more: MetaSums) -> None:
        """Add ``more`` to these sums."""
        merge_sums(self.results, more.results)
        for k, n in more.captures.items():
            self.captures[k] = self.captures.get(k, 0) + n


def write_sums(conn: Connection, sums: MetaSums) -> None:
    """Add ``sums`` to both tables (rows created when missing)."""
    add_meta_sums(conn, sums.results)
    add_capture_sums(conn, sums.captures)


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
    stmt = (postgresql.insert if pg else sqlite.insert)(meta_rollup_table)
    stmt = stmt.on_conflict_do_update(
        index_elements=[_roll.key, _roll.value, _roll.bucket, _roll.eval_id],
        set_={
            "count": _roll.count + stmt.excluded.count,
            "passes": _roll.passes + stmt.excluded.passes,
        },
    )
    conn.execute(stmt, rows)


def add_capture_sums(conn: Connection, counts: dict[CaptureKey, int]) -> None:
    """Add ``counts`` to their ``meta_capture_rollup`` rows (created when missing): one
    upsert."""
    rows = [{"key": k, "value": v, "bucket": b, "count": n} for (k, v, b), n in counts.items() if n]
    if not rows:
        return
    from sqlalchemy.dialects import postgresql, sqlite

    pg = conn.dialect.name == "postgresql"
    stmt = (postgresql.insert if pg else sqlite.insert)(meta_capture_rollup_table)
    stmt = stmt.on_conflict_do_update(
        index_elements=[_held.key, _held.value, _held.bucket],
        set_={"count": _held.count + stmt.excluded.count},
    )
    conn.execute(stmt, rows)


def pairs_between(conn: Connection, after: int, upto: int) -> dict[int, Pairs]:
    """The ``capture_meta`` pairs the rollups count (keys not in ``NOT_ROLLED_UP``) of the
    captures with ids in (after, upto] (its primary key's range), per capture id."""
    q = select(_meta.capture_id, _meta.key, _meta.value).where(
        _meta.capture_id > after, _meta.capture_id <= upto, _meta.key.not_in(NOT_ROLLED_UP)
    )
    return _grouped(conn.execute(q))


def pairs_of(conn: Connection, capture_ids: Iterable[int]) -> dict[int, Pairs]:
    """The ``capture_meta`` pairs the rollups count of ``capture_ids``, per capture id."""
    ids = sorted(set(capture_ids))
    rows: list[Row[int, str, str]] = []
    for i in range(0, len(ids), _IN_CHUNK):
        part = ids[i : i + _IN_CHUNK]
        q = select(_meta.capture_id, _meta.key, _meta.value).where(
            _meta.capture_id.in_(part), _meta.key.not_in(NOT_ROLLED_UP)
        )
        rows.extend(conn.execute(q))
    return _grouped(rows)


def _grouped(rows: Iterable[tuple[int, str, str]]) -> dict[int, Pairs]:
    out: dict[int, list[tuple[str, str]]] = {}
    for cid, key, value in rows:
        out.setdefault(int(cid), []).append((str(key), str(value)))
    return {cid: tuple(sorted(p)) for cid, p in out.items()}


def tally_rows(
    conn: Connection,
    rows: Sequence[tuple[int, datetime | str, bytes | None]],
    after: int | None = None,
) -> MetaSums:
    """The sums of captures ``rows`` = (id, captured_at, packed results) and of their results
    under their ``capture_meta`` pairs; ``after``: the rows are every capture with an id in
    (after, last id] (their pairs read as one range), else any captures."""
    if not rows:
        return MetaSums()
    if after is None:
        pairs = pairs_of(conn, [r[0] for r in rows])
    else:
        pairs = pairs_between(conn, after, int(rows[-1][0]))
    tally = MetaTally()
    for cid, when, blob in rows:
        mine = pairs.get(int(cid))
        if mine:
            tally.add(when, blob, mine)
    return tally.both()


_WATERMARK = select(Setting.value).where(Setting.key == ROLLUP_KEY)


def watermark(conn: Connection | Session) -> int:
    """The rollups' watermark: the last capture id ``trend_rollup`` and the rollups by
    metadata value count."""
    return int(conn.execute(_WATERMARK).scalar() or 0)


def backfill_rollup(
    conn: Connection, entries: list[MetaEntry], after: int, last: int
) -> list[MetaEntry]:
    """For a chunk of a declared key's backfill (the captures with ids in (after, last]):
    ``entries`` (``capture_meta`` rows to add) less those already stored, and the captures at
    or below the watermark counted under the new ones. On PostgreSQL the capture lock is
    taken exclusively first, as ``roll_up`` takes it: the watermark does not move meanwhile
    and no capture of the chunk is still being written. ``meta_capture_rollup`` counts those
    captures under the new ones too."""
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
    mark = watermark(conn)
    counted: dict[int, list[tuple[str, str]]] = {}
    for e in fresh:
        if e["capture_id"] <= mark and rolled_up(e["key"]):
            counted.setdefault(e["capture_id"], []).append((e["key"], e["value"]))
    tally = MetaTally()
    ids = sorted(counted)
    for i in range(0, len(ids), _IN_CHUNK):
        q = select(_caps.id, _caps.captured_at, _caps.scores).where(
            _caps.id.in_(ids[i : i + _IN_CHUNK])
        )
        for cid, when, blob in conn.execute(q):
            tally.add(when, blob, tuple(sorted(counted[cid])))
    write_sums(conn, tally.both())
    return fresh


def drop_rollup_key(conn: Connection, key: str) -> None:
    """Delete the ``meta_rollup`` and ``meta_capture_rollup`` rows of ``key`` (a key no longer
    indexed)."""
    conn.execute(delete(meta_rollup_table).where(_roll.key == key))
    conn.execute(delete(meta_capture_rollup_table).where(_held.key == key))


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
    """The retention cleanup's step: delete the hours up to ``edge`` (inclusive) of both tables
    and sum the hour starting at ``edge`` again from the captures it keeps (every capture is
    counted: the cleanup rolled up first; unscored ones count as captures)."""
    conn.execute(delete(meta_rollup_table).where(_roll.bucket <= edge))
    conn.execute(delete(meta_capture_rollup_table).where(_held.bucket <= edge))
    q = select(_caps.id, _caps.captured_at, _caps.scores).where(
        _caps.captured_at >= edge,
        _caps.captured_at < edge + timedelta(hours=1),
    )
    rows = [tuple(r) for r in conn.execute(q)]
    write_sums(conn, tally_rows(conn, rows))
