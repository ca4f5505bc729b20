"""Reads that do not grow with the store: indexed capture metadata and conversation summaries.

``capture_meta`` holds one row per capture and indexed metadata key (``simeval.store.meta_index``)
with the value as a filter compares it and the capture's time; its index (key, value, time, id)
answers a metadata filter, newest first, by reading only the captures it returns.
``conversations`` keeps one row per conversation id (turns, first and last activity, the last
turn, automated result and pass counts), updated in each capture's transaction, so listing
conversations reads a page of rows instead of grouping every capture. Both are filled here
from the captures already stored, a chunk at a time.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from simeval.store.meta_index import index_entries
from simeval.store.packing import unpack_results

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None

_CHUNK = 5000

_captures = sa.table(
    "captures",
    sa.column("id", sa.Integer()),
    sa.column("conversation_id", sa.String()),
    sa.column("metadata", sa.JSON()),
    sa.column("captured_at", sa.DateTime()),
    sa.column("scores", sa.LargeBinary()),
)
_settings = sa.table("settings", sa.column("key", sa.String()), sa.column("value", sa.JSON()))
_meta = sa.table(
    "capture_meta",
    sa.column("capture_id", sa.Integer()),
    sa.column("key", sa.String()),
    sa.column("value", sa.String()),
    sa.column("captured_at", sa.DateTime()),
)
_conversations = sa.table(
    "conversations",
    sa.column("conversation_id", sa.String()),
    sa.column("turns", sa.Integer()),
    sa.column("first_at", sa.DateTime()),
    sa.column("last_at", sa.DateTime()),
    sa.column("last_capture_id", sa.Integer()),
    sa.column("results", sa.Integer()),
    sa.column("passes", sa.Integer()),
)


def upgrade() -> None:
    """Create ``capture_meta`` and ``conversations`` with their indexes, and fill them."""
    op.create_table(
        "capture_meta",
        sa.Column("capture_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.String(200), nullable=False),
        sa.Column("captured_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["capture_id"],
            ["captures.id"],
            name="fk_capture_meta_capture_id_captures",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("capture_id", "key", name="pk_capture_meta"),
    )
    op.create_table(
        "conversations",
        sa.Column("conversation_id", sa.String(200), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("first_at", sa.DateTime(), nullable=False),
        sa.Column("last_at", sa.DateTime(), nullable=False),
        sa.Column("last_capture_id", sa.Integer(), nullable=False),
        sa.Column("results", sa.Integer(), nullable=False),
        sa.Column("passes", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_conversations"),
    )
    _fill(op.get_bind())
    # indexes after the fill: built once rather than kept row by row
    op.create_index(
        "ix_capture_meta_lookup", "capture_meta", ["key", "value", "captured_at", "capture_id"]
    )
    op.create_index("ix_conversations_last_at", "conversations", ["last_at", "conversation_id"])


# the default keys as this revision indexed them, frozen: a key added to
# ``meta_index.DEFAULT_INDEXED_KEYS`` later is filled by its own migration, not here
_DEFAULT_KEYS = (
    "engine",
    "model",
    "provider",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "latency_ms",
)


def _fill(conn: sa.Connection) -> None:
    declared = conn.execute(
        sa.select(_settings.c.value).where(_settings.c.key == "indexed_meta")
    ).scalar()
    more = [str(k) for k in declared] if isinstance(declared, list) else []
    keys = tuple(dict.fromkeys([*_DEFAULT_KEYS, *more]))  # the defaults, then declared ones
    talks: dict[str, list[Any]] = {}
    last = 0
    while True:
        rows = conn.execute(
            sa.select(
                _captures.c.id,
                _captures.c.conversation_id,
                _captures.c.metadata,
                _captures.c.captured_at,
                _captures.c.scores,
            )
            .where(_captures.c.id > last)
            .order_by(_captures.c.id)
            .limit(_CHUNK)
        ).all()
        if not rows:
            break
        entries: list[dict[str, object]] = []
        for cid, talk, meta, at, blob in rows:
            if isinstance(meta, str):  # a JSON column read as text by an older driver
                meta = json.loads(meta)
            entries.extend(
                {"capture_id": cid, "key": k, "value": v, "captured_at": at}
                for k, v in index_entries(meta, keys)
            )
            if talk is not None:
                packed = unpack_results(blob)
                n, p = len(packed), sum(packed.passed)
                t = talks.get(talk)
                if t is None:
                    talks[talk] = [1, at, at, cid, n, p]
                else:
                    t[0] += 1
                    t[1] = min(t[1], at)
                    if (at, cid) >= (t[2], t[3]):
                        t[2], t[3] = at, cid
                    t[4] += n
                    t[5] += p
        if entries:
            conn.execute(_meta.insert(), entries)
        last = rows[-1][0]
    items = [
        {
            "conversation_id": talk,
            "turns": t[0],
            "first_at": t[1],
            "last_at": t[2],
            "last_capture_id": t[3],
            "results": t[4],
            "passes": t[5],
        }
        for talk, t in talks.items()
    ]
    for start in range(0, len(items), _CHUNK):
        conn.execute(_conversations.insert(), items[start : start + _CHUNK])


def downgrade() -> None:
    """Drop both tables."""
    op.drop_index("ix_conversations_last_at", table_name="conversations")
    op.drop_table("conversations")
    op.drop_index("ix_capture_meta_lookup", table_name="capture_meta")
    op.drop_table("capture_meta")
