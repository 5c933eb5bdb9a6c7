"""Whole file rows of a :class:`SqlFilesystem`: timestamps, read-only flag and content id in one query.

The protocol's ``stat``/``list`` answer what every backend can; a service built on the SQL backend
(seed 004) also wants each file's creation time, read-only flag and a content id to use as an ETag,
and wants them with the content from one consistent read. These functions give exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from workspacefs import errors
from workspacefs.backends.sql_schema import blob_chunks, chunks, session_files
from workspacefs.protocol import ByteReader

if TYPE_CHECKING:
    from workspacefs.backends.sql import SqlFilesystem

__all__ = ["FileRecord", "child_records", "file_record", "open_record", "read_record"]

F = session_files
_SESSION: Any = sa.bindparam("b_session")
_PATH: Any = sa.bindparam("b_path")
_COLUMNS = (F.c.path, F.c.name, F.c.is_directory, F.c.is_readonly, F.c.size_bytes, F.c.created_at, F.c.updated_at)
_ROW = sa.select(*_COLUMNS, F.c.blob_id).where(F.c.session_id == _SESSION, F.c.path == _PATH)
_CHILDREN = sa.select(*_COLUMNS, F.c.blob_id).where(F.c.session_id == _SESSION, F.c.parent == _PATH).order_by(F.c.name)
_LIMIT: Any = sa.bindparam("b_limit")
_WITH_CONTENT = (  # the row, and its chunks only when the file is small enough to be read whole
    sa.select(*_COLUMNS, F.c.blob_id, chunks.c.data)
    .select_from(F)
    .outerjoin(blob_chunks, sa.and_(blob_chunks.c.blob_id == F.c.blob_id, F.c.size_bytes <= _LIMIT))
    .outerjoin(chunks, chunks.c.hash == blob_chunks.c.chunk_hash)
    .where(F.c.session_id == _SESSION, F.c.path == _PATH)
    .order_by(blob_chunks.c.seq)
)


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One file or directory row; ``content_id`` (a content hash, ``None`` for directories) is an ETag."""

    path: str
    name: str
    is_directory: bool
    is_readonly: bool
    size_bytes: int
    created_at: datetime
    updated_at: datetime
    content_id: str | None


def _utc(stamp: datetime) -> datetime:
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _record(row: Any) -> FileRecord:
    return FileRecord(
        row.path,
        row.name,
        row.is_directory,
        row.is_readonly,
        row.size_bytes,
        _utc(row.created_at),
        _utc(row.updated_at),
        None if row.is_directory else row.blob_id,
    )


def _key(fs: SqlFilesystem, path: str) -> dict[str, str]:
    return {"b_session": fs.session_id, "b_path": fs._norm(path)}


def file_record(fs: SqlFilesystem, path: str) -> FileRecord:
    """The row of ``path`` (``FileNotFoundError`` if there is none)."""
    key = _key(fs, path)
    with fs.store.read_once() as connection:
        row = connection.execute(_ROW, key).first()
    if row is None:
        raise errors.file_not_found(path)
    return _record(row)


def child_records(fs: SqlFilesystem, path: str) -> tuple[FileRecord, list[FileRecord]]:
    """A directory's row and its children's rows, sorted by name, from one consistent read."""
    key = _key(fs, path)
    with fs.store.read() as connection:
        row = connection.execute(_ROW, key).first()
        if row is None:
            raise errors.file_not_found(path)
        if not row.is_directory:
            raise errors.not_a_directory(path)
        children = connection.execute(_CHILDREN, key).all()
    return _record(row), [_record(child) for child in children]


def read_record(fs: SqlFilesystem, path: str, *, max_bytes: int) -> tuple[FileRecord, bytes | None]:
    """A row and, for a file of at most ``max_bytes``, its content, in one statement (``None``: too big,
    or a directory). Larger files are read with :func:`open_record`."""
    key = {**_key(fs, path), "b_limit": max_bytes}
    with fs.store.read_once() as connection:
        rows = connection.execute(_WITH_CONTENT, key).all()
    if not rows:
        raise errors.file_not_found(path)
    record = _record(rows[0])
    if record.is_directory or record.size_bytes > max_bytes:
        return record, None
    return record, b"".join(bytes(r.data) for r in rows if r.data is not None)


def open_record(fs: SqlFilesystem, path: str) -> tuple[FileRecord, ByteReader]:
    """A file's row and a streaming reader of exactly the content that row names."""
    row, reader = fs._open_row_reader(fs._norm(path))
    return _record(row), reader
