"""A compare side read column by column (``Service.compare``): the case keys, scores and
verdicts of every result of a side as numpy arrays, never an object per result.

Every case of a side is read. A side keeps at most ``MAX_RESULTS`` results (over all its
evals: about 17 bytes each, ~170 MB at the limit); past it, a seeded uniform sample of case
keys is kept: a case stays when the 64-bit hash of its key (BLAKE2b keyed by the seed; a case
without a key by its result id) is below 2^64 / 2^k, with k raised by one each time the side
outgrows the limit while it is read. Both sides then keep the deeper of their two levels, so a
case kept on one side is kept on the other and pairs stay paired; each eval's ``total`` counts
what the side holds, its ``n`` what was compared (``CompareReport.sampled`` says how).

A side's captured results come as columns from their packed blobs (``simeval.store.packing``'s
``packed_columns``: blobs of one layout viewed as one matrix, a column per field). Nothing
here touches SQL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import count, filterfalse, islice, repeat
from typing import Any

import numpy as np

MAX_RESULTS = 10_000_000  # results kept per side (every eval together); more: sampled
_MIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)  # splitmix64


def sample_note(level: int, seed: int) -> str | None:
    """How a comparison sampled at ``level`` chose its cases (None: it read them all)."""
    if level == 0:
        return None
    return (
        f"a seeded uniform sample of case keys: the cases whose key hash (BLAKE2b, seed "
        f"{seed}) falls in the lowest 1/{2**level} of its range, the same cases on both sides"
    )


class KeyBook:
    """Case keys numbered once for both sides (equal numbers pair), and their seeded
    hashes for sampling (computed only once a side is sampled)."""

    def __init__(self, seed: int):
        self.seed = seed
        # key -> number, numbered in the order first seen (``hashes`` relies on the order)
        self.numbers: dict[str, int] = {}
        self._hashes = np.zeros(0, np.uint64)
        self._salt = hashlib.blake2b(str(seed).encode(), digest_size=16).digest()

    def number(self, key: str) -> int:
        """The number of ``key`` (a new one for a key not seen before)."""
        return self.numbers.setdefault(key, len(self.numbers))

    def numbers_of(self, keys: Sequence[object]) -> np.ndarray:
        """The numbers of ``keys`` (each as text; None: -1, never paired)."""
        numbers: dict[Any, int] = self.numbers  # looked up by None too (not found: -1)
        distinct: dict[Any, None] = dict.fromkeys(keys)  # the distinct keys, first seen first
        if not set(map(type, distinct)) <= {str, type(None)}:
            keys = [None if k is None else str(k) for k in keys]
            distinct = dict.fromkeys(keys)
        distinct.pop(None, None)
        # the new keys numbered in the order first seen, then every key looked up: all in
        # C (map, filterfalse, dict.update), no Python code per key (measured on 1M keys of
        # 997 values: 10x faster than numbering key by key with setdefault; about even when
        # every key is new)
        fresh = list(filterfalse(numbers.__contains__, distinct))
        numbers.update(zip(fresh, count(len(numbers))))
        return np.fromiter(map(numbers.get, keys, repeat(-1)), np.int64, len(keys))

    def absorb(self, other: KeyBook) -> np.ndarray:
        """Number ``other``'s keys in this book (those new to it after its own); returns the
        new number of each of ``other``'s, by its number there (a side read with a book of
        its own, in its own thread, joins the other side's numbering)."""
        numbers = self.numbers
        fresh = list(filterfalse(numbers.__contains__, other.numbers))
        numbers.update(zip(fresh, count(len(numbers))))
        # ``other.numbers`` iterates in the order of its numbers (0, 1, ...)
        return np.fromiter(map(numbers.__getitem__, other.numbers), np.int64, len(other.numbers))

    def hashes(self) -> np.ndarray:
        """The hash of every key numbered so far, by number."""
        done = self._hashes.shape[0]
        if done < len(self.numbers):
            salt = self._salt
            keys = list(islice(self.numbers, done, None))  # a dict keeps its order
            more = np.fromiter(
                (
                    int.from_bytes(
                        hashlib.blake2b(
                            k.encode("utf-8", "surrogatepass"), digest_size=8, key=salt
                        ).digest(),
                        "little",
                    )
                    for k in keys
                ),
                np.uint64,
                len(keys),
            )
            self._hashes = np.concatenate((self._hashes, more))
        return self._hashes

    def mixed(self, refs: np.ndarray) -> np.ndarray:
        """A seeded 64-bit hash of integers (splitmix64): the cases without a key."""
        with np.errstate(over="ignore"):
            z = refs.astype(np.uint64) + np.uint64((self.seed * _MIX[0]) % 2**64)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX[1])
            z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX[2])
            return np.asarray(z ^ (z >> np.uint64(31)))


@dataclass
class _Chunk:
    keys: np.ndarray  # per case: int64 key number, -1 none
    refs: np.ndarray  # per case: int64 capture id, row id or file position
    evals: np.ndarray  # per result: int32 eval (the side's dense number)
    scores: np.ndarray  # per result: float64
    passed: np.ndarray  # per result: bool
    case: np.ndarray  # per result: int32 position of its case in this chunk


@dataclass
class EvalColumns:
    """One eval's results on one side: key numbers, scores, verdicts and refs (by case)."""

    keys: np.ndarray
    scores: np.ndarray
    passed: np.ndarray
    refs: np.ndarray


@dataclass
class SideColumns:
    """One side's results as they are read, chunk by chunk, with its sampling level."""

    label: str
    book: KeyBook
    limit: int = MAX_RESULTS
    level: int = 0  # sampled: only cases whose hash is below 2^64 >> level
    names: list[str] = field(default_factory=list)  # eval names by dense number
    total: list[int] = field(default_factory=list)  # results read per eval, before sampling
    _index: dict[object, int] = field(default_factory=dict)
    _chunks: list[_Chunk] = field(default_factory=list)
    _kept: int = 0

    def eval_number(self, ident: object, name: str) -> int:
        """The dense number of an eval (by its id or name ``ident``), shown as ``name``."""
        n = self._index.get(ident)
        if n is None:
            n = self._index[ident] = len(self.names)
            self.names.append(name)
            self.total.append(0)
        return n

    def add(
        self,
        keys: np.ndarray,
        refs: np.ndarray,
        evals: np.ndarray,
        scores: np.ndarray,
        passed: np.ndarray,
        case: np.ndarray,
    ) -> None:
        """A chunk of cases (``keys``, ``refs``) and their results (``evals`` dense numbers,
        ``scores``, ``passed``, ``case`` the position of each result's case in the chunk)."""
        counts = np.bincount(evals, minlength=len(self.names))
        for i, c in enumerate(counts.tolist()):
            self.total[i] += c
        # the results grouped by eval, in their order within each (an eval's columns are
        # then slices, gathered one eval at a time); often they come grouped already
        grouped = evals.shape[0] < 2 or bool((evals[1:] >= evals[:-1]).all())
        order = slice(None) if grouped else np.argsort(evals, kind="stable")
        chunk = _Chunk(
            keys,
            refs,
            evals[order].astype(np.int32),
            scores[order],
            passed[order],
            case[order].astype(np.int32),
        )
        if self.level:
            chunk = self._sampled(chunk, self.level)
        self._chunks.append(chunk)
        self._kept += chunk.evals.shape[0]
        while self._kept > self.limit and self.level < 63:
            self.restrict(self.level + 1)

    def renumber(self, book: KeyBook, remap: np.ndarray) -> None:
        """Take ``book``'s numbering of the keys (``remap``: the new number of each of this
        side's by its old one, ``KeyBook.absorb``)."""
        for c in self._chunks:
            keyed = c.keys >= 0
            if not keyed.any():
                continue  # no key to renumber (and ``remap`` may be empty)
            c.keys = np.where(keyed, remap[np.where(keyed, c.keys, 0)], -1)
        self.book = book

    def restrict(self, level: int) -> None:
        """Keep only the cases of the sample at ``level`` (deeper than the side's own)."""
        if level <= self.level:
            return
        self.level = level
        self._chunks = [self._sampled(c, level) for c in self._chunks]
        self._kept = sum(c.evals.shape[0] for c in self._chunks)

    def _sampled(self, c: _Chunk, level: int) -> _Chunk:
        h = np.empty(c.keys.shape[0], np.uint64)
        keyed = c.keys >= 0
        if keyed.any():
            h[keyed] = self.book.hashes()[c.keys[keyed]]
        if not keyed.all():
            h[~keyed] = self.book.mixed(c.refs[~keyed])
        inside = h < np.uint64(2**64 >> level)
        where = np.cumsum(inside) - 1  # a kept case's new position
        keep = inside[c.case]
        return _Chunk(
            c.keys[inside],
            c.refs[inside],
            c.evals[keep],
            c.scores[keep],
            c.passed[keep],
            where[c.case[keep]].astype(np.int32),
        )

    def columns(self, name: str) -> EvalColumns | None:
        """The columns of the eval ``name`` (None when the side has none), in the order read:
        gathered from the chunks for this eval alone, so one eval's copy is made at a time."""
        if name not in self.names:
            return None
        number = self.names.index(name)
        parts = []
        for c in self._chunks:
            lo, hi = np.searchsorted(c.evals, [number, number + 1]).tolist()
            if hi > lo:
                at = c.case[lo:hi]
                parts.append((c.keys[at], c.scores[lo:hi], c.passed[lo:hi], c.refs[at]))
        if not parts:
            return None
        return EvalColumns(*(np.concatenate(x) for x in zip(*parts, strict=True)))
