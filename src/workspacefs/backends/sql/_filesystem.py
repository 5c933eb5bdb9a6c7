"""``SqlFilesystem``: one session's files in SQLite (the embedded default) or PostgreSQL.

Every operation is one transaction scoped by the session id. Directories are rows; each row points
at its parent row (a foreign key that cascades), so a recursive delete is one statement and no file
can be orphaned. Content lives in the store's deduplicated chunks: copying a file or taking a
snapshot writes metadata only. Streaming writes upload 256 KiB chunks as they come and commit the
file in one transaction at the end; streaming reads hold a read transaction, so a reader keeps
seeing the content it opened even if the file is overwritten and collected meanwhile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import tempfile
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from workspacefs import errors
from workspacefs.backends._core import too_big
from workspacefs.backends._history import Scope, operation_key
from workspacefs.backends._merging import Written
from workspacefs.backends._quota import over_quota
from workspacefs.backends.base import ANY_VERSION, BaseFilesystem, Fingerprint
from workspacefs.backends.sql import _grep_index as grep_index
from workspacefs.backends.sql import _versions as versions
from workspacefs.backends.sql._content import check_chunk_list, check_piece, missing_chunk
from workspacefs.backends.sql._forks import (
    ENTRY_COLUMNS,
    capture_merged,
    copy_session,
    entry_at,
    family_sessions,
    same_family,
)
from workspacefs.backends.sql._hot import Checked
from workspacefs.backends.sql._journal import (
    JournalTag,
    SqlJournal,
    insert_changes,
    insert_rows,
    tagged,
    tree_rows,
)
from workspacefs.backends.sql._lock_order import lock_paths, lock_session, lock_tree
from workspacefs.backends.sql._reach import file_row_taken, foreign_key_failed, raised_in_database, refused
from workspacefs.backends.sql._schema import (
    CHUNK_SIZE,
    file_versions,
    session_files,
    session_usage,
    snapshot_entries,
    snapshots,
)
from workspacefs.backends.sql._store import SqlStore, inline_blob_id
from workspacefs.backends.sql._streams import NO_BASE, AppendBase, BlobReader, FinishedUpload, UploadWriter
from workspacefs.capabilities import Capabilities
from workspacefs.errors import (
    ConcurrentChangeError,
    PreconditionFailedError,
    QuotaExceededError,
    ReadOnlyFileError,
    SnapshotNotFoundError,
    caller_paths,
)
from workspacefs.history import DIRECTORY, Change, JournalEntry, current_actor
from workspacefs.paths import MAX_CONVENIENCE_BYTES, ROOT, ancestors, basename, parent
from workspacefs.protocol import ByteReader, BytesLike, ByteWriter, VersionedContent
from workspacefs.quota import Quota, Usage
from workspacefs.results import FileEntry, FileStat, FilesystemDiff, FilesystemSnapshot, WriteMode, WriteResult
from workspacefs.search import GrepPattern, required_literal
from workspacefs.streams import StreamReader

__all__ = ["SqlFilesystem"]

F = session_files
E = snapshot_entries
V = file_versions

# Statements built once: composing SQLAlchemy expressions per call cost more than running them.
_SESSION: Any = sa.bindparam("b_session")  # not a column's name: those are reserved in UPDATE … SET
_PATH: Any = sa.bindparam("b_path")
_ROW = sa.select(F).where(F.c.session_id == _SESSION, F.c.path == _PATH)
_ROW_FOR_UPDATE = _ROW.with_for_update()
_ROW_FOR_SHARE = _ROW.with_for_update(read=True)
_KEY_BATCH = 200
"""Key lookups per statement (SQLite allows 500 parts in a compound ``SELECT``)."""
_SPOOL_BYTES = 8 * 1024 * 1024
"""Content an undo writes back stays in memory up to this size, then spills to a temporary file."""
_SESSION_REMADE = "The session was deleted and made again by other connections while this one opened it; open it again"
_INLINE_VERSIONED = 1024 * 1024
"""``open_versioned`` reads files up to this size with their row in one statement; larger ones stream."""
_ENTRY_COLUMNS = ENTRY_COLUMNS
_INSERT_ROW = sa.insert(F)
_SET_CONTENT = (
    sa.update(F)
    .where(F.c.session_id == _SESSION, F.c.path == _PATH)
    .values(blob_id=sa.bindparam("blob"), size_bytes=sa.bindparam("size"), updated_at=sa.bindparam("now"))
)
_SET_FLAG = sa.update(F).where(F.c.session_id == _SESSION, F.c.path == _PATH).values(is_readonly=sa.bindparam("flag"))
_DELETE_ROW = sa.delete(F).where(F.c.session_id == _SESSION, F.c.path == _PATH)
_USAGE_NOW = sa.select(session_usage.c.bytes, session_usage.c.files).where(session_usage.c.session_id == _SESSION)
_NOTHING = Usage()
"""No usage: what a copy over nothing replaced."""
_SET_ROW = (
    sa.update(F)
    .where(F.c.session_id == _SESSION, F.c.path == _PATH)
    .values({c: sa.bindparam(f"v_{c}") for c in ENTRY_COLUMNS[1:]})
)


def _subtree(base: str) -> sa.ColumnElement[bool]:
    """Rows strictly below ``base``, by range: ``%`` and ``_`` in names are just characters."""
    if base == ROOT:
        return F.c.path != ROOT
    return sa.and_(F.c.path > base + "/", F.c.path < base + "0")  # '0' is the character after '/'


class _Raced(Exception):  # noqa: N818 - a signal to retry, not an error anyone sees
    """A concurrent writer created the row this transaction meant to create."""


class _NoParent(Exception):  # noqa: N818 - a signal, not an error anyone sees
    """The parent row is missing or not a directory: the write rolls back and finds out which."""


_RETRIES = 5
_RESTORE_ATTEMPTS = 3
"""How often a restore runs again after PostgreSQL broke a deadlock it was part of (it changed nothing)."""
_NO_JOURNAL = (False, None, None, None, None, None, None, None, None)
"""``wsfs_write_small``'s journal arguments when the store keeps no journal."""


_USAGE_ROW = "SELECT bytes, files FROM wsfs_session_usage WHERE session_id = ?"
"""A session's usage as the triggers of migration ``0009`` keep it."""


class SqlFilesystem(BaseFilesystem):
    """One session of a :class:`SqlStore` (pass a store, or a ``sqlite:///`` / ``postgresql://`` URL)."""

    backend_name: ClassVar[str] = "sql"
    declared_capabilities: ClassVar[Capabilities] = Capabilities(
        file_read_only=True, fork=True, merge=True, history=True, watch=True
    )

    def __init__(
        self,
        store: SqlStore | str,
        session_id: str,
        *,
        read_only: bool = False,
        mount_point: str | None = None,
        create: bool = True,
        quota: Quota | None = None,
        content_store: str | None = None,
        content_store_min_bytes: int | None = None,
    ) -> None:
        """A session of ``store`` (a :class:`SqlStore`, or a URL this filesystem then opens and closes).

        ``content_store`` / ``content_store_min_bytes`` configure the store opened from a URL (see
        :class:`SqlStore`); a store passed in keeps the content store it was opened with."""
        if not isinstance(store, str) and (content_store is not None or content_store_min_bytes is not None):
            raise ValueError("content_store is an option of the SqlStore; pass it when opening the store")
        super().__init__(read_only=read_only, mount_point=mount_point, quota=quota)
        _check_session_id(session_id)
        self._owns_store = isinstance(store, str)
        self._store = (
            SqlStore(store, content_store=content_store, content_store_min_bytes=content_store_min_bytes)
            if isinstance(store, str)
            else store
        )
        self._session = session_id
        self._sql = self._store.sql
        self._history = SqlJournal(self._store, session_id)
        self._plain_write: JournalTag | None = None
        """The tag of the last small write made outside an operation (see :meth:`_write_tag`)."""
        if create:  # a caller that knows the session exists (the service) skips this write
            self._ensure_session()

    def _ensure_session(self) -> None:
        """Create the session unless it exists. Deleted by another connection between its two rows: the session is
        gone, ``FileNotFoundError``; made again meanwhile (another opener): run again, and after the last attempt
        ``ConcurrentChangeError`` (never the driver's untyped error)."""
        for attempt in range(_RETRIES):
            try:
                with self._store.session_write(self._session) as connection:
                    self._store.ensure_session(connection, self._session)
                return
            except ConcurrentChangeError as exc:  # a foreign key's, with the session back: another opener made it again
                if attempt == _RETRIES - 1:
                    raise ConcurrentChangeError("/", _SESSION_REMADE) from exc.__cause__

    @property
    def root(self) -> str:
        """``/`` of the session (the database is named by :attr:`store`)."""
        return "/"

    @property
    def session_id(self) -> str:
        """The session this filesystem shows."""
        return self._session

    @property
    def store(self) -> SqlStore:
        """The store (database) holding the session."""
        return self._store

    def close(self) -> None:
        """Release the database connections if this filesystem opened them."""
        if self._owns_store:
            self._store.close()

    # --- history: journal rows in each change's own transaction ------------------------------------------

    def _journal(self) -> SqlJournal | None:
        return self._history if self._store.history else None

    @property
    def capabilities(self) -> Capabilities:
        """As declared, less ``history``/``watch`` when the store keeps no journal (``history=off``)."""
        if self._store.history:
            return self.declared_capabilities
        return dataclasses.replace(self.declared_capabilities, history=False, watch=False)

    def _tag(self, operation: str, *, rows: bool = False) -> JournalTag | None:
        """What this primitive's journal rows carry: the operation in progress, or one of its own (``None``:
        the store keeps no journal). ``rows``: the primitive may write several rows, which need a shared key."""
        if not self._store.history:
            return None
        scope = self._current_scope()
        if scope is None:
            return JournalTag(operation_key() if rows else None, operation, current_actor(), None, None)
        return JournalTag(scope.key, scope.operation, scope.actor, scope.undoes, scope.detail)

    def _journal_changes(self, connection: Connection, tag: JournalTag | None, *changes: Change) -> None:
        if tag is not None:
            insert_changes(connection, tag, self._session, changes)

    def _write_tag(self) -> JournalTag | None:
        """:meth:`_tag` of a small write: outside an operation, the same tag for as long as the actor is the same
        (making one cost 1.7 µs, a tenth of what journaling added to a write)."""
        if not self._store.history:
            return None
        if self._current_scope() is not None:
            return self._tag("write")
        actor, cached = current_actor(), self._plain_write
        if cached is None or cached.actor is not actor:
            cached = self._plain_write = JournalTag(None, "write", actor, None, None)
        return cached

    def _journal_row(  # noqa: PLR0917 - the hot path: positional
        self,
        tx: Any,
        tag: JournalTag | None,
        now: Any,
        path: str,
        before: str | None,
        after: str,
        sizes: tuple[int, int],
    ) -> None:
        """Queue a content change's journal row in a driver-level transaction (the small write's hot path)."""
        if tag is not None:
            tx.do(self._sql.insert_journal, tag.content_row(self._session, now, path, before, after, *sizes))

    def _committed(self, tag: JournalTag | None) -> None:
        """A primitive's transaction committed with its journal rows: tell the scope and the watchers, and now
        and then drop the entries past the store's retention."""
        if tag is None:
            return
        if self._store.journaled():
            self._history.retain(self._store.history_entries)
        scope = self._current_scope()
        if scope is not None:
            scope.changes.append(tag.op_key)
        self._history.changed()

    def _scope_finished(self, scope: Scope) -> None:
        """Nothing to do: every primitive wrote its rows in its own transaction."""

    def _scope_entry(self, scope: Scope) -> JournalEntry | None:
        return self._history.entry_of_key(scope.key)

    def _check_locks(self, targets: Sequence[JournalEntry]) -> None:
        """Follow the read-only flag through the undo of ``targets`` (newest first, each's changes last first):
        refuse when content would go back into a file that is read-only then, unless the entry itself locked it
        (its undo unlocks it in the same step). A directory moved back takes its files' flags with it."""
        flags: dict[str, bool] = {}
        moved_back: list[tuple[str, str]] = []
        """Directories the undo moves back so far, ``(from, to)``: a path is looked up where it is now."""

        def locked(path: str) -> bool:
            if path not in flags:
                flags[path] = self._locked_now(_where_now(path, moved_back))
            return flags[path]

        for target in targets:
            for change in reversed(target.changes):
                path = change.path
                if change.from_path is not None:  # moved back: the file takes its flag with it
                    if change.after == DIRECTORY:
                        _carry_flags(flags, path, change.from_path)
                        moved_back.append((path, change.from_path))
                    flags[change.from_path] = locked(path)
                    flags[path] = False
                    continue
                writes = change.before not in (None, DIRECTORY) and change.before != change.after
                if writes and locked(path) and change.read_only_after is not True:
                    raise errors.ReadOnlyFileError(
                        path, "File is read-only (it was locked after this change): clear its flag to undo"
                    )
                if change.before in (None, DIRECTORY):
                    flags[path] = False
                elif change.read_only_before is not None:
                    flags[path] = change.read_only_before

    def _locked_now(self, path: str | None) -> bool:
        """Whether a read-only file is at ``path`` now (``None``: nothing can be there)."""
        try:
            info = None if path is None else self._stat(path)
        except (FileNotFoundError, NotADirectoryError):
            info = None
        return info is not None and info.is_file and bool(info.read_only)

    def _put_back(self, entry: JournalEntry, index: int) -> None:
        """As every backend, and where the change set the file's read-only flag, the flag too: in the same step as
        the content (a write that made the file read-only is undone although the file is read-only now). A
        read-only file the change deleted (or put a directory in place of) comes back read-only."""
        change = entry.changes[index]
        flag = change.read_only_before
        gone = change.read_only_after is None  # with a flag before: a read-only file that went
        if flag is None or (gone and change.after not in {None, DIRECTORY}):
            super()._put_back(entry, index)  # the flag untouched, or the file did not exist before
            return
        now = self._version_now(change.path)
        if gone:
            if now != change.after:  # changed since (an undo forced): as the content says
                super()._put_back(entry, index)
                return
            if now == DIRECTORY:
                self.delete("/" + change.path, recursive=True)
            self._ensure_parents(change.path)
            self._write_back(entry, index, flag)
            return
        if now is None or now == DIRECTORY:  # gone or replaced since (an undo forced): as the content says
            super()._put_back(entry, index)
            return
        if now == change.before:  # the content is as it was: the flag alone
            self._set_flag(change.path, flag, expect=None)
            return
        self._write_back(entry, index, flag)

    def _write_back(self, entry: JournalEntry, index: int, flag: bool) -> None:
        """Write the content the entry's ``index``-th change replaced, with read-only flag ``flag``: one step."""
        change = entry.changes[index]
        content = self._history_content(entry, index)
        if isinstance(content, bytes):
            with self._quota_step() as step:  # checked again in the write's transaction
                self._check_write(change.path, len(content), "overwrite", step)
            self._write_content(change.path, content, "overwrite", read_only=flag)
            return
        uploader = self._uploader(change.path, "overwrite", NO_BASE, None, flag)
        with content, self._quota_writer(change.path, "overwrite", uploader) as writer:
            writer.write_all(content)

    def _history_content(self, entry: JournalEntry, index: int) -> bytes | ByteReader:
        change = entry.changes[index]
        blob_id = str(change.before)
        with self._store.read() as connection:
            hashes, inline = self._store.blob_parts(connection, blob_id)
            if inline is not None:
                return inline
            if not hashes and not change.size_before:  # empty content streamed: a blob of no chunks, no data
                return b""
            if not hashes:
                raise OSError(5, "The content this entry replaced is no longer kept", change.path)
            spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - the reader closes it
            for piece in self._store.checked_chunks(connection, hashes, change.size_before, change.path):
                spool.write(piece)
        spool.seek(0)
        return StreamReader(change.path, spool, change.size_before)

    # --- helpers --------------------------------------------------------------------------------------

    def _where(self, path: str) -> sa.ColumnElement[bool]:
        return sa.and_(F.c.session_id == self._session, F.c.path == path)

    def _row(self, connection: Connection, path: str, *, lock: bool = False, shared: bool = False) -> Row[Any] | None:
        query = _ROW
        if lock and self._store.dialect == "postgresql":  # SQLite's writer already holds the database
            query = _ROW_FOR_SHARE if shared else _ROW_FOR_UPDATE
        return connection.execute(query, {"b_session": self._session, "b_path": path}).first()

    def _parent_dir(self, connection: Connection, path: str) -> None:
        """Raise unless ``path``'s parent is a directory (a file above it: NotADirectoryError)."""
        row = self._row(connection, parent(path), lock=True, shared=True)  # it cannot go while we add to it
        if row is not None and row.is_directory:
            return
        for directory in [ROOT, *ancestors(path)]:
            above = self._row(connection, directory)
            if above is not None and not above.is_directory:
                raise errors.not_a_directory(path)
        raise errors.file_not_found(path)

    def _new_row(self, path: str, *, directory: bool, blob_id: str | None, size: int, **extra: Any) -> dict[str, Any]:
        now = datetime.now(UTC)
        return {
            "session_id": self._session,
            "path": path,
            "parent": parent(path),
            "name": basename(path),
            "is_directory": directory,
            "is_readonly": extra.get("is_readonly", False),
            "blob_id": blob_id,
            "size_bytes": size,
            "created_at": extra.get("created_at", now),
            "updated_at": extra.get("updated_at", now),
        }

    def _put_file(
        self,
        connection: Connection,
        path: str,
        blob_id: str,
        size: int,
        *,
        existing: Row[Any] | None,
        mode: WriteMode,
        tag: JournalTag | None,
        read_only: bool | None = None,
    ) -> None:
        """Point the file's row at new content (``read_only``: and set its flag), journaled, in the caller's
        transaction."""
        if existing is None:
            values = self._new_row(path, directory=False, blob_id=blob_id, size=size, is_readonly=bool(read_only))
            if connection.execute(self._store.insert_file_row, values).first() is None:
                if mode == "create":
                    raise errors.file_exists(path)
                raise _Raced  # another writer created it first: run the write again
            flags: tuple[bool | None, bool | None] = (None, True) if read_only else (None, None)
            self._journal_changes(connection, tag, Change(path, None, blob_id, 0, size, None, *flags))
            return
        flag_set = read_only is not None and read_only != existing.is_readonly
        flags = (bool(existing.is_readonly), read_only) if flag_set else (None, None)
        change = Change(path, existing.blob_id, blob_id, existing.size_bytes, size, None, *flags)
        self._journal_changes(connection, tag, change)
        connection.execute(
            _SET_CONTENT,
            {"b_session": self._session, "b_path": path, "blob": blob_id, "size": size, "now": datetime.now(UTC)},
        )
        if flag_set:
            connection.execute(_SET_FLAG, {"b_session": self._session, "b_path": path, "flag": read_only})
        if existing.blob_id != blob_id:
            self._store.release(connection, [existing.blob_id], path)

    def _check_writable_file(
        self, row: Row[Any] | Checked | None, path: str, mode: WriteMode, *, unlocking: bool = False
    ) -> None:
        """Refuse a write the row does not allow (``unlocking``: the same write clears the read-only flag)."""
        if row is None:
            return
        if row.is_directory:
            raise errors.is_a_directory(path)
        if mode == "create":
            raise errors.file_exists(path)
        if row.is_readonly and not unlocking:
            raise ReadOnlyFileError(path)

    # --- primitives -------------------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStat:
        return self._stat_of(self._row_tuple(path))

    def _row_tuple(self, path: str) -> Sequence[Any]:
        """The row at ``path`` (:data:`_hot.ROW`), from one statement."""
        row = self._store.driver.fetch_row(self._sql.row, (self._session, path))
        if row is None:
            raise errors.file_not_found(path)
        return row

    def _stat_of(self, row: Sequence[Any]) -> FileStat:
        """A :data:`_hot.ROW`-shaped row as a ``FileStat``."""
        stamp = self._store.driver.stamp
        directory = bool(row[1])
        return FileStat(row[0], not directory, directory, row[4], stamp(row[5]), stamp(row[6]), bool(row[2]))

    def _children(self, path: str) -> list[Any]:
        """A directory's child rows (:data:`_hot.CHILDREN`), from one statement (errors as for a listing)."""
        with self._store.driver.statement() as tx:
            cursor = tx.run(self._sql.children, (self._session, path, self._session, path))
            tx.sync()
            rows = cursor.fetchall()
        own = [r for r in rows if r[0] == path]
        if not own:
            raise errors.file_not_found(path)
        if not own[0][1]:
            raise errors.not_a_directory(path)
        return [r for r in rows if r[0] != path]

    def _list_stats(self, path: str) -> Sequence[FileStat]:
        stat_of = self._stat_of
        return tuple(stat_of(child) for child in self._children(path))

    def _list_dir(self, path: str) -> Sequence[FileEntry]:
        return tuple(FileEntry(c[7], c[0], not c[1], bool(c[1]), None if c[1] else c[4]) for c in self._children(path))

    def _file_row(self, connection: Connection, path: str) -> Row[Any]:
        row = self._row(connection, path)
        if row is None:
            raise errors.file_not_found(path)
        if row.is_directory:
            raise errors.is_a_directory(path)
        return row

    def _open_reader(self, path: str) -> ByteReader:
        content = self._open_content(path, _INLINE_VERSIONED)
        if isinstance(content, bytes):
            return StreamReader(path, io.BytesIO(content), len(content))
        return content

    def _read_small(self, path: str, limit: int) -> tuple[Sequence[Any], bytes | None]:
        """A file's row and, if it is at most ``limit`` bytes, its content: one statement (:data:`_hot.READ_ROW`);
        content kept in chunks (a chunk or more) takes a second one that reads the row again with them."""
        row = self._store.driver.fetch_row(self._sql.read_row, (self._session, path), binary=True)
        if row is None:
            raise errors.file_not_found(path)
        if row[1]:
            raise errors.is_a_directory(path)
        if row[4] > limit:
            return row, None
        if row[7] is not None:  # inline
            return row, bytes(row[7])
        return self._read_chunked(path, limit)

    def _read_chunked(self, path: str, limit: int) -> tuple[Sequence[Any], bytes | None]:
        """As :meth:`_read_small`, the row and its chunks from one statement (:data:`_hot.READ`: the file may have
        changed since the row was read, and this statement's answer is consistent in itself)."""
        with self._store.driver.statement() as tx:
            cursor = tx.run(self._sql.read, (limit, self._session, path), binary=True)
            tx.sync()
            rows = cursor.fetchall()
        if not rows:
            raise errors.file_not_found(path)
        row = rows[0]
        if row[1]:
            raise errors.is_a_directory(path)
        if row[4] > limit:
            return row, None
        if row[7] is not None:  # inline
            return row, bytes(row[7])
        chunk, size = self._store.chunk_bytes, row[4]  # a chunk in the content store comes from there
        parts = [r for r in rows if r[9] is not None]
        check_chunk_list(len(parts), size, path)
        for r in parts:
            if r[11] is None:  # listed, but its row is gone
                raise missing_chunk(r[9], path)
        return row, b"".join(
            check_piece(chunk(r[9], r[8], r[10], r[11], path), i, size, r[9], path) for i, r in enumerate(parts)
        )

    def _open_row_reader(self, path: str) -> tuple[Sequence[Any], ByteReader]:
        """A file's row (:data:`_hot.ROW`) and a reader of exactly the content that row names: both from
        one snapshot, which the reader holds until it is closed."""
        driver = self._store.driver
        scope = driver.snapshot()
        tx = scope.__enter__()
        try:
            found = tx.run(self._sql.read_row, (self._session, path), binary=True)  # the row and any inline content
            listed = tx.run(self._sql.chunk_list, (self._session, path))
            tx.sync()
            row = found.fetchone()
            if row is None:
                raise errors.file_not_found(path)
            if row[1]:
                raise errors.is_a_directory(path)
            hashes = [r[0] for r in listed.fetchall()]
            if row[7] is None:
                check_chunk_list(len(hashes), row[4], path)
        except BaseException as exc:
            scope.__exit__(type(exc), exc, None)
            raise
        if row[7] is not None:  # inline: the content is here already
            scope.__exit__(None, None, None)
            return row, StreamReader(path, io.BytesIO(bytes(row[7])), row[4])
        prefetch = 8 if driver.postgres else 1
        blob = BlobReader(
            scope,
            tx,
            self._sql.chunk,
            path=path,
            hashes=hashes,
            size=row[4],
            prefetch=prefetch,
            fetch=self._store.chunk_bytes,
        )
        return row, StreamReader(path, blob, row[4])

    def _open_content(self, path: str, inline_limit: int) -> bytes | ByteReader:
        """A whole file's content: one statement of three columns (:data:`_hot.READ_CONTENT`) for inline content;
        content in chunks takes a second statement (:meth:`_read_chunked`), a file over ``inline_limit`` a reader."""
        row = self._store.driver.fetch_row(self._sql.read_content, (self._session, path), binary=True)
        if row is None:
            raise errors.file_not_found(path)
        if row[0]:
            raise errors.is_a_directory(path)
        data = None
        if row[1] <= inline_limit:
            data = bytes(row[2]) if row[2] is not None else self._read_chunked(path, inline_limit)[1]
        return data if data is not None else self._open_row_reader(path)[1]

    def _open_writer(self, path: str, mode: WriteMode) -> ByteWriter:
        with self._store.read() as connection:
            self._parent_dir(connection, path)
            row = self._row(connection, path)
            self._check_writable_file(row, path, mode)
            base = NO_BASE
            if mode == "append" and row is not None:
                full, tail = self._tail(connection, row)
                base = AppendBase(row.blob_id, full, tail, row.size_bytes)
        return self._uploader(path, mode, base)

    def _uploader(
        self, path: str, mode: WriteMode, base: AppendBase, expect: str | None = None, read_only: bool | None = None
    ) -> ByteWriter:
        commit = functools.partial(self._commit_stream, path, mode, expect, read_only)
        return UploadWriter(self._store, path, base, commit)

    def _commit_stream(
        self, path: str, mode: WriteMode, expect: str | None, read_only: bool | None, upload: FinishedUpload
    ) -> None:
        tag = self._tag("write")
        with self._writing(path) as connection:
            self._store.finish_upload(connection, upload.upload_id)
            self._parent_dir(connection, path)
            row = self._row(connection, path, lock=True)
            _check_expected(row, path, expect)
            self._check_writable_file(row, path, mode, unlocking=read_only is False)
            if mode == "append" and (row.blob_id if row is not None else None) != upload.base_blob:
                raise ConcurrentChangeError(path, "The file changed while it was being appended to; append again")
            blob_id = self._store.register_blob(connection, upload.hashes, upload.size)
            try:
                self._put_file(
                    connection, path, blob_id, upload.size, existing=row, mode=mode, tag=tag, read_only=read_only
                )
            except _Raced:
                raise ConcurrentChangeError(path, "Another writer created the file meanwhile; write it again") from None
            self._hold_to_quota(connection, path, _growth(row, upload.size))
            # the content may already have been stored inline: then the chunks just uploaded are unused
            self._store.drop_unused_chunks(connection, upload.hashes, path)
        self._committed(tag)

    def _write_content(
        self, path: str, data: bytes, mode: WriteMode, *, expect: str | None = None, read_only: bool | None = None
    ) -> None:
        if mode != "append" and self._store.inline(len(data)) and not _may_set_flag(mode, read_only):
            self._write_small(path, data, mode, expect, None if mode == "create" else read_only)
            return
        tag = self._tag("write")
        for attempt in range(_RETRIES):
            try:
                with self._writing(path) as connection:
                    self._parent_dir(connection, path)
                    row = self._row(connection, path, lock=True)
                    _check_expected(row, path, expect)
                    self._check_writable_file(row, path, mode, unlocking=read_only is False)
                    if mode == "append" and row is not None:
                        blob_id, size = self._appended(connection, row, data)
                    else:
                        blob_id, size = self._store.put_content(connection, data), len(data)
                    self._put_file(
                        connection, path, blob_id, size, existing=row, mode=mode, tag=tag, read_only=read_only
                    )
                    self._hold_to_quota(connection, path, _growth(row, size))
                self._committed(tag)
                return
            except _Raced:
                if attempt == _RETRIES - 1:
                    raise ConcurrentChangeError(path, "Too many concurrent writers; try again") from None

    def _tail(self, connection: Connection, row: Row[Any]) -> tuple[list[str], bytes]:
        """A file's full chunks and the partial content after them (all of it when it is inline)."""
        hashes, inline = self._store.blob_parts(connection, row.blob_id)
        if inline is not None:
            return [], inline
        size = row.size_bytes  # an append to content that lost a chunk would keep the loss for good
        check_chunk_list(len(hashes), size, row.path)
        if hashes and size % CHUNK_SIZE:
            last = len(hashes) - 1
            return hashes[:-1], self._store.checked_chunk(connection, hashes, last, size, row.path)
        return hashes, b""

    def _write_small(self, path: str, data: bytes, mode: WriteMode, expect: str | None, read_only: bool | None) -> None:
        """A whole write of at most one chunk, journaled in its own transaction."""
        tag = self._write_tag()
        self._write_small_rows(path, data, mode, expect, read_only, tag)
        self._committed(tag)

    def _write_small_rows(  # noqa: PLR0917 - the hot path: positional, as _write_small's
        self,
        path: str,
        data: bytes,
        mode: WriteMode,
        expect: str | None,
        read_only: bool | None,
        tag: JournalTag | None,
    ) -> None:
        """The write in one transaction, its journal row included: on PostgreSQL one call of ``wsfs_write_small``
        (one round trip), on SQLite the statements of :meth:`_write_small_sqlite`."""
        driver = self._store.driver
        grew = (len(data), 1)  # at most (a refusal's message is worded from the usage then)
        for _ in range(_RETRIES):
            try:
                if driver.postgres:
                    self._write_small_call(path, data, mode, expect, read_only, tag)
                else:
                    self._write_small_sqlite(path, data, mode, expect, read_only, tag)
                return
            except driver.quota_refused:  # PostgreSQL: the check in the transaction refused it, all rolled back
                raise self._refusal(path, grew) from None
            except _NoParent:
                with self._store.read() as connection:
                    self._parent_dir(connection, path)  # raises the error that fits (or the parent is back)
            except driver.integrity_error as exc:
                self._check_race(exc, path, mode)
            except driver.server_error as exc:
                if raised_in_database(exc):  # a trigger's RAISE without a code of its own: no race either
                    raise refused(exc, path) from exc
                raise
        raise ConcurrentChangeError(path, "Too many concurrent writers; try again")

    def _check_race(self, exc: Exception, path: str, mode: WriteMode) -> None:
        """Return if a small write's integrity error is a race it lost and may run again; else raise what it means.

        Only two are races: a foreign key's, because the session or the parent went meanwhile (the session gone:
        ``FileNotFoundError``; the parent: its error; both back: run again, on PostgreSQL, where they can come back
        between two statements), and PostgreSQL's files key refusing a row a concurrent creator inserted first
        (``mode="create"``: ``FileExistsError``). Any other constraint (a ``NOT NULL``, a ``CHECK``, a trigger) fails
        the same way every time: :func:`._reach.refused`, at once."""
        if foreign_key_failed(exc):
            self._check_still_there(path)
            if self._store.driver.postgres:
                return
        elif file_row_taken(exc):
            if mode == "create":
                raise errors.file_exists(path) from None
            return
        raise refused(exc, path) from exc

    @contextlib.contextmanager
    def _writing(self, path: str) -> Iterator[Connection]:
        """A write transaction changing ``path``: a foreign key's refusal because the session was deleted meanwhile
        raises what every other change of a deleted session raises, ``FileNotFoundError`` (``session_write``)."""
        with self._store.session_write(self._session, path) as connection:
            yield connection

    def _session_deleted(self) -> bool:
        """Whether this session's row is gone (deleted, by this process or another)."""
        return not self._store.session_exists(self._session)

    def _check_still_there(self, path: str) -> None:
        """After a foreign key refused a change of ``path``: raise what a change of a deleted session raises
        everywhere else (``FileNotFoundError``), or the parent's error; return if both are back (run again)."""
        if self._session_deleted():
            raise errors.file_not_found(path)
        with self._store.read() as connection:
            self._parent_dir(connection, path)

    def _write_small_call(  # noqa: PLR0917 - the hot path: positional, as _write_small's
        self,
        path: str,
        data: bytes,
        mode: WriteMode,
        expect: str | None,
        read_only: bool | None,
        tag: JournalTag | None,
    ) -> None:
        """PostgreSQL: the whole write as one autocommit call (migration ``0011``); a refused write wrote nothing,
        and the rows it returns tell which error. Content it replaced is collected after, unless the journal row
        just written keeps it (then collecting could only find it referenced)."""
        driver = self._store.driver
        blob_id = inline_blob_id(data)
        journal = (True, *tag.fields()) if tag is not None else _NO_JOURNAL
        wanted = None if expect == ANY_VERSION else expect
        if wanted is not None and "\x00" in wanted:  # PostgreSQL text holds no NUL, nor does any content id:
            wanted = ""  # one that never matches either (the service's weak-ETag sentinel is such a value)
        quota = self._quota  # the function checks the usage row after its changes, in its transaction
        limits = (None, None) if quota is None else (quota.max_bytes, quota.max_files)
        params = (
            *(self._session, path, parent(path), basename(path), blob_id, len(data), data, driver.now()),
            *(mode == "create", expect is not None, wanted, read_only),
            *journal,
            *limits,
        )
        written, parent_dir, directory, readonly, before, chunks = driver.fetch_row(self._sql.write_small, params)  # type: ignore[misc]
        if not written:
            if not parent_dir:
                raise _NoParent
            row = None if directory is None else Checked(path, directory, readonly, before)
            _check_expected(row, path, expect)
            self._check_writable_file(row, path, mode, unlocking=read_only is False)
            raise ConcurrentChangeError(path, "The file changed while it was being written; write it again")
        if chunks is not None and before is not None:  # no journal: collect now, on its own (see Tx.collect)
            try:
                with driver.batch() as tx:
                    for sql, values in self._store.release_statements([before], chunks):
                        tx.run(sql, values)
            except driver.server_error as exc:  # a foreign key's: a concurrent writer uses it again, it stays
                if isinstance(exc, driver.integrity_error) and foreign_key_failed(exc):
                    return
                if isinstance(exc, driver.integrity_error) or raised_in_database(exc):
                    raise refused(exc, path, committed=True) from exc
                raise

    def _write_small_sqlite(  # noqa: PLR0917 - the hot path: positional, as _write_small's
        self,
        path: str,
        data: bytes,
        mode: WriteMode,
        expect: str | None,
        read_only: bool | None,
        tag: JournalTag | None,
    ) -> None:
        """SQLite: store the content, check the rows, point the file at it, write its journal row and collect
        what it replaced, in one transaction (the database is locked from its start)."""
        driver = self._store.driver
        session, above, blob_id, now = self._session, parent(path), inline_blob_id(data), driver.now()
        with driver.transaction(write=True) as tx:
            tx.do(self._sql.put_inline, (blob_id, len(data), data))
            rows = {r[0]: r for r in tx.rows(self._sql.rows_for_write, (session, above, session, path))}
            if above not in rows or not rows[above][1]:
                raise _NoParent
            target = rows.get(path)
            row = None if target is None else Checked(path, bool(target[1]), bool(target[2]), target[3])
            _check_expected(row, path, expect)
            self._check_writable_file(row, path, mode, unlocking=read_only is False)
            if row is None or target is None:
                values = (session, path, above, basename(path), False, bool(read_only), blob_id, len(data))
                tx.do(self._sql.insert_file, (*values, now, now))
                self._journal_row(tx, tag, now, path, None, blob_id, (0, len(data)))
                self._guard_small_write(tx, path, (len(data), 1))
                return
            tx.do(self._sql.update_file, (blob_id, len(data), now, read_only, session, path))
            self._journal_row(tx, tag, now, path, row.blob_id, blob_id, (int(target[5]), len(data)))
            self._guard_small_write(tx, path, (len(data) - int(target[5]), 0))
            replaced = row.blob_id
            if tag is None and replaced is not None and replaced != blob_id:  # a journal row would keep it
                chunks = target[4]
                tx.collect(self._store.release_statements([replaced], chunks.split(",") if chunks else []))

    def _appended(self, connection: Connection, row: Row[Any], data: bytes) -> tuple[str, int]:
        """The blob of a file's content plus ``data``: only its last, partial chunk is cut again."""
        hashes, tail = self._tail(connection, row)
        joined = tail + data
        hashes += [
            self._store.put_chunk(connection, joined[i : i + CHUNK_SIZE]) for i in range(0, len(joined), CHUNK_SIZE)
        ]
        size = row.size_bytes + len(data)
        return self._store.register_blob(connection, hashes, size), size

    def _make_dir(self, path: str) -> None:
        tag = self._tag("mkdir")
        with self._writing(path) as connection:
            self._parent_dir(connection, path)
            if self._row(connection, path) is not None:
                raise errors.file_exists(path)
            try:
                with connection.begin_nested():
                    connection.execute(_INSERT_ROW, self._new_row(path, directory=True, blob_id=None, size=0))
            except IntegrityError as exc:
                if foreign_key_failed(exc.orig):  # its parent is locked: the session went meanwhile
                    raise
                if not file_row_taken(exc.orig):  # not another mkdir's row: a constraint no race breaks
                    raise refused(exc, path) from exc
                raise errors.file_exists(path) from None
            self._journal_changes(connection, tag, Change(path, None, DIRECTORY))
        self._committed(tag)

    def _remove_file(self, path: str) -> None:
        tag = self._tag("delete")
        with self._writing(path) as connection:
            row = self._row(connection, path, lock=True)
            if row is None:
                raise errors.file_not_found(path)
            if row.is_directory:
                raise errors.is_a_directory(path)
            connection.execute(_DELETE_ROW, {"b_session": self._session, "b_path": path})
            locked = True if row.is_readonly else None  # undo brings a read-only file back read-only
            self._journal_changes(connection, tag, Change(path, row.blob_id, None, row.size_bytes, 0, None, locked))
            self._store.release(connection, [row.blob_id], path)
        self._committed(tag)

    def _remove_empty_dir(self, path: str) -> None:
        tag = self._tag("delete")
        with self._writing(path) as connection:
            row = self._row(connection, path, lock=True)
            if row is None:
                raise errors.file_not_found(path)
            if not row.is_directory:
                raise errors.not_a_directory(path)
            child = connection.execute(
                sa.select(F.c.path).where(F.c.session_id == self._session, F.c.parent == path).limit(1)
            ).first()
            if child is not None:
                raise errors.DirectoryNotEmptyError(path)
            connection.execute(sa.delete(F).where(self._where(path)))
            self._journal_changes(connection, tag, Change(path, DIRECTORY, None))
        self._committed(tag)

    def _blobs_below(self, connection: Connection, path: str) -> list[str]:
        query = sa.select(F.c.blob_id).where(F.c.session_id == self._session, _subtree(path), F.c.blob_id.is_not(None))
        return [r[0] for r in connection.execute(query.distinct())]

    def _remove_tree(self, path: str) -> None:
        tag = self._tag("delete", rows=True)
        with self._writing(path) as connection:
            self._lock_tree(connection, path)
            if not self._delete_tree_rows(connection, tag, path):
                raise errors.file_not_found(path)
        self._committed(tag)

    def _delete_tree_rows(self, connection: Connection, tag: JournalTag | None, path: str) -> bool:
        """Delete ``path``'s row and every row below it, journaled (children first), in ``connection``'s
        transaction, and collect the content no longer used. ``False``: nothing is there."""
        row = self._row(connection, path, lock=True)
        if row is None:
            return False
        released = [*self._blobs_below(connection, path), row.blob_id]
        if tag is not None:  # children before their directory
            rows = tree_rows(tag, self._session, datetime.now(UTC), path, deleting=True)
            insert_rows(connection, self._session, rows, F.c.path.desc())
        connection.execute(sa.delete(F).where(self._where(path)))  # the parent key cascades down
        self._store.release(connection, released, path)
        return True

    def _lock_tree(
        self, connection: Connection, base: str, *also: str, trees: tuple[str, ...] = (), shared: str | None = None
    ) -> None:
        """PostgreSQL: lock every row a tree's move or delete will delete (below ``base`` and ``trees``, and at
        ``also``), and ``shared`` (the parent it adds to) ``FOR SHARE``, in path order, before changing any (see
        :mod:`._lock_order`); SQLite's writer already holds the database."""
        if self._store.dialect == "postgresql":
            lock_tree(connection, self._session, base, also, trees=trees, shared=shared)

    def _graft(self, connection: Connection, src: str, dst: str, *, keep_times: bool) -> Usage:
        """Insert a copy of the ``src`` subtree at ``dst`` (parents first): metadata only. What its files hold."""
        rows = connection.execute(
            sa.select(F)
            .where(F.c.session_id == self._session, sa.or_(F.c.path == src, _subtree(src)))
            .order_by(F.c.path)
        ).all()
        values = []
        for row in rows:
            target = dst + row.path[len(src) :]
            times = {"created_at": row.created_at, "updated_at": row.updated_at} if keep_times else {}
            values.append(
                self._new_row(
                    target,
                    directory=row.is_directory,
                    blob_id=row.blob_id,
                    size=row.size_bytes,
                    is_readonly=row.is_readonly,
                    **times,
                )
            )
        # the top row first, where a writer may have created a file meanwhile (no row to lock before): it exists
        if values and connection.execute(self._store.insert_file_row, values[0]).first() is None:
            raise errors.file_exists(dst)
        for value in values[1:]:  # one by one, parents before children, so each parent key is satisfied
            connection.execute(sa.insert(F).values(value))
        files = [row for row in rows if not row.is_directory]
        return Usage(sum(int(row.size_bytes) for row in files), len(files))

    def _rename(self, src: str, dst: str, *, replace: bool) -> None:
        tag = self._tag("move")
        with self._writing(dst) as connection:
            self._lock_tree(connection, src, dst, shared=parent(dst))
            self._rename_rows(connection, tag, src, dst, replace=replace)
        self._committed(tag)

    def _move_over_tree(self, src: str, dst: str) -> None:
        """The old tree's deletion and the move in one transaction: a crash or a refusal leaves both trees as
        they were, and no reader sees ``dst`` missing."""
        tag = self._tag("move", rows=True)
        with self._writing(dst) as connection:
            self._lock_tree(connection, src, trees=(dst,), shared=parent(dst))
            existing = self._row(connection, dst)
            if existing is not None and existing.is_directory:  # else gone or a file since the check: as a move
                self._delete_tree_rows(connection, tag, dst)
            self._rename_rows(connection, tag, src, dst, replace=False)
        self._committed(tag)

    def _copy_over_tree(self, src: str, dst: str) -> None:
        """The old tree's deletion and the copy in one transaction, held to the quota by what the two add up to
        (a copy that frees more than it adds is allowed in a workspace over its limit, as on every backend)."""
        tag = self._tag("copy", rows=True)
        with self._writing(dst) as connection:
            self._lock_tree(connection, dst, shared=parent(dst))
            existing = self._row(connection, dst)
            replaced = Usage()
            if existing is not None and existing.is_directory:
                replaced = self._files_below(connection, dst)
                self._delete_tree_rows(connection, tag, dst)
            self._copy_tree_rows(connection, tag, src, dst, replaced=replaced)
        self._committed(tag)

    def _files_below(self, connection: Connection, path: str) -> Usage:
        """The bytes and files of ``path``'s tree, as ``connection``'s transaction sees it."""
        totals = sa.select(sa.func.coalesce(sa.func.sum(F.c.size_bytes), 0), sa.func.count()).where(
            F.c.session_id == self._session, _subtree(path), sa.not_(F.c.is_directory)
        )
        size, files = connection.execute(totals).one()
        return Usage(int(size), int(files))

    def _rename_rows(
        self, connection: Connection, tag: JournalTag | None, src: str, dst: str, *, replace: bool
    ) -> None:
        """:meth:`_rename`'s rows in ``connection``'s transaction (the trees already locked)."""
        moved = self._row(connection, src, lock=True)
        if moved is None:
            raise errors.file_not_found(src)
        self._parent_dir(connection, dst)
        existing = self._row(connection, dst, lock=True)
        if existing is not None:
            if not replace or existing.is_directory:
                raise errors.file_exists(dst)
            if existing.is_readonly:
                raise ReadOnlyFileError(dst)
            connection.execute(sa.delete(F).where(self._where(dst)))
        self._graft(connection, src, dst, keep_times=True)
        connection.execute(sa.delete(F).where(self._where(src)))
        before = None if existing is None else existing.blob_id
        after = DIRECTORY if moved.is_directory else moved.blob_id
        size_before = 0 if existing is None else existing.size_bytes
        change = Change(dst, before, after, size_before, moved.size_bytes, from_path=src)
        self._journal_changes(connection, tag, change)
        if existing is not None:
            self._store.release(connection, [existing.blob_id], dst)

    def _copy_file(self, src: str, dst: str) -> None:
        """The copy points at the same content and keeps the read-only flag, as a tree copy's files do."""
        tag = self._tag("copy")
        with self._writing(dst) as connection:
            source = self._file_row(connection, src)
            self._parent_dir(connection, dst)
            existing = self._row(connection, dst, lock=True)
            self._check_writable_file(existing, dst, "overwrite")
            try:
                self._put_file(
                    connection,
                    dst,
                    source.blob_id,
                    source.size_bytes,
                    existing=existing,
                    mode="overwrite",
                    tag=tag,
                    read_only=True if source.is_readonly else None,
                )
            except _Raced:
                raise errors.file_exists(dst) from None
            self._hold_to_quota(connection, dst, _growth(existing, source.size_bytes))
        self._committed(tag)

    def _copy_tree(self, src: str, dst: str) -> None:
        tag = self._tag("copy", rows=True)
        with self._writing(dst) as connection:
            self._copy_tree_rows(connection, tag, src, dst)
        self._committed(tag)

    def _copy_tree_rows(
        self, connection: Connection, tag: JournalTag | None, src: str, dst: str, *, replaced: Usage = _NOTHING
    ) -> None:
        """:meth:`_copy_tree`'s rows, journal and quota check in ``connection``'s transaction (``replaced``: what
        the same transaction deleted at ``dst`` first, so the check is on the net growth)."""
        if self._row(connection, src) is None:
            raise errors.file_not_found(src)
        self._parent_dir(connection, dst)
        if self._row(connection, dst) is not None:
            raise errors.file_exists(dst)
        grafted = self._graft(connection, src, dst, keep_times=False)
        if tag is not None:
            rows = tree_rows(tag, self._session, datetime.now(UTC), dst, deleting=False)
            insert_rows(connection, self._session, rows, F.c.path)
        self._hold_to_quota(connection, dst, Usage(grafted.bytes - replaced.bytes, grafted.files - replaced.files))

    def _iter_files(self, base: str) -> Iterator[str]:
        with self._store.read() as connection:
            row = self._row(connection, base)
            if row is None or not row.is_directory:
                return iter(())
            query = sa.select(F.c.path).where(
                F.c.session_id == self._session, _subtree(base), F.c.is_directory.is_(False)
            )
            return iter([r[0] for r in connection.execute(query)])

    def _grep_candidates(self, pattern: GrepPattern, base: str) -> Iterable[str]:
        """Files that may match: the trigram index answers for small files when the pattern requires a
        literal of three characters or more (see :mod:`._grep_index`); otherwise every file."""
        literal = required_literal(pattern.pattern)
        text = None if literal is None else literal.decode("utf-8")
        if text is None or not grep_index.usable(text):
            return self._iter_files(base)
        self._store.index_for_grep()
        with self._store.read() as connection:
            row = self._row(connection, base)
            if row is None or not row.is_directory:
                return []
            return grep_index.candidates(connection, self._store.dialect, self._session, base, text)

    # --- compare-and-set: one transaction checks the version and commits -----------------------------

    def _content_id(self, path: str) -> str:
        row = self._row_tuple(path)
        if row[1]:
            raise errors.is_a_directory(path)
        return str(row[3])  # a blob's id is its content id (the same hash every backend computes)

    def _open_versioned(self, path: str) -> VersionedContent:
        row, data = self._read_small(path, _INLINE_VERSIONED)  # one statement: the row and, if small, content
        if data is None:
            full, reader = self._open_row_reader(path)
            return VersionedContent(self._stat_of(full), str(full[3]), reader)
        return VersionedContent(self._stat_of(row), str(row[3]), StreamReader(path, io.BytesIO(data), len(data)))

    def write_bytes_if(
        self, path: str, content: BytesLike, *, expect: str, read_only: bool | None = None
    ) -> WriteResult:
        """As :meth:`BaseFilesystem.write_bytes_if`: the check, the content and the flag are one transaction."""
        data = bytes(content)
        with self._conditional_target(path) as norm:
            if len(data) > MAX_CONVENIENCE_BYTES:
                raise too_big("Writing", path)
            with self._quota_step() as step:  # checked again in the write's transaction
                self._check_write(norm, len(data), "overwrite", step)
            self._write_content(norm, data, "overwrite", expect=expect, read_only=read_only)
        return WriteResult(norm, len(data), "overwrite")

    def open_write_if(self, path: str, *, expect: str, read_only: bool | None = None) -> ByteWriter:
        """As :meth:`BaseFilesystem.open_write_if`: the commit's transaction checks the version, stores the
        content and sets the flag."""
        with self._conditional_target(path) as norm:
            with self._store.read() as connection:
                self._parent_dir(connection, norm)
                row = self._row(connection, norm)
                _check_expected(row, norm, expect)
                self._check_writable_file(row, norm, "overwrite", unlocking=read_only is False)
            uploader = self._uploader(norm, "overwrite", NO_BASE, expect, read_only)
            return self._quota_writer(norm, "overwrite", uploader)

    def set_read_only_if(self, path: str, read_only: bool, *, expect: str) -> None:
        """As :meth:`BaseFilesystem.set_read_only_if`: the check and the flag are one transaction."""
        with self._conditional_target(path) as norm:
            self._set_flag(norm, bool(read_only), expect=expect)

    def _set_flag(self, path: str, read_only: bool, *, expect: str | None) -> None:
        """Set a file's flag (over content id ``expect``, where given), journaled as ``set_read_only`` when it
        changes: an entry that undo can put back."""
        tag = self._tag("set_read_only")
        with self._writing(path) as connection:
            row = self._row(connection, path, lock=True)
            _check_expected(row, path, expect)
            if row is None:
                raise errors.file_not_found(path)
            if row.is_directory:
                raise errors.is_a_directory(path, "Only files can be marked read-only")
            if bool(row.is_readonly) == read_only:
                return
            connection.execute(_SET_FLAG, {"b_session": self._session, "b_path": path, "flag": read_only})
            size = row.size_bytes
            self._journal_changes(
                connection, tag, Change(path, row.blob_id, row.blob_id, size, size, None, not read_only, read_only)
            )
        self._committed(tag)

    def create_bytes(self, path: str, content: BytesLike, *, read_only: bool = False) -> WriteResult:
        """As :meth:`BaseFilesystem.create_bytes`: the file's row, flag included, is inserted in one transaction."""
        data = bytes(content)
        norm = self._norm(path)
        self._writable(path)
        with caller_paths({norm: path}):
            if norm == ROOT:
                raise errors.is_a_directory(norm)
            if len(data) > MAX_CONVENIENCE_BYTES:
                raise too_big("Writing", path)
            with self._quota_step() as step:  # checked again in the write's transaction
                self._check_write(norm, len(data), "create", step)
            try:
                self._write_content(norm, data, "create", read_only=read_only)
            except FileNotFoundError:  # the parent usually exists: make it only when the write says it is missing
                self._ensure_parents(norm)
                self._write_content(norm, data, "create", read_only=read_only)
        return WriteResult(norm, len(data), "create")

    # --- usage --------------------------------------------------------------------------------------------

    usage_is_live = True  # one row kept by triggers: right even when other processes write the session

    def _usage(self) -> Usage:
        """The session's usage row (migration ``0009``); the first time, counted and made, in a transaction that
        holds the session's changes off (so each change either is in the count or finds the row)."""
        driver = self._store.driver
        kept = driver.fetch_row(driver.sql(_USAGE_ROW), (self._session,))  # a quota asks before every growing change
        if kept is not None:
            return Usage(int(kept[0]), int(kept[1]))
        row = sa.select(session_usage.c.bytes, session_usage.c.files).where(session_usage.c.session_id == self._session)
        counted = sa.select(
            sa.literal(self._session),
            sa.func.coalesce(sa.func.sum(session_files.c.size_bytes), 0),
            sa.func.count(),
        ).where(
            session_files.c.session_id == self._session,
            sa.not_(session_files.c.is_directory),
        )
        if self.read_only:  # changes nothing, so takes no write lock: counted, not kept
            with self._store.read() as connection:
                self._store.hold_session(connection, self._session, lock=False)  # a deleted session raises
                _, total, files = connection.execute(counted).one()
            return Usage(int(total), int(files))
        with self._store.session_write(self._session) as connection:
            self._store.hold_session(connection, self._session)  # before the advisory lock (_lock_order)
            versions.take_mark(connection, self._session)
            made = (
                self._store.insert(session_usage)
                .from_select(["session_id", "bytes", "files"], counted)
                .on_conflict_do_nothing(index_elements=["session_id"])
            )
            connection.execute(made)
            found = connection.execute(row).first()
        return Usage(0, 0) if found is None else Usage(int(found.bytes), int(found.files))

    def _usage_in(self, connection: Connection) -> Usage | None:
        """The session's usage row as ``connection``'s transaction sees it (``None``: not made yet)."""
        row = connection.execute(_USAGE_NOW, {"b_session": self._session}).first()
        return None if row is None else Usage(int(row.bytes), int(row.files))

    def _hold_to_quota(self, connection: Connection, path: str, grew: Usage) -> None:
        """The quota's guarantee, in a growing change's own transaction after its statements (the check before
        it gives the early error; writers checked at the same moment all pass that one). The change's triggers
        have just updated the usage row, so on PostgreSQL the row's lock has ordered it after every concurrent
        writer: the row read here holds all of them committed, and this change (SQLite runs one writer at a
        time). Past a limit this change grew toward, ``QuotaExceededError`` rolls it all back."""
        quota = self._quota
        if quota is None or not _grows_toward(quota, grew):
            return
        now = self._usage_in(connection)
        refused = None if now is None else over_quota(path, quota, now, grew.bytes, grew.files)
        if refused is not None:
            raise refused

    def _guard_small_write(self, tx: Any, path: str, grew: tuple[int, int]) -> None:
        """:meth:`_hold_to_quota` for the small write's driver transaction: one statement in its last batch (none
        without a quota)."""
        quota = self._quota
        if quota is None or not _grows_toward(quota, Usage(*grew)):
            return
        limits = (
            quota.max_bytes if grew[0] > 0 else None,
            quota.max_files if grew[1] > 0 else None,
            self._session,
        )
        cursor = tx.run(self._sql.quota_guard, limits)
        if self._store.driver.postgres:
            return  # it fails at the COMMIT's round trip instead (see QUOTA_GUARD); _write_small_rows says why
        row = cursor.fetchone()
        if row is not None and row[2]:
            refused = over_quota(path, quota, Usage(int(row[0]), int(row[1])), *grew)
            raise refused or QuotaExceededError(path, "Workspace quota exceeded")

    def _refusal(self, path: str, grew: tuple[int, int]) -> QuotaExceededError:
        """The error for a write its transaction's check refused on PostgreSQL, worded from the usage now."""
        assert self._quota is not None
        now = self._usage()
        after = Usage(now.bytes + max(grew[0], 0), now.files + max(grew[1], 0))
        refused = over_quota(path, self._quota, after, *grew)
        return refused or QuotaExceededError(path, "Workspace quota exceeded by writers at the same moment")

    # --- per-file read-only flag ------------------------------------------------------------------------

    def set_read_only(self, path: str, read_only: bool = True) -> None:
        """Mark a file read-only (its content cannot change; it can still be deleted) or writable again."""
        norm = self._norm(path)
        self._writable(path)
        with caller_paths({norm: path}):
            self._set_flag(norm, bool(read_only), expect=None)

    def delete_session(self) -> None:
        """Delete this session with all its files and snapshots."""
        self._writable("/")
        self._store.delete_session(self._session)

    # --- snapshots ---------------------------------------------------------------------------------------

    def _snapshot_root(self) -> str:
        return f"session:{self._session}"

    def _snapshot_value(self, row: Row[Any]) -> FilesystemSnapshot:
        return FilesystemSnapshot(
            snapshot_id=uuid.UUID(row.id),
            created_at=_utc(row.created_at),
            backend=self.backend_name,
            root_path=self._snapshot_root(),
            tag=row.tag,
            parent_id=uuid.UUID(row.parent_id) if row.parent_id else None,
            file_count=row.file_count,
            total_bytes=row.total_bytes,
            commit_ref=row.id,
            strategy="manifest",
        )

    def _capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        """One row: the snapshot records the session's mark, and the triggers keep, from then on, the rows changes
        replace (see :mod:`._versions`); no file row is copied. Its file count and bytes come from the previous
        snapshot and the paths changed since (the session's first snapshot counts the rows once)."""
        snapshot_id = str(draft.snapshot_id)
        with self._store.session_write(self._session) as connection:
            self._store.hold_session(connection, self._session)  # a deleted session raises; before the advisory lock
            versions.take_mark(connection, self._session)  # no change of the session is half-way while we read
            count, total = self._file_totals(connection)
            connection.execute(
                sa.insert(snapshots).values(
                    id=snapshot_id,
                    session_id=self._session,
                    tag=draft.tag,
                    parent_id=str(draft.parent_id) if draft.parent_id else None,
                    file_count=count,
                    total_bytes=total,
                    created_at=draft.created_at,
                    mark=versions.current_mark(connection),
                )
            )
        return self._completed(
            draft, file_count=int(count), total_bytes=int(total), commit_ref=snapshot_id, strategy="manifest"
        )

    def _file_totals(self, connection: Connection) -> tuple[int, int]:
        """The session's file count and bytes: from its newest snapshot kept by mark and the paths changed since
        (O(changes)); the first snapshot of a session (or the first after its others were dropped) counts every
        row once."""
        newest = connection.execute(
            sa.select(snapshots.c.mark, snapshots.c.file_count, snapshots.c.total_bytes)
            .where(snapshots.c.session_id == self._session, snapshots.c.mark.is_not(None))
            .order_by(snapshots.c.mark.desc())
            .limit(1)
        ).first()
        if newest is None:
            count, total = connection.execute(
                sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(F.c.size_bytes), 0)).where(
                    F.c.session_id == self._session, F.c.is_directory.is_(False)
                )
            ).one()
            return int(count), int(total)
        count, total = int(newest.file_count), int(newest.total_bytes)
        then = {r.path: r for r in connection.execute(versions.first_versions(self._session, int(newest.mark)))}
        now = {r.path: r for r in self._rows_at(connection, sorted(then), F.c.path, F.c.is_directory, F.c.size_bytes)}
        for path, old in then.items():
            if old.existed and not old.is_directory:
                count, total = count - 1, total - int(old.size_bytes)
            new = now.get(path)
            if new is not None and not new.is_directory:
                count, total = count + 1, total + int(new.size_bytes)
        return count, total

    def _own_snapshot(self, connection: Connection, snapshot: FilesystemSnapshot, *, family: bool = True) -> Row[Any]:
        """The snapshot's row, if this session may use it: its own, or (``family``) one of a session forked from
        the same line (restore, diff and merge read those; only the session that took one deletes it)."""
        row = connection.execute(sa.select(snapshots).where(snapshots.c.id == str(snapshot.snapshot_id))).first()
        if row is None or (
            row.session_id != self._session and not (family and same_family(connection, self._session, row.session_id))
        ):
            raise SnapshotNotFoundError(f"Session {self._session!r} has no snapshot {snapshot.snapshot_id}")
        return row

    def _marked(self, row: Row[Any] | None) -> bool:
        """Whether a snapshot is this session's own and kept by mark: then only the versions after it count."""
        return row is not None and row.mark is not None and row.session_id == self._session

    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        """Put back the snapshot's rows, touching only the rows that differ from it. A snapshot of this session
        kept by mark reads only the versions after its mark (O(changes since)); any other (a merge result, one
        of another session of the family, one taken before migration 0008) is compared set-based in the
        database, as a whole."""
        tag = self._tag("restore", rows=True)
        postgres = self._store.dialect == "postgresql"
        for attempt in range(1, _RESTORE_ATTEMPTS + 1):
            try:
                with self._store.session_write(self._session) as connection:
                    released = self._restore_rows(connection, snapshot, tag)
                    if not postgres:  # one writer at a time: collected in the same transaction
                        self._store.release(connection, released)
                break
            except ConcurrentChangeError:  # PostgreSQL broke a deadlock (see _lock_order): nothing changed
                if attempt == _RESTORE_ATTEMPTS:
                    raise
        self._committed(tag)
        if postgres and released:  # after the commit, as a small write's (see _lock_order)
            with self._store.write() as connection:
                self._store.release(connection, released, committed=True)

    def _restore_rows(self, connection: Connection, snapshot: FilesystemSnapshot, tag: JournalTag | None) -> list[str]:
        """The restore's changes in ``connection``'s transaction; the content it no longer references."""
        row = self._own_snapshot(connection, snapshot)
        before = self._usage_in(connection) if self._quota is not None else None
        if self._marked(row):
            released = self._restore_versions(connection, tag, int(row.mark))
        else:
            released = self._restore_entries(connection, tag, versions.entries(row))
        if before is not None:
            after = self._usage_in(connection) or before
            self._hold_to_quota(connection, "/", Usage(after.bytes - before.bytes, after.files - before.files))
        return released

    def _restore_versions(self, connection: Connection, tag: JournalTag | None, mark: int) -> list[str]:
        """Restore to the session's state at ``mark``: each path changed since is set to its oldest version after
        the mark (no version: the path is as it is now). Journaled, like the set-based restore, for every path
        whose kind or content changes (times alone are no change). The content no longer referenced."""
        session = self._session
        # no session-wide lock against the session's writers, as the set-based restore takes none: a writer that
        # holds a row this restore must change would wait for that lock while the restore waits for its row (a
        # deadlock). On PostgreSQL the rows it changes are locked first (_lock_order); a change of a path not
        # changed since the mark, made at the same moment, races as it did with the set-based restore.
        wanted = {r.path: r for r in connection.execute(versions.first_versions(session, mark)) if r.path != ROOT}
        if not wanted:
            return []
        if self._store.dialect == "postgresql":
            rows = lock_paths(connection, session, wanted)
        else:
            rows = self._rows_at(connection, sorted(wanted), F)
        current = {r.path: r for r in rows}
        plan = _RestorePlan(session)
        for path, then in wanted.items():
            plan.add(path, then, current.get(path))
        if tag is not None:
            insert_changes(connection, tag, session, plan.changes())
        if plan.deletes:  # children first: a directory's delete would cascade to them anyway
            deletes = [{"b_session": session, "b_path": p} for p in sorted(plan.deletes, reverse=True)]
            connection.execute(_DELETE_ROW, deletes)
        if plan.updates:
            connection.execute(_SET_ROW, plan.updates)
        if plan.inserts:  # parents before children
            connection.execute(_INSERT_ROW, sorted(plan.inserts, key=lambda v: v["path"]))
        return [b for b in plan.released if b]

    def _rows_at(self, connection: Connection, paths: Sequence[str], *columns: Any) -> list[Row[Any]]:
        """The session's rows at ``paths`` (those that exist): each one a lookup by the whole key, in batches of
        ``UNION ALL`` (an ``IN`` list was planned as a scan of the session's rows whenever PostgreSQL's
        statistics were older than the session's growth)."""
        found: list[Row[Any]] = []
        for start in range(0, len(paths), _KEY_BATCH):
            lookups = [
                sa.select(*columns).where(F.c.session_id == self._session, F.c.path == path)
                for path in paths[start : start + _KEY_BATCH]
            ]
            found.extend(connection.execute(lookups[0] if len(lookups) == 1 else sa.union_all(*lookups)))
        return found

    def _restore_entries(self, connection: Connection, tag: JournalTag | None, entries: Any) -> list[str]:
        """Put back the rows of ``entries`` (a snapshot's whole manifest), set-based: the database compares the
        two sets; unchanged rows are neither deleted nor rewritten. The content no longer referenced."""
        if self._store.dialect == "postgresql":
            lock_session(connection, self._session)  # any row may change: all are locked first (_lock_order)
        # path by plain equality, so both databases look the entry up by its key (IS NOT DISTINCT FROM is
        # not indexable on PostgreSQL: it made this an O(n²) scan); the other columns compare as values
        same = sa.and_(
            entries.c.path == F.c.path, *[entries.c[c].is_not_distinct_from(F.c[c]) for c in _ENTRY_COLUMNS[1:]]
        )
        kept = sa.exists().where(same)
        changed = sa.and_(F.c.session_id == self._session, F.c.path != ROOT, ~kept)
        if tag is not None:
            self._journal_restore(connection, tag, entries)
        released = [r[0] for r in connection.execute(sa.select(F.c.blob_id).where(changed).distinct())]
        connection.execute(sa.delete(F).where(changed))  # a removed directory's rows cascade
        present = sa.exists().where(F.c.session_id == self._session, F.c.path == entries.c.path)
        connection.execute(
            sa.insert(F).from_select(
                ["session_id", *_ENTRY_COLUMNS],
                sa.select(sa.literal(self._session), *[entries.c[c] for c in _ENTRY_COLUMNS])
                .where(entries.c.path != ROOT, ~present)
                .order_by(entries.c.path),  # parents before children
            )
        )
        return [b for b in released if b]

    def _journal_restore(self, connection: Connection, tag: JournalTag, entries: Any) -> None:
        """Journal what restoring ``entries`` changes, before it does: every path whose kind, content or read-only
        flag differs between the session and the snapshot (times alone are no change)."""
        now, twin = datetime.now(UTC), entries.alias("twin")
        mine = sa.case((F.c.is_directory, sa.literal(DIRECTORY)), else_=F.c.blob_id)
        theirs = sa.case((twin.c.is_directory, sa.literal(DIRECTORY)), else_=twin.c.blob_id)
        at = twin.c.path == F.c.path
        their_kind = sa.select(theirs).where(at).scalar_subquery()
        their_size = sa.select(twin.c.size_bytes).where(at).scalar_subquery()
        their_flag = sa.select(twin.c.is_readonly).where(at).scalar_subquery()
        file_now, no_file_then = sa.not_(F.c.is_directory), sa.or_(their_kind.is_(None), their_kind == DIRECTORY)
        flag_changes = sa.and_(file_now, sa.not_(no_file_then), F.c.is_readonly != their_flag)  # undo puts it back
        locked_goes = sa.and_(file_now, F.c.is_readonly, no_file_then)  # undo brings it back read-only
        flags = (
            sa.case((sa.or_(flag_changes, locked_goes), F.c.is_readonly), else_=sa.null()),
            sa.case((flag_changes, their_flag), else_=sa.null()),
        )
        sizes = (F.c.size_bytes, sa.func.coalesce(their_size, 0))
        changed = (
            tagged(tag, self._session, now, F.c.path, mine, their_kind, *sizes, flags=flags)
            .where(F.c.session_id == self._session, F.c.path != ROOT)
            .where(sa.or_(their_kind.is_(None), their_kind != mine, flag_changes))
        )
        present = sa.exists().where(F.c.session_id == self._session, F.c.path == twin.c.path)
        created = (
            tagged(
                tag,
                self._session,
                now,
                twin.c.path,
                sa.literal(None, type_=sa.Text),
                theirs,
                sa.literal(0),
                twin.c.size_bytes,
            )
            .select_from(twin)
            .where(twin.c.path != ROOT, ~present)
        )
        insert_rows(connection, self._session, changed, F.c.path.desc())
        insert_rows(connection, self._session, created, twin.c.path)

    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        with self._store.read() as connection:
            if snapshot is None:
                query = sa.select(F.c.path, F.c.blob_id).where(
                    F.c.session_id == self._session, F.c.is_directory.is_(False)
                )
            else:
                entries = versions.entries(self._own_snapshot(connection, snapshot))
                query = sa.select(entries.c.path, entries.c.blob_id).where(entries.c.is_directory.is_(False))
            return {r.path: r.blob_id for r in connection.execute(query)}

    def _diff(self, base: FilesystemSnapshot, target: FilesystemSnapshot | None) -> FilesystemDiff:
        """Only the paths that differ come back, not two whole manifests: from the versions after the older mark
        when both sides are this session's (its files or snapshots kept by mark), else compared in the database."""
        with self._store.read() as connection:
            base_row = self._own_snapshot(connection, base)
            target_row = None if target is None else self._own_snapshot(connection, target)
            if self._marked(base_row) and (target_row is None or self._marked(target_row)):
                return self._diff_versions(connection, base_row, target_row)

            def files(row: Row[Any] | None) -> Any:
                if row is None:
                    return sa.select(F.c.path, F.c.blob_id).where(F.c.session_id == self._session, ~F.c.is_directory)
                entries = versions.entries(row)
                return sa.select(entries.c.path, entries.c.blob_id).where(~entries.c.is_directory)

            before, after = files(base_row).subquery("before"), files(target_row).subquery("after")
            changed = connection.execute(
                sa.select(after.c.path, before.c.path.is_(None))
                .select_from(after.outerjoin(before, before.c.path == after.c.path))
                .where(sa.or_(before.c.path.is_(None), before.c.blob_id != after.c.blob_id))
                .order_by(after.c.path)
            ).all()
            deleted = connection.execute(
                sa.select(before.c.path)
                .where(~sa.exists().where(after.c.path == before.c.path))
                .order_by(before.c.path)
            ).scalars()
            total = connection.execute(sa.select(sa.func.count()).select_from(after)).scalar_one()
            deleted_paths = tuple(deleted)
        added = tuple(path for path, new in changed if new)
        modified = tuple(path for path, new in changed if not new)
        return FilesystemDiff(added, modified, deleted_paths, int(total) - len(changed))

    def _diff_versions(self, connection: Connection, base: Row[Any], target: Row[Any] | None) -> FilesystemDiff:
        """Compare two states of this session (``target`` ``None``: now) from the versions after the older mark
        and the current rows of those paths only; the unchanged count comes from the base's file count."""
        session = self._session
        low = int(base.mark) if target is None else min(int(base.mark), int(target.mark))
        kept: dict[str, list[Any]] = {}
        for version in connection.execute(
            sa.select(V.c.seq, V.c.path, V.c.existed, V.c.is_directory, V.c.blob_id)
            .where(V.c.session_id == session, V.c.seq > low)
            .order_by(V.c.path, V.c.seq)
        ):
            kept.setdefault(version.path, []).append(version)
        if not kept:
            return FilesystemDiff((), (), (), int(base.file_count))
        now_rows = self._rows_at(connection, sorted(kept), F.c.path, F.c.is_directory, F.c.blob_id)
        current = {r.path: (None if r.is_directory else r.blob_id) for r in now_rows}

        def content(path: str, mark: int | None) -> str | None:
            """The file's content id at ``mark`` (``None``: now), or ``None`` where no file was."""
            if mark is not None:
                for version in kept[path]:
                    if version.seq > mark:
                        return None if not version.existed or version.is_directory else str(version.blob_id)
            return current.get(path)

        added: list[str] = []
        modified: list[str] = []
        deleted: list[str] = []
        later = None if target is None else int(target.mark)
        for path in sorted(kept):
            before, after = content(path, int(base.mark)), content(path, later)
            if before is None and after is not None:
                added.append(path)
            elif before is not None and after is None:
                deleted.append(path)
            elif before is not None and before != after:
                modified.append(path)
        unchanged = int(base.file_count) - len(deleted) - len(modified)
        return FilesystemDiff(tuple(added), tuple(modified), tuple(deleted), unchanged)

    def _kept_snapshots(self) -> Sequence[FilesystemSnapshot]:
        with self._store.read() as connection:
            rows = connection.execute(
                sa.select(snapshots).where(snapshots.c.session_id == self._session).order_by(snapshots.c.created_at)
            ).all()
        return [self._snapshot_value(r) for r in rows]

    def _drop_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        with self._store.write() as connection:
            row = self._own_snapshot(connection, snapshot, family=False)
            held = [
                r[0]
                for r in connection.execute(
                    sa.select(E.c.blob_id).where(E.c.snapshot_id == str(snapshot.snapshot_id)).distinct()
                )
            ]
            connection.execute(sa.delete(snapshots).where(snapshots.c.id == str(snapshot.snapshot_id)))
            if row.mark is not None:  # the versions only this snapshot needed go, with the content only they held
                held += versions.collect(connection, self._session)
            self._store.release(connection, held)

    # --- forks and merge ----------------------------------------------------------------------------------

    def fork(
        self,
        snapshot: FilesystemSnapshot | None = None,
        *,
        session_id: str | None = None,
        read_only: bool | None = None,
    ) -> SqlFilesystem:
        """A new session of the same store starting from the current files or ``snapshot``.

        Costs one transaction copying the file rows (O(files) rows of metadata, no content: blobs are shared
        and deduplicated; SQLite copies them without foreign key checks); the fork's journal starts empty. The
        fork and this session are one family: each may restore, diff and merge the other's snapshots, so an
        agent's work on a fork merges back here with :meth:`merge`. ``session_id`` names the fork (default: this
        session's id plus a random suffix).

        Raises:
            FileExistsError: ``session_id`` is taken.
            FileNotFoundError: this session was deleted (by any connection).
            SnapshotNotFoundError: ``snapshot`` is not this family's.
        """
        fork_id = session_id if session_id is not None else f"{self._session[:180]}.fork-{uuid.uuid4().hex[:12]}"
        _check_session_id(fork_id)
        if snapshot is not None:
            self._check_compatible(snapshot)
        with self._store.write(checked=False) as connection:  # copies of valid rows: SQLite skips FK checks
            self._store.hold_session(connection, self._session)  # a deleted session forks into nothing: raise
            chosen = None if snapshot is None else self._own_snapshot(connection, snapshot)
            copy_session(connection, self._store, self._session, fork_id, chosen)
        return SqlFilesystem(
            self._store,
            fork_id,
            read_only=self._read_only if read_only is None else read_only,
            mount_point=self._mount_point,
            create=False,
            quota=self._quota,
        )

    def family(self) -> Sequence[str]:
        """The sessions whose snapshots this one may restore and merge: itself and those forked along its line."""
        with self._store.read() as connection:
            return family_sessions(connection, self._session)

    def mergeable_snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots of this session's whole family, oldest first."""
        members = self.family()
        with self._store.read() as connection:
            rows = connection.execute(
                sa.select(snapshots).where(snapshots.c.session_id.in_(members)).order_by(snapshots.c.created_at)
            ).all()
        return [self._snapshot_value(r) for r in rows]

    def _snapshot_content(self, snapshot: FilesystemSnapshot, path: str) -> bytes | ByteReader:
        with self._store.read() as connection:
            entry = entry_at(connection, self._own_snapshot(connection, snapshot), path)
            if entry is None or entry.is_directory:
                raise errors.file_not_found(path)
            hashes, inline = self._store.blob_parts(connection, entry.blob_id)
            if inline is not None:
                return inline
            pieces = self._store.checked_chunks(connection, hashes, entry.size_bytes, path)
            if entry.size_bytes <= MAX_CONVENIENCE_BYTES:
                return b"".join(pieces)
            spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - the reader closes it
            for piece in pieces:
                spool.write(piece)
        spool.seek(0)
        return StreamReader(path, spool, entry.size_bytes)

    def _read_only_files(self, snapshot: FilesystemSnapshot) -> Collection[str]:
        with self._store.read() as connection:
            entries = versions.entries(self._own_snapshot(connection, snapshot))
            query = sa.select(entries.c.path).where(entries.c.is_directory.is_(False), entries.c.is_readonly.is_(True))
            return frozenset(connection.execute(query).scalars())

    def _capture_merged(
        self,
        draft: FilesystemSnapshot,
        start: FilesystemSnapshot,
        writes: Mapping[str, Written],
        deletes: Collection[str],
        *,
        read_only: Mapping[str, bool],
    ) -> FilesystemSnapshot:
        """One transaction: ``start``'s entries copied set-based (rows only), the merged paths fixed, new
        content stored as blobs (deduplicated like any write), the merged read-only flags set."""
        with self._store.session_write(self._session) as connection:
            count, total = capture_merged(
                connection,
                self._store,
                session_id=self._session,
                draft=draft,
                start=self._own_snapshot(connection, start),
                writes=writes,
                deletes=deletes,
                read_only=read_only,
            )
        return self._completed(
            draft, file_count=count, total_bytes=total, commit_ref=str(draft.snapshot_id), strategy="manifest"
        )

    def __repr__(self) -> str:
        flags = ", read_only=True" if self._read_only else ""
        return f"SqlFilesystem({self._store.dialect}, session={self._session!r}{flags})"


def _growth(row: Row[Any] | None, size: int) -> Usage:
    """What writing ``size`` bytes over ``row`` (``None``: no file there) adds to the session."""
    return Usage(size, 1) if row is None else Usage(size - int(row.size_bytes), 0)


def _grows_toward(quota: Quota, grew: Usage) -> bool:
    """Whether a change that adds ``grew`` can pass one of ``quota``'s totals (only then is it checked again)."""
    return (grew.bytes > 0 and quota.max_bytes is not None) or (grew.files > 0 and quota.max_files is not None)


def _check_session_id(session_id: object) -> None:
    if not isinstance(session_id, str) or not session_id or len(session_id) > 200 or not session_id.isprintable():
        raise ValueError(f"session_id must be a short printable string, got {session_id!r}")


def _check_expected(row: Row[Any] | Checked | None, path: str, expect: str | None) -> None:
    """Compare-and-set: refuse unless the row holds the content the caller expects."""
    if expect is None:
        return
    if row is None or row.is_directory:
        raise PreconditionFailedError(path, "The file no longer exists")
    if expect not in (ANY_VERSION, row.blob_id):
        raise PreconditionFailedError(path)


@dataclasses.dataclass
class _RestorePlan:
    """What restoring a session's changed paths to their versions does: rows to delete, update and insert, content
    to release, and the journal's changes (paths whose kind, content or read-only flag changes; times alone are no
    change)."""

    session: str
    deletes: list[str] = dataclasses.field(default_factory=list)
    updates: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    inserts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    released: list[str | None] = dataclasses.field(default_factory=list)
    gone: list[Change] = dataclasses.field(default_factory=list)
    back: list[Change] = dataclasses.field(default_factory=list)

    def add(self, path: str, then: Any, now: Any) -> None:
        """Bring ``path`` from its row ``now`` (``None``: no row) back to its version ``then``."""
        theirs = _kind(then) if then.existed else None
        flags: tuple[bool | None, bool | None] = (None, None)
        files = now is not None and then.existed and not (now.is_directory or then.is_directory)
        if files and bool(now.is_readonly) != bool(then.is_readonly):  # a flag alone is a change (undo puts it back)
            flags = (bool(now.is_readonly), bool(then.is_readonly))
        elif now is not None and now.is_readonly and not now.is_directory and theirs in {None, DIRECTORY}:
            flags = (True, None)  # a read-only file goes: undo brings it back read-only
        if now is not None and (theirs != _kind(now) or flags[0] is not None):
            size_then = then.size_bytes if then.existed else 0
            self.gone.append(Change(path, _kind(now), theirs, now.size_bytes, size_then, None, *flags))
        elif now is None and then.existed:
            self.back.append(Change(path, None, theirs, 0, then.size_bytes))
        if now is not None and then.existed and bool(now.is_directory) == bool(then.is_directory):
            if not versions.same_row(now, then):  # in place: a directory keeps the rows below it
                self.updates.append({"b_session": self.session, "b_path": path, **_prefixed(versions.row_values(then))})
                if now.blob_id != then.blob_id:
                    self.released.append(now.blob_id)
            return
        if now is not None:
            self.deletes.append(path)
            self.released.append(now.blob_id)
        if then.existed:
            self.inserts.append({"session_id": self.session, **versions.row_values(then)})

    def changes(self) -> list[Change]:
        """The journal's rows, as the set-based restore writes them: changed paths deepest first, then those
        brought back, parents first."""
        return [*sorted(self.gone, key=lambda c: c.path, reverse=True), *sorted(self.back, key=lambda c: c.path)]


def _where_now(path: str, moved_back: Sequence[tuple[str, str]]) -> str | None:
    """Where what an undo will have at ``path`` is now, after it moved directories back (``(from, to)``, in
    order); ``None``: a move back emptied the place (nothing there yet)."""
    for source, back in reversed(moved_back):
        if path.startswith(back + "/"):
            path = source + path[len(back) :]
        elif path.startswith(source + "/"):
            return None
    return path


def _carry_flags(flags: dict[str, bool], source: str, back: str) -> None:
    """The flags known below directory ``source`` go with it to ``back`` (whose own are replaced)."""
    below = {p: flags.pop(p) for p in [p for p in flags if p.startswith(source + "/")]}
    for stale in [p for p in flags if p.startswith(back + "/")]:
        del flags[stale]
    flags.update({back + p[len(source) :]: flag for p, flag in below.items()})


def _kind(row: Any) -> str | None:
    """What a journal row calls a row's content: ``'directory'`` or the blob id."""
    return DIRECTORY if row.is_directory else row.blob_id


def _prefixed(values: Mapping[str, Any]) -> dict[str, Any]:
    """A version's columns as :data:`_SET_ROW`'s parameters (the path is the key, not set)."""
    return {f"v_{c}": v for c, v in values.items() if c != "path"}


def _utc(stamp: datetime) -> datetime:
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _may_set_flag(mode: WriteMode, read_only: bool | None) -> bool:
    """Whether a write may change the file's read-only flag: it then takes the path that journals the flag (the
    small write's hot path writes content only; a new file made writable is no flag change)."""
    return read_only is True or (read_only is False and mode != "create")
