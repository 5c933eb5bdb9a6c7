"""Errors: the snapshot error family and the helpers that build the built-in exceptions.

Every backend raises the built-in exceptions of seed 000's table (``FileNotFoundError``,
``IsADirectoryError`` …). The helpers here build them in one shape, ``[Errno N] reason: 'path'``,
so a model sees the same message whichever backend it talks to.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Literal

__all__ = [
    "FailureKind",
    "PreconditionFailedError",
    "SnapshotCreationError",
    "SnapshotError",
    "SnapshotIncompatibleError",
    "SnapshotNotFoundError",
    "SnapshotRestoreError",
    "caller_paths",
    "classify",
    "directory_not_empty",
    "file_exists",
    "file_not_found",
    "is_a_directory",
    "name_caller_path",
    "not_a_directory",
    "permission_denied",
    "read_only_filesystem",
]


class SnapshotError(RuntimeError):
    """Base class for snapshot failures (seed 002)."""


class SnapshotCreationError(SnapshotError):
    """A snapshot could not be taken."""


class SnapshotRestoreError(SnapshotError):
    """A snapshot could not be restored."""


class SnapshotNotFoundError(SnapshotError):
    """The requested snapshot does not exist (or was pruned)."""


class SnapshotIncompatibleError(SnapshotError, ValueError):
    """The snapshot was taken by another kind of filesystem and cannot be restored here."""


class PreconditionFailedError(OSError):
    """A compare-and-set write found another version of the file than the one it was told to expect."""

    def __init__(self, path: str, reason: str = "The file changed since you read it; read it again") -> None:
        super().__init__(errno.ESTALE, reason, path)


def file_not_found(path: str) -> FileNotFoundError:
    """``FileNotFoundError`` naming ``path``."""
    return FileNotFoundError(errno.ENOENT, "No such file or directory", path)


def is_a_directory(path: str, reason: str = "Is a directory") -> IsADirectoryError:
    """``IsADirectoryError`` naming ``path``."""
    return IsADirectoryError(errno.EISDIR, reason, path)


def directory_not_empty(path: str) -> IsADirectoryError:
    """A non-empty directory deleted without ``recursive=True`` (DESIGN §3: an ``IsADirectoryError``)."""
    return IsADirectoryError(errno.ENOTEMPTY, "Directory not empty (pass recursive=True to delete it)", path)


def not_a_directory(path: str) -> NotADirectoryError:
    """``NotADirectoryError`` naming ``path`` (a file where a directory is needed)."""
    return NotADirectoryError(errno.ENOTDIR, "Not a directory", path)


def file_exists(path: str) -> FileExistsError:
    """``FileExistsError`` naming ``path``."""
    return FileExistsError(errno.EEXIST, "File exists", path)


def permission_denied(path: str, reason: str = "Permission denied") -> PermissionError:
    """``PermissionError`` naming ``path``."""
    return PermissionError(errno.EACCES, reason, path)


def read_only_filesystem(path: str) -> PermissionError:
    """``PermissionError`` for a mutation on a read-only filesystem."""
    return PermissionError(errno.EROFS, "Read-only filesystem", path)


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


FailureKind = Literal[
    "precondition_failed",
    "snapshot_not_found",
    "snapshot_failed",
    "not_found",
    "already_exists",
    "is_a_directory",
    "not_a_directory",
    "not_allowed",
    "directory_not_empty",
    "conflict",
    "invalid",
]
"""What went wrong, in the terms every front end (REST statuses, exit codes) maps from."""

_BY_TYPE: tuple[tuple[type[BaseException], FailureKind], ...] = (
    (PreconditionFailedError, "precondition_failed"),
    (SnapshotNotFoundError, "snapshot_not_found"),
    (SnapshotIncompatibleError, "invalid"),
    (SnapshotError, "snapshot_failed"),
    (FileNotFoundError, "not_found"),
    (FileExistsError, "already_exists"),
    (IsADirectoryError, "is_a_directory"),
    (NotADirectoryError, "not_a_directory"),
    (PermissionError, "not_allowed"),
)
_BY_ERRNO: dict[int, FailureKind] = {errno.ENOTEMPTY: "directory_not_empty", errno.EAGAIN: "conflict"}


def classify(exc: BaseException) -> FailureKind | None:
    """The kind of a caller's failure (a missing file, a bad path …), or ``None`` for anything else (a bug).

    ``ValueError`` and ``TypeError`` are the caller's: the filesystem raises them for invalid paths,
    patterns and arguments.
    """
    for kind, name in _BY_TYPE:
        if isinstance(exc, kind):
            return name
    if isinstance(exc, OSError) and exc.errno in _BY_ERRNO:
        return _BY_ERRNO[exc.errno]
    if isinstance(exc, (ValueError, TypeError)):
        return "invalid"
    return None
