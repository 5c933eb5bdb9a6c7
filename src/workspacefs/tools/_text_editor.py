"""Anthropic's text editor tool, answered on any workspace: ``text_editor_20250728``
(``str_replace_based_edit_tool``) and ``text_editor_20250124`` (``str_replace_editor``, with ``undo_edit``).

Outputs and errors follow Anthropic's reference implementation (``computer_use_demo/tools/edit.py``) word
for word where a model may rely on them: ``cat -n`` numbering, the 4-line snippet after an edit, the
"did not appear verbatim" and "Multiple occurrences" refusals, the ``view_range`` and ``insert_line``
checks. Deliberate differences: tabs stay tabs (the reference rewrites every tab of an edited file as
spaces), ``create`` makes missing parent directories, the workspace's path rules, limits, policy and
read-before-write apply (a file is "read" by ``view``), and ``undo_edit`` after ``create`` removes the file.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workspacefs.paths import normalize_path
from workspacefs.protocol import Filesystem
from workspacefs.tools._core import Tool, ToolContext, ToolResult, content_digest
from workspacefs.tools._editing import (
    RefusalError,
    TextFile,
    check_edit_size,
    commit,
    current_id,
    echo,
    line_numbers,
    load_text,
    note_read,
    record_edit,
    require_fresh,
    stale_refusal,
)
from workspacefs.tools._messages import failure, failure_from, shown
from workspacefs.tools._text_tools import MAX_WRITE_CHARS, loose_match_line
from workspacefs.undo import UndoLog

__all__ = [
    "TEXT_EDITOR_20250124",
    "TEXT_EDITOR_20250728",
    "TextEditorParams",
    "clip",
    "number_lines",
    "with_view_limit",
]

SNIPPET_LINES = 4
MAX_RESPONSE_CHARS = 16_000
"""What a view shows when the tool definition sets no ``max_characters`` (the reference's cut)."""
TRUNCATED_NOTE = (
    "<response clipped><NOTE>To save on context only part of this file has been shown to you. You should retry "
    "this tool with a `view_range` of the lines you are looking for (the grep tool, where offered, finds their "
    "line numbers).</NOTE>"
)


class TextEditorParams(BaseModel):
    """The input of both text editor versions (each command uses some of these)."""

    model_config = ConfigDict(extra="ignore")

    command: str = Field(description="view, create, str_replace, insert (and undo_edit in 20250124).")
    path: str = Field(description="Absolute path of the file or directory.")
    file_text: str | None = None
    old_str: str | None = None
    new_str: str | None = None
    insert_line: int | None = None
    insert_text: str | None = None
    view_range: list[Any] | None = None
    max_characters: int | None = Field(None, ge=1, description="Cut a view shorter than the tool's own cut.")


def clip(text: str, limit: int | None) -> str:
    """``text`` cut at ``limit`` characters with the reference's note."""
    cap = MAX_RESPONSE_CHARS if limit is None else limit
    return text if len(text) <= cap else text[:cap] + TRUNCATED_NOTE


def number_lines(text: str, start: int = 1) -> str:
    """``cat -n`` lines: the number right-aligned in six columns, a tab, the line."""
    return "\n".join(f"{number:6}\t{line}" for number, line in enumerate(text.split("\n"), start=start))


def _output(text: str, descriptor: str, start: int = 1, limit: int | None = None) -> str:
    return f"Here's the result of running `cat -n` on {descriptor}:\n" + number_lines(clip(text, limit), start) + "\n"


def _absolute(fs: Filesystem, norm: str) -> str:
    return shown(fs, norm) if fs.mount_point else "/" + norm


class _Editor:
    """One call of the tool: the filesystem, the context and the version's name and commands."""

    def __init__(
        self, params: TextEditorParams, context: ToolContext, name: str, commands: tuple[str, ...], limit: int
    ) -> None:
        assert context.filesystem is not None
        self.fs = context.filesystem
        self.context = context
        self.params = params
        self.name = name
        self.commands = commands
        self.path = params.path
        asked = params.max_characters
        self.limit = limit if asked is None else min(asked, limit)
        """Where a view is cut: a model may ask for less than the tool's cut, never for more."""

    def reread(self) -> str:
        return f'the view command (command="view", path="{self.path}")'

    def run(self) -> str:
        params = self.params
        if params.command not in self.commands:
            raise RefusalError(
                f"Unrecognized command {params.command}. The allowed commands for the {self.name} tool are: "
                + ", ".join(self.commands)
            )
        if not self.path.startswith("/"):
            suggestion = _absolute(self.fs, self.path.lstrip("./"))
            raise RefusalError(
                f"The path {self.path} is not an absolute path, it should start with `/`. Maybe you meant {suggestion}?"
            )
        try:  # one stat answers existence and kind for every check below
            self.is_directory: bool | None = self.fs.stat(self.path).is_directory
        except FileNotFoundError:
            self.is_directory = None
        if self.is_directory is None and params.command != "create":
            raise RefusalError(f"The path {self.path} does not exist. Please provide a valid path.", "not_found")
        if params.command == "create" and self.is_directory is not None:
            raise RefusalError(
                f"File already exists at: {self.path}. Cannot overwrite files using command `create`.", "already_exists"
            )
        if params.command not in {"view", "create"} and self.is_directory:
            raise RefusalError(
                f"The path {self.path} is a directory and only the `view` command can be used on directories"
            )
        commands = {
            "view": self._view,
            "create": self._create,
            "str_replace": self._str_replace,
            "insert": self._insert,
            "undo_edit": self._undo_edit,
        }
        return commands[params.command]()

    # --- commands ------------------------------------------------------------------------------------

    def _view(self) -> str:
        if self.is_directory:
            if self.params.view_range:
                raise RefusalError("The `view_range` parameter is not allowed when `path` points to a directory.")
            return self._view_directory()
        loaded = load_text(self.fs, self.path, doing="viewed")
        note_read(self.context, self.fs, self.path, loaded.content_id, loaded.text)
        text, start = loaded.text, 1
        if self.params.view_range:
            text, start = self._range(loaded.text)
        return _output(text, self.path, start, self.limit)

    def _range(self, text: str) -> tuple[str, int]:
        view_range = self.params.view_range or []
        if len(view_range) != 2 or not all(isinstance(i, int) and not isinstance(i, bool) for i in view_range):
            raise RefusalError("Invalid `view_range`. It should be a list of two integers.")
        lines = text.split("\n")
        count = len(lines)
        first, last = view_range
        if first < 1 or first > count:
            raise RefusalError(
                f"Invalid `view_range`: {view_range}. Its first element `{first}` should be within the range of "
                f"lines of the file: {[1, count]}"
            )
        if last > count:
            raise RefusalError(
                f"Invalid `view_range`: {view_range}. Its second element `{last}` should be smaller than the number "
                f"of lines in the file: `{count}`"
            )
        if last != -1 and last < first:
            raise RefusalError(
                f"Invalid `view_range`: {view_range}. Its second element `{last}` should be larger or equal than "
                f"its first `{first}`"
            )
        chosen = lines[first - 1 :] if last == -1 else lines[first - 1 : last]
        return "\n".join(chosen), first

    def _view_directory(self) -> str:
        norm = normalize_path(self.path, mount_point=self.fs.mount_point)
        found: list[str] = []
        for entry in self.fs.list(norm):  # two levels, as `find -maxdepth 2`, hidden names left out
            if entry.name.startswith("."):
                continue
            found.append(_absolute(self.fs, entry.path))
            if entry.is_directory:
                found += [_absolute(self.fs, e.path) for e in self.fs.list(entry.path) if not e.name.startswith(".")]
        listing = "\n".join([self.path.rstrip("/") or "/", *sorted(found)])
        return (
            f"Here's the files and directories up to 2 levels deep in {self.path}, excluding hidden items:\n"
            f"{clip(listing, self.limit)}\n"
        )

    def _create(self) -> str:
        if self.params.file_text is None:
            raise RefusalError("Parameter `file_text` is required for command: create")
        if len(self.params.file_text) > MAX_WRITE_CHARS:
            raise RefusalError(
                f"file_text has {len(self.params.file_text):,} characters; at most {MAX_WRITE_CHARS:,} can be written "
                "in one call. Create the file with the first part, then add the rest with `insert`."
            )
        data = self.params.file_text.encode("utf-8")
        commit(self.context, self.fs, self.path, data, expect=None, text=self.params.file_text, reread=self.reread())
        self.context.edit_history.push(self.fs, self.path, None, content_digest(data))
        return f"File created successfully at: {self.path}"

    def _load_for_edit(self) -> TextFile:
        loaded = load_text(self.fs, self.path)
        require_fresh(self.context, self.fs, self.path, loaded.content_id, reread=self.reread())
        return loaded

    def _str_replace(self) -> str:
        old, new = self.params.old_str, self.params.new_str or ""
        if old is None:
            raise RefusalError("Parameter `old_str` is required for command: str_replace")
        check_edit_size("new_str", new, MAX_WRITE_CHARS)  # as sent: a CRLF file's line ends are not the model's
        loaded = self._load_for_edit()
        text = loaded.text
        if loaded.crlf and "\n" in old and "\r\n" not in old:
            old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
        lines, occurrences = line_numbers(text, old) if old else ([], 0)
        quoted = echo(self.params.old_str or "")
        if occurrences == 0:
            hint = ""
            line = loose_match_line(text, old) if old else None
            if line is not None:
                hint = f" It matches near line {line} if whitespace is ignored: copy the exact whitespace."
            raise RefusalError(
                f"No replacement was performed, old_str `{quoted}` did not appear verbatim in {self.path}.{hint}"
            )
        if occurrences > 1:
            more = f" (and {occurrences - len(lines)} more)" if occurrences > len(lines) else ""
            raise RefusalError(
                f"No replacement was performed. Multiple occurrences of old_str `{quoted}` in "
                f"lines {lines}{more}. Please ensure it is unique"
            )
        at = text.find(old)
        updated = text[:at] + new + text[at + len(old) :]
        self._write(loaded, updated)
        replaced_line = text.count("\n", 0, at)
        start = max(0, replaced_line - SNIPPET_LINES)
        end = replaced_line + SNIPPET_LINES + new.count("\n")
        snippet = "\n".join(updated.split("\n")[start : end + 1])
        return (
            f"The file {self.path} has been edited. "
            + _output(snippet, f"a snippet of {self.path}", start + 1)
            + "Review the changes and make sure they are as expected. Edit the file again if necessary."
        )

    def _insert(self) -> str:
        line = self.params.insert_line
        text_in = self.params.insert_text if self.params.insert_text is not None else self.params.new_str
        if line is None:
            raise RefusalError("Parameter `insert_line` is required for command: insert")
        if text_in is None:
            field = "insert_text" if self.name == "str_replace_based_edit_tool" else "new_str"
            raise RefusalError(f"Parameter `{field}` is required for command: insert")
        check_edit_size("The text", text_in, MAX_WRITE_CHARS)
        loaded = self._load_for_edit()
        text = loaded.text
        body = text.replace("\r\n", "\n") if loaded.crlf else text
        lines = body.split("\n")
        if line < 0 or line > len(lines):
            raise RefusalError(
                f"Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: "
                f"{[0, len(lines)]}"
            )
        at = line
        if at == len(lines) and lines[-1] == "":  # after the last line: before the empty tail its newline leaves
            at -= 1
        inserted = text_in.replace("\r\n", "\n")
        if inserted.endswith("\n") and at < len(lines):
            inserted = inserted[:-1]  # the line break that ends it is the one already there
        new_lines = inserted.split("\n")
        updated = "\n".join(lines[:at] + new_lines + lines[at:])
        self._write(loaded, updated.replace("\n", "\r\n") if loaded.crlf else updated)
        snippet = lines[max(0, at - SNIPPET_LINES) : at] + new_lines + lines[at : at + SNIPPET_LINES]
        return (
            f"The file {self.path} has been edited. "
            + _output("\n".join(snippet), "a snippet of the edited file", max(1, line - SNIPPET_LINES + 1))
            + "Review the changes and make sure they are as expected (correct indentation, no duplicate lines, "
            "etc). Edit the file again if necessary."
        )

    def _undo_edit(self) -> str:
        edit = self.context.edit_history.last(self.fs, self.path)
        if edit is None:
            raise RefusalError(f"No edit history found for {self.path}.")
        now = current_id(self.fs, self.path)
        if now != edit.after:  # someone changed it since this edit: undoing would destroy their work
            raise stale_refusal(self.context, self.fs, self.path, now, self.reread())
        if edit.before is None:
            self.fs.delete(self.path)
            self.context.read_state.forget(self.fs, self.path, below=False)
            self.context.edit_history.drop_last(self.fs, self.path)
            return f"Last edit to {self.path} undone successfully. The file did not exist before it, so it is removed."
        text = edit.before.decode("utf-8")
        commit(self.context, self.fs, self.path, edit.before, expect=now, text=text, reread=self.reread())
        self.context.edit_history.drop_last(self.fs, self.path)
        return f"Last edit to {self.path} undone successfully. " + _output(text, self.path)

    def _write(self, loaded: TextFile, updated: str) -> None:
        data = loaded.encode(updated)
        commit(self.context, self.fs, self.path, data, expect=loaded.content_id, text=updated, reread=self.reread())
        self.context.edit_history.push(self.fs, self.path, loaded.encode(loaded.text), content_digest(data))


def _handler(name: str, commands: tuple[str, ...], limit: int = MAX_RESPONSE_CHARS) -> Any:
    """The tool's handler; views are cut at ``limit`` characters (the tool definition's ``max_characters``)."""

    def handle(params: TextEditorParams, *, context: ToolContext) -> ToolResult[Any]:
        fs = context.filesystem
        if fs is None:
            return failure("No filesystem is available in this context; the tool cannot run.")
        try:
            return ToolResult(_Editor(params, context, name, commands, limit).run())
        except RefusalError as refused:
            return refused.result()
        except (OSError, ValueError) as exc:
            return failure_from(exc, fs, params.path, verb="edited")  # the message and the type's code

    return handle


def _undo_plan(params: TextEditorParams, log: UndoLog) -> None:
    if params.command in ("create", "str_replace", "insert", "undo_edit"):
        record_edit(log, params.path, create=params.command == "create")


_DESCRIPTION = (
    "Anthropic's text editor; paths are absolute. command=view: path (a directory lists two levels), optional "
    "view_range [first, last] (-1: to the end). create: path, file_text (a new file only). str_replace: path, "
    "old_str (exact, occurring once), new_str. insert: path, insert_line (0: the top), {insert}.{undo}"
)
_V0728 = ("view", "create", "str_replace", "insert")
_V0124 = (*_V0728, "undo_edit")


def _editor_tool(name: str, commands: tuple[str, ...]) -> Tool[TextEditorParams]:
    return Tool(
        name=name,
        description=_DESCRIPTION.format(
            insert="insert_text" if "undo_edit" not in commands else "new_str",
            undo=" undo_edit: path (reverts the last edit)." if "undo_edit" in commands else "",
        ),
        params=TextEditorParams,
        handler=_handler(name, commands),
        mutating=True,
        destructive=True,
        idempotent=False,
        undo=_undo_plan,
    )


def with_view_limit(tool: Tool[TextEditorParams], limit: int) -> Tool[TextEditorParams]:
    """``tool`` with views cut at ``limit`` characters, whatever ``max_characters`` a model sends (it may only ask
    for less): what a tool definition's ``max_characters`` sets."""
    commands = _V0124 if tool.name == "str_replace_editor" else _V0728
    return dataclasses.replace(tool, handler=_handler(tool.name, commands, limit))


TEXT_EDITOR_20250728 = _editor_tool("str_replace_based_edit_tool", _V0728)
TEXT_EDITOR_20250124 = _editor_tool("str_replace_editor", _V0124)
