"""Who reviewed: ``reviews.reviewer``.

The review queue stores the reviewer's name with each review (from the session, or asked once
in the studio; ``--reviewer`` in the CLI), so a team can see who judged what and calibration
can weigh people's labels. Null for reviews stored before this migration.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add the column."""
    op.add_column("reviews", sa.Column("reviewer", sa.String(200), nullable=True))


def downgrade() -> None:
    """Drop the column."""
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("reviewer")
