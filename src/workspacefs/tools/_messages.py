"""Messages a model reads: paths in its own terms, sizes, and errors that say what to do instead."""

from __future__ import annotations

import errno
import re
from typing import Any

from workspacefs.paths import MAX_PATH_DEPTH, MAX_SEGMENT_LENGTH, normalize_path
from workspacefs.protocol import Filesystem
from workspacefs.tools._core import ToolResult

__all__ = ["explain", "failure", "human_size", "plural", "shown"]


def plural(count: int, noun: str) -> str:
    """``1 file``, ``3 files``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def shown(fs: Filesystem, path: str) -> str:
    """A normalised path as the model should see it: under the mount point when there is one."""
    if fs.mount_point:
        return fs.mount_point + ("/" + path if path else "")
    return path or "."


def display(fs: Filesystem, given: str) -> str:
    """The caller's path in display form, or as given when it does not even normalise."""
    try:
        return shown(fs, normalize_path(given, mount_point=fs.mount_point))
    except (ValueError, PermissionError, TypeError):
        return given


def human_size(size: int) -> str:
    """``512 B``, ``1.2 KB``, ``3.4 MB``."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def failure(message: str) -> ToolResult[Any]:
    """A failed result: the model reads ``message`` and tries something else."""
    return ToolResult(message=message, value=None, success=False)


def _escape_message(fs: Filesystem, path: str) -> str:
    root = fs.mount_point or "the workspace root"
    return (
        f"'{path}' is outside the workspace. Paths are relative to {root}; "
        "'..' cannot climb above it and symbolic links are not followed."
    )


def _permission_message(exc: PermissionError, fs: Filesystem, path: str, where: str) -> str:
    if exc.errno == errno.EROFS:
        return "This workspace is read-only: nothing can be written, moved or deleted."
    if exc.errno == errno.ELOOP:
        return f"'{where}' is (or goes through) a symbolic link, which this workspace never follows."
    reason = exc.strerror or str(exc)
    if "escapes" in reason or "outside" in reason:
        return _escape_message(fs, path)
    return f"Permission denied for '{where}': {reason}."


def _value_message(exc: ValueError, path: str, where: str) -> str:
    text = str(exc)
    if "control character" in text:
        return f"The path {path!r} contains a control character (such as a newline or NUL); remove it."
    if "segments" in text:
        return f"The path '{path}' is too deep: at most {MAX_PATH_DEPTH} directories and file name."
    if "segment is longer" in text:
        return f"A name in '{path}' is longer than {MAX_SEGMENT_LENGTH} characters; use a shorter name."
    return text[0].upper() + text[1:] if text else f"Invalid request for '{where}'."


def explain(exc: BaseException, fs: Filesystem, path: str, *, verb: str) -> str:
    """The actionable message for an exception raised while ``verb``-ing ``path``."""
    where = display(fs, path)
    if isinstance(exc, UnicodeDecodeError):
        return f"'{where}' is not UTF-8 text (it looks binary), so it cannot be shown as lines."
    if isinstance(exc, FileNotFoundError):
        return f"'{where}' does not exist. Use ls or glob to find the right path."
    if isinstance(exc, IsADirectoryError):
        if exc.errno == errno.ENOTEMPTY:
            return f"'{where}' is a directory that is not empty; pass recursive=true to {verb} it and all it holds."
        return f"'{where}' is a directory, so it cannot be {verb}; use ls to see what it holds."
    if isinstance(exc, NotADirectoryError):
        return f"Part of '{where}' is a file, not a directory, so nothing can be {verb} there."
    if isinstance(exc, FileExistsError):
        return f"'{where}' already exists."
    if isinstance(exc, PermissionError):
        return _permission_message(exc, fs, path, where)
    if isinstance(exc, ValueError):
        return _value_message(exc, path, where)
    if isinstance(exc, OSError):
        return f"Could not {verb} '{where}': {exc.strerror or exc}."
    return f"Could not {verb} '{where}': {type(exc).__name__}: {exc}"


_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t", re.MULTILINE)


def looks_numbered(text: str) -> bool:
    """True if text seems to carry read_file's ``   12<TAB>`` line-number prefixes."""
    lines = [line for line in text.split("\n") if line.strip()]
    return bool(lines) and all(_LINE_NUMBER_PREFIX.match(line) for line in lines)
