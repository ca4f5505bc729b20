"""A run's rows as a report reads them (``ReportRow``): from a stored run, or from the results
file a run wrote; and the explanation of a failing row (the terms found and missing, the
veto), from the scorer options the run kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from simeval.datafiles.columns import DEFAULT_COLUMNS, Columns
from simeval.errors import SimevalError
from simeval.runs.baseline import case_key, case_name, iter_results_file
from simeval.scoring.scorer import Scorer, get_scorer

if TYPE_CHECKING:
    from simeval.service import Service

TOP_TERMS = 10  # terms found and missing a failing row names


@dataclass
class ReportRow:
    """One result of a run: where it came from, its texts, score and verdict; for a failing
    row the terms the output holds (``found``) and lacks (``missing``, required terms first)
    and the ``reason`` (the veto that fired); against a baseline its ``status`` (``new``,
    ``unchanged``, ``regressed``, ``improved``), its score ``before`` and whether it
    ``passed_before``."""

    n: int  # its place among the run's results, from 1
    where: str
    case_id: str | None
    ordinal: int
    eval: str | None
    input: str | None
    output: str
    reference: str | None
    score: float
    passed: bool
    threshold: float | None
    fingerprint: str | None = None
    missing: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    reason: str | None = None
    note: str | None = None
    status: str | None = None
    before: float | None = None
    passed_before: bool | None = None

    @property
    def case(self) -> str:
        """How the case is named: its id, else its input (shortened), else where it is."""
        return case_name(self.case_id, self.input, self.where)

    @property
    def key(self) -> bytes:
        """The case's key across runs (``case_key``), as a baseline pairs it."""
        return case_key(self.case_id, self.input or None, self.ordinal, self.eval)


def stored_rows(svc: Service, run_id: int) -> Iterator[ReportRow]:
    """The rows of stored run ``run_id``, in the run's order (``Service.iter_run_rows``)."""
    for n, row in enumerate(svc.iter_run_rows(run_id)):
        case = row.case
        yield ReportRow(
            n=n + 1,
            where=str(case.get("row") or f"result r{row.id}"),
            case_id=case.get("id"),
            ordinal=int(case.get("ordinal", n)),
            eval=row.eval_name,
            input=row.input,
            output=row.output,
            reference=row.reference,
            score=row.score,
            passed=row.passed,
            threshold=row.threshold,
            fingerprint=row.fingerprint or None,
        )


def file_rows(path: str, columns: Columns = DEFAULT_COLUMNS) -> Iterator[ReportRow]:
    """The rows of a results file ``simeval run`` wrote (any format), in its order."""
    for n, row in enumerate(iter_results_file(path, columns)):
        yield ReportRow(
            n=n + 1,
            where=row["where"],
            case_id=row["id"],
            ordinal=row["ordinal"],
            eval=row["eval"],
            input=row["input"],
            output=row["output"] or "",
            reference=row["reference"],
            score=row["score"],
            passed=row["pass"],
            threshold=row["threshold"],
            fingerprint=row["fingerprint"],
            missing=row["missing_terms"],
        )


def run_options(
    options: Mapping[str, object], evals: Mapping[str, Mapping[str, object]] | None
) -> dict[str, object]:
    """Scorer options in the shape a stored run keeps them (``Run.options``): ``scorer`` for a
    run with reference columns, ``evals`` (options by eval name) for an eval-file run."""
    if evals is not None:
        return {"evals": {name: dict(o) for name, o in evals.items()}}
    return {"scorer": dict(options)}


class Explainer:
    """Explains failing rows with the scorer options a run kept (``Run.options``, or
    ``run_options``): one scorer per eval, built once."""

    def __init__(self, options: Mapping[str, object]):
        self.options = options
        self.scorers: dict[str | None, Scorer | str] = {}

    def scorer(self, eval_name: str | None) -> Scorer | str:
        """The scorer of an eval's rows (None: a run with reference columns), or why there
        is none."""
        got = self.scorers.get(eval_name)
        if got is None:
            # the service's reading of a run's options (an eval-file run keeps them by name),
            # imported with the database layer only when a row is explained
            from simeval.service.results import run_row_options

            kept = run_row_options(dict(self.options), eval_name)
            if kept is None:
                got = "cannot explain: the run did not keep its scorer options"
            else:
                try:
                    got = get_scorer(**kept)
                except SimevalError as exc:
                    got = f"cannot explain: the run's scorer cannot be built now ({exc})"
            self.scorers[eval_name] = got
        return got

    def explain(self, row: ReportRow) -> None:
        """Fill a row's ``found``, ``missing`` and ``reason`` from its whole texts (and a
        ``note`` when it cannot be explained, or was scored with another scorer)."""
        scorer = self.scorer(row.eval)
        if isinstance(scorer, str) or row.reference is None:
            row.note = scorer if isinstance(scorer, str) else "no matched reference kept"
            return
        exp = scorer.explain(row.output, [row.reference], TOP_TERMS, row.input)
        row.found = [t.term for t in exp.shared]
        missing = [t.term for t in exp.missing]
        row.missing = exp.missing_required + [m for m in missing if m not in exp.missing_required]
        row.reason = exp.reason
        if exp.missing_required:
            row.reason = "required term missing: " + ", ".join(exp.missing_required)
            if exp.reason:
                row.reason += f"; {exp.reason}"
        if row.fingerprint and scorer.fingerprint != row.fingerprint:
            row.note = (
                f"explained with scorer {scorer.fingerprint}; the row was scored with "
                f"{row.fingerprint}, so terms may not match its score exactly"
            )
