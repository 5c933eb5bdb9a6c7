"""The frozen result values every backend returns (DESIGN §2)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

__all__ = [
    "FileEntry",
    "FileStat",
    "FilesystemDiff",
    "GlobMatch",
    "GrepMatch",
    "ReadBytesResult",
    "ReadResult",
    "WriteMode",
    "WriteResult",
]

WriteMode = Literal["create", "overwrite", "append"]
"""``create`` fails if the file exists; ``overwrite`` replaces it; ``append`` adds to its end."""


@dataclass(frozen=True, slots=True)
class FileStat:
    """Metadata of a file or directory; a directory's ``size_bytes`` is 0."""

    path: str
    is_file: bool
    is_directory: bool
    size_bytes: int
    created_at: datetime | None = None
    modified_at: datetime | None = None
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One entry of a directory listing; ``size_bytes`` is ``None`` for directories."""

    name: str
    path: str
    is_file: bool
    is_directory: bool
    size_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class GlobMatch:
    """A path matched by ``glob`` (always a file)."""

    path: str
    is_file: bool = True


@dataclass(frozen=True, slots=True)
class GrepMatch:
    """One matching line: 1-based ``line_number``, the span of the first match in characters."""

    path: str
    line_number: int
    line_content: str
    match_start: int
    match_end: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Lines ``[offset, offset + limit)`` of a text file, newlines kept; ``truncated`` if more follow."""

    content: str
    path: str
    total_lines: int
    offset: int
    limit: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class ReadBytesResult:
    """Bytes ``[offset, offset + limit)``; ``size_bytes`` is the whole file's size."""

    content: bytes
    path: str
    size_bytes: int
    offset: int
    limit: int | None
    truncated: bool


@dataclass(frozen=True, slots=True)
class WriteResult:
    """Confirmation of a write: the bytes written by this call and the mode used."""

    path: str
    bytes_written: int
    mode: WriteMode


@dataclass(frozen=True, slots=True)
class FilesystemDiff:
    """Files added, modified and deleted between two states, each sorted; directories are not listed."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    unchanged_count: int = 0

    @property
    def is_empty(self) -> bool:
        """True when nothing changed."""
        return not (self.added or self.modified or self.deleted)
