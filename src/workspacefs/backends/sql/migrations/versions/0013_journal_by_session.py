"""SQLite: ``wsfs_journal`` keyed by ``(session_id, seq)`` without rowid, numbered per session.

The journal was a rowid table plus ``wsfs_journal_session (session_id, seq)``, the index every journal query walks:
each journaled commit wrote a page of each. Keyed by ``(session_id, seq)`` without rowid the table is that index
itself, one B-tree (and one WAL page) fewer per journaled write. ``seq`` is then no longer the rowid: a row takes
one more than the largest of its session's numbers and its session's floor (one seek, on the leaf the insert then
writes).

The promise an entry id keeps is per session: within a session id it is never given twice and grows in commit
order (``history(since=...)``, ``undo(entry_id)``, SSE ``Last-Event-ID`` all name entries of one session). Two
sessions may now hold the same number. ``wsfs_journal_floor`` holds, per session id, the highest number given whose
rows all went (a prune of the newest, a deleted session: a trigger raises it when a session's newest row goes), and
is kept after the session is deleted, so a session made again under the same id goes on above it. Its row for ``''``
is the number the global counter had reached at this migration: every session's next number is above it, as before.

PostgreSQL: unchanged (``BIGSERIAL``, the row goes in ``wsfs_write_small``'s own round trip); its numbers are unique
across sessions, which keeps the per-session promise too.

Revision ID: 0013
Revises: 0012
"""

# ruff: noqa: S608 - the SQL is built from constants of this file; no value is interpolated

from __future__ import annotations

import re
from collections.abc import Callable

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

FLOOR_TABLE = (
    "CREATE TABLE wsfs_journal_floor (session_id TEXT NOT NULL PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID"
)
"""Per session id, the highest number given whose rows all went (``''``: the counter before this migration)."""

FLOOR_RAISE = (
    "CREATE TRIGGER wsfs_journal_floor_raise AFTER DELETE ON wsfs_journal"
    " WHEN NOT EXISTS (SELECT 1 FROM wsfs_journal WHERE session_id = OLD.session_id AND seq > OLD.seq)"
    " BEGIN INSERT INTO wsfs_journal_floor (session_id, seq) VALUES (OLD.session_id, OLD.seq)"
    " ON CONFLICT (session_id) DO UPDATE SET seq = max(seq, excluded.seq); END"
)
"""A session's newest row going (nothing above it stays): its number stays taken."""

OLD_FLOOR = (
    "CREATE TABLE wsfs_journal_floor (seq INTEGER NOT NULL)",
    "CREATE TRIGGER wsfs_journal_floor_raise AFTER DELETE ON wsfs_journal"
    " WHEN OLD.seq > (SELECT seq FROM wsfs_journal_floor)"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_journal WHERE seq > OLD.seq)"
    " BEGIN UPDATE wsfs_journal_floor SET seq = OLD.seq; END",
    "CREATE TRIGGER wsfs_journal_above_floor AFTER INSERT ON wsfs_journal"
    " WHEN NEW.seq <= (SELECT seq FROM wsfs_journal_floor)"
    " BEGIN UPDATE wsfs_journal SET seq = (SELECT seq FROM wsfs_journal_floor) + 1 WHERE seq = NEW.seq; END",
)
"""``0012``'s global floor and its triggers (what the downgrade puts back)."""

SESSION_INDEX = "CREATE INDEX wsfs_journal_session ON wsfs_journal (session_id, seq)"


def upgrade() -> None:
    """SQLite: rebuild the journal keyed by ``(session_id, seq)``, every row keeping its number; a floor per
    session. PostgreSQL: nothing."""
    if _postgres():
        return
    bind = op.get_bind()
    floor = int(bind.exec_driver_sql("SELECT seq FROM wsfs_journal_floor").scalar() or 0)
    issued = max(floor, int(bind.exec_driver_sql("SELECT coalesce(max(seq), 0) FROM wsfs_journal").scalar() or 0))
    op.execute("DROP TRIGGER wsfs_journal_floor_raise")
    op.execute("DROP TRIGGER wsfs_journal_above_floor")
    op.execute("DROP TABLE wsfs_journal_floor")
    op.execute("DROP INDEX wsfs_journal_session")
    _rebuild("wsfs_journal", _keyed_by_session)
    op.execute(FLOOR_TABLE)
    op.execute(f"INSERT INTO wsfs_journal_floor (session_id, seq) VALUES ('', {issued})")
    op.execute(FLOOR_RAISE)


def downgrade() -> None:
    """Back to ``0012``: one numbering for all sessions. Numbers two sessions share are given again, in the order
    of ``(seq, session_id)`` (an ``undoes`` follows its entry): ids taken after ``0013`` change."""
    if _postgres():
        return
    bind = op.get_bind()
    floor = int(bind.exec_driver_sql("SELECT coalesce(max(seq), 0) FROM wsfs_journal_floor").scalar() or 0)
    op.execute("DROP TRIGGER wsfs_journal_floor_raise")
    op.execute("DROP TABLE wsfs_journal_floor")
    op.execute(
        "CREATE TEMP TABLE wsfs_journal_renumbered AS SELECT session_id, seq,"
        " row_number() OVER (ORDER BY seq, session_id) AS renumbered FROM wsfs_journal"
    )
    op.execute("CREATE INDEX temp.wsfs_journal_renumbered_key ON wsfs_journal_renumbered (session_id, seq)")
    shared = bind.exec_driver_sql(
        "SELECT count(*) FROM (SELECT seq FROM wsfs_journal GROUP BY seq HAVING count(*) > 1)"
    ).scalar()
    if shared:  # else every number is unique already: kept as it is
        renumbered = (
            "(SELECT r.renumbered FROM wsfs_journal_renumbered r WHERE r.session_id = wsfs_journal.session_id"
            " AND r.seq = wsfs_journal.{column})"
        )
        op.execute(f"UPDATE wsfs_journal SET undoes = coalesce({renumbered.format(column='undoes')}, undoes)")
        op.execute(f"UPDATE wsfs_journal SET seq = -{renumbered.format(column='seq')}")  # no clash on the way
        op.execute("UPDATE wsfs_journal SET seq = -seq")
    op.execute("DROP TABLE wsfs_journal_renumbered")
    _rebuild("wsfs_journal", _keyed_by_seq)
    op.execute(SESSION_INDEX)
    top = int(bind.exec_driver_sql("SELECT coalesce(max(seq), 0) FROM wsfs_journal").scalar() or 0)
    for statement in OLD_FLOOR:
        op.execute(statement)
    op.execute(f"INSERT INTO wsfs_journal_floor (seq) VALUES ({max(floor, top)})")  # higher: only numbers skipped


def _keyed_by_session(sql: str) -> str:
    table = re.sub(r"\bseq INTEGER NOT NULL PRIMARY KEY\b", "seq INTEGER NOT NULL", sql, count=1, flags=re.IGNORECASE)
    table = re.sub(r"\)\s*$", ", \n\tPRIMARY KEY (session_id, seq)\n)", table.strip())
    return table + " WITHOUT ROWID"


def _keyed_by_seq(sql: str) -> str:
    table = re.sub(r"\s*WITHOUT ROWID\s*$", "", sql.strip(), flags=re.IGNORECASE)
    table = re.sub(r",\s*PRIMARY KEY \(session_id, seq\)", "", table, count=1, flags=re.IGNORECASE)
    return re.sub(r"\bseq INTEGER NOT NULL\b", "seq INTEGER NOT NULL PRIMARY KEY", table, count=1)


def _rebuild(table: str, change: Callable[[str], str]) -> None:
    """SQLite: make ``table`` again from its own ``CREATE TABLE`` as ``change`` rewrites it, with its rows, indexes
    and triggers (as ``0012``'s: a frozen copy). Its triggers go before the old table is dropped (the drop deletes
    its rows first, which would fire them)."""
    bind = op.get_bind()
    (sql,) = bind.exec_driver_sql("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", (table,)).one()
    kept = bind.exec_driver_sql(
        "SELECT type, name, sql FROM sqlite_schema WHERE tbl_name = ? AND type IN ('index', 'trigger')"
        " AND sql IS NOT NULL ORDER BY type, name",
        (table,),
    ).all()
    for kind, name, _ in kept:
        if kind == "trigger":
            op.execute(f"DROP TRIGGER {name}")
    rebuilt = re.sub(rf'^CREATE TABLE\s+"?{table}"?', f"CREATE TABLE {table}_rebuilt", change(sql.strip()))
    op.execute(re.sub(rf'REFERENCES\s+"?{table}"?\s*\(', f"REFERENCES {table}_rebuilt (", rebuilt))
    columns = ", ".join(row[1] for row in bind.exec_driver_sql(f"PRAGMA table_info({table})"))
    op.execute(f"INSERT INTO {table}_rebuilt ({columns}) SELECT {columns} FROM {table}")
    op.execute(f"DROP TABLE {table}")
    op.execute(f"ALTER TABLE {table}_rebuilt RENAME TO {table}")
    for _, _, statement in kept:
        op.execute(statement)


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"
