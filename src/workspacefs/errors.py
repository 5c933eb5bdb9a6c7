"""Errors: one typed hierarchy, each a subclass of the built-in exception callers already catch.

A backend raises the most specific type (``PathEscapeError`` is a ``PermissionError``,
``DirectoryNotEmptyError`` an ``IsADirectoryError`` …), so ``except PermissionError`` keeps working and
every surface can still tell the cases apart. Surfaces (tool messages, HTTP statuses, CLI exit codes,
MCP results) each map exceptions by *type* in one table, read through :func:`lookup`; nothing looks at
message text. :data:`ERROR_CODES` names every type with a stable code the surfaces share.

Messages name the path as the caller gave it, in one shape, ``[Errno N] reason: 'path'``, so a model
sees the same text whichever backend it talks to.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

__all__ = [
    "ERROR_CODES",
    "ERROR_TYPES",
    "AmbiguousSnapshotError",
    "ConcurrentChangeError",
    "ContentTooLargeError",
    "DirectoryNotEmptyError",
    "FileChangedSinceReadError",
    "FileTooLargeError",
    "HardLinkRefusedError",
    "HistoryEntryNotFoundError",
    "InvalidPathError",
    "InvalidPatternError",
    "InvalidTextError",
    "LimitExceededError",
    "MountPointError",
    "MoveIntoSelfError",
    "NameTooLongError",
    "NotReadBeforeWriteError",
    "PathEscapeError",
    "PathTooDeepError",
    "PathTooLongError",
    "PatternTooLargeError",
    "PatternTooSlowError",
    "PolicyDeniedError",
    "PreconditionFailedError",
    "QuotaExceededError",
    "ReadOnlyError",
    "ReadOnlyFileError",
    "RootProtectedError",
    "SandboxError",
    "SnapshotCreationError",
    "SnapshotError",
    "SnapshotIncompatibleError",
    "SnapshotNotFoundError",
    "SnapshotRestoreError",
    "SpecialFileError",
    "SymlinkRefusedError",
    "UndoConflictError",
    "UndoContentNotKeptError",
    "UnsafeNameError",
    "UnsupportedOperationError",
    "WorkspaceError",
    "caller_paths",
    "error_code",
    "file_exists",
    "file_not_found",
    "is_a_directory",
    "lookup",
    "name_caller_path",
    "not_a_directory",
]

T = TypeVar("T")


class WorkspaceError:
    """Marks every error type workspacefs defines (each also derives from a built-in exception), so a boundary
    can tell a deliberate, typed refusal from a bug that happened to raise a built-in."""

    __slots__ = ()


class _PathOSError(WorkspaceError, OSError):
    """An ``OSError`` built from a path (and optionally a reason); errno and default reason are per type."""

    errno_code: ClassVar[int] = errno.EIO
    reason: ClassVar[str] = "Input/output error"

    def __init__(self, path: str | None, reason: str | None = None) -> None:
        super().__init__(self.errno_code, reason or self.reason, path)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.filename, self.strerror)


# --- not allowed (PermissionError) ------------------------------------------------------------------


class PathEscapeError(_PathOSError, PermissionError):
    """The path leads outside the workspace root (``..`` above it, or a host path that escapes)."""

    errno_code = errno.EACCES
    reason = "Path escapes the workspace root"


class SymlinkRefusedError(_PathOSError, PermissionError):
    """The path is, or goes through, a symbolic link: links are never followed."""

    errno_code = errno.ELOOP
    reason = "Symbolic links are not followed"


class SpecialFileError(_PathOSError, PermissionError):
    """A FIFO, socket or device: never read, written or replaced."""

    errno_code = errno.EACCES
    reason = "Not a regular file or directory (FIFOs, sockets and devices are refused)"


class HardLinkRefusedError(_PathOSError, PermissionError):
    """Appending to a file with several hard links is refused: another name for it may live outside the root."""

    errno_code = errno.EACCES
    reason = "Refusing to append to a file with several hard links (another name may live outside the root)"


class RootProtectedError(_PathOSError, PermissionError):
    """The workspace root itself cannot be deleted, moved or copied over."""

    errno_code = errno.EACCES
    reason = "The workspace root cannot be deleted, moved or replaced"


class MountPointError(RootProtectedError):
    """A mount point of a composite filesystem, or a directory leading to one, cannot be deleted, moved or
    replaced (unmount it instead)."""

    reason = "A mount point cannot be deleted, moved or replaced"


class ReadOnlyError(_PathOSError, PermissionError):
    """The whole filesystem is read-only: every mutation is refused."""

    errno_code = errno.EROFS
    reason = "Read-only filesystem"


class ReadOnlyFileError(ReadOnlyError):
    """One file is marked read-only: its content cannot change (it can still be deleted)."""

    errno_code = errno.EACCES
    reason = "File is read-only (it can be deleted, not changed)"


class NotReadBeforeWriteError(_PathOSError, PermissionError):
    """A tool refused to overwrite or edit a file the model has not read in this session."""

    errno_code = errno.EACCES
    reason = "Read the file before changing it"


class FileChangedSinceReadError(NotReadBeforeWriteError):
    """A tool refused to change a file that changed since the model last read it."""

    reason = "The file changed since it was read; read it again before changing it"


class PolicyDeniedError(_PathOSError, PermissionError):
    """The workspace policy refused an operation on a path: a ``deny`` rule, or an ``ask`` rule nobody approved.

    ``operation`` is ``read``, ``write``, ``delete`` or ``exec``; ``pattern`` and ``action`` name the rule
    that decided, so a message can say which rule to change. With ``action="ask"``, ``asked`` says whether
    an approver was asked and said no (``False``: there was no one to ask).
    """

    errno_code = errno.EACCES
    reason = "Refused by the workspace policy"

    def __init__(
        self,
        path: str | None,
        reason: str | None = None,
        *,
        operation: str = "write",
        pattern: str | None = None,
        action: str = "deny",
        asked: bool = False,
    ) -> None:
        super().__init__(path, reason)
        self.operation = operation
        self.pattern = pattern
        self.action = action
        self.asked = asked

    def __reduce__(self) -> tuple[Any, ...]:
        rule = {"operation": self.operation, "pattern": self.pattern, "action": self.action, "asked": self.asked}
        return _rebuild_policy_denied, (self.filename, self.strerror, rule)


def _rebuild_policy_denied(path: str | None, reason: str | None, rule: dict[str, Any]) -> PolicyDeniedError:
    return PolicyDeniedError(path, reason, **rule)


# --- the workspace is full (OSError) --------------------------------------------------------------------


class QuotaExceededError(_PathOSError):
    """The change would take the workspace past its quota (total bytes or number of entries); nothing of it
    was written."""

    errno_code = errno.EDQUOT
    reason = "Workspace quota exceeded"


class FileTooLargeError(QuotaExceededError):
    """The file would grow past the largest file the workspace's quota allows; nothing of it was written."""

    errno_code = errno.EFBIG
    reason = "File larger than the workspace quota allows"


# --- conflicts (OSError) -----------------------------------------------------------------------------


class DirectoryNotEmptyError(_PathOSError, IsADirectoryError):
    """A non-empty directory deleted without ``recursive=True`` (DESIGN §3: an ``IsADirectoryError``)."""

    errno_code = errno.ENOTEMPTY
    reason = "Directory not empty (pass recursive=True to delete it)"


class PreconditionFailedError(_PathOSError):
    """A compare-and-set write found another version of the file than the one it was told to expect."""

    errno_code = errno.ESTALE
    reason = "The file changed since you read it; read it again"


class ConcurrentChangeError(_PathOSError):
    """Another writer changed the same file at the same moment; the operation may simply be retried."""

    errno_code = errno.EAGAIN
    reason = "Changed concurrently; try again"


class UndoConflictError(_PathOSError):
    """An undo found a path changed again after the entry it undoes (by a later entry or from outside);
    nothing was changed. Undo the later entries first, or pass ``force=True`` to overwrite them."""

    errno_code = errno.EBUSY
    reason = "Changed again since that entry; undo the later changes first, or force it"

    def __init__(self, path: str | None, reason: str | None = None, *, later: tuple[int, ...] = ()) -> None:
        super().__init__(path, reason)
        self.later = later
        """The ids of the later journal entries that touched the path (empty: changed outside workspacefs)."""


class UndoContentNotKeptError(UndoConflictError):
    """An undo of an entry whose prior content the journal did not keep (a command run in a sandbox over a
    workspace too large to copy first); nothing was changed, and ``force`` cannot help: restore a snapshot."""

    errno_code = errno.ENODATA
    reason = "What this path held before the command was not kept, so it cannot be undone; restore a snapshot"


# --- invalid input (ValueError) -----------------------------------------------------------------------


class InvalidPathError(WorkspaceError, ValueError):
    """A path that does not validate: a control character, or not canonical where it must be."""


class UnsafeNameError(InvalidPathError):
    """A name that could deceive a reader or alias another: bidirectional-control characters, or a name not in
    Unicode NFC form (its NFC twin would look identical)."""


class LimitExceededError(WorkspaceError, ValueError):
    """A request beyond one of the documented limits (sizes, depths, lengths, time)."""


class PathTooLongError(InvalidPathError, LimitExceededError):
    """More characters than any path may have (4,096)."""


class PathTooDeepError(InvalidPathError, LimitExceededError):
    """More segments than a path may have (16)."""


class NameTooLongError(InvalidPathError, LimitExceededError):
    """A path segment longer than 80 characters."""


class ContentTooLargeError(LimitExceededError):
    """A convenience read or write past the 32 MiB cap (stream it instead)."""


class InvalidPatternError(WorkspaceError, ValueError):
    """A regular expression or glob that does not compile."""


class PatternTooSlowError(InvalidPatternError, LimitExceededError):
    """A regular expression refused because it would backtrack too long."""


class PatternTooLargeError(InvalidPatternError, LimitExceededError):
    """A regular expression refused because compiling it would take too much memory."""


class InvalidTextError(WorkspaceError, ValueError):
    """Text that is not Unicode: a lone surrogate (``"\\ud800"``, which JSON can carry and UTF-8 cannot encode) in
    written content, a snapshot tag or a search pattern."""


class MoveIntoSelfError(WorkspaceError, ValueError):
    """A directory moved or copied into itself, or over a directory that contains it."""


class UnsupportedOperationError(WorkspaceError, NotImplementedError):
    """The backend does not offer this operation (see its ``capabilities``)."""


class SandboxError(WorkspaceError, RuntimeError):
    """The container a workspace runs commands in is missing or unusable: no runtime installed, an image that
    does not exist, a container that died. The workspace's files are untouched."""


# --- snapshots (RuntimeError) -------------------------------------------------------------------------


class SnapshotError(WorkspaceError, RuntimeError):
    """Base class for snapshot failures: taking, finding, restoring or comparing a snapshot."""


class SnapshotCreationError(SnapshotError):
    """A snapshot could not be taken."""


class SnapshotRestoreError(SnapshotError):
    """A snapshot could not be restored."""


class SnapshotNotFoundError(SnapshotError):
    """The requested snapshot does not exist (or was pruned)."""


class SnapshotIncompatibleError(SnapshotError, ValueError):
    """The snapshot was taken by another kind of filesystem and cannot be restored here."""


class AmbiguousSnapshotError(SnapshotError, ValueError):
    """A short id prefix names more than one snapshot: give more of the id (or the tag)."""


class HistoryEntryNotFoundError(WorkspaceError, LookupError):
    """No journal entry has that id (it never existed, or retention dropped it)."""


# --- the shared names every surface maps ----------------------------------------------------------------

ERROR_CODES: Mapping[type[BaseException], str] = {
    PathEscapeError: "path_escape",
    SymlinkRefusedError: "symlink_refused",
    SpecialFileError: "special_file",
    HardLinkRefusedError: "hard_link_refused",
    RootProtectedError: "root_protected",
    MountPointError: "mount_point_protected",
    ReadOnlyError: "read_only_filesystem",
    ReadOnlyFileError: "read_only",
    NotReadBeforeWriteError: "not_read",
    FileChangedSinceReadError: "changed_since_read",
    PolicyDeniedError: "policy_denied",
    PermissionError: "permission_denied",
    DirectoryNotEmptyError: "directory_not_empty",
    IsADirectoryError: "is_a_directory",
    NotADirectoryError: "not_a_directory",
    FileNotFoundError: "not_found",
    FileExistsError: "already_exists",
    PreconditionFailedError: "precondition_failed",
    ConcurrentChangeError: "conflict",
    UndoConflictError: "undo_conflict",
    UndoContentNotKeptError: "undo_not_kept",
    QuotaExceededError: "quota_exceeded",
    FileTooLargeError: "file_too_large",
    OSError: "os_error",
    ConnectionError: "storage_unavailable",
    UnicodeDecodeError: "not_text",
    InvalidPathError: "invalid_path",
    UnsafeNameError: "unsafe_name",
    PathTooLongError: "path_too_long",
    PathTooDeepError: "path_too_deep",
    NameTooLongError: "name_too_long",
    LimitExceededError: "limit_exceeded",
    ContentTooLargeError: "too_large",
    InvalidPatternError: "invalid_pattern",
    PatternTooSlowError: "pattern_too_slow",
    PatternTooLargeError: "pattern_too_large",
    InvalidTextError: "invalid_text",
    MoveIntoSelfError: "move_into_itself",
    ValueError: "invalid_argument",
    UnsupportedOperationError: "unsupported",
    SandboxError: "sandbox_unavailable",
    SnapshotError: "snapshot_failed",
    SnapshotCreationError: "snapshot_creation_failed",
    SnapshotRestoreError: "snapshot_restore_failed",
    SnapshotNotFoundError: "snapshot_not_found",
    SnapshotIncompatibleError: "snapshot_incompatible",
    AmbiguousSnapshotError: "snapshot_ambiguous",
    HistoryEntryNotFoundError: "history_entry_not_found",
}
"""A stable, machine-readable code for every error type (REST bodies, ``--json`` errors, MCP results)."""

ERROR_TYPES: tuple[type[BaseException], ...] = tuple(ERROR_CODES)
"""Every error type a surface must map: each surface's table has one row for each (a test checks)."""


def lookup(table: Mapping[type[BaseException], T], exc: BaseException) -> T | None:
    """The row of ``table`` for the most specific type ``exc`` is an instance of (by its MRO), or ``None``.

    Every surface reads its table through this, so a subclass always finds its own row before its
    base's, and an exception no table knows (a bug) is ``None``.
    """
    for kind in type(exc).__mro__:
        row = table.get(kind)
        if row is not None:
            return row
    return None


def error_code(exc: BaseException) -> str | None:
    """The stable code of an exception's type (``None``: not a caller's error, a bug)."""
    return lookup(ERROR_CODES, exc)


# --- the built-ins of seed 000's table, in one shape ------------------------------------------------------


def file_not_found(path: str) -> FileNotFoundError:
    """``FileNotFoundError`` naming ``path``."""
    return FileNotFoundError(errno.ENOENT, "No such file or directory", path)


def is_a_directory(path: str, reason: str = "Is a directory") -> IsADirectoryError:
    """``IsADirectoryError`` naming ``path``."""
    return IsADirectoryError(errno.EISDIR, reason, path)


def not_a_directory(path: str) -> NotADirectoryError:
    """``NotADirectoryError`` naming ``path`` (a file where a directory is needed)."""
    return NotADirectoryError(errno.ENOTDIR, "Not a directory", path)


def file_exists(path: str) -> FileExistsError:
    """``FileExistsError`` naming ``path``."""
    return FileExistsError(errno.EEXIST, "File exists", path)


def name_caller_path(exc: OSError, normalized: str, given: str) -> None:
    """Put the caller's spelling of a path back into an error raised with its normalised form."""
    if exc.filename == normalized:
        exc.filename = given
    if exc.filename2 == normalized:
        exc.filename2 = given


@contextmanager
def caller_paths(names: Mapping[str, str]) -> Iterator[None]:
    """Rewrite ``OSError.filename`` from the normalised path back to the path the caller gave.

    Backends raise with normalised paths; the public methods wrap their work in this so the
    message names the path exactly as the caller wrote it (DESIGN §3).
    """
    try:
        yield
    except OSError as exc:
        if isinstance(exc.filename, str) and exc.filename in names:
            exc.filename = names[exc.filename]
        if isinstance(exc.filename2, str) and exc.filename2 in names:
            exc.filename2 = names[exc.filename2]
        raise
