"""``simeval run FILE|dataset:NAME --engines engines.yaml``: every engine answers every case,
each engine's answers are scored as a run of their own, each run is compared with the first
engine's, the gates apply to each, and (with ``--store``) each run is stored in one group.

An engine's run is two streams: the cases go through the engine into a JSONL file of answers
(``simeval.runs.answering``), which ``run_file`` scores like any data-set file, with the
first engine's results as its baseline. Then the paired comparison of ``simeval compare``
(``simeval.scoring.compare``: bootstrap intervals and McNemar) says whether the engine is
worse than the first. The whole run is ``ok`` when every gate held and no engine is worse.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, SupportsFloat, SupportsIndex, TypedDict

from simeval import service
from simeval.datafiles.columns import Columns, FileSource, detect_format
from simeval.datafiles.read import BadRow, decode, input_fields, read_chunks
from simeval.errors import InvalidInput
from simeval.runs.answering import ENGINE_ERROR, AnswerJob, EngineStats, answer_file
from simeval.runs.baseline import iter_results_file, load_baseline
from simeval.runs.config import load_evals
from simeval.runs.engine_cache import ResponseCache, default_cache_path
from simeval.runs.engines import EngineSpec
from simeval.runs.run import RunOptions, RunRequest, resolve_workers, run_file
from simeval.runs.storing import RunStoreProcess
from simeval.runs.summary import RunSummary
from simeval.scoring.compare import Case, Side, compare_sides
from simeval.scoring.options import check_threshold

DATASET_PREFIX = "dataset:"
Progress = Callable[[int, int], None]
# a progress bar per phase: ``bar(label)`` is a context giving ``update(done, total)`` or None
Bars = Callable[[str], ContextManager[Progress | None]]
MAX_COMPARED = 100_000  # cases per side in the comparison (as ``simeval compare`` reads)


class Spread(TypedDict):
    """Values' mean, standard deviation, lowest and highest (all None without a value)."""

    mean: float | None
    stdev: float | None
    min: float | None
    max: float | None


class RepeatSpread(TypedDict):
    """An engine's repeats (``repeat_spread``): each one's numbers, and their spread."""

    repeats: int
    per_repeat: list[dict[str, float]]
    pass_rate: Spread
    mean_score: Spread


class EngineComparison(TypedDict):
    """An engine against the first one (``compare_results``): the verdict, whether it is
    worse, and each eval's differences (the keys ``compare_results`` keeps)."""

    verdict: str
    worse: bool
    evals: list[dict[str, Any]]


@dataclass
class EngineRunRequest:
    """An engine run: ``run`` says the input and everything of an ordinary ``simeval run``
    (columns, evals, results and JUnit files, gates, storing), ``engines`` who answers.
    ``references_given``: the user named reference columns (else ``references`` is used
    when the input has it and no ``reference``)."""

    run: RunRequest
    engines: list[EngineSpec]
    concurrency: int | None = None
    repeat: int = 1
    cache: str | None = None  # the cache file (default: the user's cache directory)
    use_cache: bool = True
    references_given: bool = False


@dataclass
class EngineResult:
    """One engine's run: its scored summary, its answering numbers, the spread over repeats,
    the comparison with the first engine (None for the first)."""

    spec: EngineSpec
    summary: RunSummary
    stats: EngineStats
    spread: RepeatSpread | None = None
    comparison: EngineComparison | None = None
    # the engine answered no case: nothing to score (its run is not stored)
    error: str | None = None

    @property
    def failed(self) -> bool:
        """A gate failed, or the engine answered no case."""
        return self.error is not None or not self.summary.ok

    @property
    def worse(self) -> bool:
        """Whether the comparison's verdict says this engine is worse than the first."""
        return bool(self.comparison and self.comparison.get("worse"))

    def to_dict(self) -> dict[str, object]:
        """The engine's part of ``--json``."""
        out: dict[str, object] = {
            "engine": self.spec.describe(),
            "answering": self.stats.to_dict(),
            "run": self.summary.to_dict(),
        }
        if self.error is not None:
            out["error"] = self.error
        if self.spread is not None:
            out["repeats"] = self.spread
        if self.comparison is not None:
            out["comparison"] = self.comparison
            out["worse"] = self.worse
        return out


@dataclass
class EngineRunSummary:
    """Every engine's run, the input they answered and the group they are stored in."""

    source: str
    group: str
    dataset_name: str | None = None
    dataset_version: int | None = None
    results: list[EngineResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every gate held and no engine is worse than the first."""
        return all(not r.failed and not r.worse for r in self.results)

    def to_dict(self) -> dict[str, object]:
        """The summary as ``simeval run --engines ... --json`` prints it."""
        out: dict[str, object] = {"source": self.source, "group": self.group}
        if self.dataset_name is not None:
            out.update(dataset=self.dataset_name, dataset_version=self.dataset_version)
        out["engines"] = [r.to_dict() for r in self.results]
        out["ok"] = self.ok
        return out


def _no_bar(_label: str) -> ContextManager[Progress | None]:
    return contextlib.nullcontext(None)


def parse_dataset(spec: str) -> tuple[str, int | None]:
    """``dataset:NAME[@VERSION]`` as (name, version or None).

    >>> parse_dataset("dataset:golden@2"), parse_dataset("dataset:golden")
    (('golden', 2), ('golden', None))
    """
    body = spec[len(DATASET_PREFIX) :].strip()
    name, at, version = body.partition("@")
    if not name.strip():
        raise InvalidInput(f"{spec!r}: name the data set, dataset:NAME or dataset:NAME@VERSION")
    if not at:
        return name.strip(), None
    if not version.strip().isdigit() or int(version) < 1:
        raise InvalidInput(f"{spec!r}: the version after @ must be a positive integer")
    return name.strip(), int(version)


def _dataset_file(request: RunRequest, spec: str, folder: str) -> tuple[str, str, int]:
    """A stored data set's cases written to a JSONL file in ``folder``: (path, name,
    version)."""
    import json

    name, version = parse_dataset(spec)
    svc = service.open_service(request.db)
    used, rows = svc.dataset_cases(name, version=version)
    path = os.path.join(folder, "dataset.jsonl")
    with open(path, "wb") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False).encode() + b"\n")
    return path, name, int(used)


def _columns(request: EngineRunRequest, path: str, fmt: str) -> Columns:
    """The run's columns; a data set's ``references`` column when none is named."""
    cols = request.run.columns
    if request.references_given or request.run.evals_file is not None:
        return cols
    fields = input_fields(path, fmt, request.run.quoting)
    if "references" in fields and "reference" not in fields:
        return dataclasses.replace(cols, references=("references",))
    return cols


def engine_path(given: str | None, default: str, engine: str, several: bool) -> str:
    """An engine's results or JUnit file: ``given`` (with the engine's name before the
    extension when there are several engines), else ``default``.

    >>> engine_path("out/r.jsonl", "x", "b", True), engine_path("r.jsonl", "x", "b", False)
    ('out/r.b.jsonl', 'r.jsonl')
    """
    if given is None:
        return default
    if not several:
        return given
    p = Path(given)
    return str(p.with_name(f"{p.stem}.{engine}{p.suffix}"))


def run_engines(request: EngineRunRequest, bars: Bars | None = None) -> EngineRunSummary:
    """Run every engine on the request's input (see the module docstring)."""
    run = request.run
    bars = bars or _no_bar
    if not request.engines:
        raise InvalidInput("no engine: give --engines FILE or --engine URL --model M")
    if not isinstance(request.repeat, int) or not 1 <= request.repeat <= 100:
        raise InvalidInput(f"--repeat must be from 1 to 100, not {request.repeat!r}")
    evals = load_evals(run.evals_file) if run.evals_file is not None else ()
    threshold = check_threshold(run.threshold)
    workers = resolve_workers(run.workers)
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="simeval-engines-"))
        src = _source(run, folder)
        path, display, fmt, stem, where = src.path, src.display, src.fmt, src.stem, src.where
        dataset_name, dataset_version = src.dataset_name, src.dataset_version
        if run.store and dataset_name is None:
            service.open_service(run.db)  # a database that cannot be opened fails before any call
        cols = _columns(request, path, fmt)
        base_name = run.run_name or (dataset_name or os.path.basename(path))
        group = f"{base_name} {datetime.now(UTC).strftime('%Y-%m-%d %H:%M:%S')}"
        cache = None
        if request.use_cache:
            cache = stack.enter_context(ResponseCache(request.cache or default_cache_path()))
        summary = EngineRunSummary(display, group, dataset_name, dataset_version)
        several = len(request.engines) > 1
        _check_outputs(request, where, stem, several)
        first_results: str | None = None
        first_answers = ""
        for i, spec in enumerate(request.engines):
            job = AnswerJob(
                source=path,
                fmt=fmt,
                display=display,
                columns=cols,
                spec=spec,
                concurrency=request.concurrency,
                repeat=request.repeat,
                cache=cache,
                quoting=run.quoting,
            )
            answers = os.path.join(folder, f"answers-{i}.jsonl")
            with open(answers, "wb") as fh, bars(f"answering with {spec.name}") as progress:
                stats = answer_file(job, fh, progress)
            if stats.cases == 0:
                raise InvalidInput(f"{display}: no cases to answer")
            if stats.answered == 0 and run.on_error == "skip":
                summary.results.append(_unanswered(spec, stats, display))
                continue
            if run.write_results:
                default = os.path.join(where, f"{stem}.{spec.name}.results.jsonl")
                results = engine_path(run.results, default, spec.name, several)
            else:
                results = os.path.join(folder, f"results-{i}.jsonl")
            junit = None
            if run.junit is not None:
                junit = engine_path(run.junit, run.junit, spec.name, several)
            store = None
            if run.store:
                labels: dict[str, object] = {"engine": spec.name, "group": group}
                labels.update(dataset=dataset_name, dataset_version=dataset_version)
                store = RunStoreProcess(run.db, f"{base_name} [{spec.name}]", display, labels)
            opts = RunOptions(
                columns=cols,
                threshold=threshold,
                options=run.options,
                evals=evals,
                store=store,
                fmt="jsonl",
                results=results,
                junit=junit,
                baseline=load_baseline(first_results, cols) if first_results else None,
                tolerance=run.tolerance,
                on_error=run.on_error,
                workers=workers,
                dask=run.dask,
                worst=run.worst,
                gates=run.gates,
                label=display,
                latency="latency_ms",
                answering_s=stats.elapsed_s,
                extra={"engine": spec.describe(), "answering": stats.to_dict(), "group": group},
            )
            with bars(f"scoring {spec.name}") as progress:
                scored = run_file(answers, opts, progress)
            if not run.write_results:
                scored.results_file = None
            result = EngineResult(spec, scored, stats)
            if request.repeat > 1:
                result.spread = repeat_spread(results, cols)
            if first_results is not None:
                pair = None if evals else (first_answers, answers)
                result.comparison = compare_results(first_results, results, cols, spec.name, pair)
            else:
                first_results, first_answers = results, answers
            summary.results.append(result)
    return summary


@dataclass
class _Source:
    """The cases' file (a stored data set's written to a temporary one), how it is named,
    its format, and where the results files go (``where``/``stem``.ENGINE.results.jsonl)."""

    path: str
    display: str
    fmt: str
    stem: str
    where: str
    dataset_name: str | None = None
    dataset_version: int | None = None


def _source(run: RunRequest, folder: str) -> _Source:
    if run.file.startswith(DATASET_PREFIX):
        path, name, version = _dataset_file(run, run.file, folder)
        # the results go to the current directory
        return _Source(path, f"{DATASET_PREFIX}{name}@{version}", "jsonl", name, "", name, version)
    if not os.path.isfile(run.file):
        raise InvalidInput(f"{run.file}: no such file")
    fmt = detect_format(run.file, run.fmt)
    return _Source(run.file, run.file, fmt, Path(run.file).stem, os.path.dirname(run.file))


def _check_outputs(request: EngineRunRequest, where: str, stem: str, several: bool) -> None:
    """Every engine's results and JUnit files can be written: checked before any engine is
    asked (a missing directory would otherwise be found after the first engine's answers)."""
    run = request.run
    for spec in request.engines:
        paths = []
        if run.write_results:
            default = os.path.join(where, f"{stem}.{spec.name}.results.jsonl")
            paths.append(engine_path(run.results, default, spec.name, several))
        if run.junit is not None:
            paths.append(engine_path(run.junit, run.junit, spec.name, several))
        for path in paths:
            folder = os.path.dirname(path)
            if folder and not os.path.isdir(folder):
                raise InvalidInput(f"cannot write {path}: directory {folder} does not exist")
            if not run.file.startswith(DATASET_PREFIX) and os.path.abspath(path) == os.path.abspath(
                run.file
            ):
                raise InvalidInput(f"the results file would overwrite the input: {path}")


def _unanswered(spec: EngineSpec, stats: EngineStats, display: str) -> EngineResult:
    """An engine that answered no case: its errors, a summary with no result."""
    where, error = stats.first_errors[0]
    scored = RunSummary(
        rows=stats.cases,
        results=0,
        passed=0,
        failed=0,
        skipped=stats.cases,
        skipped_rows=list(stats.first_errors),
        pass_rate=None,
        mean_score=None,
        worst=[],
        most_missing=[],
        fingerprints=[],
        file=display,
    )
    message = f"engine {spec.name} answered no case (first: {where}: {error})"
    return EngineResult(spec, scored, stats, error=message)


def _rows(path: str, cols: Columns) -> Iterator[dict[str, Any]]:
    for n, row in enumerate(iter_results_file(path, cols)):
        if n >= MAX_COMPARED:
            return
        yield row


def _errored(answers: str, cols: Columns) -> Iterator[Case]:
    """The cases an engine could not answer (its answers file's ``engine_error`` rows), as
    failed cases scored 0: an engine that errs where the first answers is worse there."""
    import json

    with open(answers, "rb") as fh:
        for line in fh:
            if b'"engine_error"' not in line:
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):  # an answers file simeval did not write
                continue
            if not isinstance(row, dict) or not isinstance(row.get(ENGINE_ERROR), str):
                continue
            key = row.get(cols.id) if row.get(cols.id) is not None else row.get(cols.input)
            key = None if key is None or key == "" else str(key)
            yield Case(key=key, name=str(key or "case"), score=0.0, passed=False)


def compare_results(
    first: str,
    this: str,
    cols: Columns,
    name: str,
    answers: tuple[str, str] | None = None,
) -> EngineComparison:
    """The paired comparison of an engine's results with the first engine's (the one of
    ``simeval compare``), without its case lists: the verdict, and per eval the differences
    with their intervals and McNemar's p. ``answers``: the two engines' answers files, whose
    unanswered cases count as failed (a run without evals: an error matched no eval)."""
    sides = []
    for i, (label, path) in enumerate((("first", first), (name, this))):
        side = Side(label)
        for row in _rows(path, cols):
            side.add(
                row["eval"] or "(no eval)",
                Case(key=row["case"], name=row["name"], score=row["score"], passed=row["pass"]),
            )
        if answers is not None:
            for case in _errored(answers[i], cols):
                side.add("(no eval)", case)
        sides.append(side)
    report = compare_sides(sides[0], sides[1])
    keep = (
        "eval",
        "pairs",
        "paired",
        "score_diff",
        "score_ci",
        "pass_rate_diff",
        "pass_rate_ci",
        "mcnemar_p",
        "flips_to_fail",
        "flips_to_pass",
        "verdict",
    )
    return {
        "verdict": report["verdict"],
        "worse": report["worse"],
        "evals": [{k: e.get(k) for k in keep} for e in report["evals"]],
    }


def repeat_spread(results: str, cols: Columns) -> RepeatSpread:
    """Per repeat, the pass rate and mean score (read back from the results file, any
    format), and their spread: mean, standard deviation, lowest and highest."""
    fmt = detect_format(results)
    header = input_fields(results, fmt) if fmt in {"csv", "tsv"} else ()
    cfg = FileSource(source=results, fmt=fmt, header=header)
    per: dict[int, list[float]] = {}
    for chunk in read_chunks(results, fmt):
        for _where, _ordinal, row in decode(cfg, chunk):
            if isinstance(row, BadRow) or row.get("score") in (None, ""):
                continue
            try:  # a text format has text cells: "2", "0.91", "true"
                k = int(str(row.get("repeat")))
                cell = row["score"]
                if not isinstance(cell, str | bytes | SupportsFloat | SupportsIndex):
                    continue  # what float() refuses with a TypeError
                score = float(cell)
            except (TypeError, ValueError):
                continue
            acc = per.setdefault(k, [0, 0, 0.0])
            acc[0] += 1
            acc[1] += row.get("pass") in (True, "true", "True", "1", 1)
            acc[2] += score
    rates = [p / n for n, p, _ in per.values() if n]
    means = [s / n for n, _, s in per.values() if n]

    def spread(values: list[float]) -> Spread:
        if not values:
            return {"mean": None, "stdev": None, "min": None, "max": None}
        return {
            "mean": statistics.fmean(values),
            "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values),
            "max": max(values),
        }

    return {
        "repeats": len(per),
        "per_repeat": [
            {"repeat": k, "results": n, "pass_rate": p / n, "mean_score": s / n}
            for k, (n, p, s) in sorted(per.items())
            if n
        ],
        "pass_rate": spread(rates),
        "mean_score": spread(means),
    }
