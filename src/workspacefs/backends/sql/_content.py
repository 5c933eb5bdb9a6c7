"""Chunks kept in an object store instead of the database (``SqlStore(url, content_store="s3://…")``).

A chunk of at least ``min_bytes`` is written to ``<root>/chunks/<sha256>`` and its ``wsfs_chunks`` row keeps
only its hash, size and ``stored = 'object'`` (``data`` is empty: the column stays ``NOT NULL`` so that
SQLite needs no table rebuild). Smaller chunks, and small files stored inline, stay in the database.

Why nothing is ever lost:

- The object is written before the row that names it commits, inside the writer's transaction: a crash
  leaves at most an object no row names, which :func:`collect` removes later; never a row without its
  object.
- Objects are deleted only by :func:`collect` (``workspacefs gc``), never by an ordinary write or delete
  (those drop rows only). A writer holds the *content lock* from before it writes an object until its
  rows commit: on SQLite that is the database's write lock every write transaction takes, on PostgreSQL a
  shared transaction-level advisory lock. The collector takes the same lock exclusively, re-checks in that
  transaction that no row names an object, and deletes it while still holding the lock; so a writer either
  committed its row before the check (the object is kept) or writes its object after the delete.
- Only objects older than a grace period are candidates at all, a second guard for writers that do not
  take the lock (an older version of this library, a tool run by hand).

One database has one content store: every process that opens it must pass the same ``content_store``. A
process without it still reads and writes what the database holds, and refuses (``OSError``, naming the
content store) to read a chunk kept outside. A streaming reader reads its chunks' objects as it goes, so a
reader held open across a ``gc`` that collects the file it reads (deleted meanwhile, its object older than
the grace period) can fail with ``OSError``; the database's own chunks stay readable in its snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from workspacefs.backends._objects._client import ObjectClient, ObjectInfo
from workspacefs.backends.sql._schema import CHUNK_SIZE

__all__ = [
    "CONTENT_LOCK",
    "STORED_OBJECT",
    "STORED_SQL",
    "ContentStore",
    "check_chunk_list",
    "check_piece",
    "missing_chunk",
]

STORED_SQL = "sql"
"""``wsfs_chunks.stored``: the chunk's bytes are in ``data``."""
STORED_OBJECT = "object"
"""``wsfs_chunks.stored``: the chunk's bytes are the object ``<root>/chunks/<hash>``; ``data`` is empty."""
CONTENT_LOCK = 0x77736673_6F626A
"""The PostgreSQL advisory lock key of the content lock ("wsfsobj"): shared by writers, exclusive in gc."""


def missing_chunk(digest: str, path: str | None) -> OSError:
    """EIO for a file at ``path`` one of whose chunk rows is gone (a damaged database): the error names the file
    read, as every error does (DESIGN §3); the chunk's hash stays in the message, for the operator."""
    return OSError(5, f"Content is missing from the store (chunk {digest})", path)


def chunks_for(size: int) -> int:
    """How many chunks hold ``size`` bytes of content kept in chunks: each is full but the last (every writer cuts
    at fixed offsets, and an append cuts the last one again)."""
    return -(-size // CHUNK_SIZE)


def _damaged(path: str | None, what: str) -> OSError:
    """EIO for a file at ``path`` whose stored content disagrees with its size (a damaged database)."""
    return OSError(5, f"Content is damaged in the store ({what})", path)


def check_chunk_list(count: int, size: int, path: str | None) -> None:
    """Raise EIO naming ``path`` unless ``count`` chunks are listed for its ``size``: a list that lost a row would
    otherwise shorten every read of the file, and shift each window past the hole onto the wrong bytes."""
    if count != chunks_for(size):
        raise _damaged(path, f"{count} chunks listed for {size} bytes, {chunks_for(size)} expected")


def check_piece(data: bytes, index: int, size: int, digest: str, path: str | None) -> bytes:
    """``data``, chunk ``index`` of content of ``size`` bytes, if it holds as many bytes as that chunk must."""
    wanted = min(CHUNK_SIZE, size - index * CHUNK_SIZE)
    if len(data) != wanted:
        raise _damaged(path, f"chunk {digest} holds {len(data)} bytes, {wanted} expected")
    return data


@dataclass(frozen=True, slots=True)
class ContentStore:
    """Where large chunks go: an object client, the root key under which chunks live, and the threshold."""

    client: ObjectClient
    root: str
    min_bytes: int
    url: str = field(default="", repr=False)
    """The ``s3://`` URL it was opened from (kept out of ``repr``: it may carry a secret)."""

    def key(self, digest: str) -> str:
        """The object key of a chunk (content-addressed: the same bytes always have the same key)."""
        return f"{self.root}/chunks/{digest}"

    def digest_of(self, key: str) -> str | None:
        """The chunk hash an object key names, or ``None`` for a key that is not a chunk's."""
        prefix = f"{self.root}/chunks/"
        if not key.startswith(prefix):
            return None
        digest = key[len(prefix) :]
        return digest if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest) else None

    def goes_out(self, size: int) -> bool:
        """Whether a chunk of ``size`` bytes is kept in the object store."""
        return size >= self.min_bytes

    def put(self, digest: str, data: bytes | bytearray | memoryview) -> None:
        """Write a chunk's object (again, if it exists: that renews its time, which the grace period reads)."""
        self.client.put(self.key(digest), data)

    def get(self, digest: str, size: int, path: str | None = None) -> bytes:
        """A chunk's bytes (``OSError`` EIO naming ``path``, the file being read, if its object is missing:
        content the store has lost; the chunk's hash is in the message, for the operator)."""
        try:
            data, _ = self.client.get(self.key(digest), 0, size)
        except FileNotFoundError:
            raise OSError(5, f"Content is missing from the object store (chunk {digest})", path) from None
        if len(data) != size:
            raise OSError(5, f"The object store holds {len(data)} of {size} bytes of chunk {digest}", path)
        return bytes(data)

    def objects(self) -> list[ObjectInfo]:
        """Every chunk object under the root."""
        found = self.client.list(f"{self.root}/chunks/", recursive=True)
        return [item for item in found if isinstance(item, ObjectInfo) and self.digest_of(item.key)]

    def older_than(self, cutoff: datetime) -> list[ObjectInfo]:
        """Chunk objects last written before ``cutoff`` (candidates for collection)."""
        return [item for item in self.objects() if item.modified < cutoff]
