"""A whole run: ``run_file`` (score a file with given options) and ``run_request`` (a run as
``simeval run`` asks for it: the evals file read, the baseline chosen, the storing process
wired, the gates checked once).

A run reads the input in chunks of rows, scores each chunk (in this process, in a local process
pool, or on a Dask cluster: the same function everywhere), and writes the results in input
order. Memory stays flat: at most a few chunks per worker are in flight, the results go
straight to a temporary file that is renamed into place only when the run succeeds, and the
summary keeps bounded state (counts, sums, the worst cases, a tally of missing terms).

Bad rows stop the run with one line naming the file and the line or row, and no results file
is left behind. With ``on_error="skip"`` they are listed in the summary and left out instead.
"""

from __future__ import annotations

import heapq
import os
import pickle
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from simeval import service
from simeval.datafiles.columns import (
    CHUNK_ROWS,
    DEFAULT_COLUMNS,
    FORMATS,
    Chunk,
    Columns,
    detect_format,
)
from simeval.datafiles.read import input_fields, input_size, parquet_ok, read_chunks
from simeval.errors import InvalidInput, InvalidOption
from simeval.runs.baseline import (
    Baseline,
    Comparison,
    is_stored_run,
    load_baseline,
    load_stored_baseline,
)
from simeval.runs.config import (
    EVAL_FIELDS,
    MAX_NAMED,
    RESULT_FIELDS,
    ChunkOut,
    EvalDef,
    RowError,
    RunConfig,
    UnmatchedRow,
    WorstCase,
    default_results_path,
    load_evals,
)
from simeval.runs.execute import map_chunks
from simeval.runs.result_files import JUnitWriter, ResultsWriter
from simeval.runs.storing import RunStore, RunStoreProcess, stored_options
from simeval.runs.summary import (
    NO_GATES,
    EvalStats,
    GateLimits,
    RunSummary,
    check_gates,
)
from simeval.scoring.options import DEFAULT_THRESHOLD, check_threshold
from simeval.scoring.scorer import Scorer, get_scorer

Progress = Callable[[int, int], None]
# rows kept for a ``store`` function: a chunk's rows (a list, or pickled by a pool worker)
Keep = Callable[[list[tuple[object, ...]] | bytes], None]
# a ``store`` function: given the rows (lists of STORE_COLUMNS tuples) and the summary to
# keep, it stores the run and returns its id (``store_run`` with its service and names)
StoreRun = Callable[[Iterator[list[tuple[object, ...]]], dict[str, object]], int]


@dataclass
class RunOptions:
    """The knobs of ``run_file`` beyond the input itself."""

    columns: Columns = DEFAULT_COLUMNS
    threshold: float = DEFAULT_THRESHOLD
    options: dict[str, object] = field(default_factory=dict)
    evals: Sequence[EvalDef] = ()
    fmt: str | None = None
    results: str | None = None
    write_results: bool = True
    junit: str | None = None
    baseline: Baseline | None = None
    tolerance: float = 0.05
    on_error: str = "fail"
    workers: int = 1
    dask: str | None = None
    worst: int = 5
    chunk_rows: int = CHUNK_ROWS
    quoting: bool = True
    collect: str | None = None
    # checked once the run is scored (the summary's ``gates``), before it is stored
    gates: GateLimits | None = None
    # a ``RunStore`` (the rows go to the database while the run is scored), or a function
    # called once the run has succeeded with the rows to store (lists of STORE_COLUMNS tuples)
    # and the summary to keep, returning the stored run's id (see ``store_run``)
    store: RunStore | StoreRun | None = None
    # how the input is named in messages, JUnit and the summary (default: its path): an
    # engine run scores a file of answers made from the named input
    label: str | None = None
    # kept in the stored summary too (an engine run's engine and numbers)
    extra: dict[str, object] | None = None
    # an engine run's answers: the column of each row's engine time in milliseconds and the
    # seconds the answering took, both counted in JUnit's times (the wall time of a case and
    # of the suite)
    latency: str | None = None
    answering_s: float = 0.0


def run_file(path: str, opts: RunOptions, progress: Progress | None = None) -> RunSummary:
    """Score every row of a data-set file; return the summary (see ``RunSummary``).

    ``progress(done, total)`` is called after every chunk (bytes, or rows for Parquet).
    Raises ``InvalidInput`` naming the file and line or row for bad input; nothing is written
    then. ``opts.collect`` names a column whose values come back as ``summary.collected``
    (``(where, value, score)`` per result; used by calibration).
    """
    started = time.perf_counter()
    fmt = detect_format(path, opts.fmt)
    if opts.on_error not in {"fail", "skip"}:
        raise InvalidOption(f"on_error must be fail or skip, not {opts.on_error!r}")
    if not isinstance(opts.workers, int) or opts.workers < 1:
        raise InvalidInput(f"workers must be a positive integer, not {opts.workers!r}")
    threshold = check_threshold(opts.threshold)
    scorer = None if opts.evals else get_scorer(**opts.options)
    cfg, results_path = _config(path, fmt, opts, threshold)
    total = input_size(path, fmt)
    storing = _Storing(opts.store)
    files = _Files()
    try:
        files.open(results_path, cfg, opts.junit, opts.label or path)
        storing.start(scorer, opts, threshold, fmt)
        chunks = read_chunks(path, fmt, opts.chunk_rows, opts.quoting)
        summary = _consume(cfg, chunks, opts, files, progress, total, storing.keep)
        if summary.rows == 0:
            raise InvalidInput(f"{path}: the file has no rows")
        if summary.results == 0 and summary.skipped:
            where, error = summary.skipped_rows[0]
            raise InvalidInput(
                f"no row could be scored: all {summary.skipped} rows are bad "
                f"(first: {where}: {error})"
            )
        elapsed = time.perf_counter() - started
        _describe(summary, path, fmt, results_path, opts, elapsed, scorer, threshold)
        if opts.gates is not None:
            summary.gates = check_gates(summary, opts.gates)
        storing.finish(summary)
        # JUnit's suite time is the wall time: the answering, the scoring, the storing
        files.commit(summary, time.perf_counter() - started + opts.answering_s)
    except BaseException:
        files.discard()
        storing.abort()
        raise
    finally:
        storing.close()
    return summary


def _config(
    path: str, fmt: str, opts: RunOptions, threshold: float
) -> tuple[RunConfig, str | None]:
    """The run's ``RunConfig`` and its results file, the input's columns checked."""
    fields = input_fields(path, fmt, opts.quoting)
    cols = opts.columns
    if fmt != "jsonl":
        wanted = [cols.output] + ([] if opts.evals else list(cols.references))
        wanted += [
            c for c, req in ((cols.input, cols.input_required), (cols.id, cols.id_required)) if req
        ]
        wanted += [opts.collect] if opts.collect else []
        unit = "line 1" if fmt != "parquet" else "schema"
        for col in wanted:
            if col not in fields:
                raise InvalidInput(
                    f"{path} {unit}: no column {col!r} (columns: {', '.join(fields) or 'none'})"
                )
    out_fmt = None
    results_path = None
    if opts.write_results:
        results_path = opts.results or default_results_path(path, fmt)
        suffix = Path(results_path).suffix.lower()
        if suffix not in FORMATS:
            raise InvalidInput(
                f"cannot tell the format of the results file {results_path} from its "
                "extension; name it .jsonl, .csv, .tsv or .parquet"
            )
        out_fmt = FORMATS[suffix]
        if Path(results_path).resolve() == Path(path).resolve():
            raise InvalidInput(f"the results file would overwrite the input: {results_path}")
    result_names = set(RESULT_FIELDS + EVAL_FIELDS)
    cfg = RunConfig(
        source=opts.label or path,
        fmt=fmt,
        out_fmt=out_fmt,
        columns=cols,
        threshold=threshold,
        options=tuple(sorted(opts.options.items())),
        evals=tuple(opts.evals),
        on_error=opts.on_error,
        junit=opts.junit is not None,
        latency=opts.latency,
        keys=opts.baseline is not None,
        store=opts.store is not None,
        collect=opts.collect,
        worst=opts.worst,
        header=fields if fmt in {"csv", "tsv"} else (),
        quoting=opts.quoting,
        out_fields=tuple(f for f in fields if f not in result_names),
    )
    if out_fmt == "parquet" or fmt == "parquet":
        parquet_ok()
    return cfg, results_path


def _describe(
    summary: RunSummary,
    path: str,
    fmt: str,
    results_path: str | None,
    opts: RunOptions,
    elapsed: float,
    scorer: Scorer | None,
    threshold: float,
) -> None:
    """What the summary says of the run beyond its numbers: its files, time and scorer."""
    summary.file, summary.format = opts.label or path, fmt
    summary.extra = opts.extra
    summary.results_file, summary.junit_file = results_path, opts.junit
    summary.elapsed_s = elapsed
    summary.rows_per_s = summary.rows / elapsed if elapsed > 0 else None
    summary.workers, summary.dask = opts.workers, opts.dask
    if scorer is not None:
        summary.threshold = threshold
        summary.fingerprint = scorer.fingerprint
        summary.options = scorer.describe()


class _Files:
    """The run's results file and JUnit report: written as chunks come, renamed into place
    on ``commit``, thrown away on ``discard``."""

    def __init__(self) -> None:
        self.writer: ResultsWriter | None = None
        self.junit: JUnitWriter | None = None

    def open(self, results: str | None, cfg: RunConfig, junit: str | None, path: str) -> None:
        if results:
            self.writer = ResultsWriter(results, cfg)
        if junit:
            self.junit = JUnitWriter(junit, f"simeval run {Path(path).name}")

    def write(self, out: ChunkOut) -> None:
        if self.writer:
            self.writer.write(out)
        if self.junit:
            self.junit.write(out)

    def commit(self, summary: RunSummary, elapsed: float) -> None:
        if self.writer:
            self.writer.commit()
        if self.junit:
            tests = summary.results + summary.skipped
            self.junit.commit(tests, summary.failed, summary.skipped, elapsed)

    def discard(self) -> None:
        if self.writer:
            self.writer.discard()
        if self.junit:
            self.junit.discard()


class _Storing:
    """Where the run's rows go: a ``RunStore`` (written as they come, deleted if the run
    fails), or a spool file for a ``store`` function (the database sees the rows only once the
    run has succeeded), or nowhere."""

    def __init__(self, store: RunStore | StoreRun | None):
        self.store = store
        self.sink = store if isinstance(store, RunStore) else None
        self.spool: IO[bytes] | None = None
        if store is not None and self.sink is None:
            self.spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.keep: Keep | None = None

    def start(self, scorer: Scorer | None, opts: RunOptions, threshold: float, fmt: str) -> None:
        if self.sink is not None:
            self.sink.start(
                stored_options(scorer, opts.options, opts.evals, threshold, opts.workers, fmt)
            )
            self.keep = self.sink.add
        elif self.spool is not None:
            dump, dest = pickle.dump, self.spool

            def keep(rows: list[tuple[object, ...]] | bytes) -> None:
                if isinstance(rows, bytes):  # pickled by a pool worker: one object
                    dest.write(rows)
                else:
                    dump(rows, dest, pickle.HIGHEST_PROTOCOL)

            self.keep = keep

    def finish(self, summary: RunSummary) -> None:
        """Store the summary with the rows; the summary gets the stored run's id."""
        if self.sink is not None:
            summary.run_name = self.sink.name
            summary.run_id = self.sink.finish(summary.stored())
        elif self.spool is not None:
            store = self.store
            assert store is not None and not isinstance(store, RunStore)  # a spool: a function
            summary.run_id = store(_spooled(self.spool), summary.stored())

    def abort(self) -> None:
        if self.sink is not None:
            self.sink.abort()

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()


def _spooled(spool: IO[bytes]) -> Iterator[list[tuple[object, ...]]]:
    """The spooled rows to store, a chunk's rows at a time."""
    spool.seek(0)
    while True:
        try:
            yield pickle.load(spool)
        except EOFError:
            return


# -- the chunks as they come -----------------------------------------------------------------
def _consume(
    cfg: RunConfig,
    chunks: Iterator[Chunk],
    opts: RunOptions,
    files: _Files,
    progress: Progress | None,
    total: int,
    keep: Keep | None = None,
) -> RunSummary:
    tally = _Tally(cfg, opts)
    try:
        for out in map_chunks(cfg, chunks, opts.workers, opts.dask):
            tally.add(out)
            if keep is not None and (out.store_rows or out.store_blob):
                keep(out.store_blob or out.store_rows)
            files.write(out)
            if progress:
                progress(out.nbytes, total)
    except RowError as exc:
        raise InvalidInput(str(exc)) from None
    return tally.summary()


class _Tally:
    """The run's bounded state while its chunks come in: counts, sums, the first bad rows,
    the worst cases, the missing terms, the per-eval numbers, the baseline comparison."""

    def __init__(self, cfg: RunConfig, opts: RunOptions):
        self.cfg = cfg
        self.rows = self.results = self.passed = self.unmatched = self.n_errors = 0
        self.score_sum = 0.0
        self.errors: list[tuple[str, str]] = []
        self.unmatched_rows: list[UnmatchedRow] = []
        self.worst: list[tuple[float, int, WorstCase]] = []
        self.missing: Counter[str] = Counter()
        self.per_eval: dict[str, list[float]] = {e.name: [0, 0, 0.0] for e in cfg.evals}
        self.collected: list[tuple[str, object, float]] = []
        self.comparison = (
            Comparison(opts.baseline, opts.tolerance) if opts.baseline is not None else None
        )
        self.seq = 0

    def add(self, out: ChunkOut) -> None:
        self.rows += out.rows
        self.results += out.results
        self.passed += out.passed
        self.score_sum += out.score_sum
        self.unmatched += out.unmatched
        self.n_errors += len(out.errors)
        self.errors.extend(out.errors[: max(0, MAX_NAMED - len(self.errors))])
        room = MAX_NAMED - len(self.unmatched_rows)
        self.unmatched_rows.extend(out.unmatched_rows[: max(0, room)])
        self.missing.update(out.missing)
        for name, (n, p, s) in out.per_eval.items():
            acc = self.per_eval[name]
            acc[0] += n
            acc[1] += p
            acc[2] += s
        for info in out.worst:
            item = (-info.score, -self.seq, info)
            self.seq += 1
            if len(self.worst) < self.cfg.worst:
                heapq.heappush(self.worst, item)
            elif item > self.worst[0]:
                heapq.heapreplace(self.worst, item)
        if self.comparison is not None:
            for key, score, ok, name, miss in out.cases:
                self.comparison.add(key, score, ok, name, miss)
        if out.collected:
            self.collected.extend(out.collected)

    def summary(self) -> RunSummary:
        cfg, results, passed = self.cfg, self.results, self.passed
        if cfg.evals:
            fingerprints = {get_scorer(**dict(e.options)).fingerprint for e in cfg.evals}
        else:
            fingerprints = {get_scorer(**dict(cfg.options)).fingerprint}
        summary = RunSummary(
            rows=self.rows,
            results=results,
            passed=passed,
            failed=results - passed,
            skipped=self.n_errors,
            skipped_rows=self.errors,
            pass_rate=passed / results if results else None,
            mean_score=self.score_sum / results if results else None,
            worst=[info for _, _, info in sorted(self.worst, reverse=True)],
            most_missing=self.missing.most_common(10),
            fingerprints=sorted(fingerprints),
        )
        if cfg.evals:
            summary.unmatched_rows = self.unmatched
            summary.unmatched = self.unmatched_rows
            summary.evals = {e.name: self._eval_stats(e) for e in cfg.evals}
        if self.comparison is not None:
            summary.baseline = self.comparison.report(fingerprints)
        if cfg.collect is not None:
            summary.collected = self.collected
        return summary

    def _eval_stats(self, e: EvalDef) -> EvalStats:
        n, p, s = self.per_eval[e.name]
        return EvalStats(
            int(n), int(p), p / n if n else None, s / n if n else None, e.threshold, e.version
        )


# -- a run as the command line asks for it ---------------------------------------------------
def resolve_workers(workers: int | None) -> int:
    """Local worker processes: ``workers``, or every core for None."""
    if workers is None:
        return os.cpu_count() or 1
    if workers < 1:
        raise InvalidInput(f"--workers must be at least 1, not {workers}")
    return workers


@dataclass
class RunRequest:
    """A run as ``simeval run`` asks for it: the file and how to read it, reference columns
    (``columns``, ``threshold``, scorer ``options``) or an eval definitions file
    (``evals_file``), the results and JUnit files, a ``baseline`` (a results file, or a stored
    run: ``run:ID``, ``run:latest``), storing the run (``store``, as ``run_name`` in ``db``),
    the gates. ``workers``: local processes (None: every core)."""

    file: str
    columns: Columns = DEFAULT_COLUMNS
    threshold: float | str = DEFAULT_THRESHOLD
    options: dict[str, object] = field(default_factory=dict)
    evals_file: str | None = None
    fmt: str | None = None
    quoting: bool = True
    results: str | None = None
    write_results: bool = True
    junit: str | None = None
    baseline: str | None = None
    tolerance: float = 0.05
    on_error: str = "fail"
    workers: int | None = None
    dask: str | None = None
    worst: int = 5
    store: bool = False
    run_name: str | None = None
    db: str | None = None
    gates: GateLimits = NO_GATES

    @property
    def name(self) -> str:
        """The stored run's name (the file's name unless ``run_name`` is given); a
        ``run:latest`` baseline is the newest stored run of this name."""
        return self.run_name or os.path.basename(self.file)


def run_request(request: RunRequest, progress: Progress | None = None) -> RunSummary:
    """Run ``request``: read its evals file, load its baseline (a stored run from the
    database), store the run through a writer process of its own if asked, check the gates
    (once, before the run is stored: the stored summary has them). ``summary.ok`` says
    whether every gate held."""
    evals = load_evals(request.evals_file) if request.evals_file is not None else ()
    baseline = None
    if request.baseline is not None:
        if is_stored_run(request.baseline):
            # a stored baseline needs the database before the run (the rows are stored by a
            # writer process of their own)
            svc = service.open_service(request.db)
            baseline = load_stored_baseline(svc, request.baseline, request.name)
        else:
            baseline = load_baseline(request.baseline, request.columns)
    store = None
    if request.store:
        # the rows go to a database writer process while the run is scored (a failed run
        # leaves none)
        store = RunStoreProcess(request.db, request.name, request.file)
    opts = RunOptions(
        columns=request.columns,
        threshold=check_threshold(request.threshold),
        options=request.options,
        evals=evals,
        store=store,
        fmt=request.fmt,
        quoting=request.quoting,
        results=request.results,
        write_results=request.write_results,
        junit=request.junit,
        baseline=baseline,
        tolerance=request.tolerance,
        on_error=request.on_error,
        workers=resolve_workers(request.workers),
        dask=request.dask,
        worst=request.worst,
        gates=request.gates,
    )
    return run_file(request.file, opts, progress)
