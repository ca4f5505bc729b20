"""The similarity score: TF-IDF cosine between an output and one or more reference answers, on
a calibrated scale.

Formula. Both texts are analysed into terms (``simeval.scoring.analyzer``). A term ``t`` that occurs
``c`` times in a text gets the weight ``w(t) = tf(c) * idf(t)`` with ``tf(c) = 1 + ln(c)``
(sublinear, the default) or ``tf(c) = c``; ``idf`` comes from the chosen source
(``simeval.scoring.idf``). The cosine of the two weight vectors::

    cosine(a, b) = sum_t w_a(t) w_b(t) / (|w_a| |w_b|)          in [0, 1]

The cosine is symmetric, 1.0 for texts identical after normalisation (NFKC, case folding,
whitespace), 0.0 when no term is shared and 0.0 for an empty output.

The scale (option ``scale``): ``bands``, the default, maps the cosine through the calibrated
curve of ``simeval.scoring.bands`` (fitted so that 0.70, 0.80 and 0.90 separate the human
grades the strictness bands name; 0 stays 0 and 1 stays 1); ``cosine`` is the cosine itself.
With several references the score is the best match (the best mapped score). Sums run in a
fixed order (by a hash of the term text), so the same inputs and options give the same float
on every machine and in every process.

Adjustments (see ``Scorer.best_vector`` for the exact arithmetic):

- the input (the question): a term the input contains gets ``input_weight`` times its weight
  in both vectors, as repeating the question says little about the answer;
- negation: when exactly one of the two texts contains a negator ("not", "never", "n't", ...),
  the cosine is multiplied by ``negation``;
- the answer (option ``answer``, with the question known and ``scale=bands``): the score is
  the better of the scaled cosine and the scaled coverage, the share of the reference's
  squared weight the output holds (``simeval.scoring.bands``), so a long right answer passes
  and unrelated padding earns nothing;
- vetoes (option ``contradiction``): a pair that says the same thing but for a negation,
  another number, weekday, month or name, or a refusal is pressed below the "Moderate" band
  (``simeval.scoring.vetoes``), whatever the scale made of it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from array import array
from collections.abc import Sequence
from typing import Any

from simeval.checks import check_text
from simeval.errors import InvalidInput, InvalidOption, InvalidType
from simeval.scoring import bands as bands_mod
from simeval.scoring import explain as explaining
from simeval.scoring import options as options_mod
from simeval.scoring import vetoes, written
from simeval.scoring._vector import (
    ACCELERATED,
    PAIR_IDF_ONE,
    PAIR_IDF_TWO,
    RECORD_SIZE,
    Vectorizer,
    bands,
    best,
    cosine,
    coverage,
    entry,
    final_py,
    has_any,
    pack_hashes,
    term_hash,
    unpack,
    vectorize,
)
from simeval.scoring._vector import hashes as hash_set
from simeval.scoring.analyzer import char_info, normalize
from simeval.scoring.explain import Explanation as Explanation
from simeval.scoring.explain import Term as Term
from simeval.scoring.idf import BackgroundIdf, IdfTable, PairIdf
from simeval.scoring.options import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from simeval.scoring.options import DEFAULTS as DEFAULTS
from simeval.scoring.options import OPTION_HELP as OPTION_HELP
from simeval.scoring.options import PREVIOUS_DEFAULTS as PREVIOUS_DEFAULTS
from simeval.scoring.options import RELEASE_0_1_DEFAULTS as RELEASE_0_1_DEFAULTS
from simeval.scoring.options import analyzer_from_options as analyzer_from_options
from simeval.scoring.options import check_threshold as check_threshold

ALGORITHM_VERSION = 1
_TABLE_LIMIT = 1_000_000  # cached tokens per scorer before the cache starts over (~100 MB)
_FACTS_LIMIT = 100_000  # cached texts' facts (the vetoes') per scorer before it starts over
# the vectors of texts seen, by text (references recur: an eval's, a data set's, a tester's),
# up to this many bytes of text and vector per scorer before the cache starts over
_VECTORS_LIMIT = 32 << 20
# ``vetoes.reads_nothing``'s bits: on one side only, in the reference, on both sides
_READ_ONE = vetoes.READS_REFUSAL | vetoes.READS_NEGATOR
_READ_REF = vetoes.READS_NAME
_READ_BOTH = vetoes.READS_VALUE
_FLOOR = vetoes.FLOOR
WRITTEN_VERSION = 2  # simeval.scoring.written (part of the fingerprint with ``answer`` on)
VETO_VERSION = 3  # the checks of simeval.scoring.vetoes (part of the fingerprint when on)


def resolve_options(options: dict[str, Any]) -> dict[str, Any]:
    """Validate scorer options and fill in defaults, loading an ``idf`` table file; the
    canonical form of a configuration (``simeval.scoring.options.resolve_options``).

    Raises ``InvalidOption`` naming the unknown option or the bad value.
    """
    resolved = options_mod.resolve_options(options)
    resolved["idf"] = _idf_source(resolved["idf"])
    return resolved


def _idf_source(idf: object) -> str | IdfTable:
    if isinstance(idf, os.PathLike):
        idf = os.fspath(idf)
    if not isinstance(idf, str | IdfTable):
        raise InvalidOption(f"option 'idf' must be background, pair or a table file, not {idf!r}")
    if isinstance(idf, str) and idf not in {"background", "pair"}:
        idf = IdfTable.load(idf) if idf.strip() else None
        if idf is None:
            raise InvalidOption("option 'idf' is empty")
    return idf


def check_references(reference: object) -> list[str]:
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
        self.scale: str = o["scale"]
        # the packed curve the cosine goes through (b"": the raw cosine), and the one of a
        # question-answer pair (with the answer knots when ``answer`` is on)
        self.curve_model = (
            bands_mod.CURVE
            if self.scale == "bands"
            else bands_mod.CURVE_1
            if self.scale == "bands-1"
            else None
        )
        self.curve: bytes = self.curve_model.packed() if self.curve_model else b""
        self.answering: bool = bool(o["answer"] and self.curve_model and self.curve_model.answer)
        self.answer_curve: bytes = (
            self.curve_model.answer_packed() if self.answering and self.curve_model else self.curve
        )
        # the longest reference vector (bytes) ``together`` reads: longer ones it leaves alone
        answer_model = self.curve_model.answer if self.curve_model else None
        self._together_size = (
            answer_model.max_terms * RECORD_SIZE
            if answer_model is not None and self.analyzer.ngram == 1
            else -1
        )
        # answers read as models write them (``simeval.scoring.written``): glued words apart,
        # English number words as their digits
        self.unglue: bool = self.answering
        self.numbers: dict[str, str] = (
            written.NUMBER_WORDS if self.answering and self.analyzer.language == "english" else {}
        )
        # vetoes press a score below a band: on a calibrated scale only (the raw cosine stays raw)
        self.vetoing: bool = o["contradiction"] and self.curve_model is not None
        self._facts: dict[str, vetoes.Facts] = {}
        self._fact_words: dict[str, tuple[tuple[str, str | None], ...]] = {}  # facts' words
        self._reads: dict[str, int] = {}  # ``reads`` of texts whose facts were not read
        self._asked: dict[str, bytes] = {}  # input_terms by question text
        self._vectors: dict[str, bytes] = {}  # vector by text
        # a question's (input_terms, asks, its curve) by text: what ``score`` needs of it
        self._questions: dict[str, tuple[bytes, bool, bytes]] = {}
        self._vectors_size = 0
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
            Vectorizer(
                self._entry,
                char_info,
                _fold,
                _TABLE_LIMIT,
                self.analyzer.tokenizer == "unicode",
            )
            if ACCELERATED and self.analyzer.ngram == 1
            else None
        )
        terms = (self.analyzer.term(t) for t in self.analyzer.negators)
        self.negator_hashes: bytes = pack_hashes(term_hash(t) for t in terms if t is not None)
        self._negator_set = frozenset(array("Q", self.negator_hashes))
        # the negators the cosine is given (``best_vector``'s step 4): none when the option is
        # off, so code repeating the arithmetic passes this, not ``negator_hashes``
        self.negators: bytes = self.negator_hashes if self.negation != 1.0 else b""
        self.fingerprint = self._fingerprint()

    def _fingerprint(self) -> str:
        ident: dict[str, object] = {
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
        if self.curve_model is not None:
            ident["scale"] = self.curve_model.version
        if self.answering:
            ident["answer"] = self.answer_curve.hex()
            ident["written"] = WRITTEN_VERSION
        if self.vetoing:
            ident["vetoes"] = VETO_VERSION
        if self.analyzer.synonyms:
            # the terms as analysed: groups that analyse alike fingerprint alike
            ident["synonyms"] = sorted(self.analyzer.synonym_terms.items())
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
    def read(self, text: str) -> str:
        """A text as the scorer reads it: with option ``answer``, the words a model ran
        together apart (``written.unglue``); the text itself otherwise."""
        return written.unglue(text) if self.unglue else text

    def term(self, token: str) -> str | None:
        """The term a normalised token counts as (``Analyzer.term``, an English number word
        as its digits with option ``answer``), None for a stop word."""
        return self.analyzer.term(self.numbers.get(token, token))

    def terms(self, text: str) -> list[str]:
        """The terms of a text in order as the scorer counts them (n-grams after the words)."""
        if self.analyzer.ngram != 1:
            return self.analyzer.terms(self.read(text))
        return [t for t in map(self.term, self.analyzer.tokens(self.read(text))) if t is not None]

    def _entry(self, token: str) -> bytes | None:
        term = self.term(token)
        return None if term is None else entry(term_hash(term), self.idf.idf(term))

    def _miss(self, token: str) -> bytes | None:
        if len(self._table) > _TABLE_LIMIT:
            self._table.clear()
        entry = self._table[token] = self._entry(token)
        return entry

    def _term_miss(self, term: str) -> bytes:
        if len(self._term_table) > _TABLE_LIMIT:
            self._term_table.clear()
        found = entry(term_hash(term), self.idf.idf(term))
        self._term_table[term] = found
        return found

    def vector(self, text: str) -> bytes:
        """The packed term vector of a text (see ``_vector``): records of (uint64 term
        hash, float64 tf weight, float64 idf) in native byte order, sorted by hash."""
        vec = self._vectors.get(text)
        if vec is None:
            vec = self._vector(text)
            size = len(text) + len(vec) + 100
            if self._vectors_size + size > _VECTORS_LIMIT:
                self._vectors.clear()
                self._vectors_size = 0
            if size <= _VECTORS_LIMIT:
                self._vectors[text] = vec
                self._vectors_size += size
        return vec

    def _vector(self, text: str) -> bytes:
        text = self.read(text)
        if self._vz is not None:
            return self._vz.vector(text, self.sublinear)
        if self.analyzer.ngram == 1:
            tokens = self.analyzer.tokens(text)
            return vectorize(tokens, self._table, self._miss, self.sublinear)
        terms = self.analyzer.terms(text)
        return vectorize(terms, self._term_table, self._term_miss, self.sublinear)

    def input_terms(self, input: str | None) -> bytes:
        """The terms of an input (the question) as a hash set for ``best_vector``: the sorted
        uint64 hashes of the terms of ``vector(input)``, packed in native byte order. Empty
        for no input, a blank one, or when ``input_weight`` is 1 (the input changes nothing)."""
        if input is None or self.input_weight == 1.0:
            return b""
        if type(input) is str:  # the same question recurs (a data set, a tester, a service)
            got = self._asked.get(input)
            if got is not None:
                return got
        check_text(input, "input")
        terms = hash_set(self.vector(input)) if input.strip() else b""
        if len(self._asked) > _FACTS_LIMIT:
            self._asked.clear()
        self._asked[input] = terms
        return terms

    def question(self, input: str) -> tuple[bytes, bool, bytes]:
        """What a pair's score needs of its question (already checked as text):
        ``input_terms``, ``asks`` and the curve the pair goes through (cached by text)."""
        got = self._questions.get(input)
        if got is None:
            asked = self.asks(input)
            got = (self.input_terms(input), asked, self.curve_for(asked))
            if len(self._questions) > _FACTS_LIMIT:
                self._questions.clear()
            self._questions[input] = got
        return got

    def has_negator(self, vec: bytes) -> bool:
        """Whether a packed vector has a negator term (a hash in ``negator_hashes``)."""
        return bool(has_any(vec, self.negator_hashes))

    def first_words(self, text: str) -> dict[int, str] | None:
        """The first word of each term of ``text`` by term hash, in order of first use, as
        the C core finds them; None without it (word n-grams, no C compiler at install):
        ``simeval.scoring.explain`` then finds them itself."""
        if self._vz is None:
            return None
        words: dict[int, str] = self._vz.words(self.read(text))
        return words

    def prepare(self, reference: str | Sequence[str]) -> list[bytes]:
        """Vectors of reference answers, to score many outputs against them with ``best``."""
        return [self.vector(r) for r in check_references(reference)]

    def asks(self, input: str | None) -> bool:
        """Whether ``input`` (already checked as text) makes a pair a question-answer pair: a
        non-blank question under option ``answer`` and a curve with answer knots."""
        return self.answering and input is not None and bool(input.strip())

    def curve_for(self, asked: bool) -> bytes:
        """The packed curve of a pair: a question-answer pair's (``asked``) or the plain one."""
        return self.answer_curve if asked else self.curve

    def facts(self, text: str) -> vetoes.Facts:
        """What the vetoes read of a text (cached per scorer)."""
        found = self._facts.get(text)
        if found is None:
            if len(self._facts) > _FACTS_LIMIT:
                self._facts.clear()
            found = self._facts[text] = vetoes.facts(
                self.read(text), self.analyzer, self.numbers, self._fact_words
            )
        return found

    def reads(self, text: str) -> int:
        """What the checks may read of an output: its facts' ``reads`` bits when they are at
        hand, else ``vetoes.reads_at_most`` (the same bits or more, for the cost of a look at
        its words and two regular expressions), else its facts. A pair whose bits read
        nothing gets no veto, and the output's facts are read only for one that may."""
        found = self._facts.get(text)
        if found is not None:
            return found.reads
        bits = self._reads.get(text)
        if bits is not None:
            return bits
        bits = vetoes.reads_at_most(self.read(text), self.analyzer.negators)
        if bits is None:
            return self.facts(text).reads
        if len(self._reads) > _FACTS_LIMIT:
            self._reads.clear()
        self._reads[text] = bits
        return bits

    def veto(self, output: str, reference: str, input_terms: bytes = b"") -> str | None:
        """Why an output contradicts a reference (``simeval.scoring.vetoes``), None for no veto
        or with the option off. ``input_terms``: the question's (``input_terms``); a question
        that itself negates has no negation veto, as the answer may repeat its "not"."""
        if not self.vetoing:
            return None
        return vetoes.veto(self.facts(output), self.facts(reference), not self.negates(input_terms))

    def negates(self, input_terms: bytes) -> bool:
        """Whether a question (its ``input_terms``) itself negates: then an answer repeating
        its "not" is no contradiction, and no negation veto applies."""
        return bool(input_terms) and not self._negator_set.isdisjoint(array("Q", input_terms))

    def veto_applied(self, output: str, reference: str, input: str | None = None) -> str | None:
        """The veto that pressed the score of this pair (one reference), None when none did:
        what an explanation names."""
        if not (self.vetoing and output.strip() and reference.strip()):
            return None
        va, vb = self.vector(output), self.vector(reference)
        if not (va and vb):
            return None
        terms, asked = self.input_terms(input), self.asks(input)
        s = self._cos(va, vb, terms, asked)
        if s > vetoes.FLOOR and asked:
            s = self.together(s, output, reference, va, vb, terms)
        if s <= vetoes.FLOOR:
            return None
        return self.veto(output, reference, terms)

    def checked(
        self,
        score: float,
        output: str,
        reference: str,
        vec: bytes,
        rvec: bytes,
        terms: bytes = b"",
        asked: bool = False,
    ) -> float:
        """A pair's score after the checks that read the texts (``best_vector``'s step 6):
        scores at or below ``vetoes.FLOOR`` are left alone, as neither check takes a score
        below it. A question-answer pair's answer score reads its coverage in one place
        (``together``); a veto presses the score below the "Moderate" band."""
        if score <= vetoes.FLOOR:
            return score
        if asked and self.answering and len(rvec) <= self._together_size:
            score = self.together(score, output, reference, vec, rvec, terms)
        if self.vetoing and score > vetoes.FLOOR:
            ref_facts = self._facts.get(reference) or self.facts(reference)
            reads = self.reads(output)
            if vetoes.reads_nothing(reads, ref_facts.reads):
                return score
            out_facts = self.facts(output)
            if vetoes.veto(out_facts, ref_facts, not self.negates(terms)) is not None:
                return vetoes.pressed(score)
        return score

    def together(
        self, score: float, output: str, reference: str, vec: bytes, rvec: bytes, terms: bytes
    ) -> float:
        """A question-answer pair's score with its answer score read from the reference's
        terms the output holds within one stretch of text (``vetoes.together``: twice the
        reference's length and two terms), not scattered through it: padding an answer with
        other answers that happen to hold the reference's words does not make it right. Only
        a score the answer part decides, of a reference of at most ``max_terms`` terms, and
        never below ``vetoes.FLOOR``."""
        model = self.curve_model.answer if self.curve_model else None
        n_ref = len(rvec) // RECORD_SIZE
        if model is None or n_ref > model.max_terms or self.analyzer.ngram != 1:
            return score
        args = (self.pair, terms, self.input_weight, self.negators, self.negation)
        raw = float(cosine(vec, rvec, *args, b""))
        cov, prec = self.coverage_vector(vec, rvec, terms)
        ref_seq, out_seq = self.facts(reference).sequence, self.facts(output).sequence
        asked = set(array("Q", terms)) if self.input_weight != 1.0 and terms else set()
        have = {h for h, _, _ in unpack(vec)}
        records = {h: (tfw, idf) for h, tfw, idf in unpack(rvec)}
        weights: dict[str, float] = {}
        every: dict[str, float] = {}
        for term in dict.fromkeys(ref_seq):  # in order: the sums must not hang on hash seeds
            h = term_hash(term)
            found = records.get(h)
            if found is None:
                continue
            tfw, idf = found
            w = tfw * ((PAIR_IDF_TWO if h in have else PAIR_IDF_ONE) if self.pair else idf)
            every[term] = (w * self.input_weight) ** 2 if h in asked else w * w
            if h not in asked:
                weights[term] = w * w
        near = vetoes.together(out_seq, weights or every, 2 * len(ref_seq) + 2)
        if near >= cov - 1e-9:  # all of it in one place (sums in another order: rounding)
            return score
        n_out = len(vec) // RECORD_SIZE
        local = final_py(raw, near, prec, n_out, n_ref, self.answer_curve)
        return max(vetoes.FLOOR, local) if local < score else score

    def _cos(self, a: bytes, b: bytes, terms: bytes, asked: bool = False) -> float:
        return cosine(
            a,
            b,
            self.pair,
            terms,
            self.input_weight,
            self.negators,
            self.negation,
            self.curve_for(asked),
        )

    def coverage_vector(
        self, a: bytes, b: bytes, input_terms: bytes | None = None
    ) -> tuple[float, float]:
        """The coverage (the share of reference vector ``b``'s squared weight whose terms
        output vector ``a`` holds) and the precision (the share of ``a``'s on terms of ``b``),
        the question's terms demoted as in the cosine: what a question-answer pair's answer
        score reads (``best_vector``'s step 5)."""
        return coverage(a, b, self.pair, input_terms or b"", self.input_weight)

    def cosine_vector(self, a: bytes, b: bytes, input_terms: bytes | None = None) -> float:
        """The cosine of an output vector against a reference vector before the scale
        (``best_vector``'s steps 1-4): what ``explain`` shows beside the score."""
        return float(
            cosine(
                a, b, self.pair, input_terms or b"", self.input_weight, self.negators, self.negation
            )
        )

    def scaled(self, cosine: float, a: bytes, b: bytes) -> float:
        """The score of a cosine of output vector ``a`` against reference vector ``b`` under
        this scorer's scale (step 5 of ``best_vector``)."""
        if not self.curve:
            return cosine
        return float(bands(cosine, len(a) // RECORD_SIZE, len(b) // RECORD_SIZE, self.curve))

    def best(
        self,
        output: str,
        prepared: Sequence[bytes],
        input: str | None = None,
        references: Sequence[str] | None = None,
    ) -> tuple[float, int]:
        """Best score of an output against prepared references, and the index that matched;
        ``references``: their texts, for the vetoes (without them there are none)."""
        check_text(output, "output")
        if not output.strip():
            return 0.0, 0
        terms = self.input_terms(input)
        vec = self.vector(output)
        return self.best_vector(vec, prepared, terms, self.asks(input), output, references)

    def best_vector(
        self,
        vec: bytes,
        prepared: Sequence[bytes],
        input_terms: bytes | None = None,
        asked: bool = False,
        output: str | None = None,
        references: Sequence[str] | None = None,
    ) -> tuple[float, int]:
        """``best`` for an output already vectorised: one output against many evals.

        ``input_terms``: ``input_terms(question)`` (None or b"" = no input). The score of the
        output vector ``a`` against a reference vector ``b``, exactly (code that wants
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
        5. ``scale`` ``bands``: ``s`` goes through the curve (``simeval.scoring.bands``) with
           ``n_out`` and ``n_ref`` the records of ``a`` and ``b`` (``curve`` packs it). A
           question-answer pair (``asked``, see ``asks``) takes ``answer_curve``: the better of
           that and the coverage ``sh / sb`` (``sh``: ``sb``'s sum over the shared hashes only)
           through the answer knots.
        6. With ``output`` and ``references`` (the texts of ``vec`` and ``prepared``) and option
           ``contradiction`` on: a score above ``vetoes.FLOOR`` whose pair a veto fires on is
           pressed below the band (``checked``). Without the texts there are no vetoes.

        The best is the first index with the highest score (0.0 and -1 for no references).
        """
        if not vec:
            return 0.0, 0
        terms = input_terms or b""
        curve = self.answer_curve if asked else self.curve
        top, at = best(
            vec, prepared, self.pair, terms, self.input_weight, self.negators, self.negation, curve
        )
        rechecks = self.vetoing or (asked and self.answering)
        if top > vetoes.FLOOR and rechecks and output is not None and references is not None:
            top, at = -1.0, 0
            for i, rvec in enumerate(prepared):
                s = self._cos(vec, rvec, terms, asked)
                s = self.checked(s, output, references[i], vec, rvec, terms, asked)
                if s > top:
                    top, at = s, i
        return top, at

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
        asked = self.asks(input)
        top, at = -1.0, 0
        for i, ref in enumerate(refs):
            rvec = self.vector(ref)
            s = self._cos(vec, rvec, terms, asked)
            if not (vec and rvec) and same_text(output, ref):
                s = 1.0  # identical texts without scorable terms (e.g. only stop words)
            else:
                s = self.checked(s, output, ref, vec, rvec, terms, asked)
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
        if type(output) is str and type(reference) is str:
            # the usual case, in as few calls as it takes: two texts with terms
            vectors = self._vectors
            va = vectors.get(output)
            if va is None:
                va = self.vector(output)
            vb = vectors.get(reference)
            if vb is None:
                vb = self.vector(reference)
            if va and vb:
                if input is None:
                    terms, asked, curve = b"", False, self.curve
                elif type(input) is str:
                    got = self._questions.get(input) or self.question(input)
                    terms, asked, curve = got
                else:
                    terms, asked = self.input_terms(input), self.asks(input)
                    curve = self.curve_for(asked)
                s: float = cosine(
                    va,
                    vb,
                    self.pair,
                    terms,
                    self.input_weight,
                    self.negators,
                    self.negation,
                    curve,
                )
                if s > _FLOOR:  # ``checked``, inline: a call costs what the checks do
                    if asked and len(vb) <= self._together_size:
                        s = self.together(s, output, reference, va, vb, terms)
                    if self.vetoing and s > _FLOOR:
                        facts = self._facts
                        out_facts = facts.get(output)
                        ref_facts = facts.get(reference) or self.facts(reference)
                        # ``vetoes.reads_nothing``, inline: most pairs stop here
                        o = out_facts.reads if out_facts else self.reads(output)
                        r = ref_facts.reads
                        reads = (o ^ r) & _READ_ONE or r & _READ_REF or o & r & _READ_BOTH
                        if reads:
                            out_facts = out_facts or self.facts(output)
                            negation = not (terms and self.negates(terms))
                            if vetoes.veto(out_facts, ref_facts, negation) is not None:
                                return vetoes.pressed(s)
                return s
        check_text(output, "output")
        if type(reference) is str and reference.strip() and output.strip():
            va, vb = self.vector(output), self.vector(reference)
            terms, asked = b"", False
            if input is not None:
                terms, asked = self.input_terms(input), self.asks(input)
            s = self._cos(va, vb, terms, asked)
            if not (va and vb) and same_text(output, reference):
                return 1.0  # identical texts without scorable terms (e.g. only stop words)
            if s > vetoes.FLOOR:
                s = self.checked(s, output, reference, va, vb, terms, asked)
            return s
        return self.score_detail(output, reference, input)[0]

    # -- explanations ---------------------------------------------------------------------
    def explain(
        self,
        output: str,
        reference: str | Sequence[str],
        top: int = 10,
        input: str | None = None,
    ) -> Explanation:
        """The score with the terms behind it (see ``Explanation``; computed by
        ``simeval.scoring.explain``)."""
        return explaining.explain(self, output, reference, top, input)


@functools.lru_cache(maxsize=4096)
def _fold(piece: str) -> str:
    """``normalize`` of a piece of text, for the C core (cached: the same pieces recur)."""
    return normalize(piece)


def same_text(a: str, b: str) -> bool:
    """Whether two texts are the same after normalisation (case, Unicode form, whitespace):
    what makes two texts without scorable terms score 1.0."""
    return " ".join(normalize(a).split()) == " ".join(normalize(b).split())


@functools.lru_cache(maxsize=64)
def _cached_scorer(key: tuple[tuple[str, Any], ...]) -> Scorer:
    return Scorer(**options_mod.from_key(key))


def get_scorer(**options: Any) -> Scorer:
    """The shared scorer for these options (built once per process)."""
    try:
        key = options_mod.options_key(options)
        hash(key)
    except TypeError:
        raise InvalidOption(f"scorer options must be plain values, not {options!r}") from None
    idf = options.get("idf")
    if isinstance(idf, str | os.PathLike) and idf not in {"background", "pair"}:
        # a table file may change on disk: resolve it (cached by mtime) before the lookup
        key = options_mod.options_key(resolve_options(options_mod.from_key(key)))
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
