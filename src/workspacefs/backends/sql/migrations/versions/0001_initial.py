"""Initial schema: sessions, content-addressed chunks and blobs, files, snapshots.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

PATH = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
STAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "wsfs_sessions",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("agent_id", sa.Text, nullable=True),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("updated_at", STAMP, nullable=False),
    )
    op.create_index("ix_wsfs_sessions_agent_id", "wsfs_sessions", ["agent_id"])
    op.create_table(
        "wsfs_chunks",
        sa.Column("hash", sa.Text, primary_key=True),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("touched_at", STAMP, nullable=False),
    )
    op.create_table(
        "wsfs_blobs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("chunk_count", sa.Integer, nullable=False),
    )
    op.create_table(
        "wsfs_uploads",
        sa.Column("upload_id", sa.Text, primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("chunk_hash", sa.Text, sa.ForeignKey("wsfs_chunks.hash"), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
    )
    op.create_index("ix_wsfs_uploads_chunk_hash", "wsfs_uploads", ["chunk_hash"])
    op.create_table(
        "wsfs_blob_chunks",
        sa.Column("blob_id", sa.Text, sa.ForeignKey("wsfs_blobs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("chunk_hash", sa.Text, sa.ForeignKey("wsfs_chunks.hash"), nullable=False),
    )
    op.create_index("ix_wsfs_blob_chunks_chunk_hash", "wsfs_blob_chunks", ["chunk_hash"])
    op.create_table(
        "wsfs_files",
        sa.Column("session_id", sa.Text, sa.ForeignKey("wsfs_sessions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("path", PATH, primary_key=True),
        sa.Column("parent", PATH, nullable=True),
        sa.Column("name", PATH, nullable=False),
        sa.Column("is_directory", sa.Boolean, nullable=False),
        sa.Column("is_readonly", sa.Boolean, nullable=False),
        sa.Column("blob_id", sa.Text, sa.ForeignKey("wsfs_blobs.id"), nullable=True),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("updated_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id", "parent"], ["wsfs_files.session_id", "wsfs_files.path"], ondelete="CASCADE"
        ),
        sa.CheckConstraint("path NOT LIKE '/%' AND path NOT LIKE '%//%'", name="wsfs_files_path_normalised"),
        sa.CheckConstraint("NOT is_directory OR blob_id IS NULL", name="wsfs_files_directory_no_content"),
    )
    op.create_index("ix_wsfs_files_blob_id", "wsfs_files", ["blob_id"])
    op.create_index("wsfs_files_parent", "wsfs_files", ["session_id", "parent", "name"])
    op.create_table(
        "wsfs_snapshots",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("session_id", sa.Text, sa.ForeignKey("wsfs_sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tag", sa.Text, nullable=True),
        sa.Column("parent_id", sa.Text, nullable=True),
        sa.Column("file_count", sa.Integer, nullable=False),
        sa.Column("total_bytes", sa.BigInteger, nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
    )
    op.create_index("ix_wsfs_snapshots_session_id", "wsfs_snapshots", ["session_id"])
    op.create_table(
        "wsfs_snapshot_entries",
        sa.Column("snapshot_id", sa.Text, sa.ForeignKey("wsfs_snapshots.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("path", PATH, primary_key=True),
        sa.Column("parent", PATH, nullable=True),
        sa.Column("name", PATH, nullable=False),
        sa.Column("is_directory", sa.Boolean, nullable=False),
        sa.Column("is_readonly", sa.Boolean, nullable=False),
        sa.Column("blob_id", sa.Text, sa.ForeignKey("wsfs_blobs.id"), nullable=True),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("updated_at", STAMP, nullable=False),
    )
    op.create_index("ix_wsfs_snapshot_entries_blob_id", "wsfs_snapshot_entries", ["blob_id"])


def downgrade() -> None:
    for table in (
        "wsfs_snapshot_entries",
        "wsfs_snapshots",
        "wsfs_files",
        "wsfs_blob_chunks",
        "wsfs_uploads",
        "wsfs_blobs",
        "wsfs_chunks",
        "wsfs_sessions",
    ):
        op.drop_table(table)
