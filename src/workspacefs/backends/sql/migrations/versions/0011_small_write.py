"""PostgreSQL: ``wsfs_write_small``, a whole small write as one statement (one round trip, one transaction).

A small write was two pipelined batches (store the content and lock the rows; point the file at it, journal,
commit): five statements, two round trips, and psycopg's pipeline bookkeeping on each, which cost more than
the server's work. This function does the same steps, in the same order of locks, inside the one autocommit
transaction of its call: lock the target (and, for a new file, the parent against its delete), refuse what
the checks refuse (nothing is written then), store the content inline, insert or update the file's row and write its
journal row; with a quota's limits, refuse (``division_by_zero``, as the other writes' check in their transaction)
when the usage row after the write passes a limit the write grew toward. The caller tells the errors apart from the
rows returned, with the same checks as before; a unique violation (a concurrent writer created the file) rolls the
whole call back, as it did the transaction. SQLite runs the steps from Python as before (its statements cost no
round trip): nothing changes there.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

POSTGRES_FUNCTION = """
CREATE FUNCTION wsfs_write_small(
    p_session text, p_path text, p_parent text, p_name text, p_blob text, p_size bigint, p_data bytea,
    p_now timestamptz, p_create boolean, p_must_exist boolean, p_expect text, p_read_only boolean,
    p_journal boolean, p_op_key text, p_operation text, p_actor_name text, p_actor_session text,
    p_actor_call text, p_actor_via text, p_undoes bigint, p_detail text, p_max_bytes bigint, p_max_files bigint,
    OUT o_written boolean, OUT o_parent_dir boolean, OUT o_directory boolean, OUT o_readonly boolean,
    OUT o_blob text, OUT o_chunks text[])
LANGUAGE plpgsql AS $$
DECLARE
    t_size bigint;
    t_bytes bigint;
    t_files bigint;
BEGIN
    o_written := false;
    SELECT f.is_directory, f.is_readonly, f.blob_id, f.size_bytes INTO o_directory, o_readonly, o_blob, t_size
        FROM wsfs_files f WHERE f.session_id = p_session AND f.path = p_path FOR UPDATE;
    IF FOUND THEN  -- its parent is a directory that cannot go while this row is locked (its delete cascades here)
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
    -- touching an existing blob row locks it: a concurrent collection of it waits, then fails (and keeps it)
    INSERT INTO wsfs_blobs (id, size, chunk_count, data) VALUES (p_blob, p_size, 0, p_data)
        ON CONFLICT (id) DO UPDATE SET size = excluded.size;
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
    IF p_journal THEN
        INSERT INTO wsfs_journal (session_id, op_key, at, operation, actor_name, actor_session, actor_call,
                                  actor_via, path, from_path, before_id, after_id, size_before, size_after,
                                  undoes, detail)
            VALUES (p_session, p_op_key, p_now, p_operation, p_actor_name, p_actor_session, p_actor_call,
                    p_actor_via, p_path, NULL, o_blob, p_blob, coalesce(t_size, 0), p_size, p_undoes, p_detail);
    END IF;
    -- a quota: the usage row after this write (its triggers ran; a concurrent writer's update of the row made
    -- this one wait for its commit), against each limit this write grew toward
    IF p_max_bytes IS NOT NULL OR p_max_files IS NOT NULL THEN
        SELECT u.bytes, u.files INTO t_bytes, t_files FROM wsfs_session_usage u WHERE u.session_id = p_session;
        IF (p_max_bytes IS NOT NULL AND p_size > coalesce(t_size, 0) AND t_bytes > p_max_bytes)
                OR (p_max_files IS NOT NULL AND o_directory IS NULL AND t_files > p_max_files) THEN
            RAISE EXCEPTION 'workspace quota exceeded' USING ERRCODE = 'division_by_zero';
        END IF;
    END IF;
    o_written := true;
END $$
"""


def upgrade() -> None:
    """Create the function (PostgreSQL only)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_FUNCTION)


def downgrade() -> None:
    """Drop it: small writes go back to two batches."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS wsfs_write_small")
