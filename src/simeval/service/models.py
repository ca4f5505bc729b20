"""What the service returns: pydantic models, JSON-ready with ``.model_dump(mode="json")``.

The same models are the HTTP API's response models. Times are timezone-aware UTC.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

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
    explanation: dict[str, Any] | None = None
    review: ReviewOut | None = None


class CaptureOut(_Model):
    """One engine response and the results of the active evals that matched it."""

    id: int
    input: str
    output: str
    conversation_id: str | None
    metadata: dict[str, Any] | None
    captured_at: datetime
    evaluated: bool = Field(description="False when automatic evaluation was off")
    capture_key: str | None = Field(
        None, description="The client's key: a capture with a stored key is not stored again"
    )
    # built on first use: a capture scored by 1,000 evals answers without making 1,000
    # objects a caller may never look at (the capture hot path); ``build`` sets it, to the
    # list or to a function giving the results as plain dicts of checked values
    _results: list[CaptureResultOut] | Callable[[], list[dict[str, Any]]] = PrivateAttr(
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

    @property
    def replayed(self) -> bool:
        """True when the capture's key was already stored: this is the stored capture, and
        nothing new was stored (the API answers 200 instead of 201)."""
        private = self.__pydantic_private__
        return bool(private and private.get("_replayed"))

    @classmethod
    def build(
        cls,
        results: list[CaptureResultOut] | Callable[[], list[dict[str, Any]]],
        results_json: Callable[[], bytes] | None = None,
        **fields: Any,
    ) -> CaptureOut:
        """A capture from checked values and its results (a list, or a function making them;
        ``results_json`` a function making their JSON directly, for ``dump_json``).

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
            {"_results": results, "_results_json": results_json, "_replayed": False},
        )
        return out

    def mark_replayed(self) -> None:
        """Mark this as the stored capture answered for a key stored before."""
        self.__pydantic_private__["_replayed"] = True  # type: ignore[index]

    def result_counts(self) -> tuple[int, int]:
        """(results, passed), without making result objects never asked for (batches)."""
        made = self.__pydantic_private__["_results"]  # type: ignore[index]
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


_MISSING: Any = object()
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
