r"""``AsyncFilesystem``: every protocol method awaitable over any backend, the event loop kept free.

Each call runs the blocking backend method in a worker thread (``anyio.to_thread``), so a slow disk,
database or container never stalls the loop. Errors are the backend's own exceptions, unchanged.
Streams come back as async readers and writers, used directly in ``async with`` (or awaited for the
stream itself); a writer commits when its block ends cleanly and discards everything if it raises,
exactly like the synchronous one:

>>> import asyncio
>>> from workspacefs import AsyncFilesystem, InMemoryFilesystem
>>> async def main() -> bytes:
...     afs = AsyncFilesystem(InMemoryFilesystem())
...     async with afs.open_write("logs/run.txt") as writer:
...         await writer.write(b"started\n")
...     async with afs.open_read("logs/run.txt") as reader:
...         return b"".join([chunk async for chunk in reader])
>>> asyncio.run(main())
b'started\n'
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Sequence
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar, cast

import anyio.to_thread

from workspacefs.errors import UnsupportedOperationError
from workspacefs.merge import MergeResult
from workspacefs.paths import DEFAULT_CHUNK_SIZE
from workspacefs.protocol import (
    ByteReader,
    BytesLike,
    ByteWriter,
    Filesystem,
    MergeableFilesystem,
    SnapshotableFilesystem,
    TextReader,
)
from workspacefs.results import (
    FileEntry,
    FileStat,
    FilesystemDiff,
    FilesystemSnapshot,
    GlobMatch,
    GrepMatch,
    ReadBytesResult,
    ReadResult,
    WriteMode,
    WriteResult,
)

__all__ = ["AsyncByteReader", "AsyncByteWriter", "AsyncFilesystem", "AsyncStreamOpening", "AsyncTextReader"]

T = TypeVar("T")


async def _run(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(function, *args, **kwargs))


class _AsyncStream(Protocol):
    """What an opened async stream offers: an ``async with`` that closes it (a writer: commits or discards)."""

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


S = TypeVar("S", bound=_AsyncStream)


class AsyncStreamOpening(Generic[S]):
    """A stream about to be opened: ``async with afs.open_read(p) as r`` opens and closes it, and
    ``r = await afs.open_read(p)`` gives the open stream to close yourself. Nothing runs until either."""

    __slots__ = ("_open", "_stream")

    def __init__(self, open_stream: Callable[[], Awaitable[S]]) -> None:
        self._open = open_stream
        self._stream: S | None = None

    def __await__(self) -> Generator[Any, None, S]:
        return self._open().__await__()

    async def __aenter__(self) -> S:
        if self._stream is not None:
            raise RuntimeError("this stream is already open: call open_*() again for another one")
        self._stream = await self._open()
        return self._stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.__aexit__(exc_type, exc, tb)


class AsyncByteReader:
    """An async view of a :class:`~workspacefs.protocol.ByteReader`."""

    def __init__(self, reader: ByteReader) -> None:
        self._reader = reader

    @property
    def path(self) -> str:
        return self._reader.path

    @property
    def size(self) -> int:
        return self._reader.size

    @property
    def position(self) -> int:
        return self._reader.position

    async def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (-1: the rest); ``b""`` at the end."""
        return await _run(self._reader.read, size)

    async def seek(self, offset: int, whence: int = 0) -> int:
        return await _run(self._reader.seek, offset, whence)

    async def chunks(self, size: int = DEFAULT_CHUNK_SIZE) -> AsyncIterator[bytes]:
        """Chunks of ``size`` bytes to the end, one worker-thread hop each."""
        while chunk := await self.read(size):
            yield chunk

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.chunks()

    async def aclose(self) -> None:
        await _run(self._reader.close)

    async def __aenter__(self) -> AsyncByteReader:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class AsyncByteWriter:
    """An async view of a :class:`~workspacefs.protocol.ByteWriter`: commits on a clean exit."""

    def __init__(self, writer: ByteWriter) -> None:
        self._writer = writer

    @property
    def path(self) -> str:
        return self._writer.path

    @property
    def bytes_written(self) -> int:
        return self._writer.bytes_written

    async def write(self, data: BytesLike) -> int:
        return await _run(self._writer.write, data)

    async def write_all(self, chunks: Iterable[BytesLike] | AsyncIterator[bytes]) -> int:
        """Write every chunk of a (sync or async) iterable."""
        total = 0
        if hasattr(chunks, "__aiter__"):
            async for chunk in chunks:
                total += await self.write(chunk)
        else:
            for chunk in chunks:
                total += await self.write(chunk)
        return total

    async def aclose(self) -> None:
        """Commit."""
        await _run(self._writer.close)

    async def abort(self) -> None:
        """Discard everything written."""
        await _run(self._writer.abort)

    async def __aenter__(self) -> AsyncByteWriter:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            await self.aclose()
        else:
            await self.abort()


class AsyncTextReader:
    """An async view of a :class:`~workspacefs.protocol.TextReader`."""

    def __init__(self, reader: TextReader) -> None:
        self._reader = reader

    @property
    def line_number(self) -> int:
        return self._reader.line_number

    async def readline(self) -> str:
        return await _run(self._reader.readline)

    async def read(self, size: int = -1) -> str:
        return await _run(self._reader.read, size)

    async def __aiter__(self) -> AsyncIterator[str]:
        while line := await self.readline():
            yield line

    async def aclose(self) -> None:
        await _run(self._reader.close)

    async def __aenter__(self) -> AsyncTextReader:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class AsyncFilesystem:
    """Await any :class:`~workspacefs.protocol.Filesystem` (see the module docstring)."""

    def __init__(self, fs: Filesystem) -> None:
        self.sync = fs

    @property
    def root(self) -> str:
        return self.sync.root

    @property
    def read_only(self) -> bool:
        return self.sync.read_only

    @property
    def mount_point(self) -> str | None:
        return self.sync.mount_point

    def open_read(self, path: str) -> AsyncStreamOpening[AsyncByteReader]:
        """A byte reader: ``async with afs.open_read(p) as r`` (or ``await`` it and ``aclose()`` yourself)."""

        async def opened() -> AsyncByteReader:
            return AsyncByteReader(await _run(self.sync.open_read, path))

        return AsyncStreamOpening(opened)

    def open_write(
        self, path: str, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> AsyncStreamOpening[AsyncByteWriter]:
        """A byte writer that commits when its ``async with`` block ends cleanly and discards if it raises."""

        async def opened() -> AsyncByteWriter:
            return AsyncByteWriter(await _run(self.sync.open_write, path, mode=mode, create_parents=create_parents))

        return AsyncStreamOpening(opened)

    def open_text(self, path: str, *, encoding: str = "utf-8") -> AsyncStreamOpening[AsyncTextReader]:
        """A text reader by lines: ``async with afs.open_text(p) as t`` (or ``await`` it)."""

        async def opened() -> AsyncTextReader:
            return AsyncTextReader(await _run(self.sync.open_text, path, encoding=encoding))

        return AsyncStreamOpening(opened)

    async def read(
        self, path: str, *, offset: int = 0, limit: int | None = None, encoding: str = "utf-8"
    ) -> ReadResult:
        return await _run(self.sync.read, path, offset=offset, limit=limit, encoding=encoding)

    async def read_bytes(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadBytesResult:
        return await _run(self.sync.read_bytes, path, offset=offset, limit=limit)

    async def write(
        self, path: str, content: str, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult:
        return await _run(self.sync.write, path, content, mode=mode, create_parents=create_parents)

    async def write_bytes(
        self, path: str, content: BytesLike, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult:
        return await _run(self.sync.write_bytes, path, content, mode=mode, create_parents=create_parents)

    async def exists(self, path: str) -> bool:
        return await _run(self.sync.exists, path)

    async def stat(self, path: str) -> FileStat:
        return await _run(self.sync.stat, path)

    async def list(self, path: str = ".") -> Sequence[FileEntry]:
        return await _run(self.sync.list, path)

    async def glob(self, pattern: str, *, path: str = ".") -> Sequence[GlobMatch]:
        return await _run(self.sync.glob, pattern, path=path)

    async def grep(
        self, pattern: str, *, path: str = ".", glob: str | None = None, max_matches: int | None = None
    ) -> Sequence[GrepMatch]:
        return await _run(self.sync.grep, pattern, path=path, glob=glob, max_matches=max_matches)

    async def delete(self, path: str, *, recursive: bool = False) -> None:
        await _run(self.sync.delete, path, recursive=recursive)

    async def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        await _run(self.sync.mkdir, path, parents=parents, exist_ok=exist_ok)

    async def move(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        await _run(self.sync.move, src, dst, overwrite=overwrite)

    async def copy(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        await _run(self.sync.copy, src, dst, overwrite=overwrite)

    def _snapshotable(self) -> SnapshotableFilesystem:
        if not self.sync.capabilities.snapshots:
            raise UnsupportedOperationError(f"{type(self.sync).__name__} cannot take snapshots")
        return cast(SnapshotableFilesystem, self.sync)  # the capability promises the protocol

    async def snapshot(self, *, tag: str | None = None) -> FilesystemSnapshot:
        return await _run(self._snapshotable().snapshot, tag=tag)

    async def restore(self, snapshot: FilesystemSnapshot) -> None:
        await _run(self._snapshotable().restore, snapshot)

    async def diff(self, base: FilesystemSnapshot, target: FilesystemSnapshot | None = None) -> FilesystemDiff:
        return await _run(self._snapshotable().diff, base, target)

    async def snapshots(self) -> Sequence[FilesystemSnapshot]:
        return await _run(self._snapshotable().snapshots)

    async def delete_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        await _run(self._snapshotable().delete_snapshot, snapshot)

    async def merge(
        self,
        base: FilesystemSnapshot,
        ours: FilesystemSnapshot,
        theirs: FilesystemSnapshot,
        *,
        markers: bool = False,
        tag: str | None = None,
    ) -> MergeResult:
        """As ``MergeableFilesystem.merge``, in a worker thread (``UnsupportedOperationError`` without
        ``capabilities.merge``)."""
        if not self.sync.capabilities.merge:
            raise UnsupportedOperationError(f"{type(self.sync).__name__} cannot merge snapshots")
        merging = cast(MergeableFilesystem, self.sync)  # the capability promises the protocol
        return await _run(merging.merge, base, ours, theirs, markers=markers, tag=tag)
