"""Token scopes, expiry and rate limits. Existing tokens keep the rights they had: a token for one agent
becomes ``write`` (files, snapshots and sessions of that agent), a token for every agent ``admin``.

Revision ID: s0003
Revises: s0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "s0003"
down_revision = "s0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wsfs_tokens", sa.Column("scope", sa.Text, nullable=False, server_default="write"))
    op.add_column("wsfs_tokens", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("wsfs_tokens", sa.Column("rate_limit", sa.Integer, nullable=True))
    op.execute("UPDATE wsfs_tokens SET scope = 'admin' WHERE agent_id IS NULL")


def downgrade() -> None:
    with op.batch_alter_table("wsfs_tokens") as batch:
        batch.drop_column("rate_limit")
        batch.drop_column("expires_at")
        batch.drop_column("scope")
