"""Small content inline: ``wsfs_blobs.data`` holds content of at most one chunk written whole.

A small write then touches two tables (the blob and the file row) instead of four; existing blobs keep
their chunk lists, and readers take either form.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable inline-content column."""
    op.add_column("wsfs_blobs", sa.Column("data", sa.LargeBinary, nullable=True))


def downgrade() -> None:
    """Move inline content into chunk rows and chunk lists (the old form), then drop the column."""
    connection = op.get_bind()
    blobs = sa.table("wsfs_blobs", sa.column("id"), sa.column("data"), sa.column("chunk_count"))
    chunks = sa.table("wsfs_chunks", sa.column("hash"), sa.column("size"), sa.column("data"), sa.column("touched_at"))
    lists = sa.table("wsfs_blob_chunks", sa.column("blob_id"), sa.column("seq"), sa.column("chunk_hash"))
    now = datetime.now(UTC)
    for blob_id, data in connection.execute(sa.select(blobs.c.id, blobs.c.data).where(blobs.c.data.is_not(None))):
        if data:
            digest = hashlib.sha256(data).hexdigest()
            if connection.execute(sa.select(chunks.c.hash).where(chunks.c.hash == digest)).first() is None:
                connection.execute(sa.insert(chunks).values(hash=digest, size=len(data), data=data, touched_at=now))
            connection.execute(sa.insert(lists).values(blob_id=blob_id, seq=0, chunk_hash=digest))
            connection.execute(sa.update(blobs).where(blobs.c.id == blob_id).values(chunk_count=1))
    with op.batch_alter_table("wsfs_blobs") as batch:
        batch.drop_column("data")
