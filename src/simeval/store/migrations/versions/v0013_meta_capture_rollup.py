"""Capture counts under a metadata filter that do not grow with the store: ``meta_capture_rollup``.

Captures counted per indexed metadata value (key, value) and UTC hour, for the captures
``meta_rollup`` counts (ids up to the rollup's watermark, the setting ``rollup_upto``); kept
from then on in the same transactions as ``meta_rollup`` (``simeval.store.meta_rollup``).
Every capture holding the value counts, scored or not. Its primary key (key, value, bucket)
makes the whole hours of one value one index range, so ``/api/captures?meta=``'s total sums
those hours instead of counting every matching ``capture_meta`` row.

Filled here from ``capture_meta`` alone (a row per capture and indexed key, with the capture's
time): one grouped read of the rows up to the watermark, but for the keys of measurements
(tokens, latency), whose values are a group each.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None

_INSERT_CHUNK = 5000
# measurements (a value per capture) are not summed by hour: counted from capture_meta alone
# (``simeval.store.meta_index.NOT_ROLLED_UP``; a frozen copy, as migrations keep theirs)
_NOT_ROLLED_UP = ("input_tokens", "output_tokens", "latency_ms")

_settings = sa.table("settings", sa.column("key", sa.String()), sa.column("value", sa.JSON()))
_meta = sa.table(
    "capture_meta",
    sa.column("capture_id", sa.Integer()),
    sa.column("key", sa.String()),
    sa.column("value", sa.String()),
    sa.column("captured_at", sa.DateTime()),
)
_rollup = sa.table(
    "meta_capture_rollup",
    sa.column("key", sa.String()),
    sa.column("value", sa.String()),
    sa.column("bucket", sa.DateTime()),
    sa.column("count", sa.Integer()),
)


def upgrade() -> None:
    """Create ``meta_capture_rollup`` and fill it up to the rollup's watermark."""
    op.create_table(
        "meta_capture_rollup",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.String(200), nullable=False),
        sa.Column("bucket", sa.DateTime(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "value", "bucket", name="pk_meta_capture_rollup"),
    )
    _fill(op.get_bind())
    op.create_index("ix_meta_capture_rollup_bucket", "meta_capture_rollup", ["bucket"])


def _hour(raw: str | datetime) -> datetime:
    """The hour a grouped row gives: SQLite's stored text cut to ``YYYY-MM-DD HH``, or
    PostgreSQL's ``date_trunc``."""
    if isinstance(raw, str):
        return datetime.fromisoformat(raw[:13] + ":00:00")
    hour: datetime = raw.replace(minute=0, second=0, microsecond=0, tzinfo=None)
    return hour


def _fill(conn: sa.Connection) -> None:
    mark = conn.execute(
        sa.select(_settings.c.value).where(_settings.c.key == "rollup_upto")
    ).scalar()
    upto = int(mark or 0)
    if upto <= 0:
        return
    m = _meta.c
    # SQLite stores a time as text: its first 13 characters are the hour; a text group key
    # (not a parsed time) keeps the grouping in the database
    hour: Any = (
        sa.func.substr(sa.cast(m.captured_at, sa.String()), 1, 13)
        if conn.dialect.name == "sqlite"
        else sa.func.date_trunc("hour", m.captured_at)
    )
    q = (
        sa.select(m.key, m.value, hour, sa.func.count())
        .where(m.capture_id <= upto, m.key.notin_(_NOT_ROLLED_UP))
        .group_by(m.key, m.value, hour)
    )
    sums: dict[tuple[str, str, datetime], int] = {}
    for key, value, at, n in conn.execute(q):
        slot = (key, value, _hour(at))
        sums[slot] = sums.get(slot, 0) + int(n)
    out = [{"key": k, "value": v, "bucket": b, "count": n} for (k, v, b), n in sums.items()]
    for i in range(0, len(out), _INSERT_CHUNK):
        conn.execute(_rollup.insert(), out[i : i + _INSERT_CHUNK])


def downgrade() -> None:
    """Drop ``meta_capture_rollup``."""
    op.drop_index("ix_meta_capture_rollup_bucket", table_name="meta_capture_rollup")
    op.drop_table("meta_capture_rollup")
