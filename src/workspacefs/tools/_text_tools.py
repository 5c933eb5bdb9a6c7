"""``read_file``, ``write_file`` and ``edit_file``: text a model reads, writes and edits safely."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workspacefs.protocol import Filesystem
from workspacefs.search import BINARY_SNIFF_BYTES
from workspacefs.streams import ContentHasher
from workspacefs.tools._core import MAX_SEEN_TEXT, Tool, ToolContext, ToolResult
from workspacefs.tools._editing import (
    RefusalError,
    check_edit_size,
    check_result_size,
    commit,
    current_id,
    load_text,
    read_file_call,
    require_fresh,
    short_diff,
)
from workspacefs.tools._messages import display, failure, failure_from, human_size, looks_numbered, plural

__all__ = ["EDIT_FILE", "READ_FILE", "WRITE_FILE"]

READ_LIMIT = 2000
"""Default and largest number of lines one read_file call returns."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut in read_file's output, with a marker."""
MAX_WRITE_CHARS = 48_000
"""write_file refuses more content than this in one call: larger content goes in parts (``append=true``)."""
_KEEP_BYTES = MAX_LINE_CHARS * 4 + 4  # enough bytes for MAX_LINE_CHARS characters of UTF-8
_BOM = "\ufeff"


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- read_file -----------------------------------------------------------------------------------


class ReadFileParams(_Params):
    path: str = Field(description="File to read, relative to the workspace root (or under its mount point).")
    offset: int = Field(0, ge=0, description="Line to start at, counting from 0.")
    limit: int = Field(READ_LIMIT, ge=1, description=f"Lines to return; at most {READ_LIMIT}.")


@dataclass(frozen=True, slots=True)
class ReadFileValue:
    """Lines ``[offset, offset + len(lines))`` of a file, without their line endings."""

    path: str
    lines: tuple[str, ...]
    offset: int
    total_lines: int
    truncated: bool


class _BinaryContentError(Exception):
    pass


@dataclass(slots=True)
class _Scan:
    lines: list[tuple[bytes, bool]]
    total_lines: int
    digest: str
    size: int
    text: str | None  # the whole text, when small enough to keep for a later stale-write diff


def _scan(fs: Filesystem, path: str, offset: int, limit: int) -> _Scan:
    """One streaming pass: the wanted lines (long ones cut), the line count and the content id."""
    digest = ContentHasher()
    whole: bytearray | None = bytearray()
    kept: list[tuple[bytes, bool]] = []
    current = bytearray()
    cut = False
    line = 0
    pending = False  # bytes of an unterminated line have been seen
    size = 0
    stop = offset + limit
    with fs.open_read(path) as reader:
        for index, chunk in enumerate(reader):
            if index == 0 and b"\x00" in chunk[:BINARY_SNIFF_BYTES]:
                raise _BinaryContentError
            digest.update(chunk)
            size += len(chunk)
            if whole is not None and size <= MAX_SEEN_TEXT:
                whole += chunk
            else:
                whole = None
            position = 0
            while position < len(chunk):
                newline = chunk.find(b"\n", position)
                end = len(chunk) if newline < 0 else newline + 1
                if offset <= line < stop:
                    take = min(end - position, max(_KEEP_BYTES - len(current), 0))
                    current += chunk[position : position + take]
                    cut = cut or end - position > take
                if newline < 0:
                    pending = True
                    break
                if offset <= line < stop:
                    kept.append((bytes(current), cut))
                    current, cut = bytearray(), False
                line += 1
                pending = False
                position = end
    if pending:
        if offset <= line < stop:
            kept.append((bytes(current), cut))
        line += 1
    text = None
    if whole is not None:
        text = bytes(whole).decode("utf-8", errors="replace").removeprefix(_BOM)
    return _Scan(kept, line, digest.content_id(), size, text)


def _render_line(raw: bytes, cut: bool) -> str:
    # a cut line may end inside a character: the incremental decoder holds that tail back
    text = codecs.getincrementaldecoder("utf-8")().decode(raw, final=False) if cut else raw.decode("utf-8")
    if text.endswith("\n"):
        text = text[:-1]
    if text.endswith("\r"):
        text = text[:-1]
    if len(text) > MAX_LINE_CHARS or cut:
        return text[:MAX_LINE_CHARS] + f" … [line cut at {MAX_LINE_CHARS} characters]"
    return text


def read_file(params: ReadFileParams, *, context: ToolContext) -> ToolResult[ReadFileValue]:
    """Numbered lines, ``cat -n`` style; says exactly how to read on when more follow."""
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    limit = min(params.limit, READ_LIMIT)
    where = display(fs, params.path)
    try:
        scan = _scan(fs, params.path, params.offset, limit)
        lines = [_render_line(raw, cut) for raw, cut in scan.lines]
    except (_BinaryContentError, UnicodeDecodeError):
        return failure(_binary_message(fs, params.path), "not_text")
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path, verb="read")
    context.read_state.record(fs, params.path, scan.digest, scan.text)
    if scan.total_lines == 0:
        return ToolResult(f"'{where}' is empty (0 lines).", ReadFileValue(where, (), 0, 0, False))
    if params.offset >= scan.total_lines:
        return failure(
            f"'{where}' has {plural(scan.total_lines, 'line')}, so offset={params.offset} is past its end. "
            f"Use an offset below {scan.total_lines}."
        )
    body = "\n".join(f"{params.offset + i + 1:6}\t{text}" for i, text in enumerate(lines))
    last = params.offset + len(lines)
    truncated = last < scan.total_lines
    if truncated:
        body += (
            f"\n\n[Showing lines {params.offset + 1}-{last} of {scan.total_lines}. To read on, call read_file "
            f'with path="{where}", offset={last}, limit={READ_LIMIT}.]'
        )
    elif params.limit > READ_LIMIT:
        body += f"\n\n[limit is capped at {READ_LIMIT} lines.]"
    value = ReadFileValue(where, tuple(lines), params.offset, scan.total_lines, truncated)
    return ToolResult(body, value)


def _binary_message(fs: Filesystem, path: str) -> str:
    where = display(fs, path)
    try:
        size = human_size(fs.stat(path).size_bytes)
    except OSError:
        size = "unknown size"
    return (
        f"'{where}' is a binary file ({size}), not UTF-8 text, so read_file cannot show it. "
        "Use stat for its size; grep skips binary files."
    )


def _no_filesystem() -> ToolResult[Any]:
    return failure("No filesystem is available in this context; the tool cannot run.")


# --- read-before-write ----------------------------------------------------------------------------


_EXPECTED_HASH = Field(
    None,
    max_length=200,
    description="Optional precondition: the content id the file must still have (stat shows it). The change is "
    "refused if the file changed since; it replaces the need to read the file first.",
)


# --- write_file -----------------------------------------------------------------------------------


class WriteFileParams(_Params):
    path: str = Field(description="File to write; missing parent directories are created.")
    content: str = Field(description=f"The whole new content (at most {MAX_WRITE_CHARS:,} characters).")
    append: bool = Field(False, description="Add to the end of the file instead of replacing it.")
    expected_hash: str | None = _EXPECTED_HASH


def write_file(params: WriteFileParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Create or overwrite a text file (or append to it); refuses to clobber a file never read."""
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    where = display(fs, params.path)
    if len(params.content) > MAX_WRITE_CHARS:
        return failure(
            f"The content has {len(params.content):,} characters; write_file takes at most {MAX_WRITE_CHARS:,} "
            f'in one call. Write the first part, then the rest with write_file(path="{where}", append=true).'
        )
    data = params.content.encode("utf-8")
    reread = read_file_call(where)
    try:
        current = current_id(fs, params.path)
        if params.append:
            if params.expected_hash is not None:
                require_fresh(context, fs, params.path, current, expected=params.expected_hash, reread=reread)
            result = fs.write(params.path, params.content, mode="append")
        else:
            require_fresh(context, fs, params.path, current, expected=params.expected_hash, reread=reread)
            result = commit(context, fs, params.path, data, expect=current, text=params.content, reread=reread)
    except RefusalError as refused:
        return refused.result()
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path, verb="written")
    if not params.append:
        verb = "Overwrote" if current is not None else "Created"
        lines = params.content.count("\n") + (1 if params.content and not params.content.endswith("\n") else 0)
        message = f"{verb} '{where}': {lines} line{'s' if lines != 1 else ''}, {human_size(len(data))}."
    else:
        if current is not None and context.read_state.seen(fs, params.path) == current:
            context.read_state.record(fs, params.path, current_id(fs, params.path) or "")
        message = f"Appended {human_size(len(data))} to '{where}'."
    return ToolResult(message, {"path": where, "bytes_written": result.bytes_written, "created": current is None})


# --- edit_file ------------------------------------------------------------------------------------


class Edit(_Params):
    old_string: str = Field(description="Exact text to replace (copied from read_file, without line numbers).")
    new_string: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of requiring exactly one.")


class EditFileParams(_Params):
    path: str = Field(description="File to edit.")
    old_string: str | None = Field(None, description="Exact text to replace; it must occur exactly once.")
    new_string: str | None = Field(None, description="Text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence of old_string.")
    edits: list[Edit] | None = Field(
        None, description="Several edits applied in order, all or nothing (instead of old_string/new_string)."
    )
    expected_hash: str | None = _EXPECTED_HASH

    @model_validator(mode="after")
    def _one_form(self) -> EditFileParams:
        single = self.old_string is not None or self.new_string is not None
        if single and self.edits:
            raise ValueError("give either old_string/new_string or edits, not both")
        if not single and not self.edits:
            raise ValueError("give old_string and new_string, or a list of edits")
        if single and (self.old_string is None or self.new_string is None):
            raise ValueError("old_string and new_string go together")
        return self

    def all_edits(self) -> list[Edit]:
        if self.edits:
            return list(self.edits)
        assert self.old_string is not None
        assert self.new_string is not None
        return [Edit(old_string=self.old_string, new_string=self.new_string, replace_all=self.replace_all)]


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _first_two(text: str, needle: str) -> tuple[int, int]:
    """Where ``needle`` first occurs and where it occurs again after that (non-overlapping, as ``str.replace``
    counts), ``-1`` for none: enough to tell none, one and several apart without counting them all."""
    first = text.find(needle)
    return first, -1 if first < 0 else text.find(needle, first + len(needle))


def loose_match_line(text: str, needle: str) -> int | None:
    """Line where ``needle`` matches if runs of whitespace are ignored (a hint for the model; not tried for a
    needle so long that the search would cost more than the hint is worth)."""
    tokens = needle.split()
    if not tokens or len(tokens) > 200 or len(needle) > 20_000 or len(text) > 4 * 1024 * 1024:
        return None
    loose = re.compile(r"\s+".join(re.escape(token) for token in tokens))
    match = loose.search(text)
    return _line_of(text, match.start()) if match else None


def _apply(text: str, edit: Edit, crlf: bool, number: int, total: int) -> str:
    label = f"Edit {number} of {total}: " if total > 1 else ""
    old, new = edit.old_string, edit.new_string
    if old == "":
        raise RefusalError(f"{label}old_string is empty. To create or replace a whole file, use write_file.")
    if old == new:
        raise RefusalError(f"{label}old_string and new_string are the same; there is nothing to change.")
    if crlf and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
    first, second = _first_two(text, old)
    if first < 0:
        hint = ""
        if looks_numbered(edit.old_string):
            hint = " It seems to include read_file's line-number prefixes; remove the 'N<tab>' part of each line."
        else:
            line = loose_match_line(text, old)
            if line is not None:
                hint = (
                    f" It does match near line {line} if whitespace is ignored: copy the exact spaces, tabs and "
                    "line breaks from read_file."
                )
        raise RefusalError(f"{label}old_string was not found.{hint} Read the file again and copy the text exactly.")
    if edit.replace_all:
        if len(new) > len(old):  # sized first: a short old_string can occur millions of times
            check_result_size(label, len(text) + text.count(old) * (len(new) - len(old)))
        return text.replace(old, new)  # one pass over the text, however many occurrences there are
    check_result_size(label, len(text) + len(new) - len(old))
    if second >= 0:
        raise RefusalError(
            f"{label}old_string occurs more than once (at line {_line_of(text, first)}, and again at line "
            f"{_line_of(text, second)}). Include more surrounding text to make it unique, or pass replace_all=true "
            "to change every occurrence."
        )
    return text[:first] + new + text[first + len(old) :]


def edit_file(params: EditFileParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Replace exact text; every edit must match, or nothing is written."""
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    where = display(fs, params.path)
    reread = read_file_call(where)
    edits = params.all_edits()
    try:
        label = "new_string" if len(edits) == 1 else f"The new_string of these {len(edits)} edits together"
        check_edit_size(label, sum(len(edit.new_string) for edit in edits), MAX_WRITE_CHARS, tool="edit_file")
        loaded = load_text(fs, params.path)
        require_fresh(context, fs, params.path, loaded.content_id, expected=params.expected_hash, reread=reread)
        updated = loaded.text
        try:
            for number, edit in enumerate(edits, start=1):
                updated = _apply(updated, edit, loaded.crlf, number, len(edits))
        except RefusalError as refused:
            raise RefusalError(f"No change made to '{where}'. {refused.message}", refused.code) from None
        commit(context, fs, params.path, loaded.encode(updated), expect=loaded.content_id, text=updated, reread=reread)
    except RefusalError as refused:
        return refused.result()
    except FileNotFoundError:
        return failure(f"'{where}' does not exist. To create it, use write_file.", "not_found")
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path, verb="edited")
    diff = short_diff(loaded.text, updated, where, limit=60)
    count = f"{len(edits)} edits" if len(edits) > 1 else "1 edit"
    return ToolResult(f"Edited '{where}' ({count}):\n{diff}", {"path": where, "edits": len(edits)})


READ_FILE = Tool(
    name="read_file",
    description=(
        "Read a text file as numbered lines (cat -n style). Returns up to 2,000 lines from `offset` "
        "(0-based); when more follow it says exactly how to read on. Lines over 2,000 characters are cut."
    ),
    params=ReadFileParams,
    handler=read_file,
)
WRITE_FILE = Tool(
    name="write_file",
    description=(
        "Create a text file, replace one, or append to it (`append`). At most 48,000 characters per call. "
        "An existing file must be read with read_file first."
    ),
    params=WriteFileParams,
    handler=write_file,
    mutating=True,
    destructive=True,
    idempotent=False,
    undo=lambda params, log: log.will_create(params.path),  # the write is atomic; the parents it makes are not
)
EDIT_FILE = Tool(
    name="edit_file",
    description=(
        "Replace exact text in a file: `old_string` must occur exactly once (or pass replace_all=true). "
        "Pass `edits` to apply several replacements all or nothing (at most 48,000 characters of new text per "
        "call). Read the file first; copy text exactly, "
        "without read_file's line numbers. Returns a diff of the change."
    ),
    params=EditFileParams,
    handler=edit_file,
    mutating=True,
    destructive=True,
    idempotent=False,
)
