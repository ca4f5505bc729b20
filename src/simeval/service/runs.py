"""Stored data-set runs: a run record, its scored rows in bulk, summaries, listing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Select, case, delete, func, select, true, tuple_, update
from sqlalchemy.orm import Session

from simeval import store as store_mod
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
from simeval.scoring.options import DEFAULT_THRESHOLD, check_unit
from simeval.service.actor import record
from simeval.service.base import ServiceBase, get_row
from simeval.service.cursor import OLDER, Page, Position, keyset_page, page_position
from simeval.service.runstatus import effective_status, mark_interrupted, process_info
from simeval.store import Eval, Result, Review, Run
from simeval.store.run_rows import STORE_COLUMNS

if TYPE_CHECKING:  # the answers' models: imported when one is made (not by the run writer)
    from simeval.service.models import RunOut

_RUN_CHUNK = 10_000
_ROWS_PER_TRANSACTION = 50_000
_NAME = STORE_COLUMNS.index("eval_name")
_SCORE = STORE_COLUMNS.index("score")  # its verdict follows it
_EXPLANATION = STORE_COLUMNS.index("explanation")
# then the eval id and the constants of the INSERT
_RAW_COLUMNS = (*STORE_COLUMNS, "eval_id", "run_id", "created_at")


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


_SAFE_STAMP = re.compile(r"[0-9: .-]+")


def _raw_insert_sql() -> str:
    """The INSERT of a run row for SQLite's driver (qmark parameters, ``_RAW_COLUMNS``)."""
    table = store_mod.results_table
    for name in _RAW_COLUMNS:
        table.c[name]  # a KeyError here: the store has changed its columns
    marks = ", ".join("?" * len(_RAW_COLUMNS))
    return f"INSERT INTO {table.name} ({', '.join(_RAW_COLUMNS)}) VALUES ({marks})"


def _run_row(row: Any, n: int, eval_ids: dict[str, int], columns: Sequence[str]) -> tuple[Any, ...]:
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


def _beat(s: Session, run_id: int, rows: Sequence[Sequence[Any]] = (), at: int = 0) -> None:
    """The run's heartbeat, in the transaction that stores its rows ``rows`` (their score at
    ``at``, their verdict next to it): the run's counts grow by them in the same transaction,
    so they stay those of its stored rows."""
    values: dict[str, Any] = {"heartbeat_at": utc_now()}
    if rows:
        values["results_count"] = Run.results_count + len(rows)
        values["passed_count"] = Run.passed_count + sum(1 for r in rows if r[at + 1])
        values["score_sum"] = Run.score_sum + float(sum(r[at] for r in rows))
    s.execute(update(Run).where(Run.id == run_id).values(**values))


def check_run_labels(engine: Any, group: Any, dataset: Any, dataset_version: Any) -> dict[str, Any]:
    """A run's engine, group and data set as ``Run`` columns: each name None or 1-200
    characters (stripped), the version None or a positive integer; else ``InvalidInput``."""
    out: dict[str, Any] = {}
    for column, what, value in (
        ("engine", "run engine", engine),
        ("group_name", "run group", group),
        ("dataset_name", "run data set", dataset),
    ):
        if value is not None:
            text = check_text(value, what).strip()
            if not text or len(text) > MAX_NAME_CHARS:
                raise InvalidInput(f"{what} must have 1 to {MAX_NAME_CHARS} characters")
            check_storable(text, what)
            value = text
        out[column] = value
    if dataset_version is not None:
        out["dataset_version"] = check_id(dataset_version, "data set version")
    else:
        out["dataset_version"] = None
    return out


class RunsMixin(ServiceBase):
    """Stored data-set runs."""

    def create_run(
        self,
        name: str,
        source: str,
        options: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
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

        def work(s: Session) -> int:
            mark_interrupted(s)
            now = utc_now()
            run = Run(
                name=name.strip()[:200],
                source=str(source),
                options=options or {},
                summary={**(summary or {}), **process_info()},
                created_at=now,
                status="running",
                heartbeat_at=now,
                results_count=0,
                passed_count=0,
                score_sum=0.0,
                **labels,
            )
            s.add(run)
            s.flush()
            return run.id

        run_id: int = self._write(work)
        return run_id

    def update_run_summary(self, run_id: int, summary: dict[str, Any]) -> RunOut:
        """Replace a run's summary (written when the run has finished); returns the run."""
        self.set_run_summary(run_id, summary)
        return self.get_run(run_id)

    def set_run_summary(self, run_id: int, summary: dict[str, Any]) -> None:
        """``update_run_summary`` without reading the run back (a writer that stored its
        rows has no use for it)."""
        check_id(run_id, "run")

        def work(s: Session) -> None:
            run = get_row(s, Run, run_id, "run")
            run.summary = dict(summary)
            if summary.get("status") == "complete" or run.status == "running":
                run.status = "complete"
            run.heartbeat_at = utc_now()

        self._write(work)

    def add_run_results(self, run_id: int, rows: Iterable[dict[str, Any]]) -> int:
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
            eval_ids = dict(s.execute(select(Eval.name, Eval.id)).all())
        columns = ("eval_id", *STORE_COLUMNS)
        total = 0
        chunk: list[tuple[Any, ...]] = []

        def flush() -> None:
            now = utc_now()

            def work(s: Session) -> None:
                store_mod.bulk_insert(
                    s.connection(),
                    store_mod.results_table,
                    columns,
                    chunk,
                    {"run_id": rid, "created_at": now},
                )
                _beat(s, rid, chunk, columns.index("score"))

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
            eval_ids: dict[str | None, int] = dict(s.execute(select(Eval.name, Eval.id)).all())
        now = utc_now()
        total = 0
        pending: list[tuple[Any, ...]] = []  # rows with their eval id and the constants
        plain: list[Sequence[Any]] = []  # SQLite: rows of no eval, as they came
        sqlite = self.store.engine.dialect.name == "sqlite"
        sql = _raw_insert_sql()
        if sqlite:
            # the dialect's own processor: the text SQLAlchemy writes for a date (not the
            # driver's default adapter, which drops zero microseconds)
            stamp = store_mod.bind_processor(
                store_mod.results_table.c.created_at, self.store.engine.dialect
            )
            stamped = stamp(now) if stamp is not None else now.isoformat(" ")
            tail = (rid, stamped)
            # a row of no eval goes to the driver as it is: its eval id, run id and date are
            # written into the statement (an int and a date's digits), not bound per row
            if not _SAFE_STAMP.fullmatch(stamped):
                raise AssertionError(f"unexpected date text {stamped!r}")
            plain_sql = sql.rsplit("(", 1)[0] + (
                f"({', '.join('?' * len(STORE_COLUMNS))}, NULL, {int(rid)}, '{stamped}')"
            )

        def flush() -> None:
            def work(s: Session) -> None:
                conn = s.connection()
                if sqlite:
                    if plain:
                        conn.exec_driver_sql(plain_sql, plain)
                    if pending:
                        conn.exec_driver_sql(sql, pending)
                else:
                    x = _EXPLANATION  # the last column: the eval id follows it
                    rows = [
                        (*r[:x], None if r[x] is None else json.loads(r[x]), r[x + 1])
                        for r in pending
                    ]
                    store_mod.bulk_insert(
                        conn,
                        store_mod.results_table,
                        _RAW_COLUMNS[: x + 2],
                        rows,
                        {"run_id": rid, "created_at": now},
                    )
                _beat(s, rid, [*plain, *pending], _SCORE)

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

        def work(s: Session) -> None:
            run = get_row(s, Run, rid, "run")
            s.execute(
                delete(Review).where(
                    Review.result_id.in_(select(Result.id).where(Result.run_id == rid))
                )
            )
            s.execute(delete(Result).where(Result.run_id == rid))
            s.delete(run)

        self._write(work)

    def _run_stats(self, s: Session, ids: list[int]) -> dict[int, tuple[int, int, float | None]]:
        """Each run's (rows, passed, mean score): the counts kept on the run, or for a run
        without them (rows written otherwise) its rows counted."""
        if not ids:
            return {}
        out: dict[int, tuple[int, int, float | None]] = {}
        uncounted: list[int] = []
        kept = select(Run.id, Run.results_count, Run.passed_count, Run.score_sum)
        for rid, n, p, total in s.execute(kept.where(Run.id.in_(ids))):
            if n is None or p is None or total is None:
                uncounted.append(rid)
            else:
                out[rid] = (int(n), int(p), float(total) / n if n else None)
        if not uncounted:
            return out
        q = (
            select(
                Result.run_id,
                func.count(Result.id),
                func.sum(case((Result.passed == true(), 1), else_=0)),
                func.avg(Result.score),
            )
            .where(Result.run_id.in_(uncounted))
            .group_by(Result.run_id)
        )
        out.update({rid: (int(n), int(p or 0), avg) for rid, n, p, avg in s.execute(q)})
        return out

    def _run_out(
        self, s: Session, run: Run, stats: tuple[int, int, float | None] | None = None
    ) -> RunOut:
        from simeval.service.models import RunOut

        n, passed, mean = stats or self._run_stats(s, [run.id]).get(run.id, (0, 0, None))
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

        def work(s: Session) -> None:
            run = get_row(s, Run, run_id, "run")
            keys = select(Result.id).where(Result.run_id == run.id)
            s.execute(delete(Review).where(Review.result_id.in_(keys)))
            s.execute(delete(Result).where(Result.run_id == run.id))
            s.delete(run)
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
                key = tuple_(Run.created_at, Run.id)
                q = select(Run)
                if at is None or at.direction == OLDER:
                    if at is not None:
                        q = q.where(key < tuple_(*at.key))
                    q = q.order_by(Run.created_at.desc(), Run.id.desc())
                else:
                    q = q.where(key > tuple_(*at.key)).order_by(Run.created_at, Run.id)
                return list(s.scalars(q.limit(n).offset(offset if at is None else 0)))

            page = keyset_page("runs", fetch, lambda r: (r.created_at, r.id), limit, at, offset > 0)
            stats = self._run_stats(s, [r.id for r in page.items])
            items = [self._run_out(s, r, stats.get(r.id, (0, 0, None))) for r in page.items]
            return Page(items, page.next_cursor, page.prev_cursor)

    def count_runs(self) -> int:
        """How many runs are stored."""
        with self.store.read() as s:
            return int(s.scalar(select(func.count(Run.id))) or 0)

    def iter_run_cases(self, run_id: int) -> Iterator[RunCase]:
        """A stored run's rows in the order they were stored, as a baseline reads them:
        (row id, eval name, input, automated score, automated verdict, fingerprint, the case
        its explanation keeps: id, row, ordinal). One query, streamed: the cost grows with
        the run's rows (paging by offset grew with their square)."""
        with self.store.read() as s:
            q = _run_results(
                run_id,
                Result.input,
                Result.score,
                Result.passed,
                Result.fingerprint,
                Result.explanation,
            )
            for rid, name, text_in, score, passed, fp, explanation in s.execute(q):
                case = explanation.get("case") if isinstance(explanation, dict) else None
                yield (rid, name, text_in, score, passed, fp, case or {})

    def iter_run_rows(self, run_id: int) -> Iterator[RunRow]:
        """A stored run's rows in the order they were stored, with their texts (see
        ``RunRow``): one query, streamed, as ``iter_run_cases``. ``NotFound`` for no such
        run."""
        rid = check_id(run_id, "run")
        with self.store.read() as s:
            get_row(s, Run, rid, "run")
            q = _run_results(
                rid,
                Result.input,
                Result.output,
                Result.reference,
                Result.score,
                Result.passed,
                Result.threshold,
                Result.fingerprint,
                Result.matched_index,
                Result.explanation,
            )
            for row in s.execute(q):
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


def _run_results(run_id: int, *columns: Any) -> Select[Any]:
    # a run's results in the order they were stored, streamed: (id, eval name, *columns)
    return (
        select(Result.id, func.coalesce(Eval.name, Result.eval_name), *columns)
        .outerjoin(Eval, Eval.id == Result.eval_id)
        .where(Result.run_id == run_id)
        .order_by(Result.id)
        .execution_options(yield_per=5000)
    )
