"""How a host directory journals its changes: observe each path a primitive touches before and after.

Before a change, the path's kind, content id and size are read, and a file about to be replaced or removed
is copied into the journal's ``objects/`` (what an undo writes back); after it, the path is read again
(a whole write instead reads what it replaces through the directory descriptor it resolved, and computes the
new content id from the bytes written, never read back). A difference is a
:class:`~workspacefs.history.Change`, noted into the operation in progress or recorded as an entry.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from workspacefs.backends._history import in_operation
from workspacefs.backends.base import BaseFilesystem
from workspacefs.backends.host._commands import CommandBudget, CommandRecorder, command_detail
from workspacefs.backends.host._journal import HostJournal, Stamp, stamp_of
from workspacefs.backends.host._tree import READ_FLAGS, HostTree, content_id_of_fd, refuse_unless_file
from workspacefs.history import DIRECTORY, NOT_KEPT, Change, JournalEntry, current_actor
from workspacefs.protocol import ByteReader, ByteWriter
from workspacefs.results import FilesystemSnapshot
from workspacefs.streams import ContentHasher, StreamWriter

__all__ = ["HostHistoryMixin", "Seen"]

Seen = tuple[str | None, int]
"""What a path held: ``(content id, DIRECTORY or None; size)``."""
_REMEMBERED_FROM = 16 * 1024
"""A journaled whole write of this many bytes or more is stamped and remembered (see ``_written``): its stamp
(a ``utime`` and an ``fstat``, 2 to 4 µs) costs less than reading and hashing it again when it is replaced (10 µs
at 16 KiB); below, it costs more than it saves."""
_WRITTEN_KEPT = 4096
"""How many paths' last writes a filesystem remembers (forgotten all at once past that)."""


class HostHistoryMixin(BaseFilesystem):
    """The journaling half of ``HostFilesystem`` (which sets ``_tree`` and ``_changes``)."""

    _tree: HostTree
    _changes: HostJournal | None
    _commands: CommandRecorder | None = None
    _concurrent: tuple[dict[str, str | None], ...] = ()
    """One map per command running now: what workspacefs itself changed meanwhile (path -> what it left)."""
    _commands_running: int = 0
    """Commands under way whose entry is not written yet (a watcher of outside changes waits for it)."""
    _command_lock: threading.Lock
    _written: dict[str, tuple[Stamp, str]]
    """Per path, what this object last wrote there: the new file's ``Stamp`` once named, and its content id. A
    whole write over a file whose ``lstat`` still shows that stamp reads nothing (its content is kept already);
    anything that changed the file since (another process, a command, an edit in place) changed the stamp."""

    def _journal(self) -> HostJournal | None:
        return self._changes

    def _note(self, operation: str, changes: Sequence[Any]) -> None:
        for seen in self._concurrent:  # a command runs: its entry must not record this change a second time
            for change in changes:
                seen[change.path] = change.after
                if change.from_path is not None:
                    seen[change.from_path] = None
        super()._note(operation, changes)

    @contextlib.contextmanager
    def _journaling_command(self, command: str | Iterable[str], budget: CommandBudget) -> Iterator[None]:
        """Journal what the command run inside the block changes in the tree as one ``exec`` entry (see
        ``_commands.py``): also when it fails or times out, since its changes stay."""
        journal = self._changes
        if journal is None:
            yield
            return
        seen: dict[str, str | None] = {}
        with self._command_lock:
            if self._commands is None:
                self._commands = CommandRecorder(budget)
            recorder = self._commands
            recorder.budget = budget
            self._commands_running += 1
        try:
            with self._journaled("exec", detail=command_detail(command)):
                with self._command_lock:
                    self._concurrent = (*self._concurrent, seen)
                try:
                    taken = recorder.before(self._tree, journal)
                except BaseException:
                    self._forget_command(seen)
                    raise
                try:
                    yield
                finally:
                    self._forget_command(seen)
                    observe = functools.partial(self._observe, keep=False)
                    self._note("exec", recorder.changes(self._tree, journal, taken, observe, seen))
        finally:
            with self._command_lock:
                self._commands_running -= 1

    def _forget_command(self, seen: dict[str, str | None]) -> None:
        with self._command_lock:
            self._concurrent = tuple(each for each in self._concurrent if each is not seen)

    def _observe(self, path: str, *, keep: bool, replaced: bool = False) -> Seen:
        """What ``path`` holds now; with ``keep``, a file's content is copied into the journal first. One
        resolution of the path: a directory answers the open with ``IsADirectoryError``. ``replaced``: a whole
        write is about to replace it, so a file this process may not read is ``NOT_KEPT`` (see ``_not_kept``)."""
        try:
            fd, info = self._tree.open_regular(path)
        except IsADirectoryError:
            return DIRECTORY, 0
        except OSError as exc:  # missing, or a symlink or special file (no file of the workspace): the change decides
            return self._not_kept(path) if replaced and exc.errno == errno.EACCES else (None, 0)
        try:
            if keep and self._changes is not None:
                return self._changes.keep(fd, info.st_size), info.st_size
            return content_id_of_fd(fd, info.st_size), info.st_size
        finally:
            os.close(fd)

    def _replaced_at(self, dir_fd: int, name: str, path: str) -> tuple[os.stat_result | None, Seen]:
        """The ``lstat`` of entry ``name`` of ``dir_fd`` (which a whole write resolved race-free) that the write is
        about to replace, and what it holds, kept for undo: one ``openat(O_NOFOLLOW)`` beside it serves both the
        write's check (a directory, link or special file is refused as ``HostTree.check_target`` refuses it) and
        the journal, no second resolution from the root. ``(None, (None, 0))`` if nothing is there. A file this
        object wrote, unchanged since (see ``_written``) and whose content is kept, costs one ``lstat`` instead."""
        written = self._written.get(path)
        if written is not None:
            known = self._known(dir_fd, name, path, written)
            if known is not None:
                return known
            written = self._written.get(path)  # still there if the file is unchanged but its content not kept
        try:
            fd = os.open(name, READ_FLAGS | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            return None, (None, 0)
        except OSError:  # a link (ELOOP), a socket (ENXIO), a file we may not read: the check says which
            info = self._tree.check_target(dir_fd, name, path, "overwrite")
            return info, ((None, 0) if info is None else (NOT_KEPT, info.st_size))  # unreadable: nothing to keep
        try:
            info = os.fstat(fd)
            refuse_unless_file(info, path)
            assert self._changes is not None
            return info, (self._changes.keep(fd, info.st_size, written), info.st_size)
        finally:
            os.close(fd)

    def _known(
        self, dir_fd: int, name: str, path: str, written: tuple[Stamp, str]
    ) -> tuple[os.stat_result, Seen] | None:
        """What ``_replaced_at`` returns, from what this object wrote at ``path``, if the entry is still that file
        (same stamp: a regular file, unchanged) and its content is kept; else ``None`` (and the entry is forgotten
        unless only the content is missing: the caller copies it then, without hashing it)."""
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            info = None
        if info is None or stamp_of(info) != written[0]:
            self._written.pop(path, None)
            return None
        assert self._changes is not None
        return (info, (written[1], info.st_size)) if self._changes.is_kept(written[1]) else None

    def _remembering(
        self, path: str, size: int, content_id: str | None, fill: Callable[[int], None]
    ) -> tuple[Callable[[int], None], Callable[[int], None] | None]:
        """The ``fill`` and ``settled`` of a whole write of ``size`` bytes of content ``content_id`` at ``path``. A
        journaled write of ``_REMEMBERED_FROM`` bytes or more stamps its file with a modification time of this
        process's clock, to the nanosecond (a write of another process, even in the same clock tick, stamps the
        kernel's time instead), and is remembered once named, if the file still shows that stamp."""
        if content_id is None or size < _REMEMBERED_FROM:
            if self._written:
                self._written.pop(path, None)  # what this object wrote there before is replaced
            return fill, None
        stamp = time.time_ns()
        refused: list[bool] = []

        def stamped(fd: int) -> None:
            fill(fd)
            try:
                os.utime(fd, ns=(stamp, stamp))
            except OSError:  # a filesystem that refuses us file times: the write is not remembered
                refused.append(True)

        def settled(fd: int) -> None:
            info = os.fstat(fd)
            if not refused and info.st_mtime_ns == stamp and info.st_size == size:  # else changed by someone else
                self._remember_write(path, info, content_id)

        return stamped, settled

    def _remember_write(self, path: str, info: os.stat_result, content_id: str) -> None:
        """``path`` now holds the file this object just wrote, with content ``content_id`` (see ``_written``)."""
        written = self._written
        if len(written) >= _WRITTEN_KEPT:
            written.clear()
        written[path] = (stamp_of(info), content_id)

    def _not_kept(self, path: str) -> Seen:
        """What a file this process may not read held, for the journal: ``NOT_KEPT`` (undo refuses, where
        ``None`` would say the file was made, and undo would delete it); ``(None, 0)`` if no file is there."""
        try:
            info = self._tree.resolver.fstat_path(path)
        except OSError:
            return None, 0
        return (NOT_KEPT, info.st_size) if stat.S_ISREG(info.st_mode) else (None, 0)

    @contextlib.contextmanager
    def _recording(
        self, operation: str, path: str, *, after: Seen | None = None, from_path: str | None = None
    ) -> Iterator[None]:
        """Journal what the block changes at ``path`` (``after``: what it will hold, when known)."""
        if self._changes is None:
            yield
            return
        before = self._observe(path, keep=True)
        yield
        now = after if after is not None else self._observe(path, keep=False)
        if now != before or from_path is not None:
            self._note(operation, [Change(path, before[0], now[0], before[1], now[1], from_path)])

    def _note_write(self, path: str, before: Seen, after: str, size: int) -> None:
        """Journal a whole write that replaced ``before`` with content ``after`` of ``size`` bytes: as ``_note``,
        straight to the journal's row when no operation or command is in progress (most writes)."""
        journal = self._changes
        if journal is None or (before[0] == after and before[1] == size):
            return
        if self._concurrent or in_operation():
            self._note("write", [Change(path, before[0], after, before[1], size)])
            return
        journal.note_write(path, before, after, size, current_actor())

    def _tree_before(self, path: str) -> list[Change]:
        """A subtree about to go, children before their directory, its files kept for undo."""
        changes = [Change(path, DIRECTORY, None)]
        for entry in self._walk(path):
            if entry.is_directory:
                changes.append(Change(entry.path, DIRECTORY, None))
            else:
                seen = self._observe(entry.path, keep=True)
                if seen[0] is not None:
                    changes.append(Change(entry.path, seen[0], None, seen[1], 0))
        changes.reverse()
        return changes

    def _journaled_writer(self, inner: ByteWriter, path: str, before: Seen | None) -> ByteWriter:
        """``inner`` (an atomic or append writer), journaled when it commits."""
        if self._changes is None:
            return inner
        return _JournaledWriter(self, path, inner, before)

    def _history_content(self, entry: JournalEntry, index: int) -> ByteReader:
        change = entry.changes[index]
        assert self._changes is not None
        return self._changes.content(str(change.before), change.path)

    def _check_kept(self, entry: JournalEntry) -> None:
        """Every file the entry replaced is still in ``objects/`` (undo checks each target before it changes
        anything, so a kept file removed since fails the undo whole, not half-way); each is touched, so a
        collection running now leaves it."""
        assert self._changes is not None
        for change in entry.changes:
            if change.before not in (None, DIRECTORY, NOT_KEPT) and not self._changes.hold(str(change.before)):
                raise FileNotFoundError(2, "The content this entry replaced is no longer kept", change.path)

    def _journal_restore(self, snapshot: FilesystemSnapshot) -> tuple[list[str], dict[str, Seen]]:
        """Before a restore: the files it will change, each kept for undo."""
        if self._changes is None:
            return [], {}
        diff = self._diff(snapshot, None)
        paths = sorted({*diff.added, *diff.modified, *diff.deleted})
        return paths, {p: self._observe(p, keep=True) for p in paths}

    def _journal_restored(self, paths: Sequence[str], before: dict[str, Seen]) -> None:
        """After a restore: note what changed."""
        changes = []
        for path in paths:
            now = self._observe(path, keep=False)
            if now != before[path]:
                changes.append(Change(path, before[path][0], now[0], before[path][1], now[1]))
        self._note("restore", changes)


class _JournaledWriter(StreamWriter):
    """Streams into the backend's own writer; its commit observes the path around the inner commit. A whole
    write (no ``before`` given) hashes its bytes as they pass, so what it leaves is never read back."""

    __slots__ = ("_before", "_fs", "_hasher", "_inner")

    def __init__(self, fs: HostHistoryMixin, path: str, inner: ByteWriter, before: Seen | None) -> None:
        super().__init__(path)
        self._fs = fs
        self._inner = inner
        self._before = before
        self._hasher = ContentHasher() if before is None else None

    def _write_chunk(self, data: bytes) -> None:
        self._inner.write(data)
        if self._hasher is not None:
            self._hasher.update(data)

    def _commit(self) -> None:
        before = self._before if self._before is not None else self._fs._observe(self.path, keep=True, replaced=True)
        self._inner.close()
        if self._hasher is not None:
            self._fs._note_write(self.path, before, self._hasher.content_id(), self.bytes_written)
            return
        now = self._fs._observe(self.path, keep=False)
        if now != before:
            self._fs._note("write", [Change(self.path, before[0], now[0], before[1], now[1])])

    def _discard(self) -> None:
        self._inner.abort()
