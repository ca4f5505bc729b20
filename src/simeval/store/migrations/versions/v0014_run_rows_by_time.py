"""A run's rows read by time: ``ix_results_run_created_id`` (run_id, created_at, id).

The one-run page (``/runs/{id}``, ``/api/results?run_id=``) lists a run's rows newest first
and pages by a keyset on (created_at, id). With an index on the run id alone, each page sorted
every row of the run (a 100,000-row run: about 0.1 s a page); this index answers the run, the
order and the cursor's start together. Like the index it replaces (``ix_results_run_id``) it
is partial: captured results are not rows, and only run rows carry a run id.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None

_RUN_ROWS = sa.text("run_id IS NOT NULL")


def upgrade() -> None:
    """Create the (run, time, id) index and drop the run-only one it contains."""
    op.create_index(
        "ix_results_run_created_id",
        "results",
        ["run_id", "created_at", "id"],
        sqlite_where=_RUN_ROWS,
        postgresql_where=_RUN_ROWS,
    )
    op.drop_index("ix_results_run_id", table_name="results")


def downgrade() -> None:
    """Back to the index on the run id alone."""
    op.create_index(
        "ix_results_run_id",
        "results",
        ["run_id"],
        sqlite_where=_RUN_ROWS,
        postgresql_where=_RUN_ROWS,
    )
    op.drop_index("ix_results_run_created_id", table_name="results")
