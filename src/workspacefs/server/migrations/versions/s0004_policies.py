"""Path policies in the service: a token's own policy, a session's policy, and approvals held pending.

Revision ID: s0004
Revises: s0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "s0004"
down_revision = "s0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wsfs_tokens", sa.Column("policy", sa.Text, nullable=True))
    op.create_table(
        "wsfs_session_policies",
        sa.Column("session_id", sa.Text, primary_key=True),
        sa.Column("policy", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["wsfs_sessions.id"], ondelete="CASCADE"),
    )
    op.create_table(
        "wsfs_approvals",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("agent_id", sa.Text, nullable=False),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("token_id", sa.Text, nullable=True),
        sa.Column("operation", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("paths", sa.Text, nullable=False),
        sa.Column("pattern", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.Text, nullable=True),
    )
    op.create_index("wsfs_approvals_status", "wsfs_approvals", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("wsfs_approvals_status", "wsfs_approvals")
    op.drop_table("wsfs_approvals")
    op.drop_table("wsfs_session_policies")
    with op.batch_alter_table("wsfs_tokens") as batch:
        batch.drop_column("policy")
