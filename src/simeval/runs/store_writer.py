"""The database writer of ``simeval run --store``: a process of its own.

``simeval.runs.RunStoreProcess`` starts it as ``python -m simeval.runs.store_writer`` and talks
to it over its standard input and output in frames (``simeval.runs.frames``: an 8-byte length,
then a pickle). The first frame says where and what to store (``start``), then come
``("rows", rows)`` frames (a chunk's rows, or the bytes a pool worker pickled them into), then
``("finish", summary)`` or ``("abort", None)``. The writer answers once: ``("done", run_id)``,
``("aborted", None)`` or ``("error", exception)``.

A plain interpreter started on this module imports only what storing needs (the store and the
run part of the service): not the command line, the rest of ``simeval.runs`` (its face is
lazy), or the rest of the service, which ``multiprocessing``'s spawn would import again. On a
machine the run keeps busy, that is CPU the run gets back (``tests/runs/test_library.py``
holds the list).

If the run's process dies, the writer reads the end of its input and stops: the run stays
marked as storing, which shows as interrupted.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

from simeval.runs.frames import read_frame, send_frame, unpickled
from simeval.service.runs import RunsMixin
from simeval.store.run_rows import STORE_COLUMNS


class Aborted(Exception):
    """The run asked for its rows to be dropped."""


def serve(inbox: IO[bytes], outbox: IO[bytes]) -> None:
    """Store one run: what ``RunStoreProcess`` sends on ``inbox``, answered on ``outbox``."""
    svc: RunsMixin | None = None
    run_id: int | None = None
    end: list[tuple[str, Any]] = []

    def batches() -> Iterator[Any]:
        while True:
            kind, payload = read_frame(inbox)
            if kind != "rows":
                end.append((kind, payload))
                return
            yield payload

    try:
        _, db, name, source, options, per_transaction, labels = read_frame(inbox)
        svc = RunsMixin(db)
        run_id = svc.create_run(
            name, source, options=options, summary={"status": "storing"}, **labels
        )
        svc.add_run_rows(run_id, STORE_COLUMNS, unpickled(batches()), per_transaction)
        kind, summary = end[0]
        if kind != "finish":
            raise Aborted()
        svc.set_run_summary(run_id, {**summary, "status": "complete", "run_id": run_id})
        send_frame(outbox, ("done", run_id))
    except (EOFError, OSError):
        return  # the run's process is gone: its run shows as interrupted
    except BaseException as exc:
        if svc is not None and run_id is not None:
            with contextlib.suppress(Exception):
                svc.discard_run(run_id)
        with contextlib.suppress(OSError):
            if isinstance(exc, Aborted):
                send_frame(outbox, ("aborted", None))
            else:
                try:
                    send_frame(outbox, ("error", exc))
                except Exception:  # an error that does not pickle
                    send_frame(outbox, ("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        if svc is not None:
            svc.close()


def main() -> None:
    # no collector: the rows are tuples freed by their counts, and a batch of them promoted
    # to the oldest generation set off full collections over every object imported (a
    # quarter of this process's time)
    gc.disable()
    # the frames own standard output: anything printed by accident goes to standard error
    outbox = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        serve(sys.stdin.buffer, outbox)
    finally:
        with contextlib.suppress(OSError):
            outbox.close()


if __name__ == "__main__":
    main()
