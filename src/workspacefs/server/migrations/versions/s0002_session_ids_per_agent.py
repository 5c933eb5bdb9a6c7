"""Session ids per agent: an owner row names the session's id under its agent (``public_id``), unique per
agent, apart from the storage's id. Every existing row keeps its storage id as its public id, so every
session stays at the URL it had; sessions without a row (made through the library) stay the agent
``default``'s under their storage id.

Revision ID: s0002
Revises: s0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "s0002"
down_revision = "s0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wsfs_session_owners", sa.Column("public_id", sa.Text, nullable=True))
    op.execute("UPDATE wsfs_session_owners SET public_id = session_id")
    with op.batch_alter_table("wsfs_session_owners") as batch:  # SQLite: NOT NULL needs the table rebuilt
        batch.alter_column("public_id", existing_type=sa.Text, nullable=False)
        batch.drop_index("wsfs_session_owners_agent")
        batch.create_index("wsfs_session_owners_public", ["agent_id", "public_id"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("wsfs_session_owners") as batch:
        batch.drop_index("wsfs_session_owners_public")
        batch.create_index("wsfs_session_owners_agent", ["agent_id"])
        batch.drop_column("public_id")
