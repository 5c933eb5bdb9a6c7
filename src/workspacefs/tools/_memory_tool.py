"""Anthropic's memory tool (``memory_20250818``), confined to the ``/memories`` directory of any workspace.

Memories then live wherever the workspace does — in SQLite or PostgreSQL they outlast the process and are
shared by every session of one agent that opens the same workspace. Listings, line numbers and messages
follow the Anthropic SDK's reference (``BetaLocalFilesystemMemoryTool``). Every path must start with
``/memories`` and stays under it (``..`` that climbs out is refused); the workspace's own path rules,
policy, limits and read-before-write apply on top (``view`` a file before changing it).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workspacefs.paths import is_within, normalize_path
from workspacefs.protocol import Filesystem
from workspacefs.tools._core import Tool, ToolContext, ToolResult
from workspacefs.tools._editing import (
    RefusalError,
    check_edit_size,
    commit,
    current_id,
    echo,
    line_numbers,
    load_text,
    note_read,
    record_edit,
    refuse_if_stale,
    require_fresh,
)
from workspacefs.tools._messages import failure, failure_from
from workspacefs.tools._text_editor import MAX_RESPONSE_CHARS, clip
from workspacefs.tools._text_tools import MAX_WRITE_CHARS
from workspacefs.undo import UndoLog

__all__ = ["MEMORY", "MEMORY_DIRECTORY", "MemoryParams", "memory_path"]

MEMORY_DIRECTORY = "memories"
"""Where ``/memories`` lives, relative to the workspace root."""
_PREFIX = "/memories"
_WIDTH = 6


class MemoryParams(BaseModel):
    """The input of every memory command (each uses some of these)."""

    model_config = ConfigDict(extra="ignore")

    command: str = Field(description="view, create, str_replace, insert, delete or rename.")
    path: str | None = None
    view_range: list[int] | None = None
    file_text: str | None = None
    old_str: str | None = None
    new_str: str | None = None
    insert_line: int | None = None
    insert_text: str | None = None
    old_path: str | None = None
    new_path: str | None = None


def memory_path(path: str) -> str:
    """The workspace path of a ``/memories/…`` path (``RefusalError`` if it is not under ``/memories``)."""
    if not path.startswith(_PREFIX):
        raise RefusalError(f"Path must start with /memories, got: {path}", "outside_memories")
    rest = path[len(_PREFIX) :]
    if rest and not rest.startswith("/"):
        raise RefusalError(f"Path must start with /memories, got: {path}", "outside_memories")
    norm = normalize_path(MEMORY_DIRECTORY + "/" + rest.lstrip("/") if rest.strip("/") else MEMORY_DIRECTORY)
    if not is_within(norm, MEMORY_DIRECTORY):
        raise RefusalError(f"Path {path} would escape /memories directory", "outside_memories")
    return norm


def _size(size: int) -> str:
    """``0B``, ``512B``, ``1.5K``, ``4K`` — the reference's sizes."""
    if size == 0:
        return "0B"
    index = min((size.bit_length() - 1) // 10, 3)
    value = size / (1024**index)
    unit = "BKMG"[index]
    return f"{int(value)}{unit}" if value == int(value) else f"{value:.1f}{unit}"


class _Memory:
    def __init__(self, params: MemoryParams, context: ToolContext) -> None:
        assert context.filesystem is not None
        self.fs: Filesystem = context.filesystem
        self.context = context
        self.params = params

    def _required(self, name: str) -> Any:
        value = getattr(self.params, name)
        if value is None:
            raise RefusalError(f"Parameter `{name}` is required for command: {self.params.command}")
        return value

    def run(self) -> str:
        commands = {
            "view": self._view,
            "create": self._create,
            "str_replace": self._str_replace,
            "insert": self._insert,
            "delete": self._delete,
            "rename": self._rename,
        }
        command = commands.get(self.params.command)
        if command is None:
            raise RefusalError(
                f"Unknown command: {self.params.command}. The memory tool's commands are: {', '.join(commands)}"
            )
        return command()

    def _view(self) -> str:
        given = self._required("path")
        norm = memory_path(given)
        if norm == MEMORY_DIRECTORY and not self.fs.exists(norm) and not self.fs.read_only:
            self.fs.mkdir(norm)
        if not self.fs.exists(norm):
            raise RefusalError(f"The path {given} does not exist. Please provide a valid path.", "not_found")
        info = self.fs.stat(norm)
        if info.is_directory:
            return self._listing(given, norm, info.size_bytes)
        loaded = load_text(self.fs, norm, doing="viewed")
        note_read(self.context, self.fs, norm, loaded.content_id, loaded.text)
        lines, start = loaded.text.split("\n"), 1
        view_range = self.params.view_range
        if view_range and len(view_range) == 2:
            first = max(1, view_range[0]) - 1
            lines = lines[first:] if view_range[1] == -1 else lines[first : view_range[1]]
            start = first + 1
        numbered = "\n".join(f"{str(i + start).rjust(_WIDTH)}\t{line}" for i, line in enumerate(lines))
        return f"Here's the content of {given} with line numbers:\n{clip(numbered, None)}"

    def _listing(self, given: str, norm: str, size: int) -> str:
        base = given.rstrip("/")
        rows = [f"{_size(size)}\t{given}"]
        for entry in sorted(self.fs.list(norm), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            if entry.is_directory:
                rows.append(f"{_size(0)}\t{base}/{entry.name}/")
                for inner in sorted(self.fs.list(entry.path), key=lambda e: e.name):
                    if not inner.name.startswith("."):
                        suffix = "/" if inner.is_directory else ""
                        rows.append(f"{_size(inner.size_bytes or 0)}\t{base}/{entry.name}/{inner.name}{suffix}")
            else:
                rows.append(f"{_size(entry.size_bytes or 0)}\t{base}/{entry.name}")
        header = f"Here're the files and directories up to 2 levels deep in {given}, excluding hidden items:"
        kept: list[str] = []
        size = 0
        for row in rows:  # whole rows, up to the text editor's cut
            size += len(row) + 1
            if size > MAX_RESPONSE_CHARS:
                left = len(rows) - len(kept)
                kept.append(f"… and {left} more not shown; view a file by its path, or delete memories not needed.")
                break
            kept.append(row)
        return header + "\n" + "\n".join(kept)

    def _reread(self, given: str) -> str:
        return f'the view command (command="view", path="{given}")'

    def _create(self) -> str:
        given, text = self._required("path"), self._required("file_text")
        norm = memory_path(given)
        if norm == MEMORY_DIRECTORY or self.fs.exists(norm):
            raise RefusalError(f"File {given} already exists", "already_exists")
        if len(text) > MAX_WRITE_CHARS:
            raise RefusalError(
                f"file_text has {len(text):,} characters; a memory file holds at most {MAX_WRITE_CHARS:,}."
            )
        commit(self.context, self.fs, norm, text.encode("utf-8"), expect=None, text=text, reread=self._reread(given))
        return f"File created successfully at: {given}"

    def _existing_file(self, given: str) -> tuple[str, Any]:
        norm = memory_path(given)
        if not self.fs.exists(norm):
            raise RefusalError(f"The path {given} does not exist. Please provide a valid path.", "not_found")
        if not self.fs.stat(norm).is_file:
            raise RefusalError(f"The path {given} is not a file.")
        loaded = load_text(self.fs, norm)
        require_fresh(self.context, self.fs, norm, loaded.content_id, reread=self._reread(given))
        return norm, loaded

    def _str_replace(self) -> str:
        given, old, new = self._required("path"), self._required("old_str"), self._required("new_str")
        norm, loaded = self._existing_file(given)
        content = loaded.text
        check_edit_size("new_str", new, MAX_WRITE_CHARS)
        lines, count = line_numbers(content, old) if old else ([], 0)
        if count == 0:
            raise RefusalError(
                f"No replacement was performed, old_str `{echo(old)}` did not appear verbatim in {given}."
            )
        if count > 1:
            more = f" (and {count - len(lines)} more)" if count > len(lines) else ""
            raise RefusalError(
                f"No replacement was performed. Multiple occurrences of old_str `{echo(old)}` in lines: "
                f"{', '.join(map(str, lines))}{more}. Please ensure it is unique"
            )
        at = content.find(old)
        updated = content.replace(old, new)
        commit(
            self.context, self.fs, norm, loaded.encode(updated), expect=loaded.content_id, text=updated,
            reread=self._reread(given),
        )  # fmt: skip
        new_lines = updated.split("\n")
        changed = content[:at].count("\n")
        first, last = max(0, changed - 2), min(len(new_lines), changed + 3)
        snippet = [f"{str(n).rjust(_WIDTH)}\t{echo(new_lines[n - 1])}" for n in range(first + 1, last + 1)]
        return "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n" + (
            "\n".join(snippet)
        )

    def _insert(self) -> str:
        given, line = self._required("path"), self._required("insert_line")
        text = self._required("insert_text")
        check_edit_size("The text", text, MAX_WRITE_CHARS)
        norm, loaded = self._existing_file(given)
        lines = loaded.text.split("\n")
        if lines[-1] == "":
            lines.pop()
        if line < 0 or line > len(lines):
            raise RefusalError(
                f"Invalid `insert_line` parameter: {line}. It should be within the range [0, {len(lines)}]."
            )
        lines.insert(line, text.rstrip("\n"))
        updated = "\n".join(lines)
        if not updated.endswith("\n"):
            updated += "\n"
        commit(
            self.context, self.fs, norm, loaded.encode(updated), expect=loaded.content_id, text=updated,
            reread=self._reread(given),
        )  # fmt: skip
        return f"The file {given} has been edited."

    def _delete(self) -> str:
        given = self._required("path")
        norm = memory_path(given)
        if norm == MEMORY_DIRECTORY:
            raise RefusalError("Cannot delete the /memories directory itself")
        if not self.fs.exists(norm):
            raise RefusalError(f"The path {given} does not exist", "not_found")
        if self.fs.stat(norm).is_file:  # deleting a file changed since it was read would lose that change unseen
            refuse_if_stale(self.context, self.fs, norm, current_id(self.fs, norm), self._reread(given))
        self.fs.delete(norm, recursive=True)
        self.context.read_state.forget(self.fs, norm)
        return f"Successfully deleted {given}"

    def _rename(self) -> str:
        old_given, new_given = self._required("old_path"), self._required("new_path")
        old, new = memory_path(old_given), memory_path(new_given)
        if old == MEMORY_DIRECTORY:
            raise RefusalError("Cannot rename the /memories directory itself")
        if new == MEMORY_DIRECTORY or self.fs.exists(new):
            raise RefusalError(f"The destination {new_given} already exists", "already_exists")
        if not self.fs.exists(old):
            raise RefusalError(f"The path {old_given} does not exist", "not_found")
        self.fs.move(old, new)
        self.context.read_state.forget(self.fs, old)
        return f"Successfully renamed {old_given} to {new_given}"


def _memory(params: MemoryParams, *, context: ToolContext) -> ToolResult[Any]:
    fs = context.filesystem
    if fs is None:
        return failure("No filesystem is available in this context; the tool cannot run.")
    try:
        return ToolResult(_Memory(params, context).run())
    except RefusalError as refused:
        return refused.result()
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path or params.old_path or "", verb="changed")  # with the type's code


def _undo_plan(params: MemoryParams, log: UndoLog) -> None:
    try:
        if params.command == "rename" and params.old_path and params.new_path:
            log.will_move(memory_path(params.old_path), memory_path(params.new_path))
        elif params.command in ("create", "str_replace", "insert") and params.path:
            record_edit(log, memory_path(params.path), create=params.command == "create")
        # delete: one delete call, as rm's, with nothing to put back part way (copying a tree first cost more)
    except RefusalError as refused:
        raise ValueError(refused.message) from None  # the handler refuses it with its own message


def memory_paths(arguments: dict[str, Any]) -> list[str]:
    """The workspace paths a memory call names (for MCP roots)."""
    found = []
    for name in ("path", "old_path", "new_path"):
        value = arguments.get(name)
        if isinstance(value, str):
            try:
                found.append(memory_path(value))
            except (RefusalError, ValueError, PermissionError):
                continue
    return found or [MEMORY_DIRECTORY]


MEMORY = Tool(
    name="memory",
    description="Anthropic's memory tool: keep notes in /memories across conversations.",
    params=MemoryParams,
    handler=_memory,
    mutating=True,
    destructive=True,
    idempotent=False,
    undo=_undo_plan,
    paths_of=memory_paths,
)
