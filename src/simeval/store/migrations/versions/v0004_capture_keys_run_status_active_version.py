"""Capture keys, run status, and the version of an eval that is in force.

- ``captures.capture_key``: an optional client-given key (unique when given), so a capture
  retried after a timeout, or replayed by a proxy, is stored once.
- ``runs.status`` (``running``, ``complete``, ``interrupted``) and ``runs.heartbeat_at``: a
  run that stopped while storing is not shown as if complete.
- ``evals.active_version``: the version that scores captures while a newer one is pending
  (edited, not yet tested and activated); null means the current version.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add the three columns (existing runs are complete; no eval has a pending version)."""
    op.add_column("captures", sa.Column("capture_key", sa.String(length=200), nullable=True))
    op.create_index("ix_captures_capture_key", "captures", ["capture_key"], unique=True)
    op.add_column(
        "runs",
        sa.Column("status", sa.String(length=16), nullable=False, server_default="complete"),
    )
    op.add_column("runs", sa.Column("heartbeat_at", sa.DateTime(), nullable=True))
    op.add_column("evals", sa.Column("active_version", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Drop the three columns."""
    with op.batch_alter_table("evals") as batch:
        batch.drop_column("active_version")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("heartbeat_at")
        batch.drop_column("status")
    op.drop_index("ix_captures_capture_key", "captures")
    with op.batch_alter_table("captures") as batch:
        batch.drop_column("capture_key")
