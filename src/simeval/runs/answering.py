"""Answering a data set's cases with one engine: the cases stream in from the input file, the
answers stream out to a JSONL file the run then scores (``simeval.runs.engine_run``).

The engine is asked ``concurrency`` cases at a time; the answers are written in input order
(a bounded window of cases is in flight: memory stays flat however many cases there are).
Each answered row is the case's row with the answer in the output column and the engine's
columns: ``engine``, ``repeat`` (with ``--repeat``), ``latency_ms``, ``prompt_tokens``,
``completion_tokens``, ``cost`` (when the engine has prices), ``cached``. A case the engine
could not answer keeps no output and gets ``engine_error``, its message: the scoring loop
reports it as that case's error (``--on-error``), never as the run's crash.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

from simeval.datafiles.columns import CHUNK_ROWS, Columns
from simeval.datafiles.read import BadRow, decode, id_cell, input_fields, input_size, read_chunks
from simeval.runs.config import RunConfig
from simeval.runs.engine_cache import ResponseCache, cache_key
from simeval.runs.engines import HTTP_CONCURRENCY, Answer, Case, Engine, EngineSpec

ENGINE_ERROR = "engine_error"  # the answered row's column with an engine's error message
# the columns an engine run adds to a case's row (a results file keeps them)
ENGINE_FIELDS = (
    "engine",
    "repeat",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "cached",
    ENGINE_ERROR,
)
Progress = Callable[[int, int], None]
_BUCKET = math.log(1.02)  # latency quantiles to 2%, in bounded memory


@dataclass
class EngineStats:
    """One engine's answering: counts, calls, latency quantiles, tokens, cost, first errors."""

    cases: int = 0
    answered: int = 0
    errors: int = 0
    cached: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    elapsed_s: float = 0.0
    first_errors: list[tuple[str, str]] = field(default_factory=list)
    latency_buckets: dict[int, int] = field(default_factory=dict)

    def add(self, where: str, answer: Answer, cost: float | None) -> None:
        """Count one answer."""
        self.cases += 1
        self.calls += answer.calls
        if answer.output is None:
            self.errors += 1
            if len(self.first_errors) < 10:
                self.first_errors.append((where, answer.error or "no answer"))
            return
        self.answered += 1
        if answer.cached:
            self.cached += 1
        else:  # a cached answer took no time: it says nothing of the engine's latency
            b = int(math.log1p(max(0.0, answer.latency_ms)) / _BUCKET)
            self.latency_buckets[b] = self.latency_buckets.get(b, 0) + 1
        self.prompt_tokens += answer.prompt_tokens or 0
        self.completion_tokens += answer.completion_tokens or 0
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost

    def latency_ms(self, q: float) -> float | None:
        """The ``q`` quantile of the answers' latency (to about 2%), None without any."""
        total = sum(self.latency_buckets.values())
        if not total:
            return None
        rank, seen = q * (total - 1), 0
        for b in sorted(self.latency_buckets):
            seen += self.latency_buckets[b]
            if seen > rank:
                return round(math.expm1((b + 0.5) * _BUCKET), 1)
        return None  # pragma: no cover - the loop always reaches the rank

    def to_dict(self) -> dict[str, object]:
        """The numbers as a summary shows them."""
        return {
            "cases": self.cases,
            "answered": self.answered,
            "errors": self.errors,
            "cached": self.cached,
            "calls": self.calls,
            "latency_ms_p50": self.latency_ms(0.5),
            "latency_ms_p95": self.latency_ms(0.95),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "elapsed_s": round(self.elapsed_s, 3),
            "cases_per_s": round(self.cases / self.elapsed_s, 1) if self.elapsed_s else None,
            "first_errors": [{"where": w, "error": e} for w, e in self.first_errors],
        }


@dataclass
class AnswerJob:
    """What ``answer_file`` needs: the input and how to read it, the engine, the knobs."""

    source: str  # the input file
    fmt: str
    display: str  # how the input is named in messages (the file, or dataset:NAME@V)
    columns: Columns
    spec: EngineSpec
    concurrency: int | None = None  # None: the engine's own, else its kind's default
    repeat: int = 1
    cache: ResponseCache | None = None
    quoting: bool = True
    chunk_rows: int = CHUNK_ROWS


def make_engine(spec: EngineSpec, concurrency: int) -> Engine:
    """The engine object for a declaration (HTTP, command or Python)."""
    if spec.kind == "http":
        from simeval.runs.engine_http import HttpEngine

        return HttpEngine(spec, concurrency)
    from simeval.runs.engine_local import CommandEngine, PythonEngine

    if spec.kind == "cmd":
        return CommandEngine(spec)
    return PythonEngine(spec, concurrency)


def concurrency_for(spec: EngineSpec, asked: int | None) -> int:
    """Cases in flight: ``--concurrency``, else the engine's, else 8 for HTTP and 1 for a
    command (which answers in order, one line at a time) or a callable."""
    if spec.kind == "cmd":
        return 1
    if asked is not None:
        return asked
    if spec.concurrency is not None:
        return spec.concurrency
    return HTTP_CONCURRENCY if spec.kind == "http" else 1


def _cases(job: AnswerJob) -> Iterator[tuple[str, dict[str, object] | None, str | None, int, int]]:
    """(where, row or None, problem, bytes read so far, the input's size) for every row."""
    cfg = RunConfig(
        source=job.display,
        fmt=job.fmt,
        header=input_fields(job.source, job.fmt, job.quoting) if job.fmt in {"csv", "tsv"} else (),
        quoting=job.quoting,
    )
    total = input_size(job.source, job.fmt)
    done = 0
    for chunk in read_chunks(job.source, job.fmt, job.chunk_rows, job.quoting):
        end = chunk.nbytes if job.fmt != "parquet" else done + chunk.nrows
        step = (end - done) / max(1, chunk.nrows)  # the progress moves row by row
        for i, (where, _ordinal, row) in enumerate(decode(cfg, chunk)):
            at = done + int(i * step)
            if isinstance(row, BadRow):
                yield where, None, str(row), at, total
            else:
                yield where, row, None, at, total
        done = end
    yield "", None, None, done, total  # the end: the bar full


def _case_object(
    row: dict[str, object], job: AnswerJob, repeat: int
) -> tuple[Case | None, str | None]:
    """What the engine is given for a row (or why it cannot be asked)."""
    cols = job.columns
    text = row.get(cols.input)
    if not isinstance(text, str) or not text.strip():
        return None, f"no input to answer (column {cols.input!r} must be a non-empty string)"
    try:
        case_id = id_cell(row, cols)
    except BadRow as bad:
        return None, str(bad)
    return {
        "id": case_id,
        "input": text,
        "prompt": job.spec.prompt(text),
        "system": job.spec.system,
        "params": dict(job.spec.params),
        "repeat": repeat,
    }, None


def answer_file(job: AnswerJob, out: IO[bytes], progress: Progress | None = None) -> EngineStats:
    """Answer every case of ``job.source`` (``job.repeat`` times), writing the answered rows
    to ``out`` as JSON lines in input order; returns the engine's numbers. A case the engine
    cannot answer is written with its ``engine_error``."""
    try:  # uvloop (a dependency where it builds) halves the event loop's share per call
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - Windows
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_answer_all(job, out, progress))


async def _answer_all(job: AnswerJob, out: IO[bytes], progress: Progress | None) -> EngineStats:
    spec = job.spec
    limit = concurrency_for(spec, job.concurrency)
    engine = make_engine(spec, limit)
    stats = EngineStats()
    started = time.perf_counter()
    sem = asyncio.Semaphore(limit)
    cache = job.cache
    window: deque[tuple[str, dict[str, object], int, asyncio.Future[Answer]]] = deque()
    keep = max(4 * limit, 64)  # cases in flight or answered, waiting for their turn to be written

    async def ask(case: Case) -> Answer:
        key = cache_key(spec, case["prompt"], case["repeat"]) if cache is not None else ""
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                return hit
        async with sem:
            try:
                answer: Answer = await engine.answer(case)
            except Exception as exc:  # an engine's surprise is the case's error, not the run's
                answer = Answer(error=f"{type(exc).__name__}: {exc}"[:500], calls=1)
        if cache is not None and answer.output is not None:
            cache.put(key, answer)
        return answer

    lines = 0  # lines of answers written

    def written(where: str, row: dict[str, object], repeat: int, answer: Answer) -> None:
        nonlocal lines
        cost = spec.cost(answer.prompt_tokens, answer.completion_tokens)
        stats.add(where, answer, cost)
        if job.repeat == 1:
            # blank lines (which the reader skips) keep each answer on its case's line
            # number: a message about it names the input's line (a CSV header, a multi-line
            # record, blank lines of the input)
            number = where.rsplit(" ", 1)[-1]
            if number.isdigit() and int(number) - 1 > lines:
                out.write(b"\n" * (int(number) - 1 - lines))
                lines = int(number) - 1
        _write_row(out, job, row, repeat, answer, cost)
        lines += 1

    await engine.start()
    try:
        for where, row, problem, done, total in _cases(job):
            if not where:  # the end of the input
                if progress is not None:
                    progress(done, total)
                break
            for repeat in range(job.repeat):
                if row is None or problem is not None:
                    written(where, row or {}, repeat, Answer(error=problem))
                    continue
                case, why = _case_object(row, job, repeat)
                if case is None:
                    written(where, row, repeat, Answer(error=why))
                    continue
                window.append((where, row, repeat, asyncio.ensure_future(ask(case))))
                while len(window) >= keep:
                    w, r, k, fut = window.popleft()
                    written(w, r, k, await fut)
            if progress is not None:
                progress(done, total)
        while window:
            w, r, k, fut = window.popleft()
            written(w, r, k, await fut)
    finally:
        for *_, fut in window:
            fut.cancel()
        await engine.close()
        if cache is not None:
            cache.flush()
    stats.elapsed_s = time.perf_counter() - started
    return stats


def _write_row(
    out: IO[bytes],
    job: AnswerJob,
    row: dict[str, object],
    repeat: int,
    answer: Answer,
    cost: float | None,
) -> None:
    """One answered row, as the scoring loop reads it."""
    line = {k: v for k, v in row.items() if k not in ENGINE_FIELDS}
    line.pop(job.columns.output, None)
    if answer.output is not None:
        line[job.columns.output] = answer.output
    line["engine"] = job.spec.name
    if job.repeat > 1:
        line["repeat"] = repeat + 1
    line["latency_ms"] = round(answer.latency_ms, 1)
    line["prompt_tokens"] = answer.prompt_tokens
    line["completion_tokens"] = answer.completion_tokens
    if job.spec.prices:
        line["cost"] = cost
    line["cached"] = answer.cached
    if answer.output is None:
        # an engine's error names the engine; a row that could not be asked is the input's
        said = answer.error or "no answer"
        line[ENGINE_ERROR] = f"engine {job.spec.name}: {said}" if answer.calls else said
    out.write(json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")
