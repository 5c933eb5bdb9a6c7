"""The SQL backend's streams: a reader of one blob inside a held read transaction, and a writer that
uploads fixed-size chunks as they fill and hands the finished upload to one committing transaction."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workspacefs.backends.sql._content import check_piece, missing_chunk
from workspacefs.backends.sql._driver import Scope, Tx
from workspacefs.backends.sql._schema import CHUNK_SIZE
from workspacefs.backends.sql._store import SqlStore
from workspacefs.streams import StreamWriter

__all__ = ["NO_BASE", "AppendBase", "BlobReader", "FinishedUpload", "UploadWriter"]


@dataclass(frozen=True, slots=True)
class AppendBase:
    """What an append starts from: the blob's id, its full chunks, its partial last chunk, its size."""

    blob_id: str | None
    full_chunks: list[str]
    tail: bytes
    size: int


NO_BASE = AppendBase(None, [], b"", 0)
"""A write that starts from nothing (create or overwrite)."""


@dataclass(frozen=True, slots=True)
class FinishedUpload:
    """Every chunk of a streamed write is stored; the file row can now point at them."""

    upload_id: str
    hashes: list[str]
    size: int
    base_blob: str | None


class BlobReader(io.RawIOBase):
    """Reads a blob chunk by chunk inside a snapshot transaction held for the reader's life; on
    PostgreSQL the next few chunks are asked for in one round trip (memory: ``prefetch`` chunks)."""

    def __init__(
        self,
        scope: Scope,
        tx: Tx,
        sql_chunk: str,
        *,
        path: str,
        hashes: list[str],
        size: int,
        prefetch: int,
        fetch: Callable[[str, Any, str | None, int, str], bytes],
    ) -> None:
        """``fetch(hash, data, stored, size, path)`` turns a chunk row of the file at ``path`` into its bytes
        (``SqlStore.chunk_bytes``: a chunk kept in the content store comes from there)."""
        super().__init__()
        self._path = path
        self._fetch = fetch
        self._scope = scope
        self._tx = tx
        self._sql_chunk = sql_chunk
        self._hashes = hashes
        self._size = size
        self._prefetch = prefetch
        self._position = 0
        self._ready: dict[int, bytes] = {}

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._position = offset if whence == 0 else (self._position + offset if whence == 1 else self._size + offset)
        return self._position

    def _chunk(self, index: int) -> bytes:
        if index not in self._ready:
            wanted = range(index, min(index + self._prefetch, len(self._hashes)))
            cursors = [(i, self._tx.run(self._sql_chunk, (self._hashes[i],), binary=True)) for i in wanted]
            self._tx.sync()
            self._ready = {}
            for i, cursor in cursors:
                row = cursor.fetchone()
                try:
                    if row is None:
                        raise missing_chunk(self._hashes[i], self._path)
                    piece = self._fetch(self._hashes[i], row[0], row[1], row[2], self._path)
                    self._ready[i] = check_piece(piece, i, self._size, self._hashes[i], self._path)
                except OSError:
                    if i == index:
                        raise
                    # a chunk only fetched ahead fails when (if ever) it is read: a read of those before it works
        return self._ready[index]

    def read(self, size: int = -1) -> bytes:
        end = self._size if size < 0 else min(self._size, self._position + size)
        parts = []
        while self._position < end:
            index, offset = divmod(self._position, CHUNK_SIZE)
            piece = self._chunk(index)[offset : offset + (end - self._position)]
            if not piece:
                break
            parts.append(piece)
            self._position += len(piece)
        return b"".join(parts)

    def close(self) -> None:
        if not self.closed:
            self._ready = {}
            self._scope.__exit__(None, None, None)
        super().close()


class UploadWriter(StreamWriter):
    """Uploads full 256 KiB chunks as they fill; ``commit`` changes the file row in one transaction on close."""

    __slots__ = ("_base", "_buffer", "_commit_upload", "_hashes", "_size", "_store", "_upload")

    def __init__(self, store: SqlStore, path: str, base: AppendBase, commit: Callable[[FinishedUpload], None]) -> None:
        super().__init__(path)
        self._store = store
        self._commit_upload = commit
        self._base = base
        self._hashes: list[str] = list(base.full_chunks)
        self._buffer = bytearray(base.tail)
        self._size = base.size - len(base.tail)
        self._upload = str(uuid.uuid4())

    def _store_pieces(self, pieces: list[bytes | bytearray | memoryview]) -> None:
        if pieces:
            self._hashes += self._store.upload_chunks(self._upload, len(self._hashes), pieces)
            self._size += sum(len(p) for p in pieces)

    def _write_chunk(self, data: bytes) -> None:
        """Cut at fixed offsets without copying: full chunks go straight from ``data`` (those of one write
        in one transaction); only a partial chunk waits in the buffer for the next write."""
        view = memoryview(data)
        pieces: list[bytes | bytearray | memoryview] = []
        if self._buffer:
            taken = CHUNK_SIZE - len(self._buffer)
            self._buffer += view[:taken]
            view = view[taken:]
            if len(self._buffer) < CHUNK_SIZE:
                return
            pieces.append(self._buffer)
            self._buffer = bytearray()
        while len(view) >= CHUNK_SIZE:
            pieces.append(view[:CHUNK_SIZE])
            view = view[CHUNK_SIZE:]
        self._store_pieces(pieces)
        self._buffer += view

    def _commit(self) -> None:
        if self._buffer:
            self._store_pieces([self._buffer])
            self._buffer = bytearray()
        self._commit_upload(FinishedUpload(self._upload, self._hashes, self._size, self._base.blob_id))

    def _discard(self) -> None:
        self._buffer = bytearray()
        self._store.abandon_upload(self._upload, self._path)
