"""How workspacefs errors read in deepagents results: one table keyed by exception type, never by message text.

deepagents backends report failures as values (``error`` fields) rather than exceptions. Each workspacefs error
type has one row here naming what kind of failure it is; the messages and ``FileOperationError`` codes the
backend returns are derived from that kind, in the words deepagents' own ``FilesystemBackend`` uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from deepagents.backends.protocol import FileOperationError

from workspacefs.errors import (
    DirectoryNotEmptyError,
    HistoryEntryNotFoundError,
    InvalidPathError,
    LimitExceededError,
    PathEscapeError,
    SandboxError,
    SnapshotError,
    UnsupportedOperationError,
    error_code,
    lookup,
)

__all__ = ["Kind", "file_error", "kind_of", "missing"]

Kind = Literal["missing", "no_parent", "directory", "exists", "invalid", "denied", "failed"]
"""What went wrong, as far as a deepagents result can say it."""

KINDS: Mapping[type[BaseException], Kind] = {
    FileNotFoundError: "missing",
    NotADirectoryError: "no_parent",  # a file stands where a directory is needed: the path does not exist
    IsADirectoryError: "directory",
    DirectoryNotEmptyError: "directory",
    FileExistsError: "exists",
    PathEscapeError: "invalid",  # deepagents calls traversal out of the root an invalid path
    InvalidPathError: "invalid",
    PermissionError: "denied",  # symlinks refused, policy, read-only: all permission errors
    LimitExceededError: "failed",  # content past a cap: the path was fine
    ValueError: "invalid",  # bad patterns, text that is not UTF-8
    OSError: "failed",  # quotas, storage unavailable, a concurrent change
    SandboxError: "failed",
    SnapshotError: "failed",
    UnsupportedOperationError: "failed",  # the backend lacks the operation (see its capabilities)
    HistoryEntryNotFoundError: "missing",
}
"""Every workspacefs error type reaches one row through its MRO (``errors.lookup``); anything else is a bug
and is raised, not reported."""

_CODES: Mapping[Kind, FileOperationError | None] = {
    "missing": "file_not_found",
    "no_parent": "invalid_path",
    "directory": "is_directory",
    "exists": "invalid_path",
    "invalid": "invalid_path",
    "denied": "permission_denied",
    "failed": None,
}
"""The ``FileOperationError`` literal of each kind (as ``FilesystemBackend`` maps the built-ins); ``None``: no
literal fits, so the workspacefs error code (``errors.ERROR_CODES``) is reported instead."""


def kind_of(exc: BaseException) -> Kind:
    """The kind of a caller's error; re-raises an exception no row covers (a bug must not read as a result)."""
    kind = lookup(KINDS, exc)
    if kind is None:
        raise exc
    return kind


def missing(exc: BaseException) -> bool:
    """True when the error means nothing is there (deepagents words these "not found")."""
    return kind_of(exc) in ("missing", "no_parent")


def file_error(exc: BaseException) -> str:
    """The ``error`` of an upload or download response: a ``FileOperationError`` literal, else the stable code."""
    code = _CODES[kind_of(exc)]
    return code if code is not None else error_code(exc) or "os_error"
