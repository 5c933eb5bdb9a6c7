"""The protocols callers program against, whatever the backend. Names here are fixed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, runtime_checkable
from uuid import UUID

from workspacefs.capabilities import Capabilities
from workspacefs.merge import MergeResult
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

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "ByteReader",
    "ByteWriter",
    "BytesLike",
    "CommandRunner",
    "ConditionalWrites",
    "Filesystem",
    "MergeableFilesystem",
    "SnapshotableFilesystem",
    "TextReader",
    "VersionedContent",
]

BytesLike = bytes | bytearray | memoryview
"""What writers accept."""


@runtime_checkable
class ByteReader(Protocol):
    """Streaming byte reader with a fixed memory footprint and its own position."""

    @property
    def path(self) -> str:
        """Path being read."""
        ...

    @property
    def size(self) -> int:
        """Total file size in bytes."""
        ...

    @property
    def position(self) -> int:
        """Current read position in bytes."""
        ...

    @property
    def closed(self) -> bool:
        """True once closed; reading then raises ``ValueError``."""
        ...

    def read(self, size: int = -1) -> bytes:
        """Read up to ``size`` bytes (-1: to the end); ``b""`` at EOF."""
        ...

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move the position (whence 0 start, 1 current, 2 end); return the new position."""
        ...

    def __iter__(self) -> Iterator[bytes]:
        """Chunks of the default size (64 KiB) from the current position."""
        ...

    def chunks(self, size: int) -> Iterator[bytes]:
        """Chunks of ``size`` bytes from the current position."""
        ...

    def close(self) -> None:
        """Release the underlying resource; idempotent."""
        ...

    def __enter__(self) -> ByteReader: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class ByteWriter(Protocol):
    """Streaming byte writer: content becomes visible, atomically, when it closes without error."""

    @property
    def path(self) -> str:
        """Path being written."""
        ...

    @property
    def bytes_written(self) -> int:
        """Total bytes written so far."""
        ...

    @property
    def closed(self) -> bool:
        """True once committed or aborted; writing then raises ``ValueError``."""
        ...

    def write(self, data: BytesLike) -> int:
        """Write bytes; return how many."""
        ...

    def write_all(self, chunks: Iterable[BytesLike]) -> int:
        """Write every chunk; return the total."""
        ...

    def close(self) -> None:
        """Commit the content; idempotent."""
        ...

    def abort(self) -> None:
        """Discard everything written; the old content (or no file) remains."""
        ...

    def __enter__(self) -> ByteWriter: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class TextReader(Protocol):
    """Line-oriented UTF-8 reader with lazy decoding; lines split on ``\\n`` only."""

    @property
    def path(self) -> str:
        """Path being read."""
        ...

    @property
    def encoding(self) -> str:
        """Always ``"utf-8"``."""
        ...

    @property
    def line_number(self) -> int:
        """Lines returned so far."""
        ...

    def readline(self) -> str:
        """Next line including its newline; ``""`` at EOF."""
        ...

    def read(self, size: int = -1) -> str:
        """Up to ``size`` characters; ``""`` at EOF."""
        ...

    def __iter__(self) -> Iterator[str]:
        """Lines, newlines included."""
        ...

    def lines(self, *, strip: bool = False) -> Iterator[str]:
        """Lines; with ``strip`` the line ending (``\\n`` or ``\\r\\n``) is removed."""
        ...

    def close(self) -> None:
        """Close the underlying byte reader."""
        ...

    def __enter__(self) -> TextReader: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class Filesystem(Protocol):
    """One filesystem for agent tools, whatever stores the files (DESIGN §2-§3)."""

    @property
    def root(self) -> str:
        """Workspace root (``"/"`` for virtual filesystems)."""
        ...

    @property
    def read_only(self) -> bool:
        """True if every mutation raises ``PermissionError``."""
        ...

    @property
    def mount_point(self) -> str | None:
        """Absolute prefix (e.g. ``/workspace``) that paths may carry; ``None`` if unset."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What this backend can do (read these flags; never probe for attributes)."""
        ...

    def open_read(self, path: str) -> ByteReader:
        """Open a file for streaming byte reads."""
        ...

    def open_write(self, path: str, *, mode: WriteMode = "overwrite", create_parents: bool = True) -> ByteWriter:
        """Open a file for streaming byte writes, committed atomically on close."""
        ...

    def open_text(self, path: str, *, encoding: str = "utf-8") -> TextReader:
        """Open a file for streaming UTF-8 text reads."""
        ...

    def read(self, path: str, *, offset: int = 0, limit: int | None = None, encoding: str = "utf-8") -> ReadResult:
        """Read lines ``[offset, offset + limit)`` (limit ``None``: 2,000)."""
        ...

    def read_bytes(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadBytesResult:
        """Read bytes ``[offset, offset + limit)``."""
        ...

    def write(
        self, path: str, content: str, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult:
        """Write UTF-8 text."""
        ...

    def write_bytes(
        self, path: str, content: BytesLike, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult:
        """Write bytes."""
        ...

    def exists(self, path: str) -> bool:
        """True if a file or directory exists at ``path``."""
        ...

    def stat(self, path: str) -> FileStat:
        """Metadata of a file or directory."""
        ...

    def list(self, path: str = ".") -> Sequence[FileEntry]:
        """Entries of a directory, sorted by name."""
        ...

    def glob(self, pattern: str, *, path: str = ".") -> Sequence[GlobMatch]:
        """Files matching ``pattern`` under ``path``, sorted by path."""
        ...

    def walk(self, path: str = ".") -> Iterator[FileEntry]:
        """Every entry below ``path``, each directory before what it holds; nothing if it is missing."""
        ...

    def grep(
        self, pattern: str, *, path: str = ".", glob: str | None = None, max_matches: int | None = None
    ) -> Sequence[GrepMatch]:
        """Lines matching a regular expression, sorted by ``(path, line_number)``."""
        ...

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """Delete a file or directory."""
        ...

    def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        """Create a directory."""
        ...

    def move(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Move a file or directory."""
        ...

    def copy(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Copy a file or directory (recursively)."""
        ...


@runtime_checkable
class SnapshotableFilesystem(Filesystem, Protocol):
    """A filesystem that can capture, restore and compare its state."""

    @property
    def current_snapshot_id(self) -> UUID | None:
        """Id of the snapshot last restored; ``None`` before any restore."""
        ...

    def snapshot(self, *, tag: str | None = None) -> FilesystemSnapshot:
        """Capture the current state."""
        ...

    def restore(self, snapshot: FilesystemSnapshot) -> None:
        """Return to a captured state."""
        ...

    def diff(self, base: FilesystemSnapshot, target: FilesystemSnapshot | None = None) -> FilesystemDiff:
        """Files added, modified and deleted from ``base`` to ``target`` (``None``: now)."""
        ...

    def snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots this filesystem keeps, oldest first."""
        ...

    def delete_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        """Forget a snapshot and the data only it held (``SnapshotNotFoundError`` if unknown)."""
        ...


@runtime_checkable
class MergeableFilesystem(SnapshotableFilesystem, Protocol):
    """A filesystem that can merge snapshots three ways (where ``capabilities.merge`` says so)."""

    def merge(
        self,
        base: FilesystemSnapshot,
        ours: FilesystemSnapshot,
        theirs: FilesystemSnapshot,
        *,
        markers: bool = False,
        tag: str | None = None,
    ) -> MergeResult:
        """A new snapshot merging ``ours`` and ``theirs`` from ``base``, with the conflicts (no file changes)."""
        ...

    def mergeable_snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots ``merge`` accepts here (this filesystem's and its family's), oldest first."""
        ...


@dataclass(frozen=True, slots=True)
class VersionedContent:
    """A file's metadata, the id of its content, and a reader of exactly that content (close it)."""

    stat: FileStat
    content_id: str
    reader: ByteReader


@runtime_checkable
class ConditionalWrites(Protocol):
    """Compare-and-set over content ids, so an editor never overwrites a version it has not seen.

    A content id names a file's bytes (equal content, equal id, on every backend): use it as an ETag.
    ``expect="*"`` accepts any existing file. ``read_only`` (only where ``capabilities.file_read_only``)
    sets the file's read-only flag in the same step as the content: both change, or neither does.
    """

    def content_id(self, path: str) -> str:
        """The id of a file's current content (``FileNotFoundError``, ``IsADirectoryError``)."""
        ...

    def open_versioned(self, path: str) -> VersionedContent:
        """A file's metadata, content id and a reader of that very content, taken together."""
        ...

    def write_bytes_if(
        self, path: str, content: BytesLike, *, expect: str, read_only: bool | None = None
    ) -> WriteResult:
        """Overwrite ``path`` only if its content id is still ``expect`` (``PreconditionFailedError``)."""
        ...

    def open_write_if(self, path: str, *, expect: str, read_only: bool | None = None) -> ByteWriter:
        """A streaming writer whose commit succeeds only over content id ``expect``."""
        ...


DEFAULT_MAX_OUTPUT = 1024 * 1024
"""Bytes of each output stream a command may return in full; longer output keeps its head and tail."""


@runtime_checkable
class CommandRunner(Protocol):
    """A workspace commands can run in (``capabilities.exec``): a container, never the caller's machine."""

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float = 120,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | str | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> ExecResult:
        """Run ``cmd`` (a list: argv, never through a shell on the host; a string: ``sh -c`` inside)."""
        ...
