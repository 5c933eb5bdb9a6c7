"""Chunks in an object store: ``wsfs_chunks.stored`` says where a chunk's bytes are.

``'sql'`` (every existing row): in ``data``, as before. ``'object'``: in the store's content store, an object
store keyed by the chunk's hash, and ``data`` is empty (see ``backends/sql/_content.py``). ``data`` stays
``NOT NULL``: on SQLite loosening it would rebuild ``wsfs_chunks``, which other tables' foreign keys name.

Downgrading refuses while any chunk is kept outside the database (the old schema could not find it): copy
that content back first, or keep this revision.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``stored``, ``'sql'`` for every existing chunk."""
    op.add_column("wsfs_chunks", sa.Column("stored", sa.Text, nullable=False, server_default="sql"))


def downgrade() -> None:
    """Drop ``stored`` if every chunk is in the database; otherwise refuse, changing nothing."""
    outside = op.get_bind().exec_driver_sql("SELECT count(*) FROM wsfs_chunks WHERE stored <> 'sql'").scalar()
    if outside:
        raise RuntimeError(
            f"Cannot downgrade below 0005: {outside} chunk(s) are kept in a content store (an object store), "
            "which revision 0004 cannot read. Collect or copy them back into the database first."
        )
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE wsfs_chunks DROP COLUMN stored")  # in place: a rebuild would trip foreign keys
    else:
        op.drop_column("wsfs_chunks", "stored")
