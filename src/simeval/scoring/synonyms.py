"""Synonyms in explanations and synonym suggestions.

The ``synonyms`` option (``simeval.scoring.options.synonym_groups``) makes the words of one
group one term (``Analyzer.synonym_terms``). Here: an explanation names a match made through a
synonym as such ("begin ~ commence": the output's word, then the reference's), and synonym
pairs are suggested from results a reviewer passed although the score failed them (a
reference term the output missed beside an output term the reference lacks).

>>> pairs = suggest_pairs([(["commence"], ["begin"]), (["commence", "nine"], ["begin"])])
>>> [tuple(p) for p in pairs]
[('commence', 'begin', 2), ('nine', 'begin', 1)]
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from simeval.scoring.analyzer import Analyzer

SUGGESTION_TERMS = 3  # the heaviest missing and extra terms of a result paired
SUGGESTIONS = 10  # pairs shown


def _first_words(analyzer: Analyzer, text: str) -> dict[str, str]:
    """The first word of each term of ``text`` (after synonyms), and its term before them."""
    out: dict[str, str] = {}
    for token in analyzer.tokens(text):
        term = analyzer.term(token)
        if term is not None:
            out.setdefault(term, token)
    return out


def mark_synonyms(analyzer: Analyzer, exp: Any, output: str) -> Any:
    """``exp`` (an ``Explanation``) with each shared term that matched through a synonym
    written ``output word ~ reference word``; unchanged without synonyms. The weights stay."""
    if not analyzer.synonyms or not exp.shared:
        return exp
    out_words = _first_words(analyzer, output)
    ref_words = _first_words(analyzer, exp.reference)
    by_word = {word: term for term, word in out_words.items()}
    shared = []
    for t in exp.shared:
        term = by_word.get(t.term)
        theirs = ref_words.get(term) if term is not None else None
        if theirs is not None and analyzer.base_term(theirs) != analyzer.base_term(t.term):
            t = dataclasses.replace(t, term=f"{t.term} ~ {theirs}")
        shared.append(t)
    exp.shared = shared
    return exp


class SynonymPair(NamedTuple):
    """A suggested synonym pair: the reference's word, the output's, and in how many
    reviewed results (``results``) the pair occurred."""

    reference: str
    output: str
    results: int


def suggest_pairs(
    results: Iterable[tuple[Sequence[str], Sequence[str]]],
    known: Iterable[Sequence[str]] = (),
    limit: int = SUGGESTIONS,
    analyzer: Analyzer | None = None,
) -> list[SynonymPair]:
    """Synonym pairs from results a reviewer overrode to pass: for each result, given as (its
    missing reference terms, its extra output terms), heaviest first, every pair of one of
    its first ``SUGGESTION_TERMS`` missing terms with one of its first extra ones; ranked by
    how many results have the pair (ties by the words). Pairs whose words already share a
    group of ``known`` are left out. With the eval's ``analyzer``, words count by their
    term ("begins" with "begin"), each pair shown by the words it most often came as."""

    def key(word: str) -> str:
        word = word.lower()
        term = analyzer.base_term(word) if analyzer is not None and word else None
        return term if term is not None else word

    groups = [{key(w) for w in g} for g in known]
    counts: Counter[tuple[str, str]] = Counter()
    forms: dict[tuple[str, str], Counter[tuple[str, str]]] = {}
    for missing, extra in results:
        pairs: dict[tuple[str, str], tuple[str, str]] = {}
        for m in missing[:SUGGESTION_TERMS]:
            for e in extra[:SUGGESTION_TERMS]:
                k = (key(m), key(e))
                if k[0] != k[1] and not any(k[0] in g and k[1] in g for g in groups):
                    pairs.setdefault(k, (m.lower(), e.lower()))
        for k, words in pairs.items():
            forms.setdefault(k, Counter())[words] += 1
        counts.update(pairs.keys())
    shown = {k: min(f, key=lambda w: (-f[w], w)) for k, f in forms.items()}
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], shown[kv[0]]))[:limit]
    return [SynonymPair(*shown[k], n) for k, n in ranked]
