"""Race-proof access to a host directory tree: every path resolved beneath a root descriptor.

Nothing here ever looks a path up by name from the process's own view of the filesystem. A
resolver holds a descriptor of the root and opens everything relative to it, refusing symbolic
links in *every* component: with ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`` where the
kernel has it (one syscall), else one ``openat(O_NOFOLLOW)`` per component. Operations then act
on the descriptor they got (``fstat``, ``*at`` calls on a parent descriptor), never on the name
again, so swapping a directory for a symlink between a check and a use gains an attacker nothing.

Shared by the host backend and by ``InMemoryFilesystem.hydrate_from_host`` (so it sits below both).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Final, TypeVar

from workspacefs import errors
from workspacefs.paths import MAX_PATH_DEPTH, RESERVED_PREFIX, ROOT, join, name_problem, parent

_Seen = TypeVar("_Seen")

__all__ = [
    "DIR_FLAGS",
    "FICLONE",
    "PATH_FLAGS",
    "TEMP_PREFIX",
    "HostResolver",
    "directory_identity",
    "host_error",
    "is_listable_name",
    "link_descriptor",
    "parent_and_name",
    "remove_tree_at",
    "renameat_exchange",
    "renameat_noreplace",
]

_CLOEXEC = os.O_CLOEXEC
PATH_FLAGS: Final = os.O_PATH | _CLOEXEC
"""An inode handle: never opens the file itself, so it cannot block or trigger a device."""
DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
"""A directory opened for listing."""
TEMP_PREFIX: Final = RESERVED_PREFIX
"""Temporary files of in-flight atomic writes (and hidden directories); hidden from listings, glob and grep, and
refused in paths by the validator."""
FICLONE: Final = 0x40049409
"""ioctl that makes a copy-on-write clone of a whole file (XFS, btrfs)."""

_SYS_OPENAT2 = 437  # x86_64 and aarch64 share the number
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_EMPTY_PATH = 0x1000


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - every Linux has a libc
    _LIBC = None
_syscall = getattr(_LIBC, "syscall", None)
if _syscall is not None:
    _syscall.restype = ctypes.c_long
_renameat2 = getattr(_LIBC, "renameat2", None)
if _renameat2 is not None:
    _renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    _renameat2.restype = ctypes.c_int
_linkat = getattr(_LIBC, "linkat", None)
if _linkat is not None:
    _linkat.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int)
    _linkat.restype = ctypes.c_int
_statx = getattr(_LIBC, "statx", None)
if _statx is not None:
    _statx.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)
    _statx.restype = ctypes.c_int
_STATX_INO, _STATX_BTIME = 0x100, 0x800
_empty_path_links: bool | None = None if _linkat is not None else False
"""Whether ``linkat(AT_EMPTY_PATH)`` names an open file here (Linux 6.10+, or with ``CAP_DAC_READ_SEARCH``);
``None`` until a link tells (before 6.10 an unprivileged caller gets ``ENOENT``, as for a vanished directory).
``True`` is no promise: 6.10+ still refuses a descriptor opened under other credentials (``ENOENT`` too)."""
_MAYBE_UNSUPPORTED = (errno.ENOENT, errno.EPERM, errno.EINVAL, errno.ENOSYS)


def directory_identity(fd: int) -> str:
    """Which directory ``fd`` is, for as long as it exists and never for one made later in its place: its inode and
    birth time (``statx``; a file system that keeps no birth time gives the inode only, which a later directory may
    get again). Not the device number: some file systems (btrfs subvolumes, NFS) get another at each mount."""
    found = str(os.fstat(fd).st_ino)
    if _statx is None:
        return found
    buffer = ctypes.create_string_buffer(256)  # struct statx is 256 bytes
    if _statx(fd, b"", _AT_EMPTY_PATH, _STATX_INO | _STATX_BTIME, buffer) != 0:
        return found
    if not int.from_bytes(buffer.raw[0:4], sys.byteorder) & _STATX_BTIME:  # stx_mask
        return found
    seconds = int.from_bytes(buffer.raw[80:88], sys.byteorder, signed=True)  # stx_btime.tv_sec, then tv_nsec
    return f"{found}:{seconds}.{int.from_bytes(buffer.raw[88:92], sys.byteorder):09d}"


def is_listable_name(name: str) -> bool:
    """Whether a directory entry can be named through the protocol (others are not shown at all).

    Hidden: our own temporary files and every name the path validator refuses (``name_problem``: control
    characters, more than 80 characters, bidirectional controls, names not in NFC form such as macOS's NFD,
    and names that are not valid UTF-8, which arrive with surrogate escapes).
    """
    return name_problem(name) is None


def host_error(code: int, path: str) -> OSError:
    """The public exception for a failed host syscall on normalised ``path`` (never a host path)."""
    if code == errno.ENOENT:
        return errors.file_not_found(path)
    if code == errno.ENOTDIR:
        return errors.not_a_directory(path)
    if code == errno.EISDIR:
        return errors.is_a_directory(path)
    if code == errno.EEXIST:
        return errors.file_exists(path)
    if code == errno.ENOTEMPTY:
        return errors.DirectoryNotEmptyError(path)
    if code == errno.EROFS:
        return errors.ReadOnlyError(path)
    if code == errno.ELOOP:
        return errors.SymlinkRefusedError(path)
    if code == errno.EXDEV:
        return errors.PathEscapeError(path)
    if code == errno.ENXIO:
        return errors.SpecialFileError(path)
    if code in (errno.EACCES, errno.EPERM):
        return PermissionError(code, os.strerror(code), path)
    if code == errno.ENAMETOOLONG:
        return OSError(code, "File name too long for the host filesystem", path)
    return OSError(code, os.strerror(code), path)


def renameat_noreplace(src_fd: int, src: str, dst_fd: int, dst: str) -> bool:
    """``renameat2(RENAME_NOREPLACE)``; ``False`` where the system cannot do it (caller falls back)."""
    if _renameat2 is None:
        return False
    result = _renameat2(src_fd, os.fsencode(src), dst_fd, os.fsencode(dst), _RENAME_NOREPLACE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code))


def renameat_exchange(dir_fd: int, one: str, other: str, other_dir_fd: int | None = None) -> bool | None:
    """``renameat2(RENAME_EXCHANGE)`` of ``one`` in ``dir_fd`` and ``other`` (in ``other_dir_fd``, else the same
    directory), atomically: ``True`` done, ``False`` one of them is gone (``ENOENT``), ``None`` where the system
    cannot exchange (caller falls back)."""
    if _renameat2 is None:
        return None
    other_fd = dir_fd if other_dir_fd is None else other_dir_fd
    result = _renameat2(dir_fd, os.fsencode(one), other_fd, os.fsencode(other), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code == errno.ENOENT:
        return False
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return None
    raise OSError(code, os.strerror(code))


def link_descriptor(fd: int, dir_fd: int, name: str) -> bool:
    """Give the open file ``fd`` (an ``O_TMPFILE``) the name ``name`` in ``dir_fd`` if no entry has it (``False``
    if one does: never replaced). By ``linkat(fd, "", AT_EMPTY_PATH)`` where the kernel lets us: cheaper than
    following ``/proc/self/fd/N``, which the kernel has to resolve (the way used where it does not)."""
    global _empty_path_links  # noqa: PLW0603 - learnt once per process
    if _empty_path_links is not False:
        assert _linkat is not None
        if _linkat(fd, b"", dir_fd, os.fsencode(name), _AT_EMPTY_PATH) == 0:
            _empty_path_links = True
            return True
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            return False
        if code not in _MAYBE_UNSUPPORTED:
            raise OSError(code, os.strerror(code))
        # even where it worked before, the kernel refuses a descriptor opened under other credentials (a set*id
        # call since makes new ones, even for the same ids) with ENOENT: /proc names it, or says what is wrong
        probing = _empty_path_links is None
    else:
        probing = False
    try:
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
    except FileExistsError:
        return False
    if probing:
        _empty_path_links = False  # /proc named it where AT_EMPTY_PATH could not: the kernel refuses those
    return True


class HostResolver:
    """Opens paths beneath one root directory descriptor, refusing symlinks in every component."""

    def __init__(self, root: str, *, use_openat2: bool | None = None) -> None:
        self.root_fd = os.open(root, DIR_FLAGS)
        # closes the descriptor if the owner forgets close(): no __del__, no leak
        self._finalizer = weakref.finalize(self, os.close, self.root_fd)
        self._how: dict[tuple[int, int], _OpenHow] = {}
        self.uses_openat2 = self._probe_openat2() if use_openat2 is None else use_openat2

    def _probe_openat2(self) -> bool:
        if _syscall is None:
            return False
        try:
            os.close(self._openat2(".", PATH_FLAGS | os.O_DIRECTORY, 0))
        except OSError:
            return False  # ENOSYS on old kernels, EPERM under some seccomp profiles
        return True

    def _openat2(self, rel: str, flags: int, mode: int) -> int:
        if not (flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE):
            mode = 0  # openat2 is strict: a mode without O_CREAT/O_TMPFILE is EINVAL (O_TMPFILE holds O_DIRECTORY)
        key = (flags, mode)
        how = self._how.get(key)
        if how is None:
            how = self._how[key] = _OpenHow(
                flags | _CLOEXEC, mode, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
            )
        assert _syscall is not None
        fd: int = _syscall(_SYS_OPENAT2, self.root_fd, os.fsencode(rel), ctypes.byref(how), 24)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return fd

    def _walk_open(self, rel: str, flags: int, mode: int) -> int:
        """The portable path: one ``openat(O_NOFOLLOW)`` per component.

        With ``O_PATH`` and no ``O_DIRECTORY`` a final symlink comes back as an ``O_PATH`` handle
        of the link itself; :meth:`fstat_path`, the one such caller, refuses it.
        """
        if "/" not in rel:  # the common single-component case, without the loop
            try:
                return os.open(rel, flags | os.O_NOFOLLOW | _CLOEXEC, mode, dir_fd=self.root_fd)
            except OSError as exc:
                if exc.errno == errno.ENOTDIR and _is_symlink(self.root_fd, rel):
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
                raise
        parts = rel.split("/")
        current = self.root_fd
        part = parts[0]
        try:
            for part in parts[:-1]:
                following = os.open(part, PATH_FLAGS | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=current)
                if current != self.root_fd:
                    os.close(current)
                current = following
            part = parts[-1]
            return os.open(part, flags | os.O_NOFOLLOW | _CLOEXEC, mode, dir_fd=current)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and _is_symlink(current, part):
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
            raise
        finally:
            if current != self.root_fd:
                os.close(current)

    def open(self, rel: str, flags: int, mode: int = 0o666) -> int:
        """Open normalised ``rel`` (not the root) beneath the root; raises ``OSError`` with its errno."""
        if self.uses_openat2 and "/" in rel:
            return self._openat2(rel, flags, mode)
        # one component (or no openat2): openat(O_NOFOLLOW) per component is as safe, and cheaper than ctypes
        return self._walk_open(rel, flags, mode)

    def open_dir(self, rel: str, flags: int = PATH_FLAGS) -> int:
        """A new descriptor of directory ``rel`` (the root included); the caller closes it."""
        if rel == ROOT:
            return (
                os.dup(self.root_fd)
                if flags == PATH_FLAGS
                else os.open(".", flags | os.O_DIRECTORY, dir_fd=self.root_fd)
            )
        return self.open(rel, flags | os.O_DIRECTORY)

    def fstat_path(self, rel: str) -> os.stat_result:
        """``lstat`` of ``rel`` resolved race-free (symlink components refused)."""
        if rel == ROOT:
            return os.fstat(self.root_fd)
        fd = self.open(rel, PATH_FLAGS)
        try:
            info = os.fstat(fd)
        finally:
            os.close(fd)
        if stat.S_ISLNK(info.st_mode):  # the portable walk hands back an O_PATH handle of a final link
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        return info

    def close(self) -> None:
        """Release the root descriptor; idempotent."""
        self._finalizer()
        self.root_fd = -1

    def walk_files(self, base: str) -> Iterator[str]:
        """Normalised paths of the regular files below directory ``base``; symlinks never entered.

        Stops at the path-depth limit; yields nothing if ``base`` is missing or not a directory.
        """
        for path, is_dir in self.walk(base):
            if not is_dir:
                yield path

    def walk(self, base: str) -> Iterator[tuple[str, bool]]:
        """``(path, is_directory)`` of every regular file and directory below ``base``, parents first."""
        try:
            fd = self.open_dir(base, DIR_FLAGS)
        except OSError:
            return
        yield from _walk(fd, base)

    def walk_stat(self, base: str) -> Iterator[tuple[str, os.stat_result]]:
        """``(path, lstat)`` of every regular file and directory below ``base``, parents first; symlinks and
        special files are skipped, never followed (what a command in a sandbox may have changed)."""
        try:
            fd = self.open_dir(base, DIR_FLAGS)
        except OSError:
            return
        yield from _walk_stat(fd, base)


def _walk_stat(fd: int, prefix: str) -> Iterator[tuple[str, os.stat_result]]:
    """As :func:`_walk`, with each entry's ``lstat`` (one ``fstatat`` per entry, by the directory's descriptor)."""
    for path, _, info in _descend(fd, prefix, _lstat):
        yield path, info


def _walk(fd: int, prefix: str) -> Iterator[tuple[str, bool]]:
    """Depth-first over an open directory descriptor (closed here): ``(path, is_dir)``."""
    for path, is_dir, _ in _descend(fd, prefix, _kind):
        yield path, is_dir


def _kind(entry: os.DirEntry[str]) -> tuple[bool, bool, None]:
    """Directory? regular file? from the listing itself (no system call where it tells the type)."""
    return entry.is_dir(follow_symlinks=False), entry.is_file(follow_symlinks=False), None


def _lstat(entry: os.DirEntry[str]) -> tuple[bool, bool, os.stat_result]:
    """Directory? regular file? and the entry's ``lstat``."""
    info = entry.stat(follow_symlinks=False)
    return stat.S_ISDIR(info.st_mode), stat.S_ISREG(info.st_mode), info


def _descend(
    fd: int, prefix: str, look: Callable[[os.DirEntry[str]], tuple[bool, bool, _Seen]]
) -> Iterator[tuple[str, bool, _Seen]]:
    """Depth-first over an open directory descriptor (closed here): ``(path, is_dir, what look saw)`` of every
    regular file and directory, parents first; symlinks and special files are skipped, never followed, and a
    directory swapped for a symlink after the listing is not entered."""
    depth = prefix.count("/") + 1 if prefix else 0
    entries: list[tuple[str, bool, bool, _Seen]] = []
    try:
        with os.scandir(fd) as listing:
            for entry in listing:
                if is_listable_name(entry.name) and depth < MAX_PATH_DEPTH:
                    with contextlib.suppress(OSError):  # removed since the directory was read
                        entries.append((entry.name, *look(entry)))
    except OSError:
        os.close(fd)
        return
    try:
        for name, is_dir, is_file, seen in entries:
            path = join(prefix, name)
            if is_file:
                yield path, False, seen
            elif is_dir:
                yield path, True, seen
                try:
                    child = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue  # vanished, or swapped for a symlink since the listing: skip it
                yield from _descend(child, path, look)
    finally:
        os.close(fd)


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


_TREE_FLAGS: Final = DIR_FLAGS | os.O_NOFOLLOW | os.O_NONBLOCK
"""What a tree's removal opens: a directory or nothing (a FIFO swapped in is never waited on, a link never followed)."""


def remove_tree_at(dir_fd: int, name: str) -> None:
    """Remove directory ``name`` of ``dir_fd`` and everything below it, children first, by descriptor.

    Unlike ``shutil.rmtree`` (whose ``open`` of a directory name it listed, with no ``O_NONBLOCK``, waits forever on a
    FIFO another process swapped in meanwhile), it opens nothing but directories: a name that is no longer one is
    unlinked. Each directory is listed once; iterative, so any depth is removed. ``FileNotFoundError`` if ``name`` is
    gone; other errors as the system call gave them (``ENOTEMPTY`` if another process adds entries meanwhile)."""
    top = os.open(name, _TREE_FLAGS, dir_fd=dir_fd)
    try:
        left_at_top = _empty_but_directories(top)
    except BaseException:
        os.close(top)
        raise
    pending = [(dir_fd, name, top, left_at_top)]  # (parent's fd, name, fd, subdirectories left): each open
    try:
        while pending:
            parent_fd, child, fd, left = pending[-1]
            if not left:
                pending.pop()
                os.close(fd)
                os.rmdir(child, dir_fd=parent_fd)
                continue
            below = left.pop()
            try:
                below_fd = os.open(below, _TREE_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # no longer a directory: a name like any other
                    os.unlink(below, dir_fd=fd)
                elif exc.errno != errno.ENOENT:
                    raise
                continue
            pending.append((fd, below, below_fd, []))  # closed on error from here
            pending[-1] = (fd, below, below_fd, _empty_but_directories(below_fd))
    except BaseException:  # each fd still pending is open; one popped was closed (top too, if its rmdir failed)
        for _, _, fd, _ in pending:
            os.close(fd)
        raise


def _empty_but_directories(fd: int) -> list[str]:
    """Unlink every entry of directory ``fd`` but its subdirectories; their names (a directory swapped in for a
    file meanwhile among them)."""
    with os.scandir(fd) as entries:
        listed = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    directories = []
    for child, is_dir in listed:
        if is_dir:
            directories.append(child)
            continue
        try:
            os.unlink(child, dir_fd=fd)
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            directories.append(child)
    return directories


def parent_and_name(path: str) -> tuple[str, str]:
    """``("a/b", "c")`` for ``"a/b/c"``."""
    return parent(path), path[path.rfind("/") + 1 :]
