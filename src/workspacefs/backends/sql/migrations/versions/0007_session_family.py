"""Forks: ``wsfs_sessions.family`` and ``wsfs_sessions.forked_from``.

A session forked from another (``SqlFilesystem.fork``) records the session it came from and the family it
belongs to: the id of the first session of the line (``NULL`` for a session never forked from: its own id is
its family). Sessions of one family may restore and merge each other's snapshots.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two nullable columns (no existing row changes) and an index on the family."""
    op.add_column("wsfs_sessions", sa.Column("family", sa.Text, nullable=True))
    op.add_column("wsfs_sessions", sa.Column("forked_from", sa.Text, nullable=True))
    op.create_index("wsfs_sessions_family", "wsfs_sessions", ["family"])


def downgrade() -> None:
    """Drop them: forks become unrelated sessions (their files and snapshots stay)."""
    op.drop_index("wsfs_sessions_family", table_name="wsfs_sessions")
    if op.get_bind().dialect.name == "sqlite":  # in place: a rebuild would trip the other tables' foreign keys
        op.execute("ALTER TABLE wsfs_sessions DROP COLUMN forked_from")
        op.execute("ALTER TABLE wsfs_sessions DROP COLUMN family")
    else:
        op.drop_column("wsfs_sessions", "forked_from")
        op.drop_column("wsfs_sessions", "family")
