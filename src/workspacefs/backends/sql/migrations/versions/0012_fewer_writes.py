"""Less work per small write: the one-call write keeps its own books (PostgreSQL), fewer B-trees (SQLite).

PostgreSQL: ``wsfs_write_small`` (migration ``0011``) now does itself, for the rows it writes, what four triggers
did after each of its statements: the session's usage (``0009``), the versions a snapshot by mark needs (``0008``),
the grep queue (``0004``) and the journal's notification (``0006``). Each of those triggers cost a PL/pgSQL call
and, for the statement-level ones, a pass over their transition tables; the function knows the one row and its
deltas already. While it writes it sets ``wsfs.accounted`` (a setting local to its transaction, reset before it
returns), and the triggers skip the statements run under it (their ``WHEN``). Every other statement (chunked and
streamed writes, copies, restores, forks, deletes, and any other client's SQL) still fires them as before.

Both: ``wsfs_journal_path`` goes. No statement used it: a path's history also matches ``from_path`` (the ``OR`` of
the two is served by ``wsfs_journal_session``, the index every journal query walks), and each journaled write paid
an insert into it (on SQLite a page, one of the eleven a new file's commit wrote to the WAL).

SQLite: ``wsfs_files`` becomes a ``WITHOUT ROWID`` table keyed by ``(session_id, path)``: the row lives in its
primary key's B-tree, so a new file writes one B-tree fewer (the rowid table beside the key's index), and a lookup
by path descends one B-tree instead of two. The table is rebuilt (its indexes and triggers made again as they were).

Revision ID: 0012
Revises: 0011
"""

# ruff: noqa: S608 - the SQL is built from constants of this file; no value is interpolated

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

ACCOUNTED = "current_setting('wsfs.accounted', true) IS DISTINCT FROM 'on'"
"""A trigger's condition: the statement is not one ``wsfs_write_small`` already accounted for."""

SESSION_LOCK = 0x77737673
"""The class of the per-session advisory lock the versions and usage triggers share (``0008``, ``0009``)."""

_LAST_MARK = "(SELECT max(s.mark) FROM wsfs_snapshots s WHERE s.session_id = p_session)"
_FIRST = (
    "NOT EXISTS (SELECT 1 FROM wsfs_file_versions v WHERE v.session_id = p_session AND v.path = p_path"
    f" AND v.seq > {_LAST_MARK})"
)
"""As ``0008``'s: no version of the path since the session's newest mark."""

POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION wsfs_write_small(
    p_session text, p_path text, p_parent text, p_name text, p_blob text, p_size bigint, p_data bytea,
    p_now timestamptz, p_create boolean, p_must_exist boolean, p_expect text, p_read_only boolean,
    p_journal boolean, p_op_key text, p_operation text, p_actor_name text, p_actor_session text,
    p_actor_call text, p_actor_via text, p_undoes bigint, p_detail text, p_max_bytes bigint, p_max_files bigint,
    OUT o_written boolean, OUT o_parent_dir boolean, OUT o_directory boolean, OUT o_readonly boolean,
    OUT o_blob text, OUT o_chunks text[])
LANGUAGE plpgsql AS $$
DECLARE
    t_old wsfs_files%ROWTYPE;
    t_size bigint;
    t_bytes bigint;
    t_files bigint;
    t_new_blob boolean;
    t_seq bigint;
BEGIN
    o_written := false;
    SELECT * INTO t_old FROM wsfs_files f WHERE f.session_id = p_session AND f.path = p_path FOR UPDATE;
    IF FOUND THEN  -- its parent is a directory that cannot go while this row is locked (its delete cascades here)
        o_directory := t_old.is_directory;
        o_readonly := t_old.is_readonly;
        o_blob := t_old.blob_id;
        t_size := t_old.size_bytes;
        o_parent_dir := true;
        IF o_directory OR p_create OR (o_readonly AND p_read_only IS DISTINCT FROM false)
                OR (p_expect IS NOT NULL AND p_expect IS DISTINCT FROM o_blob) THEN
            RETURN;  -- refused: the caller's checks say why
        END IF;
    ELSE
        -- a new file: its parent must be a directory and stay one (the lock the row's foreign key check takes
        -- anyway; a row's kind is never changed in place)
        SELECT f.is_directory INTO o_parent_dir FROM wsfs_files f
            WHERE f.session_id = p_session AND f.path = p_parent FOR KEY SHARE;
        IF o_parent_dir IS NOT TRUE OR p_must_exist THEN
            RETURN;
        END IF;
    END IF;
    -- from here the triggers of usage, versions, the grep queue and the journal's notification skip this call's
    -- statements: it does their work below, for the one row it knows (reset before it returns)
    PERFORM set_config('wsfs.accounted', 'on', true);
    -- touching an existing blob row locks it: a concurrent collection of it waits, then fails (and keeps it).
    -- Only a blob this call inserts is queued for the grep index (as the trigger on INSERT did)
    LOOP
        INSERT INTO wsfs_blobs (id, size, chunk_count, data) VALUES (p_blob, p_size, 0, p_data)
            ON CONFLICT (id) DO NOTHING RETURNING true INTO t_new_blob;
        EXIT WHEN FOUND;
        UPDATE wsfs_blobs SET size = p_size WHERE id = p_blob;
        EXIT WHEN FOUND;  -- else it was collected in between: insert it again
    END LOOP;
    IF o_directory IS NULL THEN  -- a new file (a concurrent creator makes this a unique violation)
        INSERT INTO wsfs_files (session_id, path, parent, name, is_directory, is_readonly, blob_id, size_bytes,
                                created_at, updated_at)
            VALUES (p_session, p_path, p_parent, p_name, false, coalesce(p_read_only, false), p_blob, p_size,
                    p_now, p_now);
    ELSE
        UPDATE wsfs_files SET blob_id = p_blob, size_bytes = p_size, updated_at = p_now,
                is_readonly = coalesce(p_read_only, is_readonly)
            WHERE session_id = p_session AND path = p_path;
        IF NOT p_journal AND o_blob IS DISTINCT FROM p_blob THEN  -- what the caller collects after
            o_chunks := ARRAY(SELECT bc.chunk_hash FROM wsfs_blob_chunks bc WHERE bc.blob_id = o_blob);
        END IF;
    END IF;
    -- the session's lock, shared, as the triggers took it: a snapshot (exclusive) either saw this change
    -- committed or its mark is below this change's version; a first count either saw it or finds the row
    PERFORM pg_advisory_xact_lock_shared({SESSION_LOCK}, hashtext(p_session));
    IF EXISTS (SELECT 1 FROM wsfs_snapshots WHERE session_id = p_session AND mark IS NOT NULL) THEN
        IF o_directory IS NULL THEN  -- the path had no row
            INSERT INTO wsfs_file_versions (session_id, path, existed)
                SELECT p_session, p_path, false WHERE {_FIRST};
        ELSE
            INSERT INTO wsfs_file_versions (session_id, path, existed, parent, name, is_directory, is_readonly,
                                            blob_id, size_bytes, created_at, updated_at)
                SELECT p_session, p_path, true, t_old.parent, t_old.name, t_old.is_directory, t_old.is_readonly,
                       t_old.blob_id, t_old.size_bytes, t_old.created_at, t_old.updated_at WHERE {_FIRST};
        END IF;
    END IF;
    IF p_size IS DISTINCT FROM t_size THEN  -- (a row only once a quota asked; adding nothing changes nothing)
        UPDATE wsfs_session_usage u SET bytes = u.bytes + p_size - coalesce(t_size, 0),
                files = u.files + (CASE WHEN o_directory IS NULL THEN 1 ELSE 0 END)
            WHERE u.session_id = p_session RETURNING u.bytes, u.files INTO t_bytes, t_files;
    END IF;
    IF t_new_blob AND p_size >= 3 AND p_size < 262144 THEN
        INSERT INTO wsfs_grep_queue (blob_id) VALUES (p_blob);
    END IF;
    IF p_journal THEN
        INSERT INTO wsfs_journal (session_id, op_key, at, operation, actor_name, actor_session, actor_call,
                                  actor_via, path, from_path, before_id, after_id, size_before, size_after,
                                  undoes, detail)
            VALUES (p_session, p_op_key, p_now, p_operation, p_actor_name, p_actor_session, p_actor_call,
                    p_actor_via, p_path, NULL, o_blob, p_blob, coalesce(t_size, 0), p_size, p_undoes, p_detail)
            RETURNING seq INTO t_seq;
        PERFORM pg_notify('wsfs_journal', p_session || ' ' || t_seq);
    END IF;
    PERFORM set_config('wsfs.accounted', 'off', true);
    -- a quota: the usage row after this write (a concurrent writer's update of the row made this one wait for its
    -- commit), against each limit this write grew toward
    IF (p_max_bytes IS NOT NULL AND p_size > coalesce(t_size, 0) AND t_bytes > p_max_bytes)
            OR (p_max_files IS NOT NULL AND o_directory IS NULL AND t_files > p_max_files) THEN
        RAISE EXCEPTION 'workspace quota exceeded' USING ERRCODE = 'division_by_zero';
    END IF;
    o_written := true;
END $$
"""

_USAGE = "wsfs_files_usage()"
_VERSION = "wsfs_files_version()"
POSTGRES_TRIGGERS = {
    # name: (table, timing and event, referencing, level, condition, function)
    "wsfs_blobs_grep": (
        "wsfs_blobs",
        "AFTER INSERT",
        "",
        "FOR EACH ROW",
        "NEW.size >= 3 AND NEW.size < 262144",
        "wsfs_grep_enqueue()",
    ),
    "wsfs_files_usage_insert": (
        "wsfs_files",
        "AFTER INSERT",
        "NEW TABLE AS new_rows",
        "FOR EACH STATEMENT",
        "",
        _USAGE,
    ),
    "wsfs_files_usage_update": (
        "wsfs_files",
        "AFTER UPDATE",
        "OLD TABLE AS old_rows NEW TABLE AS new_rows",
        "FOR EACH STATEMENT",
        "",
        _USAGE,
    ),
    "wsfs_files_version_insert": (
        "wsfs_files",
        "AFTER INSERT",
        "NEW TABLE AS new_rows",
        "FOR EACH STATEMENT",
        "",
        _VERSION,
    ),
    "wsfs_files_version_update": (
        "wsfs_files",
        "AFTER UPDATE",
        "OLD TABLE AS old_rows NEW TABLE AS new_rows",
        "FOR EACH STATEMENT",
        "",
        _VERSION,
    ),
    "wsfs_journal_notify": ("wsfs_journal", "AFTER INSERT", "", "FOR EACH ROW", "", "wsfs_journal_notify()"),
}
"""The triggers whose work the one-call write does itself (as ``0004``, ``0006``, ``0008`` and ``0009`` made them)."""


def _trigger(name: str, *, skipping: bool) -> str:
    table, event, referencing, level, condition, function = POSTGRES_TRIGGERS[name]
    conditions = [c for c in (condition, ACCOUNTED if skipping else "") if c]
    when = f" WHEN ({' AND '.join(conditions)})" if conditions else ""
    refers = f" REFERENCING {referencing}" if referencing else ""
    return f"CREATE TRIGGER {name} {event} ON {table}{refers} {level}{when} EXECUTE FUNCTION {function}"


def _retrigger(*, skipping: bool) -> None:
    for name, (table, *_) in POSTGRES_TRIGGERS.items():
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        op.execute(_trigger(name, skipping=skipping))


JOURNAL_FLOOR = (
    "CREATE TABLE wsfs_journal_floor (seq INTEGER NOT NULL)",
    # the newest row going (nothing above it stays): the next row would take its number again
    "CREATE TRIGGER wsfs_journal_floor_raise AFTER DELETE ON wsfs_journal"
    " WHEN OLD.seq > (SELECT seq FROM wsfs_journal_floor)"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_journal WHERE seq > OLD.seq)"
    " BEGIN UPDATE wsfs_journal_floor SET seq = OLD.seq; END",
    "CREATE TRIGGER wsfs_journal_above_floor AFTER INSERT ON wsfs_journal"
    " WHEN NEW.seq <= (SELECT seq FROM wsfs_journal_floor)"
    " BEGIN UPDATE wsfs_journal SET seq = (SELECT seq FROM wsfs_journal_floor) + 1 WHERE seq = NEW.seq; END",
)
"""SQLite: ``wsfs_journal`` numbers its rows as a plain ``INTEGER PRIMARY KEY`` (one more than the largest), not
``AUTOINCREMENT``, whose ``sqlite_sequence`` row was one more page in every journaled commit. What ``AUTOINCREMENT``
guaranteed is kept: a number is never given twice. It could be only after the newest rows went (a prune of them, a
deleted session); then their highest number is kept in ``wsfs_journal_floor``, and a row numbered at or below it
is moved above it. The hot path pays a read of that one-row table."""


def upgrade() -> None:
    """PostgreSQL: the function keeps its books, the triggers skip its statements. Both: drop the unused index.
    SQLite: ``wsfs_files`` without rowid, ``wsfs_journal`` without ``AUTOINCREMENT``."""
    op.drop_index("wsfs_journal_path", table_name="wsfs_journal")
    if _postgres():
        op.execute(POSTGRES_FUNCTION)
        _retrigger(skipping=True)
        return
    _rebuild("wsfs_files", lambda sql: _without_rowid(sql) + " WITHOUT ROWID")
    bind = op.get_bind()
    issued = bind.exec_driver_sql("SELECT seq FROM sqlite_sequence WHERE name = 'wsfs_journal'").scalar()
    _rebuild("wsfs_journal", lambda sql: re.sub(r"\s+AUTOINCREMENT\b", "", sql, flags=re.IGNORECASE))
    for statement in JOURNAL_FLOOR:
        op.execute(statement)
    op.execute(f"INSERT INTO wsfs_journal_floor (seq) VALUES ({int(issued or 0)})")


def downgrade() -> None:
    """Back to ``0011``: its function and triggers, the index (built again), a rowid ``wsfs_files``, an
    ``AUTOINCREMENT`` journal that goes on above every number given."""
    if _postgres():
        _retrigger(skipping=False)
        before = _revision("0011_small_write").POSTGRES_FUNCTION
        op.execute(before.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"))
    else:
        _rebuild("wsfs_files", _without_rowid)
        bind = op.get_bind()
        floor = int(bind.exec_driver_sql("SELECT seq FROM wsfs_journal_floor").scalar() or 0)
        op.execute("DROP TRIGGER wsfs_journal_floor_raise")
        op.execute("DROP TRIGGER wsfs_journal_above_floor")
        op.execute("DROP TABLE wsfs_journal_floor")
        _rebuild("wsfs_journal", lambda sql: re.sub(r"(\bPRIMARY KEY)\b", r"\1 AUTOINCREMENT", sql, count=1))
        issued = f"(SELECT max(coalesce(max(seq), 0), {floor}) FROM wsfs_journal)"
        op.execute("DELETE FROM sqlite_sequence WHERE name = 'wsfs_journal'")
        op.execute(f"INSERT INTO sqlite_sequence (name, seq) VALUES ('wsfs_journal', {issued})")
    op.create_index("wsfs_journal_path", "wsfs_journal", ["session_id", "path"])


def _without_rowid(sql: str) -> str:
    return re.sub(r"\s*WITHOUT ROWID\s*$", "", sql.strip(), flags=re.IGNORECASE)


def _rebuild(table: str, change: Callable[[str], str]) -> None:
    """SQLite: make ``table`` again from its own ``CREATE TABLE`` as ``change`` rewrites it, with its rows, indexes
    and triggers.

    The new table refers to itself by its own name until it is renamed (the rename rewrites the reference): a key
    naming the old table would make dropping it cascade into the new one. With foreign keys on, dropping the old
    table deletes its rows first, and the deletes a key of it cascades fire triggers: its triggers (usage,
    versions) go before it. No other table refers to ``wsfs_files`` or ``wsfs_journal``."""
    bind = op.get_bind()
    (sql,) = bind.exec_driver_sql("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", (table,)).one()
    kept = bind.exec_driver_sql(
        "SELECT type, name, sql FROM sqlite_schema WHERE tbl_name = ? AND type IN ('index', 'trigger')"
        " AND sql IS NOT NULL ORDER BY type, name",
        (table,),
    ).all()
    for kind, name, _ in kept:  # before the drop: its implicit delete cascades, and a cascade fires triggers
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


def _revision(name: str) -> ModuleType:
    """An earlier revision's module (for the SQL its downgrade puts back)."""
    spec = importlib.util.spec_from_file_location(f"wsfs_revision_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"
