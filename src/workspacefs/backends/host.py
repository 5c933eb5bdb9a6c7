"""``HostFilesystem``: a sandboxed host directory that a hostile model cannot escape.

Security: every path is validated lexically by ``paths.py`` and then resolved from a descriptor of
the root with symlinks refused in every component (``openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)``,
or a per-component ``O_NOFOLLOW`` walk), and each operation acts on the descriptor it resolved —
never on the name a second time. So a ``/allowed-evil`` sibling, a symlink to the outside, or a
directory swapped for a symlink mid-operation cannot lead out of the root. Symlinks are never
followed: listings skip them, touching one raises ``PermissionError``, ``delete`` removes the link.
FIFOs, sockets and devices are refused without blocking. Messages never name host paths.

Writes are atomic: a temporary file in the target's directory, ``fsync``, then ``rename`` (or
``link`` for ``mode="create"``, which cannot replace a file that appeared meanwhile).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from workspacefs import errors
from workspacefs._hostio import (
    DIR_FLAGS,
    PATH_FLAGS,
    TEMP_PREFIX,
    HostResolver,
    host_error,
    is_listable_name,
    parent_and_name,
    renameat_noreplace,
    special_file_error,
)
from workspacefs.backends.base import BaseFilesystem, Fingerprint
from workspacefs.backends.host_grep import Ripgrep
from workspacefs.backends.host_snapshots import HostSnapshots, SnapshotStrategy
from workspacefs.errors import name_caller_path
from workspacefs.paths import ROOT, join
from workspacefs.protocol import ByteReader, ByteWriter
from workspacefs.results import FileEntry, FileStat, WriteMode
from workspacefs.search import GrepPattern
from workspacefs.snapshots import FilesystemSnapshot, SnapshotRetentionPolicy
from workspacefs.streams import StreamReader, StreamWriter

__all__ = ["HostFilesystem"]

_TEMP_NAMES = itertools.count()
_TEMP_STEM = [f"{TEMP_PREFIX}{os.getpid():x}-"]
os.register_at_fork(after_in_child=lambda: _TEMP_STEM.__setitem__(0, f"{TEMP_PREFIX}{os.getpid():x}-"))
_PARENT_FLAGS = PATH_FLAGS | os.O_DIRECTORY | os.O_NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY  # NONBLOCK: a FIFO can never hang the open
_CHUNK = 1024 * 1024


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _stat_result(path: str, info: os.stat_result) -> FileStat:
    if stat.S_ISREG(info.st_mode):
        return FileStat(path, True, False, info.st_size, None, _timestamp(info.st_mtime))
    if stat.S_ISDIR(info.st_mode):
        return FileStat(path, False, True, 0, None, _timestamp(info.st_mtime))
    raise special_file_error(path)


def _read_fd(fd: int, size: int) -> bytes:
    """All of a file from its descriptor (``size`` is a hint: the file may have grown)."""
    data = os.read(fd, size + 1)
    if len(data) <= size:
        return data
    chunks = [data]
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_fd(fd: int, data: bytes | memoryview) -> None:
    written = os.write(fd, data)
    if written < len(data):  # rare: a short write; finish it without copying
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


class _HostWriter(StreamWriter):
    """Writes into a hidden temporary file beside the target; commit is ``fsync`` + rename (or link)."""

    __slots__ = ("_dir_fd", "_fd", "_fs", "_mode", "_name", "_temp")

    def __init__(self, fs: HostFilesystem, path: str, mode: WriteMode) -> None:
        super().__init__(path)
        self._fs = fs
        self._mode = mode
        above, self._name = parent_and_name(path)
        self._dir_fd = fs._open_parent(path, above)
        self._fd = -1
        self._temp = ""
        try:
            fs._check_target(self._dir_fd, self._name, path, mode)
            self._fd, self._temp = fs._make_temp(self._dir_fd, path)
        except BaseException:
            self._release()
            raise

    def _write_chunk(self, data: bytes) -> None:
        _write_fd(self._fd, data)

    def _commit(self) -> None:
        fd, temp = self._fd, self._temp
        self._fd, self._temp = -1, ""  # _finish_temp consumes both, whatever happens
        try:
            self._fs._finish_temp(fd, self._dir_fd, temp, name=self._name, path=self.path, mode=self._mode)
        finally:
            self._release()

    def _discard(self) -> None:
        self._release()

    def _release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._temp:
            with contextlib.suppress(OSError):
                os.unlink(self._temp, dir_fd=self._dir_fd)
            self._temp = ""
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1


class _AppendWriter(StreamWriter):
    """Appends in place (append is not atomic by contract); an abort truncates back to the old size."""

    __slots__ = ("_fd", "_start")

    def __init__(self, fs: HostFilesystem, path: str) -> None:
        super().__init__(path)
        self._fd = fs._open_for_append(path)
        self._start = os.fstat(self._fd).st_size

    def _write_chunk(self, data: bytes) -> None:
        _write_fd(self._fd, data)

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


class HostFilesystem(BaseFilesystem):
    """A host directory, sandboxed: see the module docstring for what that guarantees.

    Warning: this backend touches a real disk. Point it at a directory the agent may change, and
    give it a ``snapshot_dir`` outside that directory (the default lives under the user's cache).
    """

    backend_name: ClassVar[str] = "host"

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
    ) -> None:
        super().__init__(read_only=read_only, mount_point=mount_point)
        self._root = os.fspath(root)
        if not os.path.isdir(self._root):
            raise NotADirectoryError(errno.ENOTDIR, "Workspace root is not a directory", self._root)
        self._resolver = HostResolver(self._root, use_openat2=use_openat2)
        self._durable = durable
        self._snapshots = HostSnapshots(
            self, strategy=snapshot_strategy, snapshot_dir=snapshot_dir, retention=retention
        )
        self._ripgrep = Ripgrep.find() if use_ripgrep is not False else None
        if use_ripgrep and self._ripgrep is None:
            raise RuntimeError("use_ripgrep=True but no rg binary was found (install ripgrep)")

    # --- properties ---------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The host directory, as given."""
        return self._root

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
        return self._resolver

    def close(self) -> None:
        """Release the root descriptor and any helper process; idempotent."""
        self._snapshots.close()
        self._resolver.close()

    # --- helpers --------------------------------------------------------------------------------------

    def _open_parent(self, path: str, above: str) -> int:
        """A descriptor of ``path``'s parent directory, resolved race-free."""
        try:
            if above and "/" not in above:  # hot path: one component, one openat(O_NOFOLLOW)
                return os.open(above, _PARENT_FLAGS, dir_fd=self._resolver.root_fd)
            return self._resolver.open_dir(above)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and "/" not in above:
                try:  # a symlink fails O_DIRECTORY with ENOTDIR: let the resolver say ELOOP
                    os.close(self._resolver.open_dir(above))
                except OSError as precise:
                    exc = precise
            raise _fail(exc, path) from None

    def _check_target(self, dir_fd: int, name: str, path: str, mode: WriteMode) -> os.stat_result | None:
        """The entry a write would replace: refuse directories, links, special files, and ``create`` clashes."""
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _fail(exc, path) from None
        if stat.S_ISDIR(info.st_mode):
            raise errors.is_a_directory(path)
        if stat.S_ISLNK(info.st_mode):
            raise host_error(errno.ELOOP, path)
        if not stat.S_ISREG(info.st_mode):
            raise special_file_error(path)
        if mode == "create":
            raise errors.file_exists(path)
        return info

    def _make_temp(self, dir_fd: int, path: str) -> tuple[int, str]:
        for _ in range(8):
            # unique within this process by the counter, across processes by the pid; O_EXCL checks anyway
            temp = f"{_TEMP_STEM[0]}{next(_TEMP_NAMES):x}"
            try:
                fd = os.open(
                    temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd
                )
            except FileExistsError:
                continue
            except OSError as exc:
                raise _fail(exc, path) from None
            return fd, temp
        raise host_error(errno.EEXIST, path)

    def _finish_temp(
        self, fd: int, dir_fd: int, temp: str, *, name: str, path: str, mode: WriteMode, keep_mode: bool = True
    ) -> None:
        """Flush the temporary file and put it in place: rename for overwrite, link for create.

        Always consumes ``fd`` and ``temp``: on any failure the temporary file is removed.
        """
        try:
            try:
                if self._durable:
                    os.fsync(fd)
                old = self._check_target(dir_fd, name, path, mode)
                if old is not None and keep_mode:
                    os.fchmod(fd, stat.S_IMODE(old.st_mode))  # an overwrite keeps the file's permissions
            finally:
                os.close(fd)
            if mode == "create":
                self._link_new(dir_fd, temp, name)
            else:
                os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            if isinstance(exc, OSError) and exc.filename != path:
                raise _fail(exc, path) from None
            raise

    @staticmethod
    def _link_new(dir_fd: int, temp: str, name: str) -> None:
        """Give the temporary file its name only if nothing has it (a file that appeared meanwhile wins)."""
        try:
            os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            if not renameat_noreplace(dir_fd, temp, dir_fd, name):
                raise
            return
        os.unlink(temp, dir_fd=dir_fd)

    def _open_for_append(self, path: str) -> int:
        try:
            fd = self._resolver.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError as exc:
            raise _fail(exc, path) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise special_file_error(path)
        if info.st_nlink > 1:
            os.close(fd)
            raise errors.permission_denied(
                path, "Refusing to append to a file with several hard links (another name may live outside the root)"
            )
        return fd

    def _is_regular(self, path: str) -> bool:
        try:
            return stat.S_ISREG(self._resolver.fstat_path(path).st_mode)
        except OSError:
            return False

    def _open_regular(self, path: str) -> tuple[int, os.stat_result]:
        """A read descriptor of the regular file at ``path`` and its metadata."""
        if path == ROOT:
            raise errors.is_a_directory(path)
        try:
            fd = self._resolver.open(path, _READ_FLAGS)
        except OSError as exc:
            raise _lookup_fail(exc, path) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                raise errors.is_a_directory(path)
            raise special_file_error(path)
        return fd, info

    # --- primitives -------------------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStat:
        try:
            info = self._resolver.fstat_path(path)
        except OSError as exc:
            raise _lookup_fail(exc, path) from None
        return _stat_result(path, info)

    def _list_dir(self, path: str) -> Sequence[FileEntry]:
        try:
            fd = self._resolver.open_dir(path, DIR_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and self._is_regular(path):
                raise errors.not_a_directory(path) from None
            raise _lookup_fail(exc, path) from None
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
        fd, info = self._open_regular(path)
        return StreamReader(path, os.fdopen(fd, "rb", buffering=0), info.st_size)

    def _open_content(self, path: str, inline_limit: int) -> bytes | ByteReader:
        fd, info = self._open_regular(path)
        if info.st_size > inline_limit:
            return StreamReader(path, os.fdopen(fd, "rb", buffering=0), info.st_size)
        try:
            return _read_fd(fd, info.st_size)
        finally:
            os.close(fd)

    def _open_writer(self, path: str, mode: WriteMode) -> ByteWriter:
        if mode == "append":
            return _AppendWriter(self, path)
        return _HostWriter(self, path, mode)

    def _write_content(self, path: str, data: bytes, mode: WriteMode) -> None:
        if mode == "append":
            fd = self._open_for_append(path)
            try:
                _write_fd(fd, data)
                if self._durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            return
        cut = path.rfind("/")
        above, name = (path[:cut], path[cut + 1 :]) if cut >= 0 else (ROOT, path)
        dir_fd = self._open_parent(path, above)
        try:
            if mode == "create":
                self._check_target(dir_fd, name, path, mode)  # fail before writing; the link re-checks
            fd, temp = self._make_temp(dir_fd, path)
            try:
                _write_fd(fd, data)
            except OSError as exc:
                os.close(fd)
                os.unlink(temp, dir_fd=dir_fd)
                raise _fail(exc, path) from None
            self._finish_temp(fd, dir_fd, temp, name=name, path=path, mode=mode)
        finally:
            os.close(dir_fd)

    def _install(self, path: str, fill: Callable[[int], None], mode: int, mtime_ns: int) -> None:
        """Write a restored file atomically from ``fill``, with its recorded permissions and time."""
        above, name = parent_and_name(path)
        dir_fd = self._open_parent(path, above)
        try:
            fd, temp = self._make_temp(dir_fd, path)
            try:
                fill(fd)
                os.fchmod(fd, mode)
                os.utime(fd, ns=(mtime_ns, mtime_ns))
            except BaseException:
                os.close(fd)
                os.unlink(temp, dir_fd=dir_fd)
                raise
            self._finish_temp(fd, dir_fd, temp, name=name, path=path, mode="overwrite", keep_mode=False)
        finally:
            os.close(dir_fd)

    def _make_dir(self, path: str) -> None:
        above, name = parent_and_name(path)
        dir_fd = self._open_parent(path, above)
        try:
            os.mkdir(name, 0o777, dir_fd=dir_fd)
        except OSError as exc:
            raise _fail(exc, path) from None
        finally:
            os.close(dir_fd)

    def _remove_file(self, path: str) -> None:
        above, name = parent_and_name(path)
        dir_fd = self._open_parent(path, above)
        try:
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError as exc:
                raise _fail(exc, path) from None
            if stat.S_ISDIR(info.st_mode):
                raise errors.is_a_directory(path)
            try:
                os.unlink(name, dir_fd=dir_fd)  # a symlink goes itself; its target is untouched
            except OSError as exc:
                raise _fail(exc, path) from None
        finally:
            os.close(dir_fd)

    def _remove_empty_dir(self, path: str) -> None:
        above, name = parent_and_name(path)
        dir_fd = self._open_parent(path, above)
        try:
            os.rmdir(name, dir_fd=dir_fd)
        except OSError as exc:
            raise _fail(exc, path) from None
        finally:
            os.close(dir_fd)

    def _remove_tree(self, path: str) -> None:
        above, name = parent_and_name(path)
        dir_fd = self._open_parent(path, above)
        try:
            # rmtree with dir_fd walks by descriptor and re-checks each directory it enters
            shutil.rmtree(name, dir_fd=dir_fd)
        except OSError as exc:
            raise _fail(exc, path) from None
        finally:
            os.close(dir_fd)

    def _rename(self, src: str, dst: str, *, replace: bool) -> None:
        src_above, src_name = parent_and_name(src)
        dst_above, dst_name = parent_and_name(dst)
        src_fd = self._open_parent(src, src_above)
        try:
            dst_fd = self._open_parent(dst, dst_above)
        except BaseException:
            os.close(src_fd)
            raise
        try:
            try:
                info = os.stat(src_name, dir_fd=src_fd, follow_symlinks=False)
            except OSError as exc:
                raise _fail(exc, src) from None
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                raise special_file_error(src)
            try:
                if replace or not renameat_noreplace(src_fd, src_name, dst_fd, dst_name):
                    if not replace:
                        self._check_absent(dst_fd, dst_name, dst)
                    os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            except FileExistsError as exc:
                raise errors.file_exists(dst) from exc
            except OSError as exc:
                if exc.filename == dst:
                    raise
                raise _fail(exc, dst if exc.errno in (errno.EISDIR, errno.ENOTDIR) else src) from None
        finally:
            os.close(src_fd)
            os.close(dst_fd)

    @staticmethod
    def _check_absent(dir_fd: int, name: str, path: str) -> None:
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        raise errors.file_exists(path)

    def _copy_file(self, src: str, dst: str) -> None:
        src_fd, info = self._open_regular(src)
        try:
            above, name = parent_and_name(dst)
            dir_fd = self._open_parent(dst, above)
            try:
                self._check_target(dir_fd, name, dst, "overwrite")
                fd, temp = self._make_temp(dir_fd, dst)
                try:
                    _copy_range(src_fd, fd, info.st_size)
                except OSError as exc:
                    os.close(fd)
                    os.unlink(temp, dir_fd=dir_fd)
                    raise _fail(exc, dst) from None
                self._finish_temp(fd, dir_fd, temp, name=name, path=dst, mode="overwrite")
            finally:
                os.close(dir_fd)
        finally:
            os.close(src_fd)

    def _iter_files(self, base: str) -> Iterator[str]:
        return self._resolver.walk_files(base)

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """As :meth:`BaseFilesystem.delete`; a symlink, FIFO, socket or device is removed itself (a
        link's target is never touched)."""
        norm = self._norm(path)
        if norm != ROOT and not self._read_only and self._is_odd_entry(norm):
            try:
                self._remove_file(norm)  # unlinks the entry itself
            except OSError as exc:
                name_caller_path(exc, norm, path)
                raise
            return
        super().delete(path, recursive=recursive)

    def _is_odd_entry(self, path: str) -> bool:
        """True if ``path`` names a symlink or special file (resolving its parent race-free)."""
        above, name = parent_and_name(path)
        try:
            dir_fd = self._resolver.open_dir(above)
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

    # --- snapshots ---------------------------------------------------------------------------------------

    def _capture(self, tag: str | None) -> FilesystemSnapshot:
        return self._snapshots.capture(tag)

    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        self._snapshots.restore(snapshot)

    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        return self._snapshots.manifest(snapshot)

    def snapshots(self) -> Sequence[FilesystemSnapshot]:
        """Every stored snapshot of this root, oldest first (including those of earlier processes)."""
        return self._snapshots.list()

    def delete_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        """Remove a stored snapshot and its data."""
        self._snapshots.delete(snapshot.snapshot_id)

    def __repr__(self) -> str:
        flags = ", read_only=True" if self._read_only else ""
        return f"HostFilesystem({self._root!r}{flags}, snapshot_strategy={self.snapshot_strategy!r})"


def _copy_range(src_fd: int, dst_fd: int, size: int) -> None:
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
    while chunk := os.read(src_fd, _CHUNK):
        _write_fd(dst_fd, chunk)


def _fail(exc: OSError, path: str) -> OSError:
    """The public error for a failed host call on ``path``."""
    return host_error(exc.errno or errno.EIO, path)


def _lookup_fail(exc: OSError, path: str) -> OSError:
    """As :func:`_fail` for lookups: nothing exists below a file, so ENOTDIR means not found."""
    return host_error(errno.ENOENT if exc.errno == errno.ENOTDIR else exc.errno or errno.EIO, path)


def open_host(url: str, params: dict[str, str]) -> HostFilesystem:
    """``file:///abs/dir?read_only=true&snapshot_strategy=git&snapshot_dir=/x`` for :func:`open_filesystem`."""
    from urllib.parse import unquote, urlsplit  # noqa: PLC0415

    from workspacefs.open import query_flag  # noqa: PLC0415

    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"file:// URLs name a local directory; got host {parts.netloc!r}")
    root = unquote(parts.path)
    if not root.startswith("/"):
        raise ValueError(f"file:// URLs need an absolute path, got {url!r}")
    allowed = {"read_only", "mount_point", "snapshot_strategy", "snapshot_dir", "durable"}
    unknown = set(params) - allowed
    if unknown:
        raise ValueError(f"Unknown option(s) for file://: {', '.join(sorted(unknown))}")
    return HostFilesystem(
        root,
        read_only=query_flag(params, "read_only"),
        mount_point=params.get("mount_point"),
        snapshot_strategy=params.get("snapshot_strategy"),
        snapshot_dir=params.get("snapshot_dir"),
        durable=query_flag(params, "durable", default=True),
    )
