"""``Session``: typed slices of conversation state, snapshots and rollback, JSON persistence, and
snapshots that capture the session and its filesystem together."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import types
import typing
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from workspacefs.backends.memory import InMemoryFilesystem
from workspacefs.protocol import Filesystem, SnapshotableFilesystem
from workspacefs.results import FilesystemSnapshot
from workspacefs.tools import ReadState

__all__ = [
    "FilesystemSnapshotRef",
    "Session",
    "SessionSnapshot",
    "Slice",
    "append_all",
    "create_unified_snapshot",
    "replace_latest",
    "restore_unified_snapshot",
]

T = TypeVar("T")
Reducer = Callable[[tuple[Any, ...], Any], tuple[Any, ...]]


def append_all(current: tuple[T, ...], item: T) -> tuple[T, ...]:
    """Reducer keeping every item (the default)."""
    return (*current, item)


def replace_latest(current: tuple[T, ...], item: T) -> tuple[T, ...]:  # noqa: ARG001 - a reducer's signature
    """Reducer keeping only the newest item."""
    return (item,)


@dataclass(frozen=True, slots=True)
class FilesystemSnapshotRef:
    """A filesystem snapshot recorded in the session, so a rollback restores the files with the state."""

    filesystem_key: str
    snapshot_id: uuid.UUID
    backend_type: str


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """An immutable capture of a session: its slices, and its cheaply snapshotable filesystems."""

    snapshot_id: uuid.UUID
    created_at: datetime
    slices: dict[type[Any], tuple[Any, ...]]
    filesystems: dict[str, FilesystemSnapshot]


class Slice(Generic[T]):
    """The items of one type in a session; changes go through the slice's reducer."""

    def __init__(self, session: Session, kind: type[T]) -> None:
        self._session = session
        self._kind = kind

    def register(self, kind: type[T], reducer: Reducer = append_all) -> Slice[T]:
        """Choose how appended items combine (``append_all`` unless a reducer is given)."""
        self._session._reducers[kind] = reducer
        return self

    def append(self, item: T) -> None:
        """Add an item through the reducer."""
        reducer = self._session._reducers.get(self._kind, append_all)
        self._session._slices[self._kind] = reducer(self.all(), item)

    def seed(self, item: T) -> None:
        """Replace everything with one item."""
        self._session._slices[self._kind] = (item,)

    def clear(self) -> None:
        """Remove every item."""
        self._session._slices.pop(self._kind, None)

    def all(self) -> tuple[T, ...]:
        """Every item, oldest first."""
        items: tuple[T, ...] = self._session._slices.get(self._kind, ())
        return items

    def latest(self) -> T | None:
        """The newest item, if any."""
        items = self.all()
        return items[-1] if items else None


class Session:
    """Conversation state in typed slices, with the filesystems it carries.

    Items should be frozen dataclasses (they are shared between snapshots, never copied). In-memory
    filesystems attached with :meth:`attach_filesystem` are captured by :meth:`snapshot` (in O(1))
    and saved with the session; :attr:`read_state` is the read-before-write ledger tools use.
    """

    def __init__(self) -> None:
        self._slices: dict[type[Any], tuple[Any, ...]] = {}
        self._reducers: dict[type[Any], Reducer] = {}
        self._filesystems: dict[str, Filesystem] = {}
        self.read_state = ReadState()

    def __getitem__(self, kind: type[T]) -> Slice[T]:
        return Slice(self, kind)

    def attach_filesystem(self, key: str, filesystem: Filesystem) -> None:
        """Carry ``filesystem`` with the session under ``key``."""
        self._filesystems[key] = filesystem

    def filesystem(self, key: str) -> Filesystem:
        """An attached filesystem (``KeyError`` if none has this key)."""
        return self._filesystems[key]

    @property
    def filesystems(self) -> dict[str, Filesystem]:
        """The attached filesystems by key."""
        return dict(self._filesystems)

    def snapshot(self) -> SessionSnapshot:
        """Capture the slices and every attached filesystem whose snapshots are cheap."""
        captured = {
            key: cast(SnapshotableFilesystem, fs).snapshot(tag=f"session {key}")  # the capability promises it
            for key, fs in self._filesystems.items()
            if fs.capabilities.cheap_snapshots
        }
        return SessionSnapshot(uuid.uuid4(), datetime.now(UTC), dict(self._slices), captured)

    def rollback(self, snapshot: SessionSnapshot) -> None:
        """Return the slices, and the filesystems captured with them, to ``snapshot``."""
        for key, fs_snapshot in snapshot.filesystems.items():
            fs = self._filesystems.get(key)
            if fs is not None and fs.capabilities.snapshots:
                cast(SnapshotableFilesystem, fs).restore(fs_snapshot)
        self._slices = dict(snapshot.slices)

    # --- persistence ------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the slices, and the files of every attached filesystem that does not persist by itself
        (``capabilities.persistent`` false: memory), to a JSON file (atomically)."""
        document = {
            "version": 1,
            "slices": [
                {"type": _type_name(kind), "items": [_encode(item) for item in items]}
                for kind, items in self._slices.items()
            ],
            "filesystems": {
                key: _export_tree(fs) for key, fs in self._filesystems.items() if not fs.capabilities.persistent
            },
        }
        target = Path(path)
        temp = target.with_name(f".{target.name}.tmp")
        temp.write_text(json.dumps(document), encoding="utf-8")
        os.replace(temp, target)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, types: Iterable[type[Any]] = ()) -> Session:
        """Read a saved session. Item types must be named in ``types`` (besides the built-in ones):
        nothing is imported by name from the file."""
        known = {_type_name(kind): kind for kind in (*types, FilesystemSnapshotRef, FilesystemSnapshot)}
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        session = cls()
        for entry in document.get("slices", []):
            kind = known.get(entry["type"])
            if kind is None:
                raise ValueError(f"Saved session holds items of {entry['type']}; pass that class in types=")
            session._slices[kind] = tuple(_decode(kind, item) for item in entry["items"])
        for key, tree in document.get("filesystems", {}).items():
            session.attach_filesystem(key, _import_tree(tree))
        return session


def _type_name(kind: type[Any]) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def _encode(item: Any) -> Any:
    if isinstance(item, FilesystemSnapshot):
        return item.to_dict()
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return {f.name: _encode(getattr(item, f.name)) for f in dataclasses.fields(item)}
    if isinstance(item, uuid.UUID | datetime):
        return str(item) if isinstance(item, uuid.UUID) else item.isoformat()
    if isinstance(item, tuple | list):
        return [_encode(v) for v in item]
    if isinstance(item, dict):
        return {str(k): _encode(v) for k, v in item.items()}
    return item


def _decode(kind: Any, value: Any) -> Any:
    if kind is FilesystemSnapshot:
        return FilesystemSnapshot.from_dict(value)
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        return _decode(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        hints = typing.get_type_hints(kind)
        fields = {
            f.name: _decode(hints.get(f.name, Any), value[f.name]) for f in dataclasses.fields(kind) if f.name in value
        }
        build: Callable[..., Any] = kind
        return build(**fields)
    if kind is uuid.UUID:
        return uuid.UUID(value)
    if kind is datetime:
        return datetime.fromisoformat(value)
    if origin is tuple:
        args = typing.get_args(kind)
        inner = args[0] if args else Any
        return tuple(_decode(inner, v) for v in value)
    return value


def _export_tree(fs: Filesystem) -> dict[str, Any]:
    """Every directory and file (base64) of a filesystem that lives only in this process."""
    dirs: list[str] = []
    files: dict[str, str] = {}
    for entry in fs.walk("."):
        if entry.is_directory:
            dirs.append(entry.path)
        else:
            with fs.open_read(entry.path) as reader:
                files[entry.path] = base64.b64encode(reader.read()).decode("ascii")
    return {"mount_point": fs.mount_point, "dirs": sorted(dirs), "files": files}


def _import_tree(tree: dict[str, Any]) -> InMemoryFilesystem:
    fs = InMemoryFilesystem(mount_point=tree.get("mount_point"))
    for directory in tree.get("dirs", []):
        fs.mkdir(directory)
    for path, data in tree.get("files", {}).items():
        with fs.open_write(path) as writer:
            writer.write(base64.b64decode(data))
    return fs


def create_unified_snapshot(
    session: Session, filesystem: SnapshotableFilesystem, filesystem_key: str
) -> tuple[SessionSnapshot, FilesystemSnapshot]:
    """Snapshot a filesystem, record a reference to it in the session, then snapshot the session."""
    fs_snapshot = filesystem.snapshot()
    session[FilesystemSnapshotRef].append(
        FilesystemSnapshotRef(filesystem_key, fs_snapshot.snapshot_id, type(filesystem).__name__)
    )
    return session.snapshot(), fs_snapshot


def restore_unified_snapshot(
    session: Session,
    filesystem: SnapshotableFilesystem,
    session_snapshot: SessionSnapshot,
    fs_snapshot: FilesystemSnapshot,
) -> None:
    """Restore the filesystem first (it may fail), then roll the session back."""
    filesystem.restore(fs_snapshot)
    session.rollback(session_snapshot)
