"""Where a run's chunks are scored: in this process, in a local process pool (the one pool,
``simeval.scoring.batch.ordered_map``), or on a Dask cluster. The chunks and the function are
the same everywhere, so the numbers are too; results come back in input order with a bounded
number of chunks in flight.
"""

from __future__ import annotations

import pickle
from collections import deque
from collections.abc import Iterator
from typing import Any

from simeval.datafiles.columns import Chunk
from simeval.errors import InvalidInput
from simeval.runs.config import ChunkOut, RunConfig
from simeval.runs.score import process_chunk
from simeval.scoring.batch import ordered_map

_POOL_CFG: RunConfig | None = None


def _pool_init(cfg: RunConfig) -> None:
    global _POOL_CFG
    _POOL_CFG = cfg


def _pool_chunk(chunk: Chunk) -> ChunkOut:
    assert _POOL_CFG is not None
    out = process_chunk(_POOL_CFG, chunk)
    if out.store_rows:
        # pickled here, as one bytes object: the run's process passes it on to the database
        # writer without making the rows' objects (RunStoreProcess)
        out.store_blob = pickle.dumps(out.store_rows, pickle.HIGHEST_PROTOCOL)
        out.store_rows = []
    return out


def map_chunks(
    cfg: RunConfig, chunks: Iterator[Chunk], workers: int = 1, dask_address: str | None = None
) -> Iterator[ChunkOut]:
    """``process_chunk`` over the chunks, results in input order, a bounded number in flight.

    One worker scores in this process; more use a local process pool; a Dask address sends the
    chunks to that cluster. Chunks are the same in every mode, so the numbers are too.
    """
    if dask_address:
        yield from _map_dask(cfg, chunks, dask_address)
        return
    if workers <= 1:
        for chunk in chunks:
            yield process_chunk(cfg, chunk)
        return

    def here(chunk: Chunk) -> ChunkOut:
        return process_chunk(cfg, chunk)

    yield from ordered_map(_pool_chunk, chunks, workers, _pool_init, (cfg,), here)


def _map_dask(cfg: RunConfig, chunks: Iterator[Chunk], address: str) -> Iterator[ChunkOut]:
    try:
        from dask.distributed import Client
    except ImportError:
        raise InvalidInput("--dask needs the dask extra: pip install 'simeval[dask]'") from None
    try:
        client = Client(address, timeout=30, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise InvalidInput(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        threads = sum(client.nthreads().values()) or 1
        shared = client.scatter(cfg, broadcast=True)
        pending: deque[Any] = deque()
        for chunk in chunks:
            pending.append(client.submit(process_chunk, shared, chunk, pure=False))
            while len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        client.close()
