"""The SQL backend's tables (SQLAlchemy Core), the same on SQLite and PostgreSQL.

Content is deduplicated at two levels: ``chunks`` (at most 256 KiB each, keyed by their SHA-256) and
``blobs`` (a file's content: an ordered list of chunks, keyed by a hash of that list and the size).
Files, snapshot entries and sessions only point at blobs, so copying a file, snapshotting a session
or holding the same content in many sessions copies no bytes.

Paths are stored normalised and relative (``""`` is the root row every session has), compared
bytewise (``COLLATE "C"`` on PostgreSQL) so that ranges select subtrees without ``LIKE``.

The grep index (``wsfs_grep_keys``, the ``wsfs_grep_text`` FTS5 or ``pg_trgm`` table and the trigger that
fills the keys) is made by migration ``0004`` and used only through :mod:`._grep_index`.

Only storage lives here. The workspace service keeps its own tables (tokens, which agent owns a session)
under ``workspacefs.server``; databases made before that split still carry a ``wsfs_sessions.agent_id``
column, which this backend ignores and the service's first migration reads once.
"""

from __future__ import annotations

import sqlalchemy as sa

from workspacefs.streams import CONTENT_CHUNK_SIZE

__all__ = [
    "CHUNK_SIZE",
    "Path",
    "blob_chunks",
    "blobs",
    "chunks",
    "file_versions",
    "journal",
    "metadata",
    "session_files",
    "session_usage",
    "sessions",
    "snapshot_entries",
    "snapshots",
    "uploads",
]

CHUNK_SIZE = CONTENT_CHUNK_SIZE
"""Largest chunk row; files are cut at fixed offsets, so equal content always gives equal chunks, and a
blob's id (a hash of its chunks' hashes) is exactly the content id every backend computes."""

Path = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
"""Bytewise-ordered text: ``'a/' <= p < 'a0'`` is exactly the subtree of ``a``."""
Stamp = sa.DateTime(timezone=True)

metadata = sa.MetaData()

sessions = sa.Table(
    "wsfs_sessions",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("created_at", Stamp, nullable=False),
    sa.Column("updated_at", Stamp, nullable=False),
    sa.Column("family", sa.Text, nullable=True),
    sa.Column("forked_from", sa.Text, nullable=True),
    sa.Index("wsfs_sessions_family", "family"),
)
"""``family`` (migration ``0007``) is the first session of a line of forks (``NULL``: the session's own id), and
``forked_from`` the session a fork was made from; sessions of one family share their snapshots."""

chunks = sa.Table(
    "wsfs_chunks",
    metadata,
    sa.Column("hash", sa.Text, primary_key=True),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.Column("touched_at", Stamp, nullable=False),
    sa.Column("stored", sa.Text, nullable=False, server_default="sql"),
)
"""``stored`` says where a chunk's bytes are (migration ``0005``): ``'sql'`` in ``data``, or ``'object'`` in the
store's content store (an object store; ``data`` is then empty, see :mod:`._content`)."""

blobs = sa.Table(
    "wsfs_blobs",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("chunk_count", sa.Integer, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=True),
)
"""``data`` holds content of at most one chunk written whole (``chunk_count`` 0): a small file is one row
here, not a chunk row plus a chunk list. Larger or streamed content is listed in ``blob_chunks``."""

uploads = sa.Table(
    "wsfs_uploads",
    metadata,
    sa.Column("upload_id", sa.Text, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("chunk_hash", sa.Text, sa.ForeignKey("wsfs_chunks.hash"), nullable=False, index=True),
    sa.Column("created_at", Stamp, nullable=False),
)
"""Chunks of a streaming write not committed yet: they hold the chunks against collection."""

blob_chunks = sa.Table(
    "wsfs_blob_chunks",
    metadata,
    sa.Column("blob_id", sa.Text, sa.ForeignKey("wsfs_blobs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("chunk_hash", sa.Text, sa.ForeignKey("wsfs_chunks.hash"), nullable=False, index=True),
)

session_files = sa.Table(
    "wsfs_files",
    metadata,
    sa.Column("session_id", sa.Text, sa.ForeignKey("wsfs_sessions.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("path", Path, primary_key=True),
    sa.Column("parent", Path, nullable=True),
    sa.Column("name", Path, nullable=False),
    sa.Column("is_directory", sa.Boolean, nullable=False),
    sa.Column("is_readonly", sa.Boolean, nullable=False, default=False),
    sa.Column("blob_id", sa.Text, sa.ForeignKey("wsfs_blobs.id"), nullable=True, index=True),
    sa.Column("size_bytes", sa.BigInteger, nullable=False, default=0),
    sa.Column("created_at", Stamp, nullable=False),
    sa.Column("updated_at", Stamp, nullable=False),
    sa.ForeignKeyConstraint(["session_id", "parent"], ["wsfs_files.session_id", "wsfs_files.path"], ondelete="CASCADE"),
    sa.CheckConstraint("path NOT LIKE '/%' AND path NOT LIKE '%//%'", name="wsfs_files_path_normalised"),
    sa.CheckConstraint("NOT is_directory OR blob_id IS NULL", name="wsfs_files_directory_no_content"),
    sa.Index("wsfs_files_parent", "session_id", "parent", "name"),
    sqlite_with_rowid=False,
)
"""On SQLite without rowid (migration ``0012``): a row lives in its key's B-tree, one B-tree per new file fewer."""

snapshots = sa.Table(
    "wsfs_snapshots",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, sa.ForeignKey("wsfs_sessions.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("tag", sa.Text, nullable=True),
    sa.Column("parent_id", sa.Text, nullable=True),
    sa.Column("file_count", sa.Integer, nullable=False),
    sa.Column("total_bytes", sa.BigInteger, nullable=False),
    sa.Column("created_at", Stamp, nullable=False),
    sa.Column("mark", sa.BigInteger, nullable=True),
)
"""``mark`` (migration ``0008``): the session's position in ``wsfs_file_versions`` when the snapshot was taken;
the snapshot is the session's rows with every change after the mark undone (see :mod:`._versions`). ``NULL``:
the snapshot's rows are written out in ``wsfs_snapshot_entries`` (merge results, snapshots taken before 0008)."""

snapshot_entries = sa.Table(
    "wsfs_snapshot_entries",
    metadata,
    sa.Column("snapshot_id", sa.Text, sa.ForeignKey("wsfs_snapshots.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("path", Path, primary_key=True),
    sa.Column("parent", Path, nullable=True),
    sa.Column("name", Path, nullable=False),
    sa.Column("is_directory", sa.Boolean, nullable=False),
    sa.Column("is_readonly", sa.Boolean, nullable=False),
    sa.Column("blob_id", sa.Text, sa.ForeignKey("wsfs_blobs.id"), nullable=True, index=True),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("created_at", Stamp, nullable=False),
    sa.Column("updated_at", Stamp, nullable=False),
)

file_versions = sa.Table(
    "wsfs_file_versions",
    metadata,
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("path", Path, nullable=False),
    sa.Column("existed", sa.Boolean, nullable=False),
    sa.Column("parent", Path, nullable=True),
    sa.Column("name", Path, nullable=True),
    sa.Column("is_directory", sa.Boolean, nullable=True),
    sa.Column("is_readonly", sa.Boolean, nullable=True),
    sa.Column("blob_id", sa.Text, nullable=True),
    sa.Column("size_bytes", sa.BigInteger, nullable=True),
    sa.Column("created_at", Stamp, nullable=True),
    sa.Column("updated_at", Stamp, nullable=True),
    sa.Index("wsfs_file_versions_session", "session_id", "seq"),
    sa.Index("wsfs_file_versions_path", "session_id", "path", "seq"),
    sa.Index(
        "wsfs_file_versions_blob",
        "blob_id",
        sqlite_where=sa.text("blob_id IS NOT NULL"),
        postgresql_where=sa.text("blob_id IS NOT NULL"),
    ),
    sqlite_autoincrement=True,
)
"""The rows ``wsfs_files`` held before a change (migration ``0008``), written by triggers in the change's own
statement while the session has a snapshot with a mark, for each path's first change after the newest mark:
``existed`` false means the path had no row (the change created it). A snapshot with mark ``m`` is the session's
rows with, for every path that has versions after ``m``, the oldest of those versions instead. No foreign key: a
session's versions are deleted with its snapshots."""

session_usage = sa.Table(
    "wsfs_session_usage",
    metadata,
    sa.Column("session_id", sa.Text, sa.ForeignKey("wsfs_sessions.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("files", sa.BigInteger, nullable=False),
)
"""A session's bytes in files and file count (migration ``0009``): made when first asked for (by a quota), then
kept by triggers on ``wsfs_files`` in every changing statement, so a quota check reads one row."""

journal = sa.Table(
    "wsfs_journal",
    metadata,
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.Text, sa.ForeignKey("wsfs_sessions.id", ondelete="CASCADE"), nullable=False),
    sa.Column("op_key", sa.Text, nullable=True),
    sa.Column("at", Stamp, nullable=False),
    sa.Column("operation", sa.Text, nullable=False),
    sa.Column("actor_name", sa.Text, nullable=True),
    sa.Column("actor_session", sa.Text, nullable=True),
    sa.Column("actor_call", sa.Text, nullable=True),
    sa.Column("actor_via", sa.Text, nullable=True),
    sa.Column("path", Path, nullable=False),
    sa.Column("from_path", Path, nullable=True),
    sa.Column("before_id", sa.Text, nullable=True),
    sa.Column("after_id", sa.Text, nullable=True),
    sa.Column("size_before", sa.BigInteger, nullable=False),
    sa.Column("size_after", sa.BigInteger, nullable=False),
    sa.Column("undoes", sa.BigInteger, nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Column("read_only_before", sa.Boolean, nullable=True),
    sa.Column("read_only_after", sa.Boolean, nullable=True),
    sa.Index("wsfs_journal_session", "session_id", "seq"),
    sa.Index(
        "wsfs_journal_op",
        "op_key",
        sqlite_where=sa.text("op_key IS NOT NULL"),
        postgresql_where=sa.text("op_key IS NOT NULL"),
    ),
    sa.Index(
        "wsfs_journal_before",
        "before_id",
        sqlite_where=sa.text("before_id IS NOT NULL"),
        postgresql_where=sa.text("before_id IS NOT NULL"),
    ),
)
"""One row per path a change touched, written in the change's own transaction (migration ``0006``). The rows of
one operation share ``op_key`` and form one entry whose id is their lowest ``seq``; a one-row entry has no key.

An entry id's promise is per session: within one session id a ``seq`` is never given twice (not after retention or
a prune dropped the newest rows, nor after the session was deleted and made again) and grows in commit order; every
reader names entries of one session (``history(since=)``, ``undo(entry_id)``, SSE ``Last-Event-ID``). PostgreSQL
numbers rows with one ``BIGSERIAL`` for all sessions (unique across them too). SQLite (migration ``0013``) keys the
table by ``(session_id, seq)`` without rowid, so it is its own session index (one B-tree, one WAL page fewer per
journaled write): a row takes one more than the largest of its session's numbers, of its floor in
``wsfs_journal_floor`` (which a trigger raises when a session's newest row goes, kept after the session is deleted)
and of that table's ``''`` row (the numbers given before ``0013``) (:data:`~._hot.NEXT_SEQ`); two sessions may share
a number there. PostgreSQL keys it by ``(session_id, seq)`` too (migration ``0014``; numbers still from one
``BIGSERIAL``). The ``primary_key`` on ``seq`` and ``wsfs_journal_session`` declared here are ``0006``'s shape: this
table builds queries, the migrations make the schema.
``before_id``/``after_id`` hold a content id (a blob's id), ``'directory'`` or NULL; a blob named by ``before_id``
is kept (undo writes it back) until retention drops the row. ``read_only_before``/``read_only_after`` (migration
``0010``) hold the file's read-only flag where the change set it (NULL: left alone; a read-only file that went
has ``read_only_before`` true and ``read_only_after`` NULL). Its inserts notify
``wsfs_journal`` on PostgreSQL (a trigger), so every process serving the session can publish the change to its
watchers."""
