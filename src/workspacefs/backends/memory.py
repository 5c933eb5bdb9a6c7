"""``InMemoryFilesystem``: state in a persistent hash map, so snapshots and forks cost O(1).

Every path maps to an immutable node in an ``immutables.Map`` (a HAMT). A mutation builds a new
map that shares everything it did not touch, so a snapshot is just a reference to the current map:
its cost does not depend on how many files or bytes are stored, and a write after it copies only
the entries it changes. File content is an immutable ``bytes`` object that snapshots, forks and
copies share instead of duplicating. Each directory node keeps its children's entries, so listing
a directory never scans the whole map.
"""

from __future__ import annotations

import io
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import immutables

from workspacefs import errors
from workspacefs.backends.base import BaseFilesystem, Fingerprint
from workspacefs.errors import SnapshotRestoreError
from workspacefs.paths import ROOT, ancestors, basename, join, parent
from workspacefs.protocol import ByteReader, ByteWriter
from workspacefs.results import FileEntry, FileStat, WriteMode
from workspacefs.snapshots import FilesystemSnapshot
from workspacefs.streams import StreamReader, StreamWriter

__all__ = ["InMemoryFilesystem"]


class _File:
    """An immutable file node; ``data`` is shared by every state that holds the same content."""

    __slots__ = ("created", "data", "entry", "modified")

    def __init__(self, path: str, data: bytes, created: float, modified: float) -> None:
        self.data = data
        self.created = created
        self.modified = modified
        self.entry = FileEntry(basename(path), path, True, False, len(data))


class _Dir:
    """An immutable directory node holding its children's entries (the sorted listing is cached)."""

    __slots__ = ("_listing", "children", "created", "entry", "modified")

    def __init__(self, path: str, children: immutables.Map[str, FileEntry], created: float, modified: float) -> None:
        self.children = children
        self.created = created
        self.modified = modified
        self.entry = FileEntry(basename(path), path, False, True, None)
        self._listing: tuple[FileEntry, ...] | None = None

    def listing(self) -> tuple[FileEntry, ...]:
        if self._listing is None:
            self._listing = tuple(entry for _, entry in sorted(self.children.items()))
        return self._listing


_Node = _File | _Dir
_EMPTY_CHILDREN: immutables.Map[str, FileEntry] = immutables.Map()


@dataclass(frozen=True, slots=True)
class _State:
    """One immutable version of the whole filesystem."""

    nodes: immutables.Map[str, _Node]
    file_count: int
    total_bytes: int


def _empty_state() -> _State:
    now = time.time()
    return _State(immutables.Map({ROOT: _Dir(ROOT, _EMPTY_CHILDREN, now, now)}), 0, 0)


class _Edit:
    """A batch of changes to a state, applied in one step by :meth:`finish`."""

    def __init__(self, state: _State) -> None:
        self.nodes = state.nodes.mutate()
        self.file_count = state.file_count
        self.total_bytes = state.total_bytes
        self.now = time.time()

    def get(self, path: str) -> _Node | None:
        return self.nodes.get(path)

    def _link(self, path: str, entry: FileEntry | None) -> None:
        """Add (or, with ``None``, remove) ``path`` in its parent's children."""
        above = self.nodes[parent(path)]
        assert isinstance(above, _Dir)
        name = basename(path)
        children = above.children.delete(name) if entry is None else above.children.set(name, entry)
        self.nodes[above.entry.path] = _Dir(above.entry.path, children, above.created, self.now)

    def put_file(self, path: str, data: bytes, created: float | None = None, modified: float | None = None) -> None:
        old = self.nodes.get(path)
        if isinstance(old, _File):
            self.total_bytes -= len(old.data)
            created = old.created if created is None else created
        else:
            self.file_count += 1
        node = _File(path, data, self.now if created is None else created, self.now if modified is None else modified)
        self.total_bytes += len(data)
        self.nodes[path] = node
        self._link(path, node.entry)

    def put_dir(self, path: str, children: immutables.Map[str, FileEntry] = _EMPTY_CHILDREN) -> None:
        node = _Dir(path, children, self.now, self.now)
        self.nodes[path] = node
        self._link(path, node.entry)

    def remove(self, path: str) -> None:
        """Remove one node (a directory must already be empty)."""
        node = self.nodes[path]
        if isinstance(node, _File):
            self.file_count -= 1
            self.total_bytes -= len(node.data)
        del self.nodes[path]
        self._link(path, None)

    def finish(self) -> _State:
        return _State(self.nodes.finish(), self.file_count, self.total_bytes)


class _MemoryWriter(StreamWriter):
    """Buffers privately and swaps the new content in on commit."""

    __slots__ = ("_buffer", "_fs", "_mode")

    def __init__(self, fs: InMemoryFilesystem, path: str, mode: WriteMode) -> None:
        super().__init__(path)
        self._fs = fs
        self._mode = mode
        self._buffer = io.BytesIO()

    def _write_chunk(self, data: bytes) -> None:
        self._buffer.write(data)

    def _commit(self) -> None:
        data = self._buffer.getvalue()
        self._buffer = io.BytesIO()
        self._fs._write_content(self.path, data, self._mode)

    def _discard(self) -> None:
        self._buffer = io.BytesIO()


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class InMemoryFilesystem(BaseFilesystem):
    """A filesystem held in process memory, with O(1) snapshots and forks.

    Thread-safe: each mutation swaps in a new immutable state under a lock.
    """

    backend_name = "memory"

    def __init__(self, *, read_only: bool = False, mount_point: str | None = None) -> None:
        super().__init__(read_only=read_only, mount_point=mount_point)
        self._state = _empty_state()
        self._lock = threading.RLock()
        self._last_snapshot_id: uuid.UUID | None = None

    # --- helpers ---------------------------------------------------------------------------------

    def _node(self, path: str) -> _Node | None:
        return self._state.nodes.get(path)

    def _missing_parent(self, path: str, nodes: Any) -> OSError:
        """Why ``path``'s parent is unusable: a file above it, or simply missing."""
        for directory in ancestors(path):
            if isinstance(nodes.get(directory), _File):
                return errors.not_a_directory(path)
        return errors.file_not_found(path)

    def _check_parent(self, path: str, nodes: Any) -> None:
        if not isinstance(nodes.get(parent(path)), _Dir):
            raise self._missing_parent(path, nodes)

    def _subtree(self, path: str) -> list[str]:
        """``path`` and every path below it, parents before children."""
        order = [path]
        index = 0
        nodes = self._state.nodes
        while index < len(order):
            node = nodes[order[index]]
            if isinstance(node, _Dir):
                order.extend(join(order[index], name) for name in node.children)
            index += 1
        return order

    # --- primitives ------------------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStat:
        node = self._node(path)
        if node is None:
            raise errors.file_not_found(path)
        if isinstance(node, _File):
            return FileStat(path, True, False, len(node.data), _timestamp(node.created), _timestamp(node.modified))
        return FileStat(path, False, True, 0, _timestamp(node.created), _timestamp(node.modified))

    def _list_dir(self, path: str) -> Sequence[FileEntry]:
        node = self._node(path)
        if node is None:
            raise errors.file_not_found(path)
        if isinstance(node, _File):
            raise errors.not_a_directory(path)
        return node.listing()

    def _open_reader(self, path: str) -> ByteReader:
        node = self._node(path)
        if node is None:
            raise errors.file_not_found(path)
        if isinstance(node, _Dir):
            raise errors.is_a_directory(path)
        # BytesIO over immutable bytes shares the buffer; the reader cannot alter stored data.
        return StreamReader(path, io.BytesIO(node.data), len(node.data))

    def _open_content(self, path: str, inline_limit: int) -> bytes | ByteReader:
        node = self._node(path)
        if isinstance(node, _File):
            return node.data  # already in memory: no copy, whatever the size
        return self._open_reader(path)

    def _open_writer(self, path: str, mode: WriteMode) -> ByteWriter:
        nodes = self._state.nodes
        self._check_parent(path, nodes)
        node = nodes.get(path)
        if isinstance(node, _Dir):
            raise errors.is_a_directory(path)
        if node is not None and mode == "create":
            raise errors.file_exists(path)
        return _MemoryWriter(self, path, mode)

    def _write_content(self, path: str, data: bytes, mode: WriteMode) -> None:
        with self._lock:
            edit = _Edit(self._state)
            self._check_parent(path, edit)
            old = edit.get(path)
            if isinstance(old, _Dir):
                raise errors.is_a_directory(path)
            if old is not None and mode == "create":
                raise errors.file_exists(path)
            if old is not None and mode == "append":
                data = old.data + data
            edit.put_file(path, data)
            self._state = edit.finish()

    def _ensure_parents(self, path: str) -> None:
        if isinstance(self._node(parent(path)), _Dir):
            return  # the common case, without building a FileStat
        with self._lock:
            edit = _Edit(self._state)
            for directory in ancestors(path):
                node = edit.get(directory)
                if isinstance(node, _File):
                    raise errors.not_a_directory(path)
                if node is None:
                    edit.put_dir(directory)
            self._state = edit.finish()

    def _make_dir(self, path: str) -> None:
        with self._lock:
            edit = _Edit(self._state)
            if edit.get(path) is not None:
                raise errors.file_exists(path)
            self._check_parent(path, edit)
            edit.put_dir(path)
            self._state = edit.finish()

    def _remove_file(self, path: str) -> None:
        with self._lock:
            node = self._node(path)
            if node is None:
                raise errors.file_not_found(path)
            if isinstance(node, _Dir):
                raise errors.is_a_directory(path)
            edit = _Edit(self._state)
            edit.remove(path)
            self._state = edit.finish()

    def _remove_empty_dir(self, path: str) -> None:
        with self._lock:
            node = self._node(path)
            if node is None:
                raise errors.file_not_found(path)
            if isinstance(node, _File):
                raise errors.not_a_directory(path)
            if len(node.children):
                raise errors.directory_not_empty(path)
            edit = _Edit(self._state)
            edit.remove(path)
            self._state = edit.finish()

    def _remove_tree(self, path: str) -> None:
        with self._lock:
            if self._node(path) is None:
                raise errors.file_not_found(path)
            edit = _Edit(self._state)
            for victim in reversed(self._subtree(path)):
                edit.remove(victim)
            self._state = edit.finish()

    def _graft(self, src: str, dst: str, *, keep_times: bool) -> _Edit:
        """An edit that adds a copy of the ``src`` subtree at ``dst`` (content shared, not copied)."""
        edit = _Edit(self._state)
        nodes = self._state.nodes
        for source in self._subtree(src):
            target = dst + source[len(src) :]
            node = nodes[source]
            if isinstance(node, _File):
                times = (node.created, node.modified) if keep_times else (None, None)
                edit.put_file(target, node.data, *times)
            else:
                edit.put_dir(target)
        return edit

    def _rename(self, src: str, dst: str, *, replace: bool) -> None:
        with self._lock:
            nodes = self._state.nodes
            if nodes.get(src) is None:
                raise errors.file_not_found(src)
            self._check_parent(dst, nodes)
            existing = nodes.get(dst)
            if existing is not None and not (replace and isinstance(existing, _File)):
                raise errors.file_exists(dst)
            doomed = self._subtree(src)
            edit = self._graft(src, dst, keep_times=True)
            for victim in reversed(doomed):
                edit.remove(victim)
            self._state = edit.finish()

    def _copy_file(self, src: str, dst: str) -> None:
        with self._lock:
            node = self._node(src)
            if not isinstance(node, _File):
                raise errors.file_not_found(src) if node is None else errors.is_a_directory(src)
        self._write_content(dst, node.data, "overwrite")

    def _copy_tree(self, src: str, dst: str) -> None:
        with self._lock:
            nodes = self._state.nodes
            self._check_parent(dst, nodes)
            if nodes.get(dst) is not None:
                raise errors.file_exists(dst)
            self._state = self._graft(src, dst, keep_times=False).finish()

    def _iter_files(self, base: str) -> Iterator[tuple[str, int]]:
        state = self._state  # one consistent version, whatever happens meanwhile
        if base == ROOT:
            for path, node in state.nodes.items():
                if isinstance(node, _File):
                    yield path, len(node.data)
            return
        start = state.nodes.get(base)
        if not isinstance(start, _Dir):
            return
        pending = [start]
        while pending:
            directory = pending.pop()
            for entry in directory.children.values():
                if entry.is_file:
                    yield entry.path, entry.size_bytes or 0
                else:
                    child = state.nodes[entry.path]
                    assert isinstance(child, _Dir)
                    pending.append(child)

    # --- snapshots -------------------------------------------------------------------------------------

    def _capture(self, tag: str | None) -> FilesystemSnapshot:
        state = self._state
        snapshot = FilesystemSnapshot(
            snapshot_id=uuid.uuid4(),
            created_at=datetime.now(UTC),
            backend=self.backend_name,
            root_path="/",
            tag=tag,
            parent_id=self._last_snapshot_id,
            file_count=state.file_count,
            total_bytes=state.total_bytes,
            strategy="persistent-map",
            payload=state,
        )
        self._last_snapshot_id = snapshot.snapshot_id
        return snapshot

    @staticmethod
    def _payload(snapshot: FilesystemSnapshot) -> _State:
        if not isinstance(snapshot.payload, _State):
            raise SnapshotRestoreError(
                f"Snapshot {snapshot.snapshot_id} holds no in-memory state (it was serialised); "
                "export the workspace with workspacefs.archive to carry it across processes"
            )
        return snapshot.payload

    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        state = self._payload(snapshot)
        with self._lock:
            self._state = state
            self._last_snapshot_id = snapshot.snapshot_id

    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        state = self._state if snapshot is None else self._payload(snapshot)
        return {path: node.data for path, node in state.nodes.items() if isinstance(node, _File)}

    # --- extras ------------------------------------------------------------------------------------------

    def fork(self, snapshot: FilesystemSnapshot | None = None, *, read_only: bool | None = None) -> InMemoryFilesystem:
        """An independent filesystem starting from the current state or ``snapshot``, in O(1).

        The fork and the original share unchanged content and diverge on write: a branch an
        agent can explore and throw away.
        """
        if snapshot is not None:
            self._check_compatible(snapshot)
        forked = InMemoryFilesystem(
            read_only=self._read_only if read_only is None else read_only, mount_point=self._mount_point
        )
        forked._state = self._state if snapshot is None else self._payload(snapshot)
        return forked

    def __repr__(self) -> str:
        state = self._state
        flags = ", read_only=True" if self._read_only else ""
        return f"InMemoryFilesystem(files={state.file_count}, bytes={state.total_bytes}{flags})"
