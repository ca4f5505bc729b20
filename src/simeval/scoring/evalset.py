"""A prepared set of evals, scored against one output at once.

Capture (every active eval), data-set runs (``simeval run --evals``) and the tester all score
one output against many evals. ``EvalSet`` prepares the evals once: their reference answers
are vectorised, grouped by scorer configuration, and put in an exact inverted index
(``simeval.scoring._index``), so one output is vectorised once per configuration and scored against
every reference it shares a term with, in one pass. The scores are bit-for-bit those of
``Scorer.score_detail(output, references)`` for each eval (the index adds the same products in
the same order as the cosine does, the question's terms and negation included; the tests hold
this on generated texts and every option set), including its rules for empty texts: an output
without scorable terms scores 1.0 only against a reference that is the same text, and a
whitespace-only output scores 0.0.

Scope matching lives here too: an eval with an input scope scores only outputs whose input has
the same ``scope_key``.

>>> es = EvalSet([EvalSpec(1, "capital", 1, ("Paris is the capital of France.",), 0.8)])
>>> scored = es.score("The capital of France is Paris.", input="Capital of France?")
>>> [(r.name, round(r.score, 3), r.passed) for r in scored]
[('capital', 1.0, True)]
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from simeval.errors import SimevalError
from simeval.scoring import vetoes
from simeval.scoring.analyzer import scope_key
from simeval.scoring.required import Required, required_of
from simeval.scoring.scorer import Scorer, get_scorer, same_text

try:
    from simeval.scoring._index import Index
except ImportError:  # pragma: no cover - only without a C compiler at install time
    Index = None


@dataclass(frozen=True)
class EvalSpec:
    """What scoring needs of one eval (a stored eval version, or an eval of a data-set file)."""

    id: int | None
    name: str
    version: int
    references: tuple[str, ...]
    threshold: float
    input_scope: str | None = None
    options: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class Scored:
    """One eval's result for one output."""

    position: int  # the eval's index in the EvalSet
    id: int | None
    name: str
    version: int
    score: float
    passed: bool
    threshold: float
    matched_index: int
    fingerprint: str
    references: tuple[str, ...]
    # the eval's required terms the output lacks (option ``required``): it fails whatever
    # its score
    missing_required: tuple[str, ...] = ()


@dataclass
class _Group:
    """The evals that share one scorer configuration: one output vector serves them all."""

    scorer: Scorer
    positions: list[int]  # EvalSet positions, in order
    prepared: list[list[bytes]]  # per member, its reference vectors
    # per member, its required terms (``simeval.scoring.required``), None for none
    required: list[Required | None] = field(default_factory=list)
    any_required: bool = False  # whether a member has any (the hot paths skip the check)
    index: Any = None  # _index.Index over every member's references (non-pair IDF)
    # members whose scores need score_detail's empty-vector rule (a reference without terms)
    special: list[int] = field(default_factory=list)
    unscoped: list[int] = field(default_factory=list)  # member numbers without a scope
    scoped: dict[str, list[int]] = field(default_factory=dict)  # scope key -> member numbers

    def members_for(self, key: str | None) -> list[int]:
        extra = self.scoped.get(key, []) if key is not None else []
        if not extra:
            return self.unscoped
        return sorted(self.unscoped + extra)


class EvalSet:
    """Evals prepared once, to score many outputs (see the module doc).

    ``evals`` are ``EvalSpec``; an eval whose scorer cannot be built (an IDF table file gone)
    raises, unless ``skip_broken`` is set, in which case it is left out and listed in
    ``skipped`` as (name, reason).
    """

    def __init__(self, evals: Sequence[EvalSpec], *, skip_broken: bool = False):
        self.evals: list[EvalSpec] = []
        self.skipped: list[tuple[str, str]] = []
        self.groups: list[_Group] = []
        by_config: dict[tuple[str, str], _Group] = {}
        for spec in evals:
            try:
                scorer = get_scorer(**dict(spec.options))
                prepared = scorer.prepare(list(spec.references))
                required = required_of(scorer)
            except SimevalError as exc:
                # one broken eval (its IDF table file deleted) must not stop the others
                if not skip_broken:
                    raise
                self.skipped.append((spec.name, str(exc)))
                continue
            position = len(self.evals)
            self.evals.append(spec)
            key = (scorer.fingerprint, repr(sorted(dict(spec.options).items())))
            group = by_config.get(key)
            if group is None:
                group = by_config[key] = _Group(scorer, [], [])
                self.groups.append(group)
            member = len(group.positions)
            group.positions.append(position)
            group.prepared.append(prepared)
            group.required.append(required)
            group.any_required |= required is not None
            if not all(prepared):
                group.special.append(member)
            if spec.input_scope is None:
                group.unscoped.append(member)
            else:
                group.scoped.setdefault(scope_key(spec.input_scope), []).append(member)
        for group in self.groups:
            if Index is not None and not group.scorer.pair:
                offsets = array("i", [0])
                flat: list[bytes] = []
                for refs in group.prepared:
                    flat.extend(refs)
                    offsets.append(len(flat))
                sc = group.scorer
                negators = sc.negator_hashes if sc.negation != 1.0 else b""
                group.index = Index(flat, offsets.tobytes(), negators, sc.negation, sc.curve)
        self.scoped = any(g.scoped for g in self.groups)

    def __len__(self) -> int:
        return len(self.evals)

    def score(self, output: str, input: str | None = None) -> list[Scored]:
        """Every eval in scope of ``input``, scored against ``output`` (in EvalSet order)."""
        return list(self.iter_score(output, input))

    def iter_score(self, output: str, input: str | None = None) -> Iterator[Scored]:
        vectors: dict[int, bytes] = {}
        for group, members, scores, at in self.score_arrays(output, input, vectors):
            scorer = group.scorer
            for m in members:
                spec = self.evals[group.positions[m]]
                s = scores[m]
                lacks = self.missing_required(group, m, vectors.get(id(scorer), b""))
                yield Scored(
                    group.positions[m],
                    spec.id,
                    spec.name,
                    spec.version,
                    s,
                    s >= spec.threshold and not lacks,
                    spec.threshold,
                    at[m],
                    scorer.fingerprint,
                    spec.references,
                    lacks,
                )

    def missing_required(self, group: _Group, member: int, vec: bytes) -> tuple[str, ...]:
        """The required terms of a group's member an output lacks (its vector ``vec`` in the
        group's scorer, b"" for a blank output): the hot paths call this after
        ``score_arrays`` (with ``vectors``) and fail the eval when it names any."""
        required = group.required[member]
        return tuple(required.missing(vec)) if required is not None else ()

    def score_arrays(
        self,
        output: str,
        input: str | None = None,
        vectors: dict[int, bytes] | None = None,
    ) -> Iterator[tuple[_Group, list[int], Sequence[float], Sequence[int]]]:
        """The raw form of ``score`` for hot paths: per group, the member numbers in scope and
        the best score and matched reference of every member (indexed by member number).
        ``vectors``, when given, receives the output's vector per group (keyed by ``id`` of
        the group's scorer), for callers that need it again (missing terms)."""
        key = scope_key(input) if (input is not None and self.scoped) else None
        blank = not output.strip()
        for group in self.groups:
            members = group.members_for(key)
            if not members:
                continue
            n = len(group.positions)
            if blank:
                yield group, members, [0.0] * n, [0] * n
                continue
            scorer = group.scorer
            vec = scorer.vector(output)
            if vectors is not None:
                vectors[id(scorer)] = vec
            terms = scorer.input_terms(input) if input is not None else b""
            asked = scorer.asks(input)
            if group.index is not None and vec:
                curve = scorer.answer_curve if asked else b""
                raw_scores, raw_at = group.index.best(vec, terms, scorer.input_weight, curve)
                scores: Sequence[float] = memoryview(raw_scores).cast("d")
                at: Sequence[int] = memoryview(raw_at).cast("i")
                # the members a veto may press (above its floor) and those with a reference
                # without terms take score_detail's own loop
                redo = group.special
                if scorer.vetoing or (asked and scorer.answering):
                    floor = vetoes.FLOOR
                    high = [m for m in range(n) if scores[m] > floor]
                    redo = sorted(set(high) | set(redo)) if redo else high
                if redo:
                    scores, at = list(scores), list(at)
                    for m in redo:
                        scores[m], at[m] = self._detail(group, m, vec, output, terms, asked)
            else:
                pairs = [self._detail(group, m, vec, output, terms, asked) for m in range(n)]
                scores = [p[0] for p in pairs]
                at = [p[1] for p in pairs]
            yield group, members, scores, at

    def _detail(
        self,
        group: _Group,
        member: int,
        vec: bytes,
        output: str,
        terms: bytes,
        asked: bool = False,
    ) -> tuple[float, int]:
        """``score_detail``'s loop for one eval, on its prepared vectors."""
        scorer = group.scorer
        refs = self.evals[group.positions[member]].references
        prepared = group.prepared[member]
        if vec and all(prepared):
            return scorer.best_vector(vec, prepared, terms, asked, output, refs)
        top, at = -1.0, 0
        for i, rvec in enumerate(prepared):
            s = (
                scorer.best_vector(vec, [rvec], terms, asked, output, refs[i : i + 1])[0]
                if vec and rvec
                else 0.0
            )
            if not (vec and rvec) and same_text(output, refs[i]):
                s = 1.0
            if s > top:
                top, at = s, i
        return top, at
