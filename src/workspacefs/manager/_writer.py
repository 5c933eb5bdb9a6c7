"""``WriterTool``: write, append, stream, delete, move, copy and create directories, each atomic and checked."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from workspacefs.asyncfs import AsyncByteWriter
from workspacefs.manager._constraints import REFUSALS
from workspacefs.manager._models import FileAction, FileResponse
from workspacefs.manager._services import ManagerServices
from workspacefs.protocol import BytesLike

__all__ = ["ConstrainedStream", "WriterTool"]

_ACTIONS = ("write", "append", "delete", "move", "copy", "create_dirs")


class WriterTool:
    """Changes files through the filesystem protocol; every change is atomic or
    refused before any I/O by the manager's constraints. Deleting a missing file is a failure."""

    name = "writer"

    def __init__(self, manager: ManagerServices) -> None:
        self._manager = manager

    async def execute(
        self,
        action: str = "write",
        path: str | None = None,
        content: str | None = None,
        *,
        create_dirs: bool = True,
        mode: str = "w",
        dst: str | None = None,
        overwrite: bool = False,
        recursive: bool = False,
    ) -> FileResponse:
        """Run one action (``write``, ``append``, ``delete``, ``move``, ``copy``, ``create_dirs``)."""
        if action not in _ACTIONS:
            return FileResponse(
                success=False, error=f"unknown writer action {action!r}; use one of {', '.join(_ACTIONS)}"
            )
        if path is None:
            return FileResponse(success=False, error=f"{action} needs a path")
        if action in ("write", "append"):
            if mode not in ("w", "a"):
                return FileResponse(success=False, path=path, error=f"mode must be 'w' or 'a', not {mode!r}")
            appending = action == "append" or mode == "a"
            return await self._write(path, content or "", append=appending, create_dirs=create_dirs)
        if action == "delete":
            return await self._delete(path, recursive=recursive)
        if action == "create_dirs":
            return await self._create_dirs(path)
        if dst is None:
            return FileResponse(success=False, path=path, error=f"{action} needs a dst")
        return await self._transfer(path, dst, move=action == "move", overwrite=overwrite)

    async def _write(self, path: str, content: str, *, append: bool, create_dirs: bool) -> FileResponse:
        action = FileAction.APPEND if append else FileAction.WRITE
        size = len(content.encode("utf-8"))
        refusal = await self._manager.refuse(action, path, size=size)
        if refusal is not None:
            return refusal
        try:
            result = await self._manager.fs.write(
                path, content, mode="append" if append else "overwrite", create_parents=create_dirs
            )
        except (OSError, ValueError) as exc:
            return self._manager.failure(exc, path)
        file_id = await self._manager.register_file(result.path, "a" if append else "w")
        return FileResponse(
            success=True, file_id=file_id, path=result.path, metadata={"bytes_written": result.bytes_written}
        )

    async def _delete(self, path: str, *, recursive: bool) -> FileResponse:
        refusal = await self._manager.refuse(FileAction.DELETE, path)
        if refusal is not None:
            return refusal
        try:
            await self._manager.fs.delete(path, recursive=recursive)
        except (OSError, ValueError) as exc:
            return self._manager.failure(exc, path)
        self._manager.forget(path)
        return FileResponse(success=True, path=self._manager.normalize(path))

    async def _create_dirs(self, path: str) -> FileResponse:
        refusal = await self._manager.refuse(FileAction.CREATE, path, is_file=False)
        if refusal is not None:
            return refusal
        try:
            await self._manager.fs.mkdir(path, parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:
            return self._manager.failure(exc, path)
        return FileResponse(success=True, path=self._manager.normalize(path))

    async def _transfer(self, src: str, dst: str, *, move: bool, overwrite: bool) -> FileResponse:
        action = FileAction.MOVE if move else FileAction.COPY
        refusal = await self._manager.refuse(action, src, dst=dst)
        if refusal is not None:
            return refusal
        try:
            await (self._manager.fs.move if move else self._manager.fs.copy)(src, dst, overwrite=overwrite)
        except (OSError, ValueError) as exc:
            return self._manager.failure(exc, src)
        if move:
            self._manager.forget(src)
        return FileResponse(
            success=True, path=self._manager.normalize(dst), metadata={"src": self._manager.normalize(src)}
        )

    def open_stream(self, path: str, *, append: bool = False, create_dirs: bool = True) -> ConstrainedStream:
        """A byte stream to ``path`` under the constraints: ``async with writer.open_stream(p) as s:
        await s.write(chunk)``; the new content appears only when the block ends cleanly."""
        return ConstrainedStream(self._manager, path, append=append, create_dirs=create_dirs)

    async def execute_batch(self, requests: Sequence[Mapping[str, Any]]) -> list[FileResponse]:
        """Run requests in order; each succeeds or fails on its own (see each response)."""
        responses = []
        for request in requests:
            try:
                responses.append(await self.execute(**dict(request)))
            except TypeError as exc:
                responses.append(FileResponse(success=False, error=f"invalid request {dict(request)!r}: {exc}"))
        return responses


class ConstrainedStream:
    """An async byte writer that counts the bytes the file will hold and refuses the chunk that would take it
    past a limit: the refusal discards everything written, so the old content stays (nothing half-written).

    Path rules are checked when the block is entered, before anything is opened; an appending stream starts
    its count at the file's current size.
    """

    def __init__(self, manager: ManagerServices, path: str, *, append: bool, create_dirs: bool) -> None:
        self._manager = manager
        self._path = path
        self._append = append
        self._create_dirs = create_dirs
        self._writer: AsyncByteWriter | None = None
        self._size = 0
        self._refusal: BaseException | None = None
        self._discarded = False

    @property
    def size(self) -> int:
        """The size the file will have when the stream commits."""
        return self._size

    async def __aenter__(self) -> ConstrainedStream:
        await self._manager.admit(FileAction.APPEND if self._append else FileAction.WRITE, self._path)
        self._size = await self._manager.existing_size(self._path) if self._append else 0
        self._manager.check("write", self._path, size=self._size)
        self._writer = await self._manager.fs.open_write(
            self._path, mode="append" if self._append else "overwrite", create_parents=self._create_dirs
        )
        return self

    async def write(self, data: BytesLike) -> int:
        """Write ``data``, or discard the whole stream and raise if the file would pass a limit."""
        writer = self._open_writer()
        try:
            self._manager.check("write", self._path, size=self._size + memoryview(data).nbytes)
        except REFUSALS as exc:
            self._refusal = exc
            await self._discard()
            raise
        written = await writer.write(data)
        self._size += written
        return written

    async def write_all(self, chunks: Iterable[BytesLike] | AsyncIterable[BytesLike]) -> int:
        """Write every chunk of a (sync or async) iterable; the number of bytes written."""
        total = 0
        if isinstance(chunks, AsyncIterable):
            async for chunk in chunks:
                total += await self.write(chunk)
        else:
            for chunk in chunks:
                total += await self.write(chunk)
        return total

    def _open_writer(self) -> AsyncByteWriter:
        if self._refusal is not None:
            raise self._refusal  # refused once, discarded for good: nothing more is written
        if self._writer is None:
            raise RuntimeError("use the stream inside 'async with'")
        return self._writer

    async def _discard(self) -> None:
        self._discarded = True
        if self._writer is not None:
            await self._writer.abort()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._writer is None or self._discarded:
            return
        if exc_type is not None:
            await self._discard()
            return
        await self._writer.aclose()
        await self._manager.register_file(self._manager.normalize(self._path), "a" if self._append else "w")
