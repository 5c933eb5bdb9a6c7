"""``InMemoryFilesystem``: state in a persistent hash map, so snapshots and forks cost O(1).

Every path maps to an immutable node in an ``immutables.Map`` (a HAMT). A mutation builds a new
map that shares everything it did not touch, so a snapshot is just a reference to the current map:
its cost does not depend on how many files or bytes are stored, and a write after it copies only
the entries it changes. File content is an immutable ``bytes`` object that snapshots, forks and
copies share instead of duplicating. Each directory node keeps its children's entries, so listing
a directory never scans the whole map.
"""

from __future__ import annotations

import dataclasses
import io
import operator
import os
import threading
import time
import uuid
import weakref
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import immutables

from workspacefs import errors
from workspacefs.backends._history import _SCOPE
from workspacefs.backends._journal import MemoryJournal, RawChange
from workspacefs.backends._merging import SnapshotFile, Written
from workspacefs.backends.base import BaseFilesystem, Fingerprint, lines_window, total_lines
from workspacefs.backends.hydration import HostMount, HydrationResult, collect_mount, locate_mount
from workspacefs.capabilities import Capabilities
from workspacefs.errors import SnapshotNotFoundError, SnapshotRestoreError
from workspacefs.history import DIRECTORY, JournalEntry, current_actor
from workspacefs.paths import ROOT, ancestors, basename, parent
from workspacefs.protocol import ByteReader, ByteWriter, VersionedContent
from workspacefs.quota import Quota, Usage
from workspacefs.results import FileEntry, FileStat, FilesystemDiff, FilesystemSnapshot, WriteMode
from workspacefs.streams import StreamReader, StreamWriter, content_id_of

__all__ = ["InMemoryFilesystem"]


class _File:
    """An immutable file node; ``data`` is shared by every state that holds the same content."""

    __slots__ = ("_content_id", "_lines", "created", "data", "entry", "modified")

    def __init__(self, path: str, data: bytes, created: float, modified: float) -> None:
        self.data = data
        self.created = created
        self.modified = modified
        # small files are counted now, while the bytes are hot in the CPU cache; big ones on first read
        self._lines = (data.count(b"\n") + (data[-1] != 0x0A)) if 0 < len(data) <= 65536 else (0 if not data else -1)
        self.entry = FileEntry(path[path.rfind("/") + 1 :], path, True, False, len(data))
        self._content_id: str | None = None

    def lines(self) -> int:
        """Line count, computed once: the content never changes."""
        if self._lines < 0:
            self._lines = total_lines(self.data)
        return self._lines

    def content_id(self) -> str:
        """Content id, computed once, on first use."""
        if self._content_id is None:
            self._content_id = content_id_of(self.data)
        return self._content_id


class _Dir:
    """An immutable directory node holding its children's entries (the sorted listing is cached)."""

    __slots__ = ("_listing", "children", "created", "entry", "modified")

    def __init__(
        self,
        path: str,
        children: immutables.Map[str, FileEntry],
        created: float,
        modified: float,
        entry: FileEntry | None = None,
    ) -> None:
        self.children = children
        self.created = created
        self.modified = modified
        self.entry = entry if entry is not None else FileEntry(basename(path), path, False, True, None)
        self._listing: tuple[FileEntry, ...] | None = None

    def with_children(self, children: immutables.Map[str, FileEntry], modified: float) -> _Dir:
        """The same directory with new children (its own entry object is reused)."""
        return _Dir(self.entry.path, children, self.created, modified, self.entry)

    def listing(self) -> tuple[FileEntry, ...]:
        if self._listing is None:
            self._listing = tuple(sorted(self.children.values(), key=_BY_NAME))
        return self._listing


_Node = _File | _Dir
_BY_NAME = operator.attrgetter("name")
_EMPTY_CHILDREN: immutables.Map[str, FileEntry] = immutables.Map()


class _Log:
    """One step of a state's history: the file paths a change touched, and the step before it. ``diff`` walks
    these between two states instead of comparing every file, so its cost follows what changed."""

    __slots__ = ("depth", "parent", "paths")

    def __init__(self, parent: _Log | None, paths: tuple[str, ...]) -> None:
        # a new chain every _LOG_STEPS steps bounds what the history holds; a diff across chains compares all
        kept = parent if parent is not None and parent.depth < _LOG_STEPS else None
        self.parent: _Log | None = kept
        self.depth: int = 0 if kept is None else kept.depth + 1
        self.paths = paths


_LOG_STEPS = 65_536
"""Steps in one history chain (a few MiB of paths at most)."""


def _paths_between(older: _Log, newer: _Log, limit: int) -> set[str] | None:
    """Every path changed on the way from ``older`` to ``newer`` (in either direction), or ``None`` when they
    are not on one chain within ``limit`` steps (the caller then compares whole states)."""
    for start, stop in ((newer, older), (older, newer)):
        if start.depth - stop.depth > limit:
            continue
        touched: set[str] = set()
        step: _Log | None = start
        while step is not None and step is not stop and step.depth > stop.depth:
            touched.update(step.paths)
            step = step.parent
        if step is stop:
            return touched
    return None


class _State:
    """One immutable version of the whole filesystem (a plain slotted class: built on every write)."""

    __slots__ = ("file_count", "log", "nodes", "total_bytes")

    def __init__(self, nodes: immutables.Map[str, _Node], file_count: int, total_bytes: int, log: _Log) -> None:
        self.nodes = nodes
        self.file_count = file_count
        self.total_bytes = total_bytes
        self.log = log


def _empty_state() -> _State:
    now = time.time()
    return _State(immutables.Map({ROOT: _Dir(ROOT, _EMPTY_CHILDREN, now, now)}), 0, 0, _Log(None, ()))


class _Edit:
    """A batch of changes to a state, applied in one step by :meth:`finish`."""

    def __init__(self, state: _State) -> None:
        self.nodes = state.nodes.mutate()
        self.file_count = state.file_count
        self.total_bytes = state.total_bytes
        self.log = state.log
        self.touched: list[str] = []
        self.changes: list[RawChange] = []
        self.now = time.time()

    def get(self, path: str) -> _Node | None:
        return self.nodes.get(path)

    def _link(self, path: str, entry: FileEntry | None) -> None:
        """Add (or, with ``None``, remove) ``path`` in its parent's children."""
        above = self.nodes[parent(path)]
        assert isinstance(above, _Dir)
        name = basename(path)
        children = above.children.delete(name) if entry is None else above.children.set(name, entry)
        self.nodes[above.entry.path] = above.with_children(children, self.now)

    def put_file(self, path: str, data: bytes, created: float | None = None, modified: float | None = None) -> None:
        old = self.nodes.get(path)
        if isinstance(old, _File):
            self.total_bytes -= len(old.data)
            created = old.created if created is None else created
        else:
            self.file_count += 1
        node = _File(path, data, self.now if created is None else created, self.now if modified is None else modified)
        self.changes.append(RawChange(path, old, node))
        self.touched.append(path)
        self.total_bytes += len(data)
        self.nodes[path] = node
        self._link(path, node.entry)

    def put_dir(self, path: str, children: immutables.Map[str, FileEntry] = _EMPTY_CHILDREN) -> None:
        node = _Dir(path, children, self.now, self.now)
        self.changes.append(RawChange(path, self.nodes.get(path), node))
        self.nodes[path] = node
        self._link(path, node.entry)

    def remove(self, path: str) -> None:
        """Remove one node (a directory must already be empty)."""
        node = self.nodes[path]
        self.changes.append(RawChange(path, node, None))
        if isinstance(node, _File):
            self.file_count -= 1
            self.total_bytes -= len(node.data)
            self.touched.append(path)
        del self.nodes[path]
        self._link(path, None)

    def finish(self) -> _State:
        log = _Log(self.log, tuple(self.touched)) if self.touched else self.log
        return _State(self.nodes.finish(), self.file_count, self.total_bytes, log)


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
        self._fs._store(self.path, data, self._mode)

    def _discard(self) -> None:
        self._buffer = io.BytesIO()


def _describe(node: _Node | None) -> tuple[str | None, int]:
    """A journaled node as ``(content id or DIRECTORY or None, size)``."""
    if node is None:
        return None, 0
    if isinstance(node, _File):
        return node.content_id(), len(node.data)
    return DIRECTORY, 0


def _state_changes(old: _State, new: _State) -> list[RawChange]:
    """What replacing state ``old`` by ``new`` changed: directories made first, files, then directories
    removed deepest first (so an undo, which runs backwards, makes parents before children)."""
    touched = _paths_between(old.log, new.log, max(1024, old.file_count + new.file_count))
    if touched is None:
        touched = {p for p, n in old.nodes.items() if isinstance(n, _File)} | {
            p for p, n in new.nodes.items() if isinstance(n, _File)
        }
    files = [
        RawChange(path, old.nodes.get(path), new.nodes.get(path))
        for path in sorted(touched)
        if old.nodes.get(path) is not new.nodes.get(path)
    ]
    old_dirs = {p for p, n in old.nodes.items() if isinstance(n, _Dir) and p != ROOT} if files else set()
    new_dirs = {p for p, n in new.nodes.items() if isinstance(n, _Dir) and p != ROOT} if files else set()
    made = [RawChange(p, old.nodes.get(p), new.nodes[p]) for p in sorted(new_dirs - old_dirs)]
    gone = [RawChange(p, old.nodes[p], new.nodes.get(p)) for p in sorted(old_dirs - new_dirs, reverse=True)]
    return [*made, *files, *gone]


def _subtree_of(edit: _Edit, path: str) -> list[str]:
    """``path`` and every node below it in an edit, parents before children."""
    found = [path]
    pending = [path]
    while pending:
        node = edit.get(pending.pop())
        if isinstance(node, _Dir):
            for entry in node.children.values():
                found.append(entry.path)
                pending.append(entry.path)
    return found


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class InMemoryFilesystem(BaseFilesystem):
    """A filesystem held in process memory, with O(1) snapshots and forks.

    Thread-safe: each mutation swaps in a new immutable state under a lock.
    """

    backend_name = "memory"
    declared_capabilities = Capabilities(
        cheap_snapshots=True, persistent=False, fork=True, merge=True, watch=True, history=True
    )

    usage_is_live = True  # the state carries its file count and bytes

    def __init__(
        self,
        *,
        read_only: bool = False,
        mount_point: str | None = None,
        quota: Quota | None = None,
        history: bool = True,
    ) -> None:
        """``history`` journals every change in process (``history()``, ``undo()``, ``watch()``); the journal
        holds the nodes a change replaced (shared with the states, never copied) until retention drops it."""
        super().__init__(read_only=read_only, mount_point=mount_point, quota=quota)
        self._set_state(_empty_state())
        self._lock = threading.RLock()
        self._changes = MemoryJournal(_describe) if history else None
        # A snapshot carries its own state, so the catalogue holds it weakly: it lists the snapshots some
        # caller still holds, and never keeps an old state alive by itself.
        self._kept: weakref.WeakValueDictionary[uuid.UUID, FilesystemSnapshot] = weakref.WeakValueDictionary()

    def _usage(self) -> Usage:
        with self._lock:
            return Usage(self._total_bytes, self._file_count)

    def _quota_hold(self) -> threading.RLock:
        return self._lock  # a quota'd change is checked and made under it: no other writer comes between

    # --- helpers ---------------------------------------------------------------------------------

    def _capture_state(self) -> _State:
        """The current version as one value (what snapshots and forks hold)."""
        with self._lock:
            return _State(self._nodes, self._file_count, self._total_bytes, self._log)

    def _set_state(self, state: _State) -> None:
        """Make ``state`` current (the live version is kept as three attributes: writes are hot)."""
        self._nodes = state.nodes
        self._file_count = state.file_count
        self._total_bytes = state.total_bytes
        self._log = state.log

    def _node(self, path: str) -> _Node | None:
        return self._nodes.get(path)

    # --- history ---------------------------------------------------------------------------------------

    def _journal(self) -> MemoryJournal | None:
        return self._changes

    def _note(self, operation: str, changes: Sequence[Any]) -> None:
        """As every backend's, calling the journal's ``record`` directly when no operation is in progress: this
        runs on every write, where each Python call is a measurable share of the journal's cost."""
        if _SCOPE.get():
            super()._note(operation, changes)
        elif changes and self._changes is not None:
            self._changes.record(operation, changes, current_actor())

    @property
    def capabilities(self) -> Capabilities:
        """As declared, less ``history``/``watch`` without a journal (``history=False``)."""
        if self._changes is not None:
            return self.declared_capabilities
        return dataclasses.replace(self.declared_capabilities, history=False, watch=False)

    def _history_content(self, entry: JournalEntry, index: int) -> bytes:
        assert self._changes is not None
        node = self._changes.before_object(entry.entry_id, index)
        if not isinstance(node, _File):
            raise errors.file_not_found(entry.changes[index].path)
        return node.data

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
        """``path`` and every path below it, parents before children (the one walk, plus ``path``)."""
        return [path, *(entry.path for entry in self._walk(path))]

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

    def _line_window(self, path: str, offset: int, window: int) -> tuple[bytes | None, int]:
        node = self._nodes.get(path)
        if type(node) is not _File:
            return super()._line_window(path, offset, window)  # raises the right error
        lines = node._lines if node._lines >= 0 else node.lines()
        if offset == 0 and window >= lines:
            return node.data, lines
        return lines_window(node.data, offset, window), lines

    def _open_writer(self, path: str, mode: WriteMode) -> ByteWriter:
        nodes = self._nodes
        self._check_parent(path, nodes)
        node = nodes.get(path)
        if isinstance(node, _Dir):
            raise errors.is_a_directory(path)
        if node is not None and mode == "create":
            raise errors.file_exists(path)
        return _MemoryWriter(self, path, mode)

    def _store(self, path: str, data: bytes, mode: WriteMode) -> None:
        """Commit a whole file in one state swap, checking everything again under the lock.

        The hot path of every write, so it touches the map directly rather than through ``_Edit``.
        """
        cut = path.rfind("/")
        above_path = path[:cut] if cut >= 0 else ROOT
        with self._lock:
            nodes = self._nodes
            above = nodes.get(above_path)
            if type(above) is not _Dir:
                raise self._missing_parent(path, nodes)
            old = nodes.get(path)
            now = time.time()
            if old is None:
                created, replaced = now, 0
            elif isinstance(old, _Dir):
                raise errors.is_a_directory(path)
            elif mode == "create":
                raise errors.file_exists(path)
            else:
                if mode == "append":
                    data = old.data + data
                created, replaced = old.created, len(old.data)
            node = _File(path, data, created, now)
            entry = node.entry
            mutation = nodes.mutate()
            mutation[path] = node
            mutation[above_path] = above.with_children(above.children.set(entry.name, entry), now)
            self._nodes = mutation.finish()
            self._log = _Log(self._log, (path,))
            self._file_count += old is None
            self._total_bytes += len(data) - replaced
            journal = self._changes
            if journal is not None and not _SCOPE.get():  # the commonest entry, recorded without a call between
                journal.record_change("write", path, old, node, current_actor(), stamp=now)
            else:
                self._note("write", ((path, old, node, None),))  # a plain tuple: a RawChange costs 10x to make

    _write_content = _store

    def _ensure_parents(self, path: str) -> None:
        if isinstance(self._node(parent(path)), _Dir):
            return  # the common case, without building a FileStat
        with self._lock:
            edit = _Edit(self._capture_state())
            for directory in ancestors(path):
                node = edit.get(directory)
                if isinstance(node, _File):
                    raise errors.not_a_directory(path)
                if node is None:
                    edit.put_dir(directory)
            self._set_state(edit.finish())
            self._note("mkdir", edit.changes)

    def _make_dir(self, path: str) -> None:
        with self._lock:
            edit = _Edit(self._capture_state())
            if edit.get(path) is not None:
                raise errors.file_exists(path)
            self._check_parent(path, edit)
            edit.put_dir(path)
            self._set_state(edit.finish())
            self._note("mkdir", edit.changes)

    def _remove_file(self, path: str) -> None:
        with self._lock:
            node = self._node(path)
            if node is None:
                raise errors.file_not_found(path)
            if isinstance(node, _Dir):
                raise errors.is_a_directory(path)
            edit = _Edit(self._capture_state())
            edit.remove(path)
            self._set_state(edit.finish())
            self._note("delete", edit.changes)

    def _remove_empty_dir(self, path: str) -> None:
        with self._lock:
            node = self._node(path)
            if node is None:
                raise errors.file_not_found(path)
            if isinstance(node, _File):
                raise errors.not_a_directory(path)
            if len(node.children):
                raise errors.DirectoryNotEmptyError(path)
            edit = _Edit(self._capture_state())
            edit.remove(path)
            self._set_state(edit.finish())
            self._note("delete", edit.changes)

    def _remove_tree(self, path: str) -> None:
        with self._lock:
            if self._node(path) is None:
                raise errors.file_not_found(path)
            edit = _Edit(self._capture_state())
            for victim in reversed(self._subtree(path)):
                edit.remove(victim)
            self._set_state(edit.finish())
            self._note("delete", edit.changes)

    def _graft(self, src: str, dst: str, *, keep_times: bool, edit: _Edit | None = None) -> _Edit:
        """An edit (``edit``, or a new one) that adds a copy of the ``src`` subtree at ``dst`` (content shared)."""
        edit = _Edit(self._capture_state()) if edit is None else edit
        nodes = self._nodes
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
            nodes = self._nodes
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
            self._set_state(edit.finish())
            self._note("move", (RawChange(dst, existing, self._nodes[dst], src),))

    def _without_tree(self, path: str) -> _Edit | None:
        """An edit that removes directory ``path``'s tree (``None``: no directory there now)."""
        if not isinstance(self._nodes.get(path), _Dir):
            return None
        edit = _Edit(self._capture_state())
        for victim in reversed(self._subtree(path)):
            edit.remove(victim)
        return edit

    def _move_over_tree(self, src: str, dst: str) -> None:
        """The old tree's removal and the move in one state swap: no reader or writer sees ``dst`` missing."""
        with self._lock:
            if self._nodes.get(src) is None:
                raise errors.file_not_found(src)
            edit = self._without_tree(dst)
            if edit is None:  # removed or replaced by a file since the check: a plain move, or its refusal
                self._rename(src, dst, replace=False)
                return
            removed = [*edit.changes]
            doomed = self._subtree(src)
            self._graft(src, dst, keep_times=True, edit=edit)
            for victim in reversed(doomed):
                edit.remove(victim)
            self._set_state(edit.finish())
            self._note("move", (*removed, RawChange(dst, None, self._nodes[dst], src)))

    def _copy_over_tree(self, src: str, dst: str) -> None:
        """The old tree's removal and the copy in one state swap."""
        with self._lock:
            if self._nodes.get(src) is None:
                raise errors.file_not_found(src)
            edit = self._without_tree(dst)
            if edit is None:
                self._copy_tree(src, dst)
                return
            self._graft(src, dst, keep_times=False, edit=edit)
            self._set_state(edit.finish())
            self._note("copy", edit.changes)

    def _copy_file(self, src: str, dst: str) -> None:
        with self._lock:
            node = self._node(src)
            if not isinstance(node, _File):
                raise errors.file_not_found(src) if node is None else errors.is_a_directory(src)
        self._store(dst, node.data, "overwrite")

    def _copy_tree(self, src: str, dst: str) -> None:
        with self._lock:
            nodes = self._nodes
            self._check_parent(dst, nodes)
            if nodes.get(dst) is not None:
                raise errors.file_exists(dst)
            edit = self._graft(src, dst, keep_times=False)
            self._set_state(edit.finish())
            self._note("copy", edit.changes)

    def _walk(self, base: str) -> Iterator[FileEntry]:
        nodes = self._nodes  # one consistent version, whatever happens meanwhile
        start = nodes.get(base)
        if not isinstance(start, _Dir):
            return
        pending = [start]
        while pending:
            for entry in pending.pop().children.values():
                yield entry
                if entry.is_directory:
                    child = nodes[entry.path]
                    assert isinstance(child, _Dir)
                    pending.append(child)

    # --- conditional writes -------------------------------------------------------------------------

    def _compare_lock(self, path: str) -> threading.RLock:
        return self._lock  # every commit swaps the state under it: check and commit are one step

    def _file(self, path: str) -> _File:
        node = self._node(path)
        if node is None:
            raise errors.file_not_found(path)
        if isinstance(node, _Dir):
            raise errors.is_a_directory(path)
        return node

    def _content_id(self, path: str) -> str:
        return self._file(path).content_id()

    def _open_versioned(self, path: str) -> VersionedContent:
        node = self._file(path)
        info = FileStat(path, True, False, len(node.data), _timestamp(node.created), _timestamp(node.modified))
        return VersionedContent(info, node.content_id(), StreamReader(path, io.BytesIO(node.data), len(node.data)))

    # --- snapshots -------------------------------------------------------------------------------------

    def _capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        state = self._capture_state()
        snapshot = self._completed(
            draft,
            file_count=state.file_count,
            total_bytes=state.total_bytes,
            strategy="persistent-map",
            payload=state,
        )
        with self._lock:
            self._kept[snapshot.snapshot_id] = snapshot
        return snapshot

    def _kept_snapshots(self) -> Sequence[FilesystemSnapshot]:
        with self._lock:
            return sorted(self._kept.values(), key=lambda snapshot: snapshot.created_at)

    def _drop_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        with self._lock:
            if self._kept.pop(snapshot.snapshot_id, None) is None:
                raise SnapshotNotFoundError(f"No snapshot with id {snapshot.snapshot_id}")

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
            old = self._capture_state()
            self._set_state(state)
        self._note("restore", _state_changes(old, state))

    def _diff(self, base: FilesystemSnapshot, target: FilesystemSnapshot | None) -> FilesystemDiff:
        """Compare only the paths changed between the two states (their shared history says which); states
        on different histories, or far apart, are compared whole."""
        before = self._payload(base)
        after = self._capture_state() if target is None else self._payload(target)
        touched = _paths_between(before.log, after.log, max(1024, after.file_count + before.file_count))
        if touched is None:
            return super()._diff(base, target)
        added: list[str] = []
        modified: list[str] = []
        deleted: list[str] = []
        for path in touched:
            old, new = before.nodes.get(path), after.nodes.get(path)
            if not isinstance(new, _File):
                if isinstance(old, _File):
                    deleted.append(path)
            elif not isinstance(old, _File):
                added.append(path)
            elif old.data is not new.data and old.data != new.data:
                modified.append(path)
        unchanged = after.file_count - len(added) - len(modified)
        return FilesystemDiff(tuple(sorted(added)), tuple(sorted(modified)), tuple(sorted(deleted)), unchanged)

    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        state = self._capture_state() if snapshot is None else self._payload(snapshot)
        return {path: node.data for path, node in state.nodes.items() if isinstance(node, _File)}

    # --- merge ------------------------------------------------------------------------------------------

    def _snapshot_content(self, snapshot: FilesystemSnapshot, path: str) -> bytes | ByteReader:
        node = self._payload(snapshot).nodes.get(path)
        if not isinstance(node, _File):
            raise errors.file_not_found(path)
        return node.data

    def _capture_merged(
        self,
        draft: FilesystemSnapshot,
        start: FilesystemSnapshot,
        writes: Mapping[str, Written],
        deletes: Collection[str],
        *,
        read_only: Mapping[str, bool],
    ) -> FilesystemSnapshot:
        """A new state from ``start``'s: O(changed paths), content shared with the snapshots it came from (no
        per-file flags here: ``read_only`` is empty)."""
        edit = _Edit(self._payload(start))
        for path in sorted(deletes, reverse=True):  # children before their parents
            if edit.get(path) is not None:
                for victim in reversed(_subtree_of(edit, path)):
                    edit.remove(victim)
        for path in sorted(writes):
            for directory in ancestors(path):
                if isinstance(edit.get(directory), _File):
                    edit.remove(directory)
                if edit.get(directory) is None:
                    edit.put_dir(directory)
            if isinstance(edit.get(path), _Dir):
                for victim in reversed(_subtree_of(edit, path)):
                    edit.remove(victim)
            wanted = writes[path]
            edit.put_file(path, wanted if isinstance(wanted, bytes) else self._merged_bytes(wanted))
        state = edit.finish()
        snapshot = self._completed(
            draft, file_count=state.file_count, total_bytes=state.total_bytes, strategy="persistent-map", payload=state
        )
        with self._lock:
            self._kept[snapshot.snapshot_id] = snapshot
        return snapshot

    def _merged_bytes(self, source: SnapshotFile) -> bytes:
        data = self._snapshot_content(source.snapshot, source.path)
        assert isinstance(data, bytes)
        return data

    # --- extras ------------------------------------------------------------------------------------------

    def fork(self, snapshot: FilesystemSnapshot | None = None, *, read_only: bool | None = None) -> InMemoryFilesystem:
        """An independent filesystem starting from the current state or ``snapshot``, in O(1).

        The fork and the original share unchanged content and diverge on write: a branch an
        agent can explore and throw away.
        """
        if snapshot is not None:
            self._check_compatible(snapshot)
        forked = InMemoryFilesystem(
            read_only=self._read_only if read_only is None else read_only,
            mount_point=self._mount_point,
            history=self._changes is not None,  # a fork's journal starts empty: its history is its own
        )
        forked._set_state(self._capture_state() if snapshot is None else self._payload(snapshot))
        return forked

    def hydrate_from_host(
        self, mount: HostMount, *, allowed_roots: Sequence[str | os.PathLike[str]]
    ) -> HydrationResult:
        """Copy the files of a host directory into this filesystem, all or nothing.

        The mount must lie inside one of ``allowed_roots`` (by whole path segments), and it is read
        through the same race-proof resolver as ``HostFilesystem``: no symlink is followed, in the
        mount's own path or below it, and special files are passed over.

        Raises:
            PermissionError: the mount is outside every allowed root, or this filesystem is read-only.
            FileNotFoundError: the mount does not exist.
            ValueError: more than ``max_bytes``.
            QuotaExceededError, FileTooLargeError: the files would take the workspace past its quota, as the
                same files written one by one would (nothing is loaded then).
        """
        self._writable(mount.mount_path or mount.host_path)
        root, relative = locate_mount(mount.host_path, allowed_roots)
        target_base = self._norm(mount.mount_path if mount.mount_path is not None else relative)
        loaded, total, skipped = collect_mount(mount, root, relative, target_base, self._norm)
        with self._quota_step() as step, self._lock:  # the step holds the state lock too: check and load are one
            state = self._capture_state()
            edit = _Edit(state)
            for path in sorted(loaded):
                for directory in [*ancestors(path)]:
                    node = edit.get(directory)
                    if isinstance(node, _File):
                        raise errors.not_a_directory(path)
                    if node is None:
                        edit.put_dir(directory)
                if isinstance(edit.get(path), _Dir):
                    raise errors.is_a_directory(path)
                edit.put_file(path, loaded[path])
            largest = max((len(data) for data in loaded.values()), default=0)
            grew = Usage(edit.total_bytes - state.total_bytes, edit.file_count - state.file_count)
            step.admit(target_base, bytes_delta=grew.bytes, files_delta=grew.files, largest=largest)
            self._set_state(edit.finish())
        return HydrationResult(len(loaded), total, skipped)

    def __repr__(self) -> str:
        flags = ", read_only=True" if self._read_only else ""
        return f"InMemoryFilesystem(files={self._file_count}, bytes={self._total_bytes}{flags})"
