"""workspacefs: one filesystem for the tools of LLM agents.

A tool handler calls ``fs.read(...)`` the same way whether the files live in memory, in a sandboxed
host directory, in a container, in SQLite/PostgreSQL or in an object store. Everything public is
re-exported here; every other module is private. The core (protocols, errors, the memory and host
backends, ``open_filesystem``) loads with the package; the rest — the tool layer, the agent integration,
the file manager, async and archive helpers, backends with optional dependencies — on first use.
"""

import importlib
from typing import TYPE_CHECKING, Any

from workspacefs._version import __version__
from workspacefs.backends.base import BaseFilesystem
from workspacefs.backends.host import HostFilesystem
from workspacefs.backends.hydration import HostMount, HydrationResult
from workspacefs.backends.memory import InMemoryFilesystem
from workspacefs.capabilities import Capabilities
from workspacefs.errors import (
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
)
from workspacefs.history import (
    Actor,
    Change,
    ChangeEvent,
    ChangeWatcher,
    HistoryFilesystem,
    JournalEntry,
    acting_as,
    current_actor,
)
from workspacefs.merge import ConflictHunk, MergeConflict, MergeResult
from workspacefs.open import open_filesystem, register_backend, registered_backends
from workspacefs.paths import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_GREP_MATCHES,
    DEFAULT_READ_LIMIT,
    MAX_CONVENIENCE_BYTES,
    MAX_PATH_DEPTH,
    MAX_SEGMENT_LENGTH,
    normalize_path,
)
from workspacefs.policy import ApprovalRequest, GuardedFilesystem, Policy, PolicyRule
from workspacefs.protocol import (
    ByteReader,
    ByteWriter,
    CommandRunner,
    ConditionalWrites,
    Filesystem,
    MergeableFilesystem,
    SnapshotableFilesystem,
    TextReader,
    VersionedContent,
)
from workspacefs.quota import Quota, Usage
from workspacefs.results import (
    ExecResult,
    FileEntry,
    FileStat,
    FilesystemDiff,
    FilesystemSnapshot,
    GlobMatch,
    GrepMatch,
    ReadBytesResult,
    ReadResult,
    WriteMode,
    WriteResult,
)
from workspacefs.snapshots import (
    DirectorySnapshotStore,
    InMemorySnapshotStore,
    SnapshotRetentionPolicy,
    SnapshotStore,
)

if TYPE_CHECKING:
    from workspacefs.agent import Prompt, Section, Session, WorkspaceSection
    from workspacefs.archive import ArchiveStats, UnsafeArchiveError, export_tar, import_tar
    from workspacefs.asyncfs import AsyncFilesystem
    from workspacefs.backends.container import ContainerFilesystem, ContainerSandbox
    from workspacefs.backends.objectstore import ObjectStoreFilesystem
    from workspacefs.backends.sql import SqlFilesystem, SqlStore
    from workspacefs.manager import FileManager, PathConstraints
    from workspacefs.server import create_app
    from workspacefs.tools import (
        ALL_TOOLS,
        EXTRA_TOOLS,
        FILESYSTEM_TOOLS,
        SNAPSHOT_TOOLS,
        ReadState,
        Tool,
        ToolContext,
        ToolResult,
        dispatch,
        to_anthropic_tools,
        to_openai_tools,
        tools_for,
    )


_TOOLS = "workspacefs.tools"
_LAZY: dict[str, tuple[str, str | None]] = {
    **{
        name: (_TOOLS, None)
        for name in (
            "ALL_TOOLS",
            "EXTRA_TOOLS",
            "FILESYSTEM_TOOLS",
            "SNAPSHOT_TOOLS",
            "ReadState",
            "Tool",
            "ToolContext",
            "ToolResult",
            "dispatch",
            "to_anthropic_tools",
            "to_openai_tools",
            "tools_for",
        )
    },
    **{name: ("workspacefs.agent", None) for name in ("Prompt", "Section", "Session", "WorkspaceSection")},
    **{
        name: ("workspacefs.archive", None)
        for name in ("ArchiveStats", "UnsafeArchiveError", "export_tar", "import_tar")
    },
    "AsyncFilesystem": ("workspacefs.asyncfs", None),
    "ContainerSandbox": ("workspacefs.backends.container", None),
    "ContainerFilesystem": ("workspacefs.backends.container", None),
    "CompositeFilesystem": ("workspacefs.backends.composite", None),
    "FileManager": ("workspacefs.manager", None),
    "PathConstraints": ("workspacefs.manager", None),
    "ObjectStoreFilesystem": ("workspacefs.backends.objectstore", None),
    "SqlFilesystem": ("workspacefs.backends.sql", "pip install 'workspacefs[sql]'"),
    "SqlStore": ("workspacefs.backends.sql", "pip install 'workspacefs[sql]'"),
    "create_app": ("workspacefs.server._app", "pip install 'workspacefs[server]'"),
}
"""Public names loaded on first use: (module, install hint for an optional extra)."""


def __getattr__(name: str) -> Any:
    """Load a lazily exported name (with an install hint when its optional dependency is missing)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'workspacefs' has no attribute {name!r}")
    module_name, hint = _LAZY[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if hint is None:
            raise
        raise ImportError(f"workspacefs.{name} needs an optional dependency ({exc}); {hint}") from exc
    value = getattr(module, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ALL_TOOLS",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_GREP_MATCHES",
    "DEFAULT_READ_LIMIT",
    "EXTRA_TOOLS",
    "FILESYSTEM_TOOLS",
    "MAX_CONVENIENCE_BYTES",
    "MAX_PATH_DEPTH",
    "MAX_SEGMENT_LENGTH",
    "SNAPSHOT_TOOLS",
    "Actor",
    "ApprovalRequest",
    "ArchiveStats",
    "AsyncFilesystem",
    "BaseFilesystem",
    "ByteReader",
    "ByteWriter",
    "Capabilities",
    "Change",
    "ChangeEvent",
    "ChangeWatcher",
    "CommandRunner",
    "CompositeFilesystem",
    "ConcurrentChangeError",
    "ConditionalWrites",
    "ConflictHunk",
    "ContainerFilesystem",
    "ContainerSandbox",
    "ContentTooLargeError",
    "DirectoryNotEmptyError",
    "DirectorySnapshotStore",
    "ExecResult",
    "FileChangedSinceReadError",
    "FileEntry",
    "FileManager",
    "FileStat",
    "FileTooLargeError",
    "Filesystem",
    "FilesystemDiff",
    "FilesystemSnapshot",
    "GlobMatch",
    "GrepMatch",
    "GuardedFilesystem",
    "HardLinkRefusedError",
    "HistoryEntryNotFoundError",
    "HistoryFilesystem",
    "HostFilesystem",
    "HostMount",
    "HydrationResult",
    "InMemoryFilesystem",
    "InMemorySnapshotStore",
    "InvalidPathError",
    "InvalidPatternError",
    "InvalidTextError",
    "JournalEntry",
    "LimitExceededError",
    "MergeConflict",
    "MergeResult",
    "MergeableFilesystem",
    "MountPointError",
    "MoveIntoSelfError",
    "NameTooLongError",
    "NotReadBeforeWriteError",
    "ObjectStoreFilesystem",
    "PathConstraints",
    "PathEscapeError",
    "PathTooDeepError",
    "PathTooLongError",
    "PatternTooLargeError",
    "PatternTooSlowError",
    "Policy",
    "PolicyDeniedError",
    "PolicyRule",
    "PreconditionFailedError",
    "Prompt",
    "Quota",
    "QuotaExceededError",
    "ReadBytesResult",
    "ReadOnlyError",
    "ReadOnlyFileError",
    "ReadResult",
    "ReadState",
    "RootProtectedError",
    "SandboxError",
    "Section",
    "Session",
    "SnapshotCreationError",
    "SnapshotError",
    "SnapshotIncompatibleError",
    "SnapshotNotFoundError",
    "SnapshotRestoreError",
    "SnapshotRetentionPolicy",
    "SnapshotStore",
    "SnapshotableFilesystem",
    "SpecialFileError",
    "SqlFilesystem",
    "SqlStore",
    "SymlinkRefusedError",
    "TextReader",
    "Tool",
    "ToolContext",
    "ToolResult",
    "UndoConflictError",
    "UndoContentNotKeptError",
    "UnsafeArchiveError",
    "UnsafeNameError",
    "UnsupportedOperationError",
    "Usage",
    "VersionedContent",
    "WorkspaceSection",
    "WriteMode",
    "WriteResult",
    "__version__",
    "acting_as",
    "create_app",
    "current_actor",
    "dispatch",
    "export_tar",
    "import_tar",
    "normalize_path",
    "open_filesystem",
    "register_backend",
    "registered_backends",
    "to_anthropic_tools",
    "to_openai_tools",
    "tools_for",
]
