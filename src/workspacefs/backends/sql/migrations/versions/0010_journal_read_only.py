"""The journal records the per-file read-only flag: ``read_only_before``/``read_only_after`` on ``wsfs_journal``.

Setting or clearing a file's read-only flag (alone, or with new content in one step) was no entry, so history
did not show it and undo did not put it back: undoing a write that made a file read-only failed on the flag it
had set. Both columns are NULL where a change left the flag alone (every row written before this revision).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two nullable columns (no row is rewritten)."""
    op.add_column("wsfs_journal", sa.Column("read_only_before", sa.Boolean, nullable=True))
    op.add_column("wsfs_journal", sa.Column("read_only_after", sa.Boolean, nullable=True))


def downgrade() -> None:
    """Drop the columns (flag changes stay as entries without their flags)."""
    op.drop_column("wsfs_journal", "read_only_after")
    op.drop_column("wsfs_journal", "read_only_before")
