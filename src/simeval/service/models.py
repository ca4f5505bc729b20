"""What the service returns: pydantic models, JSON-ready with ``.model_dump(mode="json")``.

The same models are the HTTP API's response models. Times are timezone-aware UTC.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Literal, TypedDict

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, computed_field

Status = Literal["draft", "active", "archived"]
Bucket = Literal["hour", "day", "week"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=False, extra="forbid")


class ReviewOut(_Model):
    """A person's override of a result's score; it decides pass/fail."""

    score: float
    note: str
    created_at: datetime
    reviewer: str | None = None  # who reviewed; None for reviews stored before it was kept


class TestOut(_Model):
    """A stored dry run of an eval version on a sample input and output."""

    __test__ = False  # not a pytest test class

    id: int
    eval_name: str
    version: int
    input: str
    output: str
    score: float
    passed: bool
    threshold: float
    matched_index: int
    matched_reference: str
    explanation: dict[str, Any]
    missing_required: list[str] = Field(
        default_factory=list,
        description="the eval's required terms the output lacks (it then fails whatever its score)",
    )
    fingerprint: str
    in_scope: bool = Field(description="whether the sample input matches the eval's input scope")
    created_at: datetime


class EvalStats(_Model):
    """Results of an eval so far (reviews count as they decide)."""

    results: int
    pass_rate: float | None
    mean_score: float | None


class EvalOut(_Model):
    """An eval definition at its current version."""

    id: int
    name: str
    type: Literal["similarity"] = "similarity"
    status: Status
    version: int
    references: list[str]
    threshold: float
    strictness: str
    input_scope: str | None
    options: dict[str, Any]
    required: list[str] = Field(
        default_factory=list,
        description="terms an output must contain to pass, whatever its score (options.required)",
    )
    synonyms: list[list[str]] = Field(
        default_factory=list, description="groups of words counted as one term (options.synonyms)"
    )
    fingerprint: str
    created_at: datetime
    updated_at: datetime
    can_activate: bool
    activation_blocker: str | None = Field(
        None, description="why the eval cannot be activated now (None when it can, or is active)"
    )
    last_test: TestOut | None = None
    stats: EvalStats | None = None
    active_version: int | None = Field(
        None, description="the version scoring captures (None unless the eval is active)"
    )
    pending_version: int | None = Field(
        None, description="an edited version waiting for a test and activation, if any"
    )


class EvalVersionOut(_Model):
    """One kept version of an eval and what changed from the previous one."""

    version: int
    created_at: datetime
    changes: dict[str, Any]
    references: list[str]
    threshold: float
    input_scope: str | None
    options: dict[str, Any]
    fingerprint: str
    created_by: str | None = None  # the user who made it; None before users, or without any


class ResultOut(_Model):
    """One eval applied to one capture, or one data-set row of a run.

    ``passed`` is the effective verdict (a review wins); ``automated_passed`` and ``score`` are
    what the scorer said and never change.
    ``id`` is "<capture>-<eval>" for a captured result, "r<row>" for a data-set run row.
    """

    id: str
    capture_id: int | None
    run_id: int | None
    run_status: str | None = Field(
        default=None, description="The run's status for a run's row (complete, interrupted...)"
    )
    eval_id: int | None
    eval_name: str | None
    eval_type: str = "similarity"
    eval_version: int | None
    input: str
    output: str
    conversation_id: str | None
    metadata: dict[str, Any] | None = None
    captured_at: datetime
    score: float
    passed: bool
    automated_passed: bool
    threshold: float
    fingerprint: str
    matched_reference: str | None
    matched_index: int
    explanation: dict[str, Any] | None
    review: ReviewOut | None
    created_at: datetime


class CaptureResultOut(_Model):
    """A result as returned with its capture: the capture's input and output are not repeated
    (with many evals and a long output they would dominate the response)."""

    id: str
    eval_id: int
    eval_name: str
    eval_type: str = "similarity"
    eval_version: int
    score: float
    passed: bool
    threshold: float
    fingerprint: str
    matched_index: int
    matched_reference: str
    explanation: dict[str, object] | None = None
    review: ReviewOut | None = None


class CaptureResultRow(TypedDict):
    """A fresh capture's result as the plain dict its answer makes (``CaptureResultOut``'s
    fields, its values checked already): made only when asked for."""

    id: str
    eval_id: int
    eval_name: str
    eval_type: str
    eval_version: int
    score: float
    passed: bool
    threshold: float
    fingerprint: str
    matched_index: int
    matched_reference: str
    explanation: Mapping[str, object] | None
    review: None


class CaptureOut(_Model):
    """One engine response and the results of the active evals that matched it."""

    id: int
    input: str
    output: str
    conversation_id: str | None
    metadata: dict[str, object] | None
    captured_at: datetime
    evaluated: bool = Field(description="False when automatic evaluation was off")
    capture_key: str | None = Field(
        None, description="The client's key: a capture with a stored key is not stored again"
    )
    # built on first use: a capture scored by 1,000 evals answers without making 1,000
    # objects a caller may never look at (the capture hot path); ``build`` sets it, to the
    # list or to a function giving the results as plain dicts of checked values
    _results: list[CaptureResultOut] | Callable[[], list[CaptureResultRow]] = PrivateAttr(
        default_factory=list
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def results(self) -> list[CaptureResultOut]:
        """The results of the active evals that matched the capture."""
        made = self._results
        if callable(made):
            made = self._results = _CAPTURE_RESULTS.validate_python(made())
        return made

    _results_json: Callable[[], bytes] | None = PrivateAttr(default=None)
    _replayed: bool = PrivateAttr(default=False)
    # (results, passed) known when the capture was scored (its packed verdicts): a batch
    # counts them without making the results
    _counts: tuple[int, int] | None = PrivateAttr(default=None)

    @property
    def replayed(self) -> bool:
        """True when the capture's key was already stored: this is the stored capture, and
        nothing new was stored (the API answers 200 instead of 201)."""
        private = self.__pydantic_private__
        return bool(private and private.get("_replayed"))

    @classmethod
    def build(
        cls,
        results: list[CaptureResultOut] | Callable[[], list[CaptureResultRow]],
        results_json: Callable[[], bytes] | None = None,
        counts: tuple[int, int] | None = None,
        **fields: Any,
    ) -> CaptureOut:
        """A capture from checked values and its results (a list, or a function making them;
        ``results_json`` a function making their JSON directly, for ``dump_json``; ``counts``
        the (results, passed) they hold, for ``result_counts``).

        What ``model_construct`` makes, without its per-call generic work (the capture hot
        path): every field is given or takes its default, nothing is validated."""
        out = cls.__new__(cls)
        values = {name: fields.pop(name, default) for name, default in _CAPTURE_DEFAULTS}
        if fields or _MISSING in values.values():
            raise TypeError(f"CaptureOut fields not as declared: {sorted(fields) or values}")
        _set = object.__setattr__
        _set(out, "__dict__", values)
        _set(out, "__pydantic_fields_set__", set(values))
        _set(out, "__pydantic_extra__", None)
        _set(
            out,
            "__pydantic_private__",
            {
                "_results": results,
                "_results_json": results_json,
                "_replayed": False,
                "_counts": counts,
            },
        )
        return out

    def mark_replayed(self) -> None:
        """Mark this as the stored capture answered for a key stored before."""
        self.__pydantic_private__["_replayed"] = True  # type: ignore[index]

    def result_counts(self) -> tuple[int, int]:
        """(results, passed), without making result objects never asked for (batches)."""
        private = self.__pydantic_private__
        assert private is not None
        counts: tuple[int, int] | None = private.get("_counts")
        if counts is not None:
            return counts
        made = private["_results"]
        if callable(made):
            rows = made()
            return len(rows), sum(bool(r["passed"]) for r in rows)
        return len(made), sum(r.passed for r in made)

    def dump_json(self) -> bytes:
        """``model_dump_json()``, without making result objects when they were never asked for:
        the same JSON (the same core serializer), for the capture endpoint."""
        private = self.__pydantic_private__
        assert private is not None
        made = private["_results"]
        if not callable(made):
            return self.model_dump_json().encode()
        values = self.__dict__
        data = {name: values[name] for name, _ in _CAPTURE_DEFAULTS}
        make_json = private["_results_json"]
        if make_json is None:
            data["results"] = made()
            return pydantic_core.to_json(data)
        data["results"] = []
        envelope = pydantic_core.to_json(data)
        assert envelope.endswith(b"[]}")  # results is the last field
        return b"".join((envelope[:-3], make_json(), b"}"))


_MISSING: object = object()
# CaptureOut's fields in order, with their defaults (required ones: _MISSING, then refused)
_CAPTURE_DEFAULTS = [
    (name, _MISSING if info.is_required() else info.get_default(call_default_factory=True))
    for name, info in CaptureOut.model_fields.items()
]
_CAPTURE_RESULTS = TypeAdapter(list[CaptureResultOut])


class TrendBucket(_Model):
    """Results of one eval in one time bucket (UTC)."""

    start: datetime
    count: int
    mean_score: float
    pass_rate: float
    reviewed: int
    versions: list[int]
    fingerprints: list[str]
    fingerprint_break: bool = Field(
        description="the scorer fingerprint differs from the previous bucket's, or varies within"
        " this one: scores on either side are not comparable"
    )
    version_change: bool


class TrendOut(_Model):
    """An eval's results over time."""

    eval_name: str
    bucket: Bucket
    threshold: float
    buckets: list[TrendBucket]


class SettingsOut(_Model):
    """Store-wide settings."""

    auto_evaluate: bool
    retention_days: int | None = Field(description="None keeps everything; else 7, 30, 90, 180")
    otlp_export: str | None = Field(
        None, description="OTLP/HTTP URL `simeval serve` sends each result to (None: none)"
    )
    indexed_meta: list[str] = Field(
        default_factory=list,
        description="Metadata keys declared indexed beside the defaults (filters on them are "
        "answered by the database)",
    )


class CleanupOut(_Model):
    """What ``cleanup`` deleted."""

    captures: int
    results: int
    tests: int
    runs: int
    cutoff: datetime | None


class CaptureReport(_Model):
    """What ``capture_many`` stored: captures, their results, and how many passed/failed;
    ``replayed``: rows not stored because their capture key was stored already."""

    captures: int
    results: int
    passed: int
    failed: int
    replayed: int = 0


class RunOut(_Model):
    """A stored data-set run."""

    id: int
    name: str
    source: str
    options: dict[str, Any]
    summary: dict[str, Any]
    created_at: datetime
    results: int
    status: str = Field(
        default="complete",
        description="running, complete, or interrupted (killed while storing: its rows are "
        "incomplete; delete it with DELETE /api/runs/{id})",
    )
    heartbeat_at: datetime | None = None
    passed: int = 0
    pass_rate: float | None = None
    mean_score: float | None = None
    engine: str | None = Field(default=None, description="The engine that answered its cases")
    group: str | None = Field(
        default=None, description="The group of runs made together (one per engine)"
    )
    dataset_name: str | None = Field(default=None, description="The stored data set it ran on")
    dataset_version: int | None = Field(default=None, description="That data set's version")


# -- reports: answers that were plain dicts before they were typed ------------------------------
class _Report(_Model):
    """A report read as the dict it used to be, for the callers written against that dict
    (``report["verdict"]`` is ``report.verdict``; a key is ``in`` the report when its field
    holds a value). Its JSON is the dict's: the same keys in the same order."""

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return (
            isinstance(key, str)
            and key in type(self).model_fields
            and getattr(self, key) is not None
        )


def _absent_when_none(value: object) -> bool:
    # a key the dict answer left out rather than setting it to null
    return value is None


class ImportReport(_Report):
    """What ``import_evals`` did, by eval name; ``not_activated``: why an eval the file marks
    active could not be activated."""

    created: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    activated: list[str] = Field(default_factory=list)
    deactivated: list[str] = Field(default_factory=list)
    archived: list[str] = Field(default_factory=list)
    not_activated: dict[str, str] = Field(default_factory=dict)


Verdict = Literal[
    "B worse",
    "B better",
    "mixed",
    "lower scores, same pass rate",
    "higher scores, same pass rate",
    "no clear difference",
    "not enough data",
]


class SideStats(_Report):
    """One side of a comparison of one eval: cases, pass rate, mean score, score histogram
    (10 bins over [0, 1])."""

    n: int
    pass_rate: float | None
    mean_score: float | None
    histogram: list[int]
    total: int | None = Field(
        None,
        exclude_if=_absent_when_none,
        description="Results the side holds for this eval; n is fewer when it was sampled",
    )


class RegressedCase(_Report):
    """A case on both sides that B scored lower than A (or flipped from pass to fail); the
    same shape lists the improved cases."""

    case: str
    score_a: float
    score_b: float
    delta: float
    passed_a: bool
    passed_b: bool
    missing_terms: list[str]
    output_b: str | None
    result_a: str | None
    result_b: str | None


class EvalComparison(_Report):
    """One eval compared (``scoring.compare.compare_eval``): B − A of the mean score and the
    pass rate (of the paired subset when ``paired``) with 95% bootstrap intervals, McNemar on
    the paired flips, the verdict and the most regressed cases. The differences are None with
    fewer than 2 cases on a side."""

    eval: str
    a: SideStats
    b: SideStats
    paired: bool
    pairs: int
    flips_to_fail: int
    flips_to_pass: int
    repeated_pairs: int = Field(
        0,
        description="Pairs past a key's first on a side (key plus occurrence: a repeated key "
        "pairs in order)",
    )
    score_diff: float | None
    score_ci: list[float] | None
    pass_rate_diff: float | None
    pass_rate_ci: list[float] | None
    mcnemar_p: float | None
    verdict: Verdict
    regressed_count: int | None = Field(None, exclude_if=_absent_when_none)
    regressed: list[RegressedCase]
    improved_count: int | None = Field(None, exclude_if=_absent_when_none)
    improved: list[RegressedCase] = Field(
        default_factory=list, description="cases B scored higher (or flipped fail→pass)"
    )


class CompareReport(_Report):
    """Side B compared with side A, per eval (``Service.compare``); ``worse``: B is
    significantly worse on some eval (the CLI's gate)."""

    a: str
    b: str
    seed: int
    resamples: int
    verdict: Verdict
    worse: bool
    pairing: str = Field("", description="How the cases of the two sides are paired")
    evals: list[EvalComparison]
    limit: int = Field(
        description="Results compared per side at most (every eval together); a larger "
        "side is sampled"
    )
    sampled: str | None = Field(
        None, description="How the cases were sampled (None: every case was compared)"
    )


class ThresholdMetrics(_Report):
    """How ``score >= threshold`` classifies labelled examples."""

    threshold: float
    precision: float
    recall: float
    f1: float
    accuracy: float
    tp: int
    fp: int
    fn: int
    tn: int


class CandidateThreshold(_Report):
    """The labelled score a suggested threshold stands for: any threshold in
    ``(below, threshold]`` classifies the examples alike."""

    threshold: float
    below: float
    precision: float
    recall: float
    f1: float
    accuracy: float
    tp: int
    fp: int
    fn: int
    tn: int


class CalibratedEval(_Report):
    """The eval calibrated, as it stood, with the metrics at its own threshold."""

    name: str
    version: int
    status: Status
    threshold: float
    at_threshold: ThresholdMetrics


class AppliedThreshold(_Report):
    """What ``calibrate_eval(apply=True)`` wrote: the threshold and status before and after
    (an active eval's new version is pending until a test of it passes)."""

    eval: str
    threshold_before: float
    threshold: float
    version: int
    status_before: Status
    status: Status
    active_version: int | None
    pending_version: int | None
    changed: bool


class CalibrationReport(_Report):
    """The threshold an eval's labelled examples suggest (``Service.calibrate_eval``): the
    sweep of ``scoring.calibrate.calibrate`` with where the examples came from and the eval."""

    examples: int
    positives: int
    negatives: int
    by: Literal["f1", "accuracy"]
    suggested: ThresholdMetrics
    best_candidate: CandidateThreshold
    roc_auc: float
    at_default: ThresholdMetrics
    table: list[ThresholdMetrics]
    warning: str | None
    reviews: int = Field(description="how many of the examples are reviewed results")
    eval: CalibratedEval
    fingerprint: str
    options: dict[str, Any]
    applied: AppliedThreshold | None = Field(None, exclude_if=_absent_when_none)


class RescoreReport(_Report):
    """What ``rescore`` stored: results added (and passed) over the captures scanned."""

    eval: str
    version: int
    scanned: int
    added: int
    passed: int
    replaced: int = 0  # of ``added``: results of another scorer replaced (``refresh``)


class BacktestCase(_Report):
    """A capture as a backtest scored it (texts cut to 300 characters)."""

    capture_id: int
    input: str
    output: str
    score: float
    passed: bool
    captured_at: str = Field(description="ISO 8601, UTC")
    missing_terms: list[str]
    missing_required: list[str] = Field(
        default_factory=list, description="the eval's required terms the output lacks"
    )


class BacktestReport(_Report):
    """An eval's current version scored on recent captures, nothing stored
    (``backtest_eval``)."""

    eval: str
    version: int
    status: Status
    threshold: float
    limit: int
    days: int
    scanned: int = Field(description="captures read to find those in the eval's scope")
    n: int
    passed: int
    pass_rate: float | None
    mean_score: float | None
    histogram: list[int] = Field(description="20 bins over [0, 1]")
    worst: list[BacktestCase]
    borderline: list[BacktestCase]
    seconds: float


class _ConversationTotals(_Report):
    id: str
    turns: int
    first_at: datetime
    last_at: datetime
    results: int
    passed: int = Field(description="effective verdicts: a review wins")
    pass_rate: float | None = Field(description="None when no turn was scored")


class ConversationOut(_ConversationTotals):
    """A conversation in a listing, with its last turn's input (cut to 300 characters)."""

    last_input: str


class ConversationDetail(_ConversationTotals):
    """A conversation's turns in order (at most 1,000), each a capture with its results."""

    captures: list[CaptureOut]
