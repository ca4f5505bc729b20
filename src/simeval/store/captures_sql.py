"""The SQL of capturing (``simeval.service.capture``): the capture's hot path through a driver
cursor (its flags read, its keys looked up, its row inserted), and the reads around it (the
active evals and their pinned versions, captures replayed by key, eval names).

The hot path's statements are the ones ``Store.raw_write``'s cursor runs, in the caller's
order and transaction: the caller holds the cursor only to pass it here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache

from sqlalchemy import select, text
from sqlalchemy.engine import Connection
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.orm import Session

from simeval import store as store_face
from simeval.jsontypes import JSONValue
from simeval.store.database import Store
from simeval.store.summaries import NewCapture, add_captures
from simeval.store.tables import Capture, Eval, EvalVersion, captures_table

_IN_CHUNK = 500  # capture keys in one IN (...) list


def active_evals(s: Session) -> list[Eval]:
    """The active evals, by id."""
    return list(s.scalars(select(Eval).where(Eval.status == "active").order_by(Eval.id)))


def versions_of(s: Session, eval_ids: Iterable[int]) -> list[EvalVersion]:
    """Every stored version of the evals ``eval_ids``."""
    return list(s.scalars(select(EvalVersion).where(EvalVersion.eval_id.in_(eval_ids))))


@lru_cache(maxsize=8)
def settings_sql(keys: tuple[str, ...]) -> str:
    """The statement reading the settings ``keys`` (key, value), as driver SQL: the keys are
    the service's constants, written in."""
    assert all("'" not in k for k in keys)
    quoted = ", ".join(f"'{k}'" for k in keys)
    return f"SELECT key, value FROM settings WHERE key IN ({quoted})"


def read_flags(cur: DBAPICursor, keys: tuple[str, ...]) -> dict[str, JSONValue]:
    """The settings ``keys`` that are stored, by key, as the driver reads them (JSON text on
    SQLite), through a driver cursor."""
    cur.execute(settings_sql(keys))
    return dict(cur.fetchall())


def read_flags_tx(s: Session, keys: tuple[str, ...]) -> dict[str, JSONValue]:
    """``read_flags`` in a session's transaction."""
    return {k: v for k, v in s.execute(text(settings_sql(keys)))}


def stored_keys(cur: DBAPICursor, store: Store, keys: set[str]) -> dict[str, int]:
    """The ids of the captures of ``store`` stored under ``keys``, read through a driver
    cursor."""
    found: dict[str, int] = {}
    mark = "?" if store.engine.dialect.paramstyle == "qmark" else "%s"
    ordered = sorted(keys)
    for start in range(0, len(ordered), _IN_CHUNK):
        part = ordered[start : start + _IN_CHUNK]
        cur.execute(
            "SELECT capture_key, id FROM captures WHERE capture_key IN "
            f"({', '.join([mark] * len(part))})",
            tuple(part),
        )
        found.update((k, int(i)) for k, i in cur.fetchall())
    return found


def insert_capture(
    cur: DBAPICursor,
    store: Store,
    *,
    input: str,
    output: str,
    conversation_id: str | None,
    metadata: Mapping[str, object] | None,
    captured_at: datetime,
    evaluated: bool,
    scores: bytes | None,
    capture_key: str | None,
) -> int:
    """The id of the capture row inserted through a driver cursor."""
    # ``insert_row`` looked up on the package face, as the service did: a test replaces it
    # there to fail the capture between its row and the rest of its transaction
    return store_face.insert_row(
        cur,
        store.engine.dialect,
        captures_table,
        {
            "input": input,
            "output": output,
            "conversation_id": conversation_id,
            "metadata": metadata,
            "captured_at": captured_at,
            "evaluated": evaluated,
            "scores": scores,
            "capture_key": capture_key,
        },
    )


def is_integrity_error(store: Store, exc: BaseException) -> bool:
    """Whether ``exc`` is the driver's integrity error (a unique index refused a row)."""
    dbapi = store.engine.dialect.dbapi
    return dbapi is not None and isinstance(exc, dbapi.IntegrityError)


def captures_by_id(s: Session, capture_ids: Sequence[int]) -> dict[int, Capture]:
    """The captures ``capture_ids`` (those that exist), by id."""
    return {cap.id: cap for cap in s.scalars(select(Capture).where(Capture.id.in_(capture_ids)))}


def eval_names(s: Session, eval_ids: Iterable[int | None]) -> dict[int, str]:
    """The names of the evals ``eval_ids``, by id."""
    return {i: n for i, n in s.execute(select(Eval.id, Eval.name).where(Eval.id.in_(eval_ids)))}


def tx_connection(s: Session) -> Connection:
    """The connection of a session's transaction, for the writers that work on one."""
    return s.connection()


def index_captures(
    cur: DBAPICursor, store: Store, captures: Sequence[NewCapture], keys: Sequence[str]
) -> None:
    """The new ``captures`` of ``store`` added to ``capture_meta`` and ``conversations``
    through the driver cursor of their transaction (``summaries.add_captures``)."""
    add_captures(cur, store.engine.dialect, captures, keys)
