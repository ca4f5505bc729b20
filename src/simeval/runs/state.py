"""What a worker keeps between the chunks of a run (``ChunkState``): the scorer or the
prepared evals, the references met so far (vectorised once, their terms ranked once for
missing terms), the terms of the inputs (questions) met so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simeval.runs.config import EvalDef, RunConfig
from simeval.runs.encode import encode_json
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.explain import Explainer, Reference, explainer, hashes, missing_terms
from simeval.scoring.required import Required, required_of
from simeval.scoring.scorer import Scorer, get_scorer

_REF_CACHE_LIMIT = 8192
_INPUT_CACHE_LIMIT = 100_000  # questions are short: their term hashes take little room


class RunReference(Reference):
    """A reference answer as a run keeps it: a ``Reference`` with its JSON text, made once
    (a results line carries it)."""

    __slots__ = ("json",)

    def __init__(self, text: str, vec: bytes):
        super().__init__(text, vec)
        self.json: str | None = None

    def encoded(self) -> str:
        """``encode_json(text)``."""
        j = self.json
        if j is None:
            j = self.json = encode_json(self.text)
        return j


def eval_spec(e: EvalDef, scoped: bool = True) -> EvalSpec:
    """The ``EvalSpec`` of a run's eval (``scoped=False``: without its input scope)."""
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
class ChunkState:
    """What a worker keeps between the chunks of one run: the scorer of a plain run, or the
    evals prepared once as an ``EvalSet`` (plus, per eval, a set of that eval alone for rows
    whose case id names it), and the references met so far (``RunReference``: by text in a
    plain run, by eval and reference number in an eval run)."""

    evals: tuple[EvalDef, ...]
    scorer: Scorer | None
    evalset: EvalSet | None
    by_name: dict[str, int]
    singles: dict[int, EvalSet] = field(default_factory=dict)
    refs: dict[str | tuple[int, int], RunReference] = field(default_factory=dict)
    inputs: dict[tuple[int, str], bytes] = field(default_factory=dict)
    plain_inputs: dict[str, bytes] = field(default_factory=dict)  # a plain run's, by text
    explainer: Explainer | None = None  # a plain run's fast path, if its scorer has one
    # per scorer (by id), its required terms prepared once (None: it has none)
    required: dict[int, Required | None] = field(default_factory=dict)

    def ref(self, text: str) -> RunReference:
        """A plain run's reference answer, vectorised once while it stays in the cache."""
        got = self.refs.get(text)
        if got is None:
            if len(self.refs) >= _REF_CACHE_LIMIT:
                self.refs.clear()
            assert self.scorer is not None
            got = self.refs[text] = RunReference(text, self.scorer.vector(text))
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
                es = self.singles[pos] = EvalSet([eval_spec(self.evals[pos], scoped=False)])
            ((group, _, scores, at),) = es.score_arrays(output, text_in)
            return [(pos, scores[0], at[0], group.scorer)]
        assert self.evalset is not None
        hits: list[tuple[int, float, int, Scorer]] = []
        for group, members, scores, at in self.evalset.score_arrays(output, text_in):
            positions, scorer = group.positions, group.scorer
            hits.extend((positions[m], scores[m], at[m], scorer) for m in members)
        if len(self.evalset.groups) > 1:
            hits.sort(key=lambda h: h[0])  # in the order of the evals file
        return hits

    def lacks(
        self,
        scorer: Scorer,
        output: str,
        rows: dict[int, tuple[bytes, set[int]]],
        vec: bytes | None = None,
    ) -> list[str]:
        """The required terms (option ``required``) the row's output lacks under ``scorer``:
        the row then fails whatever its score. ``vec``: the output's vector when the caller
        has it (a plain run), else taken once per row and scorer (``rows``)."""
        key = id(scorer)
        if key not in self.required:
            self.required[key] = required_of(scorer)
        required = self.required[key]
        if required is None:
            return []
        if not output.strip():
            return required.missing(b"")
        return required.missing(vec if vec is not None else self._row(scorer, output, rows)[0])

    def _row(
        self, scorer: Scorer, output: str, rows: dict[int, tuple[bytes, set[int]]]
    ) -> tuple[bytes, set[int]]:
        """The output's vector and term hashes for ``scorer``, once per row (``rows``)."""
        got = rows.get(id(scorer))
        if got is None:
            vec = scorer.vector(output)
            got = rows[id(scorer)] = (vec, hashes(vec))
        return got

    def eval_ref(self, pos: int, at: int, scorer: Scorer) -> RunReference:
        """Eval ``pos``'s reference ``at``, vectorised once per run."""
        got = self.refs.get((pos, at))
        if got is None:
            text = self.evals[pos].references[at]
            got = self.refs[(pos, at)] = RunReference(text, scorer.vector(text))
        return got

    def missing(
        self,
        pos: int,
        scorer: Scorer,
        output: str,
        at: int,
        rows: dict[int, tuple[bytes, set[int]]],
        top: int,
        input: str | None = None,
    ) -> list[str]:
        """``missing_terms`` of eval ``pos``'s reference ``at``: its terms ranked once per
        run, the output's terms once per row and scorer (``rows``)."""
        terms = explainer(scorer)
        ref = self.eval_ref(pos, at, scorer)
        if terms is None or top <= 0 or not output.strip():
            return missing_terms(scorer, output, ref.text, top, input)
        _, have = self._row(scorer, output, rows)
        asked = self.input_terms(scorer, input)
        if ref.asked(asked):
            return terms.missing_asked(ref, have, asked, top)
        return terms.missing_in(ref, have, top)

    def plain_missing(
        self, ref: Reference, output: str, vec: bytes, asked: bytes, top: int, input: str | None
    ) -> list[str]:
        """``missing_terms`` of a plain run's reference ``ref`` for an output (its vector
        ``vec``, its input's terms ``asked``)."""
        terms = self.explainer
        assert self.scorer is not None
        if terms is None or top <= 0 or not output.strip():
            return missing_terms(self.scorer, output, ref.text, top, input)
        have = hashes(vec)
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

    def plain_input_terms(self, input: str) -> bytes:
        """``input_terms`` of a plain run's scorer, kept in ``plain_inputs`` (by text: the
        tight loop looks there first)."""
        assert self.scorer is not None
        if len(self.plain_inputs) >= _INPUT_CACHE_LIMIT:
            self.plain_inputs.clear()
        got = self.plain_inputs[input] = self.input_terms(self.scorer, input)
        return got


_STATES: dict[str, ChunkState] = {}


def chunk_state(cfg: RunConfig) -> ChunkState:
    """This process's ``ChunkState`` of the run ``cfg`` (made at its first chunk)."""
    state = _STATES.get(cfg.token)
    if state is None:
        if len(_STATES) > 8:
            _STATES.clear()
        scorer = None if cfg.evals else get_scorer(**dict(cfg.options))
        state = ChunkState(
            cfg.evals,
            scorer,
            EvalSet([eval_spec(e) for e in cfg.evals]) if cfg.evals else None,
            {e.name: i for i, e in enumerate(cfg.evals)},
            explainer=explainer(scorer) if scorer is not None else None,
        )
        _STATES[cfg.token] = state
    return state
