"""Counts under a metadata filter that do not grow with the store: ``meta_rollup``.

Captured results counted per indexed metadata value (key, value), UTC hour and eval, for the
captures ``trend_rollup`` counts (ids up to its watermark, the setting ``rollup_upto``); kept
from then on with ``trend_rollup`` (``simeval.store.meta_rollup``). Its primary key (key,
value, bucket, eval_id) makes the whole hours of one value one index range. Filled here from
the captures at or below the watermark and their ``capture_meta`` rows, a chunk at a time.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from simeval.store.meta_rollup import MetaKey, MetaTally, merge_sums

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

_CHUNK = 5000
_INSERT_CHUNK = 5000
_FLUSH = 200_000  # sums held before they are added to the table (memory stays bounded)

_captures = sa.table(
    "captures",
    sa.column("id", sa.Integer()),
    sa.column("captured_at", sa.DateTime()),
    sa.column("scores", sa.LargeBinary()),
)
_settings = sa.table("settings", sa.column("key", sa.String()), sa.column("value", sa.JSON()))
_meta = sa.table(
    "capture_meta",
    sa.column("capture_id", sa.Integer()),
    sa.column("key", sa.String()),
    sa.column("value", sa.String()),
)
_rollup = sa.table(
    "meta_rollup",
    sa.column("key", sa.String()),
    sa.column("value", sa.String()),
    sa.column("bucket", sa.DateTime()),
    sa.column("eval_id", sa.Integer()),
    sa.column("count", sa.Integer()),
    sa.column("passes", sa.Integer()),
)


def upgrade() -> None:
    """Create ``meta_rollup`` and fill it up to the rollup's watermark."""
    op.create_table(
        "meta_rollup",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.String(200), nullable=False),
        sa.Column("bucket", sa.DateTime(), nullable=False),
        sa.Column("eval_id", sa.Integer(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("passes", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "value", "bucket", "eval_id", name="pk_meta_rollup"),
    )
    _fill(op.get_bind())
    op.create_index("ix_meta_rollup_bucket", "meta_rollup", ["bucket"])


def _fill(conn: sa.Connection) -> None:
    mark = conn.execute(
        sa.select(_settings.c.value).where(_settings.c.key == "rollup_upto")
    ).scalar()
    upto = int(mark or 0)
    total: dict[MetaKey, list[int]] = {}
    last = 0
    while last < upto:
        rows = conn.execute(
            sa.select(_captures.c.id, _captures.c.captured_at, _captures.c.scores)
            .where(_captures.c.id > last, _captures.c.id <= upto)
            .order_by(_captures.c.id)
            .limit(_CHUNK)
        ).all()
        if not rows:
            break
        pairs: dict[int, list[tuple[str, str]]] = {}
        for cid, key, value in conn.execute(
            sa.select(_meta.c.capture_id, _meta.c.key, _meta.c.value).where(
                _meta.c.capture_id > last, _meta.c.capture_id <= rows[-1][0]
            )
        ):
            pairs.setdefault(cid, []).append((key, value))
        tally = MetaTally()
        for cid, at, blob in rows:
            mine = pairs.get(cid)
            if mine:
                tally.add(at, blob, tuple(sorted(mine)))
        merge_sums(total, tally.sums())
        last = rows[-1][0]
        if len(total) >= _FLUSH:  # per-capture values (latency, tokens) give a row each
            _add(conn, total)
            total = {}
    _add(conn, total)


def _add(conn: sa.Connection, total: dict[MetaKey, list[int]]) -> None:
    """Add ``total`` to the table: an upsert, as an earlier flush may hold some of its rows."""
    from sqlalchemy.dialects import postgresql, sqlite

    out: list[dict[str, object]] = [
        {"key": k, "value": v, "bucket": b, "eval_id": e, "count": c, "passes": p}
        for (k, v, b, e), (c, p) in total.items()
    ]
    pg = conn.dialect.name == "postgresql"
    stmt = (postgresql.insert if pg else sqlite.insert)(_rollup)
    stmt = stmt.on_conflict_do_update(
        index_elements=["key", "value", "bucket", "eval_id"],
        set_={
            "count": _rollup.c.count + stmt.excluded.count,
            "passes": _rollup.c.passes + stmt.excluded.passes,
        },
    )
    for i in range(0, len(out), _INSERT_CHUNK):
        conn.execute(stmt, out[i : i + _INSERT_CHUNK])


def downgrade() -> None:
    """Drop ``meta_rollup``."""
    op.drop_index("ix_meta_rollup_bucket", table_name="meta_rollup")
    op.drop_table("meta_rollup")
