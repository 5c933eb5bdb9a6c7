"""The frozen result values every backend returns (DESIGN §2)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from datetime import datetime
from typing import Any, Literal, TypeVar

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

_T = TypeVar("_T")


def _fast_init(cls: type[_T]) -> type[_T]:
    """Give a frozen, slotted dataclass an ``__init__`` that fills its slots directly.

    The generated frozen ``__init__`` goes through ``object.__setattr__`` once per field, which made
    building a result cost more than the operation it reports on. Writing through each slot's
    descriptor skips the frozen ``__setattr__`` guard at construction only; instances stay frozen.
    """
    parameters: list[str] = []
    body: list[str] = []
    namespace: dict[str, Any] = {}
    for field in fields(cls):  # type: ignore[arg-type]
        name = field.name
        namespace[f"_set_{name}"] = getattr(cls, name).__set__
        if field.default is not MISSING:
            namespace[f"_default_{name}"] = field.default
            parameters.append(f"{name}=_default_{name}")
        else:
            parameters.append(name)
        body.append(f"    _set_{name}(self, {name})\n")
    source = f"def __init__(self, {', '.join(parameters)}):\n" + "".join(body)
    exec(source, namespace)  # noqa: S102 - the source is built from the class's own field names only
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


@_fast_init
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


@_fast_init
@dataclass(frozen=True, slots=True)
class FileEntry:
    """One entry of a directory listing; ``size_bytes`` is ``None`` for directories."""

    name: str
    path: str
    is_file: bool
    is_directory: bool
    size_bytes: int | None = None


@_fast_init
@dataclass(frozen=True, slots=True)
class GlobMatch:
    """A path matched by ``glob`` (always a file)."""

    path: str
    is_file: bool = True


@_fast_init
@dataclass(frozen=True, slots=True)
class GrepMatch:
    """One matching line: 1-based ``line_number``, the span of the first match in characters."""

    path: str
    line_number: int
    line_content: str
    match_start: int
    match_end: int


@_fast_init
@dataclass(frozen=True, slots=True)
class ReadResult:
    """Lines ``[offset, offset + limit)`` of a text file, newlines kept; ``truncated`` if more follow."""

    content: str
    path: str
    total_lines: int
    offset: int
    limit: int
    truncated: bool


@_fast_init
@dataclass(frozen=True, slots=True)
class ReadBytesResult:
    """Bytes ``[offset, offset + limit)``; ``size_bytes`` is the whole file's size."""

    content: bytes
    path: str
    size_bytes: int
    offset: int
    limit: int | None
    truncated: bool


@_fast_init
@dataclass(frozen=True, slots=True)
class WriteResult:
    """Confirmation of a write: the bytes written by this call and the mode used."""

    path: str
    bytes_written: int
    mode: WriteMode


@_fast_init
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
