"""Streams over objects in fixed memory: ranged reads pinned to one version, multipart writes that appear whole.

A reader fetches its first block when it opens (a small file is then wholly in hand, whatever happens to the
object afterwards) and the rest in ranged ``GET``s with ``If-Match`` on the version it opened: if that
version is replaced meanwhile the read fails with ``ConcurrentChangeError`` instead of mixing two versions.
A writer holds at most one part (5 MiB): a file that fits is one ``PUT``, a larger one a multipart upload
completed on close (aborted on error), so readers see the old object or the new one, never a part.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

from workspacefs.backends._objects._client import (
    MIN_PART_BYTES,
    ObjectClient,
    ObjectInfo,
    PreconditionFailed,
    Upload,
)
from workspacefs.errors import ConcurrentChangeError
from workspacefs.streams import ContentHasher, StreamWriter

__all__ = ["FIRST_BLOCK_BYTES", "ObjectReader", "ObjectWriter"]

FIRST_BLOCK_BYTES = 1024 * 1024
"""Fetched when a reader opens: files up to this size are read in one request."""
_READ_AHEAD_BYTES = 8 * 1024 * 1024
"""Each later ``GET`` fetches at least this much (a sequential read costs one request per block)."""


class ObjectReader:
    """The seekable handle :class:`~workspacefs.streams.StreamReader` reads: one object version, in blocks."""

    __slots__ = ("_block", "_block_start", "_client", "_info", "_path", "_position")

    def __init__(self, client: ObjectClient, path: str, info: ObjectInfo, first: bytes | bytearray) -> None:
        self._client = client
        self._path = path
        self._info = info
        self._block = memoryview(first)
        self._block_start = 0
        self._position = 0

    def read(self, size: int = -1, /) -> bytes:
        """``size`` bytes from the current position, fewer only at the end (the caller never asks past it)."""
        if size < 0:
            size = self._info.size - self._position
        offset = self._position - self._block_start
        if 0 <= offset < len(self._block):
            data = bytes(self._block[offset : offset + size])
            if len(data) < size and self._position + len(data) < self._info.size:  # the rest in one request
                self._position += len(data)
                self._fetch(max(size - len(data), _READ_AHEAD_BYTES))
                rest = bytes(self._block[: size - len(data)])
                data += rest
                self._position += len(rest)
                return data
        else:
            self._fetch(max(size, _READ_AHEAD_BYTES))
            data = bytes(self._block[:size])
        self._position += len(data)
        return data

    def _fetch(self, length: int) -> None:
        """Replace the block with up to ``length`` bytes from the current position (of the version opened)."""
        length = min(length, self._info.size - self._position)
        self._block = memoryview(b"")  # let the old block go before the new one arrives
        if length <= 0:
            self._block_start = self._position
            return
        try:
            data, _ = self._client.get(
                self._info.key, self._position, length, if_match=self._info.etag, version_id=self._info.version_id
            )
        except PreconditionFailed:
            raise ConcurrentChangeError(
                self._path, "The file changed while it was being read; open it again to read the new version"
            ) from None
        except FileNotFoundError:
            raise ConcurrentChangeError(self._path, "The file was deleted while it was being read") from None
        self._block = memoryview(data)
        self._block_start = self._position

    def seek(self, offset: int, whence: int = 0, /) -> int:
        """Move to ``offset`` (the stream reader computes absolute positions)."""
        self._position = offset
        return offset

    def close(self) -> None:
        """Drop the buffered block."""
        self._block = memoryview(b"")


Committed = Callable[[str, str, int], None]
"""Called after a multipart upload completes, with its ETag, content id and size."""
AroundCommit = Callable[[str, int], AbstractContextManager[None]]
"""Wraps the request that makes a stream visible, given its content id and size (the journal's entry is
written before it and settled after it)."""


def _no_journal(_content_id: str, _size: int) -> AbstractContextManager[None]:
    return contextlib.nullcontext()


class ObjectWriter(StreamWriter):
    """Streams into one object: one ``PUT`` if it fits a part, else a multipart upload; conditions checked by the
    store at the commit (``If-None-Match`` for create mode, ``If-Match`` for append and compare-and-set)."""

    __slots__ = (
        "_around",
        "_client",
        "_conflict",
        "_hasher",
        "_if_match",
        "_if_none_match",
        "_key",
        "_on_multipart",
        "_part_bytes",
        "_pending",
        "_pending_bytes",
        "_size",
        "_upload",
    )

    def __init__(
        self,
        client: ObjectClient,
        path: str,
        key: str,
        *,
        if_match: str | None,
        if_none_match: bool,
        conflict: Callable[[], Exception],
        on_multipart: Committed,
        part_bytes: int = MIN_PART_BYTES,
        around_commit: AroundCommit = _no_journal,
    ) -> None:
        super().__init__(path)
        self._client = client
        self._key = key
        self._if_match = if_match
        self._if_none_match = if_none_match
        self._conflict = conflict
        self._on_multipart = on_multipart
        self._part_bytes = max(part_bytes, MIN_PART_BYTES)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._hasher = ContentHasher()
        self._upload: Upload | None = None
        self._size = 0
        self._around = around_commit

    @property
    def content_id(self) -> str:
        """The content id of everything written so far."""
        return self._hasher.content_id()

    def prefill(self, data: bytes | bytearray) -> None:
        """Start the object with ``data`` (an append's old content), not counted in ``bytes_written``."""
        self._write_chunk(bytes(data))

    def _write_chunk(self, data: bytes) -> None:
        self._size += len(data)
        self._hasher.update(data)
        self._pending.append(data)  # kept as given (no copy) until a whole part is there
        self._pending_bytes += len(data)
        while self._pending_bytes >= self._part_bytes:
            self._send(self._part_bytes)

    def _take(self, count: int) -> bytes:
        """The first ``count`` pending bytes as one part (the pending chunks are released as they are joined)."""
        joined = b"".join(self._pending)
        self._pending = [joined[count:]] if len(joined) > count else []
        self._pending_bytes = len(joined) - count
        return joined[:count] if len(joined) > count else joined

    def _send(self, count: int) -> None:
        if self._upload is None:
            self._upload = self._client.start_upload(self._key)
        part = self._take(count)
        self._upload.upload_part(memoryview(part))

    def check_before_commit(self) -> None:
        """A hook run just before the commit (a conditional writer checks the version it expects)."""

    def _commit(self) -> None:
        self.check_before_commit()
        content_id = self._hasher.content_id()
        with self._around(content_id, self._size):
            try:
                if self._upload is None:
                    self._client.put(
                        self._key,
                        self._take(self._pending_bytes),
                        content_id=content_id,
                        if_match=self._if_match,
                        if_none_match=self._if_none_match,
                    )
                    return
                if self._pending_bytes:
                    self._send(self._pending_bytes)
                etag = self._upload.complete(if_match=self._if_match, if_none_match=self._if_none_match)
            except PreconditionFailed:
                raise self._conflict() from None
        self._upload = None
        self._on_multipart(etag, content_id, self._size)

    def _discard(self) -> None:
        self._pending, self._pending_bytes = [], 0
        if self._upload is not None:
            self._upload.abort()
        self._upload = None
