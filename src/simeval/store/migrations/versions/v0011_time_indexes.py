"""Time ranges read by time: captures and run rows ordered by (time, id), the rollup by eval.

A listing pages by a keyset on (time, id) and a count or trend with ``since=`` reads the
captures of its partial hours in that order: ``ix_captures_captured_at_id`` (captured_at, id)
and ``ix_results_created_at_id`` (created_at, id) answer both the range and the order, on
PostgreSQL too (where an index on the time alone leaves the id's order to a sort and the
keyset's row comparison unindexed). They replace the indexes on the time alone, which they
contain. ``ix_trend_rollup_eval_bucket`` (eval_id, bucket) reads one eval's hours (its trend,
counts and stats) without the hours of every other eval: the primary key starts with the hour.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the three indexes, drop the two they contain."""
    op.create_index("ix_captures_captured_at_id", "captures", ["captured_at", "id"])
    op.drop_index("ix_captures_captured_at", table_name="captures")
    op.create_index("ix_results_created_at_id", "results", ["created_at", "id"])
    op.drop_index("ix_results_created_at", table_name="results")
    op.create_index("ix_trend_rollup_eval_bucket", "trend_rollup", ["eval_id", "bucket"])


def downgrade() -> None:
    """Back to the indexes on the time alone."""
    op.drop_index("ix_trend_rollup_eval_bucket", table_name="trend_rollup")
    op.create_index("ix_results_created_at", "results", ["created_at"])
    op.drop_index("ix_results_created_at_id", table_name="results")
    op.create_index("ix_captures_captured_at", "captures", ["captured_at"])
    op.drop_index("ix_captures_captured_at_id", table_name="captures")
