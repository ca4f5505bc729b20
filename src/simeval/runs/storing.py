"""Storing a run in the database while it is scored: ``RunStore`` (a writer thread),
``RunStoreProcess`` (a writer process, what ``simeval run --store`` uses) and ``store_run``
(a finished run at once).

The rows are ``simeval.store.run_rows.STORE_COLUMNS`` tuples, as a run's workers make them; a
pool worker pickles a chunk's rows into one bytes object, which is passed on as it is and
unpickled only where the rows are inserted. A run that fails stores nothing: its rows so far
are deleted with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simeval.jsontypes import JSONObject, JSONValue
from simeval.runs.config import EvalDef
from simeval.runs.frames import read_frame, send_frame, unpickled
from simeval.store.run_rows import STORE_COLUMNS

if TYPE_CHECKING:
    import threading

    from simeval.scoring.scorer import Scorer

STORE_QUEUE = 32  # chunks of rows waiting for the writer (memory stays bounded)
ROWS_PER_TRANSACTION = 10_000


def _json_safe(value: object) -> JSONValue:
    return json.loads(json.dumps(value, default=str))


def stored_options(
    scorer: Scorer | None,
    options: Mapping[str, object],
    evals: Sequence[EvalDef],
    threshold: float,
    workers: int,
    fmt: str,
) -> JSONObject:
    """A stored run's ``options``: what the summary says of its scorer (a run with reference
    columns: ``scorer`` with ``options``; None for an eval-file run), and the scorer options
    themselves (``options``, or the ``evals``' by eval name), from which an explanation of
    one of its rows is computed when the row is shown."""
    out: dict[str, object] = {
        "threshold": threshold if scorer is not None else None,
        "fingerprint": scorer.fingerprint if scorer is not None else None,
        "options": scorer.describe() if scorer is not None else None,
        "workers": workers,
        "format": fmt,
    }
    if scorer is not None:
        out["scorer"] = dict(options)
    else:
        out["evals"] = {e.name: dict(e.options) for e in evals}
    safe = _json_safe(out)
    assert isinstance(safe, dict)  # a dict of JSON values gives back a dict
    return dict(safe)


class RunStore:
    """``RunOptions.store`` that writes a run to ``svc``'s database while it is scored.

    ``run_file`` calls ``start`` (the run is recorded, its summary saying ``storing``: no
    baseline yet), ``add`` with each chunk's rows (``STORE_COLUMNS`` tuples; a writer thread
    inserts them through ``Service.add_run_rows`` while the next chunks are scored), then
    ``finish`` with the summary to keep (returns the run's id) or, if the run fails,
    ``abort`` (the run and the rows written so far are deleted). ``name`` is the stored run's
    (the summary says it as ``run_name``); ``labels`` are ``create_run``'s keywords
    ``engine``, ``group``, ``dataset`` and ``dataset_version`` (an engine's run of a group).

    ``simeval run --store`` uses ``RunStoreProcess`` instead: a writer process of its own.
    """

    def __init__(
        self, svc: Any, name: str, source: str, labels: Mapping[str, object] | None = None
    ):
        self.svc, self.name, self.source = svc, name, source
        self.labels = dict(labels or {})
        self.run_id: int | None = None
        self.error: BaseException | None = None
        self.queue: Any = None
        self.thread: threading.Thread | None = None

    def start(self, options: JSONObject) -> None:
        """Record the run (``options``: see ``stored_options``) and start its writer."""
        import queue
        import threading

        self.run_id = self.svc.create_run(
            self.name, self.source, options=options, summary={"status": "storing"}, **self.labels
        )
        self.queue = queue.Queue(STORE_QUEUE)
        self.thread = threading.Thread(target=self._write, name="simeval-run-store", daemon=True)
        self.thread.start()

    def _write(self) -> None:
        get = self.queue.get
        try:
            rows = unpickled(iter(get, None))
            self.svc.add_run_rows(self.run_id, STORE_COLUMNS, rows, ROWS_PER_TRANSACTION)
        except BaseException as exc:  # handed to the run's thread by add or finish
            self.error = exc
            while get() is not None:  # let the run go on to its end, where it fails
                pass

    def _check(self) -> None:
        if self.error is not None:
            raise self.error

    def add(self, rows: list[tuple[object, ...]] | bytes) -> None:
        """Store a chunk's rows (a list, or the list pickled by a pool worker)."""
        self._check()
        self.queue.put(rows)

    def _stop(self) -> None:
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join()
            self.thread = None

    def finish(self, summary: dict[str, object]) -> int:
        """Wait for the rows to be stored, keep ``summary``; returns the run's id."""
        self._stop()
        self._check()
        assert self.run_id is not None
        self.svc.set_run_summary(
            self.run_id, {**summary, "status": "complete", "run_id": self.run_id}
        )
        return self.run_id

    def abort(self) -> None:
        """Delete the run and the rows stored so far (the run failed)."""
        self._stop()
        if self.run_id is not None:
            with contextlib.suppress(Exception):  # the run's own error is the one to report
                self.svc.discard_run(self.run_id)
            self.run_id = None


class RunStoreProcess(RunStore):
    """A ``RunStore`` whose database writer is a process of its own (``simeval.runs.store_writer``,
    see there): the run's process only passes each chunk's rows on (as the pool worker
    pickled them), so storing takes nothing of its interpreter (the database layer is
    imported, and the rows unpickled and inserted, in the writer). ``simeval run --store``
    uses it; ``db`` is what ``Service`` takes.

    The writer creates the run (its process recorded as the storing one), adds the rows as
    they come, and on ``finish`` stores the summary and answers the run's id; on ``abort``,
    or an error of its own, it deletes the run. If the run's process dies, the writer sees the
    end of its input and stops: the run shows as interrupted.
    """

    def __init__(
        self, db: str | None, name: str, source: str, labels: Mapping[str, object] | None = None
    ):
        super().__init__(None, name, source, labels)
        self.db = db
        self.proc: Any = None
        # the writer's one answer, read by a thread of this process
        self.answered: Any = None
        self.answer: tuple[str, Any] = ("error", RuntimeError("no answer"))

    def start(self, options: JSONObject) -> None:
        """Start the writer process and send it the run to record."""
        import queue
        import subprocess
        import threading

        # the writer finds its modules where this process found them (as multiprocessing
        # passes its path on), and nothing of the current directory's (-P): a json.py there
        # must not replace the standard library's in the writer
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "simeval.runs.store_writer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        start = (
            "start", self.db, self.name, self.source, options, ROWS_PER_TRANSACTION, self.labels
        )  # fmt: skip
        send_frame(self.proc.stdin, start)
        self.answered = threading.Event()
        threading.Thread(target=self._read, name="simeval-run-answer", daemon=True).start()
        self.queue = queue.Queue(STORE_QUEUE)
        # the writer reads nothing while it imports and opens the database: a thread of
        # this process waits on the pipe meanwhile, not the run
        self.thread = threading.Thread(target=self._send, name="simeval-run-send", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            answer = read_frame(self.proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            answer = ("error", RuntimeError("the run's database writer stopped"))
        self.answer = answer
        self.answered.set()

    def _send(self) -> None:
        get = self.queue.get
        try:
            for rows in iter(get, None):
                send_frame(self.proc.stdin, ("rows", rows))
        except OSError:  # the writer stopped: its answer says why (_check)
            while get() is not None:
                pass

    def _answer(self, timeout: float | None) -> tuple[str, Any] | None:
        if not self.answered.wait(timeout):
            return None
        answer = self.answer
        if answer[0] == "error" and self.error is None:
            self.error = answer[1]
        return answer

    def _check(self) -> None:
        if self.error is None and self.answered is not None and self.answered.is_set():
            self._answer(0)
        if self.error is not None:
            raise self.error

    def _tell(self, message: tuple[str, object]) -> None:
        with contextlib.suppress(OSError, ValueError):  # the writer stopped: its answer says why
            send_frame(self.proc.stdin, message)
            self.proc.stdin.close()

    def finish(self, summary: dict[str, object]) -> int:
        """Send the summary once every row is sent; returns the run's id, as the writer
        answers it."""
        self._stop()
        self._check()
        self._tell(("finish", summary))
        answer = self._answer(None)
        self.proc.wait()
        if answer is None or answer[0] != "done":
            self._check()
            raise RuntimeError("the run's database writer stopped")
        self.run_id = int(answer[1])
        return self.run_id

    def abort(self) -> None:
        """Tell the writer to delete the run, and wait for it to stop."""
        if self.proc is None:
            return
        self._stop()
        self._tell(("abort", None))
        self._answer(60)
        try:
            self.proc.wait(10)
        except Exception:  # still busy after its answer: it has nothing left to keep
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def store_run(
    svc: Any,
    name: str,
    source: str,
    rows: Iterable[Sequence[tuple[Any, ...]]],
    summary: dict[str, object],
    scorer_options: Mapping[str, object] | None = None,
    evals: Sequence[EvalDef] = (),
    labels: Mapping[str, object] | None = None,
) -> int:
    """Store a finished run in ``svc``'s database; returns its id.

    ``rows`` are batches of ``STORE_COLUMNS`` tuples (as ``run_file`` hands them to
    ``RunOptions.store``). The run is written first, marked unfinished, then its rows in bulk,
    then its summary: a run whose summary still says ``storing`` was interrupted and is no
    baseline. ``scorer_options`` (a plain run's) or ``evals`` (an eval-file run's) are kept
    with the run: a row's explanation is computed from them when it is shown (without them,
    from the summary's ``options``). ``labels``: ``create_run``'s keywords ``engine``,
    ``group``, ``dataset``, ``dataset_version``.
    """
    keep = ("threshold", "fingerprint", "options", "workers", "format")
    options = {k: summary.get(k) for k in keep}
    if evals:
        options["evals"] = {e.name: dict(e.options) for e in evals}
    else:
        options["scorer"] = scorer_options if scorer_options is not None else summary.get("options")
    run_id: int = svc.create_run(
        name,
        source,
        options=_json_safe(options),
        summary={"status": "storing"},
        **dict(labels or {}),
    )
    add_rows = getattr(svc, "add_run_rows", None)
    if add_rows is not None:
        add_rows(run_id, STORE_COLUMNS, rows)
    else:
        explained = STORE_COLUMNS.index("explanation")
        svc.add_run_results(
            run_id,
            (
                {
                    **dict(zip(STORE_COLUMNS[:explained], r[:explained], strict=True)),
                    "matched_reference": r[STORE_COLUMNS.index("reference")],
                    "explanation": None if r[explained] is None else json.loads(r[explained]),
                }
                for batch in rows
                for r in batch
            ),
        )
    svc.update_run_summary(run_id, {**summary, "status": "complete", "run_id": run_id})
    return run_id
