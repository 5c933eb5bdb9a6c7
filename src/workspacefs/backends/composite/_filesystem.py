"""``CompositeFilesystem``: one tree made of several filesystems mounted at paths, routed by longest prefix.

Every primitive asks the mount table which filesystem serves the path and calls that filesystem's public
API with the path as it names it, so each mount keeps its own guarantees (the host sandbox, SQL
transactions, an object store's compare-and-set). Listings show mount points as directories; walks, glob
and grep span mounts. A move or copy between two mounts streams file by file (fixed memory), each file
written atomically by the target and, for a move, deleted from the source once it is there. Mount points,
and the directories leading to them, cannot be deleted, moved or replaced. History is the mounts' journals
read as one, with ids of the composite's own (see ``_history.py``).
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import ClassVar, cast

from workspacefs import errors
from workspacefs.backends.base import BaseFilesystem
from workspacefs.backends.composite._history import CompositeHistory
from workspacefs.backends.composite._mounts import Mounted, MountTable
from workspacefs.backends.composite._snapshots import CompositeSnapshots
from workspacefs.capabilities import Capabilities
from workspacefs.errors import MountPointError, ReadOnlyError, UnsupportedOperationError, caller_paths
from workspacefs.paths import DEFAULT_MAX_GREP_MATCHES, check_non_negative, is_within, join
from workspacefs.protocol import ByteReader, BytesLike, ByteWriter, ConditionalWrites, Filesystem, VersionedContent
from workspacefs.results import FileEntry, FileStat, GrepMatch, WriteMode, WriteResult
from workspacefs.search import GrepPattern
from workspacefs.undo import UndoLog

__all__ = ["CompositeFilesystem"]


class CompositeFilesystem(CompositeHistory, CompositeSnapshots, BaseFilesystem):
    """Filesystems mounted at absolute paths: ``CompositeFilesystem({"/workspace": host, "/memories": sql})``.

    A mount at ``"/"`` serves every path no other mount claims. A mount that is itself read-only stays so;
    ``read_only=True`` makes the whole composite read-only. One ``snapshot()`` snapshots every writable
    mount and restores them together (see ``_snapshots.py``). ``history()``, ``undo()`` and ``watch()`` work over
    the mounts' journals (see ``_history.py``).
    """

    backend_name: ClassVar[str] = "composite"

    def __init__(
        self, mounts: Mapping[str, Filesystem], *, read_only: bool = False, mount_point: str | None = None
    ) -> None:
        super().__init__(read_only=read_only, mount_point=mount_point)
        self._table = MountTable(mounts)

    # --- what it is ----------------------------------------------------------------------------------

    @property
    def mounts(self) -> Mapping[str, Filesystem]:
        """Every mounted filesystem by mount point (``/workspace``)."""
        return {m.spelled: m.fs for m in self._table}

    @property
    def capabilities(self) -> Capabilities:
        """What every mount can do (snapshots, history and watching: every writable mount, and history and
        watching at least one mount; conditional writes: every mount)."""
        writable = [m.fs.capabilities for m in self._table if not m.fs.read_only]
        every = [m.fs.capabilities for m in self._table]
        return Capabilities(
            snapshots=all(c.snapshots for c in writable),
            cheap_snapshots=all(c.snapshots and c.cheap_snapshots for c in writable),
            persistent=all(c.persistent for c in every),
            conditional_writes=all(c.conditional_writes for c in every),
            history=all(c.history for c in writable) and any(c.history for c in every),
            watch=all(c.watch for c in writable) and any(c.watch for c in every),
        )

    def _snapshot_root(self) -> str:
        return "composite:" + ",".join(f"{m.spelled}={m.fs.root}" for m in self._table)

    def _mounted_for_snapshots(self) -> Sequence[Mounted]:
        return list(self._table)

    def __repr__(self) -> str:
        return f"CompositeFilesystem({self._table.spelled()})"

    def close(self) -> None:
        """Close every mounted filesystem."""
        for mounted in self._table:
            close = getattr(mounted.fs, "close", None)
            if callable(close):
                close()

    # --- routing -------------------------------------------------------------------------------------

    def _file_target(self, path: str) -> Mounted:
        """The mount a file at ``path`` lives in (a mount point or a directory holding one is no file)."""
        if self._table.holds_mount(path):
            raise errors.is_a_directory(path)
        return self._table.serving(path)

    def _changeable(self, path: str, verb: str) -> Mounted:
        """The mount where ``path`` may be changed: not a mount point, nor a directory leading to one."""
        if self._table.holds_mount(path):
            raise MountPointError(path, f"another filesystem is mounted there (or below it), so it cannot be {verb}")
        mounted = self._table.route(path)
        if mounted is None:
            raise MountPointError(path, f"nothing is mounted there; use a path below {self._table.spelled()}")
        if mounted.fs.read_only:  # refused before anything moves, so a move never leaves a copy behind
            raise ReadOnlyError(path, f"The filesystem mounted at {mounted.spelled} is read-only")
        return mounted

    # --- primitives ----------------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStat:
        if self._table.holds_mount(path):
            return FileStat(path, False, True, 0)
        mounted = self._table.serving(path)
        with mounted.speaking_outside():
            return replace(mounted.fs.stat(mounted.inner(path)), path=path)

    def _list_dir(self, path: str) -> Sequence[FileEntry]:
        entries: dict[str, FileEntry] = {}
        mounted = self._table.route(path)
        if mounted is not None:
            try:
                with mounted.speaking_outside():
                    listed = mounted.fs.list(mounted.inner(path))
            except FileNotFoundError:
                if not self._table.holds_mount(path):
                    raise
                listed = ()
            entries = {entry.name: replace(entry, path=join(path, entry.name)) for entry in listed}
        elif not self._table.holds_mount(path):
            raise errors.file_not_found(path)
        for name in self._table.children(path):
            entries[name] = FileEntry(name, join(path, name), False, True, None)
        return tuple(entries[name] for name in sorted(entries))

    def _walk(self, base: str) -> Iterator[FileEntry]:
        """Every entry below ``base``: the serving mount's own walk, then each mount nested below, with the
        mount points and the directories leading to them; sorted by path, so parents come first."""
        found: dict[str, FileEntry] = {}
        mounted = self._table.route(base)
        if mounted is not None:
            try:
                if not self._stat(base).is_directory:
                    return iter(())
            except (FileNotFoundError, NotADirectoryError):
                return iter(())
            self._walk_mount(mounted, base, found)
        elif not self._table.holds_mount(base):
            return iter(())
        for nested in self._table.below(base):
            for directory in [*_between(base, nested.point), nested.point]:
                found[directory] = FileEntry(directory.rpartition("/")[2], directory, False, True, None)
            self._walk_mount(nested, nested.point, found)
        return iter([found[path] for path in sorted(found)])

    def _walk_mount(self, mounted: Mounted, base: str, found: dict[str, FileEntry]) -> None:
        try:
            with mounted.speaking_outside():
                walked = builtins.list(mounted.fs.walk(mounted.inner(base)))
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in walked:
            path = mounted.outer(entry.path)
            if not self._table.shadowed(mounted, path):
                found[path] = replace(entry, path=path)

    def _open_reader(self, path: str) -> ByteReader:
        mounted = self._file_target(path)
        with mounted.speaking_outside():
            return mounted.fs.open_read(mounted.inner(path))

    def _open_writer(self, path: str, mode: WriteMode) -> ByteWriter:
        mounted = self._file_target(path) if self._table.holds_mount(path) else self._changeable(path, "written")
        with self._changing(mounted):
            return mounted.fs.open_write(mounted.inner(path), mode=mode, create_parents=False)

    def _write_content(self, path: str, data: bytes, mode: WriteMode) -> None:
        mounted = self._file_target(path) if self._table.holds_mount(path) else self._changeable(path, "written")
        with self._changing(mounted):
            mounted.fs.write_bytes(mounted.inner(path), data, mode=mode, create_parents=False)

    def _make_dir(self, path: str) -> None:
        if self._table.holds_mount(path):
            raise errors.file_exists(path)
        mounted = self._changeable(path, "made")
        with self._changing(mounted):
            mounted.fs.mkdir(mounted.inner(path), parents=False, exist_ok=False)

    def _remove_file(self, path: str) -> None:
        mounted = self._changeable(path, "deleted")
        with self._changing(mounted):
            mounted.fs.delete(mounted.inner(path))

    def _remove_empty_dir(self, path: str) -> None:
        mounted = self._changeable(path, "deleted")
        with self._changing(mounted):
            mounted.fs.delete(mounted.inner(path))

    def _remove_tree(self, path: str) -> None:
        mounted = self._changeable(path, "deleted")
        with self._changing(mounted):
            mounted.fs.delete(mounted.inner(path), recursive=True)

    def _rename(self, src: str, dst: str, *, replace: bool) -> None:
        source = self._changeable(src, "moved")
        target = self._changeable(dst, "replaced")
        if source is target:
            with self._changing(source):
                source.fs.move(source.inner(src), source.inner(dst), overwrite=replace)
            return
        if self._stat(src).is_directory:
            self._copy_tree(src, dst)
            self._remove_tree(src)
            return
        self._copy_between(source, src, target, dst)
        self._remove_file(src)

    def _move_over_tree(self, src: str, dst: str) -> None:
        """Within one mount, that mount's own move over the tree (one change where it can make one)."""
        source = self._changeable(src, "moved")
        target = self._changeable(dst, "replaced")
        if source is target:
            with self._changing(source):
                source.fs.move(source.inner(src), source.inner(dst), overwrite=True)
            return
        self._over_tree_across(target, dst, lambda: super(CompositeFilesystem, self)._move_over_tree(src, dst))

    def _copy_over_tree(self, src: str, dst: str) -> None:
        """Within one mount (none mounted below ``src``), that mount's own copy over the tree."""
        source = self._table.serving(src)
        target = self._changeable(dst, "replaced")
        if source is target and not self._table.below(src):
            with self._changing(source):
                source.fs.copy(source.inner(src), source.inner(dst), overwrite=True)
            return
        self._over_tree_across(target, dst, lambda: super(CompositeFilesystem, self)._copy_over_tree(src, dst))

    def _over_tree_across(self, target: Mounted, dst: str, replace: Callable[[], None]) -> None:
        """Replace the tree at ``dst`` with one from another mount (removal, then a copy file by file): the old
        tree is recorded first (an :class:`~workspacefs.undo.UndoLog` on the target mount, costing its size) and
        put back if the copy fails part way (the target's quota, a read-only file), so a refused move or copy
        never leaves ``dst`` gone or half replaced."""
        with UndoLog(target.fs) as undo:
            with target.speaking_outside():
                undo.will_change(target.inner(dst))
            try:
                replace()
            except BaseException as exc:
                with target.speaking_outside():
                    undo.rollback_after(exc)
                raise

    def _copy_file(self, src: str, dst: str) -> None:
        source = self._file_target(src)
        target = self._changeable(dst, "replaced")
        if source is target:
            with self._changing(source):
                source.fs.copy(source.inner(src), source.inner(dst), overwrite=True)
            return
        self._copy_between(source, src, target, dst)

    def _copy_tree(self, src: str, dst: str) -> None:
        """Within one mount, that mount's own copy (its quota checked before anything is copied); across
        mounts, file by file, and on failure what was copied is removed again."""
        source = self._table.serving(src)
        target = self._changeable(dst, "replaced")
        if source is target and not self._table.below(src):
            with self._changing(source):
                source.fs.copy(source.inner(src), source.inner(dst))
            return
        try:
            super()._copy_tree(src, dst)
        except BaseException:
            with contextlib.suppress(OSError):
                self._remove_tree(dst)
            raise

    def _copy_between(self, source: Mounted, src: str, target: Mounted, dst: str) -> None:
        """Stream one file from one mount to another: fixed memory, the target's atomic writer."""
        with source.speaking_outside():
            reader = source.fs.open_read(source.inner(src))
        with (
            reader,
            self._changing(target),
            target.fs.open_write(target.inner(dst), mode="overwrite", create_parents=False) as writer,
        ):
            writer.write_all(reader)

    # --- search ----------------------------------------------------------------------------------------

    def grep(
        self, pattern: str, *, path: str = ".", glob: str | None = None, max_matches: int | None = None
    ) -> Sequence[GrepMatch]:
        """As every backend's ``grep``; without ``glob``, each mount searches its own part (with its own
        index or ripgrep) and the matches are merged in path order."""
        if glob is not None:
            return super().grep(pattern, path=path, glob=glob, max_matches=max_matches)
        GrepPattern(pattern)  # a bad pattern fails here, before any mount is asked
        check_non_negative("max_matches", max_matches)
        limit = DEFAULT_MAX_GREP_MATCHES if max_matches is None else max_matches
        base = self._norm(path)
        serving = self._table.route(base)
        parts = [(serving, base)] if serving is not None else []
        parts += [(nested, nested.point) for nested in self._table.below(base)]
        found: builtins.list[GrepMatch] = []
        for mounted, where in parts:
            with caller_paths({base: path}), mounted.speaking_outside():
                matches = mounted.fs.grep(pattern, path=mounted.inner(where), max_matches=limit)
            kept = [replace(m, path=mounted.outer(m.path)) for m in matches]
            visible = [m for m in kept if not self._table.shadowed(mounted, m.path)]
            if len(visible) < len(kept) and len(kept) >= limit:  # hidden matches used up the mount's answer
                return super().grep(pattern, path=path, max_matches=max_matches)
            found += visible
        found.sort(key=lambda match: (match.path, match.line_number))
        return tuple(found[:limit])

    # --- compare-and-set, decided by the mount that holds the file -------------------------------------

    def _compare_and_set_in(self, path: str, *, changing: bool) -> tuple[Mounted, ConditionalWrites]:
        mounted = self._changeable(path, "written") if changing else self._file_target(path)
        if not mounted.fs.capabilities.conditional_writes:
            raise UnsupportedOperationError(f"The filesystem mounted at {mounted.spelled} has no compare-and-set")
        return mounted, cast(ConditionalWrites, mounted.fs)

    def _content_id(self, path: str) -> str:
        mounted, fs = self._compare_and_set_in(path, changing=False)
        with mounted.speaking_outside():
            return fs.content_id(mounted.inner(path))

    def _open_versioned(self, path: str) -> VersionedContent:
        mounted, fs = self._compare_and_set_in(path, changing=False)
        with mounted.speaking_outside():
            versioned = fs.open_versioned(mounted.inner(path))
        return replace(versioned, stat=replace(versioned.stat, path=path))

    def write_bytes_if(
        self, path: str, content: BytesLike, *, expect: str, read_only: bool | None = None
    ) -> WriteResult:
        """Overwrite ``path`` only if its content id is still ``expect``, as the mount holding it decides."""
        norm = self._norm(path)
        self._writable(path)
        with caller_paths({norm: path}):
            mounted, fs = self._compare_and_set_in(norm, changing=True)
            with mounted.speaking_outside():
                written = fs.write_bytes_if(mounted.inner(norm), content, expect=expect, read_only=read_only)
        return replace(written, path=norm)

    def open_write_if(self, path: str, *, expect: str, read_only: bool | None = None) -> ByteWriter:
        """A streaming writer that commits only over content id ``expect``, as the mount holding it decides."""
        norm = self._norm(path)
        self._writable(path)
        with caller_paths({norm: path}):
            mounted, fs = self._compare_and_set_in(norm, changing=True)
            with mounted.speaking_outside():
                return fs.open_write_if(mounted.inner(norm), expect=expect, read_only=read_only)


def _between(base: str, point: str) -> list[str]:
    """The directories strictly between ``base`` and the mount point ``point`` below it."""
    parts = point.split("/")
    start = len(base.split("/")) if base else 0
    return ["/".join(parts[:depth]) for depth in range(start + 1, len(parts))] if is_within(point, base) else []
