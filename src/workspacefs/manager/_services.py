"""What the reader and writer tools use of their ``FileManager``, as a protocol (so neither imports it)."""

from __future__ import annotations

from typing import Any, Protocol

from workspacefs.asyncfs import AsyncFilesystem
from workspacefs.manager._constraints import Operation
from workspacefs.manager._models import FileAction, FileResponse
from workspacefs.protocol import Filesystem

__all__ = ["ManagerServices"]


class ManagerServices(Protocol):
    """The constraint checks, path forms, error responses and open-file state a tool relies on."""

    filesystem: Filesystem
    fs: AsyncFilesystem

    def normalize(self, path: str) -> str: ...

    async def refuse(
        self,
        action: FileAction,
        path: str,
        *,
        dst: str | None = None,
        size: int | None = None,
        is_file: bool | None = None,
    ) -> FileResponse | None: ...

    async def admit(
        self,
        action: FileAction,
        path: str,
        *,
        dst: str | None = None,
        size: int | None = None,
        is_file: bool | None = None,
    ) -> None: ...

    def check(self, operation: Operation, path: str, *, size: int | None = None, is_file: bool = True) -> None: ...

    async def existing_size(self, path: str) -> int: ...

    def failure(self, exc: BaseException, path: str) -> FileResponse: ...

    async def register_file(self, path: str, mode: str = "r", **metadata: Any) -> str: ...

    async def touch(self, path: str) -> None: ...

    def forget(self, path: str) -> None: ...
