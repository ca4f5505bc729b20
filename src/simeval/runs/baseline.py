"""Baselines: a previous run's per-case scores, and the comparison of a run against them.

A case is keyed by its id, else its input, else its row number (and its eval): the same case
in two runs has the same key, and repeated keys pair up in order. A baseline is a results
file of any format (``load_baseline``) or a stored run (``load_stored_baseline``); a
``Comparison`` takes the run's cases as they stream and reports what regressed and improved.
"""

from __future__ import annotations

import difflib
import hashlib
import heapq
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from simeval.datafiles.columns import DEFAULT_COLUMNS, Columns, detect_format
from simeval.datafiles.read import BadRow, decode, id_cell, input_fields, read_chunks, text_cell
from simeval.errors import InvalidInput
from simeval.runs.config import RunConfig
from simeval.scoring.options import check_unit, yes_no

if TYPE_CHECKING:
    from simeval.service import Service
    from simeval.service.models import RunOut

STORED_RUN_PREFIX = "run:"
_PASS_WORDS = frozenset({"true", "1"})  # as results files write "pass" (JSON, CSV, Parquet)
_FAIL_WORDS = frozenset({"false", "0"})


def case_key(
    case_id: str | None, text_in: str | None, ordinal: int, eval_name: str | None
) -> bytes:
    """The key of a case across runs: its id, else its input, else its row (and its eval)."""
    if case_id is not None:
        base = "id\0" + case_id
    elif text_in:  # an empty input identifies nothing (and a stored run keeps None as "")
        base = "input\0" + text_in
    else:
        base = f"row\0{ordinal}"
    if eval_name is not None:
        base += "\0" + eval_name
    return hashlib.blake2b(base.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def case_name(case_id: str | None, text_in: str | None, where: str) -> str:
    """How a case is shown: its id, else its input (shortened), else where it is."""
    if case_id is not None:
        return case_id
    if text_in is not None and text_in.strip():
        short = " ".join(text_in.split())
        return short if len(short) <= 80 else short[:77] + "..."
    return where


@dataclass
class Baseline:
    """A previous run's per-case scores, keyed like the current run's cases."""

    source: str
    cases: dict[bytes, tuple[float, bool, str]]
    fingerprints: set[str]
    rows: int


def _as_bool(value: object, where: str) -> bool:
    flag = yes_no(value, _PASS_WORDS, _FAIL_WORDS)
    if flag is None:
        raise InvalidInput(f"{where}: column 'pass' must be true or false, not {value!r}")
    return flag


def _as_score(value: object, where: str) -> float:
    return check_unit(value, f"{where}: column 'score'")


class _Dedup:
    """Per-key occurrence numbers, so repeated inputs pair up in order across two runs."""

    def __init__(self) -> None:
        self.seen: dict[bytes, int] = {}

    def __call__(self, key: bytes) -> bytes:
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        return key if n == 0 else key + n.to_bytes(4, "little")


def _result_rows(
    path: str, columns: Columns, fmt: str | None, what: str
) -> Iterator[tuple[str, int, dict[str, Any], str | None, str | None]]:
    """(where, ordinal, row, case id, input) of every row of a results file; a row that is
    not a result is an ``InvalidInput`` naming the file and line (prefixed by ``what``)."""
    fmt = detect_format(path, fmt)
    cfg = RunConfig(source=path, fmt=fmt, header=input_fields(path, fmt))
    for chunk in read_chunks(path, fmt):
        for where, ordinal, row in decode(cfg, chunk):
            if isinstance(row, BadRow):
                raise InvalidInput(f"{what}{where}: {row}")
            try:
                case_id = id_cell(row, columns)
                text_in = text_cell(row, columns.input, False)
            except BadRow as bad:
                raise InvalidInput(f"{what}{where}: {bad}") from None
            if "score" not in row or "pass" not in row:
                raise InvalidInput(
                    f"{what}{where}: not a results file (no 'score' and 'pass' columns)"
                )
            yield where, ordinal, row, case_id, text_in


def load_baseline(path: str, columns: Columns, fmt: str | None = None) -> Baseline:
    """Read a results file written by an earlier run (any of the formats)."""
    cases: dict[bytes, tuple[float, bool, str]] = {}
    fps: set[str] = set()
    dedup = _Dedup()
    rows = 0
    for where, ordinal, row, case_id, text_in in _result_rows(path, columns, fmt, "baseline "):
        eval_name = row.get("eval") or None
        key = dedup(case_key(case_id, text_in, ordinal, eval_name))
        cases[key] = (
            _as_score(row["score"], where),
            _as_bool(row["pass"], where),
            case_name(case_id, text_in, where),
        )
        if row.get("fingerprint"):
            fps.add(str(row["fingerprint"]))
        rows += 1
    return Baseline(path, cases, fps, rows)


def iter_results_file(
    path: str, columns: Columns = DEFAULT_COLUMNS, fmt: str | None = None
) -> Iterator[dict[str, Any]]:
    """The rows of a results file written by ``simeval run`` (any format), each with ``case``
    (its id, else its input, else None), ``name`` (how to show it), ``eval``, ``score``,
    ``pass``, ``output`` and ``missing_terms`` (a list); and where the row came from: ``id``,
    ``input``, ``where`` (file and line) and ``ordinal`` (its data row, from 0, as
    ``case_key`` takes it), with the ``reference`` it matched, its ``threshold`` and
    ``fingerprint`` (None when the file has no such column). A row that is not a result is
    an ``InvalidInput`` naming the file and line."""
    if not os.path.isfile(path):
        raise InvalidInput(f"{path}: no such results file")
    for where, ordinal, row, case_id, text_in in _result_rows(path, columns, fmt, ""):
        missing: object = row.get("missing_terms")
        if isinstance(missing, str):
            text = missing
            try:
                missing = json.loads(text) if text.startswith("[") else text.split()
            except ValueError:
                missing = text.split()
        yield {
            "case": case_id if case_id is not None else (text_in or None),
            "name": case_name(case_id, text_in, where),
            "eval": row.get("eval") or None,
            "score": _as_score(row["score"], where),
            "pass": _as_bool(row["pass"], where),
            "output": out if isinstance(out := row.get(columns.output), str) else None,
            "missing_terms": [str(m) for m in missing] if isinstance(missing, list) else [],
            "id": case_id,
            "input": text_in,
            "where": where,
            "ordinal": ordinal,
            "reference": ref if isinstance(ref := row.get("matched_reference"), str) else None,
            "threshold": _threshold_cell(row.get("threshold"), where),
            "fingerprint": str(row.get("fingerprint") or "") or None,
        }


def _threshold_cell(value: object, where: str) -> float | None:
    """A results row's ``threshold`` (None when the file has none)."""
    return (
        None if value is None or value == "" else check_unit(value, f"{where}: column 'threshold'")
    )


def is_stored_run(spec: str) -> bool:
    """Whether a ``--baseline`` names a stored run (``run:ID``, ``run:latest``) rather than a
    results file (a file of that name wins)."""
    return spec.startswith(STORED_RUN_PREFIX) and not os.path.exists(spec)


def load_stored_baseline(
    svc: Service, spec: str, name: str | None = None, before: int | None = None
) -> Baseline:
    """A run stored with ``--store`` as a baseline: ``run:ID``, or ``run:latest`` (the newest
    stored run called ``name``; with ``before``, the newest stored before run ``before``:
    the baseline of a run that is stored itself now). With no run stored at all (or none of
    that name before ``before``), an empty baseline: every case is new (the first run of a
    gate). With runs stored but none called
    ``name``, the baseline would compare nothing, and a gate on it would pass whatever the
    run does: refused (``InvalidInput``), naming the closest stored names."""
    what = spec[len(STORED_RUN_PREFIX) :].strip()
    if what == "latest":
        run = _latest_run(svc, name, before)
        if run is None:
            names = _stored_run_names(svc)
            if before is not None and name in names:
                # runs of that name, none before run ``before``: it was the first of them
                return Baseline(
                    f"{spec} (no stored run named {name!r} before run {before})", {}, set(), 0
                )
            if names:
                close = difflib.get_close_matches(str(name), names, n=3, cutoff=0.3)
                hint = ", ".join(repr(n) for n in close or names[:3])
                raise InvalidInput(
                    f"--baseline {spec}: no stored run named {name!r}, so nothing would be "
                    f"compared; stored runs are named {hint}: give that name with --run-name, "
                    "or the baseline as run:ID"
                )
            return Baseline(f"{spec} (no stored run named {name!r} yet)", {}, set(), 0)
    elif what.isdigit():
        run = svc.get_run(int(what))
    else:
        raise InvalidInput(f"--baseline {spec}: give run:ID or run:latest")
    cases: dict[bytes, tuple[float, bool, str]] = {}
    fps: set[str] = set()
    dedup = _Dedup()
    n = -1
    # in the order the rows were stored (the run's order), read in one pass
    for n, (rid, eval_name, text_in, score, passed, fp, case) in enumerate(
        svc.iter_run_cases(run.id)
    ):
        case_id = case.get("id")
        where = case.get("row") or f"result r{rid}"
        key = dedup(case_key(case_id, text_in or None, case.get("ordinal", n), eval_name))
        cases[key] = (score, passed, case_name(case_id, text_in or "", where))
        if fp:
            fps.add(fp)
    source = f"stored run {run.id} ({run.name}, {run.created_at:%Y-%m-%d %H:%M})"
    return Baseline(source, cases, fps, n + 1)


def _stored_run_names(svc: Service, most: int = 1000) -> list[str]:
    """The names of the newest ``most`` stored runs, each once, newest first."""
    names: dict[str, None] = {}
    offset = 0
    while offset < most:
        page = svc.list_runs(limit=100, offset=offset)
        names.update((r.name, None) for r in page)
        if len(page) < 100:
            break
        offset += 100
    return list(names)


def _latest_run(svc: Service, name: str | None, before: int | None = None) -> RunOut | None:
    """The newest stored run called ``name`` that has finished storing (and, with
    ``before``, whose id is lower), or None."""
    offset = 0
    while True:
        page = svc.list_runs(limit=100, offset=offset)
        run = next(
            (
                r
                for r in page
                if r.name == name
                and r.summary.get("status") != "storing"
                and (before is None or r.id < before)
            ),
            None,
        )
        if run is not None or len(page) < 100:
            return run
        offset += 100


# -- comparing a run with its baseline -------------------------------------------------------
@dataclass
class CaseChange:
    """A case whose score moved past the tolerance (or whose verdict flipped)."""

    case: str
    before: float
    after: float
    delta: float
    passed_before: bool
    passed_after: bool
    missing_terms: list[str]

    def to_dict(self) -> dict[str, object]:
        return {
            "case": self.case,
            "before": self.before,
            "after": self.after,
            "delta": self.delta,
            "passed_before": self.passed_before,
            "passed_after": self.passed_after,
            "missing_terms": self.missing_terms,
        }


@dataclass
class BaselineReport:
    """A run against its baseline: counts of improved, regressed, unchanged, new and removed
    cases, the means over the cases both have, the largest changes. ``comparable`` is False
    (with a ``warning``) when the baseline was scored with other scorer settings."""

    baseline: str
    tolerance: float
    improved: int
    regressed: int
    unchanged: int
    new: int
    removed: int
    compared: int
    mean_score_before: float | None
    mean_score_after: float | None
    mean_delta: float | None
    pass_rate_before: float | None
    top_regressions: list[CaseChange]
    top_improvements: list[CaseChange]
    removed_cases: list[str]
    comparable: bool = True
    warning: str | None = None

    def to_dict(self) -> dict[str, object]:
        """The report as ``--json`` prints it and a stored run keeps it."""
        out: dict[str, object] = {
            "baseline": self.baseline,
            "tolerance": self.tolerance,
            "improved": self.improved,
            "regressed": self.regressed,
            "unchanged": self.unchanged,
            "new": self.new,
            "removed": self.removed,
            "compared": self.compared,
            "mean_score_before": self.mean_score_before,
            "mean_score_after": self.mean_score_after,
            "mean_delta": self.mean_delta,
            "pass_rate_before": self.pass_rate_before,
            "top_regressions": [c.to_dict() for c in self.top_regressions],
            "top_improvements": [c.to_dict() for c in self.top_improvements],
            "removed_cases": self.removed_cases,
            "comparable": self.comparable,
        }
        if self.warning is not None:
            out["warning"] = self.warning
        return out


@dataclass
class Comparison:
    """Per-case changes against a baseline, accumulated as the run streams."""

    baseline: Baseline
    tolerance: float
    keep: int = 10
    counts: Counter[str] = field(default_factory=Counter)
    delta_sum: float = 0.0
    before_sum: float = 0.0
    before_passed: int = 0
    dedup: _Dedup = field(default_factory=_Dedup)
    regressions: list[tuple[float, int, CaseChange]] = field(default_factory=list)
    improvements: list[tuple[float, int, CaseChange]] = field(default_factory=list)
    seq: int = 0

    def add(
        self, key: bytes, score: float, passed: bool, name: str, missing: list[str]
    ) -> tuple[str, float | None, bool | None]:
        """Compare one case of the run (``key`` as ``case_key`` makes it) with the baseline;
        returns what it is (``new``, ``unchanged``, ``regressed`` or ``improved``) with its
        baseline score and verdict (None for a new case)."""
        key = self.dedup(key)
        old = self.baseline.cases.pop(key, None)
        if old is None:
            self.counts["new"] += 1
            return "new", None, None
        before, was_passing, _ = old
        delta = score - before
        self.delta_sum += delta
        self.before_sum += before
        self.before_passed += was_passing
        if (was_passing and not passed) or delta < -self.tolerance:
            status, heap, rank = "regressed", self.regressions, -delta
        elif (passed and not was_passing) or delta > self.tolerance:
            status, heap, rank = "improved", self.improvements, delta
        else:
            self.counts["unchanged"] += 1
            return "unchanged", before, was_passing
        self.counts[status] += 1
        self.seq += 1
        entry = CaseChange(name, before, score, delta, was_passing, passed, missing)
        item = (rank, -self.seq, entry)
        if len(heap) < self.keep:
            heapq.heappush(heap, item)
        else:
            heapq.heappushpop(heap, item)
        return status, before, was_passing

    def report(self, fingerprints: set[str]) -> BaselineReport:
        """What changed; ``fingerprints``: the current run's (compared with the baseline's)."""
        common = sum(self.counts[s] for s in ("improved", "regressed", "unchanged"))
        removed = list(self.baseline.cases.values())
        report = BaselineReport(
            baseline=self.baseline.source,
            tolerance=self.tolerance,
            improved=self.counts["improved"],
            regressed=self.counts["regressed"],
            unchanged=self.counts["unchanged"],
            new=self.counts["new"],
            removed=len(removed),
            compared=common,
            mean_score_before=self.before_sum / common if common else None,
            mean_score_after=(self.before_sum + self.delta_sum) / common if common else None,
            mean_delta=self.delta_sum / common if common else None,
            pass_rate_before=self.before_passed / common if common else None,
            top_regressions=[e for _, _, e in sorted(self.regressions, reverse=True)],
            top_improvements=[e for _, _, e in sorted(self.improvements, reverse=True)],
            removed_cases=[name for _, _, name in removed[: self.keep]],
        )
        theirs = self.baseline.fingerprints
        if theirs and fingerprints and theirs != fingerprints:
            report.comparable = False
            report.warning = (
                "the baseline was scored with other scorer settings (fingerprints "
                f"{', '.join(sorted(theirs))} vs "
                f"{', '.join(sorted(fingerprints))}): score changes may come from the settings"
            )
        return report
