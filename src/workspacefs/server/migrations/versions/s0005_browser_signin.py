"""Browser sign-in: one-time sign-in codes, and tokens that are a browser's sign-in (held in a cookie), each
tied to the token it was made with so revoking that token signs its browsers out too.

Revision ID: s0005
Revises: s0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "s0005"
down_revision = "s0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wsfs_tokens", sa.Column("browser", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("wsfs_tokens", sa.Column("parent_id", sa.Text, nullable=True))
    op.create_index("wsfs_tokens_parent", "wsfs_tokens", ["parent_id"])
    op.create_table(
        "wsfs_signin_codes",
        sa.Column("code_hash", sa.Text, primary_key=True),
        sa.Column("agent_id", sa.Text, nullable=True),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("wsfs_signin_codes")
    op.drop_index("wsfs_tokens_parent", "wsfs_tokens")
    with op.batch_alter_table("wsfs_tokens") as batch:
        batch.drop_column("parent_id")
        batch.drop_column("browser")
