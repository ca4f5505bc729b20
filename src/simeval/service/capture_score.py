"""The active evals prepared for the capture path, and one capture scored by them into its
packed results (``simeval.store.pack_parts``): what ``CaptureService`` stores with a capture
and what ``merge_proxied`` stores again for new texts."""

from __future__ import annotations

import logging
import operator
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pydantic_core

from simeval import store as store_mod
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.store import Eval, f64_bytes, i32_bytes, le_bytes, pick_entries

log = logging.getLogger("simeval.service")


@dataclass
class Columns:
    """One scorer group's part of a capture's packed results, made once per revision: the
    columns that do not depend on the output, for all of the group's evals."""

    ids: bytes
    versions: bytes
    thresholds: array[float]
    fp: int
    members: int


@dataclass
class Active:
    """The active evals of one revision, prepared: the engine and the packing columns."""

    evalset: EvalSet
    names: list[str]  # by EvalSet position
    fingerprints: list[str]
    columns: dict[int, Columns]  # by id() of the EvalSet group
    # the JSON of each eval's result with its fixed fields filled in (by EvalSet position):
    # from after the capture id to the score, its threshold, from after "passed" to the
    # matched index; and the end of the result for each of its references (by index). An
    # answer is then a few string joins per result.
    json_fixed: list[tuple[str, float, str]]
    json_refs: list[list[str]]


def eval_spec(ev: Eval) -> EvalSpec:
    """A stored eval as the scorer's ``EvalSpec`` (what captures and backtests score by)."""
    return EvalSpec(
        ev.id,
        ev.name,
        ev.version,
        tuple(ev.references),
        ev.threshold,
        ev.input_scope,
        tuple(sorted(ev.options.items())),
    )


def prepare(evals: list[Eval]) -> Active:
    specs = [eval_spec(ev) for ev in evals]
    es = EvalSet(specs, skip_broken=True)
    for name, reason in es.skipped:
        # one broken eval (e.g. its IDF table file was deleted) must not stop the others
        # from scoring: it is skipped and said so in the log
        log.warning("eval %r is skipped: %s", name, reason)
    fps: list[str] = []
    columns = {}
    for group in es.groups:
        fp = group.scorer.fingerprint
        if fp not in fps:
            fps.append(fp)
        members = [es.evals[p] for p in group.positions]
        columns[id(group)] = Columns(
            le_bytes(array("q", (e.id or 0 for e in members))),
            le_bytes(array("i", (e.version for e in members))),
            array("d", (e.threshold for e in members)),
            fps.index(fp),
            len(members),
        )
    fixed, refs = [], []
    for group in es.groups:
        for p in group.positions:
            e = es.evals[p]
            head = pydantic_core.to_json(
                {
                    "eval_id": e.id or 0,
                    "eval_name": e.name,
                    "eval_type": "similarity",
                    "eval_version": e.version,
                }
            ).decode()
            tail = pydantic_core.to_json(
                {"threshold": e.threshold, "fingerprint": group.scorer.fingerprint}
            ).decode()
            fixed.append((p, (f'-{e.id or 0}",{head[1:-1]},"score":', e.threshold, tail[1:-1])))
            refs.append(
                (
                    p,
                    [
                        f',"matched_index":{i},"matched_reference":'
                        f'{pydantic_core.to_json(r).decode()},"explanation":null,"review":null}}'
                        for i, r in enumerate(e.references)
                    ],
                )
            )
    return Active(
        es,
        [e.name for e in es.evals],
        fps,
        columns,
        [f for _, f in sorted(fixed)],
        [r for _, r in sorted(refs)],
    )


# what ``score_capture`` gives: the packed blob, (results, passes), scores by group, lacking members
Scored = tuple[
    bytes | None,
    tuple[int, int] | None,
    list[tuple[Any, list[int], Sequence[float], Sequence[int]]],
    set[tuple[int, int]],
]


def score_capture(active: Active | None, input: str, output: str) -> Scored:
    """The packed results of ``output`` (for ``input``) by the active evals (None when
    unscored), what a batch counts of them (results, passes), and what the answer's
    results are made from: the scores by group, the (group, member) missing a required
    term."""
    scored: list[tuple[Any, list[int], Sequence[float], Sequence[int]]] = []
    lacking: set[tuple[int, int]] = set()  # (group, member) missing a required term
    blob = None
    counts = None
    if active is not None:
        ids, versions, scores, thresholds, matched, passed, fps = [], [], [], [], [], [], []
        vectors: dict[int, bytes] = {}
        evalset = active.evalset
        for group, members, sc, at in evalset.score_arrays(output, input, vectors):
            cols = active.columns[id(group)]
            scored.append((group, members, sc, at))
            if len(members) == cols.members:
                ids.append(cols.ids)
                versions.append(cols.versions)
                thr: Sequence[float] = cols.thresholds
                scores.append(f64_bytes(sc))
                matched.append(i32_bytes(at))
            else:
                ids.append(pick_entries(cols.ids, members, 8))
                versions.append(pick_entries(cols.versions, members, 4))
                thr = [cols.thresholds[m] for m in members]
                sc_m = [sc[m] for m in members]
                scores.append(le_bytes(array("d", sc_m)))
                matched.append(le_bytes(array("i", (at[m] for m in members))))
                sc = sc_m
            thresholds.append(le_bytes(array("d", thr)))
            verdicts = bytes(map(operator.ge, sc, thr))
            if group.any_required:
                # an eval's required term missing fails it whatever its score
                vec = vectors.get(id(group.scorer), b"")
                lacks = [bool(evalset.missing_required(group, m, vec)) for m in members]
                verdicts = bytes(v and not x for v, x in zip(verdicts, lacks, strict=True))
                lacking.update((id(group), m) for m, x in zip(members, lacks, strict=True) if x)
            passed.append(verdicts)
            fps.append(bytes((cols.fp,)) * len(members))
        verdicts_all = b"".join(passed)
        # what a batch reports (results, passed), from the packed verdicts: no result
        # objects made only to be counted
        counts = (len(verdicts_all), verdicts_all.count(1))
        blob = store_mod.pack_parts(
            active.fingerprints,
            b"".join(ids),
            b"".join(versions),
            b"".join(scores),
            b"".join(thresholds),
            b"".join(matched),
            verdicts_all,
            b"".join(fps),
        )
    return blob, counts, scored, lacking
