"""A session's usage as a row: ``wsfs_session_usage``, kept by triggers on ``wsfs_files``.

A quota asks for a session's bytes and file count before every growing change, and counting them was an
aggregate over every file row: a 100-byte write into a SQLite session of 20,000 files took 43 ms with a quota
(0.1 ms without). From here a session's usage is one row, made the first time it is asked for (one count) and kept
from then on, in every changing statement itself, by triggers: exact for changes from any process. A session
that never asks pays a lookup that finds no row.

On PostgreSQL the trigger is per statement (transition tables) and takes, like the versions trigger of ``0008``,
the session's advisory lock shared; the first count takes it exclusively, so a change either commits before it
counts or finds the row.

Revision ID: 0009
Revises: 0008
"""

# ruff: noqa: S608 - the triggers' SQL is built from constants of this file; no value is interpolated

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

USAGE_LOCK = 0x77737673
"""The class of the per-session advisory lock (``"wsvs"``, the versions trigger's): writers share it."""

_ADD = (
    "UPDATE wsfs_session_usage SET bytes = bytes + {bytes}, files = files + {files}"
    " WHERE session_id = {row}.session_id;"
)
_BYTES = "(CASE WHEN {row}.is_directory THEN 0 ELSE {row}.size_bytes END)"
_FILES = "(CASE WHEN {row}.is_directory THEN 0 ELSE 1 END)"

SQLITE_TRIGGERS = (
    "CREATE TRIGGER wsfs_files_usage_insert AFTER INSERT ON wsfs_files WHEN NOT NEW.is_directory"
    " BEGIN " + _ADD.format(bytes="NEW.size_bytes", files="1", row="NEW") + " END",
    "CREATE TRIGGER wsfs_files_usage_delete AFTER DELETE ON wsfs_files WHEN NOT OLD.is_directory"
    " BEGIN " + _ADD.format(bytes="-OLD.size_bytes", files="-1", row="OLD") + " END",
    "CREATE TRIGGER wsfs_files_usage_update AFTER UPDATE OF session_id, is_directory, size_bytes ON wsfs_files"
    " WHEN OLD.session_id IS NOT NEW.session_id OR OLD.is_directory IS NOT NEW.is_directory"
    " OR OLD.size_bytes IS NOT NEW.size_bytes BEGIN "
    + _ADD.format(bytes="-" + _BYTES.format(row="OLD"), files="-" + _FILES.format(row="OLD"), row="OLD")
    + " "
    + _ADD.format(bytes=_BYTES.format(row="NEW"), files=_FILES.format(row="NEW"), row="NEW")
    + " END",
)

_DELTAS = "SELECT session_id, sum(b) AS b, sum(f) AS f FROM ({plus} {minus}) d GROUP BY session_id"
_PLUS = "SELECT n.session_id, n.size_bytes AS b, 1 AS f FROM new_rows n WHERE NOT n.is_directory"
_MINUS = "SELECT o.session_id, -o.size_bytes AS b, -1 AS f FROM old_rows o WHERE NOT o.is_directory"

POSTGRES_FUNCTION = (
    "CREATE FUNCTION wsfs_files_usage() RETURNS trigger LANGUAGE plpgsql AS $$"
    " DECLARE ids text[]; one text; BEGIN"
    " IF TG_OP = 'INSERT' THEN SELECT array_agg(DISTINCT session_id ORDER BY session_id) INTO ids FROM new_rows;"
    " ELSIF TG_OP = 'DELETE' THEN SELECT array_agg(DISTINCT session_id ORDER BY session_id) INTO ids FROM old_rows;"
    " ELSE SELECT array_agg(DISTINCT session_id ORDER BY session_id) INTO ids"
    " FROM (SELECT session_id FROM new_rows UNION SELECT session_id FROM old_rows) s; END IF;"
    " IF ids IS NULL THEN RETURN NULL; END IF;"
    # shared, before looking for the row: the first count (exclusive) then either saw this change or made the row
    f" FOREACH one IN ARRAY ids LOOP PERFORM pg_advisory_xact_lock_shared({USAGE_LOCK}, hashtext(one)); END LOOP;"
    " IF NOT EXISTS (SELECT 1 FROM wsfs_session_usage WHERE session_id = ANY (ids)) THEN RETURN NULL; END IF;"
    " IF TG_OP = 'INSERT' THEN UPDATE wsfs_session_usage u SET bytes = u.bytes + d.b, files = u.files + d.f FROM ("
    + _DELTAS.format(plus=_PLUS, minus="")
    + ") d WHERE u.session_id = d.session_id;"
    " ELSIF TG_OP = 'DELETE' THEN UPDATE wsfs_session_usage u SET bytes = u.bytes + d.b, files = u.files + d.f"
    " FROM (" + _DELTAS.format(plus=_MINUS, minus="") + ") d WHERE u.session_id = d.session_id;"
    " ELSE UPDATE wsfs_session_usage u SET bytes = u.bytes + d.b, files = u.files + d.f FROM ("
    + _DELTAS.format(plus=_PLUS, minus="UNION ALL " + _MINUS)
    + ") d WHERE u.session_id = d.session_id; END IF;"
    " RETURN NULL; END $$"
)
POSTGRES_TRIGGERS = (
    "CREATE TRIGGER wsfs_files_usage_insert AFTER INSERT ON wsfs_files REFERENCING NEW TABLE AS new_rows"
    " FOR EACH STATEMENT EXECUTE FUNCTION wsfs_files_usage()",
    "CREATE TRIGGER wsfs_files_usage_update AFTER UPDATE ON wsfs_files"
    " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION wsfs_files_usage()",
    "CREATE TRIGGER wsfs_files_usage_delete AFTER DELETE ON wsfs_files REFERENCING OLD TABLE AS old_rows"
    " FOR EACH STATEMENT EXECUTE FUNCTION wsfs_files_usage()",
)


def upgrade() -> None:
    """Create the usage table (no rows: each session's is made when first asked for) and its triggers."""
    op.create_table(
        "wsfs_session_usage",
        sa.Column("session_id", sa.Text, sa.ForeignKey("wsfs_sessions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("files", sa.BigInteger, nullable=False),
    )
    if op.get_bind().dialect.name == "sqlite":
        for statement in SQLITE_TRIGGERS:
            op.execute(statement)
    else:
        op.execute(POSTGRES_FUNCTION)
        for statement in POSTGRES_TRIGGERS:
            op.execute(statement)


def downgrade() -> None:
    """Drop the triggers and the table (usage is counted again from the file rows)."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    for name in ("insert", "update", "delete"):
        op.execute(f"DROP TRIGGER IF EXISTS wsfs_files_usage_{name}" + ("" if sqlite else " ON wsfs_files"))
    if not sqlite:
        op.execute("DROP FUNCTION IF EXISTS wsfs_files_usage()")
    op.drop_table("wsfs_session_usage")
