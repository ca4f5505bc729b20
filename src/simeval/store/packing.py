"""The packed form of a capture's results (``Capture.scores``, migration 0003).

One capture's results for every eval that scored it are one blob on the capture's row, so a
capture writes one row however many evals scored it. The layout, all little-endian::

    header   uint8 format version (``PACK_VERSION``), uint8 0, uint16 fingerprints, uint32 n
    then each scorer fingerprint: uint8 length, ASCII bytes
    then n entries per column: int64 eval ids, int32 versions, float64 scores,
        float64 thresholds, int32 matched reference, uint8 passed, uint8 fingerprint index

The column primitives (``le_bytes``, ``f64_bytes``, ``i32_bytes``, ``pick_entries``) are here
too: the capture's hot path (``simeval.service.capture``) builds the columns itself, from the
eval-set scorer's score arrays, without a per-result object. Nothing here runs SQL; the
few readers that count in the database build their expression with SQLAlchemy, imported then.

The readers at the end read many captures' blobs without unpacking each: the rollups' sums
(``packed_sum_columns``, ``packed_layout``, ``sum_column_rows``; ``simeval.store.rollups``)
and a compare side's columns (``packed_columns``; ``simeval.service.compare_sides``).

>>> unpack_results(pack_results([(3, 1, 0.5, False, 0.8, 0, "abc")])).scores[0]
0.5
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from simeval.errors import InvalidInput, SimevalError

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, SQLColumnExpression

PACK_VERSION = 1
PACK_HEAD = struct.Struct("<BBHI")  # format version, 0, fingerprints, results
LITTLE_ENDIAN = sys.byteorder == "little"


def le_bytes(values: array[int] | array[float]) -> bytes:
    """An array's bytes in little-endian order (the stored form on every machine)."""
    if not LITTLE_ENDIAN:  # pragma: no cover - big-endian machines
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def f64_bytes(values: Sequence[float]) -> bytes:
    """Floats as a stored float64 column; a memoryview of native doubles (the eval-set
    engine's scores) is copied as it is on a little-endian machine."""
    if isinstance(values, memoryview) and LITTLE_ENDIAN:
        return values.tobytes()
    return le_bytes(array("d", values))


def i32_bytes(values: Sequence[int]) -> bytes:
    """Integers as a stored int32 column (a memoryview of native int32 copied as it is)."""
    if isinstance(values, memoryview) and LITTLE_ENDIAN:
        return values.tobytes()
    return le_bytes(array("i", values))


def pick_entries(column: bytes, members: list[int], width: int) -> bytes:
    """The entries ``members`` (in that order) of a stored column of ``width``-byte entries."""
    return b"".join(column[m * width : (m + 1) * width] for m in members)


@dataclass(frozen=True)
class PackedResults:
    """A capture's results, column by column (``unpack_results``). Entry ``i`` is one eval's
    result: ``eval_ids[i]``, ``versions[i]``, ``scores[i]``, ... ``fingerprints[fp_index[i]]``.
    """

    eval_ids: Sequence[int]
    versions: Sequence[int]
    scores: Sequence[float]
    thresholds: Sequence[float]
    matched: Sequence[int]
    passed: bytes
    fp_index: bytes
    fingerprints: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.eval_ids)

    def position(self, eval_id: int) -> int:
        """The entry of ``eval_id``, or -1."""
        try:
            return list(self.eval_ids).index(eval_id)
        except ValueError:
            return -1

    def rows(self) -> Iterator[tuple[int, int, float, bool, float, int, str]]:
        """(eval id, version, score, passed, threshold, matched index, fingerprint) per entry."""
        fps = self.fingerprints
        for i in range(len(self.eval_ids)):
            yield (
                self.eval_ids[i],
                self.versions[i],
                self.scores[i],
                bool(self.passed[i]),
                self.thresholds[i],
                self.matched[i],
                fps[self.fp_index[i]],
            )


def pack_parts(
    fingerprints: Sequence[str],
    eval_ids: bytes,
    versions: bytes,
    scores: bytes,
    thresholds: bytes,
    matched: bytes,
    passed: bytes,
    fp_index: bytes,
) -> bytes:
    """The stored form from its columns, each already in its little-endian array form
    (int64 ids, int32 versions, float64 scores and thresholds, int32 matched, uint8 passed and
    fingerprint index): the capture's hot path builds them without a per-result object."""
    n = len(passed)
    head = [PACK_HEAD.pack(PACK_VERSION, 0, len(fingerprints), n)]
    for fp in fingerprints:
        raw = fp.encode("ascii")
        head.append(bytes((len(raw),)) + raw)
    return b"".join((*head, eval_ids, versions, scores, thresholds, matched, passed, fp_index))


def pack_results(rows: Iterable[tuple[int, int, float, bool, float, int, str]]) -> bytes:
    """Pack (eval id, version, score, passed, threshold, matched index, fingerprint) rows.

    >>> unpack_results(pack_results([(3, 1, 0.5, False, 0.8, 0, "abc")])).scores[0]
    0.5
    """
    rows = list(rows)
    fps: dict[str, int] = {}
    for r in rows:
        fps.setdefault(r[6], len(fps))
    if len(fps) > 255:
        raise InvalidInput("more than 255 scorer fingerprints in one capture")
    return pack_parts(
        list(fps),
        le_bytes(array("q", (r[0] for r in rows))),
        le_bytes(array("i", (r[1] for r in rows))),
        le_bytes(array("d", (r[2] for r in rows))),
        le_bytes(array("d", (r[4] for r in rows))),
        le_bytes(array("i", (r[5] for r in rows))),
        bytes(bool(r[3]) for r in rows),
        bytes(fps[r[6]] for r in rows),
    )


def packed_fingerprints(blob: bytes, nfp: int) -> tuple[list[str], int]:
    """The ``nfp`` scorer fingerprints of a packed capture, and where its columns start."""
    at = PACK_HEAD.size
    fps = []
    for _ in range(nfp):
        size = blob[at]
        fps.append(blob[at + 1 : at + 1 + size].decode("ascii"))
        at += 1 + size
    return fps, at


def unpack_results(blob: bytes | None) -> PackedResults:
    """The columns of a packed capture (an empty set for ``None``)."""
    if not blob:
        return PackedResults((), (), (), (), (), b"", b"", ())
    blob = bytes(blob)
    version, _, nfp, n = PACK_HEAD.unpack_from(blob)
    if version != PACK_VERSION:
        raise SimevalError(f"packed results of format {version}, unknown to this simeval")
    fps, at = packed_fingerprints(blob, nfp)
    cols: list[Any] = []
    for code, width in (("q", 8), ("i", 4), ("d", 8), ("d", 8), ("i", 4)):
        arr = array(code)
        arr.frombytes(blob[at : at + n * width])
        if not LITTLE_ENDIAN:  # pragma: no cover - big-endian machines
            arr.byteswap()
        cols.append(arr)
        at += n * width
    passed, fp_index = blob[at : at + n], blob[at + n : at + 2 * n]
    ids, versions, scores, thresholds, matched = cols
    return PackedResults(ids, versions, scores, thresholds, matched, passed, fp_index, tuple(fps))


# -- readers of many captures' columns (rollups, compare)

_ENTRY = 34  # bytes per packed entry: int64 id, int32 version, 2 float64, int32, 2 uint8


def columns_at(blob: bytes) -> tuple[int, int] | None:
    """(where the columns of a packed capture start, its result count), None when it is of a
    format unknown here: the header read and its fingerprints stepped over, not decoded."""
    version, _, nfp, n = PACK_HEAD.unpack_from(blob)
    if version != PACK_VERSION:
        return None
    at = PACK_HEAD.size
    for _ in range(nfp):
        at += 1 + blob[at]
    return at, n


def packed_sum_columns(blob: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(layout key, score column, verdict column) of a packed capture, None when it holds no
    result or is of a format unknown here: captures with equal layout keys were scored by the
    same evals, versions and fingerprints in the same order (``packed_layout`` reads them)."""
    found = columns_at(blob)
    if found is None or found[1] == 0:
        return None
    at, n = found
    scores_at = at + 12 * n
    passed_at = scores_at + 8 * n + 8 * n + 4 * n
    layout_key = blob[:scores_at] + blob[passed_at + n : passed_at + 2 * n]
    return layout_key, blob[scores_at : scores_at + 8 * n], blob[passed_at : passed_at + n]


def packed_ids_and_verdicts(blob: bytes) -> tuple[bytes, bytes] | None:
    """(eval id column, verdict column) of a packed capture, as bytes: int64 ids, a uint8
    verdict each; None when it holds no result or is of a format unknown here (the metadata
    rollup groups captures by their ids and sums their verdicts)."""
    found = columns_at(blob)
    if found is None or found[1] == 0:
        return None
    at, n = found
    passed_at = at + 12 * n + 8 * n + 8 * n + 4 * n  # ids, versions, scores, thresholds, matched
    return blob[at : at + 8 * n], blob[passed_at : passed_at + n]


def packed_layout(blob: bytes) -> tuple[list[int], list[int], list[str]]:
    """The eval ids, versions and fingerprints (one per entry) of a packed capture."""
    _, _, nfp, n = PACK_HEAD.unpack_from(blob)
    fps, at = packed_fingerprints(blob, nfp)
    ids = np.frombuffer(blob, "<i8", n, at).tolist()
    versions = np.frombuffer(blob, "<i4", n, at + 8 * n).tolist()
    passed_at = at + 12 * n + 8 * n + 8 * n + 4 * n
    fp_index = blob[passed_at + n : passed_at + 2 * n]
    return ids, versions, [fps[i] for i in fp_index]


def sum_column_rows(
    scores: list[bytes], passed: list[bytes], n: int
) -> tuple[np.ndarray, np.ndarray]:
    """The score and verdict columns of captures of one layout (``packed_sum_columns``) as
    two matrices, a row per capture: float64 scores, uint8 verdicts."""
    k = len(scores)
    return (
        np.frombuffer(b"".join(scores), "<f8").reshape(k, n),
        np.frombuffer(b"".join(passed), "u1").reshape(k, n),
    )


@dataclass
class PackedColumns:
    """Many captures' packed results, flattened (in capture order, or eval by eval each in
    capture order): per result its capture's position (``case``), eval id, score, threshold
    and automated verdict."""

    case: np.ndarray
    eval_ids: np.ndarray
    scores: np.ndarray
    thresholds: np.ndarray
    passed: np.ndarray


def _only_column(ids: np.ndarray, only: int | None) -> int | None:
    """The column of ``ids`` (captures by entries) holding eval ``only`` in every capture,
    None when there is no such one column (or no ``only``)."""
    if only is None or ids.shape[0] == 0:
        return None
    hits = np.flatnonzero(ids[0] == only)
    if hits.shape[0] != 1 or not bool((ids[:, hits[0]] == only).all()):
        return None
    return int(hits[0])


def packed_columns(blobs: Sequence[bytes | memoryview], only: int | None = None) -> PackedColumns:
    """The results of packed captures (this module's layout) as columns: the
    blobs of one length and one entry count are one matrix (one column per field), so the
    cost per capture is a few byte copies, not a parse. ``only``: the results of that eval
    are wanted (others may be left out: where it is one column of a matrix, that column
    alone is copied)."""
    lens = np.fromiter(map(len, blobs), np.int64, len(blobs))
    parts: list[tuple[np.ndarray, ...]] = []
    for size in np.unique(lens).tolist():
        if size == 0:
            continue  # no results
        members = np.flatnonzero(lens == size)
        joined = (
            b"".join(blobs)
            if members.shape[0] == len(blobs)
            else b"".join([blobs[i] for i in members.tolist()])
        )
        raw = np.frombuffer(joined, np.uint8).reshape(-1, size)
        if size < PACK_HEAD.size or (raw[:, 0] != PACK_VERSION).any():
            raise SimevalError("packed results of a format unknown to this simeval")
        counts = np.ascontiguousarray(raw[:, 4:8]).view("<u4").ravel()
        for n in np.unique(counts).tolist():
            if n == 0 or size < PACK_HEAD.size + _ENTRY * n:
                continue
            rows = np.flatnonzero(counts == n)
            block = raw[rows] if rows.shape[0] != raw.shape[0] else raw
            at = size - _ENTRY * n

            def col(start: int, width: int, dtype: str, blk: np.ndarray = block) -> np.ndarray:
                return np.ascontiguousarray(blk[:, start : start + width]).view(dtype)

            ids = col(at, 8 * n, "<i8")
            j = _only_column(ids, only)
            if j is None:
                scores = col(at + 12 * n, 8 * n, "<f8")
                thresholds = col(at + 20 * n, 8 * n, "<f8")
                passed = block[:, at + 32 * n : at + 33 * n] != 0
            else:  # the one wanted eval's column alone
                ids = ids[:, j : j + 1]
                scores = col(at + 12 * n + 8 * j, 8, "<f8")
                thresholds = col(at + 20 * n + 8 * j, 8, "<f8")
                passed = block[:, at + 32 * n + j : at + 32 * n + j + 1] != 0
            parts.append((members[rows], ids, scores, thresholds, passed))
    if not parts:
        empty = np.zeros(0, np.int64)
        return PackedColumns(empty, empty, empty.astype(np.float64), empty + 0.0, empty > 0)
    if len(parts) == 1 and bool((parts[0][1] == parts[0][1][0]).all()):
        # one layout and every capture scored by the same evals in the same order (the
        # common case): eval by eval, each in capture order (the matrices transposed), so
        # the results come grouped by eval without a sort
        members, ids, scores, thresholds, passed = parts[0]
        n = ids.shape[1]
        return PackedColumns(
            np.tile(members, n),
            ids.T.ravel().astype(np.int64, copy=False),
            scores.T.ravel().astype(np.float64, copy=False),
            thresholds.T.ravel().astype(np.float64, copy=False),
            passed.T.ravel(),
        )
    flat = [
        (np.repeat(m, i.shape[1]), i.ravel(), sc.ravel(), th.ravel(), ok.ravel())
        for m, i, sc, th, ok in parts
    ]
    cols = [np.concatenate(x) for x in zip(*flat, strict=True)]
    if len(parts) > 1:  # blobs of several layouts: back to capture order
        order = np.argsort(cols[0], kind="stable")
        cols = [c[order] for c in cols]
    # stored little-endian: in this machine's order (no copy on a little-endian one)
    return PackedColumns(
        cols[0],
        cols[1].astype(np.int64, copy=False),
        cols[2].astype(np.float64, copy=False),
        cols[3].astype(np.float64, copy=False),
        cols[4],
    )


# -- the result count, read in the database from the header (counts of many captures)
def packed_count_sql(blob: SQLColumnExpression[bytes | None]) -> ColumnElement[bytes | None]:
    """The SQL expression of the bytes of the result count in the header of the packed
    column ``blob`` (the header's last uint32), read in the database without the results
    (``packed_count`` decodes them)."""
    from sqlalchemy import func  # only here: the packing alone needs no SQLAlchemy

    return func.substr(blob, PACK_HEAD.size - 3, 4)


def packed_count(head: bytes | None) -> int:
    """The result count of the header bytes ``packed_count_sql`` reads (0 for none)."""
    return int.from_bytes(bytes(head), "little") if head else 0


# -- readers of one eval's entries (trends, metadata counts)


def _find_entry(column: bytes, eval_id: int) -> int:
    """The entry of ``eval_id`` in a packed eval ids column, or -1."""
    key = eval_id.to_bytes(8, "little", signed=True)
    found = column.find(key)
    while found != -1:
        if found % 8 == 0:  # an entry, not bytes across two
            return found // 8
        found = column.find(key, found + 1)
    return -1


def entry_count(blob: bytes, eval_id: int | None) -> int:
    """The results a packed blob holds (of ``eval_id``: 0 or 1, an eval scores a capture
    once), reading its eval ids column only."""
    _, _, nfp, n = PACK_HEAD.unpack_from(blob)
    if eval_id is None:
        return int(n)
    _, at = packed_fingerprints(blob, nfp)
    return int(_find_entry(blob[at : at + 8 * n], eval_id) >= 0)


def passed_count(blob: bytes | None, eval_id: int | None) -> tuple[int, int]:
    """(results, passing ones) of one capture's packed results (of ``eval_id``, or all),
    the automated verdicts, read from the eval ids and passed columns only."""
    if not blob:
        return 0, 0
    blob = bytes(blob)
    _, _, nfp, n = PACK_HEAD.unpack_from(blob)
    if n == 0:
        return 0, 0
    _, at = packed_fingerprints(blob, nfp)
    passed_at = at + 12 * n + 8 * n + 8 * n + 4 * n
    passed = blob[passed_at : passed_at + n]
    if eval_id is None:
        return int(n), passed.count(1)
    i = _find_entry(blob[at : at + 8 * n], eval_id)
    return (0, 0) if i < 0 else (1, passed[i])


class EntryReader:
    """One eval's (score, threshold, passed) read straight from packed results: the entry's
    place is worked out once per layout (captures scored by the same evals share one)."""

    _F64 = struct.Struct("<d")

    def __init__(self, eval_id: int):
        self.eval_id = eval_id
        self.places: dict[bytes, tuple[int, int, int] | None] = {}

    def __call__(self, blob: bytes | None) -> tuple[float, float, int] | None:
        """The eval's (score, threshold, passed) in ``blob``, None when it holds none."""
        if not blob:
            return None
        blob = bytes(blob)
        found = columns_at(blob)
        if found is None:
            return None
        at, n = found
        scores_at = at + 12 * n
        key = blob[:scores_at]
        if key not in self.places:
            i = unpack_results(blob).position(self.eval_id)
            self.places[key] = (
                None
                if i < 0
                else (scores_at + 8 * i, scores_at + 8 * n + 8 * i, scores_at + 20 * n + i)
            )
        place = self.places[key]
        if place is None:
            return None
        score_at, threshold_at, passed_at = place
        return (
            self._F64.unpack_from(blob, score_at)[0],
            self._F64.unpack_from(blob, threshold_at)[0],
            blob[passed_at],
        )
