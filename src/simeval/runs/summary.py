"""What a run reports: its summary (``RunSummary``) and the gates a CI build checks on it.

Dataclasses, not pydantic models: a summary is made by the run itself from values it has
already checked, so there is nothing to validate, and ``simeval.runs`` stays light to import
(a run's worker processes and its database writer never load pydantic). ``to_dict`` is the
summary as ``simeval run --json`` prints it and a stored run keeps it, key for key and in the
same order as the dictionaries it replaces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from simeval.errors import InvalidInput, InvalidOption
from simeval.runs.baseline import BaselineReport, CaseChange
from simeval.runs.config import UnmatchedRow, WorstCase


@dataclass
class EvalStats:
    """An eval-file run's numbers for one eval."""

    results: int
    passed: int
    pass_rate: float | None
    mean_score: float | None
    threshold: float
    version: int | None

    def to_dict(self) -> dict[str, object]:
        return {
            "results": self.results,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "threshold": self.threshold,
            "version": self.version,
        }


@dataclass(frozen=True)
class GateLimits:
    """The gates a run is checked against (None: not checked)."""

    min_pass_rate: float | None = None
    min_mean_score: float | None = None
    max_regressions: int | None = None
    # an eval-file run fails when a row matched no eval (a row no eval checks is a case the
    # suite silently stopped testing), unless this is set
    allow_unmatched: bool = False


NO_GATES = GateLimits()


@dataclass
class Gate:
    """One gate: its limit, the value measured and whether it held."""

    gate: str
    limit: float
    value: float
    passed: bool

    def to_dict(self) -> dict[str, object]:
        return {"gate": self.gate, "limit": self.limit, "value": self.value, "passed": self.passed}


@dataclass
class RunSummary:
    """A run's summary: counts, rates, the worst cases, the terms most often missing, and
    (when they apply) the evals' numbers, the baseline comparison, the gates, the stored run.

    Fields that do not apply to a run are None and left out of ``to_dict``: ``unmatched_rows``
    (how many rows matched no eval), ``unmatched`` (the first 100 of them, named) and
    ``evals`` (eval-file runs), ``threshold``, ``fingerprint`` and ``options`` (runs with
    reference columns), ``baseline``, ``collected`` (a column's values with their scores, for
    calibration), ``run_name`` and ``run_id`` (stored runs), ``gates`` (when checked).
    """

    rows: int
    results: int
    passed: int
    failed: int
    skipped: int
    skipped_rows: list[tuple[str, str]]  # (where, error) of the first 100 bad rows
    pass_rate: float | None
    mean_score: float | None
    worst: list[WorstCase]
    most_missing: list[tuple[str, int]]
    fingerprints: list[str]
    unmatched_rows: int | None = None
    unmatched: list[UnmatchedRow] | None = None
    evals: dict[str, EvalStats] | None = None
    baseline: BaselineReport | None = None
    collected: list[tuple[str, object, float]] | None = None
    file: str = ""
    format: str = ""
    results_file: str | None = None
    junit_file: str | None = None
    elapsed_s: float = 0.0
    rows_per_s: float | None = None
    workers: int = 1
    dask: str | None = None
    threshold: float | None = None
    fingerprint: str | None = None
    options: dict[str, Any] | None = None
    run_name: str | None = None
    run_id: int | None = None
    gates: list[Gate] | None = None
    # more for the stored summary: an engine run's engine, its numbers (simeval.runs.engine_run)
    extra: dict[str, object] | None = None

    @property
    def ok(self) -> bool:
        """Whether every gate held (True when none was checked)."""
        return all(g.passed for g in self.gates or ())

    def to_dict(self) -> dict[str, object]:
        """The summary as ``simeval run --json`` prints it (with ``ok`` when gates were
        checked)."""
        out = self.stored()
        if self.run_id is not None:
            gates = out.pop("gates", None)
            out["run_id"] = self.run_id
            if gates is not None:
                out["gates"] = gates
        if self.gates is not None:
            out["ok"] = self.ok
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSummary:
        """A summary as ``stored`` keeps it (or ``to_dict`` prints it) read back: each key
        that names a field is that field (nested ones as their classes), any other key goes
        to ``extra`` (an engine run's engine and numbers, a stored run's ``status``), and
        ``ok`` is dropped (it follows from the gates). A key missing for a field without a
        default is an ``InvalidInput``."""
        out: dict[str, Any] = {}
        extra: dict[str, object] = {}
        names = {f.name for f in fields(cls)}
        for key, value in data.items():
            if key == "ok":
                continue
            if key in names and key != "extra":
                read = _READ.get(key)
                out[key] = value if read is None or value is None else read(value)
            else:
                extra[key] = value
        if extra:
            out["extra"] = extra
        try:
            return cls(**out)
        except TypeError as exc:
            raise InvalidInput(f"not a run summary: {exc}") from None

    def stored(self) -> dict[str, object]:
        """The summary a stored run keeps (``to_dict`` without its id and ``ok``)."""
        out: dict[str, object] = {
            "rows": self.rows,
            "results": self.results,
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "skipped_rows": [{"where": w, "error": e} for w, e in self.skipped_rows],
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "worst": [w.to_dict() for w in self.worst],
            "most_missing": self.most_missing,
            "fingerprints": self.fingerprints,
        }
        if self.evals is not None:
            out["unmatched_rows"] = self.unmatched_rows
            out["unmatched"] = [u.to_dict() for u in self.unmatched or ()]
            out["evals"] = {name: e.to_dict() for name, e in self.evals.items()}
        if self.baseline is not None:
            out["baseline"] = self.baseline.to_dict()
        if self.collected is not None:
            out["collected"] = self.collected
        out.update(
            file=self.file,
            format=self.format,
            results_file=self.results_file,
            junit_file=self.junit_file,
            elapsed_s=self.elapsed_s,
            rows_per_s=self.rows_per_s,
            workers=self.workers,
            dask=self.dask,
        )
        if self.fingerprint is not None:
            out.update(threshold=self.threshold, fingerprint=self.fingerprint, options=self.options)
        if self.run_name is not None:
            out["run_name"] = self.run_name
        if self.gates is not None:
            out["gates"] = [g.to_dict() for g in self.gates]
        if self.extra:
            out.update(self.extra)
        return out


def _known(kind: type, data: Mapping[str, object]) -> dict[str, Any]:
    """The keys of ``data`` that name fields of the dataclass ``kind``."""
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}


def _worst(data: Mapping[str, object]) -> WorstCase:
    return WorstCase(**_known(WorstCase, {**data, "passed": data.get("pass")}))


def _baseline(data: Mapping[str, object]) -> BaselineReport:
    report = BaselineReport(**_known(BaselineReport, data))
    for name in ("top_regressions", "top_improvements"):
        changes = [CaseChange(**_known(CaseChange, c)) for c in getattr(report, name) or ()]
        setattr(report, name, changes)
    return report


# how ``RunSummary.from_dict`` reads a field that is not kept as it is
_READ: dict[str, Callable[[Any], Any]] = {
    "skipped_rows": lambda rows: [(r["where"], r["error"]) for r in rows],
    "worst": lambda rows: [_worst(r) for r in rows],
    "most_missing": lambda pairs: [(t, n) for t, n in pairs],
    "evals": lambda evals: {n: EvalStats(**_known(EvalStats, e)) for n, e in evals.items()},
    "baseline": _baseline,
    "collected": lambda rows: [tuple(r) for r in rows],
    "gates": lambda gates: [Gate(**_known(Gate, g)) for g in gates],
}


def check_gates(summary: RunSummary, limits: GateLimits) -> list[Gate]:
    """Each gate of ``limits`` with its limit, the measured value and whether it held."""
    gates = []
    if limits.min_pass_rate is not None:
        value = summary.pass_rate or 0.0
        gates.append(
            Gate("min-pass-rate", limits.min_pass_rate, value, value >= limits.min_pass_rate)
        )
    if limits.min_mean_score is not None:
        value = summary.mean_score or 0.0
        limit = limits.min_mean_score
        gates.append(Gate("min-mean-score", limit, value, value >= limit))
    if limits.max_regressions is not None:
        if summary.baseline is None:
            raise InvalidOption("--max-regressions needs --baseline")
        regressed = summary.baseline.regressed
        limit = limits.max_regressions
        gates.append(Gate("max-regressions", limit, regressed, regressed <= limit))
    if summary.unmatched_rows is not None and not limits.allow_unmatched:
        unmatched = summary.unmatched_rows
        gates.append(Gate("unmatched-rows", 0, unmatched, unmatched == 0))
    return gates
