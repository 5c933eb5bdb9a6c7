"""The frozen result values every backend returns (DESIGN §2)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, TypeVar
from uuid import UUID

__all__ = [
    "ExecResult",
    "FileEntry",
    "FileStat",
    "FilesystemDiff",
    "FilesystemSnapshot",
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
    for each in fields(cls):  # type: ignore[arg-type]
        name = each.name
        namespace[f"_set_{name}"] = getattr(cls, name).__set__
        if each.default is not MISSING:
            namespace[f"_default_{name}"] = each.default
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
class ExecResult:
    """A finished command: its exit code and output (text, head and tail kept when it was too long).

    ``timed_out``: the command ran past its timeout and its whole process group was killed. ``truncated``:
    some output was cut from the middle (the text says how much).
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0


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


@_fast_init
@dataclass(frozen=True, slots=True, weakref_slot=True)
class FilesystemSnapshot:
    """An immutable capture of a filesystem's state.

    ``backend`` names the kind of filesystem that took it (``"memory"``, ``"host"`` …); restoring
    it on another kind raises ``SnapshotIncompatibleError``. ``commit_ref`` is the backend's
    reference to the captured state (a git commit, an archive name, a manifest id). ``payload``
    holds in-process state that is never serialised (the in-memory backend's persistent map).
    """

    snapshot_id: UUID
    created_at: datetime
    backend: str
    root_path: str = "/"
    tag: str | None = None
    parent_id: UUID | None = None
    file_count: int = 0
    total_bytes: int = 0
    commit_ref: str | None = None
    git_dir: str | None = None
    strategy: str | None = None
    payload: Any = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (without ``payload``), for stores that persist snapshots."""
        return {
            "snapshot_id": str(self.snapshot_id),
            "created_at": self.created_at.isoformat(),
            "backend": self.backend,
            "root_path": self.root_path,
            "tag": self.tag,
            "parent_id": None if self.parent_id is None else str(self.parent_id),
            "file_count": self.file_count,
            "total_bytes": self.total_bytes,
            "commit_ref": self.commit_ref,
            "git_dir": self.git_dir,
            "strategy": self.strategy,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FilesystemSnapshot:
        """Inverse of :meth:`to_dict`."""
        parent_id = data.get("parent_id")
        return cls(
            snapshot_id=UUID(str(data["snapshot_id"])),
            created_at=datetime.fromisoformat(str(data["created_at"])),
            backend=str(data["backend"]),
            root_path=str(data.get("root_path", "/")),
            tag=data.get("tag"),
            parent_id=None if parent_id is None else UUID(str(parent_id)),
            file_count=int(data.get("file_count", 0)),
            total_bytes=int(data.get("total_bytes", 0)),
            commit_ref=data.get("commit_ref"),
            git_dir=data.get("git_dir"),
            strategy=data.get("strategy"),
        )
