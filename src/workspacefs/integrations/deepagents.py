"""deepagents backends over any workspacefs filesystem: ``create_deep_agent(backend=WorkspaceBackend(fs))``.

:class:`WorkspaceBackend` implements the ``BackendProtocol`` of deepagents 0.7 (``ls``, ``read``, ``write``,
``edit``, ``delete``, ``grep``, ``glob``, ``upload_files``, ``download_files`` and their ``a…`` async forms) on
memory, a sandboxed host directory, SQLite/PostgreSQL, an object store or a container workspace; on a workspace
that runs commands (``fs.capabilities.exec``) it is a :class:`WorkspaceSandboxBackend`, deepagents'
``SandboxBackendProtocol`` with ``execute``. Results are deepagents' own values, worded as its
``FilesystemBackend`` (virtual mode) words them; failures are ``error`` fields, never exceptions.

On purpose stricter than ``FilesystemBackend``: symbolic links are never followed (listed nowhere, refused when
named), the workspace policy (``Policy.default()`` unless given) guards every read, write and command, the
workspace root cannot be deleted, each file has one spelling (so deepagents' own permission rules cannot be
walked around), and paths obey workspacefs's limits (16 segments, 80 characters a name).
"""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

try:
    from deepagents.backends.protocol import (
        BackendProtocol,
        DeleteResult,
        EditResult,
        ExecuteResponse,
        FileData,
        FileDownloadResponse,
        FileInfo,
        FileUploadResponse,
        GlobResult,
        GrepMatch,
        GrepResult,
        LsResult,
        ReadResult,
        SandboxBackendProtocol,
        WriteResult,
    )
    from deepagents.backends.utils import (
        MAX_VIDEO_INPUT_BYTES,
        InvalidGlobPatternError,
        _get_backend_read_file_type,
        check_empty_content,
        compile_grep_include_glob,
        perform_string_replacement,
        slice_read_response,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise ImportError(
        "workspacefs.integrations.deepagents needs deepagents 0.7: pip install 'workspacefs[deepagents]'"
    ) from exc

from workspacefs.capabilities import Capabilities
from workspacefs.errors import UnsupportedOperationError, caller_paths
from workspacefs.integrations._deepagents_errors import file_error, kind_of, missing
from workspacefs.integrations._deepagents_paths import VirtualPaths, relative
from workspacefs.integrations._deepagents_text import crlf_only, execute_response, iso, universal_newlines
from workspacefs.paths import ancestors, parent
from workspacefs.policy import Policy
from workspacefs.protocol import CommandRunner, ConditionalWrites, Filesystem

__all__ = ["WorkspaceBackend", "WorkspaceSandboxBackend"]

GLOB_BUDGET_S: Final = 5.0
"""Wall-clock budget of one ``glob`` walk, as ``FilesystemBackend``'s: past it the matches so far are returned
with ``truncated=True``."""

DEFAULT_EXECUTE_TIMEOUT: Final = 120
"""Seconds a command may run when the caller names no timeout (deepagents' ``LocalShellBackend`` default)."""

MAX_OUTPUT_BYTES: Final = 100_000
"""Bytes of each output stream ``execute`` returns, head and tail kept (``LocalShellBackend`` cuts its output at
this many bytes)."""

_EVERY_MATCH: Final = 2**31
"""``max_matches`` that means no cap (workspacefs caps grep at 1,000 unless told otherwise)."""


class WorkspaceBackend(BackendProtocol):
    """deepagents' ``BackendProtocol`` over a workspacefs filesystem (module docstring: what differs on purpose).

    Paths are absolute: ``/`` plus the workspace path (``/src/app.py``), under the filesystem's mount point when it
    has one (``/workspace/src/app.py`` in a container, as its commands see it). ``policy`` guards every operation
    (``None``: ``Policy.default()``; ``Policy()`` allows everything). On a workspace that runs commands the
    constructor returns a :class:`WorkspaceSandboxBackend`.
    """

    def __new__(cls, fs: Filesystem, *, policy: Policy | None = None, **options: object) -> WorkspaceBackend:  # noqa: ARG004 - __init__ takes them
        """A :class:`WorkspaceSandboxBackend` where ``fs.capabilities.exec`` (deepagents offers ``execute`` by
        class, so the class must say it)."""
        chosen = WorkspaceSandboxBackend if cls is WorkspaceBackend and fs.capabilities.exec else cls
        instance: WorkspaceBackend = object.__new__(chosen)
        return instance

    def __init__(self, fs: Filesystem, *, policy: Policy | None = None) -> None:
        self._fs: Filesystem = (policy if policy is not None else Policy.default()).guard(fs)
        self._paths = VirtualPaths(fs.mount_point)

    @property
    def filesystem(self) -> Filesystem:
        """The workspace as this backend sees it: through its policy."""
        return self._fs

    @property
    def capabilities(self) -> Capabilities:
        """What the workspace beneath can do."""
        return self._fs.capabilities

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._fs!r})"

    # --- paths ---------------------------------------------------------------------------------------------

    @contextmanager
    def _at(self, path: str) -> Iterator[str]:
        """The workspace path of ``path``; errors raised inside name ``path`` as the caller gave it."""
        norm = self._paths.inside(path)
        with caller_paths({norm: path}):
            yield norm

    def _info(self, norm: str, *, is_dir: bool) -> FileInfo:
        """A ``FileInfo`` of one entry (just path and kind if it vanished meanwhile)."""
        shown = self._paths.shown(norm) + ("/" if is_dir else "")
        try:
            stat = self._fs.stat(norm)
        except OSError:
            return {"path": shown, "is_dir": is_dir}
        info: FileInfo = {"path": shown, "is_dir": is_dir, "size": 0 if is_dir else stat.size_bytes}
        modified = iso(stat.modified_at)
        if modified is not None:
            info["modified_at"] = modified
        return info

    def _content(self, norm: str) -> bytes:
        """A whole file, streamed (no convenience cap, as ``FilesystemBackend`` has none)."""
        with self._fs.open_read(norm) as reader:
            return reader.read()

    def _under_a_file(self, norm: str) -> bool:
        """True when a file stands where ``norm`` needs a directory (deepagents calls that an invalid path; some
        backends report it as missing)."""
        return any(self._fs.stat(above).is_file for above in ancestors(norm) if self._fs.exists(above))

    def _search_root(self, path: str | None) -> tuple[str, str]:
        """``(workspace path to search, the absolute path asked for)``; above the mount point: the whole of it."""
        asked = self._paths.absolute(path or "/")
        return ("" if self._paths.above(asked) else self._paths.inside(asked)), asked

    # --- reading -------------------------------------------------------------------------------------------

    def ls(self, path: str) -> LsResult:
        """The entries directly in a directory, directories with a trailing ``/``, sorted by path."""
        try:
            above = self._paths.above(path)
            if above is not None:
                return LsResult(entries=[{"path": above + "/", "is_dir": True, "size": 0}])
            with self._at(path) as norm:
                if not self._fs.stat(norm).is_directory:
                    return LsResult(error=f"Path '{path}': not_a_directory")
                entries = self._fs.list(norm)
        except Exception as exc:
            if missing(exc):
                return LsResult(error=f"Path '{path}': path_not_found")
            return LsResult(error=f"Cannot list '{path}': {exc}")
        infos = [self._info(entry.path, is_dir=entry.is_directory) for entry in entries]
        infos.sort(key=lambda info: info["path"])
        return LsResult(entries=infos)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Lines ``[offset, offset + limit)`` of a text file, raw (the middleware numbers them); a binary type
        (by extension, as deepagents decides) whole, in base64."""
        try:
            with self._at(file_path) as norm:
                stat = self._fs.stat(norm)
                if not stat.is_file:
                    return ReadResult(error=f"File '{file_path}' not found")
                kind = _get_backend_read_file_type(file_path)
                if kind != "text":
                    if kind == "video" and stat.size_bytes > MAX_VIDEO_INPUT_BYTES:
                        return ReadResult(
                            error=f"Video file exceeds maximum input size of {MAX_VIDEO_INPUT_BYTES} bytes"
                        )
                    encoded = base64.standard_b64encode(self._content(norm)).decode("ascii")
                    return ReadResult(file_data=FileData(content=encoded, encoding="base64"))
                text = universal_newlines(self._content(norm).decode("utf-8"))
        except Exception as exc:
            if missing(exc):
                return ReadResult(error=f"File '{file_path}' not found")
            return ReadResult(error=f"Error reading file '{file_path}': {exc}")
        empty = check_empty_content(text)
        if empty is not None:
            return ReadResult(file_data=FileData(content=empty, encoding="utf-8"))
        return slice_read_response(FileData(content=text, encoding="utf-8"), offset, limit)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Each file's bytes, or a ``FileOperationError`` for it; one response per path, in order."""
        responses = []
        for path in paths:
            try:
                with self._at(path) as norm:
                    try:
                        if self._fs.stat(norm).is_directory:
                            responses.append(FileDownloadResponse(path=path, error="is_directory"))
                            continue
                        responses.append(FileDownloadResponse(path=path, content=self._content(norm)))
                    except Exception as exc:
                        if missing(exc) and self._under_a_file(norm):
                            responses.append(FileDownloadResponse(path=path, error="invalid_path"))
                            continue
                        raise
            except Exception as exc:
                responses.append(FileDownloadResponse(path=path, error=file_error(exc)))
        return responses

    # --- searching -----------------------------------------------------------------------------------------

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        """Lines containing ``pattern`` literally (never a regex), under ``path`` (a directory or one file),
        in files ``glob`` includes (deepagents' include-glob rules); at most ``max_count``, ``truncated`` when
        more exist. Binary files (a NUL byte) are skipped, as ripgrep skips them."""
        include: Callable[[str], bool] | None = None
        if glob is not None:
            try:
                include = compile_grep_include_glob(glob)
            except InvalidGlobPatternError as exc:
                return GrepResult(error=str(exc), matches=[])
        base = path or "/"
        try:
            norm, asked_path = self._search_root(path)
            stat = self._fs.stat(norm)
        except Exception as exc:
            if kind_of(exc) in ("missing", "no_parent", "invalid"):
                return GrepResult(matches=[])
            return GrepResult(error=f"Error searching path '{base}': {exc}", matches=[])
        where = asked_path if stat.is_directory else self._paths.shown(parent(norm))
        want = _EVERY_MATCH if max_count is None else max_count + 1  # one past the cap says more exist
        asked = want if include is None else max(want, 1000)
        while True:
            try:
                found = self._fs.grep(re.escape(pattern), path=norm, max_matches=asked)
            except Exception as exc:
                kind_of(exc)
                return GrepResult(error=f"Error searching path '{base}': {exc}", matches=[])
            shown = [(self._paths.shown(m.path), m) for m in found]
            kept = [(s, m) for s, m in shown if include is None or include(relative(s, where))]
            if len(found) < asked or len(kept) >= want or asked >= _EVERY_MATCH:
                break
            asked = min(asked * 4, _EVERY_MATCH)  # the glob left some out: ask for more
        matches: list[GrepMatch] = [{"path": s, "line": m.line_number, "text": m.line_content} for s, m in kept]
        if max_count is not None and len(matches) > max_count:
            return GrepResult(matches=matches[:max_count], truncated=True)
        return GrepResult(matches=matches)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Files under ``path`` matching ``pattern`` by deepagents' glob rules (a bare pattern matches names at
        any depth, ``/`` anchors, dot-names need a dot), sorted by path."""
        try:
            matches_pattern = compile_grep_include_glob(pattern)
        except InvalidGlobPatternError as exc:
            return GlobResult(error=str(exc), matches=None)
        shown = path if path is not None else "<default>"
        try:
            root, asked = self._search_root(path)
            if not self._fs.stat(root).is_directory:
                return GlobResult(matches=[])
        except Exception as exc:
            if kind_of(exc) in ("missing", "no_parent", "invalid"):
                return GlobResult(matches=[])
            return GlobResult(error=f"Error globbing path '{shown}': {exc}", matches=[])
        deadline = time.monotonic() + GLOB_BUDGET_S
        found: list[str] = []
        truncated = False
        try:
            for entry in self._fs.walk(root):
                if time.monotonic() > deadline:
                    truncated = True
                    break
                if entry.is_file and matches_pattern(relative(self._paths.shown(entry.path), asked)):
                    found.append(entry.path)
        except Exception as exc:
            kind_of(exc)  # a bug is raised; a caller's error ends the walk with what it found
            infos = sorted((self._info(n, is_dir=False) for n in found), key=lambda i: i["path"])
            return GlobResult(error=f"Glob of '{shown}' aborted partway: {exc}", matches=infos)
        infos = sorted((self._info(n, is_dir=False) for n in found), key=lambda i: i["path"])
        return GlobResult(matches=infos, truncated=truncated, truncation_reason="budget" if truncated else None)

    # --- writing -------------------------------------------------------------------------------------------

    def write(self, file_path: str, content: str) -> WriteResult:
        """Create or overwrite a text file (parents made as needed), atomically."""
        try:
            with self._at(file_path) as norm:
                self._fs.write(norm, content)
        except Exception as exc:
            kind_of(exc)
            return WriteResult(error=f"Error writing file '{file_path}': {exc}")
        return WriteResult(path=file_path)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        """Replace ``old_string`` (exactly once, or every time with ``replace_all``) in a text file. The write is
        a compare-and-set over the version read, so a change made meanwhile is never lost; a file whose lines
        all end in CRLF keeps them."""
        try:
            with self._at(file_path) as norm:
                if not self._fs.stat(norm).is_file:
                    return EditResult(error=f"Error: File '{file_path}' not found")
                raw, version = self._versioned(norm)
                text = raw.decode("utf-8")
                replaced = perform_string_replacement(
                    universal_newlines(text),
                    universal_newlines(old_string),
                    universal_newlines(new_string),
                    replace_all,
                )
                if isinstance(replaced, str):
                    return EditResult(error=replaced)
                content, occurrences = replaced
                data = (content.replace("\n", "\r\n") if crlf_only(text) else content).encode("utf-8")
                if version is None:
                    self._fs.write_bytes(norm, data)
                else:
                    self._conditional().write_bytes_if(norm, data, expect=version)
        except Exception as exc:
            if missing(exc):
                return EditResult(error=f"Error: File '{file_path}' not found")
            return EditResult(error=f"Error editing file '{file_path}': {exc}")
        return EditResult(path=file_path, occurrences=int(occurrences))

    def _conditional(self) -> ConditionalWrites:
        conditional: ConditionalWrites = self._fs  # type: ignore[assignment]  # offered where capabilities say
        return conditional

    def _versioned(self, norm: str) -> tuple[bytes, str | None]:
        """A file's bytes and the content id of exactly those bytes (``None`` where the backend has none)."""
        if not self._fs.capabilities.conditional_writes:
            return self._content(norm), None
        versioned = self._conditional().open_versioned(norm)
        with versioned.reader as reader:
            return reader.read(), versioned.content_id

    def delete(self, file_path: str) -> DeleteResult:
        """Delete a file, or a directory with everything in it (never the workspace root)."""
        try:
            with self._at(file_path) as norm:
                self._fs.delete(norm, recursive=True)
        except Exception as exc:
            if missing(exc):
                return DeleteResult(error=f"Error: '{file_path}' not found")
            return DeleteResult(error=f"Error deleting '{file_path}': {exc}")
        return DeleteResult(path=file_path)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each file's bytes (parents made, any file there replaced); one response per file, in order."""
        responses = []
        for path, content in files:
            try:
                with self._at(path) as norm, self._fs.open_write(norm) as writer:
                    writer.write(content)
                responses.append(FileUploadResponse(path=path))
            except Exception as exc:
                responses.append(FileUploadResponse(path=path, error=file_error(exc)))
        return responses


class WorkspaceSandboxBackend(WorkspaceBackend, SandboxBackendProtocol):
    """A :class:`WorkspaceBackend` whose workspace runs commands (a container): deepagents'
    ``SandboxBackendProtocol``. Commands run in the workspace directory, inside the container, never on the
    caller's machine; output reads as ``LocalShellBackend``'s (stderr lines marked ``[stderr]``)."""

    def __init__(
        self,
        fs: Filesystem,
        *,
        policy: Policy | None = None,
        timeout: int = DEFAULT_EXECUTE_TIMEOUT,
        max_output_bytes: int = MAX_OUTPUT_BYTES,
    ) -> None:
        if not fs.capabilities.exec:
            raise UnsupportedOperationError(f"{fs!r} runs no commands (capabilities.exec is False)")
        super().__init__(fs, policy=policy)
        self._timeout = timeout
        self._max_output = max_output_bytes
        self._id = f"workspacefs-{uuid.uuid4().hex[:12]}"

    @property
    def id(self) -> str:
        """This backend's identifier (unique per instance)."""
        return self._id

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run ``command`` with ``sh -c`` in the workspace; a failure to run it is an output, not an exception.

        Raises:
            ValueError: a timeout that is not positive (the middleware reports it as an invalid parameter).
        """
        if not command or not isinstance(command, str):
            return ExecuteResponse(output="Error: Command must be a non-empty string.", exit_code=1)
        seconds = timeout if timeout is not None else self._timeout
        if seconds <= 0:
            raise ValueError(f"timeout must be positive, got {seconds}")
        runner: CommandRunner = self._fs  # type: ignore[assignment]  # capabilities.exec, checked on construction
        try:
            done = runner.exec(command, timeout=seconds, max_output=self._max_output)
        except Exception as exc:
            kind_of(exc)
            return ExecuteResponse(output=f"Error executing command ({type(exc).__name__}): {exc}", exit_code=1)
        if done.timed_out:
            hint = " (custom timeout). The command may be stuck or require more time."
            if timeout is None:
                hint = ". For long-running commands, re-run using the timeout parameter."
            return ExecuteResponse(output=f"Error: Command timed out after {seconds} seconds{hint}", exit_code=124)
        return execute_response(done)
