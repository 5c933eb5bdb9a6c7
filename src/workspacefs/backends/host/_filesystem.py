"""``HostFilesystem``: a sandboxed host directory that a hostile model cannot escape.

Security: every path is validated lexically by ``paths.py`` and then resolved from a descriptor of
the root with symlinks refused in every component (``openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)``,
or a per-component ``O_NOFOLLOW`` walk), and each operation acts on the descriptor it resolved —
never on the name a second time. So a ``/allowed-evil`` sibling, a symlink to the outside, or a
directory swapped for a symlink mid-operation cannot lead out of the root. Symlinks are never
followed: listings skip them, touching one raises ``PermissionError``, ``delete`` removes the link.
FIFOs, sockets and devices are refused without blocking. Messages never name host paths.

Writes are atomic: a temporary file in the target's directory, ``fsync``, then ``rename`` (or
``link`` for ``mode="create"``, which cannot replace a file that appeared meanwhile). The temporary file
is anonymous (``O_TMPFILE``) where the kernel allows, so a killed writer leaves nothing in the workspace;
elsewhere its name records its writer, and the next open removes the names of dead writers (``_temps.py``).
A file moved over another is linked to such a name and exchanged with the target, so a killed move leaves each
name its old content or the moved file (``_tree.move_over``); a directory moved or copied over another waits in a
hidden directory beside it and is exchanged with it, so the target's name holds its whole old tree or the whole
new one, and the next open finishes what a killed mover left hidden (``_replace.py``, ``_trash.py``). Likewise a
directory copied to a new name is built hidden and renamed in place, and a tree deleted is first renamed into
hiding (``_remove.py``): a kill leaves each whole or gone, never a part.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import stat
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import ClassVar

from workspacefs import errors
from workspacefs._hostio import (
    DIR_FLAGS,
    HostResolver,
    directory_identity,
    is_listable_name,
    parent_and_name,
    renameat_noreplace,
)
from workspacefs.backends._core import too_big
from workspacefs.backends._merging import Written
from workspacefs.backends.base import Fingerprint
from workspacefs.backends.host._history import HostHistoryMixin, Seen
from workspacefs.backends.host._journal import HostJournal
from workspacefs.backends.host._merged import capture_merged, snapshot_content
from workspacefs.backends.host._remove import remove_tree
from workspacefs.backends.host._replace import exchange_over, make_trash, move_tree_over, remove_hidden
from workspacefs.backends.host._restoring import RestoreRecord, Unfinished
from workspacefs.backends.host._ripgrep import Ripgrep
from workspacefs.backends.host._snapshots import HostSnapshots, SnapshotStrategy
from workspacefs.backends.host._temps import ReapReport, WriterRegistry, registry_dir, root_key
from workspacefs.backends.host._tree import (
    AppendWriter,
    ConditionalHostWriter,
    HostTree,
    HostWriter,
    content_id_of_fd,
    copy_range,
    fail,
    lookup_fail,
    move_over,
    read_fd,
    stat_result,
    write_fd,
)
from workspacefs.backends.host._watch import OutsideWatcher, can_watch_outside
from workspacefs.capabilities import Capabilities
from workspacefs.errors import SpecialFileError, name_caller_path
from workspacefs.history import DIRECTORY, Change
from workspacefs.paths import MAX_CONVENIENCE_BYTES, ROOT, join
from workspacefs.protocol import ByteReader, BytesLike, ByteWriter, VersionedContent
from workspacefs.quota import Quota
from workspacefs.results import FileEntry, FileStat, FilesystemSnapshot, WriteMode, WriteResult
from workspacefs.search import GrepPattern
from workspacefs.snapshots import SnapshotRetentionPolicy
from workspacefs.streams import StreamReader, content_id_of

__all__ = ["HostFilesystem"]

_log = logging.getLogger("workspacefs.host")

_FILES_SEEN = 4096
"""How many paths of files a filesystem remembers as hints (see ``HostFilesystem._files_seen``)."""


class HostFilesystem(HostHistoryMixin):
    """A host directory, sandboxed: see the module docstring for what that guarantees.

    Warning: this backend touches a real disk. Point it at a directory the agent may change, and
    give it a ``snapshot_dir`` outside that directory (the default lives under the user's cache).
    ``use_tmpfile=False`` writes through named temporary files even where ``O_TMPFILE`` works.
    """

    backend_name: ClassVar[str] = "host"
    _finishes_restores_when_opened: ClassVar[bool] = True
    """Whether ``__init__`` ends by finishing a killed restore; a subclass whose restore needs state its own
    ``__init__`` sets after this one's (the container's sandbox) says ``False`` and calls ``_finish_restore``."""
    declared_capabilities: ClassVar[Capabilities] = Capabilities(
        host_directory=True, fork=True, merge=True, history=True, watch=True
    )

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        read_only: bool = False,
        mount_point: str | None = None,
        snapshot_strategy: str | SnapshotStrategy | None = None,
        snapshot_dir: str | os.PathLike[str] | None = None,
        retention: SnapshotRetentionPolicy | None = None,
        durable: bool = True,
        use_openat2: bool | None = None,
        use_ripgrep: bool | None = None,
        use_tmpfile: bool | None = None,
        quota: Quota | None = None,
        history: bool = True,
    ) -> None:
        """``history`` journals every change made through this object (``history()``, ``undo()``, ``watch()``)
        in ``<snapshot_dir>/journal``, copying the content a change replaces there."""
        super().__init__(read_only=read_only, mount_point=mount_point, quota=quota)
        self._root = os.fspath(root)
        if not os.path.lexists(self._root):
            raise FileNotFoundError(errno.ENOENT, "Workspace root does not exist", self._root)
        if not os.path.isdir(self._root):
            raise NotADirectoryError(errno.ENOTDIR, "Workspace root is not a directory", self._root)
        self._tree = HostTree(self._root, durable=durable, use_openat2=use_openat2, use_tmpfile=use_tmpfile)
        self._command_lock = threading.Lock()
        self._snapshots = HostSnapshots(
            self._tree,
            self._root,
            backend=self.backend_name,
            strategy=snapshot_strategy,
            snapshot_dir=snapshot_dir,
            retention=retention,
        )
        retired = self._claim_state(read_only)
        self._tree.writers = WriterRegistry(registry_dir(self._snapshots.root, self._snapshots.directory))
        # one journal per root: a fork shares the snapshot directory, never the history
        journal_dir = self._snapshots.directory / "journals" / root_key(self._snapshots.root)
        keeps_history = history and (not read_only or journal_dir.is_dir())
        max_age = self._snapshots.retention.max_age_hours  # the journal is bounded by the snapshots' policy too
        self._changes = (
            HostJournal(journal_dir, max_age=None if max_age is None else timedelta(hours=max_age))
            if keeps_history
            else None
        )
        if self._changes is not None and can_watch_outside():
            journal = self._changes
            journal.follow = lambda: OutsideWatcher(
                self._root, journal, lambda path: self._observe(path, keep=False), held=self._command_pending
            )
        self._restoring = RestoreRecord(self._snapshots.directory, root_key(self._snapshots.root), durable=durable)
        self._unfinished: Unfinished | None = None
        """A killed restore this open is finishing (its record's ``before`` goes into the journal entry)."""
        reaped = ReapReport() if read_only else self._tree.writers.reap(self._tree.resolver.root_fd)
        self.reaped = dataclasses.replace(reaped, state_retired=retired)
        """What this open removed of dead writers' temporary files and which killed restores it finished (read-only
        opens change nothing)."""
        self._ripgrep = Ripgrep.find() if use_ripgrep is not False else None
        self._written = {}
        self._files_seen: set[str] = set()
        """Paths this object wrote or read lately: a hint (never trusted for safety) that a write there replaces a
        file, so it looks at the entry first instead of linking first (see ``HostTree.finish_temp``'s ``fresh``)."""
        if use_ripgrep and self._ripgrep is None:
            raise RuntimeError("use_ripgrep=True but no rg binary was found (install ripgrep)")
        if not read_only and self._finishes_restores_when_opened:
            self._finish_restore()

    # --- properties ---------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The host directory, as given."""
        return self._root

    @property
    def capabilities(self) -> Capabilities:
        """As declared, less ``history``/``watch`` when no journal is kept (``history=False``)."""
        if self._changes is not None:
            return self.declared_capabilities
        return dataclasses.replace(self.declared_capabilities, history=False, watch=False)

    @property
    def snapshot_strategy(self) -> str:
        """The strategy snapshots use (``reflink``, ``git``, ``archive`` or ``copy``)."""
        return self._snapshots.strategy.name

    @property
    def snapshot_dir(self) -> Path:
        """Where snapshots are kept (never inside the root)."""
        return self._snapshots.directory

    @property
    def resolver(self) -> HostResolver:
        """The race-proof resolver (for the snapshot strategies and the container backend)."""
        return self._tree.resolver

    def _command_pending(self) -> bool:
        """Whether a command runs whose entry is not written yet (what it changes is not news from outside)."""
        return self._commands_running > 0

    def _release_root(self) -> None:
        """Let go of the root's descriptor (before the root is unmounted and mounted again)."""
        self._tree.close()

    def _reopen_root(self) -> None:
        """Open the root afresh (it was mounted again): later operations resolve beneath the new mount."""
        old = self._tree
        self._tree = HostTree(self._root, durable=old.durable, use_tmpfile=old.use_tmpfile, writers=old.writers)
        self._snapshots.rebind(self._tree)

    def close(self) -> None:
        """Release the root descriptor and any helper process; idempotent."""
        self._snapshots.close()
        self._tree.close()
        if self._changes is not None:
            self._changes.close()

    # --- primitives -------------------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStat:
        try:
            info = self._tree.resolver.fstat_path(path)
        except OSError as exc:
            raise lookup_fail(exc, path) from None
        return stat_result(path, info)

    def _list_dir(self, path: str) -> Sequence[FileEntry]:
        try:
            fd = self._tree.resolver.open_dir(path, DIR_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and self._tree.is_regular(path):
                raise errors.not_a_directory(path) from None
            raise lookup_fail(exc, path) from None
        entries: list[FileEntry] = []
        try:
            with os.scandir(fd) as listing:
                for entry in listing:
                    name = entry.name
                    if not is_listable_name(name) or entry.is_symlink():
                        continue
                    child = join(path, name)
                    if entry.is_dir(follow_symlinks=False):
                        entries.append(FileEntry(name, child, False, True, None))
                    elif entry.is_file(follow_symlinks=False):
                        try:
                            size = entry.stat(follow_symlinks=False).st_size
                        except FileNotFoundError:
                            continue  # removed since the directory was read
                        entries.append(FileEntry(name, child, True, False, size))
        finally:
            os.close(fd)
        entries.sort(key=lambda e: e.name)
        return tuple(entries)

    def _open_reader(self, path: str) -> ByteReader:
        fd, info = self._tree.open_regular(path)
        return StreamReader(path, os.fdopen(fd, "rb", buffering=0), info.st_size)

    def _open_content(self, path: str, inline_limit: int) -> bytes | ByteReader:
        fd, info = self._tree.open_regular(path)
        if path not in self._files_seen:  # read before it is written back, as agents do
            self._saw_file(path)
        if info.st_size > inline_limit:
            return StreamReader(path, os.fdopen(fd, "rb", buffering=0), info.st_size)
        try:
            return read_fd(fd, info.st_size)
        finally:
            os.close(fd)

    def _open_writer(self, path: str, mode: WriteMode) -> ByteWriter:
        if mode == "append":  # in place: what it held is kept now, before the first byte lands
            before = self._observe(path, keep=True) if self._changes is not None else None
            return self._journaled_writer(AppendWriter(self._tree, path), path, before)
        return self._journaled_writer(HostWriter(self._tree, path, mode), path, None)

    def _write_content(self, path: str, data: bytes, mode: WriteMode) -> None:
        if self._changes is None:
            self._put_bytes(path, data, mode)
            return
        if mode == "append":
            with self._recording("write", path):
                self._put_bytes(path, data, mode)
            return
        # a whole write: what it replaces is read through the directory descriptor the write resolved, and
        # what it leaves is the content id of the bytes written (never read back)
        content_id = content_id_of(data)
        before = self._put_bytes(path, data, mode, content_id)
        self._note_write(path, before, content_id, len(data))

    def _put_bytes(self, path: str, data: bytes, mode: WriteMode, content_id: str | None = None) -> Seen:
        """Write ``data`` at ``path``; with the journal on, returns what a whole write replaced (kept for undo
        before the new content takes the name), else ``(None, 0)``. With ``content_id`` (the journal's id of
        ``data``), a large write is remembered (see ``_remembering``)."""
        if mode == "append":
            fd = self._tree.open_for_append(path)
            try:
                write_fd(fd, data)
                if self._tree.durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            return None, 0
        cut = path.rfind("/")
        above, name = (path[:cut], path[cut + 1 :]) if cut >= 0 else (ROOT, path)

        def fill(fd: int) -> None:
            try:
                write_fd(fd, data)
            except OSError as exc:
                raise fail(exc, path) from None

        filling, settled = self._remembering(path, len(data), content_id, fill)
        fresh = path not in self._files_seen
        dir_fd = self._tree.open_parent(path, above)
        try:
            if mode == "create":
                self._tree.check_target(dir_fd, name, path, mode)  # fail before writing; the link re-checks
            seen: list[Seen] = []  # looked at only when a file is there to replace: a new file costs no open

            def replacing() -> os.stat_result | None:
                info, held = self._replaced_at(dir_fd, name, path)
                seen.append(held)
                return info

            keeps = replacing if self._changes is not None else None
            self._tree.write_new(
                dir_fd, filling, name=name, path=path, mode=mode, replacing=keeps, fresh=fresh, settled=settled
            )
        finally:
            os.close(dir_fd)
        if fresh:
            self._saw_file(path)
        return seen[-1] if seen else (None, 0)

    def _saw_file(self, path: str) -> None:
        """Remember that a file is at ``path`` (a hint for the next write there)."""
        seen = self._files_seen
        if len(seen) >= _FILES_SEEN:
            seen.clear()  # forgotten all at once: a hint costs a wasted syscall at worst
        seen.add(path)

    def _make_dir(self, path: str) -> None:
        with self._recording("mkdir", path, after=(DIRECTORY, 0)):
            self._tree.make_dir(path)

    def _remove_file(self, path: str) -> None:
        with self._recording("delete", path, after=(None, 0)):
            self._unlink(path)

    def _unlink(self, path: str) -> None:
        above, name = parent_and_name(path)
        dir_fd = self._tree.open_parent(path, above)
        try:
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError as exc:
                raise fail(exc, path) from None
            if stat.S_ISDIR(info.st_mode):
                raise errors.is_a_directory(path)
            try:
                os.unlink(name, dir_fd=dir_fd)  # a symlink goes itself; its target is untouched
            except OSError as exc:
                raise fail(exc, path) from None
        finally:
            os.close(dir_fd)

    def _remove_empty_dir(self, path: str) -> None:
        above, name = parent_and_name(path)
        dir_fd = self._tree.open_parent(path, above)
        try:
            os.rmdir(name, dir_fd=dir_fd)
            self._note("delete", [Change(path, DIRECTORY, None)])
        except OSError as exc:
            raise fail(exc, path) from None
        finally:
            os.close(dir_fd)

    def _remove_tree(self, path: str) -> None:
        self._remove_tree_noting(path, self._tree_before(path) if self._changes is not None else [])

    def _remove_tree_noting(self, path: str, gone: list[Change]) -> None:
        """Remove the tree at ``path``, out of view in one rename (``_remove.remove_tree``: a kill leaves it whole or
        gone), and journal ``gone`` (what ``_tree_before`` kept of it)."""
        above, name = parent_and_name(path)
        with self._open_parent(path, above) as dir_fd:
            remove_tree(dir_fd, name, path, self._tree.writers)
        self._note("delete", gone)

    def _rename(self, src: str, dst: str, *, replace: bool) -> None:
        moved = self._observe(src, keep=False) if self._changes is not None else None
        with self._recording("move", dst, after=moved, from_path=src):
            self._rename_entry(src, dst, replace=replace)

    @contextlib.contextmanager
    def _parents(self, src: str, dst: str) -> Iterator[tuple[int, int]]:
        """Descriptors of the parent directories of ``src`` and ``dst``, closed after the block."""
        src_fd = self._tree.open_parent(src, parent_and_name(src)[0])
        try:
            dst_fd = self._tree.open_parent(dst, parent_and_name(dst)[0])
        except BaseException:
            os.close(src_fd)
            raise
        try:
            yield src_fd, dst_fd
        finally:
            os.close(src_fd)
            os.close(dst_fd)

    def _move_over_tree(self, src: str, dst: str) -> None:
        """Move directory ``src`` over directory ``dst`` in one exchange (``_replace.move_tree_over``), journaled as
        the two steps would be: the target tree's deletion, then the move; the two steps where it cannot exchange."""
        gone = self._tree_before(dst) if self._changes is not None else []
        with self._parents(src, dst) as (src_fd, dst_fd):
            writers = self._tree.writers
            src_name, dst_name = src[src.rfind("/") + 1 :], dst[dst.rfind("/") + 1 :]
            moved = move_tree_over(src_fd, src_name, dst_fd, dst_name, src_path=src, path=dst, writers=writers)
        if not moved:
            self._remove_tree_noting(dst, gone)
            self._rename(src, dst, replace=False)
            return
        if self._changes is not None:
            self._note("delete", gone)
            self._note("move", [Change(dst, None, DIRECTORY, 0, 0, src)])

    def _copy_over_tree(self, src: str, dst: str) -> None:
        """Copy directory ``src`` over directory ``dst``: built under a hidden directory beside it, then exchanged
        with it (``_replace.exchange_over``), journaled as the two steps would be; the two steps where it cannot."""
        gone = self._tree_before(dst) if self._changes is not None else []
        above, name = parent_and_name(dst)
        with self._open_parent(dst, above) as dst_fd:
            aside = make_trash(dst_fd, dst, self._tree.writers)
            try:
                made = self._copy_hidden(src, join(join(above, aside), name), dst)
                with self._open_hidden(dst_fd, aside, dst) as aside_fd:
                    placed = exchange_over(aside_fd, name, dst_fd, name, dst)
                    if placed is None:  # the system cannot exchange: remove the target's tree, then rename
                        self._remove_tree_noting(dst, gone)
                        gone = []
                        self._put_in_place(aside_fd, dst_fd, name, dst)
            finally:
                remove_hidden(dst_fd, aside)
        self._note("delete", gone)
        self._note("copy", made)

    def _copy_tree(self, src: str, dst: str) -> None:
        """Copy directory ``src`` to ``dst`` (absent): built under a hidden directory beside it, then put in place in
        one ``renameat2(RENAME_NOREPLACE)``, so a kill leaves ``dst`` absent or whole (the reaper removes a killed
        copy's part); journaled as the default copy, file by file. Something at ``dst`` meanwhile is refused."""
        above, name = parent_and_name(dst)
        with self._open_parent(dst, above) as dst_fd:
            aside = make_trash(dst_fd, dst, self._tree.writers)
            try:
                made = self._copy_hidden(src, join(join(above, aside), name), dst)
                with self._open_hidden(dst_fd, aside, dst) as aside_fd:
                    self._put_in_place(aside_fd, dst_fd, name, dst)
            finally:
                remove_hidden(dst_fd, aside)
        self._note("copy", made)

    @contextlib.contextmanager
    def _open_hidden(self, dst_fd: int, aside: str, dst: str) -> Iterator[int]:
        """The descriptor of hidden directory ``aside`` of ``dst_fd`` (never a link put there), closed after."""
        try:
            fd = os.open(aside, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dst_fd)
        except OSError as exc:
            raise fail(exc, dst) from None
        try:
            yield fd
        finally:
            os.close(fd)

    def _put_in_place(self, aside_fd: int, dst_fd: int, name: str, dst: str) -> None:
        """Rename entry ``name`` of the hidden directory ``aside_fd`` to ``name`` of ``dst_fd``, never replacing."""
        try:
            self._rename_fresh(aside_fd, name, dst_fd, name, dst)
        except FileExistsError as exc:
            raise errors.file_exists(dst) from exc
        except OSError as exc:
            if exc.filename == dst:
                raise
            raise fail(exc, dst) from None

    def _copy_hidden(self, src: str, hidden: str, dst: str) -> list[Change]:
        """Copy the tree ``src`` to ``hidden``, a directory made here (as ``mkdir`` makes one: its mode is the
        umask's), unjournaled; the changes the copy will make at ``dst`` once there, as the default copy journals
        them (none without a journal). An error names ``dst``'s path, never the hidden one."""
        try:
            self._tree.make_dir(hidden)
            journaled = self._changes is not None
            made = [Change(dst, None, DIRECTORY)] if journaled else []
            for entry in self._walk(src):  # parents first, so each target's parent exists
                below = entry.path[len(src) :]
                if entry.is_directory:
                    self._tree.make_dir(hidden + below)
                    if journaled:
                        made.append(Change(dst + below, None, DIRECTORY))
                    continue
                self._copy_bytes(entry.path, hidden + below)
                if journaled:
                    content_id, size = self._observe(hidden + below, keep=False)
                    if content_id is not None:
                        made.append(Change(dst + below, None, content_id, 0, size))
        except OSError as exc:
            _name_visible(exc, hidden, dst)
            raise
        return made

    @contextlib.contextmanager
    def _open_parent(self, path: str, above: str) -> Iterator[int]:
        """The parent directory's descriptor, closed after the block."""
        fd = self._tree.open_parent(path, above)
        try:
            yield fd
        finally:
            os.close(fd)

    def _rename_entry(self, src: str, dst: str, *, replace: bool) -> None:
        src_name, dst_name = src[src.rfind("/") + 1 :], dst[dst.rfind("/") + 1 :]
        with self._parents(src, dst) as (src_fd, dst_fd):
            try:
                info = os.stat(src_name, dir_fd=src_fd, follow_symlinks=False)
            except OSError as exc:
                raise fail(exc, src) from None
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                raise SpecialFileError(src)
            try:
                if replace:  # an exchange, looked at after: what was swapped in since the look is never replaced
                    move_over(src_fd, src_name, dst_fd, dst_name, dst, moved=info, writers=self._tree.writers)
                else:
                    self._rename_fresh(src_fd, src_name, dst_fd, dst_name, dst)
            except FileExistsError as exc:
                raise errors.file_exists(dst) from exc
            except OSError as exc:
                if exc.filename == dst:
                    raise
                raise fail(exc, dst if exc.errno in (errno.EISDIR, errno.ENOTDIR) else src) from None

    @classmethod
    def _rename_fresh(cls, src_fd: int, src: str, dst_fd: int, dst: str, path: str) -> None:
        """Rename ``src`` to ``dst`` (``path``), never replacing: ``renameat2(RENAME_NOREPLACE)``, or where the
        system has none a look, then the rename."""
        if not renameat_noreplace(src_fd, src, dst_fd, dst):
            cls._check_absent(dst_fd, dst, path)
            os.rename(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd)

    @staticmethod
    def _check_absent(dir_fd: int, name: str, path: str) -> None:
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        raise errors.file_exists(path)

    def _copy_file(self, src: str, dst: str) -> None:
        with self._recording("copy", dst):
            self._copy_bytes(src, dst)

    def _copy_bytes(self, src: str, dst: str) -> None:
        src_fd, info = self._tree.open_regular(src)

        def fill(fd: int) -> None:
            try:
                copy_range(src_fd, fd, info.st_size)
            except OSError as exc:
                raise fail(exc, dst) from None

        try:
            above, name = parent_and_name(dst)
            dir_fd = self._tree.open_parent(dst, above)
            try:
                self._tree.check_target(dir_fd, name, dst, "overwrite")
                self._tree.write_new(dir_fd, fill, name=name, path=dst, mode="overwrite")
            finally:
                os.close(dir_fd)
        finally:
            os.close(src_fd)

    def _iter_files(self, base: str) -> Iterator[str]:
        return self._tree.resolver.walk_files(base)

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """As :meth:`BaseFilesystem.delete`; a symlink, FIFO, socket or device is removed itself (a
        link's target is never touched)."""
        norm = self._norm(path)
        if norm != ROOT and not self._read_only and self._is_odd_entry(norm):
            try:
                self._unlink(norm)  # unlinks the entry itself (not journaled: it is no file of the workspace)
            except OSError as exc:
                name_caller_path(exc, norm, path)
                raise
            return
        super().delete(path, recursive=recursive)

    def _is_odd_entry(self, path: str) -> bool:
        """True if ``path`` names a symlink or special file (resolving its parent race-free)."""
        above, name = parent_and_name(path)
        try:
            dir_fd = self._tree.resolver.open_dir(above)
        except OSError:
            return False
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except OSError:
            return False
        finally:
            os.close(dir_fd)
        return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))

    def _grep_candidates(self, pattern: GrepPattern, base: str) -> Iterable[str]:
        """With ripgrep installed, it picks the files worth searching; the shared engine still reads
        every one of them through the race-proof resolver, so results are identical either way."""
        if self._ripgrep is not None:
            candidates = self._ripgrep.candidates(self._root, pattern, base)
            if candidates is not None:
                return candidates
        return self._iter_files(base)

    # --- conditional writes -------------------------------------------------------------------------

    def open_write_if(self, path: str, *, expect: str, read_only: bool | None = None) -> ByteWriter:
        """As :meth:`BaseFilesystem.open_write_if`: the check and the rename happen together, under a lock of
        the directory the writer holds open (see ``ConditionalHostWriter``). No per-file read-only flag here:
        ``read_only`` is refused before anything is written."""
        self._no_flags(read_only)
        with self._conditional_target(path) as norm:
            writer = self._journaled_writer(ConditionalHostWriter(self._tree, norm, expect), norm, None)
            return self._quota_writer(norm, "overwrite", writer)

    def write_bytes_if(
        self, path: str, content: BytesLike, *, expect: str, read_only: bool | None = None
    ) -> WriteResult:
        """As :meth:`BaseFilesystem.write_bytes_if`, through :meth:`open_write_if`."""
        self._no_flags(read_only)
        data = bytes(content)
        with self._conditional_target(path) as norm:
            if len(data) > MAX_CONVENIENCE_BYTES:
                raise too_big("Writing", path)
            with self.open_write_if(norm, expect=expect) as writer:
                writer.write(data)
        return WriteResult(norm, len(data), "overwrite")

    def _content_id(self, path: str) -> str:
        fd, info = self._tree.open_regular(path)
        try:
            return content_id_of_fd(fd, info.st_size)
        finally:
            os.close(fd)

    def _open_versioned(self, path: str) -> VersionedContent:
        """One descriptor serves all three: atomic writes replace the inode, so what it reads stays the
        version it hashed, and ``fstat`` describes that same version."""
        fd, info = self._tree.open_regular(path)
        try:
            content_id = content_id_of_fd(fd, info.st_size)  # exactly the bytes the reader will return
        except BaseException:
            os.close(fd)
            raise
        reader = StreamReader(path, os.fdopen(fd, "rb", buffering=0), info.st_size)
        return VersionedContent(stat_result(path, info), content_id, reader)

    # --- snapshots ---------------------------------------------------------------------------------------

    def _snapshot_root(self) -> str:
        return self._snapshots.root

    def _capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        return self._snapshots.capture(draft)

    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        paths, before = self._journal_restore(snapshot)
        unfinished = self._unfinished
        if unfinished is not None and unfinished.snapshot_id == snapshot.snapshot_id:
            # what the killed attempt already restored held the record's "before"; a path that differs from the
            # snapshot now was not reached, or was written since the kill: what it holds now is kept for undo
            before = {**unfinished.before, **before}
            paths = sorted({*paths, *unfinished.before})
        with self._restoring.held(snapshot.snapshot_id, before):  # a kill inside: the next open finishes it
            self._restore_files(snapshot)
            self._journal_restored(paths, before)

    def _claim_state(self, read_only: bool) -> bool:
        """Retire what another directory at this root's path left beside it, before anything reads it (see
        ``_identity.py``); whether there was any. A read-only open whose snapshot directory cannot be written (a
        read-only mount) claims nothing, as it could keep nothing."""
        try:
            return self._snapshots.claim(directory_identity(self._tree.resolver.root_fd))
        except OSError as exc:
            if read_only and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                return False
            raise

    def _finish_restore(self) -> None:
        """Finish a restore whose process was killed part way (see ``_restoring.py``); never raises."""
        unfinished = self._restoring.unfinished()
        if unfinished is None:
            return
        self._unfinished = unfinished
        finished = False
        try:
            found = [s for s in self._snapshots.list() if s.snapshot_id == unfinished.snapshot_id]
            if found:
                self.restore(found[0])
                finished = True
            else:
                _log.warning("Snapshot %s, whose restore was cut short, no longer exists", unfinished.snapshot_id)
        except Exception as exc:  # an open must not fail for it: logged, and counted in ``reaped``
            _log.warning("Finishing the restore of snapshot %s cut short failed: %s", unfinished.snapshot_id, exc)
        finally:
            self._unfinished = None
            self._restoring.done(unfinished.fd)
        self.reaped = dataclasses.replace(self.reaped, restores_finished=int(finished))
        self.reaped = dataclasses.replace(self.reaped, restores_failed=int(not finished))

    def _restore_files(self, snapshot: FilesystemSnapshot) -> None:
        self._snapshots.restore(snapshot)

    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        return self._snapshots.manifest(snapshot)

    def _kept_snapshots(self) -> Sequence[FilesystemSnapshot]:
        return self._snapshots.list()

    def _drop_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        self._snapshots.delete(snapshot.snapshot_id)

    # --- forks and merge ---------------------------------------------------------------------------------

    def fork(
        self,
        snapshot: FilesystemSnapshot | None = None,
        *,
        root: str | os.PathLike[str],
        read_only: bool | None = None,
    ) -> HostFilesystem:
        """A copy of this workspace (its current state, or ``snapshot``) in directory ``root``, which must be
        outside this root and empty or missing. The fork shares this root's ``snapshot_dir`` and strategy, and the
        two are one family: each restores and merges the other's snapshots (``merge`` brings a fork's work back).

        Costs one snapshot of the current state when none is given (kept in the catalogue like any other), then a
        restore into ``root`` through the strategy: clones on a reflink filesystem, a copy of every file otherwise.

        Raises:
            ValueError: ``root`` overlaps this root or the snapshot directory, or is not empty.
        """
        target = os.path.realpath(os.fspath(root))
        own, kept = Path(self._snapshots.root), Path(self._snapshots.directory)
        for other in (own, kept):
            if Path(target) == other or Path(target).is_relative_to(other) or other.is_relative_to(target):
                raise ValueError("A fork's root must lie outside this root and its snapshot directory")
        os.makedirs(target, exist_ok=True)
        if os.listdir(target):
            raise ValueError("A fork's root must be an empty directory")
        if snapshot is not None:
            self._check_compatible(snapshot)
        taken = self.snapshot() if snapshot is None else snapshot
        forked = HostFilesystem(  # first: its open retires what a deleted directory at ``target`` left
            target,
            read_only=self._read_only if read_only is None else read_only,
            mount_point=self._mount_point,
            snapshot_strategy=self._snapshots.strategy,
            snapshot_dir=self._snapshots.directory,
            retention=self._snapshots.retention,
            quota=self._quota,
        )
        self._snapshots.join_family(target)  # after that open, which takes a retired root out of the family
        forked._snapshots.restore(taken)
        return forked

    def mergeable_snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots of this root and of every root of its family (forks sharing the snapshot directory)."""
        return self._snapshots.family_snapshots()

    def _snapshot_content(self, snapshot: FilesystemSnapshot, path: str) -> bytes | ByteReader:
        return snapshot_content(self._snapshots, snapshot, path)

    def _capture_merged(
        self,
        draft: FilesystemSnapshot,
        start: FilesystemSnapshot,
        writes: Mapping[str, Written],
        deletes: Collection[str],
        *,
        read_only: Mapping[str, bool],
    ) -> FilesystemSnapshot:
        """The merge result as a snapshot of this root (no per-file flags here: ``read_only`` is empty)."""
        return capture_merged(self._snapshots, draft, start, writes, deletes)

    def __repr__(self) -> str:
        flags = ", read_only=True" if self._read_only else ""
        return f"HostFilesystem({self._root!r}{flags}, snapshot_strategy={self.snapshot_strategy!r})"


def _name_visible(exc: OSError, hidden: str, dst: str) -> None:
    """Rename a path at or below ``hidden`` in ``exc`` to the same place below ``dst``: a hidden name is never shown."""
    for attr in ("filename", "filename2"):
        name = getattr(exc, attr)
        if isinstance(name, str) and (name == hidden or name.startswith(hidden + "/")):
            setattr(exc, attr, dst + name[len(hidden) :])
