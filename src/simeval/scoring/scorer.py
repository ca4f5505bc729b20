"""The similarity score: TF-IDF cosine between an output and one or more reference answers.

Formula. Both texts are analysed into terms (``simeval.scoring.analyzer``). A term ``t`` that occurs
``c`` times in a text gets the weight ``w(t) = tf(c) * idf(t)`` with ``tf(c) = 1 + ln(c)``
(sublinear, the default) or ``tf(c) = c``; ``idf`` comes from the chosen source
(``simeval.scoring.idf``). The score is the cosine of the two weight vectors::

    score(a, b) = sum_t w_a(t) w_b(t) / (|w_a| |w_b|)          in [0, 1]

It is symmetric, 1.0 for texts identical after normalisation (NFKC, case folding, whitespace),
0.0 when no term is shared and 0.0 for an empty output. With several references the score is
the best match. Sums run in a fixed order (by a hash of the term text), so the same inputs and
options give the same float on every machine and in every process.

Two adjustments (see ``Scorer.best_vector`` for the exact arithmetic):

- the input (the question): a term the input contains gets ``input_weight`` times its weight
  in both vectors, as repeating the question says little about the answer;
- negation: when exactly one of the two texts contains a negator ("not", "never", "n't", ...),
  the cosine is multiplied by ``negation``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from simeval.errors import InvalidInput, InvalidOption, InvalidType
from simeval.scoring import _vector
from simeval.scoring import options as _options
from simeval.scoring.analyzer import char_info, normalize
from simeval.scoring.idf import BackgroundIdf, IdfTable, PairIdf
from simeval.scoring.options import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from simeval.scoring.options import DEFAULTS as DEFAULTS
from simeval.scoring.options import OPTION_HELP as OPTION_HELP
from simeval.scoring.options import PREVIOUS_DEFAULTS as PREVIOUS_DEFAULTS
from simeval.scoring.options import analyzer_from_options as analyzer_from_options
from simeval.scoring.options import check_threshold as check_threshold

ALGORITHM_VERSION = 1
_TABLE_LIMIT = 1_000_000  # cached tokens per scorer before the cache starts over (~100 MB)


def resolve_options(options: dict[str, Any]) -> dict[str, Any]:
    """Validate scorer options and fill in defaults, loading an ``idf`` table file; the
    canonical form of a configuration (``simeval.scoring.options.resolve_options``).

    Raises ``InvalidOption`` naming the unknown option or the bad value.
    """
    return _options.resolve_options(options, _idf_source)


def _idf_source(idf: Any) -> Any:
    if isinstance(idf, os.PathLike):
        idf = os.fspath(idf)
    if not isinstance(idf, str | IdfTable):
        raise InvalidOption(f"option 'idf' must be background, pair or a table file, not {idf!r}")
    if isinstance(idf, str) and idf not in {"background", "pair"}:
        idf = IdfTable.load(idf) if idf.strip() else None
        if idf is None:
            raise InvalidOption("option 'idf' is empty")
    return idf


def check_text(value: Any, what: str) -> str:
    """``value`` if it is a string, else ``InvalidType`` naming ``what``."""
    if not isinstance(value, str):
        raise InvalidType(f"{what} must be a string, not {type(value).__name__}")
    return value


def check_references(reference: Any) -> list[str]:
    """One reference or a list of them, each a non-empty string."""
    refs = [reference] if isinstance(reference, str) else reference
    if not isinstance(refs, list | tuple) or isinstance(reference, bytes):
        raise InvalidType(
            f"reference must be a string or a list of strings, not {type(reference).__name__}"
        )
    if not refs:
        raise InvalidInput("at least one reference answer is required")
    for i, ref in enumerate(refs):
        label = "reference answer" if len(refs) == 1 else f"reference answer {i + 1}"
        check_text(ref, label)
        if not ref.strip():
            raise InvalidInput(f"{label} is empty")
    return list(refs)


def _term_hash(term: str) -> int:
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


@dataclass(frozen=True)
class Term:
    """One term of an explanation: its surface word(s), its share of the score or weight, and
    whether the input (the question) contains it, so it counted at ``input_weight``."""

    term: str
    weight: float
    demoted: bool = False


@dataclass
class Explanation:
    """Why a score is what it is.

    ``shared``: the terms both texts have, with their contribution to the score (they sum to
    the score). ``missing``: reference terms the output lacks, by their weight in the reference
    (the fraction of the reference's squared norm they carry). ``extra``: output terms the
    reference lacks, by their weight in the output. Terms the input contains are marked
    ``demoted`` and listed in ``demoted`` (their weight was multiplied by ``input_weight``).
    ``negation``: the factor applied because only one text has a negator (1.0 when not).
    """

    score: float
    matched_reference: int
    reference: str
    shared: list[Term] = field(default_factory=list)
    missing: list[Term] = field(default_factory=list)
    extra: list[Term] = field(default_factory=list)
    reason: str | None = None
    fingerprint: str = ""
    demoted: list[str] = field(default_factory=list)
    negation: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        lines = [f"score {self.score:.4f} (reference {self.matched_reference + 1})"]
        if self.reason:
            lines.append(f"reason: {self.reason}")
        for title, terms in (
            ("matched", self.shared),
            ("missing from output", self.missing),
            ("not in reference", self.extra),
        ):
            if terms:
                lines.append(
                    f"{title}: "
                    + ", ".join(
                        f"{t.term} ({t.weight:.3f}{', in the input' if t.demoted else ''})"
                        for t in terms
                    )
                )
        if self.demoted:
            lines.append("in the input (lower weight): " + ", ".join(self.demoted))
        if self.negation != 1.0:
            lines.append(f"negation: only one text negates, score x {self.negation:g}")
        return "\n".join(lines)


class Scorer:
    """A configured scorer: options validated once, token cache kept warm.

    >>> s = Scorer()
    >>> round(s.score("Paris is the capital of France.", "The capital of France is Paris."), 3)
    1.0

    One output against many prepared references (what a capture does with every active eval)::

        refs = scorer.prepare(["reference one", "reference two"])   # once per eval
        vec = scorer.vector(output)                                 # once per output
        terms = scorer.input_terms(question)                        # once per output
        score, index = scorer.best_vector(vec, refs, terms)

    gives exactly ``scorer.score_detail(output, references, input=question)``.
    """

    def __init__(self, **options: Any):
        self.options = resolve_options(options)
        o = self.options
        self.analyzer = analyzer_from_options({k: v for k, v in o.items() if k != "idf"})
        self.pair = o["idf"] == "pair"
        self.sublinear = o["sublinear_tf"]
        self.input_weight: float = o["input_weight"]
        self.negation: float = o["negation"]
        if isinstance(o["idf"], IdfTable):
            if o["idf"].analyzer != self.analyzer.config():
                raise InvalidOption(
                    "the IDF table was fitted with different analyzer options "
                    f"({o['idf'].analyzer}) than these ({self.analyzer.config()})"
                )
            self.idf: BackgroundIdf | PairIdf | IdfTable = o["idf"]
        elif self.pair:
            self.idf = PairIdf()
        else:
            self.idf = BackgroundIdf(self.analyzer)
        self._table: dict[str, bytes | None] = {}
        self._term_table: dict[str, bytes | None] = {}
        # The C core normalises, tokenises and caches token entries itself; n-grams take the
        # Python path.
        self._vz = (
            _vector.Vectorizer(
                self._entry,
                char_info,
                _fold,
                _TABLE_LIMIT,
                self.analyzer.tokenizer == "unicode",
            )
            if _vector.ACCELERATED and self.analyzer.ngram == 1
            else None
        )
        terms = (self.analyzer.term(t) for t in self.analyzer.negators)
        self.negator_hashes: bytes = _vector.pack_hashes(
            _term_hash(t) for t in terms if t is not None
        )
        # what the cosine is given: nothing when the option is off
        self._negators = self.negator_hashes if self.negation != 1.0 else b""
        self.fingerprint = self._fingerprint()

    def _fingerprint(self) -> str:
        ident: dict[str, Any] = {
            "scorer": "tfidf-cosine",
            "algorithm": ALGORITHM_VERSION,
            "analyzer": self.analyzer.config(),
            "sublinear_tf": self.sublinear,
            **self.idf.identity(),
        }
        # Left out when off, so results scored before these options existed (which is what
        # they give when off) keep their fingerprint.
        if self.input_weight != 1.0:
            ident["input_weight"] = self.input_weight
        if self.negation != 1.0:
            ident["negation"] = self.negation
            ident["negators"] = self.negator_hashes.hex()
        blob = json.dumps(ident, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def describe(self) -> dict[str, Any]:
        """The options in a JSON-friendly form (a corpus table by its version)."""
        out = dict(self.options)
        if isinstance(out["idf"], IdfTable):
            out["idf"] = f"corpus:{out['idf'].version}"
        out["stemming"] = bool(self.analyzer.config()["stemming"])
        return out

    # -- the hot path ---------------------------------------------------------------------
    def _entry(self, token: str) -> bytes | None:
        term = self.analyzer.term(token)
        return None if term is None else _vector.entry(_term_hash(term), self.idf.idf(term))

    def _miss(self, token: str) -> bytes | None:
        if len(self._table) > _TABLE_LIMIT:
            self._table.clear()
        entry = self._table[token] = self._entry(token)
        return entry

    def _term_miss(self, term: str) -> bytes:
        if len(self._term_table) > _TABLE_LIMIT:
            self._term_table.clear()
        entry = _vector.entry(_term_hash(term), self.idf.idf(term))
        self._term_table[term] = entry
        return entry

    def vector(self, text: str) -> bytes:
        """The packed term vector of a text (see ``_vector``): records of (uint64 term
        hash, float64 tf weight, float64 idf) in native byte order, sorted by hash."""
        if self._vz is not None:
            return self._vz.vector(text, self.sublinear)
        if self.analyzer.ngram == 1:
            tokens = self.analyzer.tokens(text)
            return _vector.vectorize(tokens, self._table, self._miss, self.sublinear)
        terms = self.analyzer.terms(text)
        return _vector.vectorize(terms, self._term_table, self._term_miss, self.sublinear)

    def input_terms(self, input: str | None) -> bytes:
        """The terms of an input (the question) as a hash set for ``best_vector``: the sorted
        uint64 hashes of the terms of ``vector(input)``, packed in native byte order. Empty
        for no input, a blank one, or when ``input_weight`` is 1 (the input changes nothing)."""
        if input is None or self.input_weight == 1.0:
            return b""
        check_text(input, "input")
        return _vector.hashes(self.vector(input)) if input.strip() else b""

    def has_negator(self, vec: bytes) -> bool:
        """Whether a packed vector has a negator term (a hash in ``negator_hashes``)."""
        return bool(_vector.has_any(vec, self.negator_hashes))

    def prepare(self, reference: str | Sequence[str]) -> list[bytes]:
        """Vectors of reference answers, to score many outputs against them with ``best``."""
        return [self.vector(r) for r in check_references(reference)]

    def _cos(self, a: bytes, b: bytes, terms: bytes) -> float:
        return _vector.cosine(
            a, b, self.pair, terms, self.input_weight, self._negators, self.negation
        )

    def best(
        self,
        output: str,
        prepared: Sequence[bytes],
        input: str | None = None,
    ) -> tuple[float, int]:
        """Best score of an output against prepared references, and the index that matched."""
        check_text(output, "output")
        if not output.strip():
            return 0.0, 0
        return self.best_vector(self.vector(output), prepared, self.input_terms(input))

    def best_vector(
        self, vec: bytes, prepared: Sequence[bytes], input_terms: bytes | None = None
    ) -> tuple[float, int]:
        """``best`` for an output already vectorised: one output against many evals.

        ``input_terms``: ``input_terms(question)`` (None or b"" = no input). The score of the
        output vector ``a`` against a reference vector ``b``, exactly (an engine that wants
        the same floats must do the same operations in the same order):

        1. ``a`` or ``b`` empty: 0.0. ``a == b`` (the same bytes): 1.0.
        2. Walk the records (hash, tfw, idf) of both vectors merged in increasing hash order.
           A record's weight is ``w = tfw * idf`` (``idf`` option ``pair``: ``idf`` is
           ``PAIR_IDF_TWO`` for a hash in both vectors, ``PAIR_IDF_ONE`` otherwise); then, if
           ``input_weight != 1`` and the hash is in ``input_terms``, ``w = w * input_weight``
           (one rounding, on both sides). In that order ``sa += wa * wa`` for every record of
           ``a``, ``sb += wb * wb`` for every record of ``b`` and ``dot += wa * wb`` for every
           shared hash (each is a sum over its own vector's records in hash order, so ``sb``
           can be kept per reference and input).
        3. ``sa <= 0`` or ``sb <= 0``: 0.0; else ``s = dot / (sqrt(sa) * sqrt(sb))`` clamped
           to [0, 1].
        4. If ``negation != 1``, ``s > 0`` and exactly one of ``a`` and ``b`` has a hash in
           ``negator_hashes`` (``has_negator``): ``s = s * negation``.

        The best is the first index with the highest score (0.0 and -1 for no references).
        """
        if not vec:
            return 0.0, 0
        return _vector.best(
            vec,
            prepared,
            self.pair,
            input_terms or b"",
            self.input_weight,
            self._negators,
            self.negation,
        )

    def score_detail(
        self,
        output: str,
        reference: str | Sequence[str],
        input: str | None = None,
    ) -> tuple[float, int]:
        """The score and the index of the best-matching reference answer; ``input``: the
        question (its terms count at ``input_weight``)."""
        check_text(output, "output")
        refs = check_references(reference)
        if not output.strip():
            return 0.0, 0
        vec = self.vector(output)
        terms = self.input_terms(input)
        top, at = -1.0, 0
        for i, ref in enumerate(refs):
            rvec = self.vector(ref)
            s = self._cos(vec, rvec, terms)
            if not (vec and rvec) and _same_text(output, ref):
                s = 1.0  # identical texts without scorable terms (e.g. only stop words)
            if s > top:
                top, at = s, i
        return top, at

    def score(
        self,
        output: str,
        reference: str | Sequence[str],
        input: str | None = None,
    ) -> float:
        """The similarity of ``output`` to ``reference`` (or the best of several), in [0, 1];
        ``input``: the question the output answers (its terms count at ``input_weight``)."""
        check_text(output, "output")
        if type(reference) is str and reference.strip() and output.strip():
            va, vb = self.vector(output), self.vector(reference)
            s = self._cos(va, vb, self.input_terms(input) if input is not None else b"")
            if not (va and vb) and _same_text(output, reference):
                s = 1.0  # identical texts without scorable terms (e.g. only stop words)
            return s
        return self.score_detail(output, reference, input)[0]

    # -- explanations ---------------------------------------------------------------------
    def _weights(self, text: str) -> tuple[dict[str, float], dict[str, str]]:
        """Term weights before the pair IDF (tf x idf) and the first surface word per term."""
        counts: dict[str, int] = {}
        surface: dict[str, str] = {}
        words = self.analyzer.tokens(text)
        kept: list[tuple[str, str]] = []
        for w in words:
            t = self.analyzer.term(w)
            if t is not None:
                kept.append((w, t))
        for w, t in kept:
            counts[t] = counts.get(t, 0) + 1
            surface.setdefault(t, w)
        for n in range(2, self.analyzer.ngram + 1):
            for i in range(len(kept) - n + 1):
                t = " ".join(x[1] for x in kept[i : i + n])
                counts[t] = counts.get(t, 0) + 1
                surface.setdefault(t, " ".join(x[0] for x in kept[i : i + n]))
        tf = (lambda c: 1.0 + math.log(c)) if self.sublinear else float
        return {t: tf(c) * self.idf.idf(t) for t, c in counts.items()}, surface

    def explain(
        self,
        output: str,
        reference: str | Sequence[str],
        top: int = 10,
        input: str | None = None,
    ) -> Explanation:
        """The score with the terms behind it (see ``Explanation``)."""
        score, at = self.score_detail(output, reference, input)
        refs = check_references(reference)
        ref = refs[at]
        exp = Explanation(score, at, ref, fingerprint=self.fingerprint)
        asked: set[str] = set()
        if self.input_terms(input):
            asked = set(self.analyzer.terms(input or ""))
        wr, sr = self._weights(ref)
        if not output.strip():
            exp.reason = "output is empty"
            exp.missing = _top({t: w * w for t, w in wr.items()}, top, sr, asked)
            return exp
        wo, so = self._weights(output)
        if self.pair:
            for w in (wo, wr):
                for t in w:
                    w[t] *= PairIdf_for(t in wo and t in wr)
        for w in (wo, wr):
            for t in w:
                if t in asked:
                    w[t] *= self.input_weight
        no = math.sqrt(sum(w * w for w in wo.values())) or 1.0
        nr = math.sqrt(sum(w * w for w in wr.values())) or 1.0
        vo, vr = self.vector(output), self.vector(ref)
        negates = self._negators and vo and vr and vo != vr and score > 0.0
        if negates and self.has_negator(vo) != self.has_negator(vr):
            exp.negation = self.negation
        shared = {t: exp.negation * wo[t] * wr[t] / (no * nr) for t in wo if t in wr}
        exp.shared = _top(shared, top, so, asked)
        exp.missing = _top({t: (w / nr) ** 2 for t, w in wr.items() if t not in wo}, top, sr, asked)
        exp.extra = _top({t: (w / no) ** 2 for t, w in wo.items() if t not in wr}, top, so, asked)
        exp.demoted = sorted({so[t] for t in wo if t in asked} | {sr[t] for t in wr if t in asked})
        if not wo:
            exp.reason = "output has no scorable terms"
        elif not shared and score < 1.0:
            exp.reason = "output and reference share no terms"
        elif exp.negation != 1.0:
            side = "output" if self.has_negator(vo) else "reference"
            exp.reason = f"only the {side} has a negator: score x {self.negation:g}"
        return exp


def PairIdf_for(both: bool) -> float:  # noqa: N802 - mirrors the constants' names
    return _vector.PAIR_IDF_TWO if both else _vector.PAIR_IDF_ONE


def _top(weights: dict[str, float], n: int, surface: dict[str, str], asked: set[str]) -> list[Term]:
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], surface[kv[0]]))[:n]
    return [Term(surface[t], round(w, 6), t in asked) for t, w in ranked]


@functools.lru_cache(maxsize=4096)
def _fold(piece: str) -> str:
    """``normalize`` of a piece of text, for the C core (cached: the same pieces recur)."""
    return normalize(piece)


def _same_text(a: str, b: str) -> bool:
    return " ".join(normalize(a).split()) == " ".join(normalize(b).split())


def _options_key(options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    out = []
    for k, v in sorted(options.items()):
        if isinstance(v, list):
            v = tuple(v)
        elif isinstance(v, os.PathLike):
            v = os.fspath(v)
        out.append((k, v))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _cached_scorer(key: tuple[tuple[str, Any], ...]) -> Scorer:
    return Scorer(**dict(key))


def get_scorer(**options: Any) -> Scorer:
    """The shared scorer for these options (built once per process)."""
    try:
        key = _options_key(options)
        hash(key)
    except TypeError:
        raise InvalidOption(f"scorer options must be plain values, not {options!r}") from None
    if any(isinstance(v, str) and k == "idf" and v not in {"background", "pair"} for k, v in key):
        # a table file may change on disk: resolve it (cached by mtime) before the lookup
        resolved = resolve_options(dict(key))
        key = _options_key(resolved)
    return _cached_scorer(key)


def score(
    output: str,
    reference: str | Sequence[str],
    input: str | None = None,
    **options: Any,
) -> float:
    """Similarity of ``output`` to ``reference`` in [0, 1] (the best of several references).
    ``input``: the question the output answers; the terms it contains count at
    ``input_weight`` (default 0.5) in both texts, so repeating the question earns less.

    >>> score("The capital of France is Paris.", "Paris is France's capital.") > 0.8
    True
    >>> q = "What is the capital of France?"
    >>> score("The capital of France is Lyon.", "Paris is the capital.", input=q) < score(
    ...     "The capital of France is Lyon.", "Paris is the capital.")
    True
    """
    return get_scorer(**options).score(output, reference, input)


def explain(
    output: str,
    reference: str | Sequence[str],
    input: str | None = None,
    *,
    top: int = 10,
    **options: Any,
) -> Explanation:
    """The score with the shared, missing and extra terms behind it (terms the ``input``
    contains are marked as demoted).

    >>> explain("Paris", "Paris is the capital of France").missing[0].term
    'capital'
    """
    return get_scorer(**options).explain(output, reference, top=top, input=input)


def fingerprint(**options: Any) -> str:
    """The short hash of everything that determines a score under these options."""
    return get_scorer(**options).fingerprint


# -- batches ---------------------------------------------------------------------------------
_WORKER: Scorer | None = None


def _worker_init(options: dict[str, Any]) -> None:
    global _WORKER
    _WORKER = get_scorer(**options)


Row = tuple[str, Any, str | None]  # output, reference(s), input


def _worker_chunk(chunk: list[Row]) -> list[float]:
    assert _WORKER is not None
    s = _WORKER.score
    return [s(o, r, q) for o, r, q in chunk]


def _chunks(pairs: Iterable[Row], size: int) -> Iterator[list[Row]]:
    it = iter(pairs)
    while chunk := list(islice(it, size)):
        yield chunk


def iter_scores(
    outputs: Iterable[str],
    references: Iterable[str | Sequence[str]],
    inputs: Iterable[str | None] | None = None,
    *,
    workers: int | None = None,
    chunk_size: int = 2000,
    **options: Any,
) -> Iterator[float]:
    """Scores of ``zip(outputs, references[, inputs])``, streamed in order; memory stays flat.

    ``inputs``: the question of each row (None for a row without one). ``workers`` processes
    share the work (default: all cores; 1 = in this process). Inputs are read lazily,
    ``chunk_size`` pairs at a time, and at most two chunks per worker are in flight. The
    numbers are exactly those of ``score``.
    """
    scorer = get_scorer(**options)
    pairs = _strict_zip(outputs, references, inputs)
    n = (os.cpu_count() or 1) if workers is None else workers
    if not isinstance(n, int) or n < 1:
        raise InvalidInput(f"workers must be a positive integer, not {workers!r}")
    if n == 1:
        for o, r, q in pairs:
            yield scorer.score(o, r, q)
        return
    yield from _parallel(pairs, scorer, n, chunk_size)


def _parallel(
    pairs: Iterator[Row], scorer: Scorer, workers: int, chunk_size: int
) -> Iterator[float]:
    import multiprocessing as mp
    from collections import deque

    chunks = _chunks(pairs, chunk_size)
    first = next(chunks, None)
    if first is None:
        return
    second = next(chunks, None)
    if second is None:  # too small to be worth a process pool
        yield from (scorer.score(o, r, q) for o, r, q in first)
        return
    opts = dict(scorer.options)
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    with ctx.Pool(workers, initializer=_worker_init, initargs=(opts,)) as pool:
        pending: deque[Any] = deque()
        for chunk in _prepend([first, second], chunks):
            pending.append(pool.apply_async(_worker_chunk, (chunk,)))
            while len(pending) >= 2 * workers:
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()


def _prepend(head: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from head
    yield from rest


def _strict_zip(
    outputs: Iterable[str], references: Iterable[Any], inputs: Iterable[str | None] | None
) -> Iterator[Row]:
    if isinstance(outputs, str) or isinstance(references, str) or isinstance(inputs, str):
        raise InvalidType(
            "score_many takes sequences of outputs, references and inputs, not a string"
        )
    try:
        if inputs is None:
            for o, r in zip(outputs, references, strict=True):
                yield o, r, None
        else:
            yield from zip(outputs, references, inputs, strict=True)
    except ValueError:
        raise InvalidInput("outputs, references and inputs have different lengths") from None


def score_many(
    outputs: Iterable[str],
    references: Iterable[str | Sequence[str]],
    inputs: Iterable[str | None] | None = None,
    *,
    workers: int | None = None,
    **options: Any,
) -> list[float]:
    """Scores of many (output, reference[, input]) rows: the same numbers as ``score``, faster.

    >>> score_many(["a cat", "the dog"], ["a cat", "a cat"], workers=1)
    [1.0, 0.0]
    """
    return list(iter_scores(outputs, references, inputs, workers=workers, **options))


def read_text_file(path: str | os.PathLike[str], what: str) -> str:
    """A UTF-8 text file's content, with a one-line error for a missing or non-UTF-8 file."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{what} file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} file {path} is not UTF-8 text (byte {exc.start})") from None
    except IsADirectoryError:
        raise InvalidInput(f"{what} path {path} is a directory, not a file") from None
