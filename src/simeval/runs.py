"""Data-set runs: score every row of a JSONL, CSV or Parquet file, stream the results out.

A run reads the input in chunks of rows, scores each chunk (in this process, in a local process
pool, or on a Dask cluster: the same function everywhere), and writes the results in input
order. Memory stays flat: at most a few chunks per worker are in flight, the results go
straight to a temporary file that is renamed into place only when the run succeeds, and the
summary keeps bounded state (counts, sums, the worst cases, a tally of missing terms).

Every row gets ``score``, ``pass``, ``threshold``, ``matched_index`` (0-based),
``matched_reference`` (the text that matched best), ``missing_terms`` and ``fingerprint``
(and ``eval``, ``eval_version`` when the references come from an eval file). Missing terms
cost more to compute than the score, so the column is filled for failing rows only (passing
rows get an empty list); the summary's worst cases always carry them.

Bad rows (malformed JSON, a missing column, a cell that is not text, an empty reference) stop
the run with one line naming the file and the line or row, and no results file is left
behind. With ``on_error="skip"`` they are listed in the summary and left out instead.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import heapq
import io
import itertools
import json
import math
import operator
import os
import pickle
import sys
import tempfile
import time
import uuid
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice, repeat
from pathlib import Path
from typing import IO, Any, Literal

from simeval.errors import InvalidInput, InvalidOption
from simeval.processes import pid_alive
from simeval.runwriter import read_frame, send_frame, unpickled
from simeval.scoring._vector import absent as _absent
from simeval.scoring._vector import best as _vector_best
from simeval.scoring._vector import has_any as _has_any
from simeval.scoring._vector import rank as _rank
from simeval.scoring.analyzer import normalize, split_tokens
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.options import check_unit, yes_no
from simeval.scoring.scorer import (
    DEFAULT_THRESHOLD,
    Scorer,
    _term_hash,
    check_threshold,
    get_scorer,
)

FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
RESULT_FIELDS = (
    "score",
    "pass",
    "threshold",
    "matched_index",
    "matched_reference",
    "missing_terms",
    "fingerprint",
)
EVAL_FIELDS = ("eval", "eval_version")
CHUNK_ROWS = 1000
TOP_MISSING = 5
_TEXT_CUT = 300  # characters of input/output kept in the summary's worst cases


# -- configuration ---------------------------------------------------------------------------
def detect_format(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """The file format: ``fmt`` if given, else from the extension (``.jsonl``, ``.csv``, ...)."""
    if fmt:
        if fmt not in set(FORMATS.values()):
            raise InvalidOption(f"unknown format {fmt!r}; use jsonl, csv, tsv or parquet")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise InvalidInput(
            f"cannot tell the format of {os.fspath(path)} from its extension; "
            "use .jsonl, .csv, .tsv or .parquet, or give --format"
        )
    return FORMATS[suffix]


@dataclass(frozen=True)
class Columns:
    """Which columns hold the output, the reference answer(s), the input and the case id.

    Several reference columns may be given; in JSONL and Parquet a reference cell may also
    hold a list of strings. ``input`` and ``id`` are optional unless ``*_required``.
    """

    output: str = "output"
    references: tuple[str, ...] = ("reference",)
    input: str = "input"
    id: str = "id"
    input_required: bool = False
    id_required: bool = False


@dataclass(frozen=True)
class EvalDef:
    """An eval as a run uses it: references, threshold, optional input scope, scorer options."""

    name: str
    references: tuple[str, ...]
    threshold: float = DEFAULT_THRESHOLD
    input_scope: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    version: int | None = None


@dataclass(frozen=True)
class RunConfig:
    """Everything a worker needs to score a chunk (picklable; shipped once per worker)."""

    source: str
    fmt: str
    out_fmt: str | None = None
    columns: Columns = Columns()
    threshold: float = DEFAULT_THRESHOLD
    options: tuple[tuple[str, Any], ...] = ()
    evals: tuple[EvalDef, ...] = ()
    on_error: str = "fail"
    junit: bool = False
    keys: bool = False
    store: bool = False
    collect: str | None = None
    worst: int = 5
    top_missing: int = TOP_MISSING
    header: tuple[str, ...] = ()
    out_fields: tuple[str, ...] = ()
    delimiter: str = ","
    quoting: bool = True
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def result_fields(self) -> tuple[str, ...]:
        return RESULT_FIELDS + (EVAL_FIELDS if self.evals else ())


@dataclass
class Chunk:
    """A slice of the input: raw JSONL lines, parsed CSV records, or an Arrow record batch."""

    index: int
    start: int  # line number (JSONL, CSV) or row number (Parquet) of the first entry, 1-based
    ordinal: int  # data rows before this chunk
    lines: list[bytes] | None = None
    records: list[tuple[int, list[str]]] | None = None
    batch: Any = None
    nbytes: int = 0
    nrows: int = 0


@dataclass
class ChunkOut:
    """What scoring a chunk gives back: serialised result rows and bounded statistics."""

    index: int
    rows: int = 0
    results: int = 0
    passed: int = 0
    score_sum: float = 0.0
    data: bytes = b""
    batch: Any = None
    junit: bytes = b""
    errors: list[tuple[str, str]] = field(default_factory=list)
    worst: list[dict[str, Any]] = field(default_factory=list)
    # every missing term named, in row order (tallied by the run: counting a list is done in
    # C, merging counters is a Python loop)
    missing: list[str] = field(default_factory=list)
    per_eval: dict[str, list[float]] = field(default_factory=dict)
    unmatched: int = 0
    cases: list[tuple[bytes, float, bool, str, list[str]]] = field(default_factory=list)
    store_rows: list[tuple[Any, ...]] = field(default_factory=list)  # STORE_COLUMNS
    store_blob: bytes = b""  # store_rows pickled by a pool worker (see _pool_chunk)
    collected: list[tuple[str, Any, float]] = field(default_factory=list)
    nbytes: int = 0


class RowError(Exception):
    """A bad row: where it is (file and line or row) and what is wrong with it."""

    def __init__(self, where: str, message: str):
        super().__init__(where, message)
        self.where = where
        self.message = message

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class _BadRowError(Exception):
    """A row problem before its location is known (turned into RowError by the caller)."""


# -- missing terms and explanations ----------------------------------------------------------
# A failing row reports the reference's heaviest terms the output lacks, and a stored row keeps
# the explanation the studio shows. The weights come from the packed vectors scoring made
# (records of term hash, tf weight, idf: read as arrays, no Python loop per term); only the
# surface words need the text, and ``_Terms`` finds them through a cache of whitespace-separated
# parts (no token spans whitespace, so the tokens of the parts are the tokens of the whole), each
# distinct part analysed once. Several times cheaper than ``Scorer.explain``, which re-stems
# every word of every row, and the same terms, weights and order.
_TERM_CACHE_LIMIT = 500_000
_Part = tuple[tuple[int, str], ...]  # per non-stop token of a part: (term hash, token)
_first = operator.itemgetter(0)
_neg, _div, _mul = operator.neg, operator.truediv, operator.mul


def _records(vec: bytes) -> tuple[Sequence[int], list[float]]:
    """The term hashes of a packed vector and their tf x idf weights, in hash order."""
    values = array("d", vec)
    return array("Q", vec)[0::3], list(map(operator.mul, values[1::3], values[2::3]))


def _hashes(vec: bytes) -> set[int]:
    return set(array("Q", vec)[0::3])


def _hash_array(vec: bytes) -> array[int]:
    """The term hashes of a packed vector, sorted (a vector is in hash order): membership by
    ``bisect`` without making an int object per term."""
    return array("Q", vec)[0::3]


_REF_CACHE_LIMIT = 8192
_INPUT_CACHE_LIMIT = 100_000  # questions are short: their term hashes take little room


class _Ref:
    """A reference answer as a run keeps it between rows: its vector, and, made when first
    needed, its JSON text, its terms ranked for missing terms, its side of an explanation, its
    term hashes and whether it negates."""

    __slots__ = ("asked_ranked", "hset", "json", "negator", "ranked", "side", "text", "vec")

    def __init__(self, text: str, vec: bytes):
        self.text = text
        self.vec = vec
        self.hset: frozenset[int] | None = None
        self.negator: bool | None = None
        # missing terms: (its term hashes ranked, packed; their words in that order); per set
        # of its terms an input shares, (packed, words) ranked so
        self.ranked: tuple[bytes, list[str]] | None = None
        self.asked_ranked: dict[frozenset[int], tuple[bytes, list[str]]] | None = None
        self.side: tuple[dict[int, float], float, list[Any], str] | None = None
        self.json: str | None = None

    def encoded(self) -> str:
        j = self.json
        if j is None:
            j = self.json = _ENCODE(self.text)
        return j

    def asked(self, terms: bytes) -> bool:
        """Whether the input's terms (``Scorer.input_terms``) include one of this reference's:
        its weights in an explanation are then not its own."""
        return bool(terms) and bool(_has_any(self.vec, terms))

    def hashes(self) -> frozenset[int]:
        """The reference's term hashes (made once)."""
        hset = self.hset
        if hset is None:
            hset = self.hset = frozenset(_hash_array(self.vec))
        return hset

    def has_negator(self, scorer: Scorer) -> bool:
        neg = self.negator
        if neg is None:
            neg = self.negator = scorer.has_negator(self.vec)
        return neg


class _Terms:
    """Surface words of the terms of texts, for one single-word, non-pair scorer."""

    def __init__(self, scorer: Scorer):
        self.scorer = scorer
        self.analyzer = scorer.analyzer
        self.tokenizer = scorer.analyzer.tokenizer
        self.parts: dict[str, _Part] = {}
        self.fingerprint_json: str | None = None

    def _part(self, part: str) -> _Part:
        out = []
        for token in split_tokens(part, self.tokenizer):
            term = self.analyzer.term(token)
            if term is not None:
                out.append((_term_hash(term), token))
        entry = self.parts[part] = tuple(out)
        return entry

    def tokens(self, text: str) -> list[tuple[int, str]]:
        """(term hash, token) of every non-stop token of ``text``, in order."""
        parts = self.parts
        if len(parts) > _TERM_CACHE_LIMIT:
            parts.clear()
        words = normalize(text).split()
        found: list[_Part | None] = list(map(parts.get, words))
        if None in found:
            found = [
                e if e is not None else self._part(w) for w, e in zip(words, found, strict=True)
            ]
        return list(itertools.chain.from_iterable(found))  # type: ignore[arg-type]

    def words(self, text: str) -> dict[int, str]:
        """The first word of each term of ``text``, by term hash."""
        vz = self.scorer._vz
        if vz is not None:  # the same, in C
            found: dict[int, str] = vz.words(text)
            return found
        return dict(reversed(self.tokens(text)))

    def ranked(self, reference: str, rvec: bytes) -> list[tuple[int, str]]:
        """A reference's (term hash, first word) pairs, heaviest first, ties by the word."""
        words = self.words(reference)
        hashes, weights = _records(rvec)
        ranked = sorted(
            zip(map(operator.neg, weights), map(words.__getitem__, hashes), hashes, strict=True)
        )
        return [(h, s) for _, s, h in ranked]

    def missing(self, have: set[int], reference: str, rvec: bytes, top: int) -> list[str]:
        """The ``top`` heaviest terms of ``reference`` (vector ``rvec``) not in ``have``."""
        if top <= 0:
            return []
        hashes, weights = _records(rvec)
        picked: list[tuple[float, int]] = []
        cutoff = 0.0
        # heaviest first (a sort of plain float keys: the C fast path); ties in any order, as
        # every term as heavy as the last one taken competes on its word below
        for i in sorted(range(len(weights)), key=weights.__getitem__, reverse=True):
            w, h = weights[i], hashes[i]
            if h in have:
                continue
            if len(picked) >= top and w < cutoff:
                break  # the words decide ties: every term as heavy as the last one competes
            picked.append((w, h))
            if len(picked) == top:
                cutoff = w
        if not picked:
            return []
        # the first word of just these terms: a scan of the hashes in C, no dict of them all
        flat = self.tokens(reference)
        hashes_in_order = list(map(_first, flat))
        named = [(-w, flat[hashes_in_order.index(h)][1]) for w, h in picked]
        return [s for _, s in sorted(named)[:top]]

    def missing_in(self, ref: _Ref, have: set[int], top: int) -> list[str]:
        """``missing`` for a cached reference and the term hashes ``have`` of an output."""
        if top <= 0:
            return []
        packed, words = self._ranked(ref)
        lacking = (i for i, h in enumerate(memoryview(packed).cast("Q")) if h not in have)
        return [words[i] for i in islice(lacking, top)]

    def _ranked(self, ref: _Ref) -> tuple[bytes, list[str]]:
        """The reference's term hashes (packed) and words in ``ranked``'s order, made once."""
        ranked = ref.ranked
        if ranked is None:
            ranked = ref.ranked = _rank(ref.vec, self.words(ref.text))  # sorted in C
        return ranked

    def missing_of(self, ref: _Ref, vec: bytes, terms: bytes, top: int) -> list[str]:
        """``missing_in`` / ``missing_asked`` for an output's vector ``vec`` and the input's
        terms ``terms``: the reference's terms ranked once (per set of terms the input shares
        with it), the first ``top`` the output lacks found in C (``_vector.absent``)."""
        if top <= 0:
            return []
        if terms and ref.asked(terms):
            shared = ref.hashes().intersection(array("Q", terms))
            cache = ref.asked_ranked
            if cache is None:
                cache = ref.asked_ranked = {}
            got = cache.get(shared)
            if got is None:
                if len(cache) > 64:
                    cache.clear()
                got = cache[shared] = self._asked_ranked(ref, shared)
            packed, words = got
        else:
            packed, words = self._ranked(ref)
        return [words[i] for i in _absent(vec, packed, top)]

    def _asked_ranked(self, ref: _Ref, shared: frozenset[int]) -> tuple[bytes, list[str]]:
        """All of the reference's terms in ``missing_asked``'s order for an input sharing the
        terms ``shared`` with it (its keys and words: a term the output has drops out without
        changing the order of the others)."""
        rtok = self.tokens(ref.text)
        sr = dict(reversed(rtok))
        wr = dict(zip(*_records(ref.vec), strict=True))
        weight = self.scorer.input_weight
        for h in sorted(shared):
            wr[h] *= weight
        rw = list(map(wr.__getitem__, dict.fromkeys(map(_first, rtok))))
        nr = math.sqrt(sum(map(operator.mul, rw, rw))) or 1.0
        ranked = sorted((-((w / nr) ** 2), sr[h], h) for h, w in wr.items())
        return array("Q", [h for _, _, h in ranked]).tobytes(), [word for _, word, _ in ranked]

    def missing_asked(self, ref: _Ref, have: set[int], terms: bytes, top: int) -> list[str]:
        """``missing_in`` for a row whose input (its terms ``terms``) shares terms with the
        reference: as ``explain`` does, those terms' weights are multiplied by the scorer's
        ``input_weight`` and the reference's norm is taken again, in the order of first use."""
        rtok = self.tokens(ref.text)
        sr = dict(reversed(rtok))
        wr = dict(zip(*_records(ref.vec), strict=True))
        weight = self.scorer.input_weight
        for h in array("Q", terms):
            if h in wr:
                wr[h] *= weight
        rw = list(map(wr.__getitem__, dict.fromkeys(map(_first, rtok))))
        nr = math.sqrt(sum(map(operator.mul, rw, rw))) or 1.0
        lacking = [h for h in wr if h not in have]
        keys = [-((wr[h] / nr) ** 2) for h in lacking]
        return [word for _, word in _smallest(keys, lacking, sr.__getitem__, top)] if top else []

    def _side(self, ref: _Ref) -> tuple[dict[int, float], float, list[Any], str]:
        """The reference's side of an explanation: weights by hash, norm, its terms ranked
        as "missing" entries ([hash, key, word, JSON of the entry once written]), its JSON
        text (ASCII)."""
        side = ref.side
        if side is None:
            rtok = self.tokens(ref.text)
            sr = dict(reversed(rtok))
            wr = dict(zip(*_records(ref.vec), strict=True))
            rw = list(map(wr.__getitem__, dict.fromkeys(map(_first, rtok))))
            nr = math.sqrt(sum(map(operator.mul, rw, rw))) or 1.0
            ranked = sorted((-((w / nr) ** 2), sr[h], h) for h, w in wr.items())
            entries = [[h, k, word, None] for k, word, h in ranked]
            side = ref.side = (wr, nr, entries, _ENCODE_ASCII(ref.text))
        return side

    def explain_json(
        self,
        output: str,
        vec: bytes,
        refs: Sequence[str],
        ref: _Ref,
        score: float,
        at: int,
        origin: str,
        input: str | None = None,
        terms: bytes = b"",
    ) -> str:
        """``_ENCODE_ASCII({**scorer.explain(output, refs, 10, input).to_dict(), "case":
        ...})`` (``origin``: the JSON of the "case" entry) for a row already scored (``score``,
        ``at``, the output's vector ``vec``, ``ref`` the matched reference, ``terms`` the
        input's), the text a stored row keeps: the same floats from the same operations in
        the same order. The reference's side is made once per reference unless the input
        shares a term with it (its weights are then the row's own)."""
        scorer = self.scorer
        if not output.strip():
            exp = scorer.explain(output, list(refs), top=10, input=input).to_dict()
            return _ENCODE_ASCII(exp)[:-1] + f', "case": {origin}}}'
        asked = set(array("Q", terms)) if terms else set()
        negation = 1.0
        out_negates = False
        if score > 0.0 and vec and ref.vec and vec != ref.vec:
            out_negates = scorer.has_negator(vec)
            if out_negates != ref.has_negator(scorer):
                negation = scorer.negation
        otok = self.tokens(output)
        so = dict(reversed(otok))
        wo = dict(zip(*_records(vec), strict=True))
        weight = scorer.input_weight
        demoted: set[str] = set()
        if asked and not asked.isdisjoint(wo):
            for h in asked.intersection(wo):
                wo[h] *= weight
                demoted.add(so[h])
        ow = list(map(wo.__getitem__, dict.fromkeys(map(_first, otok))))
        no = math.sqrt(sum(map(operator.mul, ow, ow))) or 1.0
        missing: list[str] = []
        if asked and ref.asked(terms):
            rtok = self.tokens(ref.text)
            sr = dict(reversed(rtok))
            wr = dict(zip(*_records(ref.vec), strict=True))
            for h in asked.intersection(wr):
                wr[h] *= weight
                demoted.add(sr[h])
            rw = list(map(wr.__getitem__, dict.fromkeys(map(_first, rtok))))
            nr = math.sqrt(sum(map(operator.mul, rw, rw))) or 1.0
            ref_json = _ENCODE_ASCII(ref.text)
            lacking = list(wr.keys() - wo.keys())
            keys = [-((wr[h] / nr) ** 2) for h in lacking]
            missing_json = _terms_json(_smallest(keys, lacking, sr.__getitem__), demoted)
        else:
            wr, nr, entries, ref_json = self._side(ref)
            for entry in entries:
                if entry[0] not in wo:
                    text = entry[3]
                    if text is None:
                        text = entry[3] = _term_json(entry[1], entry[2])
                    missing.append(text)
                    if len(missing) == 10:
                        break
            missing_json = f"[{', '.join(missing)}]"
        d = no * nr
        # explain's keys: shared negation * wo * wr / (no * nr) (a factor of 1.0 is exact and
        # left out), extra (wo / no) ** 2, each with its first word; mapped in C
        common = list(wo.keys() & wr.keys())
        only = list(wo.keys() - wr.keys())
        get_o, get_w = wo.__getitem__, so.__getitem__
        first = map(get_o, common)
        if negation != 1.0:
            first = map(_mul, repeat(negation), first)
        products = map(_mul, first, map(wr.__getitem__, common))
        shared = _smallest(list(map(_neg, map(_div, products, repeat(d)))), common, get_w)
        extra_keys = map(_neg, map(pow, map(_div, map(get_o, only), repeat(no)), repeat(2)))
        extra = _smallest(list(extra_keys), only, get_w)
        reason = "null"
        if not wo:
            reason = '"output has no scorable terms"'
        elif not common and score < 1.0:
            reason = '"output and reference share no terms"'
        elif negation != 1.0:
            side = "output" if out_negates else "reference"
            reason = _ENCODE_ASCII(f"only the {side} has a negator: score x {scorer.negation:g}")
        fingerprint = self.fingerprint_json
        if fingerprint is None:
            fingerprint = self.fingerprint_json = _ENCODE_ASCII(scorer.fingerprint)
        score_json = repr(score) if score.__class__ is float else _ENCODE_ASCII(score)
        return (
            f'{{"score": {score_json}, "matched_reference": {at}, '
            f'"reference": {ref_json}, "shared": {_terms_json(shared, demoted)}, '
            f'"missing": {missing_json}, "extra": {_terms_json(extra, demoted)}, '
            f'"reason": {reason}, "fingerprint": {fingerprint}, '
            f'"demoted": {_ENCODE_ASCII(sorted(demoted))}, '
            f'"negation": {_ENCODE_ASCII(negation)}, "case": {origin}}}'
        )


def _smallest(
    keys: list[float], hashes: list[int], word: Callable[[int], str], top: int = 10
) -> list[tuple[float, str]]:
    """``sorted(zip(keys, map(word, hashes)))[:top]``: the keys sorted as plain floats (the
    fast path of ``sorted``), words only for the ``top`` smallest and any tied with the last."""
    if len(keys) <= top:
        return sorted(zip(keys, map(word, hashes), strict=True))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    last = keys[order[top - 1]]
    n = top
    while n < len(order) and keys[order[n]] == last:
        n += 1
    return sorted([(keys[i], word(hashes[i])) for i in order[:n]])[:top]


def _term_json(w: float, s: str) -> str:
    """``_ENCODE_ASCII({"term": s, "weight": round(-w, 6)})``."""
    weight = round(-w, 6)
    return f'{{"term": {_STR_ASCII(s)}, "weight": {_FLOAT_JSON(weight)}, "demoted": false}}'


def _terms_json(items: list[tuple[float, str]], demoted: set[str]) -> str:
    """The JSON of explain's terms: ``items`` (negated weight, word), sorted and cut already;
    ``demoted``: the words of the terms the input contains."""
    text, num = _STR_ASCII, _FLOAT_JSON
    terms = [
        f'{{"term": {text(s)}, "weight": {num(round(-w, 6))}, '
        f'"demoted": {"true" if s in demoted else "false"}}}'
        for w, s in items
    ]
    return "[" + ", ".join(terms) + "]"


def _origin_json(case_id: str | None, where: str, ordinal: int) -> str:
    """``_ENCODE_ASCII({"id": case_id, "row": where, "ordinal": ordinal})``."""
    cid = "null" if case_id is None else _STR_ASCII(case_id)
    return f'{{"id": {cid}, "row": {_STR_ASCII(where)}, "ordinal": {ordinal}}}'


_TERMS: dict[str, _Terms] = {}


def _terms(scorer: Scorer) -> _Terms | None:
    """The ``_Terms`` of a scorer, or None where only ``explain`` knows the terms (n-grams,
    ``pair`` IDF, no C core)."""
    if scorer.analyzer.ngram != 1 or scorer.pair:
        return None
    t = _TERMS.get(scorer.fingerprint)
    if t is None or t.scorer is not scorer:
        if len(_TERMS) > 16:
            _TERMS.clear()
        t = _TERMS[scorer.fingerprint] = _Terms(scorer)
    return t


def missing_terms(
    scorer: Scorer,
    output: str,
    reference: str,
    top: int = TOP_MISSING,
    input: str | None = None,
) -> list[str]:
    """The reference's most important terms (by tf-idf weight) that the output lacks.

    The same terms, in the same order, as ``scorer.explain(output, reference, top,
    input).missing``, but several times faster for single-word terms. N-gram and ``pair``
    scorers, and an input sharing a term with the reference, use ``explain``.
    """
    t = _terms(scorer)
    if t is None or not output.strip():
        return [m.term for m in scorer.explain(output, reference, top=top, input=input).missing]
    ref = _Ref(reference, scorer.vector(reference))
    terms = scorer.input_terms(input)
    if ref.asked(terms):
        return t.missing_asked(ref, _hashes(scorer.vector(output)), terms, top)
    return t.missing(_hashes(scorer.vector(output)), reference, ref.vec, top)


def explanation(
    scorer: Scorer,
    output: str,
    references: Sequence[str],
    score: float,
    at: int,
    top: int = 10,
    input: str | None = None,
) -> dict[str, Any]:
    """``scorer.explain(output, references, top, input).to_dict()`` of a scored row, faster."""
    t = _terms(scorer)
    if t is None or top != 10:
        return scorer.explain(output, list(references), top=top, input=input).to_dict()
    vec = scorer.vector(output)
    ref = _Ref(references[at], scorer.vector(references[at]))
    terms = scorer.input_terms(input)
    text = t.explain_json(output, vec, references, ref, score, at, "null", input, terms)
    explained: dict[str, Any] = json.loads(text)
    del explained["case"]
    return explained


# -- decoding rows ---------------------------------------------------------------------------
def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _where(cfg: RunConfig, number: int) -> str:
    unit = "row" if cfg.fmt == "parquet" else "line"
    return f"{cfg.source} {unit} {number}"


def _decode(
    cfg: RunConfig, chunk: Chunk
) -> Iterator[tuple[str, int, dict[str, Any] | _BadRowError]]:
    """(where, ordinal, row dict or the problem) for every data row of a chunk."""
    ordinal = chunk.ordinal
    if chunk.lines is not None:
        for i, line in enumerate(chunk.lines):
            if not line.strip():
                continue
            where = _where(cfg, chunk.start + i)
            try:
                obj = json.loads(line)
            except UnicodeDecodeError as exc:
                yield where, ordinal, _BadRowError(f"not UTF-8 text (byte {exc.start + 1})")
            except ValueError as exc:
                msg = getattr(exc, "msg", str(exc))
                col = getattr(exc, "colno", None)
                yield (
                    where,
                    ordinal,
                    _BadRowError(f"malformed JSON: {msg}" + (f" (column {col})" if col else "")),
                )
            else:
                if isinstance(obj, dict):
                    yield where, ordinal, obj
                else:
                    yield (
                        where,
                        ordinal,
                        _BadRowError(f"expected a JSON object, got {_type_name(obj)}"),
                    )
            ordinal += 1
    elif chunk.records is not None:
        header = cfg.header
        for line_no, fields in chunk.records:
            where = _where(cfg, line_no)
            if len(fields) != len(header):
                hint = ""
                if cfg.quoting and (cfg.fmt == "tsv" or any('"' in f for f in fields)):
                    hint = " (if quotes in this file are literal text, read it with --no-quoting)"
                yield (
                    where,
                    ordinal,
                    _BadRowError(f"{len(fields)} fields where the header has {len(header)}{hint}"),
                )
            else:
                try:
                    "".join(fields).encode("utf-8")
                except UnicodeEncodeError:
                    yield where, ordinal, _BadRowError("not UTF-8 text")
                else:
                    yield where, ordinal, dict(zip(header, fields, strict=True))
            ordinal += 1
    else:
        for i, row in enumerate(chunk.batch.to_pylist()):
            yield _where(cfg, chunk.start + i), ordinal, row
            ordinal += 1


def _text_cell(row: dict[str, Any], col: str, required: bool) -> str | None:
    if col not in row:
        if required:
            have = ", ".join(map(str, row)) or "none"
            raise _BadRowError(f"missing column {col!r} (columns: {have})")
        return None
    value = row[col]
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise _BadRowError(f"column {col!r} must be a string, not {_type_name(value)}")
    return value


def _id_cell(row: dict[str, Any], cols: Columns) -> str | None:
    if cols.id not in row or row[cols.id] is None:
        if cols.id_required:
            raise _BadRowError(f"missing column {cols.id!r}")
        return None
    value = row[cols.id]
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _BadRowError(
        f"column {cols.id!r} must be a string or an integer, not {_type_name(value)}"
    )


def _reference_cells(row: dict[str, Any], cols: Columns) -> list[str]:
    refs: list[str] = []
    several = len(cols.references) > 1
    for col in cols.references:
        if col not in row:
            raise _BadRowError(f"missing column {col!r}")
        value = row[col]
        if isinstance(value, str):
            if several and not value.strip():
                continue  # a blank cell in one of several reference columns: fewer references
            refs.append(value)
        elif isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
            refs.extend(value)
        elif value is None and several:
            continue
        else:
            raise _BadRowError(
                f"column {col!r} must be a string or a list of strings, not {_type_name(value)}"
            )
    if not refs:
        raise _BadRowError("no reference answer in " + ", ".join(repr(c) for c in cols.references))
    for i, ref in enumerate(refs):
        if not ref.strip():
            label = "reference answer" if len(refs) == 1 else f"reference answer {i + 1}"
            raise _BadRowError(f"{label} is empty")
    return refs


def load_evals(path: str) -> tuple[EvalDef, ...]:
    """The evals of an eval definitions file (YAML or JSON, as ``simeval evals export`` writes).

    Archived evals are left out; draft and active ones are used, since a file kept in version
    control is the definition a CI run checks. Errors name the file and the eval.
    """
    from simeval.scoring.scorer import read_text_file
    from simeval.service import _validate_evals_document, parse_evals_document

    doc = parse_evals_document(read_text_file(path, "evals"), path)
    entries = _validate_evals_document(doc, path)
    evals = tuple(
        EvalDef(
            name=e["name"],
            references=tuple(e["references"]),
            threshold=e["threshold"],
            input_scope=e["input_scope"],
            options=tuple(sorted(e["options"].items())),
        )
        for e in entries
        if e["status"] != "archived"
    )
    if not evals:
        raise InvalidInput(f"{path}: no evals to run (the file has none that is not archived)")
    return evals


# -- scoring a chunk -------------------------------------------------------------------------
def _spec(e: EvalDef, scoped: bool = True) -> EvalSpec:
    return EvalSpec(
        None,
        e.name,
        e.version or 0,
        e.references,
        e.threshold,
        e.input_scope if scoped else None,
        e.options,
    )


@dataclass
class _State:
    """What a worker keeps between the chunks of one run: the scorer of a plain run, or the
    evals prepared once as an ``EvalSet`` (plus, per eval, a set of that eval alone for rows
    whose case id names it), and the references met so far (``_Ref``: by text in a plain
    run, by eval and reference number in an eval run)."""

    evals: tuple[EvalDef, ...]
    scorer: Scorer | None
    evalset: EvalSet | None
    by_name: dict[str, int]
    singles: dict[int, EvalSet] = field(default_factory=dict)
    refs: dict[Any, _Ref] = field(default_factory=dict)
    inputs: dict[tuple[int, str], bytes] = field(default_factory=dict)
    plain_inputs: dict[str, bytes] = field(default_factory=dict)  # a plain run's, by text

    def ref(self, text: str) -> _Ref:
        """A plain run's reference answer, vectorised once while it stays in the cache."""
        got = self.refs.get(text)
        if got is None:
            if len(self.refs) >= _REF_CACHE_LIMIT:
                self.refs.clear()
            assert self.scorer is not None
            got = self.refs[text] = _Ref(text, self.scorer.vector(text))
        return got

    def hits(
        self, output: str, case_id: str | None, text_in: str | None
    ) -> list[tuple[int, float, int, Scorer]]:
        """(eval position, score, matched reference, scorer) of every eval that scores a row:
        the one its case id names, else those whose scope matches its input."""
        pos = self.by_name.get(case_id) if case_id is not None else None
        if pos is not None:
            es = self.singles.get(pos)
            if es is None:
                es = self.singles[pos] = EvalSet([_spec(self.evals[pos], scoped=False)])
            ((group, _, scores, at),) = es.score_arrays(output)
            return [(pos, scores[0], at[0], group.scorer)]
        assert self.evalset is not None
        hits: list[tuple[int, float, int, Scorer]] = []
        for group, members, scores, at in self.evalset.score_arrays(output, text_in):
            positions, scorer = group.positions, group.scorer
            hits.extend((positions[m], scores[m], at[m], scorer) for m in members)
        if len(self.evalset.groups) > 1:
            hits.sort(key=lambda h: h[0])  # in the order of the evals file
        return hits

    def _row(self, scorer: Scorer, output: str, rows: dict[int, Any]) -> tuple[bytes, Any]:
        """The output's vector and sorted term hashes for ``scorer``, once per row (``rows``)."""
        got = rows.get(id(scorer))
        if got is None:
            vec = scorer.vector(output)
            got = rows[id(scorer)] = (vec, _hashes(vec))
        return got

    def eval_ref(self, pos: int, at: int, scorer: Scorer) -> _Ref:
        got = self.refs.get((pos, at))
        if got is None:
            text = self.evals[pos].references[at]
            got = self.refs[(pos, at)] = _Ref(text, scorer.vector(text))
        return got

    def missing(
        self,
        pos: int,
        scorer: Scorer,
        output: str,
        at: int,
        rows: dict[int, Any],
        top: int,
        input: str | None = None,
    ) -> list[str]:
        """``missing_terms`` of eval ``pos``'s reference ``at``: its terms ranked once per
        run, the output's terms once per row and scorer (``rows``)."""
        terms = _terms(scorer)
        ref = self.eval_ref(pos, at, scorer)
        if terms is None or top <= 0 or not output.strip():
            return missing_terms(scorer, output, ref.text, top, input)
        _, have = self._row(scorer, output, rows)
        asked = self.input_terms(scorer, input)
        if ref.asked(asked):
            return terms.missing_asked(ref, have, asked, top)
        return terms.missing_in(ref, have, top)

    def input_terms(self, scorer: Scorer, input: str | None) -> bytes:
        """``scorer.input_terms(input)``, kept per input text while it stays in the cache."""
        if input is None:
            return b""
        key = (id(scorer), input)
        got = self.inputs.get(key)
        if got is None:
            if len(self.inputs) >= _INPUT_CACHE_LIMIT:
                self.inputs.clear()
            got = self.inputs[key] = scorer.input_terms(input)
        return got

    def explain_json(
        self,
        pos: int,
        scorer: Scorer,
        output: str,
        at: int,
        score: float,
        rows: dict[int, Any],
        origin: str,
        input: str | None = None,
    ) -> str:
        """The stored explanation (JSON text) of eval ``pos``'s result for a row (``origin``:
        the JSON of its "case" entry)."""
        terms = _terms(scorer)
        refs = self.evals[pos].references
        if terms is None:
            explained = scorer.explain(output, list(refs), top=10, input=input).to_dict()
            return _ENCODE_ASCII(explained)[:-1] + f', "case": {origin}}}'
        vec, _ = self._row(scorer, output, rows)
        ref = self.eval_ref(pos, at, scorer)
        terms_in = self.input_terms(scorer, input)
        return terms.explain_json(output, vec, refs, ref, score, at, origin, input, terms_in)


_STATES: dict[str, _State] = {}


def _state(cfg: RunConfig) -> _State:
    state = _STATES.get(cfg.token)
    if state is None:
        if len(_STATES) > 8:
            _STATES.clear()
        state = _State(
            cfg.evals,
            None if cfg.evals else get_scorer(**dict(cfg.options)),
            EvalSet([_spec(e) for e in cfg.evals]) if cfg.evals else None,
            {e.name: i for i, e in enumerate(cfg.evals)},
        )
        _STATES[cfg.token] = state
    return state


def _xml_text(text: str) -> str:
    from xml.sax.saxutils import escape

    return escape(_XML_BAD.sub("\ufffd", text))


def _xml_attr(text: str) -> str:
    from xml.sax.saxutils import quoteattr

    return quoteattr(_XML_BAD.sub("\ufffd", text))


def _compile_xml_bad() -> Any:
    import re

    return re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


_XML_BAD = _compile_xml_bad()


def _case_key(
    case_id: str | None, text_in: str | None, ordinal: int, eval_name: str | None
) -> bytes:
    if case_id is not None:
        base = "id\0" + case_id
    elif text_in:  # an empty input identifies nothing (and a stored run keeps None as "")
        base = "input\0" + text_in
    else:
        base = f"row\0{ordinal}"
    if eval_name is not None:
        base += "\0" + eval_name
    return hashlib.blake2b(base.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _case_name(case_id: str | None, text_in: str | None, where: str) -> str:
    if case_id is not None:
        return case_id
    if text_in is not None and text_in.strip():
        short = " ".join(text_in.split())
        return short if len(short) <= 80 else short[:77] + "..."
    return where


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= _TEXT_CUT:
        return text
    return text[: _TEXT_CUT - 3] + "..."


def _cell_text(value: Any) -> str:
    """A value as one CSV cell: text as is, anything else as JSON (lists stay parseable)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False, default=str)


# Stored rows: the columns of the ``results`` table a run fills, in this order; the
# explanation is JSON text already (serialised by the worker that scored the row).
STORE_COLUMNS = (
    "eval_name",
    "eval_version",
    "score",
    "passed",
    "threshold",
    "fingerprint",
    "matched_index",
    "input",
    "output",
    "reference",
    "explanation",
)
_ENCODE = json.JSONEncoder(ensure_ascii=False, default=str).encode
_ENCODE_ASCII = json.JSONEncoder().encode


def _row_encoder(ascii_only: bool) -> Callable[[Any], str]:
    """``_ENCODE_ASCII`` or ``_ENCODE`` for a decoded JSON row: the same C encoder
    ``JSONEncoder.encode`` builds on every call, built once (no cycle check: a decoded row has
    no cycles)."""
    from json import encoder as je

    make = getattr(je, "c_make_encoder", None)
    if make is None:
        return _ENCODE_ASCII if ascii_only else _ENCODE
    if ascii_only:
        enc = make(None, json.JSONEncoder().default, je.encode_basestring_ascii, None,
                   ": ", ", ", False, False, True)  # fmt: skip
    else:
        enc = make(None, str, je.encode_basestring, None, ": ", ", ", False, False, True)
    join = "".join
    return lambda o: join(enc(o, 0))


_ROW_ASCII = _row_encoder(True)
_ROW = _row_encoder(False)
_STR_JSON: Callable[[str], str] = json.encoder.encode_basestring
_STR_ASCII: Callable[[str], str] = json.encoder.encode_basestring_ascii
_FLOAT_JSON: Callable[[float], str] = float.__repr__  # json's form of a finite float


def _list_json(words: list[str]) -> str:
    """``_ENCODE(words)`` for a list of strings."""
    return "[" + ", ".join(map(_STR_JSON, words)) + "]" if words else "[]"


# json.loads' own (C) scanner, without its Python frames
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_WS = " \t\n\r"


def _plain_jsonl(
    cfg: RunConfig, chunk: Chunk, state: _State, terms: _Terms, line_encode: Callable[[Any], str]
) -> tuple[Any, ...] | None:
    """The rows of a plain run's JSONL chunk written to a JSONL results file, in one tight
    loop: the same lines, statistics, worst cases and stored rows as ``process_chunk``'s
    general loop, with none of its per-row choices. It covers the common row (a JSON object
    with a text output, one non-blank text reference, an optional text input and a text or
    integer id, no result field's name among its keys, scorable terms on both sides) and
    gives up (None) at the first row that is anything else: the general loop then takes the
    whole chunk, so whatever it does with such rows (an error, a skip, another path) stays
    its own."""
    scorer = state.scorer
    assert scorer is not None and chunk.lines is not None
    cols = cfg.columns
    if len(cols.references) != 1 or cols.input_required or cols.id_required:
        return None
    out_col, ref_col, in_col, id_col = cols.output, cols.references[0], cols.input, cols.id
    result_names = frozenset(cfg.result_fields)
    isdisjoint = result_names.isdisjoint
    scan = _SCAN
    ws = _JSON_WS
    vector = scorer.vector
    vz = getattr(scorer, "_vz", None)
    vz_vector = vz.vector if vz is not None else None  # what ``Scorer.vector`` calls, if set
    sublinear = scorer.sublinear
    best = _vector_best
    pair, input_weight, negation = scorer.pair, scorer.input_weight, scorer.negation
    negators = scorer._negators
    input_terms = state.input_terms
    asked_by = state.plain_inputs
    refs_cache = state.refs
    get_ref = state.ref
    threshold = cfg.threshold
    top = cfg.top_missing
    missing_of = terms.missing_of
    worst_n = cfg.worst
    want_store = cfg.store
    threshold_json = _ENCODE(threshold)
    fingerprint = scorer.fingerprint
    tail = f', "fingerprint": {_ENCODE(fingerprint)}}}'
    mid = f', "threshold": {threshold_json}, "matched_index": '
    list_json = _list_json
    where_prefix = f"{cfg.source} {'line'} "
    lines: list[str] = []
    append = lines.append
    missing_words: list[str] = []
    extend = missing_words.extend
    worst: list[tuple[float, int, tuple[Any, ...]]] = []
    store_rows: list[tuple[Any, ...]] = []
    nothing: list[str] = []
    rows = results = passed_n = seq = 0
    score_sum = 0.0
    ordinal = chunk.ordinal
    start = chunk.start
    str_, int_, float_ = str, int, float
    try:
        for i, line in enumerate(chunk.lines):
            if line[:1] != b"{":
                if not line.strip():
                    continue  # a blank line: no row
                return None
            text = line.decode("utf-8")
            row, end = scan(text, 0)
            if end != len(text) and text[end:].strip(ws):
                return None
            if row.__class__ is not dict or not isdisjoint(row):
                return None
            output = row.get(out_col)
            reference = row.get(ref_col)
            text_in = row.get(in_col)
            case_id = row.get(id_col)
            if output.__class__ is not str_ or reference.__class__ is not str_:
                return None
            if text_in is not None and text_in.__class__ is not str_:
                return None
            if case_id is not None:
                if case_id.__class__ is int_:
                    case_id = str_(case_id)
                elif case_id.__class__ is not str_:
                    return None
            ref = refs_cache.get(reference)
            if ref is None:
                if not reference.strip():
                    return None
                ref = get_ref(reference)
            vec = vz_vector(output, sublinear) if vz_vector is not None else vector(output)
            if not vec or not ref.vec:
                return None
            asked = b""
            if text_in is not None:
                got = asked_by.get(text_in)
                if got is None:
                    if len(asked_by) >= _INPUT_CACHE_LIMIT:
                        asked_by.clear()
                    got = asked_by[text_in] = input_terms(scorer, text_in)
                asked = got
            # ``Scorer.best_vector`` for a non-empty vector is this call
            score, at = best(vec, [ref.vec], pair, asked, input_weight, negators, negation)
            if score.__class__ is not float_:
                return None
            rows += 1
            results += 1
            score_sum += score
            passed = score >= threshold
            if passed:
                missing = nothing
                passed_n += 1
            else:
                missing = missing_of(ref, vec, asked, top)
                extend(missing)
            if worst_n:
                if len(worst) < worst_n or score < -worst[0][0]:
                    where = where_prefix + str_(start + i)
                    item = (
                        -score,
                        -seq,
                        (where, case_id, text_in, output, score, passed, threshold, None, at,
                         missing if missing is not nothing else [], reference, scorer),
                    )  # fmt: skip
                    if len(worst) < worst_n:
                        heapq.heappush(worst, item)
                    else:
                        heapq.heapreplace(worst, item)
                seq += 1
            # a line of printable ASCII without a backslash holds strings whose JSON is
            # their text in quotes (no character of them needs an escape, and the scanner
            # refused control characters): the row's JSON is then its pieces joined, as the
            # encoder would write them, without scanning every string for escapes again
            head = ""
            if line.isascii() and b"\\" not in line and b"\x7f" not in line:
                pieces = []
                for k, v in row.items():
                    c = v.__class__
                    if c is str_:
                        pieces.append(f'"{k}": "{v}"')
                    elif c is int_:
                        pieces.append(f'"{k}": {int_.__repr__(v)}')
                    elif v is None:
                        pieces.append(f'"{k}": null')
                    else:
                        break
                else:
                    head = "{" + ", ".join(pieces) + "}"
            if not head:
                head = line_encode(row)
            append(
                f'{head[:-1]}{", " if len(head) > 2 else ""}"score": {score!r}, "pass": '
                f'{"true" if passed else "false"}{mid}{at}, "matched_reference": '
                f"{ref.encoded()}, "
                f'"missing_terms": {list_json(missing)}{tail}'
            )
            if want_store:
                where = where_prefix + str_(start + i)
                store_rows.append(
                    (None, None, score, passed, threshold, fingerprint, at, text_in, output,
                     reference, f'{{"case": {_origin_json(case_id, where, ordinal)}}}')
                )  # fmt: skip
            ordinal += 1
    except Exception:  # anything unusual: the general loop decides (and names the problem)
        return None
    return rows, results, passed_n, score_sum, lines, missing_words, worst, store_rows


def process_chunk(cfg: RunConfig, chunk: Chunk) -> ChunkOut:
    """Score one chunk: the unit of work of every executor (inline, process pool, Dask).

    Raises ``RowError`` for the first bad row unless ``cfg.on_error == "skip"``.
    """
    state = _state(cfg)
    out = ChunkOut(chunk.index, nbytes=chunk.nbytes)
    cols = cfg.columns
    evals = cfg.evals
    result_fields = cfg.result_fields
    out_fields = cfg.out_fields
    jsonl_out = cfg.out_fmt == "jsonl"
    parquet_out = cfg.out_fmt == "parquet"
    csv_buf: io.StringIO | None = None
    csv_row: Any = None
    if cfg.out_fmt in {"csv", "tsv"}:
        csv_buf = io.StringIO()
        csv_row = csv.writer(
            csv_buf, delimiter="\t" if cfg.out_fmt == "tsv" else ",", lineterminator="\n"
        ).writerow
    lines: list[str] = []
    junit: list[str] = []
    table_rows: list[dict[str, Any]] = []
    take: list[int] = []
    # the worst results so far: a max-heap on (score, order) of at most cfg.worst entries
    worst: list[tuple[float, int, tuple[Any, ...]]] = []
    worst_n = cfg.worst
    top = cfg.top_missing
    want_junit, want_keys, want_store = cfg.junit, cfg.keys, cfg.store
    collect = cfg.collect
    encode = _ENCODE
    skip = cfg.on_error == "skip"
    scorer = state.scorer
    plain_terms = _terms(scorer) if scorer is not None else None
    classnames: dict[str | None, str] = {None: _xml_attr(cfg.source)}
    classnames.update({e.name: _xml_attr(f"{cfg.source} [{e.name}]") for e in evals})
    missing_words: list[str] = []  # tallied once per chunk, in the same order
    per_eval = out.per_eval
    store_rows = out.store_rows
    rowvecs: dict[int, Any] = {}  # a row's output vector and terms per scorer: evals share them
    # a JSONL row is written as its own fields followed by the result's: when none of its
    # fields has a result field's name, the row is encoded as it is and the result's fields
    # are appended as text (the reference's JSON made once per reference); an ASCII line
    # without \u escapes holds only ASCII text, which the (faster) ASCII encoder writes
    # byte for byte as the other would
    result_names = frozenset(result_fields)
    line_encode: Callable[[Any], str] = encode
    lines_in = chunk.lines
    if lines_in is not None:
        ascii_only = all(map(bytes.isascii, lines_in)) and not any(b"\\u" in x for x in lines_in)
        line_encode = _ROW_ASCII if ascii_only else _ROW
    threshold_json = encode(cfg.threshold)
    fingerprint_json = "" if scorer is None else encode(scorer.fingerprint)
    rs: list[_Ref] = []
    results = passed_n = seq = 0
    score_sum = 0.0
    rows_in: Iterable[tuple[int, tuple[str, int, Any]]] = ()
    fast = None
    if (
        lines_in is not None
        and jsonl_out
        and plain_terms is not None
        and not (want_junit or want_keys or collect is not None or evals)
    ):
        fast = _plain_jsonl(cfg, chunk, state, plain_terms, line_encode)
    if fast is not None:
        out.rows, results, passed_n, score_sum, lines, missing_words, worst, fast_store = fast
        store_rows.extend(fast_store)
    else:
        rows_in = enumerate(_decode(cfg, chunk))
    for index, (where, ordinal, row) in rows_in:
        out.rows += 1
        try:
            if isinstance(row, _BadRowError):
                raise row
            output = _text_cell(row, cols.output, True)
            assert output is not None
            text_in = _text_cell(row, cols.input, cols.input_required)
            case_id = _id_cell(row, cols)
            collected = None
            if collect is not None:
                if collect not in row or row[collect] is None:
                    raise _BadRowError(f"missing label column {collect!r}")
                collected = row[collect]
            if evals:
                hits = state.hits(output, case_id, text_in)
                if not hits:
                    out.unmatched += 1
                    continue
                refs: Sequence[str] = ()
            else:
                refs = _reference_cells(row, cols)
        except _BadRowError as bad:
            if not skip:
                raise RowError(where, str(bad)) from None
            out.errors.append((where, str(bad)))
            if want_junit:
                junit.append(
                    f"<testcase classname={classnames[None]} name={_xml_attr(where)}>"
                    f"<error message={_xml_attr(str(bad))}/></testcase>\n"
                )
            continue
        vec = b""
        prepared: list[bytes] = []
        asked = b""  # the terms of the row's input (the question): they count less
        if not evals:
            assert scorer is not None
            vec = scorer.vector(output)
            rs = [state.ref(r) for r in refs]
            prepared = [r.vec for r in rs]
            asked = state.input_terms(scorer, text_in)
            if vec and all(prepared):
                score, at = scorer.best_vector(vec, prepared, asked)
            else:  # an empty vector: score_detail decides (identical texts without terms)
                score, at = scorer.score_detail(output, refs, text_in)
            hits = [(-1, score, at, scorer)]
        else:
            rowvecs.clear()
        for pos, score, at, sc in hits:
            eval_def = None
            threshold = cfg.threshold
            if pos >= 0:
                eval_def = evals[pos]
                refs = eval_def.references
                threshold = eval_def.threshold
            passed = score >= threshold
            if passed:
                missing: list[str] = []
            else:
                if eval_def is not None:
                    missing = state.missing(pos, sc, output, at, rowvecs, top, text_in)
                elif plain_terms is not None and top > 0 and output.strip():
                    have = _hashes(vec)
                    if rs[at].asked(asked):
                        missing = plain_terms.missing_asked(rs[at], have, asked, top)
                    else:
                        missing = plain_terms.missing_in(rs[at], have, top)
                else:
                    missing = missing_terms(sc, output, refs[at], top, text_in)
                missing_words.extend(missing)
            reference = refs[at]
            fingerprint = sc.fingerprint
            results += 1
            passed_n += passed
            score_sum += score
            eval_name = None
            if eval_def is not None:
                eval_name = eval_def.name
                stats = per_eval.get(eval_name)
                if stats is None:
                    stats = per_eval[eval_name] = [0, 0, 0.0]
                stats[0] += 1
                stats[1] += passed
                stats[2] += score
            if worst_n:
                # a later result with an equal score ranks after an earlier one: only a lower
                # score displaces the current last of the worst
                if len(worst) < worst_n or score < -worst[0][0]:
                    item = (
                        -score,
                        -seq,
                        (
                            where,
                            case_id,
                            text_in,
                            output,
                            score,
                            passed,
                            threshold,
                            eval_name,
                            at,
                            missing,
                            reference,
                            sc,
                        ),
                    )
                    if len(worst) < worst_n:
                        heapq.heappush(worst, item)
                    else:
                        heapq.heapreplace(worst, item)
                seq += 1
            if jsonl_out and result_names.isdisjoint(row):
                head = line_encode(row)
                if eval_def is not None:
                    ref_json = state.eval_ref(pos, at, sc).encoded()
                    tail = (
                        f', "fingerprint": {encode(fingerprint)}, "eval": {encode(eval_name)}, '
                        f'"eval_version": {encode(eval_def.version)}}}'
                    )
                    threshold_text = encode(threshold)
                else:
                    ref_json = rs[at].encoded()
                    tail = f', "fingerprint": {fingerprint_json}}}'
                    threshold_text = threshold_json
                lines.append(
                    f'{head[:-1]}{", " if len(head) > 2 else ""}"score": '
                    f"{repr(score) if score.__class__ is float else encode(score)}, "
                    f'"pass": {"true" if passed else "false"}, "threshold": {threshold_text}, '
                    f'"matched_index": {at}, "matched_reference": {ref_json}, '
                    f'"missing_terms": {_list_json(missing)}{tail}'
                )
            elif jsonl_out:
                # the input row with the result fields after its own (or in place of fields of
                # the same name): {**row, **result} without building either
                row["score"] = score
                row["pass"] = passed
                row["threshold"] = threshold
                row["matched_index"] = at
                row["matched_reference"] = reference
                row["missing_terms"] = missing
                row["fingerprint"] = fingerprint
                if eval_def is not None:
                    row["eval"] = eval_name
                    row["eval_version"] = eval_def.version
                lines.append(encode(row))
            elif csv_row is not None:
                result = (
                    score,
                    passed,
                    threshold,
                    at,
                    reference,
                    missing,
                    fingerprint,
                    eval_name,
                    None if eval_def is None else eval_def.version,
                )
                csv_row(
                    [_cell_text(row.get(f)) for f in out_fields]
                    + [_cell_text(v) for v in result[:5]]
                    + ["; ".join(missing)]
                    + [_cell_text(v) for v in result[6 : len(result_fields)]]
                )
            elif parquet_out:
                result_d: dict[str, Any] = {
                    "score": score,
                    "pass": passed,
                    "threshold": threshold,
                    "matched_index": at,
                    "matched_reference": reference,
                    "missing_terms": missing,
                    "fingerprint": fingerprint,
                }
                if eval_def is not None:
                    result_d["eval"] = eval_name
                    result_d["eval_version"] = eval_def.version
                if chunk.batch is not None:
                    take.append(index)
                    table_rows.append(result_d)
                else:
                    table_rows.append(
                        {
                            **{f: _cell_text(row.get(f)) if f in row else None for f in out_fields},
                            **result_d,
                        }
                    )
            if want_junit or want_keys:
                name = _case_name(case_id, text_in, where)
                if want_junit:
                    case = f"<testcase classname={classnames[eval_name]} name={_xml_attr(name)}>"
                    if not passed:
                        msg = f"score {score:.4f} < threshold {threshold:.2f}"
                        detail = (
                            f"{where}\nscore: {score:.6f}\nthreshold: {threshold}\n"
                            f"missing terms: {', '.join(missing) or '-'}\n"
                            f"output: {_cut(output)}\nreference: {_cut(reference)}"
                        )
                        case += (
                            f'<failure message={_xml_attr(msg)} type="below-threshold">'
                            f"{_xml_text(detail)}</failure>"
                        )
                    junit.append(case + "</testcase>\n")
                if want_keys:
                    out.cases.append(
                        (
                            _case_key(case_id, text_in, ordinal, eval_name),
                            score,
                            passed,
                            name,
                            missing,
                        )
                    )
            if want_store:
                # no explanation here: it is computed when the row is shown, from the row's
                # own texts and the scorer options the run keeps; the row keeps where it came
                # from (a stored run can be a later run's baseline)
                store_rows.append(
                    (
                        eval_name,
                        None if eval_def is None else eval_def.version,
                        score,
                        passed,
                        threshold,
                        fingerprint,
                        at,
                        text_in,
                        output,
                        reference,
                        f'{{"case": {_origin_json(case_id, where, ordinal)}}}',
                    )
                )
            if collected is not None:
                out.collected.append((where, collected, score))
    out.results, out.passed, out.score_sum = results, passed_n, score_sum
    out.missing = missing_words
    for _, _, entry in sorted(worst, reverse=True):
        where, case_id, text_in, output, score, passed, threshold, eval_name = entry[:8]
        at, missing, reference, sc = entry[8:]
        if passed:  # a passing row among the worst: its terms were not computed yet
            missing = missing_terms(sc, output, reference, top, text_in)
        out.worst.append(
            {
                "where": where,
                "id": case_id,
                "input": _cut(text_in),
                "output": _cut(output),
                "score": score,
                "pass": passed,
                "threshold": threshold,
                "eval": eval_name,
                "matched_index": at,
                "missing_terms": missing,
            }
        )
    if lines:
        lines.append("")
        # line by line: one line with a character beyond Latin-1 would make the whole
        # chunk's joined text a wide string, whose encoding is ~5x slower than these copies
        to_bytes = str.encode
        out.data = b"\n".join([to_bytes(x, "utf-8", "surrogateescape") for x in lines])
    elif csv_buf is not None:
        out.data = csv_buf.getvalue().encode("utf-8", "surrogateescape")
    elif table_rows:
        out.batch = _result_batch(cfg, chunk, take, table_rows)
    if junit:
        out.junit = "".join(junit).encode("utf-8")
    return out


def _result_types() -> dict[str, Any]:
    import pyarrow as pa

    return {
        "score": pa.float64(),
        "pass": pa.bool_(),
        "threshold": pa.float64(),
        "matched_index": pa.int32(),
        "matched_reference": pa.string(),
        "missing_terms": pa.list_(pa.string()),
        "fingerprint": pa.string(),
        "eval": pa.string(),
        "eval_version": pa.int64(),
    }


def _result_batch(cfg: RunConfig, chunk: Chunk, take: list[int], rows: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    types = _result_types()
    fields = cfg.result_fields
    if chunk.batch is not None:
        base = chunk.batch.take(pa.array(take, pa.int64()))
        keep = [n for n in base.schema.names if n not in fields]
        arrays = [base.column(n) for n in keep]
        names = list(keep)
    else:
        arrays, names = [], []
        for f in cfg.out_fields:
            if f not in fields:
                arrays.append(pa.array([r.get(f) for r in rows], pa.string()))
                names.append(f)
    for f in fields:
        arrays.append(pa.array([r[f] for r in rows], types[f]))
        names.append(f)
    return pa.RecordBatch.from_arrays(arrays, names=names)


# -- reading chunks --------------------------------------------------------------------------
def _open_binary(path: str) -> IO[bytes]:
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise InvalidInput(f"input file not found: {path}") from None
    except IsADirectoryError:
        raise InvalidInput(f"{path} is a directory, not a file") from None


def _jsonl_chunks(path: str, rows: int) -> Iterator[Chunk]:
    with _open_binary(path) as fh:
        index = ordinal = 0
        line_no = 1
        lines: list[bytes] = []
        count = 0
        for line in fh:
            lines.append(line)
            if line.strip():
                count += 1
                if count >= rows:
                    yield Chunk(index, line_no, ordinal, lines=lines, nbytes=fh.tell(), nrows=count)
                    index += 1
                    ordinal += count
                    line_no += len(lines)
                    lines, count = [], 0
        if count:
            yield Chunk(index, line_no, ordinal, lines=lines, nbytes=fh.tell(), nrows=count)


def csv_header(path: str, delimiter: str, quoting: bool = True) -> list[str]:
    """The header row of a CSV/TSV file (``InvalidInput`` when the file is empty)."""
    with (
        _open_binary(path) as raw,
        io.TextIOWrapper(raw, "utf-8-sig", "surrogateescape", newline="") as text,
    ):
        try:
            header = next(csv.reader(text, delimiter=delimiter, quoting=_quoting(quoting)))
        except StopIteration:
            raise InvalidInput(f"{path}: the file is empty (no header row)") from None
        except csv.Error as exc:
            raise InvalidInput(f"{path} line 1: {exc}") from None
    return header


def _quoting(quoting: bool) -> Literal[0, 3]:
    return csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE


def _csv_chunks(path: str, rows: int, delimiter: str, quoting: bool = True) -> Iterator[Chunk]:
    csv.field_size_limit(2**31 - 1)  # a long answer is one cell: no 128 KiB cap
    with (
        _open_binary(path) as raw,
        io.TextIOWrapper(raw, "utf-8-sig", "surrogateescape", newline="") as text,
    ):
        reader = csv.reader(text, delimiter=delimiter, quoting=_quoting(quoting))
        try:
            next(reader)  # the header, read separately
            index = ordinal = 0
            records: list[tuple[int, list[str]]] = []
            start = reader.line_num + 1
            first = start
            for fields in reader:
                if fields:  # csv gives [] for a blank line
                    records.append((start, fields))
                start = reader.line_num + 1
                if len(records) >= rows:
                    yield Chunk(
                        index,
                        first,
                        ordinal,
                        records=records,
                        nbytes=raw.tell(),
                        nrows=len(records),
                    )
                    index += 1
                    ordinal += len(records)
                    records, first = [], start
            if records:
                yield Chunk(
                    index, first, ordinal, records=records, nbytes=raw.tell(), nrows=len(records)
                )
        except csv.Error as exc:
            raise InvalidInput(f"{path} line {reader.line_num}: {exc}") from None


def _parquet_file(path: str) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InvalidInput(
            "reading Parquet needs pyarrow: pip install 'simeval[parquet]'"
        ) from None
    if not Path(path).exists():
        raise InvalidInput(f"input file not found: {path}")
    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own error types for a broken file
        raise InvalidInput(f"{path}: not a readable Parquet file ({exc})") from None


def _parquet_chunks(path: str, rows: int) -> Iterator[Chunk]:
    pf = _parquet_file(path)
    start = 1
    for index, batch in enumerate(pf.iter_batches(batch_size=rows)):
        yield Chunk(
            index,
            start,
            start - 1,
            batch=batch,
            nbytes=start - 1 + batch.num_rows,
            nrows=batch.num_rows,
        )
        start += batch.num_rows


def read_chunks(
    path: str, fmt: str, rows: int = CHUNK_ROWS, quoting: bool = True
) -> Iterator[Chunk]:
    """The input file in chunks of about ``rows`` data rows. ``quoting=False`` reads CSV/TSV
    cells literally (a double quote is an ordinary character, as in plain TSV files)."""
    if fmt == "jsonl":
        return _jsonl_chunks(path, rows)
    if fmt in {"csv", "tsv"}:
        return _csv_chunks(path, rows, "\t" if fmt == "tsv" else ",", quoting)
    return _parquet_chunks(path, rows)


def input_size(path: str, fmt: str) -> int:
    """The progress total: bytes for text formats, rows for Parquet."""
    if fmt == "parquet":
        return int(_parquet_file(path).metadata.num_rows)
    return os.path.getsize(path)


def input_fields(path: str, fmt: str, quoting: bool = True) -> tuple[str, ...]:
    """The input's column names (the CSV header, the Parquet schema, the first JSONL object)."""
    if fmt in {"csv", "tsv"}:
        return tuple(csv_header(path, "\t" if fmt == "tsv" else ",", quoting))
    if fmt == "parquet":
        return tuple(_parquet_file(path).schema_arrow.names)
    with _open_binary(path) as fh:
        for line in fh:
            if line.strip():
                try:
                    obj = json.loads(line)
                except ValueError:
                    return ()
                return tuple(obj) if isinstance(obj, dict) else ()
    return ()


# -- executors -------------------------------------------------------------------------------
_POOL_CFG: RunConfig | None = None


def _pool_init(cfg: RunConfig) -> None:
    global _POOL_CFG
    _POOL_CFG = cfg


def _pool_chunk(chunk: Chunk) -> ChunkOut:
    assert _POOL_CFG is not None
    out = process_chunk(_POOL_CFG, chunk)
    if out.store_rows:
        # pickled here, as one bytes object: the run's process passes it on to the database
        # writer without making the rows' objects (RunStoreProcess)
        out.store_blob = pickle.dumps(out.store_rows, pickle.HIGHEST_PROTOCOL)
        out.store_rows = []
    return out


def map_chunks(
    cfg: RunConfig, chunks: Iterator[Chunk], workers: int = 1, dask_address: str | None = None
) -> Iterator[ChunkOut]:
    """``process_chunk`` over the chunks, results in input order, a bounded number in flight.

    One worker scores in this process; more use a local process pool; a Dask address sends the
    chunks to that cluster. Chunks are the same in every mode, so the numbers are too.
    """
    if dask_address:
        yield from _map_dask(cfg, chunks, dask_address)
        return
    if workers <= 1:
        for chunk in chunks:
            yield process_chunk(cfg, chunk)
        return
    first = next(chunks, None)
    if first is None:
        return
    second = next(chunks, None)
    if second is None:  # a single chunk is not worth starting processes for
        yield process_chunk(cfg, first)
        return
    import multiprocessing as mp

    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    pool = ctx.Pool(workers, initializer=_pool_init, initargs=(cfg,))
    try:
        pending: deque[Any] = deque()
        for chunk in itertools.chain((first, second), chunks):
            pending.append(pool.apply_async(_pool_chunk, (chunk,)))
            while len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
    finally:
        pool.terminate()
        pool.join()


def _map_dask(cfg: RunConfig, chunks: Iterator[Chunk], address: str) -> Iterator[ChunkOut]:
    try:
        from dask.distributed import Client
    except ImportError:
        raise InvalidInput("--dask needs the dask extra: pip install 'simeval[dask]'") from None
    try:
        client = Client(address, timeout=30, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise InvalidInput(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        threads = sum(client.nthreads().values()) or 1
        shared = client.scatter(cfg, broadcast=True)
        pending: deque[Any] = deque()
        for chunk in chunks:
            pending.append(client.submit(process_chunk, shared, chunk, pure=False))
            while len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        client.close()


# -- writing ---------------------------------------------------------------------------------
def remove_orphans(directory: Path, name: str) -> int:
    """Remove the hidden temp files a killed run left beside ``name``
    (``.<name>.<pid>.<random>.tmp|.cases``) whose process is gone; returns how many."""
    removed = 0
    prefix = f".{name}."
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.name.endswith((".tmp", ".cases")):
            continue
        pid_text = entry.name[len(prefix) :].split(".", 1)[0]
        if pid_text.isdigit() and not pid_alive(int(pid_text)):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed += 1
    return removed


class AtomicFile:
    """A file written beside its final path and renamed over it only on ``commit``."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        directory = self.path.parent
        if not directory.is_dir():
            raise InvalidInput(f"cannot write {self.path}: directory {directory} does not exist")
        remove_orphans(directory, self.path.name)
        fd, tmp = tempfile.mkstemp(
            dir=directory, prefix=f".{self.path.name}.{os.getpid()}.", suffix=".tmp"
        )
        self.tmp = Path(tmp)
        self.fh: IO[bytes] = os.fdopen(fd, "wb")

    def commit(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        if not self.fh.closed:
            self.fh.close()
        self.tmp.unlink(missing_ok=True)


class ResultsWriter:
    """Results rows in the chosen format, atomically."""

    def __init__(self, path: str, cfg: RunConfig):
        self.file = AtomicFile(path)
        self.fmt = cfg.out_fmt
        self.cfg = cfg
        self.parquet: Any = None
        self.schema: Any = None
        if self.fmt in {"csv", "tsv"}:
            head = io.StringIO()
            csv.writer(
                head, delimiter="\t" if self.fmt == "tsv" else ",", lineterminator="\n"
            ).writerow(list(cfg.out_fields) + list(cfg.result_fields))
            self.file.fh.write(head.getvalue().encode("utf-8"))

    def write(self, out: ChunkOut) -> None:
        if out.data:
            self.file.fh.write(out.data)
        elif out.batch is not None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            batch = out.batch
            if self.parquet is None:
                self.schema = batch.schema
                self.parquet = pq.ParquetWriter(self.file.fh, self.schema)
            elif batch.schema != self.schema:
                try:
                    batch = pa.Table.from_batches([batch]).cast(self.schema)
                except (pa.ArrowInvalid, ValueError) as exc:
                    raise InvalidInput(
                        f"{self.cfg.source}: a later chunk has other column "
                        f"types than the first ({exc})"
                    ) from None
            self.parquet.write(
                batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
            )

    def commit(self) -> None:
        if self.fmt == "parquet":
            if self.parquet is None:  # no result rows: still a valid, empty file
                import pyarrow as pa
                import pyarrow.parquet as pq

                types = _result_types()
                schema = pa.schema([(f, types[f]) for f in self.cfg.result_fields])
                self.parquet = pq.ParquetWriter(self.file.fh, schema)
            self.parquet.close()
        self.file.commit()

    def discard(self) -> None:
        if self.parquet is not None:
            with contextlib.suppress(Exception):  # the file is thrown away anyway
                self.parquet.close()
        self.file.discard()


class JUnitWriter:
    """JUnit XML, one test case per row: the cases stream to a side file, the counts go on
    top at the end (a CI system reads the ``testsuite`` attributes first)."""

    def __init__(self, path: str, suite: str):
        self.final = AtomicFile(path)
        fd, body = tempfile.mkstemp(
            dir=self.final.path.parent,
            prefix=f".{self.final.path.name}.{os.getpid()}.",
            suffix=".cases",
        )
        self.body_path = Path(body)
        self.body = os.fdopen(fd, "w+b")
        self.suite = suite

    def write(self, out: ChunkOut) -> None:
        if out.junit:
            self.body.write(out.junit)

    def commit(self, tests: int, failures: int, errors: int, seconds: float) -> None:
        import shutil

        head = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuites tests="{tests}" failures="{failures}" errors="{errors}" '
            f'time="{seconds:.3f}">\n'
            f'<testsuite name={_xml_attr(self.suite)} tests="{tests}" '
            f'failures="{failures}" errors="{errors}" skipped="0" time="{seconds:.3f}">\n'
        )
        fh = self.final.fh
        fh.write(head.encode("utf-8"))
        self.body.seek(0)
        shutil.copyfileobj(self.body, fh)
        fh.write(b"</testsuite>\n</testsuites>\n")
        self.body.close()
        self.body_path.unlink(missing_ok=True)
        self.final.commit()

    def discard(self) -> None:
        self.body.close()
        self.body_path.unlink(missing_ok=True)
        self.final.discard()


# -- baselines -------------------------------------------------------------------------------
@dataclass
class Baseline:
    """A previous run's per-case scores, keyed like the current run's cases."""

    source: str
    cases: dict[bytes, tuple[float, bool, str]]
    fingerprints: set[str]
    rows: int


_PASS_WORDS = frozenset({"true", "1"})  # as results files write "pass" (JSON, CSV, Parquet)
_FAIL_WORDS = frozenset({"false", "0"})


def _as_bool(value: Any, where: str) -> bool:
    flag = yes_no(value, _PASS_WORDS, _FAIL_WORDS)
    if flag is None:
        raise InvalidInput(f"{where}: column 'pass' must be true or false, not {value!r}")
    return flag


def _as_score(value: Any, where: str) -> float:
    return check_unit(value, f"{where}: column 'score'")


class _Dedup:
    """Per-key occurrence numbers, so repeated inputs pair up in order across two runs."""

    def __init__(self) -> None:
        self.seen: dict[bytes, int] = {}

    def __call__(self, key: bytes) -> bytes:
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        return key if n == 0 else key + n.to_bytes(4, "little")


def load_baseline(path: str, columns: Columns, fmt: str | None = None) -> Baseline:
    """Read a results file written by an earlier run (any of the formats)."""
    fmt = detect_format(path, fmt)
    cfg = RunConfig(source=path, fmt=fmt, header=input_fields(path, fmt))
    cases: dict[bytes, tuple[float, bool, str]] = {}
    fps: set[str] = set()
    dedup = _Dedup()
    rows = 0
    for chunk in read_chunks(path, fmt):
        for where, ordinal, row in _decode(cfg, chunk):
            if isinstance(row, _BadRowError):
                raise InvalidInput(f"baseline {where}: {row}")
            try:
                case_id = _id_cell(row, columns)
                text_in = _text_cell(row, columns.input, False)
            except _BadRowError as bad:
                raise InvalidInput(f"baseline {where}: {bad}") from None
            if "score" not in row or "pass" not in row:
                raise InvalidInput(
                    f"baseline {where}: not a results file (no 'score' and 'pass' columns)"
                )
            eval_name = row.get("eval") or None
            key = dedup(_case_key(case_id, text_in, ordinal, eval_name))
            cases[key] = (
                _as_score(row["score"], where),
                _as_bool(row["pass"], where),
                _case_name(case_id, text_in, where),
            )
            if row.get("fingerprint"):
                fps.add(str(row["fingerprint"]))
            rows += 1
    return Baseline(path, cases, fps, rows)


def iter_results_file(
    path: str, columns: Columns = Columns(), fmt: str | None = None
) -> Iterator[dict[str, Any]]:
    """The rows of a results file written by ``simeval run`` (any format), each with ``case``
    (its id, else its input, else None), ``name`` (how to show it), ``eval``, ``score``,
    ``pass``, ``output`` and ``missing_terms`` (a list). A row that is not a result is an
    ``InvalidInput`` naming the file and line."""
    if not os.path.isfile(path):
        raise InvalidInput(f"{path}: no such results file")
    fmt = detect_format(path, fmt)
    cfg = RunConfig(source=path, fmt=fmt, header=input_fields(path, fmt))
    for chunk in read_chunks(path, fmt):
        for where, _ordinal, row in _decode(cfg, chunk):
            if isinstance(row, _BadRowError):
                raise InvalidInput(f"{where}: {row}")
            try:
                case_id = _id_cell(row, columns)
                text_in = _text_cell(row, columns.input, False)
            except _BadRowError as bad:
                raise InvalidInput(f"{where}: {bad}") from None
            if "score" not in row or "pass" not in row:
                raise InvalidInput(f"{where}: not a results file (no 'score' and 'pass' columns)")
            missing: Any = row.get("missing_terms")
            if isinstance(missing, str):
                text = missing
                try:
                    missing = json.loads(text) if text.startswith("[") else text.split()
                except ValueError:
                    missing = text.split()
            yield {
                "case": case_id if case_id is not None else (text_in or None),
                "name": _case_name(case_id, text_in, where),
                "eval": row.get("eval") or None,
                "score": _as_score(row["score"], where),
                "pass": _as_bool(row["pass"], where),
                "output": out if isinstance(out := row.get(columns.output), str) else None,
                "missing_terms": [str(m) for m in missing] if isinstance(missing, list) else [],
            }


STORED_RUN_PREFIX = "run:"


def load_stored_baseline(svc: Any, spec: str, name: str | None = None) -> Baseline:
    """A run stored with ``--store`` as a baseline: ``run:ID``, or ``run:latest`` (the newest
    stored run called ``name``; with none yet, an empty baseline: every case is new)."""
    what = spec[len(STORED_RUN_PREFIX) :].strip()
    if what == "latest":
        run = None
        offset = 0
        while run is None:
            page = svc.list_runs(limit=100, offset=offset)
            run = next(
                (r for r in page if r.name == name and r.summary.get("status") != "storing"),
                None,
            )
            if len(page) < 100:
                break
            offset += 100
        if run is None:
            return Baseline(f"{spec} (no stored run named {name!r} yet)", {}, set(), 0)
    elif what.isdigit():
        run = svc.get_run(int(what))
    else:
        raise InvalidInput(f"--baseline {spec}: give run:ID or run:latest")
    results: list[Any] = []
    page_size = 10_000
    while len(results) < run.results:
        page = svc.list_results(run_id=run.id, limit=page_size, offset=len(results), explain=False)
        if not page:
            break
        results.extend(page)
    results.sort(key=lambda r: r.id)
    cases: dict[bytes, tuple[float, bool, str]] = {}
    fps: set[str] = set()
    dedup = _Dedup()
    for n, r in enumerate(results):
        case = (r.explanation or {}).get("case") or {}
        case_id = case.get("id")
        where = case.get("row") or f"result {r.id}"
        ordinal = case.get("ordinal", n)
        key = dedup(_case_key(case_id, r.input or None, ordinal, r.eval_name))
        cases[key] = (r.score, r.automated_passed, _case_name(case_id, r.input, where))
        if r.fingerprint:
            fps.add(r.fingerprint)
    source = f"stored run {run.id} ({run.name}, {run.created_at:%Y-%m-%d %H:%M})"
    return Baseline(source, cases, fps, len(results))


@dataclass
class Comparison:
    """Per-case changes against a baseline, accumulated as the run streams."""

    baseline: Baseline
    tolerance: float
    keep: int = 10
    counts: Counter[str] = field(default_factory=Counter)
    delta_sum: float = 0.0
    before_sum: float = 0.0
    before_passed: int = 0
    dedup: _Dedup = field(default_factory=_Dedup)
    regressions: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    improvements: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    seq: int = 0

    def add(self, key: bytes, score: float, passed: bool, name: str, missing: list[str]) -> None:
        key = self.dedup(key)
        old = self.baseline.cases.pop(key, None)
        if old is None:
            self.counts["new"] += 1
            return
        before, was_passing, _ = old
        delta = score - before
        self.delta_sum += delta
        self.before_sum += before
        self.before_passed += was_passing
        if (was_passing and not passed) or delta < -self.tolerance:
            status, heap, rank = "regressed", self.regressions, -delta
        elif (passed and not was_passing) or delta > self.tolerance:
            status, heap, rank = "improved", self.improvements, delta
        else:
            self.counts["unchanged"] += 1
            return
        self.counts[status] += 1
        self.seq += 1
        entry = {
            "case": name,
            "before": before,
            "after": score,
            "delta": delta,
            "passed_before": was_passing,
            "passed_after": passed,
            "missing_terms": missing,
        }
        item = (rank, -self.seq, entry)
        if len(heap) < self.keep:
            heapq.heappush(heap, item)
        else:
            heapq.heappushpop(heap, item)

    def report(self, fingerprints: set[str]) -> dict[str, Any]:
        common = sum(self.counts[s] for s in ("improved", "regressed", "unchanged"))
        removed = list(self.baseline.cases.values())
        report: dict[str, Any] = {
            "baseline": self.baseline.source,
            "tolerance": self.tolerance,
            "improved": self.counts["improved"],
            "regressed": self.counts["regressed"],
            "unchanged": self.counts["unchanged"],
            "new": self.counts["new"],
            "removed": len(removed),
            "compared": common,
            "mean_score_before": self.before_sum / common if common else None,
            "mean_score_after": (self.before_sum + self.delta_sum) / common if common else None,
            "mean_delta": self.delta_sum / common if common else None,
            "pass_rate_before": self.before_passed / common if common else None,
            "top_regressions": [e for _, _, e in sorted(self.regressions, reverse=True)],
            "top_improvements": [e for _, _, e in sorted(self.improvements, reverse=True)],
            "removed_cases": [name for _, _, name in removed[: self.keep]],
            "comparable": True,
        }
        if (
            self.baseline.fingerprints
            and fingerprints
            and self.baseline.fingerprints != fingerprints
        ):
            report["comparable"] = False
            report["warning"] = (
                "the baseline was scored with other scorer settings (fingerprints "
                f"{', '.join(sorted(self.baseline.fingerprints))} vs "
                f"{', '.join(sorted(fingerprints))}): score changes may come from the settings"
            )
        return report


# -- a whole run -----------------------------------------------------------------------------
def default_results_path(path: str, fmt: str) -> str:
    """``data.jsonl`` -> ``data.results.jsonl`` beside the input."""
    p = Path(path)
    ext = {"jsonl": ".jsonl", "csv": ".csv", "tsv": ".tsv", "parquet": ".parquet"}[fmt]
    return str(p.with_name(p.stem + ".results" + ext))


@dataclass
class RunOptions:
    """The knobs of ``run_file`` beyond the input itself."""

    columns: Columns = Columns()
    threshold: float = DEFAULT_THRESHOLD
    options: dict[str, Any] = field(default_factory=dict)
    evals: Sequence[EvalDef] = ()
    fmt: str | None = None
    results: str | None = None
    write_results: bool = True
    junit: str | None = None
    baseline: Baseline | None = None
    tolerance: float = 0.05
    on_error: str = "fail"
    workers: int = 1
    dask: str | None = None
    worst: int = 5
    chunk_rows: int = CHUNK_ROWS
    quoting: bool = True
    collect: str | None = None
    # a ``RunStore`` (the rows go to the database while the run is scored), or a function
    # called once the run has succeeded with the rows to store (lists of STORE_COLUMNS tuples)
    # and the summary, returning the stored run's id (see ``store_run``)
    store: RunStore | Callable[[Iterator[list[tuple[Any, ...]]], dict[str, Any]], Any] | None = None


def run_file(
    path: str, opts: RunOptions, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Score every row of a data-set file; return the summary (see the module docstring).

    ``progress(done, total)`` is called after every chunk (bytes, or rows for Parquet).
    Raises ``InvalidInput`` naming the file and line or row for bad input; nothing is written
    then. ``opts.collect`` names a column whose values come back as ``summary["collected"]``
    (``(where, value, score)`` per result; used by calibration).
    """
    started = time.perf_counter()
    fmt = detect_format(path, opts.fmt)
    if opts.on_error not in {"fail", "skip"}:
        raise InvalidOption(f"on_error must be fail or skip, not {opts.on_error!r}")
    if not isinstance(opts.workers, int) or opts.workers < 1:
        raise InvalidInput(f"workers must be a positive integer, not {opts.workers!r}")
    threshold = check_threshold(opts.threshold)
    scorer = None if opts.evals else get_scorer(**opts.options)
    fields = input_fields(path, fmt, opts.quoting)
    cols = opts.columns
    if fmt != "jsonl":
        wanted = [cols.output] + ([] if opts.evals else list(cols.references))
        wanted += [
            c for c, req in ((cols.input, cols.input_required), (cols.id, cols.id_required)) if req
        ]
        wanted += [opts.collect] if opts.collect else []
        unit = "line 1" if fmt != "parquet" else "schema"
        for col in wanted:
            if col not in fields:
                raise InvalidInput(
                    f"{path} {unit}: no column {col!r} (columns: {', '.join(fields) or 'none'})"
                )
    out_fmt = None
    results_path = None
    if opts.write_results:
        results_path = opts.results or default_results_path(path, fmt)
        suffix = Path(results_path).suffix.lower()
        if suffix not in FORMATS:
            raise InvalidInput(
                f"cannot tell the format of the results file {results_path} from its "
                "extension; name it .jsonl, .csv, .tsv or .parquet"
            )
        out_fmt = FORMATS[suffix]
        if Path(results_path).resolve() == Path(path).resolve():
            raise InvalidInput(f"the results file would overwrite the input: {results_path}")
    result_names = set(RESULT_FIELDS + EVAL_FIELDS)
    cfg = RunConfig(
        source=path,
        fmt=fmt,
        out_fmt=out_fmt,
        columns=cols,
        threshold=threshold,
        options=tuple(sorted(opts.options.items())),
        evals=tuple(opts.evals),
        on_error=opts.on_error,
        junit=opts.junit is not None,
        keys=opts.baseline is not None,
        store=opts.store is not None,
        collect=opts.collect,
        worst=opts.worst,
        header=fields if fmt in {"csv", "tsv"} else (),
        quoting=opts.quoting,
        out_fields=tuple(f for f in fields if f not in result_names),
    )
    if out_fmt == "parquet" or fmt == "parquet":
        _parquet_ok()
    total = input_size(path, fmt)
    sink = opts.store if isinstance(opts.store, RunStore) else None
    # rows to store for a ``store`` function wait in a spool file: the database sees them only
    # once the run has succeeded (closed in the finally below); a ``RunStore`` writes them as
    # they come and throws them away if the run fails
    spool = None
    if opts.store is not None and sink is None:
        spool = tempfile.TemporaryFile()  # noqa: SIM115
    writer = None
    junit = None
    try:
        if results_path:
            writer = ResultsWriter(results_path, cfg)
        if opts.junit:
            junit = JUnitWriter(opts.junit, f"simeval run {Path(path).name}")
        keep: Callable[[list[tuple[Any, ...]] | bytes], None] | None = None
        if sink is not None:
            sink.start(_stored_options(scorer, opts, threshold, fmt))
            keep = sink.add
        elif spool is not None:
            dump, dest = pickle.dump, spool

            def keep(rows: list[tuple[Any, ...]] | bytes) -> None:
                if isinstance(rows, bytes):  # pickled by a pool worker: one object
                    dest.write(rows)
                else:
                    dump(rows, dest, pickle.HIGHEST_PROTOCOL)

        summary = _consume(
            cfg,
            read_chunks(path, fmt, opts.chunk_rows, opts.quoting),
            opts,
            writer,
            junit,
            progress,
            total,
            keep,
        )
        if summary["rows"] == 0:
            raise InvalidInput(f"{path}: the file has no rows")
        if summary["results"] == 0 and summary["skipped"]:
            first = summary["skipped_rows"][0]
            raise InvalidInput(
                f"no row could be scored: all {summary['skipped']} rows are bad "
                f"(first: {first['where']}: {first['error']})"
            )
        elapsed = time.perf_counter() - started
        summary.update(
            file=path,
            format=fmt,
            results_file=results_path,
            junit_file=opts.junit,
            elapsed_s=elapsed,
            rows_per_s=summary["rows"] / elapsed if elapsed > 0 else None,
            workers=opts.workers,
            dask=opts.dask,
        )
        if scorer is not None:
            summary["threshold"] = threshold
            summary["fingerprint"] = scorer.fingerprint
            summary["options"] = scorer.describe()
        if sink is not None:
            summary["run_id"] = sink.finish(summary)
        elif spool is not None and opts.store is not None:
            assert not isinstance(opts.store, RunStore)
            summary["run_id"] = opts.store(_spooled(spool), summary)
        if writer:
            writer.commit()
        if junit:
            junit.commit(
                summary["results"] + summary["skipped"],
                summary["failed"],
                summary["skipped"],
                elapsed,
            )
    except BaseException:
        if writer:
            writer.discard()
        if junit:
            junit.discard()
        if sink is not None:
            sink.abort()
        raise
    finally:
        if spool is not None:
            spool.close()
    return summary


def _parquet_ok() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InvalidInput("Parquet needs pyarrow: pip install 'simeval[parquet]'") from None


def _consume(
    cfg: RunConfig,
    chunks: Iterator[Chunk],
    opts: RunOptions,
    writer: ResultsWriter | None,
    junit: JUnitWriter | None,
    progress: Callable[[int, int], None] | None,
    total: int,
    keep: Callable[[list[tuple[Any, ...]] | bytes], None] | None = None,
) -> dict[str, Any]:
    rows = results = passed = unmatched = 0
    score_sum = 0.0
    errors: list[tuple[str, str]] = []
    n_errors = 0
    worst: list[tuple[float, int, dict[str, Any]]] = []
    missing: Counter[str] = Counter()
    per_eval: dict[str, list[float]] = {e.name: [0, 0, 0.0] for e in cfg.evals}
    fingerprints: set[str] = set()
    collected: list[tuple[str, Any, float]] = []
    comparison = Comparison(opts.baseline, opts.tolerance) if opts.baseline is not None else None
    seq = 0
    try:
        for out in map_chunks(cfg, chunks, opts.workers, opts.dask):
            rows += out.rows
            results += out.results
            passed += out.passed
            score_sum += out.score_sum
            unmatched += out.unmatched
            n_errors += len(out.errors)
            errors.extend(out.errors[: max(0, 100 - len(errors))])
            missing.update(out.missing)
            for name, (n, p, s) in out.per_eval.items():
                acc = per_eval[name]
                acc[0] += n
                acc[1] += p
                acc[2] += s
            for info in out.worst:
                item = (-info["score"], -seq, info)
                seq += 1
                if len(worst) < cfg.worst:
                    heapq.heappush(worst, item)
                elif item > worst[0]:
                    heapq.heapreplace(worst, item)
            if comparison is not None:
                for key, score, ok, name, miss in out.cases:
                    comparison.add(key, score, ok, name, miss)
            if keep is not None and (out.store_rows or out.store_blob):
                keep(out.store_blob or out.store_rows)
            if out.collected:
                collected.extend(out.collected)
            if writer:
                writer.write(out)
            if junit:
                junit.write(out)
            if progress:
                progress(out.nbytes, total)
    except RowError as exc:
        raise InvalidInput(str(exc)) from None
    if cfg.evals:
        fingerprints = {get_scorer(**dict(e.options)).fingerprint for e in cfg.evals}
    else:
        fingerprints = {get_scorer(**dict(cfg.options)).fingerprint}
    summary: dict[str, Any] = {
        "rows": rows,
        "results": results,
        "passed": passed,
        "failed": results - passed,
        "skipped": n_errors,
        "skipped_rows": [{"where": w, "error": e} for w, e in errors],
        "pass_rate": passed / results if results else None,
        "mean_score": score_sum / results if results else None,
        "worst": [info for _, _, info in sorted(worst, reverse=True)],
        "most_missing": missing.most_common(10),
        "fingerprints": sorted(fingerprints),
    }
    if cfg.evals:
        summary["unmatched_rows"] = unmatched
        summary["evals"] = {
            e.name: {
                "results": int(per_eval[e.name][0]),
                "passed": int(per_eval[e.name][1]),
                "pass_rate": per_eval[e.name][1] / per_eval[e.name][0]
                if per_eval[e.name][0]
                else None,
                "mean_score": per_eval[e.name][2] / per_eval[e.name][0]
                if per_eval[e.name][0]
                else None,
                "threshold": e.threshold,
                "version": e.version,
            }
            for e in cfg.evals
        }
    if comparison is not None:
        summary["baseline"] = comparison.report(fingerprints)
    if cfg.collect is not None:
        summary["collected"] = collected
    return summary


def _spooled(spool: IO[bytes]) -> Iterator[list[tuple[Any, ...]]]:
    """The spooled rows to store, a chunk's rows at a time."""
    spool.seek(0)
    while True:
        try:
            yield pickle.load(spool)
        except EOFError:
            return


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _stored_options(
    scorer: Scorer | None, opts: RunOptions, threshold: float, fmt: str
) -> dict[str, Any]:
    """A stored run's ``options``: what the summary says of its scorer, and the scorer options
    themselves (``scorer``, or ``evals`` by eval name), from which an explanation of one of
    its rows is computed when the row is shown."""
    out: dict[str, Any] = {
        "threshold": threshold if scorer is not None else None,
        "fingerprint": scorer.fingerprint if scorer is not None else None,
        "options": scorer.describe() if scorer is not None else None,
        "workers": opts.workers,
        "format": fmt,
    }
    if scorer is not None:
        out["scorer"] = dict(opts.options)
    else:
        out["evals"] = {e.name: dict(e.options) for e in opts.evals}
    return dict(_json_safe(out))


_STORE_QUEUE = 32  # chunks of rows waiting for the writer thread (memory stays bounded)
_STORE_ROWS_PER_TRANSACTION = 10_000


class RunStore:
    """``RunOptions.store`` that writes a run to ``svc``'s database while it is scored.

    ``run_file`` calls ``start`` (the run is recorded, its summary saying ``storing``: no
    baseline yet), ``add`` with each chunk's rows (``STORE_COLUMNS`` tuples; a writer thread
    inserts them through ``Service.add_run_rows`` while the next chunks are scored), then
    ``finish`` with the summary (returns the run's id) or, if the run fails, ``abort`` (the
    run and the rows written so far are deleted). ``prepare(summary)``, if given, returns the
    summary to store.

    ``simeval run --store`` uses ``RunStoreProcess`` instead: a writer process of its own.
    """

    def __init__(
        self,
        svc: Any,
        name: str,
        source: str,
        prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ):
        self.svc, self.name, self.source, self.prepare = svc, name, source, prepare
        self.run_id: int | None = None
        self.error: BaseException | None = None
        self.queue: Any = None
        self.thread: Any = None

    def start(self, options: dict[str, Any]) -> None:
        import queue
        import threading

        self.run_id = self.svc.create_run(
            self.name, self.source, options=options, summary={"status": "storing"}
        )
        self.queue = queue.Queue(_STORE_QUEUE)
        self.thread = threading.Thread(target=self._write, name="simeval-run-store", daemon=True)
        self.thread.start()

    def _write(self) -> None:
        get = self.queue.get
        try:
            self.svc.add_run_rows(
                self.run_id, STORE_COLUMNS, unpickled(iter(get, None)), _STORE_ROWS_PER_TRANSACTION
            )
        except BaseException as exc:  # handed to the run's thread by add or finish
            self.error = exc
            while get() is not None:  # let the run go on to its end, where it fails
                pass

    def _check(self) -> None:
        if self.error is not None:
            raise self.error

    def add(self, rows: list[tuple[Any, ...]] | bytes) -> None:
        """Store a chunk's rows (a list, or the list pickled by a pool worker)."""
        self._check()
        self.queue.put(rows)

    def _stop(self) -> None:
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join()
            self.thread = None

    def finish(self, summary: dict[str, Any]) -> int:
        self._stop()
        self._check()
        assert self.run_id is not None
        stored = self.prepare(summary) if self.prepare is not None else summary
        self.svc.set_run_summary(
            self.run_id, {**stored, "status": "complete", "run_id": self.run_id}
        )
        return self.run_id

    def abort(self) -> None:
        self._stop()
        if self.run_id is not None:
            with contextlib.suppress(Exception):  # the run's own error is the one to report
                self.svc.discard_run(self.run_id)
            self.run_id = None


class RunStoreProcess(RunStore):
    """A ``RunStore`` whose database writer is a process of its own (``simeval.runwriter``,
    see there): the run's process only passes each chunk's rows on (as the pool worker
    pickled them), so storing takes nothing of its interpreter (the database layer is
    imported, and the rows unpickled and inserted, in the writer). ``simeval run --store``
    uses it; ``db`` is what ``Service`` takes.

    The writer creates the run (its process recorded as the storing one), adds the rows as
    they come, and on ``finish`` stores the summary and answers the run's id; on ``abort``,
    or an error of its own, it deletes the run. If the run's process dies, the writer sees the
    end of its input and stops: the run shows as interrupted.
    """

    def __init__(
        self,
        db: str | None,
        name: str,
        source: str,
        prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ):
        super().__init__(None, name, source, prepare)
        self.db = db
        self.proc: Any = None
        # the writer's one answer, read by a thread of this process
        self.answered: Any = None
        self.answer: tuple[str, Any] = ("error", RuntimeError("no answer"))

    def start(self, options: dict[str, Any]) -> None:
        import queue
        import subprocess
        import threading

        # the writer finds its modules where this process found them (as multiprocessing
        # passes its path on), and nothing of the current directory's (-P): a json.py there
        # must not replace the standard library's in the writer
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "simeval.runwriter"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        send_frame(
            self.proc.stdin,
            ("start", self.db, self.name, self.source, options, STORE_COLUMNS,
             _STORE_ROWS_PER_TRANSACTION),
        )  # fmt: skip
        self.answered = threading.Event()
        threading.Thread(target=self._read, name="simeval-run-answer", daemon=True).start()
        self.queue = queue.Queue(_STORE_QUEUE)
        # the writer reads nothing while it imports and opens the database: a thread of
        # this process waits on the pipe meanwhile, not the run
        self.thread = threading.Thread(target=self._send, name="simeval-run-send", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            answer = read_frame(self.proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            answer = ("error", RuntimeError("the run's database writer stopped"))
        self.answer = answer
        self.answered.set()

    def _send(self) -> None:
        get = self.queue.get
        try:
            for rows in iter(get, None):
                send_frame(self.proc.stdin, ("rows", rows))
        except OSError:  # the writer stopped: its answer says why (_check)
            while get() is not None:
                pass

    def _answer(self, timeout: float | None) -> tuple[str, Any] | None:
        if not self.answered.wait(timeout):
            return None
        answer = self.answer
        if answer[0] == "error" and self.error is None:
            self.error = answer[1]
        return answer

    def _check(self) -> None:
        if self.error is None and self.answered is not None and self.answered.is_set():
            self._answer(0)
        if self.error is not None:
            raise self.error

    def _tell(self, message: tuple[str, Any]) -> None:
        with contextlib.suppress(OSError, ValueError):  # the writer stopped: its answer says why
            send_frame(self.proc.stdin, message)
            self.proc.stdin.close()

    def finish(self, summary: dict[str, Any]) -> int:
        self._stop()
        self._check()
        stored = self.prepare(summary) if self.prepare is not None else summary
        self._tell(("finish", stored))
        answer = self._answer(None)
        self.proc.wait()
        if answer is None or answer[0] != "done":
            self._check()
            raise RuntimeError("the run's database writer stopped")
        self.run_id = int(answer[1])
        return self.run_id

    def abort(self) -> None:
        if self.proc is None:
            return
        self._stop()
        self._tell(("abort", None))
        self._answer(60)
        try:
            self.proc.wait(10)
        except Exception:  # still busy after its answer: it has nothing left to keep
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def store_run(
    svc: Any,
    name: str,
    source: str,
    rows: Iterable[Sequence[tuple[Any, ...]]],
    summary: dict[str, Any],
    scorer_options: dict[str, Any] | None = None,
    evals: Sequence[EvalDef] = (),
) -> int:
    """Store a finished run in ``svc``'s database; returns its id.

    ``rows`` are batches of ``STORE_COLUMNS`` tuples (as ``run_file`` hands them to
    ``RunOptions.store``). The run is written first, marked unfinished, then its rows in bulk,
    then its summary: a run whose summary still says ``storing`` was interrupted and is no
    baseline. ``scorer_options`` (a plain run's) or ``evals`` (an eval-file run's) are kept
    with the run: a row's explanation is computed from them when it is shown (without them,
    from the summary's ``options``).
    """
    keep = ("threshold", "fingerprint", "options", "workers", "format")
    options = {k: summary.get(k) for k in keep}
    if evals:
        options["evals"] = {e.name: dict(e.options) for e in evals}
    else:
        options["scorer"] = scorer_options if scorer_options is not None else summary.get("options")
    run_id: int = svc.create_run(
        name,
        source,
        options=_json_safe(options),
        summary={"status": "storing"},
    )
    add_rows = getattr(svc, "add_run_rows", None)
    if add_rows is not None:
        add_rows(run_id, STORE_COLUMNS, rows)
    else:
        svc.add_run_results(
            run_id,
            (
                {
                    **dict(zip(STORE_COLUMNS[:-1], r[:-1], strict=True)),
                    "matched_reference": r[9],
                    "explanation": None if r[10] is None else json.loads(r[10]),
                }
                for batch in rows
                for r in batch
            ),
        )
    svc.update_run_summary(run_id, {**summary, "status": "complete", "run_id": run_id})
    return run_id


def check_gates(
    summary: dict[str, Any],
    min_pass_rate: float | None = None,
    min_mean_score: float | None = None,
    max_regressions: int | None = None,
) -> list[dict[str, Any]]:
    """Each requested gate with its limit, the measured value and whether it held."""
    gates = []
    if min_pass_rate is not None:
        value = summary["pass_rate"] or 0.0
        gates.append(
            {
                "gate": "min-pass-rate",
                "limit": min_pass_rate,
                "value": value,
                "passed": value >= min_pass_rate,
            }
        )
    if min_mean_score is not None:
        value = summary["mean_score"] or 0.0
        gates.append(
            {
                "gate": "min-mean-score",
                "limit": min_mean_score,
                "value": value,
                "passed": value >= min_mean_score,
            }
        )
    if max_regressions is not None:
        if "baseline" not in summary:
            raise InvalidOption("--max-regressions needs --baseline")
        value = summary["baseline"]["regressed"]
        gates.append(
            {
                "gate": "max-regressions",
                "limit": max_regressions,
                "value": value,
                "passed": value <= max_regressions,
            }
        )
    return gates
