"""Counts, pass rates and mean scores of captured results without reading every result.

A capture's results are packed on the capture (``simeval.store.pack_results``). Summing them
for a trend or an eval's stats goes through a rollup: ``trend_rollup`` holds, per UTC hour,
eval, eval version and scorer fingerprint, the count, the sum of scores and the passes of every
capture up to a watermark (the setting ``rollup_upto``, a capture id). The capture path moves
the watermark every ``ROLLUP_EVERY`` captures, in its own transaction (``roll_up``), so a
capture never updates one row per eval; a read adds the few captures past the watermark on the
fly (``tally_range``), so it is always exact. Reviews are applied on read: they are few, and
a review changes a result's effective score and verdict after the fact.

A time range that does not start or end on the hour is exact too: the partial hours at either
end are summed from their captures, the whole hours between from the rollup.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVarTuple, cast

import numpy as np
from sqlalchemy import Select, Table, and_, bindparam, func, select, tuple_, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from simeval.checks import naive_utc
from simeval.store.database import CAPTURE_LOCK
from simeval.store.meta_rollup import (
    ROLLUP_KEY,
    MetaSums,
    hour_start,
    tally_rows,
    watermark,
    whole_hours,
    write_sums,
)
from simeval.store.packing import (
    packed_layout,
    packed_sum_columns,
    sum_column_rows,
    unpack_results,
)
from simeval.store.tables import Capture, Review, Setting, TrendRollup

rollup_table = cast(Table, TrendRollup.__table__)
ROLLUP_EVERY = 256  # captures past the watermark before the capture path rolls them up
Ts = TypeVarTuple("Ts")
_CHUNK = 1000
HOUR = timedelta(hours=1)

Key = tuple[datetime, int, int, str]  # (hour, eval id, eval version, fingerprint)


@dataclass
class _Layout:
    ids: list[int]
    versions: list[int]
    fps: list[str]  # per entry
    keep: list[int]  # entries counted (all, or those of the evals asked for)


@dataclass
class Sums:
    """Summed results of one key: count, sum of scores, passes (effective once reviews are
    applied), and how many were reviewed (with their effective passes)."""

    count: int = 0
    total: float = 0.0
    passes: int = 0
    reviewed: int = 0
    reviewed_passes: int = 0


def _layout(blob: bytes, wanted: frozenset[int] | None) -> _Layout:
    ids, versions, fps = packed_layout(blob)
    keep = [i for i, e in enumerate(ids) if wanted is None or e in wanted]
    return _Layout(ids, versions, fps, keep)


class _Slot:
    """The captures of one (hour, layout) being summed: their score and pass columns are
    kept as raw slices and added in one numpy call every few thousand (``flush``), in
    capture order, so the sums are those of adding them one by one."""

    __slots__ = ("count", "flush_at", "n", "passed", "passes", "scores", "total")

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.scores: list[bytes] = []
        self.passed: list[bytes] = []
        self.total = np.zeros(n, np.float64)
        self.passes = np.zeros(n, np.int64)
        self.flush_at = max(16, (1 << 22) // (9 * n))  # about 4 MB of slices at most

    def flush(self) -> None:
        if not self.scores:
            return
        scores, passed = sum_column_rows(self.scores, self.passed, self.n)
        # sequential sums (cumsum), not pairwise: the same totals as adding one by one
        self.total = np.cumsum(np.vstack((self.total, scores)), axis=0)[-1]
        self.passes += passed.sum(axis=0, dtype=np.int64)
        self.scores.clear()
        self.passed.clear()


@dataclass
class Tally:
    """Sums of packed capture results per (hour, eval, version, fingerprint).

    Captures scored by the same evals share a layout (the same eval ids, versions and
    fingerprints in the same order); their score and pass columns are added as arrays, so the
    cost per capture does not depend on how many evals scored it.
    """

    eval_ids: frozenset[int] | None = None
    _layouts: dict[bytes, _Layout] = field(default_factory=dict)
    # per (hour, layout): [count, score columns, pass columns], each column a list of raw
    # slices waiting to be added (in one numpy call) and its running sum
    _acc: dict[tuple[datetime, bytes], _Slot] = field(default_factory=dict)
    _hours: dict[str, datetime] = field(default_factory=dict)

    def add(self, when: datetime | str, blob: bytes | None) -> None:
        """Add one capture's packed results, captured at ``when`` (a datetime, or the text
        SQLite stores)."""
        if not blob:
            return
        blob = bytes(blob)
        columns = packed_sum_columns(blob)
        if columns is None:
            return
        layout_key, scores, passed = columns
        layout = self._layouts.get(layout_key)
        if layout is None:
            layout = self._layouts[layout_key] = _layout(blob, self.eval_ids)
        if not layout.keep:
            return
        if isinstance(when, str):  # as SQLite stores it: the hour is its first 13 characters
            hour = self._hours.get(when[:13])
            if hour is None:
                hour = self._hours[when[:13]] = hour_start(when)
        else:
            hour = hour_start(when)
        slot = self._acc.get((hour, layout_key))
        if slot is None:
            slot = self._acc[(hour, layout_key)] = _Slot(len(passed))
        slot.count += 1
        slot.scores.append(scores)
        slot.passed.append(passed)
        if len(slot.scores) >= slot.flush_at:
            slot.flush()

    def sums(self) -> dict[Key, Sums]:
        """The sums of the captures added, per (hour, eval, version, fingerprint)."""
        out: dict[Key, Sums] = {}
        for (hour, layout_key), slot in self._acc.items():
            slot.flush()
            layout = self._layouts[layout_key]
            count = slot.count
            totals, passed = slot.total.tolist(), slot.passes.tolist()
            for i in layout.keep:
                key = (hour, layout.ids[i], layout.versions[i], layout.fps[i])
                s = out.get(key)
                if s is None:
                    s = out[key] = Sums()
                s.count += count
                s.total += totals[i]
                s.passes += passed[i]
        return out


def roll_up(conn: Connection, upto: int | None = None) -> int:
    """Add the captures past the watermark to ``trend_rollup`` (and, by their indexed
    metadata, to ``meta_rollup``: ``simeval.store.meta_rollup``) and move the watermark; in the
    caller's write transaction. Returns the new watermark.

    On PostgreSQL the transaction first takes the capture lock exclusively (see
    ``simeval.store.database``): every capture with an id at or below the new watermark is
    committed.
    """
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({CAPTURE_LOCK})")
    start = watermark(conn) if upto is None else upto
    tally = Tally()
    last = start
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    # through the driver: the rows as stored (SQLite's text dates are cut to the hour by
    # Tally, not parsed one by one), without building the statement again per chunk
    past = (
        f"SELECT id, captured_at, scores FROM captures WHERE id > {mark} ORDER BY id LIMIT {_CHUNK}"
    )
    by_meta = MetaSums()  # meta_rollup and meta_capture_rollup move with it (same captures)
    while True:
        rows = conn.exec_driver_sql(past, (last,)).all()
        if not rows:
            break
        for _, when, blob in rows:
            tally.add(when, blob)
        by_meta.merge(tally_rows(conn, rows, after=last))
        last = rows[-1][0]
    if last == start:
        return start
    add_sums(conn, tally.sums())
    write_sums(conn, by_meta)
    set_watermark(conn, last)
    return last


def add_sums(conn: Connection, sums: dict[Key, Sums]) -> None:
    """Add ``sums`` to the rollup rows of their keys (created when missing)."""
    if not sums:
        return
    t = rollup_table
    existing = {
        (hour_start(b), e, v, f): (c, tot, p)
        for b, e, v, f, c, tot, p in conn.execute(
            select(
                t.c.bucket,
                t.c.eval_id,
                t.c.eval_version,
                t.c.fingerprint,
                t.c.count,
                t.c.total,
                t.c.passes,
            ).where(t.c.bucket.in_({k[0] for k in sums}))
        )
    }
    fresh, changed = [], []
    for key, s in sums.items():
        old = existing.get(key)
        row = {
            "b_bucket": key[0],
            "b_eval_id": key[1],
            "b_eval_version": key[2],
            "b_fingerprint": key[3],
        }
        if old is None:
            fresh.append(
                {
                    "bucket": key[0],
                    "eval_id": key[1],
                    "eval_version": key[2],
                    "fingerprint": key[3],
                    "count": s.count,
                    "total": s.total,
                    "passes": s.passes,
                }
            )
        else:
            changed.append(
                {
                    **row,
                    "b_count": old[0] + s.count,
                    "b_total": old[1] + s.total,
                    "b_passes": old[2] + s.passes,
                }
            )
    if changed:  # one statement for every changed row
        conn.execute(_ADD_TO_ROW, changed)
    if fresh:
        conn.execute(t.insert(), fresh)


def sum_rows(conn: Connection, rows: Iterable[tuple[datetime, bytes | None]]) -> None:
    """The rollup's sums of the (captured_at, scores) ``rows`` added (the hour the retention
    cutoff falls in, summed again from the captures it keeps)."""
    tally = Tally()
    for when, blob in rows:
        tally.add(when, blob)
    add_sums(conn, tally.sums())


def count_capture(conn: Connection, cap: Capture, sign: int) -> None:
    """The capture, as it is now, added to (``sign`` 1) or taken from (-1) the trend and
    metadata rollups."""
    tally = Tally()
    tally.add(cap.captured_at, cap.scores)
    sums = {
        k: Sums(count=sign * v.count, total=sign * v.total, passes=sign * v.passes)
        for k, v in tally.sums().items()
    }
    add_sums(conn, sums)
    meta = tally_rows(conn, [(cap.id, cap.captured_at, cap.scores)])
    write_sums(
        conn,
        MetaSums(
            {k: [sign * c, sign * p] for k, (c, p) in meta.results.items()},
            {k: sign * n for k, n in meta.captures.items()},
        ),
    )


_ADD_TO_ROW = (
    update(rollup_table)
    .where(
        and_(
            rollup_table.c.bucket == bindparam("b_bucket"),
            rollup_table.c.eval_id == bindparam("b_eval_id"),
            rollup_table.c.eval_version == bindparam("b_eval_version"),
            rollup_table.c.fingerprint == bindparam("b_fingerprint"),
        )
    )
    .values(count=bindparam("b_count"), total=bindparam("b_total"), passes=bindparam("b_passes"))
)
_settings = cast(Table, Setting.__table__)
_SET_WATERMARK = update(_settings).where(_settings.c.key == ROLLUP_KEY).values(value=bindparam("v"))


def set_watermark(conn: Connection, value: int) -> None:
    """Set the rollup's watermark (the setting ``rollup_upto``) to ``value``."""
    done = conn.execute(_SET_WATERMARK, {"v": value}).rowcount
    if not done:
        conn.execute(_settings.insert().values(key=ROLLUP_KEY, value=value))


def _captures_between(
    s: Session | Connection, start: datetime, end: datetime
) -> Iterator[tuple[datetime, bytes | None]]:
    """The scored captures of [start, end), a chunk at a time in time order (a keyset on
    (captured_at, id)): planned through the time index, reading only the range. (Chunks by
    id with the range as a condition were planned by SQLite as a primary-key scan from the
    first capture.)"""
    first = (
        select(Capture.id, Capture.captured_at, Capture.scores)
        .where(
            Capture.scores.is_not(None),
            Capture.captured_at >= start,
            Capture.captured_at < end,
        )
        .order_by(Capture.captured_at, Capture.id)
        .limit(_CHUNK)
    )
    q = first
    while True:
        rows = s.execute(q).all()
        for _, when, blob in rows:
            yield when, blob
        if len(rows) < _CHUNK:
            return
        last_id, last_at = rows[-1][0], rows[-1][1]
        q = first.where(tuple_(Capture.captured_at, Capture.id) > tuple_(last_at, last_id))


def chunks_after(
    s: Session | Connection,
    after: int,
    start: datetime | None = None,
    end: datetime | None = None,
) -> Iterator[list[tuple[int, datetime, bytes | None]]]:
    """The scored captures past the rollup's watermark ``after`` (a few hundred) as (id, time,
    packed results), by id, a chunk at a time, those captured in [start, end) kept: the range
    is applied here, not in the query, which would then be planned through the time index
    over the whole range instead of the few ids."""
    lo = None if start is None else naive_utc(start)
    hi = None if end is None else naive_utc(end)
    q = select(Capture.id, Capture.captured_at, Capture.scores).where(Capture.scores.is_not(None))
    last = after
    while True:
        rows = s.execute(q.where(Capture.id > last).order_by(Capture.id).limit(_CHUNK)).all()
        kept = [
            (cid, when, blob)
            for cid, when, blob in rows
            if (lo is None or when >= lo) and (hi is None or when < hi)
        ]
        if kept:
            yield kept
        if len(rows) < _CHUNK:
            return
        last = rows[-1][0]


def captures_after(
    s: Session | Connection,
    after: int,
    start: datetime | None = None,
    end: datetime | None = None,
) -> Iterator[tuple[datetime, bytes | None]]:
    """(time, packed results) of the captures ``chunks_after`` gives."""
    for chunk in chunks_after(s, after, start, end):
        for _, when, blob in chunk:
            yield when, blob


def _tally_captures(
    s: Session, wanted: frozenset[int] | None, start: datetime | None, end: datetime | None
) -> tuple[Tally, tuple[datetime | None, datetime | None] | None]:
    """What the rollup does not hold of [start, end), summed from the captures: the partial
    hours at either end and the captures past the watermark. Returns the sums and the whole
    hours the rollup answers (None: none, the range lies within one hour)."""
    tally = Tally(wanted)
    h1, h2, within = whole_hours(start, end)
    if within:
        assert start is not None and end is not None
        for when, blob in _captures_between(s, start, end):
            tally.add(when, blob)
        return tally, None
    if start is not None and h1 is not None and start < h1:
        for when, blob in _captures_between(s, start, h1):
            tally.add(when, blob)
    if end is not None and h2 is not None and h2 < end:
        for when, blob in _captures_between(s, h2, end):
            tally.add(when, blob)
    for when, blob in captures_after(s, watermark(s), h1, h2):
        tally.add(when, blob)
    return tally, (h1, h2)


def _rollup_where(
    q: Select[*Ts], wanted: frozenset[int] | None, h1: datetime | None, h2: datetime | None
) -> Select[*Ts]:
    if wanted is not None:
        q = q.where(TrendRollup.eval_id.in_(wanted))
    if h1 is not None:
        q = q.where(TrendRollup.bucket >= h1)
    if h2 is not None:
        q = q.where(TrendRollup.bucket < h2)
    return q


def tally_range(
    s: Session,
    eval_ids: Iterable[int] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[Key, Sums]:
    """Exact sums of captured results in [start, end) per key, reviews applied."""
    wanted = None if eval_ids is None else frozenset(eval_ids)
    # whole hours from the rollup, partial hours at the ends from their captures
    tally, hours = _tally_captures(s, wanted, start, end)
    out = tally.sums()
    if hours is not None:
        q = select(
            TrendRollup.bucket,
            TrendRollup.eval_id,
            TrendRollup.eval_version,
            TrendRollup.fingerprint,
            TrendRollup.count,
            TrendRollup.total,
            TrendRollup.passes,
        )
        for b, e, v, f, c, tot, p in s.execute(_rollup_where(q, wanted, *hours)):
            key = (hour_start(b), e, v, f)
            mine = out.get(key)
            if mine is None:
                out[key] = Sums(c, tot, p)
            else:
                mine.count += c
                mine.total += tot
                mine.passes += p
    _apply_reviews(s, out, wanted, start, end)
    return out


def tally_totals(
    s: Session,
    eval_ids: Iterable[int] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[int, Sums]:
    """``tally_range`` summed per eval id: the rollup's hours added up in the database (a row
    per eval however many hours the range spans), so an all-time count costs the same at any
    age of the store."""
    wanted = None if eval_ids is None else frozenset(eval_ids)
    tally, hours = _tally_captures(s, wanted, start, end)
    out: dict[int, Sums] = {}
    for (_, eval_id, _, _), sums in tally.sums().items():
        mine = out.setdefault(eval_id, Sums())
        mine.count += sums.count
        mine.total += sums.total
        mine.passes += sums.passes
    if hours is not None:
        # grouped by an expression of the eval id: SQLite would otherwise walk the whole
        # (eval_id, bucket) index for its order instead of reading the hours asked for
        by_eval = (TrendRollup.eval_id + 0).label("eval_id")
        q = select(
            by_eval,
            func.sum(TrendRollup.count),
            func.sum(TrendRollup.total),
            func.sum(TrendRollup.passes),
        ).group_by(by_eval)
        for e, c, tot, p in s.execute(_rollup_where(q, wanted, *hours)):
            mine = out.setdefault(e, Sums())
            mine.count += int(c or 0)
            mine.total += float(tot or 0.0)
            mine.passes += int(p or 0)
    for (_, eval_id, _, _), d_total, d_passes, ok in review_changes(s, wanted, start, end):
        _reviewed(out.get(eval_id), d_total, d_passes, ok)
    return out


def _reviewed(slot: Sums | None, d_total: float, d_passes: int, ok: bool) -> None:
    """A review's change to the sums of its key (none when the key has no sums)."""
    if slot is None:
        return
    slot.total += d_total
    slot.passes += d_passes
    slot.reviewed += 1
    slot.reviewed_passes += int(ok)


def _apply_reviews(
    s: Session,
    out: dict[Key, Sums],
    wanted: frozenset[int] | None,
    start: datetime | None,
    end: datetime | None,
) -> None:
    for key, d_total, d_passes, ok in review_changes(s, wanted, start, end):
        _reviewed(out.get(key), d_total, d_passes, ok)


def reviews_of(
    columns: list[Any],
    wanted: Iterable[int] | None,
    start: datetime | None,
    end: datetime | None,
) -> Any:
    """``columns`` of the reviews of captured results (of the evals ``wanted``, or all) whose
    captures were captured in [start, end), joined to their captures."""
    q = (
        select(*columns)
        .join(Capture, Capture.id == Review.capture_id)
        .where(Review.capture_id.is_not(None))
        # the reviewed captures looked up by id: without it SQLite walks the time index over
        # the range's every capture to find the few reviewed ones
        .where(Capture.id.in_(select(Review.capture_id).where(Review.capture_id.is_not(None))))
    )
    if wanted is not None:
        q = q.where(Review.eval_id.in_(wanted))
    if start is not None:
        q = q.where(Capture.captured_at >= start)
    if end is not None:
        q = q.where(Capture.captured_at < end)
    return q


def review_changes(
    s: Session,
    wanted: Iterable[int] | None,
    start: datetime | None,
    end: datetime | None,
) -> Iterator[tuple[Key, float, int, bool]]:
    """What each review of a captured result in [start, end) changes in its key's sums:
    (key, change of the total, change of the passes, whether the reviewed result passes)."""
    columns = [Review.eval_id, Review.score, Capture.captured_at, Capture.scores]
    for eval_id, reviewed, when, blob in s.execute(reviews_of(columns, wanted, start, end)):
        if eval_id is None:
            continue
        packed = unpack_results(blob)
        i = packed.position(eval_id)
        if i < 0:
            continue
        fingerprint = packed.fingerprints[packed.fp_index[i]]
        key = (hour_start(when), eval_id, packed.versions[i], fingerprint)
        ok = reviewed >= packed.thresholds[i]
        yield key, reviewed - packed.scores[i], int(ok) - packed.passed[i], ok
