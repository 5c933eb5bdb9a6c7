"""``WriterTool``: write, append, delete, move, copy and create directories, each atomic and checked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workspacefs.manager._models import FileAction, FileResponse
from workspacefs.manager._services import ManagerServices

__all__ = ["WriterTool"]

_ACTIONS = ("write", "append", "delete", "move", "copy", "create_dirs")


class WriterTool:
    """Changes files through the filesystem protocol (seed 003's writer); every change is atomic or
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
        for path in (src, dst):
            refusal = await self._manager.refuse(action, path)
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

    async def execute_batch(self, requests: Sequence[Mapping[str, Any]]) -> list[FileResponse]:
        """Run requests in order; each succeeds or fails on its own (see each response)."""
        responses = []
        for request in requests:
            try:
                responses.append(await self.execute(**dict(request)))
            except TypeError as exc:
                responses.append(FileResponse(success=False, error=f"invalid request {dict(request)!r}: {exc}"))
        return responses
