"""The SQL text of the hot paths (run by :mod:`._driver`), written once with ``?`` placeholders.

Each read of a small file is one statement of three columns (content in chunks takes a second). A small write on
PostgreSQL is one statement too, a call of ``wsfs_write_small`` (migrations ``0011``, ``0012``: it also keeps the
usage, versions, grep queue and notification its triggers kept); on SQLite, one transaction that locks the database,
stores the content, checks the rows, points the file at it and journals it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "CHILDREN",
    "CHUNK",
    "CHUNK_LIST",
    "DELETE_BLOB",
    "DELETE_BLOBS",
    "DELETE_CHUNKS",
    "HOLD_CHUNK",
    "INSERT_FILE",
    "INSERT_JOURNAL",
    "INSERT_JOURNAL_FLAGGED",
    "JOURNAL_SPAN",
    "NEXT_SEQ",
    "PUT_CHUNK",
    "PUT_INLINE",
    "QUOTA_GUARD",
    "READ",
    "READ_CONTENT",
    "READ_ROW",
    "ROW",
    "ROWS_FOR_WRITE",
    "UPDATE_FILE",
    "WRITE_SMALL",
    "Checked",
    "Statements",
    "release_statements",
]

ROW = (
    "SELECT f.path, f.is_directory, f.is_readonly, f.blob_id, f.size_bytes, f.created_at, f.updated_at"
    " FROM wsfs_files f WHERE f.session_id = ? AND f.path = ?"
)
"""One row: path, is_directory, is_readonly, blob_id, size_bytes, created_at, updated_at."""

CHILDREN = (
    "SELECT path, is_directory, is_readonly, blob_id, size_bytes, created_at, updated_at, name FROM wsfs_files"
    " WHERE session_id = ? AND path = ?"
    " UNION ALL"
    " SELECT path, is_directory, is_readonly, blob_id, size_bytes, created_at, updated_at, name FROM wsfs_files"
    " WHERE session_id = ? AND parent = ? ORDER BY 8"
)
"""A directory's own row and its children's, in one statement (the own row tells listing errors apart)."""

READ_ROW = (
    "SELECT f.path, f.is_directory, f.is_readonly, f.blob_id, f.size_bytes, f.created_at, f.updated_at, b.data"
    " FROM wsfs_files f LEFT JOIN wsfs_blobs b ON b.id = f.blob_id WHERE f.session_id = ? AND f.path = ?"
)
"""A file's row and its inline content (``NULL`` for content in chunks): what reading a small file needs, without
:data:`READ`'s joins to the chunk tables (which cost a quarter of a small read on PostgreSQL although they find
nothing for inline content)."""

READ_CONTENT = (
    "SELECT f.is_directory, f.size_bytes, b.data"
    " FROM wsfs_files f LEFT JOIN wsfs_blobs b ON b.id = f.blob_id WHERE f.session_id = ? AND f.path = ?"
)
"""What reading a whole small file needs: is it a directory, its size, its inline content (``NULL`` for content in
chunks). :data:`READ_ROW` without the five columns a read does not use (its path, flag, content id and times): on
PostgreSQL about 2 µs less server time and 3 µs less client time per read (fewer values to decode, the timestamps
most)."""

READ = (
    "SELECT f.path, f.is_directory, f.is_readonly, f.blob_id, f.size_bytes, f.created_at, f.updated_at,"
    " b.data, c.data, bc.chunk_hash, c.stored, c.size FROM wsfs_files f"
    " LEFT JOIN wsfs_blobs b ON b.id = f.blob_id"
    " LEFT JOIN wsfs_blob_chunks bc ON bc.blob_id = f.blob_id AND b.data IS NULL AND f.size_bytes <= ?"
    " LEFT JOIN wsfs_chunks c ON c.hash = bc.chunk_hash"
    " WHERE f.session_id = ? AND f.path = ? ORDER BY bc.seq"
)
"""A file's row and, when it is at most the given size, its content (inline, or its chunks in order, each with
its hash, where it is stored and its size: a chunk in the content store has empty ``data``; a chunk whose row is
gone has its hash and ``NULL`` size, so the read fails rather than leave it out)."""

ROWS_FOR_WRITE = (  # two lookups by key (an IN list or OR may be planned as a scan); the target's chunks as text
    "SELECT path, is_directory, is_readonly, blob_id, NULL, size_bytes FROM wsfs_files"
    " WHERE session_id = ? AND path = ?"
    " UNION ALL"
    " SELECT f.path, f.is_directory, f.is_readonly, f.blob_id,"
    " (SELECT group_concat(chunk_hash, ',') FROM wsfs_blob_chunks WHERE blob_id = f.blob_id), f.size_bytes"
    " FROM wsfs_files f WHERE f.session_id = ? AND f.path = ?"
)
"""SQLite: the parent's and the target's rows (path, is_directory, is_readonly, blob_id, chunks, size_bytes); the
chunks of the target's content as comma-separated hashes, NULL for inline content."""

WRITE_SMALL = (
    "SELECT * FROM wsfs_write_small("
    "?::text, ?::text, ?::text, ?::text, ?::text, ?::bigint, ?::bytea, ?::timestamptz,"  # the file and its content
    " ?::boolean, ?::boolean, ?::text, ?::boolean,"  # create, must exist, the expected blob, the read-only flag
    " ?::boolean, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::bigint, ?::text,"  # the journal tag
    " ?::bigint, ?::bigint)"  # the quota's byte and file limits (NULL: none)
)
"""PostgreSQL's whole small write (see migration ``0011``): ``(written, parent is a directory, the target's
is_directory, is_readonly and blob_id, the chunks to collect)``; nothing is written when it is refused. Past a
quota limit the write grew toward it raises ``division_by_zero`` (as ``QUOTA_GUARD`` does), all rolled back."""

CHUNK_LIST = (
    "SELECT bc.chunk_hash FROM wsfs_files f JOIN wsfs_blob_chunks bc ON bc.blob_id = f.blob_id"
    " WHERE f.session_id = ? AND f.path = ? ORDER BY bc.seq"
)
"""The file's chunks in order (a streaming read takes them with the row, in one snapshot)."""

CHUNK = "SELECT data, stored, size FROM wsfs_chunks WHERE hash = ?"
"""One chunk: its bytes, or where they are (``stored``) and how many."""

PUT_INLINE = {
    "sqlite": "INSERT INTO wsfs_blobs (id, size, chunk_count, data) VALUES (?, ?, 0, ?) ON CONFLICT (id) DO NOTHING",
    # touching an existing row locks it: a concurrent collection of it waits, then fails (and keeps it)
    "postgresql": (
        "INSERT INTO wsfs_blobs (id, size, chunk_count, data) VALUES (?, ?, 0, ?)"
        " ON CONFLICT (id) DO UPDATE SET size = excluded.size"
    ),
}
"""Store content of at most one chunk in its blob row (no chunk rows, no chunk list)."""

PUT_CHUNK = {
    "sqlite": (
        "INSERT INTO wsfs_chunks (hash, size, data, touched_at) VALUES (?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING"
    ),
    "postgresql": (  # as PUT_INLINE: an existing chunk is touched, so it is locked against collection
        "INSERT INTO wsfs_chunks (hash, size, data, touched_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (hash) DO UPDATE SET touched_at = excluded.touched_at"
    ),
}
"""Store one chunk unless an identical one is stored."""

HOLD_CHUNK = "INSERT INTO wsfs_uploads (upload_id, seq, chunk_hash, created_at) VALUES (?, ?, ?, ?)"
"""An unfinished upload's hold on a chunk it stored (against collection, until the write commits)."""

INSERT_FILE = (
    "INSERT INTO wsfs_files (session_id, path, parent, name, is_directory, is_readonly, blob_id, size_bytes,"
    " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPDATE_FILE = (
    "UPDATE wsfs_files SET blob_id = ?, size_bytes = ?, updated_at = ?, is_readonly = COALESCE(?, is_readonly)"
    " WHERE session_id = ? AND path = ?"
)

QUOTA_GUARD = {
    "sqlite": "SELECT bytes, files, (bytes > ? OR files > ?) FROM wsfs_session_usage WHERE session_id = ?",
    # travels in the last batch with the COMMIT: past a limit it fails (the divisor depends on the row, so the
    # planner cannot fold it), the COMMIT is skipped and the write rolls back, without a round trip to read first
    "postgresql": (
        "SELECT bytes, files, 1 / (CASE WHEN bytes > ? OR files > ? THEN 0 ELSE 1 END)"
        " FROM wsfs_session_usage WHERE session_id = ?"
    ),
}
"""A quota'd write's check in its own transaction, after its statements: the session's usage row against the
limits the write grew toward (``NULL`` for a limit not checked). SQLite answers whether it is over; PostgreSQL
raises ``division_by_zero`` when it is."""

DELETE_BLOB = (
    "DELETE FROM wsfs_blobs WHERE id = ?"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_files WHERE blob_id = ?)"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_snapshot_entries WHERE blob_id = ?)"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_journal WHERE before_id = ?)"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_file_versions WHERE blob_id = ?)"
)
"""Delete a blob nothing refers to — no file, snapshot, journal entry an undo may need or version a snapshot
may restore (its chunk list cascades); the check and the delete are one statement."""

DELETE_BLOBS = (
    "DELETE FROM wsfs_blobs WHERE id IN ({marks})"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_files WHERE blob_id = wsfs_blobs.id)"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_snapshot_entries WHERE blob_id = wsfs_blobs.id)"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_journal WHERE before_id = wsfs_blobs.id)"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_file_versions WHERE blob_id = wsfs_blobs.id)"
)
""":data:`DELETE_BLOB` for many blobs in one statement (retention drops hundreds at once: a statement each cost
more than the writes they followed)."""

NEXT_SEQ = (
    "max(coalesce((SELECT max(seq) FROM wsfs_journal WHERE session_id = ?1), 0),"
    " coalesce((SELECT seq FROM wsfs_journal_floor WHERE session_id = ?1), 0),"
    " coalesce((SELECT seq FROM wsfs_journal_floor WHERE session_id = ''), 0)) + 1"
)
"""SQLite (migration ``0013``): the next entry number of session ``?1``, above its rows, its floor and the numbers
given before ``0013`` (three seeks; an ``IN`` list of the two floors cost 2 µs more)."""

INSERT_JOURNAL = {
    "sqlite": "".join(
        (
            "INSERT INTO wsfs_journal (seq, session_id, op_key, at, operation, actor_name, actor_session, actor_call,",
            " actor_via, path, from_path, before_id, after_id, size_before, size_after, undoes, detail) VALUES (",
            NEXT_SEQ,
            ", ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )
    ),
    "postgresql": (
        "INSERT INTO wsfs_journal (session_id, op_key, at, operation, actor_name, actor_session, actor_call,"
        " actor_via, path, from_path, before_id, after_id, size_before, size_after, undoes, detail)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ),
}
"""One journal row, in the change's own transaction: SQLite numbers it in its session (the session is ``?1``),
PostgreSQL's ``BIGSERIAL`` numbers it."""

INSERT_JOURNAL_FLAGGED = "".join(
    (
        "INSERT INTO wsfs_journal (seq, session_id, op_key, at, operation, actor_name, actor_session, actor_call,",
        " actor_via, path, from_path, before_id, after_id, size_before, size_after, undoes, detail, read_only_before,",
        " read_only_after) VALUES (",
        NEXT_SEQ,
        ", ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
    )
)
"""SQLite: :data:`INSERT_JOURNAL` with the read-only flags, run once per row (each numbered after the one before)."""

JOURNAL_SPAN = (
    "SELECT (SELECT max(seq) FROM wsfs_journal WHERE session_id = ?),"
    " (SELECT min(seq) FROM wsfs_journal WHERE session_id = ?)"
)
"""A session's newest and oldest entry numbers: when they spread over fewer than the rows retention keeps, it has
nothing to drop. Two seeks (``max`` and ``min`` in one ``SELECT`` would walk the session's rows)."""

DELETE_CHUNKS = (
    "DELETE FROM wsfs_chunks WHERE hash IN ({marks})"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_blob_chunks WHERE chunk_hash = wsfs_chunks.hash)"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_uploads WHERE chunk_hash = wsfs_chunks.hash)"
)
"""Delete the listed chunks that no blob and no upload in progress uses."""

_BATCH = 500


def release_statements(blob_ids: Sequence[str], chunk_hashes: Sequence[str]) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that collect ``blob_ids`` if unreferenced, then whichever of their chunks nothing uses."""
    statements: list[tuple[str, tuple[Any, ...]]] = []
    if len(blob_ids) == 1:
        statements.append((DELETE_BLOB, (blob_ids[0],) * 5))
    for start in range(0, len(blob_ids) if len(blob_ids) > 1 else 0, _BATCH):
        some = tuple(blob_ids[start : start + _BATCH])
        statements.append((DELETE_BLOBS.format(marks=", ".join("?" * len(some))), some))
    wanted = sorted(set(chunk_hashes))
    for start in range(0, len(wanted), _BATCH):  # bounded IN lists
        batch = tuple(wanted[start : start + _BATCH])
        statements.append((DELETE_CHUNKS.format(marks=", ".join("?" * len(batch))), batch))
    return statements


class Checked(NamedTuple):
    """A row as the write checks see it."""

    path: str
    is_directory: bool
    is_readonly: bool
    blob_id: str | None


@dataclass(frozen=True, slots=True)
class Statements:
    """The hot statements in one database's dialect and placeholder style, built once per store (a
    filesystem is made per request in the service: it must not rebuild them)."""

    row: str
    children: str
    read: str
    read_content: str
    read_row: str
    rows_for_write: str
    chunk_list: str
    chunk: str
    put_inline: str
    put_chunk: str
    hold_chunk: str
    insert_file: str
    update_file: str
    insert_journal: str
    journal_span: str
    write_small: str
    """PostgreSQL only (SQLite: empty)."""
    quota_guard: str

    @classmethod
    def build(cls, dialect: str, placeholders: Callable[[str], str]) -> Statements:
        """The statements for ``dialect``, with ``?`` turned into the driver's style by ``placeholders``."""
        return cls(
            row=placeholders(ROW),
            children=placeholders(CHILDREN),
            read=placeholders(READ),
            read_content=placeholders(READ_CONTENT),
            read_row=placeholders(READ_ROW),
            rows_for_write=placeholders(ROWS_FOR_WRITE),
            chunk_list=placeholders(CHUNK_LIST),
            chunk=placeholders(CHUNK),
            put_inline=placeholders(PUT_INLINE[dialect]),
            put_chunk=placeholders(PUT_CHUNK[dialect]),
            hold_chunk=placeholders(HOLD_CHUNK),
            insert_file=placeholders(INSERT_FILE),
            update_file=placeholders(UPDATE_FILE),
            insert_journal=placeholders(INSERT_JOURNAL[dialect]),
            journal_span=placeholders(JOURNAL_SPAN),
            write_small=placeholders(WRITE_SMALL) if dialect == "postgresql" else "",
            quota_guard=placeholders(QUOTA_GUARD[dialect]),
        )
