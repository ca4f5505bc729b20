"""Users with roles and their own keys, an append-only audit log, who made each eval version.

``users`` holds one row per person or service: a name, a role (viewer, reviewer, editor,
admin, ingest), the SHA-256 of its API key with the key's first characters (shown in listings,
never enough to use), an argon2 hash of its password (the studio's sign-in), when it was made
and last used, and whether it is disabled. No key or password is stored.

``audit_log`` records every change made through simeval: when, who (``actor``), what
(``action``, e.g. ``eval.edit``), to what (``target``, e.g. ``eval:greeting``) and its detail
(JSON). Triggers refuse updates and deletes of its rows on both backends: entries are only
ever added.

``eval_versions.created_by`` names the user who made a version (null: before this revision,
or made with no users defined).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None

_REFUSE = "the audit log is append-only"


def upgrade() -> None:
    """Create ``users`` and ``audit_log`` (with its append-only triggers); add
    ``eval_versions.created_by``."""
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=True),
        sa.Column("key_prefix", sa.String(16), nullable=True),
        sa.Column("password_hash", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_used_at", sa.DateTime(), nullable=True),
        sa.Column("disabled", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("name", name="uq_users_name"),
        sa.UniqueConstraint("key_hash", name="uq_users_key_hash"),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("actor", sa.String(64), nullable=True),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.String(300), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_at_id", "audit_log", ["at", "id"])
    op.create_index("ix_audit_log_actor", "audit_log", ["actor"])
    op.create_index("ix_audit_log_target", "audit_log", ["target"])
    with op.batch_alter_table("eval_versions") as batch:
        batch.add_column(sa.Column("created_by", sa.String(64), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION simeval_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION '{_REFUSE}'; END $$"
        )
        op.execute(
            "CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log "
            "FOR EACH ROW EXECUTE FUNCTION simeval_audit_append_only()"
        )
    else:
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER audit_log_no_{event.lower()} BEFORE {event} ON audit_log "
                f"BEGIN SELECT RAISE(ABORT, '{_REFUSE}'); END"
            )


def downgrade() -> None:
    """Drop what ``upgrade`` made (the audit log with it)."""
    with op.batch_alter_table("eval_versions") as batch:
        batch.drop_column("created_by")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER audit_log_append_only ON audit_log")
        op.execute("DROP FUNCTION simeval_audit_append_only()")
    op.drop_table("audit_log")
    op.drop_table("users")
