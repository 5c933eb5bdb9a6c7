"""The host directory's low-level operations, all by descriptor: what the backend and its snapshots share.

A :class:`HostTree` owns the race-proof resolver of one root and does the few things that touch the
disk — open a parent directory, open a regular file, write a file atomically through a temporary file
(anonymous where the kernel allows, see ``_temps.py``), make a directory, install restored content —
each acting on the descriptor it resolved, never on a name a second time. ``HostFilesystem`` builds the
protocol on it, and the snapshot machinery restores through it, so neither reaches into the other.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from workspacefs import errors
from workspacefs._hostio import (
    DIR_FLAGS,
    PATH_FLAGS,
    HostResolver,
    host_error,
    parent_and_name,
    renameat_exchange,
    renameat_noreplace,
)
from workspacefs.backends._conditional import ANY_VERSION
from workspacefs.backends.host._temps import (
    _EXCHANGES,
    PROC_LINKS,
    TMPFILE_UNSUPPORTED,
    TempFile,
    WriterRegistry,
    open_anonymous,
    open_named,
    release_name,
)
from workspacefs.errors import ConcurrentChangeError, HardLinkRefusedError, PreconditionFailedError, SpecialFileError
from workspacefs.paths import ROOT
from workspacefs.results import FileStat, WriteMode
from workspacefs.streams import ContentHasher, StreamWriter

__all__ = [
    "AppendWriter",
    "ConditionalHostWriter",
    "HostTree",
    "HostWriter",
    "content_id_of_fd",
    "copy_range",
    "fail",
    "lookup_fail",
    "move_over",
    "read_fd",
    "refuse_unless_file",
    "stat_result",
    "write_fd",
]

_PARENT_FLAGS: Final = PATH_FLAGS | os.O_DIRECTORY | os.O_NOFOLLOW
READ_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY  # NONBLOCK: a FIFO can never hang the open
CHUNK: Final = 1024 * 1024


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def stat_result(path: str, info: os.stat_result) -> FileStat:
    if stat.S_ISREG(info.st_mode):
        return FileStat(path, True, False, info.st_size, None, _timestamp(info.st_mtime))
    if stat.S_ISDIR(info.st_mode):
        return FileStat(path, False, True, 0, None, _timestamp(info.st_mtime))
    raise SpecialFileError(path)


def refuse_unless_file(info: os.stat_result, path: str) -> None:
    """Refuse to write over what is not a regular file: a directory, a symlink, a FIFO, socket or device."""
    if stat.S_ISREG(info.st_mode):
        return
    if stat.S_ISDIR(info.st_mode):
        raise errors.is_a_directory(path)
    if stat.S_ISLNK(info.st_mode):
        raise host_error(errno.ELOOP, path)
    raise SpecialFileError(path)


def move_over(
    src_fd: int, src: str, dst_fd: int, dst: str, path: str, *, moved: os.stat_result, writers: WriterRegistry
) -> None:
    """Move ``src`` (``moved``: its ``lstat`` at the caller's look) over the file ``dst`` (``path``: its workspace
    path, for errors), never replacing a FIFO, socket, device, directory or link put there after the caller's look
    (it is refused, and stays), and so that a crash at any instant leaves each visible name its old content or its
    new one: a regular file is first linked to a temporary name of ours beside the target, which is exchanged with
    the target (:func:`_move_linked`). Where it cannot be linked (a directory swapped in at the source since the
    look, a filesystem without hard links, a file of another user under ``protected_hardlinks``) the source itself
    is exchanged (:func:`_move_exchanged`), whose crash window shows the target's old file at the source's name.
    A directory move with ``overwrite`` never comes here: it exchanges the whole tree (``_replace.move_tree_over``)."""
    if stat.S_ISREG(moved.st_mode):
        try:
            temp, _ = writers.reserve(functools.partial(_link_aside, src_fd, src, dst_fd))
        except OSError:
            pass  # cannot be linked: the exchange of the source itself (which raises what a rename would)
        else:
            try:
                _move_linked(src_fd, src, dst_fd, dst, path=path, temp=temp, moved=moved)
            finally:
                release_name()
            return
    _move_exchanged(src_fd, src, dst_fd, dst, path, writers=writers)


def _link_aside(src_fd: int, src: str, dst_fd: int, temp: str) -> None:
    """Give the source's file the temporary name ``temp`` beside the target too (``FileExistsError``: taken)."""
    os.link(src, temp, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)


def _move_linked(src_fd: int, src: str, dst_fd: int, dst: str, *, path: str, temp: str, moved: os.stat_result) -> None:
    """Exchange ``temp`` (a second name of the source's file) with the target, then settle: the target's old regular
    file (now at ``temp``) goes with the source's name (:func:`_drop_source`); anything else is exchanged back and
    refused, the source untouched. ``temp`` never holds a name of ours at the end. At every instant each visible
    name holds what it held or the moved file (both names, at worst), so a crash never mixes them."""
    try:
        exchanged = _exchange_in(dst_fd, dst, temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dst_fd)  # still the source's second name: nothing was exchanged
        raise
    if exchanged is None:  # the system cannot exchange: a plain rename of the source, as before
        os.unlink(temp, dir_fd=dst_fd)
        os.rename(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        return
    if not exchanged:  # the target had gone: ``temp`` took its name without replacing
        _drop_source(src_fd, src, dst_fd, temp, moved)
        return
    try:
        old: os.stat_result | None = os.stat(temp, dir_fd=dst_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and (old.st_ino, old.st_dev) == (moved.st_ino, moved.st_dev):
        os.unlink(temp, dir_fd=dst_fd)  # the target was another name of the source's file, which a rename keeps
    elif old is not None and not stat.S_ISREG(old.st_mode):
        if renameat_exchange(dst_fd, temp, dst):  # put it back; the source never moved
            os.unlink(temp, dir_fd=dst_fd)  # the source's second name
            refuse_unless_file(old, path)
        if _put_back(dst_fd, temp, dst, path):  # the moved file went from the target: theirs goes back there
            refuse_unless_file(old, path)
        # else what was taken out went since: the move stands, as made
    _drop_source(src_fd, src, dst_fd, temp, moved)


def _exchange_in(dst_fd: int, dst: str, temp: str, path: str) -> bool | None:
    """Exchange ``temp`` with the target: ``True`` done; ``False``: the target had gone, and ``temp`` took its name
    without replacing; ``None`` where the system cannot exchange."""
    for _ in range(_EXCHANGES):
        exchanged = renameat_exchange(dst_fd, temp, dst)
        if exchanged is not False:
            return exchanged
        try:  # the target went (``temp`` is ours): take its name without replacing
            if renameat_noreplace(dst_fd, temp, dst_fd, dst):
                return False
        except FileExistsError:
            continue  # something came back at the target meanwhile: exchange again
    raise ConcurrentChangeError(path, "The target kept being replaced and removed while it was moved over")


def _put_back(dst_fd: int, temp: str, dst: str, path: str) -> bool:
    """Give what an exchange took out of the target (at ``temp``) the target's name again, which went since:
    ``False`` if it went from ``temp`` too. Never replaces: a new entry at the target leaves it hidden at ``temp``."""
    try:
        if renameat_noreplace(dst_fd, temp, dst_fd, dst):
            return True
    except FileNotFoundError:
        return False
    except FileExistsError:
        pass
    raise ConcurrentChangeError(path, "The target kept being replaced and removed while it was moved over")


def _drop_source(src_fd: int, src: str, dst_fd: int, temp: str, moved: os.stat_result) -> None:
    """Remove the source's name if it still holds the moved file: renamed over ``temp`` (which removes the target's
    old file there, if any), then looked at; a file another writer gave the name since is put back, never removed."""
    try:
        os.rename(src, temp, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=dst_fd)  # the target's old file, if there
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR):
            return  # the name went, or holds a directory now: not ours to remove
        raise
    _unlink_if_taken(dst_fd, temp, src_fd, src, moved)


def _move_exchanged(src_fd: int, src: str, dst_fd: int, dst: str, path: str, *, writers: WriterRegistry) -> None:
    """Move ``src`` over ``dst`` by exchanging the two, and look at what it took out (now at the source's name, until
    removed): a regular file is removed; a FIFO, socket, device, directory or link is exchanged back and refused.
    Where the name went meanwhile, a rename that never replaces; where the system cannot exchange, a rename."""
    try:
        before: os.stat_result | None = os.stat(dst, dir_fd=dst_fd, follow_symlinks=False)
    except FileNotFoundError:
        before = None
    for _ in range(_EXCHANGES):
        exchanged = renameat_exchange(src_fd, src, dst, dst_fd)
        if exchanged is None:
            os.rename(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            return
        if exchanged:
            break
        try:  # one of the names went: the source (which raises), or the target, taken without replacing
            if renameat_noreplace(src_fd, src, dst_fd, dst):
                return
        except FileExistsError:
            continue  # something came back at the target meanwhile: exchange again
        os.rename(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd)  # no RENAME_NOREPLACE here: as before
        return
    else:
        raise ConcurrentChangeError(path, "The target kept being replaced and removed while it was moved over")
    try:
        old = os.stat(src, dir_fd=src_fd, follow_symlinks=False)
    except FileNotFoundError:
        return  # removed by someone else meanwhile: nothing left to remove
    if stat.S_ISREG(old.st_mode):
        _remove_taken_out(src_fd, src, before, writers)
        return
    if not renameat_exchange(src_fd, src, dst, dst_fd):  # put it back where it was, the source back at its name
        return  # a name went since (the thing taken out, or our file at the target): the move stands, as made
    refuse_unless_file(old, path)


def _remove_taken_out(dir_fd: int, name: str, before: os.stat_result | None, writers: WriterRegistry) -> None:
    """Remove the regular file an exchange put at ``name`` (the target ``before`` it): first taken to a temporary
    name of our own, so a file another writer gave ``name`` since is never removed, but put back."""

    def take(temp: str) -> bool:
        return renameat_noreplace(dir_fd, name, dir_fd, temp)

    try:
        temp, taken = writers.reserve(take)
    except FileNotFoundError:
        return  # removed by someone else meanwhile
    try:
        if not taken:  # the system cannot rename without replacing (it exchanged, so never here): by name
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
            return
        _unlink_if_taken(dir_fd, temp, dir_fd, name, before)
    finally:
        release_name()


def _unlink_if_taken(temp_fd: int, temp: str, name_fd: int, name: str, expected: os.stat_result | None) -> None:
    """Unlink ``temp``, just taken from ``name``, if it is the ``expected`` inode. Anything else is another writer's
    file that got ``name`` meanwhile: it goes back there, unless the name was taken again since (then the newer one
    stands, as if it had replaced this one)."""
    now = os.stat(temp, dir_fd=temp_fd, follow_symlinks=False)
    if expected is None or (now.st_ino, now.st_dev) != (expected.st_ino, expected.st_dev):
        with contextlib.suppress(FileExistsError):
            if renameat_noreplace(temp_fd, temp, name_fd, name):
                return
    os.unlink(temp, dir_fd=temp_fd)


def read_fd(fd: int, size: int) -> bytes:
    """All of a file from its descriptor (``size`` is a hint: the file may have grown)."""
    data = os.read(fd, size + 1)
    if len(data) <= size:
        return data
    chunks = [data]
    while chunk := os.read(fd, CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def write_fd(fd: int, data: bytes | memoryview) -> None:
    written = os.write(fd, data)
    if written < len(data):  # rare: a short write; finish it without copying
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def content_id_of_fd(fd: int, size: int) -> str:
    """The content id of the first ``size`` bytes of an open file (what a reader of that size returns),
    read with ``pread`` so the descriptor's offset stays where it is."""
    hasher = ContentHasher()
    offset = 0
    while offset < size and (chunk := os.pread(fd, min(CHUNK, size - offset), offset)):
        hasher.update(chunk)
        offset += len(chunk)
    return hasher.content_id()


class HostWriter(StreamWriter):
    """Writes into a temporary file of the target's directory (anonymous where the kernel allows); commit
    is ``fsync`` + rename (or link)."""

    __slots__ = ("_dir_fd", "_mode", "_name", "_temp", "_tree")

    def __init__(self, tree: HostTree, path: str, mode: WriteMode) -> None:
        super().__init__(path)
        self._tree = tree
        self._mode = mode
        above, self._name = parent_and_name(path)
        self._dir_fd = tree.open_parent(path, above)
        self._temp: TempFile | None = None
        try:
            tree.check_target(self._dir_fd, self._name, path, mode)
            self._temp = tree.make_temp(self._dir_fd, path)
        except BaseException:
            self._release()
            raise

    def _write_chunk(self, data: bytes) -> None:
        assert self._temp is not None
        write_fd(self._temp.fd, data)

    def _commit(self) -> None:
        temp, self._temp = self._temp, None  # finish_temp consumes it, whatever happens
        assert temp is not None
        try:
            self._tree.finish_temp(temp, self._dir_fd, name=self._name, path=self.path, mode=self._mode)
        finally:
            self._release()

    def _discard(self) -> None:
        self._release()

    def _release(self) -> None:
        if self._temp is not None:
            self._temp.discard(self._dir_fd)
            self._temp = None
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1


class ConditionalHostWriter(HostWriter):
    """A :class:`HostWriter` that replaces the file only if it still holds content id ``expect`` (``"*"``: any
    regular file). The check and the rename happen under an exclusive ``flock`` of the very directory the
    writer renames into (by its descriptor, never by name again), which every conditional writer takes."""

    __slots__ = ("_expect",)

    def __init__(self, tree: HostTree, path: str, expect: str) -> None:
        super().__init__(tree, path, "overwrite")
        self._expect = expect
        try:
            self._check()  # fail before the upload; checked again at commit
        except BaseException:
            self._release()
            raise

    def _check(self) -> None:
        try:
            fd = os.open(self._name, READ_FLAGS | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self._dir_fd)
        except OSError:
            raise PreconditionFailedError(self.path, "The file no longer exists") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise PreconditionFailedError(self.path, "The file no longer exists")
            if self._expect != ANY_VERSION and content_id_of_fd(fd, info.st_size) != self._expect:
                raise PreconditionFailedError(self.path)
        finally:
            os.close(fd)

    def _commit(self) -> None:
        lock = os.open(".", DIR_FLAGS, dir_fd=self._dir_fd)  # a lockable descriptor of the same directory
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._check()
            super()._commit()
        finally:
            os.close(lock)  # closing the only descriptor of that open file releases the lock


class AppendWriter(StreamWriter):
    """Appends in place (append is not atomic by contract); an abort truncates back to the old size."""

    __slots__ = ("_fd", "_start")

    def __init__(self, tree: HostTree, path: str) -> None:
        super().__init__(path)
        self._fd = tree.open_for_append(path)
        self._start = os.fstat(self._fd).st_size

    def _write_chunk(self, data: bytes) -> None:
        write_fd(self._fd, data)

    def _commit(self) -> None:
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)

    def _discard(self) -> None:
        try:
            os.ftruncate(self._fd, self._start)
        finally:
            os.close(self._fd)


class HostTree:
    """Descriptor-based operations beneath one root (see the module docstring)."""

    def __init__(
        self,
        root: str,
        *,
        durable: bool = True,
        use_openat2: bool | None = None,
        use_tmpfile: bool | None = None,
        writers: WriterRegistry | None = None,
    ) -> None:
        self.resolver = HostResolver(root, use_openat2=use_openat2)
        self.durable = durable
        self.use_tmpfile = use_tmpfile
        self.anonymous = use_tmpfile is not False and PROC_LINKS
        """Whether new content starts as an ``O_TMPFILE``; cleared for good when this root's filesystem has none."""
        self.writers = writers or WriterRegistry(None)
        """The root's registry of writers with named temporary files in flight (see ``_temps.py``)."""

    def close(self) -> None:
        """Release the root descriptor; idempotent."""
        self.resolver.close()

    def open_parent(self, path: str, above: str) -> int:
        """A descriptor of ``path``'s parent directory, resolved race-free."""
        try:
            if above and "/" not in above:  # hot path: one component, one openat(O_NOFOLLOW)
                return os.open(above, _PARENT_FLAGS, dir_fd=self.resolver.root_fd)
            return self.resolver.open_dir(above)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and "/" not in above:
                try:  # a symlink fails O_DIRECTORY with ENOTDIR: let the resolver say ELOOP
                    os.close(self.resolver.open_dir(above))
                except OSError as precise:
                    exc = precise
            raise fail(exc, path) from None

    def check_target(self, dir_fd: int, name: str, path: str, mode: WriteMode) -> os.stat_result | None:
        """The entry a write would replace: refuse directories, links, special files, and ``create`` clashes."""
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise fail(exc, path) from None
        refuse_unless_file(info, path)
        if mode == "create":
            raise errors.file_exists(path)
        return info

    def make_temp(self, dir_fd: int, path: str) -> TempFile:
        """A temporary file for new content of ``path`` in its directory ``dir_fd``: anonymous (``O_TMPFILE``)
        where the root's filesystem has them (probed at the first write), else under a registered name."""
        if self.anonymous:
            try:
                return open_anonymous(dir_fd, self.writers)
            except OSError as exc:
                if exc.errno not in TMPFILE_UNSUPPORTED:
                    raise fail(exc, path) from None
                self.anonymous = False
        try:
            return open_named(dir_fd, self.writers)
        except OSError as exc:
            raise fail(exc, path) from None

    def finish_temp(
        self,
        temp: TempFile,
        dir_fd: int,
        *,
        name: str,
        path: str,
        mode: WriteMode,
        keep_mode: bool = True,
        replacing: Callable[[], os.stat_result | None] | None = None,
        fresh: bool = False,
        settled: Callable[[int], None] | None = None,
    ) -> None:
        """Flush the temporary file and put it in place: rename for overwrite, link for create. ``fresh``: the
        name is probably free, so an overwrite links first and looks at the entry only if the name is taken (a
        new file costs no ``stat``, and no ``FileNotFoundError``: a seventh of its write). ``replacing`` (the
        journal's) looks at the entry an overwrite replaces in place of :meth:`check_target`, refusing what it
        refuses and keeping a file for undo, in one open; it returns the entry's ``lstat``, ``None`` if none.
        ``settled`` is called with the new file's descriptor once it has the name (the journal's ``fstat``).

        Always consumes ``temp``: on any failure nothing of it is left.
        """
        try:
            if self.durable:
                os.fsync(temp.fd)
            self._place(temp, dir_fd, name, path, mode, keep_mode=keep_mode, replacing=replacing, fresh=fresh)
            if settled is not None:
                settled(temp.fd)
        except OSError as exc:
            if exc.filename != path:
                raise fail(exc, path) from None
            raise
        finally:
            temp.discard(dir_fd)

    def _place(
        self,
        temp: TempFile,
        dir_fd: int,
        name: str,
        path: str,
        mode: WriteMode,
        *,
        keep_mode: bool,
        replacing: Callable[[], os.stat_result | None] | None,
        fresh: bool,
    ) -> None:
        """Give the flushed ``temp`` the name ``name`` (see :meth:`finish_temp`)."""
        overwrite = mode == "overwrite"
        if fresh and overwrite and temp.claim(dir_fd, name):
            return  # the name was free (linkat never replaces: a name held by anything is left alone)
        look = replacing if replacing is not None and overwrite else None
        old = look() if look is not None else self.check_target(dir_fd, name, path, mode)
        if old is not None and keep_mode:
            os.fchmod(temp.fd, stat.S_IMODE(old.st_mode))  # an overwrite keeps the file's permissions
        if old is None and overwrite:
            # nothing to replace: link straight to the name (no temporary name, no rename); if a file appeared
            # meanwhile, look at it (and keep it) too, then replace it as an overwrite does
            if temp.claim(dir_fd, name):
                return
            if look is not None:
                look()
        # replaced by an exchange, and what it took out looked at after: a FIFO, link … swapped in since the
        # look above is put back and refused, never replaced
        temp.publish(dir_fd, name, replace=overwrite, check=functools.partial(refuse_unless_file, path=path))

    def write_new(
        self,
        dir_fd: int,
        fill: Callable[[int], None],
        *,
        name: str,
        path: str,
        mode: WriteMode,
        keep_mode: bool = True,
        replacing: Callable[[], os.stat_result | None] | None = None,
        fresh: bool = False,
        settled: Callable[[int], None] | None = None,
    ) -> None:
        """Write a file of ``dir_fd`` atomically: ``fill`` writes the content into a temporary file, which then
        takes the name (see :meth:`finish_temp`, and its ``replacing``, ``fresh`` and ``settled``); errors of
        ``fill`` propagate as raised."""
        temp = self.make_temp(dir_fd, path)
        try:
            fill(temp.fd)
        except BaseException:
            temp.discard(dir_fd)
            raise
        self.finish_temp(
            temp,
            dir_fd,
            name=name,
            path=path,
            mode=mode,
            keep_mode=keep_mode,
            replacing=replacing,
            fresh=fresh,
            settled=settled,
        )

    def open_for_append(self, path: str) -> int:
        try:
            fd = self.resolver.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError as exc:
            raise fail(exc, path) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise SpecialFileError(path)
        if info.st_nlink > 1:
            os.close(fd)
            raise HardLinkRefusedError(path)
        return fd

    def is_regular(self, path: str) -> bool:
        try:
            return stat.S_ISREG(self.resolver.fstat_path(path).st_mode)
        except OSError:
            return False

    def open_regular(self, path: str) -> tuple[int, os.stat_result]:
        """A read descriptor of the regular file at ``path`` and its metadata."""
        if path == ROOT:
            raise errors.is_a_directory(path)
        try:
            fd = self.resolver.open(path, READ_FLAGS)
        except OSError as exc:
            raise lookup_fail(exc, path) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                raise errors.is_a_directory(path)
            raise SpecialFileError(path)
        return fd, info

    def install(self, path: str, fill: Callable[[int], None], mode: int, mtime_ns: int) -> None:
        """Write a restored file atomically from ``fill``, with its recorded permissions and time: always a
        new inode, so a file that shares its inode with another name is never changed through this one."""

        def fill_with_metadata(fd: int) -> None:
            fill(fd)
            os.fchmod(fd, mode)
            os.utime(fd, ns=(mtime_ns, mtime_ns))

        above, name = parent_and_name(path)
        dir_fd = self.open_parent(path, above)
        try:
            self.write_new(dir_fd, fill_with_metadata, name=name, path=path, mode="overwrite", keep_mode=False)
        finally:
            os.close(dir_fd)

    def install_copy(self, path: str, src_fd: int, size: int, mode: int, mtime_ns: int) -> None:
        """Give the name ``path`` a fresh copy of the open file ``src_fd`` with ``mode`` and time ``mtime_ns``:
        how metadata changes when other names share the inode (one may live outside the root)."""
        self.install(path, lambda out: copy_range(src_fd, out, size), mode, mtime_ns)

    def make_dir(self, path: str) -> None:
        above, name = parent_and_name(path)
        dir_fd = self.open_parent(path, above)
        try:
            os.mkdir(name, 0o777, dir_fd=dir_fd)
        except OSError as exc:
            raise fail(exc, path) from None
        finally:
            os.close(dir_fd)


def copy_range(src_fd: int, dst_fd: int, size: int) -> None:
    """Copy a whole file between descriptors in the kernel where possible (a reflink on XFS/btrfs)."""
    remaining = size
    try:
        while remaining > 0:
            copied = os.copy_file_range(src_fd, dst_fd, min(remaining, 1 << 30))
            if copied == 0:
                break
            remaining -= copied
        if remaining == 0 and not os.read(src_fd, 1):
            return
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    os.lseek(src_fd, 0, os.SEEK_SET)
    os.lseek(dst_fd, 0, os.SEEK_SET)
    os.ftruncate(dst_fd, 0)
    while chunk := os.read(src_fd, CHUNK):
        write_fd(dst_fd, chunk)


def fail(exc: OSError, path: str) -> OSError:
    """The public error for a failed host call on ``path``."""
    return host_error(exc.errno or errno.EIO, path)


def lookup_fail(exc: OSError, path: str) -> OSError:
    """As :func:`_fail` for lookups: nothing exists below a file, so ENOTDIR means not found."""
    return host_error(errno.ENOENT if exc.errno == errno.ENOTDIR else exc.errno or errno.EIO, path)
