"""Messages a model reads: paths in its own terms, sizes, and errors that say what to do instead."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from workspacefs.errors import (
    AmbiguousSnapshotError,
    ConcurrentChangeError,
    ContentTooLargeError,
    DirectoryNotEmptyError,
    FileChangedSinceReadError,
    FileTooLargeError,
    HardLinkRefusedError,
    HistoryEntryNotFoundError,
    InvalidPathError,
    InvalidPatternError,
    InvalidTextError,
    LimitExceededError,
    MountPointError,
    MoveIntoSelfError,
    NameTooLongError,
    NotReadBeforeWriteError,
    PathEscapeError,
    PathTooDeepError,
    PathTooLongError,
    PatternTooLargeError,
    PatternTooSlowError,
    PolicyDeniedError,
    PreconditionFailedError,
    QuotaExceededError,
    ReadOnlyError,
    ReadOnlyFileError,
    RootProtectedError,
    SandboxError,
    SnapshotCreationError,
    SnapshotError,
    SnapshotIncompatibleError,
    SnapshotNotFoundError,
    SnapshotRestoreError,
    SpecialFileError,
    SymlinkRefusedError,
    UndoConflictError,
    UndoContentNotKeptError,
    UnsafeNameError,
    UnsupportedOperationError,
    error_code,
    lookup,
)
from workspacefs.paths import MAX_CONVENIENCE_BYTES, MAX_PATH_CHARS, MAX_PATH_DEPTH, MAX_SEGMENT_LENGTH, normalize_path
from workspacefs.protocol import Filesystem
from workspacefs.tools._core import ToolResult

__all__ = [
    "TOOL_MESSAGES",
    "Where",
    "display",
    "explain",
    "failure",
    "failure_from",
    "human_size",
    "looks_numbered",
    "plural",
    "shown",
]


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


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: object, where: str = "") -> str | None:
    """Where a lone surrogate is in a model's arguments (``content: holds U+D800``), or ``None``: JSON lets
    ``"\\ud800"`` through, but no UTF-8 encoder takes it, so it would fail deep inside a backend instead."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return None if found is None else f"{where or 'arguments'}: holds U+{ord(found.group()):04X}"
    items = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        described = lone_surrogate(item, f"{where}.{key}" if where else str(key))
        if described is not None:
            return described
    return None


MAX_FAILURE_CHARS = 8_000
"""A refusal's message is cut to about this many characters: some quote what the model sent (a snapshot id, a
patch's lines), and a model that sent 100,000 characters should not read them back."""


def cut_long(message: str) -> str:
    """``message`` with its middle cut when it passes :data:`MAX_FAILURE_CHARS` (its head and its advice kept)."""
    if len(message) <= MAX_FAILURE_CHARS:
        return message
    head, tail = MAX_FAILURE_CHARS * 3 // 4, MAX_FAILURE_CHARS // 8
    return f"{message[:head]}\n[… {len(message) - head - tail:,} characters of this message cut …]\n{message[-tail:]}"


def failure(message: str, error_code: str | None = None) -> ToolResult[Any]:
    """A failed result: the model reads ``message`` and tries something else; ``error_code`` names the
    kind of failure for code (the shared codes of ``errors.ERROR_CODES``)."""
    return ToolResult(message=message, value=None, success=False, error_code=error_code)


@dataclass(frozen=True, slots=True)
class Where:
    """What a message says besides the exception: the path as the model gave it, as it is shown, the verb."""

    fs: Filesystem
    path: str
    shown: str
    verb: str

    @property
    def root(self) -> str:
        return self.fs.mount_point or "the workspace root"


def _reason(exc: BaseException) -> str:
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return text[0].upper() + text[1:] if text else type(exc).__name__


_ABSOLUTE_PATH = re.compile(r"(?<![\w/.])/[^\s'\":,;()]+")


def _without_host_paths(text: str, where: Where) -> str:
    """A runtime's message without the host's paths (a model never learns the host's layout); paths under
    the workspace's mount point stay."""
    mount = where.fs.mount_point

    def hide(match: re.Match[str]) -> str:
        path = match.group(0)
        return path if mount and (path == mount or path.startswith(mount + "/")) else "<host path>"

    return _ABSOLUTE_PATH.sub(hide, text)


Explain = Callable[[Any, Where], str]

_OPERATION_VERBS: Mapping[str, str] = {"read": "Reading", "write": "Writing", "delete": "Deleting", "exec": "Running"}


def _policy_refusal(exc: PolicyDeniedError, where: Where) -> str:
    """What a model reads when the policy said no: which rule, and that the user (not the model) decides."""
    target = display(where.fs, exc.filename) if isinstance(exc.filename, str) else where.shown
    doing = f"{_OPERATION_VERBS.get(exc.operation, exc.operation.capitalize())} '{target}'"
    reason = exc.strerror or "protected by the workspace policy"
    why = f"{reason}; pattern {exc.pattern}" if exc.pattern else reason
    if exc.action == "ask":
        outcome = "the user declined" if exc.asked else "no one was there to approve it"
        return (
            f"{doing} needs the user's approval ({why}), and {outcome}. Do not try another way to reach it; "
            "carry on without it, or ask the user to change it themselves."
        )
    return (
        f"{doing} is not allowed by this workspace's policy ({why}). Do not try another way to reach it; ask "
        "the user if it must change."
    )


def _quota_refusal(exc: QuotaExceededError, where: Where) -> str:
    return (
        f"'{where.shown}' was not {where.verb}: {_reason(exc)}. Nothing was changed. Delete files you no "
        "longer need (rm), or write less."
    )


TOOL_MESSAGES: Mapping[type[BaseException], Explain] = {
    PathEscapeError: lambda _, w: (
        f"'{w.path}' is outside the workspace. Paths are relative to {w.root}; "
        "'..' cannot climb above it and symbolic links are not followed."
    ),
    SymlinkRefusedError: lambda _, w: (
        f"'{w.shown}' is (or goes through) a symbolic link, which this workspace never follows."
    ),
    SpecialFileError: lambda _, w: (
        f"'{w.shown}' is a FIFO, socket or device; only regular files and directories can be used."
    ),
    HardLinkRefusedError: lambda _, w: (
        f"'{w.shown}' has several hard links (another name for it may live "
        "elsewhere on this machine), so it cannot be appended to; write the whole file instead."
    ),
    RootProtectedError: lambda _, w: f"The workspace root itself cannot be {w.verb}; name a path inside it.",
    MountPointError: lambda e, w: f"'{w.shown}' cannot be {w.verb}: {_reason(e)}. Work with the files inside it.",
    ReadOnlyError: lambda _, _w: "This workspace is read-only: nothing can be written, moved or deleted.",
    ReadOnlyFileError: lambda _, w: (
        f"'{w.shown}' is marked read-only and cannot be changed; to replace it, delete it with rm first."
    ),
    NotReadBeforeWriteError: lambda _, w: (
        f"You have not read '{w.shown}' yet, and it already exists. Read it with read_file(path=\"{w.shown}\") "
        "before overwriting or editing it, so its current content is not lost."
    ),
    FileChangedSinceReadError: lambda _, w: (
        f"'{w.shown}' has changed since you last read it (someone else edited it). "
        f'Read it again with read_file(path="{w.shown}") before changing it, so no edit is lost.'
    ),
    PolicyDeniedError: _policy_refusal,
    PermissionError: lambda e, w: f"'{w.shown}' cannot be {w.verb}: {_reason(e)}.",
    DirectoryNotEmptyError: lambda _, w: (
        f"'{w.shown}' is a directory that is not empty; pass recursive=true to remove it and all it holds."
    ),
    IsADirectoryError: lambda _, w: (
        f"'{w.shown}' is a directory, so it cannot be {w.verb}; use ls to see what it holds."
    ),
    NotADirectoryError: lambda _, w: (
        f"'{w.shown}' cannot be {w.verb}: it, or a directory above it, is a file where a directory is needed. "
        "Use ls to check the path."
    ),
    FileNotFoundError: lambda _, w: f"'{w.shown}' does not exist. Use ls or glob to find the right path.",
    FileExistsError: lambda _, w: f"'{w.shown}' already exists.",
    PreconditionFailedError: lambda _, w: f"'{w.shown}' changed since it was read; read it again, then retry.",
    ConcurrentChangeError: lambda _, w: f"'{w.shown}' was changed by another writer at the same moment; try again.",
    UndoConflictError: lambda e, w: (
        f"'{w.shown}' was changed again after that entry"
        + (f" (by entries {', '.join(map(str, e.later))})" if e.later else " (from outside workspacefs)")
        + ", so it was not undone and nothing changed. Undo the later entries first, or ask the user to force it."
    ),
    UndoContentNotKeptError: lambda _, w: (
        f"'{w.shown}' cannot be put back: what it held before that command was not kept (the workspace was too "
        "large to copy first), so nothing was undone and forcing would not help. Restore a snapshot instead."
    ),
    QuotaExceededError: _quota_refusal,
    FileTooLargeError: _quota_refusal,
    OSError: lambda e, w: f"'{w.shown}' could not be {w.verb}: {_reason(e)}.",
    ConnectionError: lambda e, w: (
        f"'{w.shown}' could not be {w.verb} because storage cannot be reached right now ({_reason(e)}); "
        "try again later."
    ),
    UnicodeDecodeError: lambda _, w: (
        f"'{w.shown}' is not UTF-8 text (it looks binary), so it cannot be shown as lines."
    ),
    InvalidPathError: lambda e, w: (
        f"The path {w.path!r} is not valid: {_reason(e)}. Remove control characters such as newlines or NUL."
    ),
    UnsafeNameError: lambda e, w: (
        f"The path {w.path!r} is refused: {_reason(e)}. Use plain names (composed Unicode, no direction controls)."
    ),
    PathTooLongError: lambda _, _w: f"The path is longer than {MAX_PATH_CHARS} characters; use a shorter one.",
    PathTooDeepError: lambda _, w: (
        f"The path '{w.path}' is too deep: at most {MAX_PATH_DEPTH} names in all (directories plus the file name)."
    ),
    NameTooLongError: lambda _, w: (
        f"A name in '{w.path}' is longer than {MAX_SEGMENT_LENGTH} characters; use a shorter name."
    ),
    LimitExceededError: lambda e, _w: f"{_reason(e)}.",
    ContentTooLargeError: lambda _, w: (
        f"'{w.shown}' is too large to be {w.verb} in one call (the limit is "
        f"{MAX_CONVENIENCE_BYTES // (1024 * 1024)} MiB); work on it in parts."
    ),
    InvalidPatternError: lambda e, _w: (
        f"{_reason(e)}. If it is a regular expression, escape special characters such as ( ) [ ] . * + ? with "
        "a backslash."
    ),
    PatternTooSlowError: lambda e, _w: f"{_reason(e)}.",
    PatternTooLargeError: lambda e, _w: (
        f"{_reason(e)}. Use a smaller pattern: fewer or smaller repetition counts such as {{1000}}, "
        "or search for a literal piece of the text."
    ),
    InvalidTextError: lambda e, _w: f"{_reason(e)}; send valid text.",
    MoveIntoSelfError: lambda _, w: (
        f"'{w.shown}' cannot be moved or copied into itself (or over a directory that holds it); choose a "
        "destination outside it."
    ),
    ValueError: lambda e, w: _reason(e) if str(e) else f"Invalid request for '{w.shown}'.",
    UnsupportedOperationError: lambda e, _w: f"This workspace cannot do that: {_reason(e)}.",
    SandboxError: lambda e, w: f"The sandbox cannot run commands now: {_without_host_paths(_reason(e), w)}",
    SnapshotError: lambda e, w: f"The snapshot operation failed: {_without_host_paths(_reason(e), w)}",
    SnapshotCreationError: lambda e, w: f"The snapshot could not be taken: {_without_host_paths(_reason(e), w)}",
    SnapshotRestoreError: lambda e, w: f"The snapshot could not be restored: {_without_host_paths(_reason(e), w)}",
    SnapshotNotFoundError: lambda e, _w: (
        f"{_reason(e)}. Name a snapshot by the id or tag that snapshot returned, or call snapshot to take a new one."
    ),
    SnapshotIncompatibleError: lambda e, _w: f"{_reason(e)}.",
    AmbiguousSnapshotError: lambda e, _w: f"{_reason(e)}.",
    HistoryEntryNotFoundError: lambda e, _w: f"{_reason(e)}. Call history to see the entries that are kept.",
}
"""The message a model reads for each error type (looked up by the exception's MRO: most specific first)."""


def explain(exc: BaseException, fs: Filesystem, path: str, *, verb: str) -> str:
    """The actionable message for an exception raised while ``verb``-ing ``path``."""
    message = lookup(TOOL_MESSAGES, exc)
    where = Where(fs, path, display(fs, path), verb)
    if message is None:
        return f"'{where.shown}' could not be {verb}: {type(exc).__name__}: {exc}"
    return message(exc, where)


def failure_from(exc: BaseException, fs: Filesystem, path: str, *, verb: str) -> ToolResult[Any]:
    """The failed result for an exception: its message from :data:`TOOL_MESSAGES`, its code from the
    shared table."""
    return failure(explain(exc, fs, path, verb=verb), error_code(exc))


_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t", re.MULTILINE)


def looks_numbered(text: str) -> bool:
    """True if text seems to carry read_file's ``   12<TAB>`` line-number prefixes."""
    lines = [line for line in text.split("\n") if line.strip()]
    return bool(lines) and all(_LINE_NUMBER_PREFIX.match(line) for line in lines)
