"""Helpers for the tests of the metadata rollups (``meta_rollup``, ``meta_capture_rollup``):
capturing generated data, moving the watermark, and reading the stored tables back as plain
dicts to compare with a recomputation from the captures."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from simeval.service import Service
from simeval.store.meta_rollup import hour_start
from simeval.store.rollups import roll_up
from simeval.store.tables import MetaCaptureRollup, MetaRollup, captures_table

QUESTION = "What is the capital of France?"

Meta = Callable[[random.Random, int], "dict[str, Any] | None"]


def capture_at(
    svc: Service, rng: random.Random, times: list[datetime], answers: tuple[str, ...], meta: Meta
) -> None:
    """One capture of ``QUESTION`` at each of ``times``: a random answer of ``answers``,
    metadata ``meta(rng, k)`` for the k-th."""
    svc.capture_many(
        [
            {
                "input": QUESTION,
                "output": rng.choice(answers),
                "captured_at": when.isoformat(),
                "metadata": meta(rng, k),
            }
            for k, when in enumerate(times)
        ]
    )


def mixed_meta(rng: random.Random, _k: int) -> dict[str, Any] | None:
    """Metadata of every kind a filter meets: a capture without any, keys missing, a value
    too long to index (over 200 characters), a number, a key declared only later (team)."""
    if rng.random() < 0.08:
        return None
    meta: dict[str, Any] = {}
    for key, values in {
        "engine": ["v1", "v2", "v2", "é" * 201],
        "model": ["m-0", "m-1", 3],
        "team": ["chat", "search"],
    }.items():
        if rng.random() < 0.85:
            meta[key] = rng.choice(values)
    return meta


def roll(svc: Service) -> int:
    """Move the rollup's watermark over every stored capture (the rollup step)."""
    return int(svc.store.run_write(lambda s: roll_up(s.connection())))


def utc(when: datetime | None) -> datetime | None:
    """A naive UTC time made aware, for the service's ``since``/``until``."""
    return None if when is None else when.replace(tzinfo=UTC)


def stored(svc: Service) -> list[tuple[int, Any, datetime, bytes | None]]:
    """Every capture as (id, metadata, time, packed results), read from ``captures``."""
    c = captures_table.c
    with svc.store.read() as s:
        rows = s.execute(sa.select(c.id, c.metadata, c.captured_at, c.scores)).all()
    return [
        (cid, json.loads(meta) if isinstance(meta, str) else meta, at, blob)
        for cid, meta, at, blob in rows
    ]


def declared(s: Session) -> list[str]:
    """The keys the setting ``indexed_meta`` declares (none when unset)."""
    value = s.execute(sa.text("SELECT value FROM settings WHERE key = 'indexed_meta'")).scalar()
    return list(json.loads(value) if isinstance(value, str) else value or ())


def held_results(s: Session) -> dict[tuple[str, str, datetime, int], list[int]]:
    """``meta_rollup``'s rows with a count: (key, value, hour, eval id) -> [count, passes]."""
    r = MetaRollup
    q = sa.select(r.key, r.value, r.bucket, r.eval_id, r.count, r.passes)
    return {(k, v, hour_start(b), e): [c, p] for k, v, b, e, c, p in s.execute(q) if c or p}


def held_captures(s: Session) -> dict[tuple[str, str, datetime], int]:
    """``meta_capture_rollup``'s rows with a count: (key, value, hour) -> captures."""
    r = MetaCaptureRollup
    q = sa.select(r.key, r.value, r.bucket, r.count)
    return {(k, v, hour_start(b)): n for k, v, b, n in s.execute(q) if n}
