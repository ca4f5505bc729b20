"""Packed term vectors: the scorer's hot path, in C when the extension is built.

A packed vector is ``bytes`` holding records of (uint64 term hash, float64 tf weight, float64
idf), sorted by hash. A hash set (the terms of an input, the negators) is ``bytes`` of sorted
uint64 hashes. The Python functions below are the reference implementation of
``_fast.c`` (same arithmetic, same summation order) and the fallback where the extension is
not available; the tests hold the two to identical numbers.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable, Iterable, Sequence

# the module's face: the Python reference functions, and the names the C core's functions go
# by (``_fast``'s when the extension is built, the ``*_py`` ones otherwise)
__all__ = [
    "ACCELERATED",
    "PAIR_IDF_ONE",
    "PAIR_IDF_TWO",
    "RECORD_SIZE",
    "Entry",
    "Vectorizer",
    "absent",
    "absent_py",
    "bands",
    "bands_py",
    "best",
    "best_py",
    "cosine",
    "cosine_py",
    "coverage",
    "entry",
    "final_py",
    "has_any",
    "has_any_py",
    "hashes",
    "pack_hashes",
    "rank",
    "rank_py",
    "term_hash",
    "unpack",
    "vectorize",
    "vectorize_py",
]

_TERM = struct.Struct("=Qdd")
_ENTRY = struct.Struct("=Qd")
_HASH = struct.Struct("=Q")
RECORD_SIZE = _TERM.size  # bytes per record of a packed vector
_CURVE = struct.Struct("=9d")  # bands curve: knots (3), scores (3), allowance, exponent, floor
# after the nine, a question-answer pair's: cosine knots (3), answer knots (3), precision floor,
# most reference terms
_ANSWER = struct.Struct("=8d")
PAIR_IDF_ONE = 1.4054651081081644  # ln(3/2) + 1: sklearn's smoothed idf, term in one of two texts
PAIR_IDF_TWO = 1.0  # ln(3/3) + 1: term in both texts

Entry = bytes | None  # packed (uint64 term hash, float64 idf), native byte order


def term_hash(term: str) -> int:
    """The hash of a term in a packed vector: the first 8 bytes of its BLAKE2b digest, read
    little-endian (the same on every machine, so sums run in the same order everywhere)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


def entry(term_hash: int, idf: float) -> bytes:
    """The table entry of a term: its hash and IDF packed as the C core reads them."""
    return _ENTRY.pack(term_hash, idf)


def vectorize_py(
    tokens: list[str], table: dict[str, Entry], miss: Callable[[str], Entry], sublinear: bool
) -> bytes:
    counts: dict[int, list[float]] = {}
    for tok in tokens:
        packed = table[tok] if tok in table else miss(tok)
        if packed is None:
            continue
        h, idf = _ENTRY.unpack(packed)
        slot = counts.get(h)
        if slot is None:
            counts[h] = [1.0, idf]
        else:
            slot[0] += 1.0
    out = bytearray()
    for h in sorted(counts):
        count, idf = counts[h]
        out += _TERM.pack(h, 1.0 + math.log(count) if sublinear else count, idf)
    return bytes(out)


def unpack(vec: bytes) -> list[tuple[int, float, float]]:
    """The (hash, tf weight, idf) records of a packed vector, in hash order."""
    return [_TERM.unpack_from(vec, i) for i in range(0, len(vec), _TERM.size)]


def hashes(vec: bytes) -> bytes:
    """The term hashes of a packed vector, packed as a hash set (sorted uint64)."""
    return b"".join(vec[i : i + 8] for i in range(0, len(vec), _TERM.size))


def pack_hashes(values: Iterable[int]) -> bytes:
    """A hash set: the distinct values, sorted, packed as native uint64."""
    return b"".join(_HASH.pack(h) for h in sorted(set(values)))


def _hash_set(packed: bytes | None) -> frozenset[int]:
    if not packed:
        return frozenset()
    return frozenset(h for (h,) in _HASH.iter_unpack(packed))


def has_any_py(vec: bytes, packed: bytes) -> bool:
    found = _hash_set(packed)
    return any(h in found for h, _, _ in unpack(vec))


def rank_py(vec: bytes, words: dict[int, str]) -> tuple[bytes, list[str]]:
    """The term hashes of ``vec`` (packed uint64) and their ``words``, heaviest first (tf x
    idf), ties by word."""
    ranked = sorted((-(tfw * idf), words[h], h) for h, tfw, idf in unpack(vec))
    return b"".join(_HASH.pack(h) for _, _, h in ranked), [w for _, w, _ in ranked]


def absent_py(vec: bytes, packed: bytes, top: int) -> list[int]:
    """Positions in ``packed`` (uint64 hashes, any order) of the first ``top`` hashes ``vec``
    does not have, in that order."""
    have = {h for h, _, _ in unpack(vec)}
    hashes = [h for (h,) in _HASH.iter_unpack(packed)]
    return [i for i, h in enumerate(hashes) if h not in have][: max(top, 0)]


def _cosine(
    ta: list[tuple[int, float, float]],
    tb: list[tuple[int, float, float]],
    pair: bool,
    demote: frozenset[int],
    iw: float,
) -> tuple[float, float, float]:
    """The cosine, the coverage (the share of ``tb``'s squared weight whose terms ``ta`` holds)
    and the precision (the share of ``ta``'s squared weight on terms of ``tb``)."""
    dot = sa = sb = sh = ph = sn = sq = 0.0
    i = j = 0
    na, nb = len(ta), len(tb)
    while i < na or j < nb:
        if j >= nb or (i < na and ta[i][0] < tb[j][0]):
            w = ta[i][1] * (PAIR_IDF_ONE if pair else ta[i][2])
            if ta[i][0] in demote:
                w *= iw
            sa += w * w
            i += 1
        elif i >= na or tb[j][0] < ta[i][0]:
            w = tb[j][1] * (PAIR_IDF_ONE if pair else tb[j][2])
            if tb[j][0] in demote:
                w *= iw
            else:
                sn += w * w
            sb += w * w
            j += 1
        else:
            wa = ta[i][1] * (PAIR_IDF_TWO if pair else ta[i][2])
            wb = tb[j][1] * (PAIR_IDF_TWO if pair else tb[j][2])
            asked = ta[i][0] in demote
            if asked:
                wa *= iw
                wb *= iw
            sa += wa * wa
            sb += wb * wb
            sh += wb * wb
            ph += wa * wa
            if not asked:
                sn += wb * wb
                sq += wb * wb
            dot += wa * wb
            i += 1
            j += 1
    if sa <= 0.0 or sb <= 0.0:
        return 0.0, 0.0, 0.0
    s = dot / (math.sqrt(sa) * math.sqrt(sb))
    cov = sq / sn if sn > 0.0 else sh / sb
    return min(1.0, max(0.0, s)), min(1.0, max(0.0, cov)), min(1.0, max(0.0, ph / sa))


def cosine_py(
    a: bytes,
    b: bytes,
    pair: bool,
    demote: bytes | None = None,
    input_weight: float = 1.0,
    negators: bytes | None = None,
    negation: float = 1.0,
    curve: bytes | None = None,
) -> float:
    s, cov, prec = _score(a, b, pair, demote, input_weight, negators, negation)
    return final_py(s, cov, prec, len(a) // _TERM.size, len(b) // _TERM.size, curve)


def _score(
    a: bytes,
    b: bytes,
    pair: bool,
    demote: bytes | None,
    input_weight: float,
    negators: bytes | None,
    negation: float,
) -> tuple[float, float, float]:
    # the cosine after the negation factor, the coverage and the precision
    if not a or not b:
        return 0.0, 0.0, 0.0
    if a == b:
        return 1.0, 1.0, 1.0
    dem = _hash_set(demote) if input_weight != 1.0 else frozenset()
    s, cov, prec = _cosine(unpack(a), unpack(b), pair, dem, input_weight)
    one_negates = negators and has_any_py(a, negators) != has_any_py(b, negators)
    if negation != 1.0 and s > 0.0 and one_negates:
        s *= negation
    return s, cov, prec


def coverage(
    a: bytes, b: bytes, pair: bool, demote: bytes | None = None, input_weight: float = 1.0
) -> tuple[float, float]:
    """The coverage (the share of ``b``'s squared weight whose terms ``a`` holds) and the
    precision (the share of ``a``'s on terms of ``b``), the question's terms at
    ``input_weight``, as the C core computes them beside the cosine: 1.0 for the same vector,
    0.0 when either is empty."""
    if not a or not b:
        return 0.0, 0.0
    if a == b:
        return 1.0, 1.0
    dem = _hash_set(demote) if input_weight != 1.0 else frozenset()
    _, cov, prec = _cosine(unpack(a), unpack(b), pair, dem, input_weight)
    return cov, prec


def final_py(
    s: float, cov: float, prec: float, n_out: int, n_ref: int, curve: bytes | None
) -> float:
    """The score of a pair from its cosine ``s`` (after negation), coverage ``cov`` and
    precision ``prec`` (``_cosine.h``'s ``final_score``): the ``bands`` score of ``s``; with a
    question-answer curve (17 float64), ``s`` through its cosine knots and, for a reference of
    at most ``max_terms`` terms, the better of that and the answer score: ``cov`` times
    ``min(1, prec / floor)`` through the answer knots."""
    if not curve or len(curve) == _CURVE.size:
        return bands_py(s, n_out, n_ref, curve)
    _, _, _, y1, y2, y3, *_ = _CURVE.unpack_from(curve)
    c1, c2, c3, a1, a2, a3, floor, max_terms = _ANSWER.unpack_from(curve, _CURVE.size)
    out = _piecewise(s, (c1, c2, c3), (y1, y2, y3))
    if float(n_ref) <= max_terms:
        a = cov
        if prec < floor:
            a = a * (prec / floor)
        out = max(out, _piecewise(a, (a1, a2, a3), (y1, y2, y3)))
    return out


def _piecewise(
    c: float, knots: tuple[float, float, float], ys: tuple[float, float, float]
) -> float:
    if c <= 0.0:
        return 0.0
    if c >= 1.0:
        return 1.0
    (k1, k2, k3), (y1, y2, y3) = knots, ys
    if c >= k3:
        lo, hi, ylo, yhi = k3, 1.0, y3, 1.0
    elif c >= k2:
        lo, hi, ylo, yhi = k2, k3, y2, y3
    elif c >= k1:
        lo, hi, ylo, yhi = k1, k2, y1, y2
    else:
        lo, hi, ylo, yhi = 0.0, k1, 0.0, y1
    return ylo + (yhi - ylo) * (c - lo) / (hi - lo)


def bands_py(c: float, n_out: int, n_ref: int, curve: bytes | None) -> float:
    """The ``bands`` score of a cosine for a pair of ``n_out`` and ``n_ref`` distinct terms
    (``simeval.scoring.bands`` gives the rule); an empty ``curve``: the cosine itself."""
    if not curve:
        return c
    if c <= 0.0:
        return 0.0
    if c >= 1.0:
        return 1.0
    k1, k2, k3, y1, y2, y3, allowance, exponent, floor = _CURVE.unpack_from(curve)
    no = float(n_out) if n_out > 1 else 1.0
    nr = float(n_ref) if n_ref > 1 else 1.0
    r = allowance * nr / no
    h = 1.0
    if r < 1.0:
        h = r**exponent
        if h < floor:
            h = floor
    return _piecewise(c, (h * k1, h * k2, h * k3), (y1, y2, y3))


def best_py(
    a: bytes,
    refs: Sequence[bytes],
    pair: bool,
    demote: bytes | None = None,
    input_weight: float = 1.0,
    negators: bytes | None = None,
    negation: float = 1.0,
    curve: bytes | None = None,
) -> tuple[float, int]:
    top, at = -1.0, -1
    na = len(a) // _TERM.size
    for i, r in enumerate(refs):
        s, cov, prec = _score(a, r, pair, demote, input_weight, negators, negation)
        s = final_py(s, cov, prec, na, len(r) // _TERM.size, curve)
        if s > top:
            top, at = s, i
    return (0.0 if at < 0 else top), at


try:
    from simeval.scoring._fast import (
        Vectorizer,
        absent,
        bands,
        best,
        cosine,
        has_any,
        rank,
        vectorize,
    )

    ACCELERATED = True
except ImportError:  # pragma: no cover - only without a C compiler at install time
    vectorize, cosine, best, has_any = vectorize_py, cosine_py, best_py, has_any_py
    bands = bands_py
    absent, rank = absent_py, rank_py
    Vectorizer = None  # type: ignore[misc, assignment]
    ACCELERATED = False
