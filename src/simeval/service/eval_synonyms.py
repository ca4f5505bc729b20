"""Synonyms of an eval: the pairs suggested from reviews, and adding one (a new version).

A result a reviewer passed although its score failed it often lacks a reference word the
output said otherwise ("commence" for "begin"): its explanation lists the first among its
missing terms and the second among its extra ones. Pairs that recur across such results are
suggested on the eval's page (``simeval.scoring.synonyms.suggest_pairs``); accepting one adds
it to the eval's ``synonyms`` option.
"""

from __future__ import annotations

from collections.abc import Sequence

from simeval.errors import InvalidInput, SimevalError
from simeval.scoring.options import analyzer_from_options
from simeval.scoring.synonyms import SynonymPair, suggest_pairs
from simeval.service.base import Core, Part
from simeval.service.evals import EvalService
from simeval.service.models import EvalOut
from simeval.service.results import ResultService

SCAN_REVIEWED = 500  # the newest reviewed results a suggestion looks at


class SynonymService(Part):
    """Synonym suggestions from reviews, and accepting one."""

    def __init__(self, core: Core, evals: EvalService, results: ResultService):
        super().__init__(core)
        self.evals = evals
        self.results = results

    def synonym_suggestions(
        self, name: str | int, limit: int = 10, scan: int = SCAN_REVIEWED
    ) -> list[SynonymPair]:
        """Synonym pairs for eval ``name`` from its results a reviewer overrode to pass (the
        newest ``scan`` reviewed ones): a reference term the output missed beside an output
        term the reference lacks, ranked by how many such results have the pair. Pairs the
        eval's synonyms already join are left out.

        >>> svc.synonym_suggestions("capital")  # doctest: +SKIP
        [SynonymPair(reference='commence', output='begin', results=3)]
        """
        ev = self.evals.get_eval(name)
        rows = self.results.list_results(eval_name=ev.id, reviewed=True, passed=True, limit=scan)
        cases = []
        for r in rows:
            if r.automated_passed or not r.explanation:
                continue  # only the reviewer's overrides say the score missed something
            missing = [t["term"] for t in r.explanation.get("missing") or ()]
            extra = [t["term"] for t in r.explanation.get("extra") or ()]
            if missing and extra:
                cases.append((missing, extra))
        try:
            analyzer = analyzer_from_options(ev.options)
        except SimevalError:
            analyzer = None  # options this version cannot read: the words as they are
        return suggest_pairs(cases, known=ev.synonyms, limit=limit, analyzer=analyzer)

    def add_synonyms(self, name: str | int, words: Sequence[str]) -> EvalOut:
        """Add a synonym group (two or more words) to eval ``name``'s ``synonyms`` option: a
        new version (which needs a new passing test, like any change of what scores)."""
        group = [w.strip() for w in words if isinstance(w, str) and w.strip()]
        if len(set(group)) < 2:
            raise InvalidInput(f"a synonym group needs at least two different words: {words!r}")
        ev = self.evals.get_eval(name)
        options = {**ev.options, "synonyms": [*ev.synonyms, group]}
        return self.evals.edit_eval(ev.id, options=options)
