"""The SQL of stored data-set runs: a run's record, its rows inserted in bulk (on SQLite
straight through the driver), its heartbeat and counts, its deletion, the runs listed by
keyset, and a run's rows read back in the order they were stored.

The checks of what is stored are the service's (``simeval.service.runs``); nothing here
imports the service, so the run writer's process loads only this and the tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, case, delete, func, select, true, tuple_, update
from sqlalchemy.orm import Session

from simeval.checks import utc_now
from simeval.store.database import Store
from simeval.store.run_rows import STORE_COLUMNS
from simeval.store.sql import bind_processor, bulk_insert
from simeval.store.tables import Eval, Result, Review, Run, results_table

_SCORE = STORE_COLUMNS.index("score")  # its verdict follows it
_EXPLANATION = STORE_COLUMNS.index("explanation")
# then the eval id and the constants of the INSERT
RAW_COLUMNS = (*STORE_COLUMNS, "eval_id", "run_id", "created_at")
_SAFE_STAMP = re.compile(r"[0-9: .-]+")

RunStats = tuple[int, int, float | None]  # a run's rows, passed rows, mean score


def raw_insert_sql() -> str:
    """The INSERT of a run row for SQLite's driver (qmark parameters, ``RAW_COLUMNS``)."""
    table = results_table
    for name in RAW_COLUMNS:
        table.c[name]  # a KeyError here: the store has changed its columns
    marks = ", ".join("?" * len(RAW_COLUMNS))
    return f"INSERT INTO {table.name} ({', '.join(RAW_COLUMNS)}) VALUES ({marks})"


def running_runs(s: Session) -> list[Run]:
    """The runs whose status says ``running``."""
    return list(s.scalars(select(Run).where(Run.status == "running")))


def add_run(s: Session, run: Run) -> int:
    """``run`` added and flushed; returns its new id."""
    s.add(run)
    s.flush()
    return run.id


def eval_ids_by_name(s: Session) -> dict[str | None, int]:
    """Every stored eval's id by its name (a run row names its eval)."""
    return dict(s.execute(select(Eval.name, Eval.id)).all())


def beat_run(s: Session, run_id: int, rows: Sequence[Sequence[Any]] = (), at: int = 0) -> None:
    """The run's heartbeat, in the transaction that stores its rows ``rows`` (their score at
    ``at``, their verdict next to it): the run's counts grow by them in the same transaction,
    so they stay those of its stored rows."""
    values: dict[str, object] = {"heartbeat_at": utc_now()}
    if rows:
        values["results_count"] = Run.results_count + len(rows)
        values["passed_count"] = Run.passed_count + sum(1 for r in rows if r[at + 1])
        values["score_sum"] = Run.score_sum + float(sum(r[at] for r in rows))
    s.execute(update(Run).where(Run.id == run_id).values(**values))


def insert_run_results(
    s: Session,
    run_id: int,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    now: datetime,
) -> None:
    """Nothing: ``rows`` (values of ``columns``, a ``score`` among them) inserted as the run's
    rows stored at ``now`` (the bulk insert), with the run's heartbeat and counts."""
    bulk_insert(
        s.connection(),
        results_table,
        columns,
        rows,
        {"run_id": run_id, "created_at": now},
    )
    beat_run(s, run_id, rows, list(columns).index("score"))


class RunRowsWriter:
    """The statements that store one run's checked rows (``Service.add_run_rows``), made once
    for the run: on SQLite the INSERTs given to the driver as they are (one cached statement),
    elsewhere the bulk insert.

    ``sqlite`` says which; on SQLite a row of an eval is given with ``tail`` (the run id and
    the date's text) after its eval id, a row of no eval (``plain``) as it came."""

    def __init__(self, store: Store, run_id: int, now: datetime) -> None:
        engine = store.engine
        self.run_id = run_id
        self.now = now
        self.sqlite = engine.dialect.name == "sqlite"
        self.sql = raw_insert_sql()
        self.tail: tuple[int, str] | tuple[()] = ()
        self.plain_sql = ""
        if self.sqlite:
            # the dialect's own processor: the text SQLAlchemy writes for a date (not the
            # driver's default adapter, which drops zero microseconds)
            stamp = bind_processor(results_table.c.created_at, engine.dialect)
            stamped = stamp(now) if stamp is not None else now.isoformat(" ")
            assert isinstance(stamped, str)  # SQLite's processor writes a date as text
            self.tail = (run_id, stamped)
            # a row of no eval goes to the driver as it is: its eval id, run id and date are
            # written into the statement (an int and a date's digits), not bound per row
            if not _SAFE_STAMP.fullmatch(stamped):
                raise AssertionError(f"unexpected date text {stamped!r}")
            self.plain_sql = self.sql.rsplit("(", 1)[0] + (
                f"({', '.join('?' * len(STORE_COLUMNS))}, NULL, {int(run_id)}, '{stamped}')"
            )

    def write(
        self, s: Session, plain: Sequence[Sequence[Any]], pending: Sequence[Sequence[Any]]
    ) -> None:
        """Nothing: ``plain`` (SQLite: rows of no eval, as they came) and ``pending`` (rows
        with their eval id, and on SQLite ``tail``) inserted, with the run's heartbeat and
        counts."""
        conn = s.connection()
        if self.sqlite:
            if plain:
                conn.exec_driver_sql(self.plain_sql, plain)
            if pending:
                conn.exec_driver_sql(self.sql, pending)
        else:
            x = _EXPLANATION  # the last column: the eval id follows it
            rows = [(*r[:x], None if r[x] is None else json.loads(r[x]), r[x + 1]) for r in pending]
            bulk_insert(
                conn,
                results_table,
                RAW_COLUMNS[: x + 2],
                rows,
                {"run_id": self.run_id, "created_at": self.now},
            )
        beat_run(s, self.run_id, [*plain, *pending], _SCORE)


def delete_run(s: Session, run: Run) -> None:
    """Nothing: ``run`` deleted with its rows and their reviews."""
    keys = select(Result.id).where(Result.run_id == run.id)
    s.execute(delete(Review).where(Review.result_id.in_(keys)))
    s.execute(delete(Result).where(Result.run_id == run.id))
    s.delete(run)


def run_stats(s: Session, ids: list[int]) -> dict[int, RunStats]:
    """Each run's (rows, passed, mean score): the counts kept on the run, or for a run
    without them (rows written otherwise) its rows counted."""
    if not ids:
        return {}
    out: dict[int, RunStats] = {}
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


def runs_page(
    s: Session, after: Sequence[Any] | None, older: bool, limit: int, offset: int
) -> list[Run]:
    """Up to ``limit`` runs past the key (created_at, id) ``after`` (None: from the newest,
    skipping ``offset``): older ones newest first, else newer ones oldest first."""
    key = tuple_(Run.created_at, Run.id)
    q = select(Run)
    if older:
        if after is not None:
            q = q.where(key < tuple_(*after))
        q = q.order_by(Run.created_at.desc(), Run.id.desc())
    else:
        q = q.where(key > tuple_(*after or ())).order_by(Run.created_at, Run.id)
    return list(s.scalars(q.limit(limit).offset(offset)))


def count_runs(s: Session) -> int:
    """How many runs are stored."""
    return int(s.scalar(select(func.count(Run.id))) or 0)


def run_case_rows(s: Session, run_id: int) -> Iterator[Any]:
    """A run's rows in the order they were stored, streamed: (id, eval name, input, score,
    passed, fingerprint, explanation)."""
    return iter(
        s.execute(
            _run_results(
                run_id,
                Result.input,
                Result.score,
                Result.passed,
                Result.fingerprint,
                Result.explanation,
            )
        )
    )


def run_text_rows(s: Session, run_id: int) -> Iterator[Any]:
    """A run's rows in the order they were stored, streamed: (id, eval name, input, output,
    reference, score, passed, threshold, fingerprint, matched index, explanation)."""
    return iter(
        s.execute(
            _run_results(
                run_id,
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
        )
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
