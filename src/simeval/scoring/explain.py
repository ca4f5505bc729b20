"""Explanations: why a score is what it is, and the reference terms an output is missing.

The one explainer: ``Scorer.explain`` and ``simeval.explain`` (the tester, the CLI,
a stored result shown in the studio or the API) and the missing terms of every failing row of
a data-set run all come from here.

An ``Explanation`` of an output ``o`` against its best reference ``r`` lists, each ranked by
its weight (ties by the word) and cut to ``top``:

- ``shared``: the terms both have, by their contribution to the cosine,
  ``negation * w_o(t) * w_r(t) / (|w_o| |w_r|)`` (they sum to the cosine, which the ``bands``
  scale then maps to the score: ``cosine`` and ``score`` are both given);
- ``missing``: the reference's terms the output lacks, by ``(w_r(t) / |w_r|) ** 2``, the share
  of the reference's squared norm they carry;
- ``extra``: the output's terms the reference lacks, by ``(w_o(t) / |w_o|) ** 2``;

with ``w(t) = tf(t) * idf(t)`` as the score uses it (``simeval.scoring.scorer``): a term the
input (the question) contains counts at ``input_weight`` on both sides and is ``demoted``,
and ``negation`` is the factor applied when only one text has a negator. A question-answer
pair also has its ``coverage`` (the share of the reference's weight the output holds, what
its answer score reads), and ``veto`` names the contradiction that pressed a score below the
band (``simeval.scoring.vetoes``: ``number: 1912 vs 1921``, ``refusal``, ...).

Two paths give the same terms, weights and order (the tests hold them to equal output):

- ``reference_explanation`` re-analyses both texts word by word: any analyzer (word n-grams,
  the ``pair`` IDF);
- the fast path (``Explainer``), for single-word terms and a non-``pair`` IDF, takes the
  weights from the packed vectors scoring made (records of term hash, tf weight, idf: read as
  arrays, no Python loop per term); only the surface words need the text, found through a
  cache of its whitespace-separated parts (no token spans whitespace, so the tokens of the
  parts are the tokens of the whole), each distinct part analysed once, or by the C core.
  Several times cheaper: a data-set run names the missing terms of every failing row.

``explain`` takes the fast path where it applies, the reference otherwise.
"""

from __future__ import annotations

import itertools
import math
import operator
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any, Protocol

from simeval.scoring._vector import PAIR_IDF_ONE, PAIR_IDF_TWO, absent, has_any, rank, term_hash
from simeval.scoring.analyzer import Analyzer, normalize, split_tokens
from simeval.scoring.idf import BackgroundIdf, IdfTable, PairIdf
from simeval.scoring.required import missing_required
from simeval.scoring.synonyms import mark_synonyms

TOP_MISSING = 5  # missing terms a data-set row names by default
_TERM_CACHE_LIMIT = 500_000  # parts of texts whose terms an explainer keeps
_Part = tuple[tuple[int, str], ...]  # per non-stop token of a part: (term hash, token)
_first = operator.itemgetter(0)
_neg, _div, _mul = operator.neg, operator.truediv, operator.mul


class _Scorer(Protocol):
    """What explaining needs of a scorer (``simeval.scoring.scorer.Scorer``, which imports
    this module)."""

    analyzer: Analyzer
    idf: BackgroundIdf | PairIdf | IdfTable
    pair: bool
    sublinear: bool
    input_weight: float
    negation: float
    negators: bytes
    fingerprint: str
    scale: str

    @property
    def options(self) -> Mapping[str, object]: ...

    def vector(self, text: str) -> bytes: ...
    def read(self, text: str) -> str: ...
    def term(self, token: str) -> str | None: ...
    def terms(self, text: str) -> list[str]: ...
    def input_terms(self, input: str | None) -> bytes: ...
    def has_negator(self, vec: bytes) -> bool: ...
    def first_words(self, text: str) -> dict[int, str] | None: ...
    def cosine_vector(self, a: bytes, b: bytes, input_terms: bytes | None = None) -> float: ...
    def coverage_vector(
        self, a: bytes, b: bytes, input_terms: bytes | None = None
    ) -> tuple[float, float]: ...
    def asks(self, input: str | None) -> bool: ...
    def veto_applied(self, output: str, reference: str, input: str | None = None) -> str | None: ...
    def score_detail(
        self, output: str, reference: str | Sequence[str], input: str | None = None
    ) -> tuple[float, int]: ...


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

    ``score``: the score the user sees; ``cosine``: the TF-IDF cosine it comes from (the same
    number under ``scale`` ``cosine``; the ``bands`` scale maps one to the other).
    ``shared``: the terms both texts have, with their contribution to the cosine (they sum to
    the cosine). ``missing``: reference terms the output lacks, by their weight in the reference
    (the fraction of the reference's squared norm they carry). ``extra``: output terms the
    reference lacks, by their weight in the output. Terms the input contains are marked
    ``demoted`` and listed in ``demoted`` (their weight was multiplied by ``input_weight``).
    ``negation``: the factor applied because only one text has a negator (1.0 when not).
    ``coverage``: for a question-answer pair, the share of the reference's weight whose terms
    the output holds (None otherwise). ``veto``: the contradiction that pressed the score
    below the "Moderate" band (None when none did).
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
    # the eval's required terms (option ``required``) the output lacks: it fails whatever
    # its score (``simeval.scoring.required``)
    missing_required: list[str] = field(default_factory=list)
    cosine: float | None = None
    scale: str = "cosine"
    coverage: float | None = None
    veto: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        head = f"score {self.score:.4f}"
        if self.scale != "cosine" and self.cosine is not None:
            head = f"cosine {self.cosine:.4f} → score {self.score:.4f}"
        lines = [f"{head} (reference {self.matched_reference + 1})"]
        if self.reason:
            lines.append(f"reason: {self.reason}")
        if self.coverage is not None:
            lines.append(f"answer: the output holds {self.coverage:.0%} of the reference")
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
        if self.missing_required:
            lines.append("fails: required term missing: " + ", ".join(self.missing_required))
        return "\n".join(lines)


# -- the entry points ------------------------------------------------------------------------
def explain(
    scorer: _Scorer,
    output: str,
    reference: str | Sequence[str],
    top: int = 10,
    input: str | None = None,
) -> Explanation:
    """The score of ``output`` against ``reference`` (or the best of several) with the terms
    behind it (see ``Explanation``); ``input``: the question. The fast path where it applies,
    else ``reference_explanation`` (the same result)."""
    score, at = scorer.score_detail(output, reference, input)
    ex = explainer(scorer)
    if ex is None or top < 1 or not output.strip():
        exp = reference_explanation(scorer, output, reference, top, input, (score, at))
    else:
        refs = [reference] if isinstance(reference, str) else list(reference)
        ref = Reference(refs[at], scorer.vector(refs[at]))
        terms = scorer.input_terms(input)
        exp = ex.explain_scored(output, scorer.vector(output), ref, score, at, terms, top)
        judge(scorer, exp, output, input)
    exp.missing_required = missing_required(scorer, output)
    marked: Explanation = mark_synonyms(scorer.analyzer, exp, output)  # "begin ~ commence"
    return marked


def judge(scorer: _Scorer, exp: Explanation, output: str, input: str | None) -> None:
    """Add what judged the answer to an explanation of ``output`` against its matched
    reference: the coverage of a question-answer pair and the veto that fired, which is then
    the reason."""
    ref = exp.reference
    if not output.strip() or not ref.strip():
        return
    if scorer.asks(input):
        vec, rvec = scorer.vector(output), scorer.vector(ref)
        exp.coverage = round(scorer.coverage_vector(vec, rvec, scorer.input_terms(input))[0], 6)
    exp.veto = scorer.veto_applied(output, ref, input)
    if exp.veto is not None:
        exp.reason = exp.veto


def cosine_of(scorer: _Scorer, vec: bytes, rvec: bytes, terms: bytes, score: float) -> float:
    """The cosine behind ``score`` (an output vector ``vec`` against its matched reference's
    ``rvec``): the score itself under the ``cosine`` scale or when a vector is empty (then
    0 or 1, which the ``bands`` scale keeps)."""
    if scorer.scale == "cosine" or not (vec and rvec):
        return score
    return scorer.cosine_vector(vec, rvec, terms)


def missing_terms(
    scorer: _Scorer,
    output: str,
    reference: str,
    top: int = TOP_MISSING,
    input: str | None = None,
) -> list[str]:
    """The reference's most important terms (by tf-idf weight) that the output lacks: the
    words of ``explain(scorer, output, reference, top, input).missing``, faster."""
    ex = explainer(scorer)
    if ex is None or not output.strip():
        exp = reference_explanation(scorer, output, reference, top=top, input=input)
        return [m.term for m in exp.missing]
    ref = Reference(reference, scorer.vector(reference))
    terms = scorer.input_terms(input)
    have = hashes(scorer.vector(output))
    if ref.asked(terms):
        return ex.missing_asked(ref, have, terms, top)
    return ex.missing(have, reference, ref.vec, top)


def failure_reason(
    scorer: _Scorer, output: str, reference: str, input: str | None = None
) -> str | None:
    """Why ``output`` fails against ``reference`` beyond the terms it lacks, in a few words:
    the required terms it lacks, else ``explain``'s reason (empty output, no shared term, a
    negation, a veto); None when its score is only low."""
    exp = explain(scorer, output, reference, top=1, input=input)
    if exp.missing_required:
        return "required term missing: " + ", ".join(exp.missing_required)
    return exp.reason


_EXPLAINERS: dict[str, Explainer] = {}


def explainer(scorer: _Scorer) -> Explainer | None:
    """The fast path's ``Explainer`` of a scorer (kept per scorer), or None where only
    ``reference_explanation`` knows the terms (word n-grams, the ``pair`` IDF)."""
    if scorer.analyzer.ngram != 1 or scorer.pair:
        return None
    found = _EXPLAINERS.get(scorer.fingerprint)
    if found is None or found.scorer is not scorer:
        if len(_EXPLAINERS) > 16:
            _EXPLAINERS.clear()
        found = _EXPLAINERS[scorer.fingerprint] = Explainer(scorer)
    return found


# -- the reference path ----------------------------------------------------------------------
def reference_explanation(
    scorer: _Scorer,
    output: str,
    reference: str | Sequence[str],
    top: int = 10,
    input: str | None = None,
    scored: tuple[float, int] | None = None,
) -> Explanation:
    """``explain`` by analysing both texts again, word by word: any analyzer. ``scored``: the
    ``score_detail`` of these texts, when the caller has it."""
    score, at = scored if scored is not None else scorer.score_detail(output, reference, input)
    refs = [reference] if isinstance(reference, str) else list(reference)
    ref = refs[at]
    exp = Explanation(score, at, ref, fingerprint=scorer.fingerprint, scale=scorer.scale)
    exp.cosine = score
    asked: set[str] = set()
    if scorer.input_terms(input):
        asked = set(scorer.terms(input or ""))
    wr, sr = _weights(scorer, ref)
    if not output.strip():
        exp.reason = "output is empty"
        # every reference term is missing: each with its share of the reference's weight, as
        # for any output (the question's terms count at input_weight); they sum to 1
        for t in wr:
            if t in asked:
                wr[t] *= scorer.input_weight
        nr = math.sqrt(sum(w * w for w in wr.values())) or 1.0
        exp.missing = _top({t: (w / nr) ** 2 for t, w in wr.items()}, top, sr, asked)
        exp.demoted = sorted({sr[t] for t in wr if t in asked})
        return exp
    wo, so = _weights(scorer, output)
    if scorer.pair:
        for w in (wo, wr):
            for t in w:
                w[t] *= PAIR_IDF_TWO if t in wo and t in wr else PAIR_IDF_ONE
    for w in (wo, wr):
        for t in w:
            if t in asked:
                w[t] *= scorer.input_weight
    no = math.sqrt(sum(w * w for w in wo.values())) or 1.0
    nr = math.sqrt(sum(w * w for w in wr.values())) or 1.0
    vo, vr = scorer.vector(output), scorer.vector(ref)
    exp.cosine = cosine_of(scorer, vo, vr, scorer.input_terms(input), score)
    negates = scorer.negators and vo and vr and vo != vr and score > 0.0
    if negates and scorer.has_negator(vo) != scorer.has_negator(vr):
        exp.negation = scorer.negation
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
        side = "output" if scorer.has_negator(vo) else "reference"
        exp.reason = f"only the {side} has a negator: score x {scorer.negation:g}"
    judge(scorer, exp, output, input)
    return exp


def _weights(scorer: _Scorer, text: str) -> tuple[dict[str, float], dict[str, str]]:
    """Term weights before the pair IDF (tf x idf) and the first surface word per term."""
    analyzer = scorer.analyzer
    counts: dict[str, int] = {}
    surface: dict[str, str] = {}
    kept: list[tuple[str, str]] = []
    for w in analyzer.tokens(scorer.read(text)):
        t = scorer.term(w)
        if t is not None:
            kept.append((w, t))
    for w, t in kept:
        counts[t] = counts.get(t, 0) + 1
        surface.setdefault(t, w)
    for n in range(2, analyzer.ngram + 1):
        for i in range(len(kept) - n + 1):
            t = " ".join(x[1] for x in kept[i : i + n])
            counts[t] = counts.get(t, 0) + 1
            surface.setdefault(t, " ".join(x[0] for x in kept[i : i + n]))
    tf = (lambda c: 1.0 + math.log(c)) if scorer.sublinear else float
    return {t: tf(c) * scorer.idf.idf(t) for t, c in counts.items()}, surface


def _top(weights: dict[str, float], n: int, surface: dict[str, str], asked: set[str]) -> list[Term]:
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], surface[kv[0]]))[:n]
    return [Term(surface[t], round(w, 6), t in asked) for t, w in ranked]


# -- the fast path ---------------------------------------------------------------------------
def _records(vec: bytes) -> tuple[Sequence[int], list[float]]:
    """The term hashes of a packed vector and their tf x idf weights, in hash order."""
    values = array("d", vec)
    return array("Q", vec)[0::3], list(map(operator.mul, values[1::3], values[2::3]))


def hashes(vec: bytes) -> set[int]:
    """The term hashes of a packed vector, as a set (what an output "has")."""
    return set(array("Q", vec)[0::3])


class Reference:
    """A reference answer as a caller keeps it between outputs (a run, between rows): its
    text, its vector, and, made when first needed, its terms ranked for missing terms, its
    side of an explanation, its term hashes and whether it negates."""

    __slots__ = ("asked_ranked", "hset", "negator", "ranked", "side", "text", "vec")

    def __init__(self, text: str, vec: bytes):
        self.text = text
        self.vec = vec
        self.hset: frozenset[int] | None = None
        self.negator: bool | None = None
        # missing terms: (its term hashes ranked, packed; their words in that order); per set
        # of its terms an input shares, (packed, words) ranked so
        self.ranked: tuple[bytes, list[str]] | None = None
        self.asked_ranked: dict[frozenset[int], tuple[bytes, list[str]]] | None = None
        self.side: tuple[dict[int, float], float, list[tuple[int, float, str]]] | None = None

    def asked(self, terms: bytes) -> bool:
        """Whether the input's terms (``Scorer.input_terms``) include one of this reference's:
        its weights in an explanation are then not its own."""
        return bool(terms) and bool(has_any(self.vec, terms))

    def hashes(self) -> frozenset[int]:
        """The reference's term hashes (made once)."""
        hset = self.hset
        if hset is None:
            hset = self.hset = frozenset(array("Q", self.vec)[0::3])
        return hset

    def has_negator(self, scorer: _Scorer) -> bool:
        """``scorer.has_negator`` of the reference's vector (asked once)."""
        neg = self.negator
        if neg is None:
            neg = self.negator = scorer.has_negator(self.vec)
        return neg


class Explainer:
    """The fast path for one single-word, non-pair scorer: the surface words of the terms of
    texts (cached by part), missing terms and explanations of outputs already scored."""

    def __init__(self, scorer: _Scorer):
        self.scorer = scorer
        self.analyzer = scorer.analyzer
        self.tokenizer = scorer.analyzer.tokenizer
        self.parts: dict[str, _Part] = {}

    def _part(self, part: str) -> _Part:
        out = []
        for token in split_tokens(part, self.tokenizer):
            term = self.scorer.term(token)
            if term is not None:
                out.append((term_hash(term), token))
        entry = self.parts[part] = tuple(out)
        return entry

    def tokens(self, text: str) -> list[tuple[int, str]]:
        """(term hash, token) of every non-stop token of ``text``, in order."""
        parts = self.parts
        if len(parts) > _TERM_CACHE_LIMIT:
            parts.clear()
        words = normalize(self.scorer.read(text)).split()
        found: list[_Part | None] = list(map(parts.get, words))
        if None in found:
            found = [
                e if e is not None else self._part(w) for w, e in zip(words, found, strict=True)
            ]
        return list(itertools.chain.from_iterable(found))  # type: ignore[arg-type]

    def words(self, text: str) -> dict[int, str]:
        """The first word of each term of ``text``, by term hash."""
        found = self.scorer.first_words(text)  # the same, in C
        if found is not None:
            return found
        return dict(reversed(self.tokens(text)))

    def ranked(self, reference: str, rvec: bytes) -> list[tuple[int, str]]:
        """A reference's (term hash, first word) pairs, heaviest first, ties by the word."""
        words = self.words(reference)
        hashes_, weights = _records(rvec)
        ranked = sorted(
            zip(map(operator.neg, weights), map(words.__getitem__, hashes_), hashes_, strict=True)
        )
        return [(h, s) for _, s, h in ranked]

    # -- missing terms -----------------------------------------------------------------------
    def missing(self, have: set[int], reference: str, rvec: bytes, top: int) -> list[str]:
        """The ``top`` heaviest terms of ``reference`` (vector ``rvec``) not in ``have``."""
        if top <= 0:
            return []
        hashes_, weights = _records(rvec)
        picked: list[tuple[float, int]] = []
        cutoff = 0.0
        # heaviest first (a sort of plain float keys: the C fast path); ties in any order, as
        # every term as heavy as the last one taken competes on its word below
        for i in sorted(range(len(weights)), key=weights.__getitem__, reverse=True):
            w, h = weights[i], hashes_[i]
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

    def missing_in(self, ref: Reference, have: set[int], top: int) -> list[str]:
        """``missing`` for a kept reference and the term hashes ``have`` of an output."""
        if top <= 0:
            return []
        packed, words = self._ranked(ref)
        lacking = (i for i, h in enumerate(memoryview(packed).cast("Q")) if h not in have)
        return [words[i] for i in islice(lacking, top)]

    def _ranked(self, ref: Reference) -> tuple[bytes, list[str]]:
        """The reference's term hashes (packed) and words in ``ranked``'s order, made once."""
        ranked = ref.ranked
        if ranked is None:
            ranked = ref.ranked = rank(ref.vec, self.words(ref.text))  # sorted in C
        return ranked

    def missing_of(self, ref: Reference, vec: bytes, terms: bytes, top: int) -> list[str]:
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
        return [words[i] for i in absent(vec, packed, top)]

    def _asked_weights(
        self, ref: Reference, asked: Sequence[int]
    ) -> tuple[dict[int, str], dict[int, float], float]:
        """The reference's first words and weights by hash, the weights of the terms in
        ``asked`` times the scorer's ``input_weight``, and its norm taken again in the order
        of first use (as ``reference_explanation`` sums it)."""
        rtok = self.tokens(ref.text)
        sr = dict(reversed(rtok))
        wr = dict(zip(*_records(ref.vec), strict=True))
        weight = self.scorer.input_weight
        for h in asked:
            if h in wr:
                wr[h] *= weight
        rw = list(map(wr.__getitem__, dict.fromkeys(map(_first, rtok))))
        return sr, wr, math.sqrt(sum(map(operator.mul, rw, rw))) or 1.0

    def _asked_ranked(self, ref: Reference, shared: frozenset[int]) -> tuple[bytes, list[str]]:
        """All of the reference's terms in ``missing_asked``'s order for an input sharing the
        terms ``shared`` with it (its keys and words: a term the output has drops out without
        changing the order of the others)."""
        sr, wr, nr = self._asked_weights(ref, sorted(shared))
        ranked = sorted((-((w / nr) ** 2), sr[h], h) for h, w in wr.items())
        return array("Q", [h for _, _, h in ranked]).tobytes(), [word for _, word, _ in ranked]

    def missing_asked(self, ref: Reference, have: set[int], terms: bytes, top: int) -> list[str]:
        """``missing_in`` for a row whose input (its terms ``terms``) shares terms with the
        reference: as ``explain`` does, those terms' weights are multiplied by the scorer's
        ``input_weight`` and the reference's norm is taken again, in the order of first use."""
        sr, wr, nr = self._asked_weights(ref, array("Q", terms))
        lacking = [h for h in wr if h not in have]
        keys = [-((wr[h] / nr) ** 2) for h in lacking]
        return [word for _, word in _smallest(keys, lacking, sr.__getitem__, top)] if top else []

    # -- explanations ------------------------------------------------------------------------
    def _side(self, ref: Reference) -> tuple[dict[int, float], float, list[tuple[int, float, str]]]:
        """The reference's side of an explanation: weights by hash, norm, and its terms ranked
        as "missing" entries (hash, key, word)."""
        side = ref.side
        if side is None:
            sr, wr, nr = self._asked_weights(ref, ())
            ranked = sorted((-((w / nr) ** 2), sr[h], h) for h, w in wr.items())
            side = ref.side = (wr, nr, [(h, k, word) for k, word, h in ranked])
        return side

    def explain_scored(
        self,
        output: str,
        vec: bytes,
        ref: Reference,
        score: float,
        at: int,
        terms: bytes = b"",
        top: int = 10,
    ) -> Explanation:
        """``explain`` of an output already scored (``score``, ``at``; its vector ``vec``,
        ``ref`` the matched reference, ``terms`` the input's ``Scorer.input_terms``): the
        same floats from the same operations in the same order. The reference's side is made
        once per ``Reference`` unless the input shares a term with it (its weights are then
        the row's own). ``output`` must not be blank (``reference_explanation`` says why
        such an output scores 0) and ``top`` at least 1."""
        scorer = self.scorer
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
        if asked and ref.asked(terms):
            sr, wr, nr = self._asked_weights(ref, sorted(asked))
            demoted.update(sr[h] for h in asked.intersection(wr))
            lacking = list(wr.keys() - wo.keys())
            keys = [-((wr[h] / nr) ** 2) for h in lacking]
            missing = _smallest(keys, lacking, sr.__getitem__, top)
        else:
            wr, nr, entries = self._side(ref)
            missing = []
            for h, key, word in entries:
                if h not in wo:
                    missing.append((key, word))
                    if len(missing) == top:
                        break
        d = no * nr
        # the keys: shared negation * wo * wr / (no * nr) (a factor of 1.0 is exact and left
        # out), extra (wo / no) ** 2, each with its first word; mapped in C
        common = list(wo.keys() & wr.keys())
        only = list(wo.keys() - wr.keys())
        get_o, get_w = wo.__getitem__, so.__getitem__
        first = map(get_o, common)
        if negation != 1.0:
            first = map(_mul, itertools.repeat(negation), first)
        products = map(_mul, first, map(wr.__getitem__, common))
        keys = list(map(_neg, map(_div, products, itertools.repeat(d))))
        shared = _smallest(keys, common, get_w, top)
        two = itertools.repeat(2)
        extra_keys = map(_neg, map(pow, map(_div, map(get_o, only), itertools.repeat(no)), two))
        extra = _smallest(list(extra_keys), only, get_w, top)
        reason = None
        if not wo:
            reason = "output has no scorable terms"
        elif not common and score < 1.0:
            reason = "output and reference share no terms"
        elif negation != 1.0:
            side = "output" if out_negates else "reference"
            reason = f"only the {side} has a negator: score x {scorer.negation:g}"
        return Explanation(
            score,
            at,
            ref.text,
            shared=_terms(shared, demoted),
            missing=_terms(missing, demoted),
            extra=_terms(extra, demoted),
            reason=reason,
            fingerprint=scorer.fingerprint,
            demoted=sorted(demoted),
            negation=negation,
            cosine=cosine_of(scorer, vec, ref.vec, terms, score),
            scale=scorer.scale,
        )


def _smallest(
    keys: list[float], hashes_: list[int], word: Callable[[int], str], top: int = 10
) -> list[tuple[float, str]]:
    """``sorted(zip(keys, map(word, hashes_)))[:top]``: the keys sorted as plain floats (the
    fast path of ``sorted``), words only for the ``top`` smallest and any tied with the last."""
    if len(keys) <= top:
        return sorted(zip(keys, map(word, hashes_), strict=True))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    last = keys[order[top - 1]]
    n = top
    while n < len(order) and keys[order[n]] == last:
        n += 1
    return sorted([(keys[i], word(hashes_[i])) for i in order[:n]])[:top]


def _terms(items: list[tuple[float, str]], demoted: set[str]) -> list[Term]:
    """The ``Term``s of ranked (negated weight, word) pairs; ``demoted``: the words of the
    terms the input contains."""
    return [Term(s, round(-w, 6), s in demoted) for w, s in items]
