"""Captured results packed on their capture; an hourly trend rollup; reviews keyed by result.

Until 0002 every captured result was a row of ``results``, indexed by (eval_id, created_at):
a capture scored by 1,000 evals wrote 1,000 rows and 1,000 entries scattered across that
index, and its cost grew with the database. From here a capture's results are one packed
column (``captures.scores``, see ``simeval.store.pack_results``), ``results`` keeps data-set
run rows only, per-eval trends read ``trend_rollup`` (filled after the fact from the captures,
see ``simeval.service.trends``), and a review names its result by key ("<capture>-<eval>" or
"r<row>"). Every existing result and review is carried over: captured results are packed in
their original order, then their rows deleted.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from simeval.store.packing import pack_results

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_CAPTURES = 500  # captures packed per step


def upgrade() -> None:
    """Pack captured results, re-key reviews, add the rollup, drop the per-eval index."""
    conn = op.get_bind()
    op.add_column("captures", sa.Column("scores", sa.LargeBinary(), nullable=True))
    op.create_table(
        "trend_rollup",
        sa.Column("bucket", sa.DateTime(), nullable=False),
        sa.Column("eval_id", sa.Integer(), nullable=False),
        sa.Column("eval_version", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("total", sa.Float(), nullable=False),
        sa.Column("passes", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "bucket", "eval_id", "eval_version", "fingerprint", name=op.f("pk_trend_rollup")
        ),
    )
    with op.batch_alter_table("reviews") as batch:
        batch.add_column(sa.Column("result_key", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("capture_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("eval_id", sa.Integer(), nullable=True))
        batch.alter_column("result_id", existing_type=sa.Integer(), nullable=True)

    # reviews of captured results: keyed by capture and eval, detached from the rows that go
    conn.execute(
        sa.text(
            "UPDATE reviews SET capture_id = (SELECT capture_id FROM results r "
            "WHERE r.id = reviews.result_id), eval_id = (SELECT eval_id FROM results r "
            "WHERE r.id = reviews.result_id)"
        )
    )
    for rid, cid, eid in conn.execute(
        sa.text("SELECT id, capture_id, eval_id FROM reviews WHERE capture_id IS NOT NULL")
    ).all():
        conn.execute(
            sa.text("UPDATE reviews SET result_key = :k, result_id = NULL WHERE id = :id"),
            {"k": f"{cid}-{eid}", "id": rid},
        )
    conn.execute(
        sa.text(
            "UPDATE reviews SET result_key = 'r' || CAST(result_id AS VARCHAR(20)) "
            "WHERE result_key IS NULL"
        )
    )
    with op.batch_alter_table("reviews") as batch:
        batch.alter_column("result_key", existing_type=sa.String(length=64), nullable=False)
        batch.create_unique_constraint("uq_reviews_result_key", ["result_key"])
        batch.create_foreign_key(
            "fk_reviews_capture_id_captures", "captures", ["capture_id"], ["id"], ondelete="CASCADE"
        )
    op.create_index("ix_reviews_capture_id", "reviews", ["capture_id"])

    # captured results: packed per capture, in the order they were stored
    last = 0
    while True:
        ids = (
            conn.execute(
                sa.text(
                    "SELECT DISTINCT capture_id FROM results WHERE capture_id > :last "
                    "ORDER BY capture_id LIMIT :n"
                ),
                {"last": last, "n": _CAPTURES},
            )
            .scalars()
            .all()
        )
        if not ids:
            break
        rows = conn.execute(
            sa.text(
                "SELECT capture_id, eval_id, eval_version, score, passed, threshold, "
                "matched_index, fingerprint FROM results "
                "WHERE capture_id BETWEEN :lo AND :hi ORDER BY capture_id, id"
            ),
            {"lo": ids[0], "hi": ids[-1]},
        ).all()
        groups: dict[int, list[tuple[int, int, float, bool, float, int, str]]] = {}
        for cid, eid, ver, score, ok, thr, at, fp in rows:
            groups.setdefault(cid, []).append(
                (int(eid), int(ver), float(score), bool(ok), float(thr), int(at), str(fp))
            )
        conn.execute(
            sa.text("UPDATE captures SET scores = :s WHERE id = :id"),
            [{"s": pack_results(v), "id": k} for k, v in groups.items()],
        )
        last = ids[-1]
    # scored captures that no eval matched: an empty set, not "never scored"
    conn.execute(
        sa.text("UPDATE captures SET scores = :s WHERE evaluated AND scores IS NULL"),
        {"s": pack_results([])},
    )
    op.drop_index("ix_results_eval_id_created_at", "results")
    op.drop_index("ix_results_capture_id", "results")
    conn.execute(sa.text("DELETE FROM results WHERE capture_id IS NOT NULL"))
    settings = sa.table("settings", sa.column("key", sa.String), sa.column("value", sa.JSON))
    op.bulk_insert(settings, [{"key": "rollup_upto", "value": 0}])


def downgrade() -> None:
    """Not supported: packed results are not unpacked into rows again."""
    raise NotImplementedError("simeval cannot downgrade below schema 0003")
