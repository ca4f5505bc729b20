"""Runs that belong together: the engine that answered, the group, the data set's version.

``simeval run dataset:NAME --engines FILE`` stores one run per engine, all in one group, each
compared with the group's first. ``runs.engine`` names the engine whose answers a run scored,
``runs.group_name`` ties the runs of one invocation together (the studio's side-by-side page
reads a group), and ``runs.dataset_name``/``runs.dataset_version`` record which version of a
stored data set the run used, so a run after an edit says so. All four are null for runs
stored before this migration and for runs of a plain file without engines.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add the four columns and an index to read a group's runs."""
    op.add_column("runs", sa.Column("engine", sa.String(200), nullable=True))
    op.add_column("runs", sa.Column("group_name", sa.String(200), nullable=True))
    op.add_column("runs", sa.Column("dataset_name", sa.String(200), nullable=True))
    op.add_column("runs", sa.Column("dataset_version", sa.Integer(), nullable=True))
    op.create_index("ix_runs_group_name", "runs", ["group_name"])


def downgrade() -> None:
    """Drop the index and the four columns."""
    op.drop_index("ix_runs_group_name", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("dataset_version")
        batch.drop_column("dataset_name")
        batch.drop_column("group_name")
        batch.drop_column("engine")
