"""The service's tables: tokens (adopted where storage's old revision 0002 made them) and session owners
(filled once from the ``agent_id`` column that sessions carried before the split).

Revision ID: s0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "s0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table("wsfs_tokens"):
        op.create_table(
            "wsfs_tokens",
            sa.Column("id", sa.Text, primary_key=True),
            sa.Column("token_hash", sa.Text, nullable=False, unique=True),
            sa.Column("agent_id", sa.Text, nullable=True),
            sa.Column("label", sa.Text, nullable=True),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        )
    op.create_table(
        "wsfs_session_owners",
        sa.Column("session_id", sa.Text, primary_key=True),
        sa.Column("agent_id", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["wsfs_sessions.id"], ondelete="CASCADE"),
    )
    op.create_index("wsfs_session_owners_agent", "wsfs_session_owners", ["agent_id"])
    legacy = {column["name"] for column in inspector.get_columns("wsfs_sessions")}
    if "agent_id" in legacy:
        op.execute(
            "INSERT INTO wsfs_session_owners (session_id, agent_id, created_at) "
            "SELECT id, agent_id, created_at FROM wsfs_sessions WHERE agent_id IS NOT NULL"
        )


def downgrade() -> None:
    op.drop_index("wsfs_session_owners_agent", "wsfs_session_owners")
    op.drop_table("wsfs_session_owners")
