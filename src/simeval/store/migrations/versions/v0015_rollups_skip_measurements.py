"""The rollups by metadata value no longer count per-capture measurements.

``latency_ms``, ``input_tokens`` and ``output_tokens`` are indexed by default, and nearly every
capture has its own value of each: ``meta_rollup`` and ``meta_capture_rollup`` kept about one
row per capture, eval and key for them (a capture batch took twice as long to write). From
this revision they are not rolled up (``simeval.store.meta_index.NOT_ROLLED_UP``); a filter on
one of them is counted from ``capture_meta`` alone. This deletes the rows 0012 and 0013 filled
in for them.

The downgrade does not put them back: a store taken down to 0014 undercounts filters on these
three keys until it is upgraded again (only the tests downgrade).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None

# the keys as this revision stops rolling them up, frozen (``meta_index.NOT_ROLLED_UP`` may
# change later, with its own migration)
_KEYS = ("input_tokens", "output_tokens", "latency_ms")


def upgrade() -> None:
    """Delete the rollup rows of the measurement keys (one range of each primary key)."""
    conn = op.get_bind()
    for name in ("meta_rollup", "meta_capture_rollup"):
        table = sa.table(name, sa.column("key", sa.String()))
        conn.execute(sa.delete(table).where(table.c.key.in_(_KEYS)))


def downgrade() -> None:
    """Nothing to undo: see the module's docstring."""
