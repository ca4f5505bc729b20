"""Batches: many rows scored at once (``score_many``, ``iter_scores``), and the one process pool.

``ordered_map`` is the pool every batch uses, here and in data-set runs (``simeval.runs``):
items go to worker processes, results come back in input order, at most two items per worker
are in flight (memory stays flat however long the input), and an input of one item is done in
this process (not worth starting processes for). Workers are forked where the platform can
(they start with the parent's warm caches), spawned elsewhere.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from simeval.errors import InvalidInput, InvalidType
from simeval.scoring.scorer import Scorer, get_scorer

if TYPE_CHECKING:
    from multiprocessing.pool import AsyncResult

T = TypeVar("T")
R = TypeVar("R")
Row = tuple[str, str | Sequence[str], str | None]  # output, reference(s), input


def ordered_map(
    func: Callable[[T], R],
    items: Iterator[T],
    workers: int,
    initializer: Callable[..., None],
    initargs: tuple[object, ...],
    inline: Callable[[T], R],
) -> Iterator[R]:
    """``func(item)`` for every item, in ``workers`` processes, yielded in input order.

    Each worker runs ``initializer(*initargs)`` once (what every item needs: a scorer, a run's
    configuration). At most ``2 * workers`` items are in flight. With fewer than two items no
    process is started: ``inline(item)`` runs here. The pool is stopped when the caller stops
    reading (an error, a generator closed early).
    """
    first = next(items, None)
    if first is None:
        return
    second = next(items, None)
    if second is None:  # a single item is not worth starting processes for
        yield inline(first)
        return
    import multiprocessing as mp

    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    pool = ctx.Pool(workers, initializer=initializer, initargs=initargs)
    try:
        pending: deque[AsyncResult[R]] = deque()
        for item in itertools.chain((first, second), items):
            pending.append(pool.apply_async(func, (item,)))
            while len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
    finally:
        pool.terminate()
        pool.join()


# -- score_many ------------------------------------------------------------------------------
_WORKER: Scorer | None = None


def _worker_init(options: Mapping[str, object]) -> None:
    global _WORKER
    _WORKER = get_scorer(**options)


def _worker_chunk(chunk: list[Row]) -> list[float]:
    assert _WORKER is not None
    s = _WORKER.score
    return [s(o, r, q) for o, r, q in chunk]


def _chunks(pairs: Iterable[Row], size: int) -> Iterator[list[Row]]:
    it = iter(pairs)
    while chunk := list(islice(it, size)):
        yield chunk


def iter_scores(
    outputs: Iterable[str],
    references: Iterable[str | Sequence[str]],
    inputs: Iterable[str | None] | None = None,
    *,
    workers: int | None = None,
    chunk_size: int = 2000,
    **options: Any,
) -> Iterator[float]:
    """Scores of ``zip(outputs, references[, inputs])``, streamed in order; memory stays flat.

    ``inputs``: the question of each row (None for a row without one). ``workers`` processes
    share the work (default: all cores; 1 = in this process). Inputs are read lazily,
    ``chunk_size`` pairs at a time, and at most two chunks per worker are in flight. The
    numbers are exactly those of ``score``.
    """
    scorer = get_scorer(**options)
    pairs = _strict_zip(outputs, references, inputs)
    n = (os.cpu_count() or 1) if workers is None else workers
    if not isinstance(n, int) or n < 1:
        raise InvalidInput(f"workers must be a positive integer, not {workers!r}")
    if n == 1:
        for o, r, q in pairs:
            yield scorer.score(o, r, q)
        return

    def here(chunk: list[Row]) -> list[float]:
        return [scorer.score(o, r, q) for o, r, q in chunk]

    chunks = _chunks(pairs, chunk_size)
    init = (dict(scorer.options),)
    for scores in ordered_map(_worker_chunk, chunks, n, _worker_init, init, here):
        yield from scores


def _strict_zip(
    outputs: Iterable[str],
    references: Iterable[str | Sequence[str]],
    inputs: Iterable[str | None] | None,
) -> Iterator[Row]:
    if isinstance(outputs, str) or isinstance(references, str) or isinstance(inputs, str):
        raise InvalidType(
            "score_many takes sequences of outputs, references and inputs, not a string"
        )
    try:
        if inputs is None:
            for o, r in zip(outputs, references, strict=True):
                yield o, r, None
        else:
            yield from zip(outputs, references, inputs, strict=True)
    except ValueError:
        raise InvalidInput("outputs, references and inputs have different lengths") from None


def score_many(
    outputs: Iterable[str],
    references: Iterable[str | Sequence[str]],
    inputs: Iterable[str | None] | None = None,
    *,
    workers: int | None = None,
    **options: Any,
) -> list[float]:
    """Scores of many (output, reference[, input]) rows: the same numbers as ``score``, faster.

    >>> score_many(["a cat", "the dog"], ["a cat", "a cat"], workers=1)
    [1.0, 0.0]
    """
    return list(iter_scores(outputs, references, inputs, workers=workers, **options))
