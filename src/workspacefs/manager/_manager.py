"""``FileManager``: tracks files, enforces ``PathConstraints`` and routes requests to its tools."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import anyio.to_thread

from workspacefs.asyncfs import AsyncFilesystem
from workspacefs.errors import error_code
from workspacefs.manager._constraints import REFUSALS, Operation, PathConstraints, refusal_reason
from workspacefs.manager._models import FileAction, FileRequest, FileResponse, FileState
from workspacefs.manager._reader import ReaderTool
from workspacefs.manager._writer import WriterTool
from workspacefs.paths import is_within, join, normalize_path, relative_to
from workspacefs.policy import Policy
from workspacefs.protocol import Filesystem

__all__ = ["FileManager"]

_OPERATIONS: dict[FileAction, Operation] = {
    FileAction.READ: "read",
    FileAction.CHUNK: "read",
    FileAction.LIST: "read",
    FileAction.WRITE: "write",
    FileAction.APPEND: "write",
    FileAction.CREATE: "write",
    FileAction.COPY: "read",
    FileAction.MOVE: "delete",
    FileAction.DELETE: "delete",
}
"""What each action does to the path it names (a copy reads its source, a move removes it)."""


class FileManager:
    """Central manager for file operations and tool coordination over any filesystem.

    Constraints are checked on the normalised path before any I/O, and sizes on what each file will hold
    afterwards, all through :meth:`check`; a refusal comes back as a ``FileResponse(success=False)`` whose
    ``error`` names the rule and whose ``metadata["error_code"]`` is the typed error's code (streams raise
    the typed error). All I/O runs in worker threads through
    :class:`~workspacefs.asyncfs.AsyncFilesystem`, so the event loop stays free. Every operation also obeys
    ``policy`` (default: :meth:`Policy.default() <workspacefs.policy.Policy.default>`); an async approver runs
    on the caller's event loop.
    """

    def __init__(
        self,
        filesystem: Filesystem,
        *,
        constraints: PathConstraints | None = None,
        state_ttl: timedelta = timedelta(hours=1),
        policy: Policy | None = None,
    ) -> None:
        self.policy = policy if policy is not None else Policy.default()
        self.filesystem: Filesystem = self.policy.guard(filesystem)  # every read and write below obeys the policy
        self.fs = AsyncFilesystem(self.filesystem)
        self.constraints = constraints or PathConstraints()
        self.states: dict[str, FileState] = {}
        self.state_ttl = state_ttl
        self._tools: dict[str, Any] = {}
        self.register_tool("reader", ReaderTool(self))
        self.register_tool("writer", WriterTool(self))

    # --- tools ----------------------------------------------------------------------------------

    def register_tool(self, name: str, tool: Any) -> None:
        """Make ``tool`` available as ``get_tool(name)``."""
        self._tools[name] = tool

    def get_tool(self, name: str) -> Any:
        """A registered tool (``KeyError`` naming the known ones otherwise)."""
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(f"no tool {name!r}; registered: {', '.join(sorted(self._tools))}") from None

    @property
    def reader(self) -> ReaderTool:
        tool: ReaderTool = self._tools["reader"]
        return tool

    @property
    def writer(self) -> WriterTool:
        tool: WriterTool = self._tools["writer"]
        return tool

    # --- validation -----------------------------------------------------------------------------

    def normalize(self, path: str) -> str:
        """The normalised form of ``path`` for this filesystem (or the path itself if invalid)."""
        try:
            return normalize_path(str(path), mount_point=self.filesystem.mount_point)
        except (ValueError, PermissionError, TypeError):
            return str(path)

    async def validate_operation(self, action: FileAction, path: str, **kwargs: Any) -> bool:
        """True if the constraints allow ``action`` on ``path``: ``size`` or ``content`` are the bytes it
        writes (an append adds them to the file), ``dst`` the destination of a copy or move."""
        dst = kwargs.get("dst")
        return await self.refuse(action, path, dst=None if dst is None else str(dst), size=_size_of(kwargs)) is None

    async def refuse(
        self,
        action: FileAction,
        path: str,
        *,
        dst: str | None = None,
        size: int | None = None,
        is_file: bool | None = None,
    ) -> FileResponse | None:
        """:meth:`admit` as a response: a failed one naming the rule that refuses (or the I/O that failed),
        or ``None`` when the operation may go ahead."""
        try:
            await self.admit(action, path, dst=dst, size=size, is_file=is_file)
        except REFUSALS as exc:
            return FileResponse(
                success=False,
                path=str(path),
                error=f"refused by {refusal_reason(exc)}",
                metadata={"error_code": error_code(exc)},
            )
        except (OSError, ValueError) as exc:
            return self.failure(exc, path)
        return None

    async def admit(
        self,
        action: FileAction,
        path: str,
        *,
        dst: str | None = None,
        size: int | None = None,
        is_file: bool | None = None,
    ) -> None:
        """Raise the typed error of the first rule ``action`` would break, judged on what it leaves behind.

        Path rules on ``path`` (and ``dst``) come first, without I/O. Then each file is judged at the size
        it will have: a write holds ``size`` bytes, an append adds them to the file, a copy or move carries
        the source's size, and a directory copy, move or delete is judged file by file.
        """
        checks_file = action is not FileAction.LIST if is_file is None else is_file
        self.check(_OPERATIONS[action], path, is_file=checks_file)
        if dst is not None:
            self.check("write", dst, is_file=checks_file)
        if action in (FileAction.READ, FileAction.CHUNK):
            if size is None:
                size = (await self.fs.stat(path)).size_bytes
            self.check("read", path, size=size, is_file=checks_file)
        elif action in (FileAction.WRITE, FileAction.CREATE, FileAction.APPEND):
            if size is not None:
                base = await self.existing_size(path) if action is FileAction.APPEND else 0
                self.check("write", path, size=base + size, is_file=checks_file)
        elif action in (FileAction.COPY, FileAction.MOVE, FileAction.DELETE):
            await self._admit_tree(action, path, dst)

    def check(self, operation: Operation, path: str, *, size: int | None = None, is_file: bool = True) -> None:
        """The one gate: raise if a rule refuses ``operation`` on ``path``, a file that will hold ``size`` bytes.

        Every path goes through it — named paths, each file of a directory, every chunk of a stream.
        """
        self.constraints.check(self._mount_relative(path), size=size, is_file=is_file, operation=operation)

    async def existing_size(self, path: str) -> int:
        """The size of the file at ``path`` now (0 when there is none), which an append adds to."""
        try:
            info = await self.fs.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return 0
        return info.size_bytes if info.is_file else 0

    async def _admit_tree(self, action: FileAction, src: str, dst: str | None) -> None:
        """Judge what a copy, move or delete touches: each entry at its source, and at its destination with
        its size — for a directory, every entry below it, so nothing inside escapes the rules."""
        info = await self.fs.stat(src)
        if not info.is_directory:
            if dst is not None:
                self.check("write", dst, size=info.size_bytes)
            return
        source = normalize_path(str(src), mount_point=self.filesystem.mount_point)
        target = None if dst is None else normalize_path(str(dst), mount_point=self.filesystem.mount_point)
        entries = await anyio.to_thread.run_sync(lambda: list(self.filesystem.walk(src)))
        for entry in entries:
            self.check(_OPERATIONS[action], entry.path, is_file=entry.is_file)
            if target is None:
                continue
            size = entry.size_bytes
            if entry.is_file and size is None:
                size = (await self.fs.stat(entry.path)).size_bytes
            self.check("write", join(target, relative_to(entry.path, source)), size=size, is_file=entry.is_file)

    def _mount_relative(self, path: str) -> str:
        mount = self.filesystem.mount_point
        text = str(path)
        if mount and (text == mount or text.startswith(mount + "/")):
            return text[len(mount) :] or "/"
        return text

    def failure(self, exc: BaseException, path: str) -> FileResponse:
        """A failed response for an exception raised while working on ``path`` (its type's code in metadata)."""
        return FileResponse(
            success=False,
            path=str(path),
            error=f"{type(exc).__name__}: {exc}",
            metadata={"error_code": error_code(exc)},
        )

    # --- state ------------------------------------------------------------------------------------

    async def register_file(self, path: str, mode: str = "r", **metadata: Any) -> str:
        """Track a file; return its id (the same id while the state lives)."""
        norm = self.normalize(path)
        for state in self.states.values():
            if state.path == norm and state.mode == mode:
                state.last_accessed = datetime.now()
                state.metadata.update(metadata)
                return state.file_id
        try:
            size: int | None = (await self.fs.stat(norm)).size_bytes
        except (OSError, ValueError):
            size = None
        file_id = "FILE_" + uuid.uuid4().hex[:16]
        self.states[file_id] = FileState(file_id=file_id, path=norm, mode=mode, size=size, metadata=dict(metadata))
        return file_id

    async def touch(self, path: str) -> None:
        """Note that ``path`` was used just now."""
        norm = self.normalize(path)
        for state in self.states.values():
            if state.path == norm:
                state.last_accessed = datetime.now()

    def forget(self, path: str) -> None:
        """Drop the states of ``path`` and everything below it (after a delete or move)."""
        norm = self.normalize(path)
        for file_id in [i for i, s in self.states.items() if is_within(s.path, norm)]:
            del self.states[file_id]

    async def cleanup(self) -> int:
        """Delete temporary files, drop states unused for ``state_ttl`` and opened documents.

        Returns how many states went.
        """
        cutoff = datetime.now() - self.state_ttl
        doomed = [i for i, s in self.states.items() if s.is_temp or s.last_accessed < cutoff]
        for file_id in doomed:
            state = self.states.pop(file_id)
            if state.is_temp:
                for path in (state.temp_path, state.path):
                    if path and await self.fs.exists(path):
                        await self.fs.delete(path)
        self.reader.close()
        return len(doomed)

    # --- requests ---------------------------------------------------------------------------------

    async def execute(self, request: FileRequest) -> FileResponse:
        """Carry out a :class:`FileRequest` through the manager's tools."""
        options = dict(request.options)
        action = request.action
        if action in (FileAction.WRITE, FileAction.APPEND):
            return await self.writer.execute(
                "append" if action is FileAction.APPEND else "write",
                request.path,
                request.content or "",
                create_dirs=options.get("create_dirs", True),
            )
        if action is FileAction.CREATE:
            if options.get("is_directory"):
                return await self.writer.execute("create_dirs", request.path)
            return await self._create(request.path, request.content or "")
        if action is FileAction.DELETE:
            return await self.writer.execute("delete", request.path, recursive=options.get("recursive", False))
        if action in (FileAction.MOVE, FileAction.COPY):
            return await self.writer.execute(
                action.value, request.path, dst=options.get("dst"), overwrite=options.get("overwrite", False)
            )
        if action is FileAction.LIST:
            return await self.reader.list_dir(request.path)
        return await self._read(request.path, options, chunked=action is FileAction.CHUNK)

    async def _create(self, path: str, content: str) -> FileResponse:
        refusal = await self.refuse(FileAction.CREATE, path, size=len(content.encode("utf-8")))
        if refusal is not None:
            return refusal
        try:
            result = await self.fs.write(path, content, mode="create")
        except (OSError, ValueError) as exc:
            return self.failure(exc, path)
        file_id = await self.register_file(result.path, "w")
        return FileResponse(success=True, file_id=file_id, path=result.path)

    async def _read(self, path: str, options: dict[str, Any], *, chunked: bool) -> FileResponse:
        opened = await self.reader.open(path, chunk_size=int(options.get("chunk_size", 1000)))
        if not opened.success or opened.doc_id is None:
            return opened
        start, end = options.get("start_offset"), options.get("end_offset")
        if chunked:
            size = int(options.get("chunk_size", 1000))
            index = int(options.get("index", 0))
            start, end = index * size, (index + 1) * size
        response = await self.reader.read(opened.doc_id, start, end)
        return response.model_copy(update={"file_id": opened.file_id})


def _size_of(kwargs: dict[str, Any]) -> int | None:
    if "size" in kwargs:
        return int(kwargs["size"])
    content = kwargs.get("content")
    return len(content.encode("utf-8")) if isinstance(content, str) else None
