"""Calibrating an eval: the threshold its labelled examples (its reviewed results, plus any
scored with it elsewhere) suggest, and writing it to the eval."""

from __future__ import annotations

from collections.abc import Sequence

from simeval.errors import InvalidInput
from simeval.scoring import calibrate as calibrate_mod
from simeval.service.base import Core, Part
from simeval.service.evals import EvalService
from simeval.service.models import AppliedThreshold, CalibrationReport, EvalOut
from simeval.service.results import ResultService


class CalibrationService(Part):
    """Eval calibration."""

    def __init__(self, core: Core, evals: EvalService, results: ResultService):
        super().__init__(core)
        self.evals = evals
        self.results = results

    def calibrate_eval(
        self,
        eval_name: str | int,
        examples: Sequence[tuple[float, bool]] | None = None,
        *,
        by: str = "f1",
        apply: bool = False,
    ) -> CalibrationReport:
        """Suggest a threshold for an eval from labelled examples: its reviewed results
        (``labelled_results``: a review passes when its score is at or above the result's
        threshold), then ``examples``, (score, passed) pairs scored with the eval elsewhere
        (e.g. a labelled file). ``by``: the metric the suggestion maximises (f1, accuracy).
        ``apply=True`` writes the suggested threshold to the eval (a new version; an active
        eval becomes a draft until a test of it passes and it is activated again).

        Returns ``simeval.scoring.calibrate.calibrate``'s report with ``reviews`` (how many
        examples were reviews), ``eval`` (name, version, status, threshold and the metrics at
        it), the eval's ``fingerprint`` and ``options``, and with ``apply`` an ``applied``
        entry (threshold and status before and after, version, ``changed``). ``InvalidInput``
        when there is nothing to learn from.
        """
        ev = self.evals.get_eval(eval_name)
        labelled = self.results.labelled_results(ev.name)
        if not labelled and examples is None:
            raise InvalidInput(
                f"eval {ev.name!r} has no reviewed results yet: review some results "
                "(simeval results review) or give a labelled FILE"
            )
        pairs = [*labelled, *(examples or ())]
        scores = [score for score, _ in pairs]
        labels = [passed for _, passed in pairs]
        report = CalibrationReport.model_validate(
            {
                **calibrate_mod.calibrate(scores, labels, by=by),
                "reviews": len(labelled),
                "eval": {
                    "name": ev.name,
                    "version": ev.version,
                    "status": ev.status,
                    "threshold": ev.threshold,
                    "at_threshold": calibrate_mod.classify(scores, labels, ev.threshold),
                },
                "fingerprint": ev.fingerprint,
                "options": ev.options,
            }
        )
        if apply:
            report.applied = self._apply_threshold(ev, report.suggested.threshold)
        return report

    def _apply_threshold(self, ev: EvalOut, threshold: float) -> AppliedThreshold:
        """Write ``threshold`` to the eval (a new version) unless it has it already."""
        after = (
            self.evals.edit_eval(ev.name, threshold=threshold) if threshold != ev.threshold else ev
        )
        return AppliedThreshold(
            eval=ev.name,
            threshold_before=ev.threshold,
            threshold=after.threshold,
            version=after.version,
            status_before=ev.status,
            status=after.status,
            active_version=after.active_version,
            pending_version=after.pending_version,
            changed=threshold != ev.threshold,
        )
