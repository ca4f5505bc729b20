"""What a run is made of: its configuration (formats, columns, evals) and its unit of work.

A run reads its input in ``Chunk``s; every executor (inline, a process pool, Dask) scores a
chunk with the same ``RunConfig`` (picklable: shipped once per worker) and gives back a
``ChunkOut``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simeval import service
from simeval.checks import read_text_file
from simeval.datafiles.columns import (
    DEFAULT_COLUMNS,
    Columns,
)
from simeval.errors import InvalidInput
from simeval.scoring.explain import TOP_MISSING
from simeval.scoring.options import DEFAULT_THRESHOLD

RESULT_FIELDS = (
    "score",
    "pass",
    "threshold",
    "matched_index",
    "matched_reference",
    "missing_terms",
    "fingerprint",
)
EVAL_FIELDS = ("eval", "eval_version")
MAX_NAMED = 100  # rows a summary names (bad rows, rows that matched no eval); the rest counted


def default_results_path(path: str, fmt: str) -> str:
    """``data.jsonl`` -> ``data.results.jsonl`` beside the input."""
    p = Path(path)
    ext = {"jsonl": ".jsonl", "csv": ".csv", "tsv": ".tsv", "parquet": ".parquet"}[fmt]
    return str(p.with_name(p.stem + ".results" + ext))


@dataclass(frozen=True)
class EvalDef:
    """An eval as a run uses it: references, threshold, optional input scope, scorer options."""

    name: str
    references: tuple[str, ...]
    threshold: float = DEFAULT_THRESHOLD
    input_scope: str | None = None
    options: tuple[tuple[str, object], ...] = ()
    version: int | None = None


@dataclass(frozen=True)
class RunConfig:
    """Everything a worker needs to score a chunk (picklable; shipped once per worker)."""

    source: str
    fmt: str
    out_fmt: str | None = None
    columns: Columns = DEFAULT_COLUMNS
    threshold: float = DEFAULT_THRESHOLD
    options: tuple[tuple[str, object], ...] = ()
    evals: tuple[EvalDef, ...] = ()
    on_error: str = "fail"
    junit: bool = False
    # a column of milliseconds each row took before the run (an engine's answer: latency_ms),
    # counted in its JUnit case's time
    latency: str | None = None
    keys: bool = False
    store: bool = False
    collect: str | None = None
    worst: int = 5
    top_missing: int = TOP_MISSING
    header: tuple[str, ...] = ()
    out_fields: tuple[str, ...] = ()
    delimiter: str = ","
    quoting: bool = True
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def result_fields(self) -> tuple[str, ...]:
        return RESULT_FIELDS + (EVAL_FIELDS if self.evals else ())


@dataclass
class WorstCase:
    """One of the run's lowest-scoring results (texts cut to 300 characters)."""

    where: str
    id: str | None
    input: str | None
    output: str | None
    score: float
    passed: bool
    threshold: float
    eval: str | None
    matched_index: int
    missing_terms: list[str]
    # why a failing case scored as it did beyond its missing terms (a required term missing,
    # a negation, a veto, no shared term: ``Explanation.reason``); None when nothing did
    reason: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "where": self.where,
            "id": self.id,
            "input": self.input,
            "output": self.output,
            "score": self.score,
            "pass": self.passed,
            "threshold": self.threshold,
            "eval": self.eval,
            "matched_index": self.matched_index,
            "missing_terms": self.missing_terms,
            "reason": self.reason,
        }


@dataclass
class UnmatchedRow:
    """A row that matched no eval of an eval-file run: where it is, its id and input (cut
    to 300 characters)."""

    where: str
    id: str | None
    input: str | None

    def to_dict(self) -> dict[str, object]:
        return {"where": self.where, "id": self.id, "input": self.input}


@dataclass
class ChunkOut:
    """What scoring a chunk gives back: serialised result rows and bounded statistics."""

    index: int
    rows: int = 0
    results: int = 0
    passed: int = 0
    score_sum: float = 0.0
    data: bytes = b""
    batch: Any = None
    junit: bytes = b""
    errors: list[tuple[str, str]] = field(default_factory=list)
    worst: list[WorstCase] = field(default_factory=list)
    # every missing term named, in row order (tallied by the run: counting a list is done in
    # C, merging counters is a Python loop)
    missing: list[str] = field(default_factory=list)
    per_eval: dict[str, list[float]] = field(default_factory=dict)
    unmatched: int = 0
    unmatched_rows: list[UnmatchedRow] = field(default_factory=list)  # at most MAX_NAMED
    cases: list[tuple[bytes, float, bool, str, list[str]]] = field(default_factory=list)
    # rows to store, in ``simeval.store.run_rows.STORE_COLUMNS`` order
    store_rows: list[tuple[object, ...]] = field(default_factory=list)
    store_blob: bytes = b""  # store_rows pickled by a pool worker (see runs.execute)
    collected: list[tuple[str, object, float]] = field(default_factory=list)
    nbytes: int = 0


class RowError(Exception):
    """A bad row: where it is (file and line or row) and what is wrong with it."""

    def __init__(self, where: str, message: str):
        super().__init__(where, message)
        self.where = where
        self.message = message

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def load_evals(path: str) -> tuple[EvalDef, ...]:
    """The evals of an eval definitions file (YAML or JSON, as ``simeval evals export`` writes).

    Archived evals are left out; draft and active ones are used, since a file kept in version
    control is the definition a CI run checks. Errors name the file and the eval.
    """
    doc = service.parse_evals_document(read_text_file(path, "evals"), path)
    entries = service.validate_evals_document(doc, path)
    evals = tuple(
        EvalDef(
            name=e["name"],
            references=tuple(e["references"]),
            threshold=e["threshold"],
            input_scope=e["input_scope"],
            options=tuple(sorted(e["options"].items())),
        )
        for e in entries
        if e["status"] != "archived"
    )
    if not evals:
        raise InvalidInput(f"{path}: no evals to run (the file has none that is not archived)")
    return evals
