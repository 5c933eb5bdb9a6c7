"""Snapshots by mark: ``wsfs_file_versions``, ``wsfs_snapshots.mark`` and the triggers that keep versions.

A snapshot used to copy every file row of its session into ``wsfs_snapshot_entries``. From here a snapshot
records a mark instead (a position in ``wsfs_file_versions``), and triggers on ``wsfs_files`` write, in the
changing statement itself, the row a change replaced — but only while the session has a snapshot with a mark
(a session without one pays a lookup per statement and writes nothing), and only the first change of a path
after the newest mark (the one a restore needs). Restoring or comparing a
snapshot then reads only the versions after its mark. Existing snapshots keep their entries (``mark`` NULL).

On PostgreSQL the triggers are per statement (transition tables: a fork or a restore of 100,000 rows is one
``INSERT … SELECT``), and take a shared advisory lock on the session that a snapshot takes exclusively: a
change either commits before the snapshot's mark is read or logs its version after it.

Revision ID: 0008
Revises: 0007
"""

# ruff: noqa: S608 - the triggers' SQL is built from constants of this file; no value is interpolated

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_PATH = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
_STAMP = sa.DateTime(timezone=True)

VERSION_LOCK = 0x77737673
"""The class of PostgreSQL's per-session advisory lock (``"wsvs"``): writers share it, a snapshot takes it."""

_COLUMNS = "parent, name, is_directory, is_readonly, blob_id, size_bytes, created_at, updated_at"
_LAST_MARK = "(SELECT max(s.mark) FROM wsfs_snapshots s WHERE s.session_id = {row}.session_id)"
_WANTED = _LAST_MARK + " IS NOT NULL"
"""The session has a snapshot kept by mark."""
_FIRST = (
    "NOT EXISTS (SELECT 1 FROM wsfs_file_versions v WHERE v.session_id = {row}.session_id AND v.path = {row}.path"
    " AND v.seq > " + _LAST_MARK + ")"
)
"""No version of the path since the newest mark: this change's version is the oldest after some mark. A later
one never is (no mark lies between the two), so it is not kept: a path has at most one version per mark."""
_OLD = ", ".join(f"OLD.{c}" for c in _COLUMNS.split(", "))

SQLITE_TRIGGERS = (
    "CREATE TRIGGER wsfs_files_version_insert AFTER INSERT ON wsfs_files"
    f" WHEN {_WANTED.format(row='NEW')} AND {_FIRST.format(row='NEW')}"
    " BEGIN INSERT INTO wsfs_file_versions (session_id, path, existed) VALUES (NEW.session_id, NEW.path, 0); END",
    "CREATE TRIGGER wsfs_files_version_update AFTER UPDATE ON wsfs_files"
    f" WHEN {_WANTED.format(row='OLD')}"
    f" BEGIN INSERT INTO wsfs_file_versions (session_id, path, existed, {_COLUMNS})"
    f" SELECT OLD.session_id, OLD.path, 1, {_OLD} WHERE {_FIRST.format(row='OLD')};"
    " INSERT INTO wsfs_file_versions (session_id, path, existed) SELECT NEW.session_id, NEW.path, 0"
    f" WHERE NEW.path IS NOT OLD.path AND {_FIRST.format(row='NEW')}; END",
    "CREATE TRIGGER wsfs_files_version_delete AFTER DELETE ON wsfs_files"
    f" WHEN {_WANTED.format(row='OLD')} AND {_FIRST.format(row='OLD')}"
    f" BEGIN INSERT INTO wsfs_file_versions (session_id, path, existed, {_COLUMNS})"
    f" VALUES (OLD.session_id, OLD.path, 1, {_OLD}); END",
)

_OLD_ROWS = (
    f"INSERT INTO wsfs_file_versions (session_id, path, existed, {_COLUMNS})"
    f" SELECT o.session_id, o.path, true, o.{_COLUMNS.replace(', ', ', o.')} FROM old_rows o"
    f" WHERE {_WANTED.format(row='o')} AND {_FIRST.format(row='o')};"
)
_NEW_ROWS = (
    "INSERT INTO wsfs_file_versions (session_id, path, existed) SELECT n.session_id, n.path, false FROM new_rows n"
    f" WHERE {_WANTED.format(row='n')} AND {_FIRST.format(row='n')}{{also}};"
)
_SESSIONS = "SELECT array_agg(DISTINCT session_id ORDER BY session_id) INTO ids FROM {rows};"

POSTGRES_FUNCTION = (
    "CREATE FUNCTION wsfs_files_version() RETURNS trigger LANGUAGE plpgsql AS $$"
    " DECLARE ids text[]; one text; BEGIN"
    # the sessions the statement changed (one, but for a session's deletion): each is locked shared, which a
    # snapshot takes exclusively; then nothing more unless one of them has a snapshot by mark (a fork's
    # 100,000 new rows cost one pass over them, no lookup per row)
    " IF TG_OP = 'INSERT' THEN "
    + _SESSIONS.format(rows="new_rows")
    + " ELSE "
    + _SESSIONS.format(rows="old_rows")
    + " END IF;"
    " IF ids IS NULL THEN RETURN NULL; END IF;"
    f" FOREACH one IN ARRAY ids LOOP PERFORM pg_advisory_xact_lock_shared({VERSION_LOCK}, hashtext(one)); END LOOP;"
    " IF NOT EXISTS (SELECT 1 FROM wsfs_snapshots WHERE session_id = ANY (ids) AND mark IS NOT NULL) THEN"
    " RETURN NULL; END IF;"
    " IF TG_OP = 'INSERT' THEN "
    + _NEW_ROWS.format(also="")
    + " ELSIF TG_OP = 'DELETE' THEN "
    + _OLD_ROWS
    + " ELSE "
    + _OLD_ROWS
    + _NEW_ROWS.format(
        also=" AND NOT EXISTS (SELECT 1 FROM old_rows o WHERE o.session_id = n.session_id AND o.path = n.path)"
    )
    + " END IF; RETURN NULL; END $$"
)
POSTGRES_TRIGGERS = (
    "CREATE TRIGGER wsfs_files_version_insert AFTER INSERT ON wsfs_files REFERENCING NEW TABLE AS new_rows"
    " FOR EACH STATEMENT EXECUTE FUNCTION wsfs_files_version()",
    "CREATE TRIGGER wsfs_files_version_update AFTER UPDATE ON wsfs_files"
    " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION wsfs_files_version()",
    "CREATE TRIGGER wsfs_files_version_delete AFTER DELETE ON wsfs_files REFERENCING OLD TABLE AS old_rows"
    " FOR EACH STATEMENT EXECUTE FUNCTION wsfs_files_version()",
)


def upgrade() -> None:
    """Create the versions table, add the nullable mark (existing snapshots keep their entries) and the triggers."""
    op.create_table(
        "wsfs_file_versions",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("path", _PATH, nullable=False),
        sa.Column("existed", sa.Boolean, nullable=False),
        sa.Column("parent", _PATH, nullable=True),
        sa.Column("name", _PATH, nullable=True),
        sa.Column("is_directory", sa.Boolean, nullable=True),
        sa.Column("is_readonly", sa.Boolean, nullable=True),
        sa.Column("blob_id", sa.Text, nullable=True),
        sa.Column("size_bytes", sa.BigInteger, nullable=True),
        sa.Column("created_at", _STAMP, nullable=True),
        sa.Column("updated_at", _STAMP, nullable=True),
        sqlite_autoincrement=True,  # never reused: a mark stays below every version written after it
    )
    op.create_index("wsfs_file_versions_session", "wsfs_file_versions", ["session_id", "seq"])
    op.create_index("wsfs_file_versions_path", "wsfs_file_versions", ["session_id", "path", "seq"])
    only_content = sa.text("blob_id IS NOT NULL")
    op.create_index(
        "wsfs_file_versions_blob",
        "wsfs_file_versions",
        ["blob_id"],
        sqlite_where=only_content,
        postgresql_where=only_content,
    )
    if op.get_bind().dialect.name == "sqlite":  # in place: a rebuild would trip the other tables' foreign keys
        op.execute("ALTER TABLE wsfs_snapshots ADD COLUMN mark BIGINT")
        for statement in SQLITE_TRIGGERS:
            op.execute(statement)
    else:
        op.add_column("wsfs_snapshots", sa.Column("mark", sa.BigInteger, nullable=True))
        op.execute(POSTGRES_FUNCTION)
        for statement in POSTGRES_TRIGGERS:
            op.execute(statement)


def downgrade() -> None:
    """Drop the triggers and versions; snapshots with a mark cannot be kept without them and are dropped."""
    for name in ("insert", "update", "delete"):
        op.execute(f"DROP TRIGGER IF EXISTS wsfs_files_version_{name}" + ("" if _sqlite() else " ON wsfs_files"))
    if not _sqlite():
        op.execute("DROP FUNCTION IF EXISTS wsfs_files_version()")
    op.execute("DELETE FROM wsfs_snapshots WHERE mark IS NOT NULL")
    op.drop_table("wsfs_file_versions")
    if _sqlite():
        op.execute("ALTER TABLE wsfs_snapshots DROP COLUMN mark")
    else:
        op.drop_column("wsfs_snapshots", "mark")


def _sqlite() -> bool:
    return bool(op.get_bind().dialect.name == "sqlite")
