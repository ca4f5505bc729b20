"""The similarity score: TF-IDF cosine between an output and one or more reference answers.

Formula. Both texts are analysed into terms (``simeval.analyzer``). A term ``t`` that occurs
``c`` times in a text gets the weight ``w(t) = tf(c) * idf(t)`` with ``tf(c) = 1 + ln(c)``
(sublinear, the default) or ``tf(c) = c``; ``idf`` comes from the chosen source
(``simeval.idf``). The score is the cosine of the two weight vectors::

    score(a, b) = sum_t w_a(t) w_b(t) / (|w_a| |w_b|)          in [0, 1]

It is symmetric, 1.0 for texts identical after normalisation (NFKC, case folding, whitespace),
0.0 when no term is shared and 0.0 for an empty output. With several references the score is
the best match. Sums run in a fixed order (by a hash of the term text), so the same inputs and
options give the same float on every machine and in every process.
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

from simeval import _vector
from simeval import options as _options
from simeval.analyzer import Analyzer, normalize
from simeval.errors import InvalidInput, InvalidOption, InvalidType
from simeval.idf import BackgroundIdf, IdfTable, PairIdf
from simeval.options import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from simeval.options import DEFAULTS as DEFAULTS
from simeval.options import OPTION_HELP as OPTION_HELP
from simeval.options import analyzer_from_options as analyzer_from_options
from simeval.options import check_threshold as check_threshold

ALGORITHM_VERSION = 1
_TABLE_LIMIT = 1_000_000  # cached tokens per scorer before the cache starts over (~100 MB)


def resolve_options(options: dict[str, Any]) -> dict[str, Any]:
    """Validate scorer options and fill in defaults, loading an ``idf`` table file; the
    canonical form of a configuration (``simeval.options.resolve_options``).

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
    """One term of an explanation: its surface word(s), and its share of the score or weight."""

    term: str
    weight: float


@dataclass
class Explanation:
    """Why a score is what it is.

    ``shared``: the terms both texts have, with their contribution to the score (they sum to
    the score). ``missing``: reference terms the output lacks, by their weight in the reference
    (the fraction of the reference's squared norm they carry). ``extra``: output terms the
    reference lacks, by their weight in the output.
    """

    score: float
    matched_reference: int
    reference: str
    shared: list[Term] = field(default_factory=list)
    missing: list[Term] = field(default_factory=list)
    extra: list[Term] = field(default_factory=list)
    reason: str | None = None
    fingerprint: str = ""

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
                lines.append(f"{title}: " + ", ".join(f"{t.term} ({t.weight:.3f})" for t in terms))
        return "\n".join(lines)


class Scorer:
    """A configured scorer: options validated once, token cache kept warm.

    >>> s = Scorer()
    >>> round(s.score("Paris is the capital of France.", "The capital of France is Paris."), 3)
    1.0
    """

    def __init__(self, **options: Any):
        self.options = resolve_options(options)
        o = self.options
        self.analyzer = Analyzer(
            o["language"], o["stemming"], o["prefix"], o["stop_words"], o["ngram"]
        )
        self.pair = o["idf"] == "pair"
        self.sublinear = o["sublinear_tf"]
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
        # The C core tokenises and caches token entries itself; n-grams take the Python path.
        self._vz = (
            _vector.Vectorizer(self._entry, _TABLE_LIMIT)
            if _vector.ACCELERATED and self.analyzer.ngram == 1
            else None
        )
        self.fingerprint = self._fingerprint()

    def _fingerprint(self) -> str:
        ident = {
            "scorer": "tfidf-cosine",
            "algorithm": ALGORITHM_VERSION,
            "analyzer": self.analyzer.config(),
            "sublinear_tf": self.sublinear,
            **self.idf.identity(),
        }
        blob = json.dumps(ident, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def describe(self) -> dict[str, Any]:
        """The options in a JSON-friendly form (a corpus table by its version)."""
        out = dict(self.options)
        if isinstance(out["idf"], IdfTable):
            out["idf"] = f"corpus:{out['idf'].version}"
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
        """The packed term vector of a text (see ``simeval._vector``)."""
        if self._vz is not None:
            return self._vz.vector(normalize(text), self.sublinear)
        if self.analyzer.ngram == 1:
            tokens = self.analyzer.tokens(text)
            return _vector.vectorize(tokens, self._table, self._miss, self.sublinear)
        terms = self.analyzer.terms(text)
        return _vector.vectorize(terms, self._term_table, self._term_miss, self.sublinear)

    def prepare(self, reference: str | Sequence[str]) -> list[bytes]:
        """Vectors of reference answers, to score many outputs against them with ``best``."""
        return [self.vector(r) for r in check_references(reference)]

    def best(self, output: str, prepared: Sequence[bytes]) -> tuple[float, int]:
        """Best score of an output against prepared references, and the index that matched."""
        check_text(output, "output")
        if not output.strip():
            return 0.0, 0
        return _vector.best(self.vector(output), prepared, self.pair)

    def best_vector(self, vec: bytes, prepared: Sequence[bytes]) -> tuple[float, int]:
        """``best`` for an output already vectorised: one output against many evals."""
        if not vec:
            return 0.0, 0
        return _vector.best(vec, prepared, self.pair)

    def score_detail(self, output: str, reference: str | Sequence[str]) -> tuple[float, int]:
        """The score and the index of the best-matching reference answer."""
        check_text(output, "output")
        refs = check_references(reference)
        if not output.strip():
            return 0.0, 0
        vec = self.vector(output)
        top, at = -1.0, 0
        for i, ref in enumerate(refs):
            rvec = self.vector(ref)
            s = _vector.cosine(vec, rvec, self.pair)
            if not (vec and rvec) and _same_text(output, ref):
                s = 1.0  # identical texts without scorable terms (e.g. only stop words)
            if s > top:
                top, at = s, i
        return top, at

    def score(self, output: str, reference: str | Sequence[str]) -> float:
        """The similarity of ``output`` to ``reference`` (or the best of several), in [0, 1]."""
        check_text(output, "output")
        if type(reference) is str and reference.strip() and output.strip():
            va, vb = self.vector(output), self.vector(reference)
            s = _vector.cosine(va, vb, self.pair)
            if not (va and vb) and _same_text(output, reference):
                s = 1.0  # identical texts without scorable terms (e.g. only stop words)
            return s
        return self.score_detail(output, reference)[0]

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

    def explain(self, output: str, reference: str | Sequence[str], top: int = 10) -> Explanation:
        """The score with the terms behind it (see ``Explanation``)."""
        score, at = self.score_detail(output, reference)
        refs = check_references(reference)
        ref = refs[at]
        exp = Explanation(score, at, ref, fingerprint=self.fingerprint)
        wr, sr = self._weights(ref)
        if not output.strip():
            exp.reason = "output is empty"
            exp.missing = _top({sr[t]: w * w for t, w in wr.items()}, top)
            return exp
        wo, so = self._weights(output)
        if self.pair:
            for w in (wo, wr):
                for t in w:
                    w[t] *= PairIdf_for(t in wo and t in wr)
        no = math.sqrt(sum(w * w for w in wo.values())) or 1.0
        nr = math.sqrt(sum(w * w for w in wr.values())) or 1.0
        shared = {so[t]: wo[t] * wr[t] / (no * nr) for t in wo if t in wr}
        exp.shared = _top(shared, top)
        exp.missing = _top({sr[t]: (w / nr) ** 2 for t, w in wr.items() if t not in wo}, top)
        exp.extra = _top({so[t]: (w / no) ** 2 for t, w in wo.items() if t not in wr}, top)
        if not wo:
            exp.reason = "output has no scorable terms"
        elif not shared and score < 1.0:
            exp.reason = "output and reference share no terms"
        return exp


def PairIdf_for(both: bool) -> float:  # noqa: N802 - mirrors the constants' names
    return _vector.PAIR_IDF_TWO if both else _vector.PAIR_IDF_ONE


def _top(weights: dict[str, float], n: int) -> list[Term]:
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return [Term(t, round(w, 6)) for t, w in ranked]


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


def score(output: str, reference: str | Sequence[str], **options: Any) -> float:
    """Similarity of ``output`` to ``reference`` in [0, 1] (the best of several references).

    >>> score("The capital of France is Paris.", "Paris is France's capital.") > 0.8
    True
    """
    return get_scorer(**options).score(output, reference)


def explain(
    output: str, reference: str | Sequence[str], *, top: int = 10, **options: Any
) -> Explanation:
    """The score with the shared, missing and extra terms behind it.

    >>> explain("Paris", "Paris is the capital of France").missing[0].term
    'capital'
    """
    return get_scorer(**options).explain(output, reference, top=top)


def fingerprint(**options: Any) -> str:
    """The short hash of everything that determines a score under these options."""
    return get_scorer(**options).fingerprint


# -- batches ---------------------------------------------------------------------------------
_WORKER: Scorer | None = None


def _worker_init(options: dict[str, Any]) -> None:
    global _WORKER
    _WORKER = get_scorer(**options)


def _worker_chunk(chunk: list[tuple[str, Any]]) -> list[float]:
    assert _WORKER is not None
    s = _WORKER.score
    return [s(o, r) for o, r in chunk]


def _chunks(pairs: Iterable[tuple[str, Any]], size: int) -> Iterator[list[tuple[str, Any]]]:
    it = iter(pairs)
    while chunk := list(islice(it, size)):
        yield chunk


def iter_scores(
    outputs: Iterable[str],
    references: Iterable[str | Sequence[str]],
    *,
    workers: int | None = None,
    chunk_size: int = 2000,
    **options: Any,
) -> Iterator[float]:
    """Scores of ``zip(outputs, references)``, streamed in order; memory stays flat.

    ``workers`` processes share the work (default: all cores; 1 = in this process). Inputs
    are read lazily, ``chunk_size`` pairs at a time, and at most two chunks per worker are in
    flight. The numbers are exactly those of ``score``.
    """
    scorer = get_scorer(**options)
    pairs = _strict_zip(outputs, references)
    n = (os.cpu_count() or 1) if workers is None else workers
    if not isinstance(n, int) or n < 1:
        raise InvalidInput(f"workers must be a positive integer, not {workers!r}")
    if n == 1:
        for o, r in pairs:
            yield scorer.score(o, r)
        return
    yield from _parallel(pairs, scorer, n, chunk_size)


def _parallel(
    pairs: Iterator[tuple[str, Any]], scorer: Scorer, workers: int, chunk_size: int
) -> Iterator[float]:
    import multiprocessing as mp
    from collections import deque

    chunks = _chunks(pairs, chunk_size)
    first = next(chunks, None)
    if first is None:
        return
    second = next(chunks, None)
    if second is None:  # too small to be worth a process pool
        yield from (scorer.score(o, r) for o, r in first)
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


def _strict_zip(outputs: Iterable[str], references: Iterable[Any]) -> Iterator[tuple[str, Any]]:
    if isinstance(outputs, str) or isinstance(references, str):
        raise InvalidType("score_many takes sequences of outputs and references, not a string")
    try:
        yield from zip(outputs, references, strict=True)
    except ValueError:
        raise InvalidInput("outputs and references have different lengths") from None


def score_many(
    outputs: Iterable[str],
    references: Iterable[str | Sequence[str]],
    *,
    workers: int | None = None,
    **options: Any,
) -> list[float]:
    """Scores of many (output, reference) pairs: the same numbers as ``score``, faster.

    >>> score_many(["a cat", "the dog"], ["a cat", "a cat"], workers=1)
    [1.0, 0.0]
    """
    return list(iter_scores(outputs, references, workers=workers, **options))


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
