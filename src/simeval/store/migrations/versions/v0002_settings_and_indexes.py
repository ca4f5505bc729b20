"""Settings (automatic evaluation, retention, the evals revision) and listing/trend indexes.

The settings table also holds ``evals_revision``, a counter bumped by every change to an eval:
a process compares it with its cached copy of the active evals on each capture, so a change
made by another process (the CLI beside a running server) is seen at once.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add the settings table with its defaults, and the indexes listings and trends use."""
    settings = op.create_table(
        "settings",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_settings")),
    )
    op.bulk_insert(
        settings,
        [
            {"key": "auto_evaluate", "value": True},
            {"key": "retention_days", "value": None},
            {"key": "evals_revision", "value": 0},
        ],
    )
    op.create_index("ix_results_eval_id_created_at", "results", ["eval_id", "created_at"])
    op.create_index("ix_results_created_at", "results", ["created_at"])
    op.create_index("ix_captures_conversation_id", "captures", ["conversation_id"])


def downgrade() -> None:
    """Remove the settings and the indexes."""
    op.drop_index("ix_captures_conversation_id", "captures")
    op.drop_index("ix_results_created_at", "results")
    op.drop_index("ix_results_eval_id_created_at", "results")
    op.drop_table("settings")
