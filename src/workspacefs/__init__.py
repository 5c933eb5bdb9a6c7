"""workspacefs: one filesystem for the tools of LLM agents.

A tool handler calls ``fs.read(...)`` the same way whether the files live in memory, in a sandboxed
host directory, in a container, in SQLite/PostgreSQL or in an object store. Everything public is
re-exported here; every other module is private.
"""

import importlib

from workspacefs._hostio import HostMount, HydrationResult
from workspacefs.archive import ArchiveStats, UnsafeArchiveError, export_tar, import_tar
from workspacefs.asyncfs import AsyncFilesystem
from workspacefs.backends.base import BaseFilesystem
from workspacefs.backends.host import HostFilesystem
from workspacefs.backends.memory import InMemoryFilesystem
from workspacefs.errors import (
    PreconditionFailedError,
    SnapshotCreationError,
    SnapshotError,
    SnapshotIncompatibleError,
    SnapshotNotFoundError,
    SnapshotRestoreError,
)
from workspacefs.manager import FileManager, PathConstraints
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
from workspacefs.protocol import ByteReader, ByteWriter, Filesystem, SnapshotableFilesystem, TextReader
from workspacefs.results import (
    FileEntry,
    FileStat,
    FilesystemDiff,
    GlobMatch,
    GrepMatch,
    ReadBytesResult,
    ReadResult,
    WriteMode,
    WriteResult,
)
from workspacefs.snapshots import (
    DirectorySnapshotStore,
    FilesystemSnapshot,
    InMemorySnapshotStore,
    SnapshotRetentionPolicy,
    SnapshotStore,
)
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

__version__ = "0.1.0"

_LAZY = {
    "SqlFilesystem": ("workspacefs.backends.sql", "pip install 'workspacefs[sql]'"),
    "SqlStore": ("workspacefs.backends.sql_store", "pip install 'workspacefs[sql]'"),
    "create_app": ("workspacefs.server._app", "pip install 'workspacefs[server]'"),
    "TokenStore": ("workspacefs.server.tokens", "pip install 'workspacefs[sql]'"),
}


def __getattr__(name: str) -> object:
    """Backends with optional dependencies load on first use, with an install hint if they cannot."""
    if name not in _LAZY:
        raise AttributeError(f"module 'workspacefs' has no attribute {name!r}")
    module_name, hint = _LAZY[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"workspacefs.{name} needs an optional dependency ({exc}); {hint}") from exc
    return getattr(module, name)


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
    "ArchiveStats",
    "AsyncFilesystem",
    "BaseFilesystem",
    "ByteReader",
    "ByteWriter",
    "DirectorySnapshotStore",
    "FileEntry",
    "FileManager",
    "FileStat",
    "Filesystem",
    "FilesystemDiff",
    "FilesystemSnapshot",
    "GlobMatch",
    "GrepMatch",
    "HostFilesystem",
    "HostMount",
    "HydrationResult",
    "InMemoryFilesystem",
    "InMemorySnapshotStore",
    "PathConstraints",
    "PreconditionFailedError",
    "ReadBytesResult",
    "ReadResult",
    "ReadState",
    "SnapshotCreationError",
    "SnapshotError",
    "SnapshotIncompatibleError",
    "SnapshotNotFoundError",
    "SnapshotRestoreError",
    "SnapshotRetentionPolicy",
    "SnapshotStore",
    "SnapshotableFilesystem",
    "SqlFilesystem",
    "SqlStore",
    "TextReader",
    "TokenStore",
    "Tool",
    "ToolContext",
    "ToolResult",
    "UnsafeArchiveError",
    "WriteMode",
    "WriteResult",
    "__version__",
    "create_app",
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
