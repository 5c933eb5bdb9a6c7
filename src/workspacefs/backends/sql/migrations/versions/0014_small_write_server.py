"""PostgreSQL: less server work per small write: the row it locked is updated by address, and the journal is keyed
by ``(session_id, seq)`` (one index fewer per journal row).

``wsfs_write_small`` (``0011``, ``0012``): an overwrite locked the target row (``SELECT … FOR UPDATE``, first: the
checks read it) and then updated it ``WHERE session_id = … AND path = …``, a second descent of ``wsfs_files_pkey`` to
the row the call already held. Now the row's address (``ctid``) is read with the lock and the update names it (a TID
scan): no other transaction can update or delete a row this one has locked, so the address cannot change before the
update. Everything else is ``0012``'s function as it was (same rows, locks in the same order, checks, results and
errors; ``0013`` left it alone).

``wsfs_journal`` had a primary key on ``seq`` and the index ``wsfs_journal_session (session_id, seq)`` every journal
query walks: each journal row (every journaled change, a small write's one) was an insert into both. Its primary key
is now ``(session_id, seq)``, which is that index (as on SQLite since ``0013``). The promise an entry id keeps is per
session (``0013``), and the key keeps it; ``seq`` still comes from the one ``BIGSERIAL``, so numbers stay unique
across sessions too. Every statement on the journal names the session (``_journal.py``; a collection's
``before_id`` lookups use ``wsfs_journal_before``).

Revision ID: 0014
Revises: 0013
"""

# ruff: noqa: S608 - the SQL is built from constants of this file; no value is interpolated

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

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
    t_at tid;
    t_size bigint;
    t_bytes bigint;
    t_files bigint;
    t_new_blob boolean;
    t_seq bigint;
BEGIN
    o_written := false;
    SELECT f.session_id, f.path, f.parent, f.name, f.is_directory, f.is_readonly, f.blob_id, f.size_bytes,
            f.created_at, f.updated_at, f.ctid
        INTO t_old.session_id, t_old.path, t_old.parent, t_old.name, t_old.is_directory, t_old.is_readonly,
            t_old.blob_id, t_old.size_bytes, t_old.created_at, t_old.updated_at, t_at
        FROM wsfs_files f WHERE f.session_id = p_session AND f.path = p_path FOR UPDATE;
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
        -- the row this call locked, by its address: no other transaction can move it (update, delete) before
        -- this one ends, so no second descent of the primary key finds it again
        UPDATE wsfs_files SET blob_id = p_blob, size_bytes = p_size, updated_at = p_now,
                is_readonly = coalesce(p_read_only, is_readonly)
            WHERE ctid = t_at;
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


JOURNAL_KEYED_BY_SESSION = (
    "ALTER TABLE wsfs_journal DROP CONSTRAINT wsfs_journal_pkey",
    "DROP INDEX wsfs_journal_session",
    "ALTER TABLE wsfs_journal ADD CONSTRAINT wsfs_journal_pkey PRIMARY KEY (session_id, seq)",
)
"""PostgreSQL: the journal's key becomes its session index (one B-tree where there were two)."""

JOURNAL_KEYED_BY_SEQ = (
    "ALTER TABLE wsfs_journal DROP CONSTRAINT wsfs_journal_pkey",
    "ALTER TABLE wsfs_journal ADD CONSTRAINT wsfs_journal_pkey PRIMARY KEY (seq)",
    "CREATE INDEX wsfs_journal_session ON wsfs_journal (session_id, seq)",
)
"""PostgreSQL: back to ``0006``'s key and index (every ``seq`` came from the one sequence: unique already)."""


def upgrade() -> None:
    """PostgreSQL: replace the function (same signature, same results); key the journal by session. SQLite:
    nothing."""
    if _postgres():
        op.execute(POSTGRES_FUNCTION)
        for statement in JOURNAL_KEYED_BY_SESSION:
            op.execute(statement)


def downgrade() -> None:
    """PostgreSQL: ``0012``'s function again (``0013`` left it as it was), the journal keyed by ``seq``."""
    if _postgres():
        for statement in JOURNAL_KEYED_BY_SEQ:
            op.execute(statement)
        op.execute(_revision("0012_fewer_writes").POSTGRES_FUNCTION)


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
