"""A run's counts kept on the run.

``runs.results_count``, ``runs.passed_count`` and ``runs.score_sum``: listing runs (the CLI's
``runs list``, the API, the studio's Runs page) showed each run's row count, pass rate and mean
score by reading every one of its rows, a scan of the whole run each time (~200 MB for a run of
100,000 rows). Every write of a run's rows now adds to these in the same transaction; existing
runs are counted once here.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add the three columns and count the rows of every stored run."""
    op.add_column("runs", sa.Column("results_count", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("passed_count", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("score_sum", sa.Float(), nullable=True))
    op.execute(
        "UPDATE runs SET "
        "results_count = (SELECT count(*) FROM results WHERE results.run_id = runs.id), "
        "passed_count = (SELECT count(*) FROM results "
        "WHERE results.run_id = runs.id AND results.passed), "
        "score_sum = (SELECT coalesce(sum(results.score), 0) FROM results "
        "WHERE results.run_id = runs.id)"
    )


def downgrade() -> None:
    """Drop the three columns."""
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("score_sum")
        batch.drop_column("passed_count")
        batch.drop_column("results_count")
