"""Streaming readers and writers shared by every backend: files of any size in fixed memory.

A backend supplies a seekable binary handle for reading and three hooks for writing
(write a chunk, commit, discard); everything else — positions, chunking, closed-stream errors,
commit-on-close and abort-on-exception, UTF-8 text decoding — lives here once.
"""

from __future__ import annotations

import errno
import hashlib
import io
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Protocol

from workspacefs.errors import name_caller_path
from workspacefs.paths import DEFAULT_CHUNK_SIZE
from workspacefs.protocol import ByteReader, BytesLike

__all__ = [
    "CONTENT_CHUNK_SIZE",
    "ContentHasher",
    "RawReadable",
    "StreamReader",
    "StreamWriter",
    "Utf8TextReader",
    "closed_stream_error",
    "content_id_of",
    "content_id_of_chunks",
]

CONTENT_CHUNK_SIZE = 256 * 1024
"""Content ids hash content cut at this fixed size (the SQL backend stores its chunks at the same size)."""


def content_id_of_chunks(chunk_hashes: Iterable[str], size: int) -> str:
    """The content id of ``size`` bytes whose fixed-size chunks have these SHA-256 hex digests."""
    return hashlib.sha256(f"{size}:{','.join(chunk_hashes)}".encode()).hexdigest()


class ContentHasher:
    """Computes a content id incrementally, in fixed memory: feed any pieces, read :meth:`content_id`.

    The id depends on the bytes only, never on how they were fed or which backend stores them, so every
    backend names the same content the same way (an ETag that survives moving a workspace).
    """

    __slots__ = ("_hashes", "_pending", "_size")

    def __init__(self) -> None:
        self._hashes: list[str] = []
        self._pending = bytearray()
        self._size = 0

    def update(self, data: BytesLike) -> None:
        """Add the next bytes."""
        self._pending += data
        self._size += len(data)
        while len(self._pending) >= CONTENT_CHUNK_SIZE:
            self._hashes.append(hashlib.sha256(self._pending[:CONTENT_CHUNK_SIZE]).hexdigest())
            del self._pending[:CONTENT_CHUNK_SIZE]

    def content_id(self) -> str:
        """The id of everything fed so far."""
        hashes = self._hashes + ([hashlib.sha256(self._pending).hexdigest()] if self._pending else [])
        return content_id_of_chunks(hashes, self._size)


def content_id_of(data: BytesLike) -> str:
    """The content id of whole content in memory."""
    if type(data) is bytes and 0 < len(data) <= CONTENT_CHUNK_SIZE:  # one chunk (most files): no slicing loop
        return hashlib.sha256(b"%d:%s" % (len(data), hashlib.sha256(data).hexdigest().encode())).hexdigest()
    view = memoryview(data)
    hashes = [
        hashlib.sha256(view[start : start + CONTENT_CHUNK_SIZE]).hexdigest()
        for start in range(0, len(view), CONTENT_CHUNK_SIZE)
    ]
    return content_id_of_chunks(hashes, len(view))


def closed_stream_error() -> ValueError:
    """The error every closed stream raises (as ``io`` does)."""
    return ValueError("I/O operation on closed file")


def _check_chunk_size(size: int) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"chunk size must be a positive int, got {size!r}")


class RawReadable(Protocol):
    """The handle a backend gives :class:`StreamReader`: ``io.BytesIO``, a file object, or a custom one."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def close(self) -> None: ...


class StreamReader:
    """A :class:`~workspacefs.protocol.ByteReader` over a seekable handle of known size.

    Each reader owns its position; it exposes no way to write, so it can never change stored data.
    """

    __slots__ = ("_closed", "_path", "_position", "_raw", "_shown", "_size")

    def __init__(self, path: str, raw: RawReadable, size: int) -> None:
        self._path = path
        self._shown = path
        self._raw = raw
        self._size = size
        self._position = 0
        self._closed = False

    @property
    def path(self) -> str:
        """Path being read."""
        return self._path

    @property
    def size(self) -> int:
        """Total size in bytes when the reader was opened."""
        return self._size

    @property
    def position(self) -> int:
        """Current position in bytes."""
        return self._position

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def read(self, size: int = -1) -> bytes:
        """Read up to ``size`` bytes (-1 or ``None``: to the end)."""
        if self._closed:
            raise closed_stream_error()
        if size is None or size < 0:
            size = max(self._size - self._position, 0)
        if size == 0 or self._position >= self._size:
            return b""
        try:
            data = self._raw.read(min(size, self._size - self._position))
        except OSError as exc:  # e.g. content lost after the reader opened: name the path as the caller gave it
            name_caller_path(exc, self._path, self._shown)
            raise
        self._position += len(data)
        return data

    def show_as(self, given: str) -> None:
        """Name ``given``, the caller's spelling of :attr:`path`, in the errors later reads raise (DESIGN §3)."""
        self._shown = given

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move the position; a negative result raises ``ValueError``."""
        if self._closed:
            raise closed_stream_error()
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._position + offset
        elif whence == io.SEEK_END:
            target = self._size + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if target < 0:
            raise ValueError(f"negative seek position {target}")
        self._raw.seek(target)
        self._position = target
        return target

    def tell(self) -> int:
        """Same as :attr:`position`."""
        return self._position

    def chunks(self, size: int = DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
        """Chunks of ``size`` bytes from the current position to the end."""
        _check_chunk_size(size)
        while chunk := self.read(size):
            yield chunk

    def __iter__(self) -> Iterator[bytes]:
        return self.chunks(DEFAULT_CHUNK_SIZE)

    def close(self) -> None:
        """Release the handle; idempotent."""
        if not self._closed:
            self._closed = True
            self._raw.close()

    def __enter__(self) -> StreamReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} path={self._path!r} size={self._size} position={self._position}>"


class StreamWriter(ABC):
    """A :class:`~workspacefs.protocol.ByteWriter`: commits on :meth:`close`, discards on error.

    Subclasses write each chunk somewhere private (a temporary file, a buffer, staged rows) and
    make it visible in one step in :meth:`_commit`, so readers see the old content or the new.
    """

    __slots__ = ("_bytes_written", "_closed", "_path")

    def __init__(self, path: str) -> None:
        self._path = path
        self._bytes_written = 0
        self._closed = False

    @abstractmethod
    def _write_chunk(self, data: bytes) -> None:
        """Store one chunk privately."""

    @abstractmethod
    def _commit(self) -> None:
        """Make everything written visible atomically (may raise, e.g. ``FileExistsError``)."""

    @abstractmethod
    def _discard(self) -> None:
        """Drop everything written; must not raise for an ordinary cleanup."""

    @property
    def path(self) -> str:
        """Path being written."""
        return self._path

    @property
    def bytes_written(self) -> int:
        """Bytes written so far."""
        return self._bytes_written

    @property
    def closed(self) -> bool:
        """True once committed or aborted."""
        return self._closed

    def write(self, data: BytesLike) -> int:
        """Write bytes; return how many."""
        if self._closed:
            raise closed_stream_error()
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"a bytes-like object is required, not {type(data).__name__!r}")
        chunk = bytes(data)
        if chunk:
            self._write_chunk(chunk)
            self._bytes_written += len(chunk)
        return len(chunk)

    def write_all(self, chunks: Iterable[BytesLike]) -> int:
        """Write every chunk (a :class:`StreamReader` is iterable); return the total."""
        total = 0
        for chunk in chunks:
            total += self.write(chunk)
        return total

    def seek(self, offset: int, whence: int = 0) -> int:
        """Writers are sequential: always ``OSError: Illegal seek``, as for a pipe."""
        raise OSError(errno.ESPIPE, "Illegal seek")

    def close(self) -> None:
        """Commit; idempotent. If the commit fails, nothing is left behind and the error propagates."""
        if self._closed:
            return
        self._closed = True
        try:
            self._commit()
        except BaseException:
            self._discard()
            raise

    def abort(self) -> None:
        """Discard everything written; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._discard()

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} path={self._path!r} bytes_written={self._bytes_written}>"


class _ReaderAdapter(io.RawIOBase):
    """Lets ``io.TextIOWrapper`` pull from a :class:`ByteReader`-shaped object."""

    def __init__(self, reader: ByteReader) -> None:
        super().__init__()
        self._reader = reader

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._reader.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._reader.close()
        super().close()


class Utf8TextReader:
    """A :class:`~workspacefs.protocol.TextReader`: lazy UTF-8, lines split on ``\\n`` only.

    ``\\r\\n`` stays intact. Memory is O(chunk + longest line). Invalid UTF-8 raises
    ``UnicodeDecodeError`` when the bad bytes are reached.
    """

    def __init__(self, reader: ByteReader) -> None:
        self._path = reader.path
        buffered = io.BufferedReader(_ReaderAdapter(reader), buffer_size=DEFAULT_CHUNK_SIZE)
        # newline="\n": only \n ends a line and nothing is translated (so \r\n survives).
        self._text = io.TextIOWrapper(buffered, encoding="utf-8", errors="strict", newline="\n")
        self._line_number = 0

    @property
    def path(self) -> str:
        """Path being read."""
        return self._path

    @property
    def encoding(self) -> str:
        """Always ``"utf-8"``."""
        return "utf-8"

    @property
    def line_number(self) -> int:
        """Complete lines returned so far."""
        return self._line_number

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._text.closed

    def readline(self) -> str:
        """Next line with its newline; ``""`` at EOF."""
        if self._text.closed:
            raise closed_stream_error()
        line = self._text.readline()
        if line:
            self._line_number += 1
        return line

    def read(self, size: int = -1) -> str:
        """Up to ``size`` characters (-1: all the rest)."""
        if self._text.closed:
            raise closed_stream_error()
        text = self._text.read(size)
        self._line_number += text.count("\n")
        return text

    def __iter__(self) -> Iterator[str]:
        return self.lines()

    def lines(self, *, strip: bool = False) -> Iterator[str]:
        """Lines from the current position; ``strip`` removes each line's ``\\n`` or ``\\r\\n``."""
        while line := self.readline():
            if strip and line.endswith("\n"):
                line = line[:-2] if line.endswith("\r\n") else line[:-1]
            yield line

    def close(self) -> None:
        """Close the text layer and the byte reader under it."""
        self._text.close()

    def __enter__(self) -> Utf8TextReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()
