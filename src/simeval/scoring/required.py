"""Required terms: words an output must contain to pass, whatever its score.

An eval's ``required`` option (``simeval.scoring.options.required_words``) lists them. Each is
analysed exactly as scoring analyses text (the eval's analyzer: normalisation, stemming, the
term prefix, its synonyms), so "Paris," in an output meets ``required: [paris]``; a phrase is
present when every one of its terms is. The check reads the output's packed vector, which
scoring has already made, so it costs a set lookup per required term.

>>> from simeval.scoring.scorer import get_scorer
>>> scorer = get_scorer(required=["paris", "Seine"])
>>> missing_required(scorer, "It is Paris, of course.")
['Seine']
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from typing import Protocol

from simeval.errors import InvalidOption
from simeval.scoring._vector import term_hash


class TermScorer(Protocol):
    """What the required terms need of a scorer (``simeval.scoring.scorer.Scorer``, which
    imports this module): its options, its terms of a text, its packed vector of one."""

    @property
    def options(self) -> Mapping[str, object]: ...

    def terms(self, text: str) -> list[str]: ...

    def vector(self, text: str) -> bytes: ...


class Required:
    """An eval's required terms, analysed once: ``missing(vec)`` names those an output's
    packed vector lacks, in the order the eval lists them."""

    __slots__ = ("terms",)

    def __init__(self, scorer: TermScorer, words: tuple[str, ...]):
        terms: list[tuple[str, frozenset[int]]] = []
        for word in words:
            hashes = frozenset(term_hash(t) for t in scorer.terms(word) if " " not in t)
            if not hashes:
                raise InvalidOption(f"required term {word!r} has no scorable word")
            terms.append((word, hashes))
        self.terms = tuple(terms)

    def missing(self, vec: bytes) -> list[str]:
        """The required terms the output whose packed vector is ``vec`` lacks."""
        if not self.terms:
            return []
        have = set(array("Q", vec)[0::3]) if vec else set()
        return [word for word, hashes in self.terms if not hashes <= have]


def required_of(scorer: TermScorer) -> Required | None:
    """The prepared required terms of a scorer's options, or None when it has none."""
    words = scorer.options.get("required") or ()
    assert isinstance(words, tuple)  # resolve_options gives the words as a tuple
    return Required(scorer, words) if words else None


def missing_required(scorer: TermScorer, output: str) -> list[str]:
    """The scorer's required terms (option ``required``) that ``output`` lacks, after the
    same analysis as scoring."""
    required = required_of(scorer)
    if required is None:
        return []
    return required.missing(scorer.vector(output) if output.strip() else b"")
