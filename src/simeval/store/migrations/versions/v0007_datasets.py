"""Datasets: named, versioned sets of cases (id, input, references, metadata, draft).

A dataset's every change is a new version, and every version stays readable. The cases are
stored as *ranges of versions* rather than copied per version: a row of ``dataset_cases`` is
one state of one case, valid from ``version_from`` up to, not including, ``version_to``
(null: still current). Editing a case closes its row and adds one; adding or deleting a case
touches only that case. An edit of a 100,000-case dataset writes two rows, not 100,000, and
version N is the rows with ``version_from <= N`` and ``version_to`` null or ``> N``.
``dataset_versions`` keeps one row per version (when, what changed, how many cases), and a
partial unique index keeps a case id unique among a dataset's current cases.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``datasets``, ``dataset_versions`` and ``dataset_cases`` with their indexes."""
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_datasets"),
        sa.UniqueConstraint("name", name="uq_datasets_name"),
    )
    op.create_table(
        "dataset_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("cases", sa.Integer(), nullable=False),
        sa.Column("drafts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name="fk_dataset_versions_dataset_id_datasets",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_dataset_versions"),
        sa.UniqueConstraint("dataset_id", "version", name="uq_dataset_versions_dataset_id_version"),
    )
    op.create_table(
        "dataset_cases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("case_id", sa.String(200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("version_from", sa.Integer(), nullable=False),
        sa.Column("version_to", sa.Integer(), nullable=True),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("reference_answers", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("draft", sa.Boolean(), nullable=False),
        sa.Column("capture_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name="fk_dataset_cases_dataset_id_datasets",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_dataset_cases"),
    )
    op.create_index(
        "ix_dataset_cases_dataset_id_version_from",
        "dataset_cases",
        ["dataset_id", "version_from"],
    )
    op.create_index(
        "ix_dataset_cases_current",
        "dataset_cases",
        ["dataset_id", "case_id"],
        unique=True,
        sqlite_where=sa.text("version_to IS NULL"),
        postgresql_where=sa.text("version_to IS NULL"),
    )


def downgrade() -> None:
    """Drop the three tables (their indexes go with them)."""
    op.drop_table("dataset_cases")
    op.drop_table("dataset_versions")
    op.drop_table("datasets")
