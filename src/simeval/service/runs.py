"""Stored data-set runs: a run record, its scored rows in bulk, summaries, listing."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict, cast

from simeval.checks import (
    MAX_NAME_CHARS,
    as_utc,
    check_id,
    check_page,
    check_storable,
    check_text,
    utc_now,
)
from simeval.errors import Conflict, InvalidInput, InvalidType
from simeval.jsontypes import JSONValue
from simeval.scoring.options import DEFAULT_THRESHOLD, check_unit
from simeval.service.actor import record
from simeval.service.base import Part, get_row
from simeval.service.cursor import OLDER, Page, Position, keyset_page, page_position
from simeval.service.runstatus import effective_status, mark_interrupted, process_info
from simeval.store import Run, Tx
from simeval.store.run_rows import STORE_COLUMNS
from simeval.store.runs_sql import (
    RunRowsWriter,
    RunStats,
    add_run,
    count_runs,
    delete_run,
    eval_ids_by_name,
    insert_run_results,
    run_case_rows,
    run_stats,
    run_text_rows,
    runs_page,
)

if TYPE_CHECKING:  # the answers' models: imported when one is made (not by the run writer)
    from simeval.service.models import RunOut

_RUN_CHUNK = 10_000
_ROWS_PER_TRANSACTION = 50_000
_NAME = STORE_COLUMNS.index("eval_name")


# a stored run's row as a baseline reads it (``iter_run_cases``)
RunCase = tuple[int, str | None, str | None, float, bool, str, dict[str, Any]]


class RunRow(NamedTuple):
    """A stored run's row with its texts, as a report reads it (``iter_run_rows``): the
    automated score and verdict, the reference it matched, and ``case``, where it came from
    (``id``, ``row``, ``ordinal``, as its explanation keeps them; empty when not kept)."""

    id: int
    eval_name: str | None
    input: str | None
    output: str
    reference: str | None
    score: float
    passed: bool
    threshold: float
    fingerprint: str
    matched_index: int
    case: dict[str, Any]


def _run_row(
    row: object, n: int, eval_ids: dict[str | None, int], columns: Sequence[str]
) -> tuple[object, ...]:
    if not isinstance(row, dict):
        raise InvalidType(f"run row {n + 1} must be a mapping")
    try:
        refs = row.get("references")
        if refs is None and row.get("reference") is not None:
            refs = [row["reference"]]
        matched = row.get("matched_reference")
        index = row.get("matched_index")
        if isinstance(matched, int) and not isinstance(matched, bool):
            index = matched
            matched = refs[matched] if refs and 0 <= matched < len(refs) else None
        if index is None:
            index = refs.index(matched) if refs and matched in refs else 0
        if matched is None and refs:
            matched = refs[index] if 0 <= index < len(refs) else None
        score = check_unit(row["score"], f"run row {n + 1} score")
        threshold = check_unit(
            row.get("threshold", DEFAULT_THRESHOLD), f"run row {n + 1} threshold"
        )
        passed = row.get("passed")
        passed = score >= threshold if passed is None else bool(passed)
        name = row.get("eval_name")
        values = {
            "eval_id": eval_ids.get(name) if name is not None else None,
            "eval_name": name,
            "eval_version": row.get("eval_version"),
            "score": score,
            "passed": passed,
            "threshold": threshold,
            "fingerprint": str(row.get("fingerprint") or ""),
            "matched_index": int(index),
            "input": None if row.get("input") is None else str(row["input"]),
            "output": str(row.get("output") or ""),
            "reference": matched,
            "explanation": row.get("explanation"),
        }
    except KeyError as exc:
        raise InvalidInput(f"run row {n + 1} has no {exc.args[0]!r}") from None
    return tuple(values[c] for c in columns)


class RunLabels(TypedDict):
    """A run's engine, group and data set, as its ``Run`` columns."""

    engine: str | None
    group_name: str | None
    dataset_name: str | None
    dataset_version: int | None


def _run_label(value: object, what: str) -> str | None:
    if value is None:
        return None
    text = check_text(value, what).strip()
    if not text or len(text) > MAX_NAME_CHARS:
        raise InvalidInput(f"{what} must have 1 to {MAX_NAME_CHARS} characters")
    check_storable(text, what)
    return text


def check_run_labels(
    engine: object, group: object, dataset: object, dataset_version: object
) -> RunLabels:
    """A run's engine, group and data set as ``Run`` columns: each name None or 1-200
    characters (stripped), the version None or a positive integer; else ``InvalidInput``."""
    engine_name = _run_label(engine, "run engine")
    group_name = _run_label(group, "run group")
    dataset_name = _run_label(dataset, "run data set")
    version = check_id(dataset_version, "data set version") if dataset_version is not None else None
    return RunLabels(
        engine=engine_name,
        group_name=group_name,
        dataset_name=dataset_name,
        dataset_version=version,
    )


class RunService(Part):
    """Stored data-set runs."""

    def create_run(
        self,
        name: str,
        source: str,
        options: Mapping[str, JSONValue] | None = None,
        summary: Mapping[str, JSONValue] | None = None,
        *,
        engine: str | None = None,
        group: str | None = None,
        dataset: str | None = None,
        dataset_version: int | None = None,
    ) -> int:
        """Record a data-set run; its rows follow with ``add_run_results``. Returns its id.

        The run is ``running`` (with this process's pid and host, and a heartbeat) until a
        summary with ``"status": "complete"`` is written (``update_run_summary``); runs of
        processes that are gone are marked ``interrupted`` first. ``engine`` names what
        answered its cases, ``group`` the runs made together (one per engine: the studio
        shows a group side by side), ``dataset`` and ``dataset_version`` the stored data set
        it ran on (see ``check_run_labels``)."""
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput("run name is empty")
        labels = check_run_labels(engine, group, dataset, dataset_version)
        for what, value in (("options", options), ("summary", summary)):
            if value is not None and not isinstance(value, dict):
                raise InvalidType(f"run {what} must be a mapping")
            try:
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise InvalidType(f"run {what} is not JSON: {exc}") from None

        def work(s: Tx) -> int:
            mark_interrupted(s)
            now = utc_now()
            run = Run(
                name=name.strip()[:200],
                source=str(source),
                options=dict(options or {}),
                summary={**(summary or {}), **process_info()},
                created_at=now,
                status="running",
                heartbeat_at=now,
                results_count=0,
                passed_count=0,
                score_sum=0.0,
                **labels,
            )
            return add_run(s, run)

        run_id: int = self._write(work)
        return run_id

    def update_run_summary(self, run_id: int, summary: Mapping[str, JSONValue]) -> RunOut:
        """Replace a run's summary (written when the run has finished); returns the run."""
        self.set_run_summary(run_id, summary)
        return self.get_run(run_id)

    def set_run_summary(self, run_id: int, summary: Mapping[str, JSONValue]) -> None:
        """``update_run_summary`` without reading the run back (a writer that stored its
        rows has no use for it)."""
        check_id(run_id, "run")

        def work(s: Tx) -> None:
            run = get_row(s, Run, run_id, "run")
            run.summary = dict(summary)
            if summary.get("status") == "complete" or run.status == "running":
                run.status = "complete"
            run.heartbeat_at = utc_now()

        self._write(work)

    def add_run_results(self, run_id: int, rows: Iterable[Mapping[str, object]]) -> int:
        """Store a run's scored rows in bulk (10,000 rows per transaction); returns the count.

        Each row: ``eval_name`` (or None), ``input``, ``output``, ``reference`` or
        ``references``, ``score``, ``passed``, ``threshold``, ``fingerprint``,
        ``matched_reference`` (the text, or its index in ``references``), ``explanation``
        (a dict or None); optionally ``eval_version`` and ``matched_index``. A row whose
        ``eval_name`` names a stored eval is linked to it.
        """
        rid = check_id(run_id, "run")
        with self.store.read() as s:
            get_row(s, Run, run_id, "run")
            eval_ids = eval_ids_by_name(s)
        columns = ("eval_id", *STORE_COLUMNS)
        total = 0
        chunk: list[tuple[object, ...]] = []

        def flush() -> None:
            now = utc_now()

            def work(s: Tx) -> None:
                insert_run_results(s, rid, columns, chunk, now)

            self._write(work)
            chunk.clear()

        for n, row in enumerate(rows):
            chunk.append(_run_row(row, n, eval_ids, columns))
            if len(chunk) >= _RUN_CHUNK:
                total += len(chunk)
                flush()
        if chunk:
            total += len(chunk)
            flush()
        return total

    def add_run_rows(
        self,
        run_id: int,
        columns: Sequence[str],
        batches: Iterable[Sequence[Sequence[Any]]],
        rows_per_transaction: int = _ROWS_PER_TRANSACTION,
    ) -> int:
        """Store rows a run has already checked and scored, in bulk; returns the count.

        ``columns`` must be ``STORE_COLUMNS`` (eval_name, eval_version, score, passed,
        threshold, fingerprint, matched_index, input, output, reference, explanation), the
        explanation already JSON text; ``batches`` are lists of such
        tuples. The rows are not checked again: use ``add_run_results`` for rows from
        elsewhere. On SQLite they go to the driver as they are (one cached statement,
        ``rows_per_transaction`` rows per transaction); other databases take them through
        ``add_run_results``'s bulk insert. A row whose ``eval_name`` names a stored eval is
        linked to it.
        """
        if tuple(columns) != STORE_COLUMNS:
            raise InvalidInput(f"run rows: columns must be {', '.join(STORE_COLUMNS)}")
        rid = check_id(run_id, "run")
        with self.store.read() as s:
            get_row(s, Run, run_id, "run")
            eval_ids = eval_ids_by_name(s)
        now = utc_now()
        total = 0
        pending: list[tuple[Any, ...]] = []  # rows with their eval id and the constants
        plain: list[Sequence[Any]] = []  # SQLite: rows of no eval, as they came
        writer = RunRowsWriter(self.store, rid, now)
        sqlite, tail = writer.sqlite, writer.tail

        def flush() -> None:
            def work(s: Tx) -> None:
                writer.write(s, plain, pending)

            self._write(work)
            pending.clear()
            plain.clear()

        get_id = eval_ids.get
        for batch in batches:
            if sqlite and all(r[_NAME] is None for r in batch):
                plain.extend(batch)
            elif sqlite:
                pending.extend([(*r, get_id(r[_NAME]), *tail) for r in batch])
            else:
                pending.extend([(*r, get_id(r[_NAME])) for r in batch])
            if len(pending) + len(plain) >= rows_per_transaction:
                total += len(pending) + len(plain)
                flush()
        if pending or plain:
            total += len(pending) + len(plain)
            flush()
        return total

    def discard_run(self, run_id: int) -> None:
        """Delete a run that did not finish, with the rows stored for it so far (a run whose
        rows are stored while it is scored, and which then failed)."""
        rid = check_id(run_id, "run")

        def work(s: Tx) -> None:
            delete_run(s, get_row(s, Run, rid, "run"))

        self._write(work)

    def _run_out(self, s: Tx, run: Run, stats: RunStats | None = None) -> RunOut:
        from simeval.service.models import RunOut

        n, passed, mean = stats or run_stats(s, [run.id]).get(run.id, (0, 0, None))
        return RunOut(
            id=run.id,
            name=run.name,
            source=run.source,
            options=run.options,
            summary=run.summary,
            created_at=as_utc(run.created_at),
            results=n,
            status=effective_status(run),
            heartbeat_at=as_utc(run.heartbeat_at) if run.heartbeat_at else None,
            passed=passed,
            pass_rate=passed / n if n else None,
            mean_score=float(mean) if mean is not None else None,
            engine=run.engine,
            group=run.group_name,
            dataset_name=run.dataset_name,
            dataset_version=run.dataset_version,
        )

    def get_run(self, run_id: int) -> RunOut:
        """A stored run, with its pass rate and mean score (automated verdicts)."""
        with self.store.read() as s:
            return self._run_out(s, get_row(s, Run, run_id, "run"))

    def delete_run(self, run_id: int) -> RunOut:
        """Delete a run and its rows (with their reviews); refused (``Conflict``) while the run
        is still being stored by a live process. Returns the run as it was."""
        with self.store.read() as s:
            out = self._run_out(s, get_row(s, Run, run_id, "run"))
        if out.status == "running":
            raise Conflict(f"run {out.id} is still being stored; delete it when it has finished")

        def work(s: Tx) -> None:
            delete_run(s, get_row(s, Run, run_id, "run"))
            record(s, "run.delete", f"run:{run_id}", name=out.name, results=out.results)

        self._write(work)
        return out

    def list_runs(
        self, limit: int = 100, offset: int = 0, cursor: str | None = None
    ) -> list[RunOut]:
        """Stored runs, newest first; ``cursor``: a page's cursor (``page_runs``) instead of
        an ``offset``."""
        return self.page_runs(limit, offset, cursor).items

    def page_runs(
        self, limit: int = 100, offset: int = 0, cursor: str | None = None
    ) -> Page[RunOut]:
        """A page of ``list_runs`` with its ``next_cursor`` (older runs, None at the end) and
        ``prev_cursor`` (newer ones, None on the first page); a cursor's page starts after
        its run by the key (created_at, id), through the time index."""
        limit, offset = check_page(limit, offset)
        at = page_position(cursor, offset, "runs", (datetime, int))
        with self.store.read() as s:

            def fetch(at: Position | None, n: int) -> list[Run]:
                older = at is None or at.direction == OLDER
                key = None if at is None else cast(tuple[datetime, int], at.key)
                return runs_page(s, key, older, n, offset if at is None else 0)

            page = keyset_page("runs", fetch, lambda r: (r.created_at, r.id), limit, at, offset > 0)
            stats = run_stats(s, [r.id for r in page.items])
            items = [self._run_out(s, r, stats.get(r.id, (0, 0, None))) for r in page.items]
            return Page(items, page.next_cursor, page.prev_cursor)

    def count_runs(self) -> int:
        """How many runs are stored."""
        with self.store.read() as s:
            return count_runs(s)

    def iter_run_cases(self, run_id: int) -> Iterator[RunCase]:
        """A stored run's rows in the order they were stored, as a baseline reads them:
        (row id, eval name, input, automated score, automated verdict, fingerprint, the case
        its explanation keeps: id, row, ordinal). One query, streamed: the cost grows with
        the run's rows (paging by offset grew with their square)."""
        with self.store.read() as s:
            for rid, name, text_in, score, passed, fp, explanation in run_case_rows(s, run_id):
                case = explanation.get("case") if isinstance(explanation, dict) else None
                yield (rid, name, text_in, score, passed, fp, case or {})

    def iter_run_rows(self, run_id: int) -> Iterator[RunRow]:
        """A stored run's rows in the order they were stored, with their texts (see
        ``RunRow``): one query, streamed, as ``iter_run_cases``. ``NotFound`` for no such
        run."""
        rid = check_id(run_id, "run")
        with self.store.read() as s:
            get_row(s, Run, rid, "run")
            for row in run_text_rows(s, rid):
                explanation = row[-1]
                case = explanation.get("case") if isinstance(explanation, dict) else None
                yield RunRow(
                    row[0],
                    row[1],
                    row[2],
                    row[3] or "",
                    row[4],
                    float(row[5]),
                    bool(row[6]),
                    float(row[7]),
                    row[8] or "",
                    int(row[9] or 0),
                    case if isinstance(case, dict) else {},
                )
