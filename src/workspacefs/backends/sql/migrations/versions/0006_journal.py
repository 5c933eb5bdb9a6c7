"""The journal: one row per path each change touched, written in the change's own transaction.

Rows of one operation share ``op_key``; the entry's id is their lowest ``seq`` (a one-row entry has no key).
A blob named by ``before_id`` is kept for undo (the blob collector checks this table) until retention drops the row. On
PostgreSQL a trigger notifies channel ``wsfs_journal`` with ``<session> <seq>`` on each insert, so every
process serving a session hears of changes made through any other (``LISTEN``); the notification is sent
when the change commits, and never for one that rolls back.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_PATH = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    """Create ``wsfs_journal``, its indexes and (PostgreSQL) the notifying trigger."""
    op.create_table(
        "wsfs_journal",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.Text, sa.ForeignKey("wsfs_sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("op_key", sa.Text, nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("operation", sa.Text, nullable=False),
        sa.Column("actor_name", sa.Text, nullable=True),
        sa.Column("actor_session", sa.Text, nullable=True),
        sa.Column("actor_call", sa.Text, nullable=True),
        sa.Column("actor_via", sa.Text, nullable=True),
        sa.Column("path", _PATH, nullable=False),
        sa.Column("from_path", _PATH, nullable=True),
        sa.Column("before_id", sa.Text, nullable=True),
        sa.Column("after_id", sa.Text, nullable=True),
        sa.Column("size_before", sa.BigInteger, nullable=False),
        sa.Column("size_after", sa.BigInteger, nullable=False),
        sa.Column("undoes", sa.BigInteger, nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
        sqlite_autoincrement=True,  # ids are never reused: a pruned entry's id never names another
    )
    op.create_index("wsfs_journal_session", "wsfs_journal", ["session_id", "seq"])
    op.create_index("wsfs_journal_path", "wsfs_journal", ["session_id", "path"])
    # partial: a one-row entry (a small write) has no key, and a new file replaced nothing; their rows skip these
    only_keyed, only_replaced = sa.text("op_key IS NOT NULL"), sa.text("before_id IS NOT NULL")
    op.create_index("wsfs_journal_op", "wsfs_journal", ["op_key"], sqlite_where=only_keyed, postgresql_where=only_keyed)
    op.create_index(
        "wsfs_journal_before",
        "wsfs_journal",
        ["before_id"],
        sqlite_where=only_replaced,
        postgresql_where=only_replaced,
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION wsfs_journal_notify() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN PERFORM pg_notify('wsfs_journal', NEW.session_id || ' ' || NEW.seq); RETURN NULL; END $$"
        )
        op.execute(
            "CREATE TRIGGER wsfs_journal_notify AFTER INSERT ON wsfs_journal"
            " FOR EACH ROW EXECUTE FUNCTION wsfs_journal_notify()"
        )


def downgrade() -> None:
    """Drop the journal (its history is lost; the files are untouched)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS wsfs_journal_notify ON wsfs_journal")
        op.execute("DROP FUNCTION IF EXISTS wsfs_journal_notify()")
    op.drop_table("wsfs_journal")
