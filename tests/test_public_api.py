"""The public API is exactly what workspacefs/__init__.py exports; it never changes by accident."""

from __future__ import annotations

import workspacefs
from workspacefs import Filesystem, InMemoryFilesystem, SnapshotableFilesystem

EXPECTED = {
    "Actor",
    "Change",
    "ChangeEvent",
    "ChangeWatcher",
    "HistoryEntryNotFoundError",
    "HistoryFilesystem",
    "JournalEntry",
    "UndoConflictError",
    "UndoContentNotKeptError",
    "acting_as",
    "current_actor",
    "ConflictHunk",
    "MergeConflict",
    "MergeResult",
    "MergeableFilesystem",
    "ArchiveStats",
    "AsyncFilesystem",
    "FileManager",
    "PathConstraints",
    "UnsafeArchiveError",
    "export_tar",
    "import_tar",
    "ALL_TOOLS",
    "EXTRA_TOOLS",
    "FILESYSTEM_TOOLS",
    "SNAPSHOT_TOOLS",
    "tools_for",
    "ReadState",
    "Tool",
    "ToolContext",
    "ToolResult",
    "dispatch",
    "to_anthropic_tools",
    "to_openai_tools",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_GREP_MATCHES",
    "DEFAULT_READ_LIMIT",
    "MAX_CONVENIENCE_BYTES",
    "MAX_PATH_DEPTH",
    "MAX_SEGMENT_LENGTH",
    "BaseFilesystem",
    "DirectorySnapshotStore",
    "ByteReader",
    "ByteWriter",
    "FileEntry",
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
    "ReadBytesResult",
    "ReadResult",
    "PreconditionFailedError",
    "ApprovalRequest",
    "GuardedFilesystem",
    "Policy",
    "PolicyRule",
    "Quota",
    "Usage",
    "FileTooLargeError",
    "PatternTooLargeError",
    "PolicyDeniedError",
    "QuotaExceededError",
    "UnsafeNameError",
    "Capabilities",
    "CommandRunner",
    "ContainerFilesystem",
    "ContainerSandbox",
    "ExecResult",
    "SandboxError",
    "ConditionalWrites",
    "VersionedContent",
    "ConcurrentChangeError",
    "ContentTooLargeError",
    "DirectoryNotEmptyError",
    "FileChangedSinceReadError",
    "HardLinkRefusedError",
    "InvalidPathError",
    "InvalidPatternError",
    "InvalidTextError",
    "LimitExceededError",
    "MoveIntoSelfError",
    "NameTooLongError",
    "NotReadBeforeWriteError",
    "PathEscapeError",
    "PathTooDeepError",
    "PathTooLongError",
    "PatternTooSlowError",
    "ReadOnlyError",
    "ReadOnlyFileError",
    "RootProtectedError",
    "SpecialFileError",
    "SymlinkRefusedError",
    "UnsupportedOperationError",
    "Prompt",
    "Section",
    "Session",
    "WorkspaceSection",
    "create_app",
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
    "ObjectStoreFilesystem",
    "CompositeFilesystem",
    "MountPointError",
    "TextReader",
    "WriteMode",
    "WriteResult",
    "__version__",
    "normalize_path",
    "open_filesystem",
    "register_backend",
    "registered_backends",
}


def test_exports_are_exactly_the_public_api() -> None:
    assert set(workspacefs.__all__) == EXPECTED
    for name in workspacefs.__all__:
        assert hasattr(workspacefs, name), name


def test_limits_have_the_documented_values() -> None:
    assert workspacefs.MAX_PATH_DEPTH == 16
    assert workspacefs.MAX_SEGMENT_LENGTH == 80
    assert workspacefs.MAX_CONVENIENCE_BYTES == 32 * 1024 * 1024
    assert workspacefs.DEFAULT_READ_LIMIT == 2000
    assert workspacefs.DEFAULT_MAX_GREP_MATCHES == 1000
    assert workspacefs.DEFAULT_CHUNK_SIZE == 64 * 1024


def test_memory_backend_satisfies_the_protocols() -> None:
    fs = InMemoryFilesystem()
    assert isinstance(fs, Filesystem)
    assert isinstance(fs, SnapshotableFilesystem)
    assert fs.root == "/"


def test_result_values_are_frozen() -> None:
    fs = InMemoryFilesystem()
    result = fs.write("a.txt", "x")
    try:
        result.path = "b.txt"  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("WriteResult is mutable")


def test_snapshot_errors_form_one_family() -> None:
    assert issubclass(workspacefs.SnapshotError, RuntimeError)
    for error in (
        workspacefs.SnapshotCreationError,
        workspacefs.SnapshotRestoreError,
        workspacefs.SnapshotNotFoundError,
        workspacefs.SnapshotIncompatibleError,
    ):
        assert issubclass(error, workspacefs.SnapshotError)
    assert issubclass(workspacefs.SnapshotIncompatibleError, ValueError)
