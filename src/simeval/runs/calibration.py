"""Calibrating a threshold from labelled examples: a file's rows with a label column, and/or
the human reviews of a stored eval's results (``simeval calibrate``).

The file's rows are scored by a run (with its reference columns and scorer options, or with
the stored eval's references and options), the labels parsed (pass/fail, true/false, yes/no,
0/1, or a graded score with ``cut``), and the threshold swept
(``simeval.scoring.calibrate``); with an eval, the service's calibration adds its reviews and
can write the suggested threshold to it (``apply``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from simeval import service
from simeval.datafiles.columns import DEFAULT_COLUMNS, Columns
from simeval.errors import InvalidInput
from simeval.runs.config import EvalDef
from simeval.runs.run import Progress, RunOptions, resolve_workers, run_file
from simeval.scoring import calibrate as calibrate_mod

if TYPE_CHECKING:
    from simeval.service.models import EvalOut

# the keys of ``simeval.scoring.calibrate.calibrate``'s report, in its order
_SWEEP = (
    "examples",
    "positives",
    "negatives",
    "by",
    "suggested",
    "best_candidate",
    "roc_auc",
    "at_default",
    "table",
    "warning",
)


@dataclass
class CalibrationRequest:
    """What ``simeval calibrate`` asks: a labelled ``file`` (its ``label_col``, read with
    ``columns``, ``fmt``, ``quoting``; scored with ``options`` or the eval's) and/or a stored
    eval (``eval_name`` in ``db``, whose reviews count as labels); the metric the suggestion
    maximises (``by``); ``apply``: write it to the eval."""

    file: str | None = None
    label_col: str | None = None
    cut: float | None = None
    by: str = "f1"
    eval_name: str | None = None
    apply: bool = False
    db: str | None = None
    columns: Columns = DEFAULT_COLUMNS
    options: dict[str, object] = field(default_factory=dict)
    fmt: str | None = None
    quoting: bool = True
    workers: int | None = None
    on_error: str = "fail"


@dataclass
class CalibrationSummary:
    """What ``simeval calibrate`` reports: a threshold sweep over labelled scores, the
    threshold it suggests, and where the labels came from (with an eval, the service's
    ``CalibrationReport`` of its reviews and the file's rows, flattened as the command prints
    it).

    ``suggested``, ``best_candidate``, ``at_default`` and each row of ``table`` are the
    metrics at a threshold (``simeval.scoring.calibrate.classify``). ``source``: the labelled
    file; ``reviews``: how many examples were a stored eval's reviews; ``eval``: that eval
    (name, version, status, threshold and the metrics at it); ``applied``: the threshold
    written to it (with ``apply``).
    """

    examples: int
    positives: int
    negatives: int
    by: str
    suggested: dict[str, float]
    best_candidate: dict[str, float]
    roc_auc: float
    at_default: dict[str, float]
    table: list[dict[str, float]]
    warning: str | None
    source: str | None
    label_col: str | None
    cut: float | None
    skipped: int
    reviews: int
    fingerprint: str | None
    options: dict[str, object] | None
    eval: dict[str, Any] | None = None
    applied: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, object]:
        """The report as ``simeval calibrate --json`` prints it."""
        keys = (*_SWEEP, "source", "label_col", "cut", "skipped", "reviews")
        out = {k: getattr(self, k) for k in keys}
        out.update(fingerprint=self.fingerprint, options=self.options)
        if self.eval is not None:
            out["eval"] = self.eval
        if self.applied is not None:
            out["applied"] = self.applied
        return out


def calibrate_request(
    request: CalibrationRequest, progress: Progress | None = None
) -> CalibrationSummary:
    """Score the labelled file (if any), then sweep: over its labels alone, or with the
    stored eval's reviews through the service (which writes the threshold with ``apply``).
    ``InvalidInput`` for a label that is not one (unless ``on_error="skip"``: counted in
    ``skipped``) or when there is nothing to learn from."""
    svc = ev = None
    if request.eval_name is not None:
        svc = service.open_service(request.db)
        ev = svc.get_eval(request.eval_name)
    scores: list[float] = []
    labels: list[bool] = []
    skipped = 0
    fingerprint = options = None
    if request.file is not None:
        summary = run_file(request.file, _labelled_run(request, ev), progress)
        fingerprint, options = summary.fingerprint, summary.options
        skipped = summary.skipped
        for where, value, score in summary.collected or ():
            try:
                labels.append(calibrate_mod.parse_label(value, request.cut, where))
            except InvalidInput:
                if request.on_error != "skip":
                    raise
                skipped += 1
                continue
            scores.append(score)
    head: dict[str, Any] = {
        "source": request.file,
        "label_col": request.label_col,
        "cut": request.cut,
        "skipped": skipped,
    }
    if svc is not None and ev is not None:
        examples = list(zip(scores, labels, strict=True)) if request.file is not None else None
        report = svc.calibrate_eval(ev.name, examples, by=request.by, apply=request.apply)
        found = report.model_dump()
        sweep = {k: found[k] for k in _SWEEP}
        return CalibrationSummary(
            **sweep,
            **head,
            reviews=found["reviews"],
            fingerprint=found["fingerprint"],
            options=found["options"],
            eval=found["eval"],
            applied=found.get("applied"),
        )
    sweep = calibrate_mod.calibrate(scores, labels, by=request.by)
    return CalibrationSummary(**sweep, **head, reviews=0, fingerprint=fingerprint, options=options)


def _labelled_run(request: CalibrationRequest, ev: EvalOut | None) -> RunOptions:
    """The run that scores the labelled file: with the eval's references and options (no
    input scope: every labelled row is an example for this eval), else the file's."""
    evals: tuple[EvalDef, ...] = ()
    if ev is not None:
        evals = (
            EvalDef(
                ev.name,
                tuple(ev.references),
                ev.threshold,
                options=tuple(sorted(ev.options.items())),
                version=ev.version,
            ),
        )
    return RunOptions(
        columns=request.columns,
        options=request.options,
        evals=evals,
        fmt=request.fmt,
        quoting=request.quoting,
        write_results=False,
        on_error=request.on_error,
        workers=resolve_workers(request.workers),
        worst=0,
        collect=request.label_col,
    )
