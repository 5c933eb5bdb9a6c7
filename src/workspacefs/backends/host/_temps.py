"""Temporary files of atomic host writes, kept where a crash cannot strand them in the workspace.

Where the kernel allows (Linux ``O_TMPFILE``, opened in the target's resolved directory), new content
is an anonymous inode: it gets a name only once complete, through ``linkat(fd, "", AT_EMPTY_PATH)`` or,
where the kernel refuses us that (before 6.10, unprivileged), ``linkat`` of ``/proc/self/fd/N`` (the final
name for a new file; for an overwrite a temporary name that is renamed over the target at once).
Elsewhere, and for that one instant, content has a temporary name carrying its writer's
identity: boot, pid namespace, pid and start time, so a reused pid is never mistaken for its writer.

A process registers once per root (an empty file named by its identity, in a small registry outside
the root) before it makes its first temporary name. Opening a workspace lists that registry, which
costs no walk; only when a registered writer is dead is the tree walked, once, to remove the
temporary files that writer named, and finish its hidden directories of moves and copies over a directory
(``_trash.py``: removed, or a move completed), and then the writer is dropped. A live writer's files are never
touched, nor files whose writer this process cannot judge (another pid namespace).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import functools
import hashlib
import itertools
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from workspacefs._hostio import (
    DIR_FLAGS,
    TEMP_PREFIX,
    is_listable_name,
    link_descriptor,
    renameat_exchange,
    renameat_noreplace,
)
from workspacefs.backends.host._trash import reap_directory
from workspacefs.errors import ConcurrentChangeError, SpecialFileError
from workspacefs.paths import MAX_PATH_DEPTH

__all__ = [
    "PROC_LINKS",
    "TMPFILE_UNSUPPORTED",
    "ReapReport",
    "TempFile",
    "WriterId",
    "WriterRegistry",
    "cache_dir_for",
    "current_writer",
    "open_anonymous",
    "open_named",
    "registry_dir",
    "root_key",
    "writer_of",
]

TMPFILE_UNSUPPORTED: Final = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)
"""What ``open(O_TMPFILE)`` fails with on a filesystem (or kernel) without anonymous files."""
PROC_LINKS: Final = os.path.isdir("/proc/self/fd")
"""Whether an anonymous file can be named (``linkat`` through ``/proc/self/fd``; no privilege needed)."""
_NAMED_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_ANONYMOUS_FLAGS: Final = os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC
_ATTEMPTS: Final = 8
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class WriterId:
    """A process, told apart from any later one with the same pid (by boot and start time)."""

    boot: str
    pidns: int
    pid: int
    start: int

    @property
    def token(self) -> str:
        """The identity as a name: a registry entry, and the stem of the process's temporary names."""
        return f"{self.boot}-{self.pidns:x}-{self.pid:x}-{self.start:x}"

    @classmethod
    def parse(cls, token: str) -> WriterId | None:
        """The identity a token names, or ``None`` for anything else."""
        parts = token.split("-")
        if len(parts) != 4 or len(parts[0]) != 12:
            return None
        try:
            int(parts[0], 16)
            return cls(parts[0], int(parts[1], 16), int(parts[2], 16), int(parts[3], 16))
        except ValueError:
            return None

    def is_dead(self, me: WriterId) -> bool:
        """Certainly gone, as seen by ``me``; a process of another pid namespace is never judged dead."""
        if self.boot != me.boot:
            return True
        if self.pidns != me.pidns:
            return False
        return not _alive(self.pid, self.start)


def _start_time(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22); ``None`` for a
    zombie, which has exited and writes nothing more (a zombie leader whose threads still run is alive)."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        text = handle.read()
    fields = text[text.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X") and len(os.listdir(f"/proc/{pid}/task")) <= 1:
        return None
    return int(fields[19])


def _alive(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (when unsure: yes)."""
    try:
        return _start_time(pid) == start
    except (OSError, ValueError, IndexError):
        pass
    try:  # /proc may hide other users' processes: ask the kernel whether the pid exists at all
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _read_identity() -> WriterId | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip().replace("-", "")[:12]
        pidns = os.stat("/proc/self/ns/pid").st_ino
        pid = os.getpid()
        start = _start_time(pid)
    except (OSError, ValueError, IndexError):
        return None
    return None if start is None else WriterId(boot, pidns, pid, start)


class _Process:
    """This process's identity, registrations and named temporary files in flight (reset after fork)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start afresh (a forked child is another writer, with nothing registered or in flight)."""
        self.lock = threading.Lock()
        self.identity: WriterId | None = None
        self.known = False
        self.stem = ""
        """What this process's temporary names start with (``TEMP_PREFIX``, its token, a dash), once known."""
        self.registered: set[Path] = set()
        self.in_flight = 0

    def writer(self) -> WriterId | None:
        if not self.known:
            self.identity, self.known = _read_identity(), True
        return self.identity

    def unregister_all(self) -> None:
        """At a normal exit: drop this process from every registry, unless it leaves named files behind."""
        with self.lock:
            if self.in_flight or self.identity is None:
                return
            for directory in self.registered:
                with contextlib.suppress(OSError):
                    os.unlink(directory / self.identity.token)
                    os.rmdir(directory)  # only if no other writer is registered
            self.registered.clear()


_PROCESS = _Process()
_NAMES = itertools.count()
os.register_at_fork(after_in_child=_PROCESS.reset)
atexit.register(_PROCESS.unregister_all)


def current_writer() -> WriterId | None:
    """This process's identity (``None`` without ``/proc``: its temporary files are then never reaped)."""
    return _PROCESS.writer()


def _temp_name() -> str:
    stem = _PROCESS.stem
    if not stem:  # once per process: the identity is read and formatted once
        me = _PROCESS.writer()
        stem = _PROCESS.stem = f"{TEMP_PREFIX}{me.token if me is not None else f'{os.getpid():x}'}-"
    return stem + format(next(_NAMES), "x")


def writer_of(name: str) -> str | None:
    """The writer token in a temporary file's name, ``None`` if the name is not one of ours."""
    if not name.startswith(TEMP_PREFIX):
        return None
    token, dash, _ = name[len(TEMP_PREFIX) :].rpartition("-")
    return token if dash else None


def cache_dir_for(root: str, kind: str) -> Path:
    """A per-root directory under the user's cache (``kind``: ``snapshots``, ``writers``)."""
    return _cache_home() / kind / _root_key(os.path.realpath(root))


def registry_dir(real_root: str, snapshot_dir: Path) -> Path:
    """Where the root (its real path) registers its writers: under the user's cache, keyed by the root like
    snapshots, so every process finds it; beside the snapshots instead if the cache lies inside the root."""
    default = f"{_cache_home()}/writers/{_root_key(real_root)}"
    if _within(default, real_root) or _within(real_root, default):
        return snapshot_dir / "writers"
    return Path(default)


def _within(path: str, directory: str) -> bool:
    """Whether absolute normalised ``path`` is ``directory`` or lies below it (strings: opens stay cheap)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _cache_home() -> Path:
    """``<cache>/workspacefs`` under the user's cache, symlinks resolved."""
    return _resolved(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "workspacefs"


@functools.cache
def _resolved(directory: str) -> Path:
    """``realpath`` once per process and directory: opens stay cheap."""
    return Path(os.path.realpath(directory))


def root_key(real_root: str) -> str:
    """A short name for a root (its real path): the per-root directories of caches and journals."""
    return hashlib.sha256(real_root.encode()).hexdigest()[:16]


_root_key = root_key


@dataclass(frozen=True, slots=True)
class ReapReport:
    """What opening a workspace did about stale temporary files (counts, for tests and diagnostics)."""

    writers_listed: int = 0
    writers_reaped: int = 0
    directories_scanned: int = 0
    files_removed: int = 0
    trees_removed: int = 0
    """Hidden directories of moves and copies over a directory removed (see ``_trash.py``)."""
    moves_completed: int = 0
    """Moves over a directory killed after the source was taken aside, completed (see ``_trash.py``)."""
    state_retired: bool = False
    """Another directory had this root's path before: its journal, snapshots and restore record were set aside
    (see ``_identity.py``)."""
    restores_finished: int = 0
    """Restores killed part way, finished (see ``_restoring.py``)."""
    restores_failed: int = 0
    """Restores killed part way that could not be finished (logged to ``workspacefs.host``; the snapshot was
    deleted since, or restoring it failed)."""


class WriterRegistry:
    """The writers of one root that may hold named temporary files (see the module docstring)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def _register(self) -> None:
        """Record this process, once (under the process lock); a registry that cannot be written costs
        reaping, never a write."""
        me = _PROCESS.writer()
        if self.directory is None or me is None or self.directory in _PROCESS.registered:
            return
        for _ in range(2):  # a second try if another process removed the emptied directory meanwhile
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                os.close(os.open(self.directory / me.token, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            except FileNotFoundError:
                continue
            except OSError:
                return
            _PROCESS.registered.add(self.directory)
            return

    def reserve(self, make: Callable[[str], _T]) -> tuple[str, _T]:
        """A fresh temporary name and what ``make`` made with it; counted in flight until released."""
        with _PROCESS.lock:
            self._register()
            _PROCESS.in_flight += 1
        try:
            for _ in range(_ATTEMPTS):
                name = _temp_name()
                try:
                    return name, make(name)
                except FileExistsError:
                    continue
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))
        except BaseException:
            release_name()
            raise

    def reap(self, root_fd: int) -> ReapReport:
        """Remove the temporary files of dead registered writers below ``root_fd``; never raises."""
        directory = self.directory
        try:
            tokens = os.listdir(directory) if directory is not None else []
        except OSError:
            tokens = []  # the usual case: no writer ever needed a name here
        me = _PROCESS.writer() if tokens else None
        if directory is None or me is None:
            return ReapReport(len(tokens))
        claims: dict[str, int] = {}
        try:
            for token in tokens:
                writer = WriterId.parse(token)
                if writer is not None and writer.is_dead(me) and (fd := _claim(directory / token)) is not None:
                    claims[token] = fd
            if not claims:
                return ReapReport(len(tokens))
            swept = _sweep(root_fd, frozenset(claims))
            for token in claims:
                with contextlib.suppress(OSError):
                    os.unlink(directory / token)
            with contextlib.suppress(OSError):
                os.rmdir(directory)  # only if no writer is registered any more
            return ReapReport(len(tokens), len(claims), *swept)
        finally:
            for fd in claims.values():
                os.close(fd)  # releases the claim


def _claim(entry: Path) -> int | None:
    """An exclusive lock on a dead writer's entry, so concurrent opens reap it once; ``None`` if another
    process holds it, or has reaped it already (the entry is gone)."""
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_nlink:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def release_name() -> None:
    """A reserved temporary name is gone (renamed into place or removed)."""
    with _PROCESS.lock:
        _PROCESS.in_flight -= 1


def _sweep(root_fd: int, writers: frozenset[str]) -> tuple[int, int, int, int]:
    """Remove, below the root, regular files named as temporary files of ``writers``, and finish their hidden
    directories (``_trash.py``); (directories scanned, files removed, trees removed, moves completed)."""
    try:
        fd = os.open(".", DIR_FLAGS, dir_fd=root_fd)
    except OSError:
        return 0, 0, 0, 0
    return _sweep_dir(fd, writers, 0)


def _sweep_dir(fd: int, writers: frozenset[str], depth: int) -> tuple[int, int, int, int]:
    """One directory (closed here) and the directories below it where a write could have landed."""
    counts = [1, 0, 0, 0]
    try:
        with os.scandir(fd) as listing:
            entries = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in listing]
        for name, is_dir, is_file in entries:
            if is_file and writer_of(name) in writers:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
                    counts[1] += 1
            elif is_dir and writer_of(name) in writers:
                trees, moves = reap_directory(fd, name)
                counts[2] += trees
                counts[3] += moves
            elif is_dir and depth + 1 < MAX_PATH_DEPTH and is_listable_name(name):
                try:
                    child = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue  # vanished, unreadable, or swapped for a symlink
                for index, more in enumerate(_sweep_dir(child, writers, depth + 1)):
                    counts[index] += more
    except OSError:
        pass
    finally:
        os.close(fd)
    return counts[0], counts[1], counts[2], counts[3]


_EXCHANGES = 3
"""Attempts at an exchange when the name keeps going and coming back between the exchange and a link."""


class TempFile:
    """New content for one write: an anonymous inode (``name`` empty) or a file under a reserved name."""

    __slots__ = ("_registry", "fd", "name")

    def __init__(self, fd: int, name: str, registry: WriterRegistry) -> None:
        self.fd = fd
        self.name = name
        self._registry = registry

    def publish(
        self, dir_fd: int, target: str, *, replace: bool, check: Callable[[os.stat_result], None] | None = None
    ) -> None:
        """Give the complete content the name ``target`` in ``dir_fd``: replacing what is there, or (create)
        only if nothing is (``FileExistsError``). The descriptor stays open; :meth:`discard` closes it.

        With ``check`` (which raises for an entry a write must not replace), the replacement is an atomic
        exchange (``renameat2(RENAME_EXCHANGE)``), and what it took out of the name is looked at afterwards: a
        FIFO, socket, device, directory or link another process put there after the caller's look is exchanged
        back and ``check`` raises. Where the system cannot exchange, a plain rename, as before."""
        if not replace:
            if not self.claim(dir_fd, target):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))
            return
        if not self.name:  # an anonymous file is renamed from a temporary name of its own, taken at once
            self.name, _ = self._registry.reserve(functools.partial(_name_anonymous, self.fd, dir_fd))
        if check is not None:
            exchanged = renameat_exchange(dir_fd, self.name, target)
            if exchanged:
                self._settle_exchange(dir_fd, target, check)
                return
            if exchanged is not None:
                self._exchange_again(dir_fd, target, check)
                return
        os.rename(self.name, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        self.name = ""
        release_name()

    def _exchange_again(self, dir_fd: int, target: str, check: Callable[[os.stat_result], None]) -> None:
        """The name went between the look and the exchange: take it by a link (which never replaces), or, where
        something came back meanwhile, exchange again; give up after a few rounds."""
        for _ in range(_EXCHANGES):
            if self.claim(dir_fd, target):
                return
            if renameat_exchange(dir_fd, self.name, target):
                self._settle_exchange(dir_fd, target, check)
                return
        raise ConcurrentChangeError(target, "The file kept being replaced and removed while it was written")

    def _settle_exchange(self, dir_fd: int, target: str, check: Callable[[os.stat_result], None]) -> None:
        """After the exchange our content has ``target`` and the temporary name holds what it replaced: removed
        if a regular file, else exchanged back and refused (``check`` raises)."""
        try:
            old = os.stat(self.name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            old = None  # removed by someone else meanwhile: nothing left to remove
        if old is None or stat.S_ISREG(old.st_mode):
            if old is not None:
                try:  # noqa: SIM105 - every overwrite passes here: no context manager to build
                    os.unlink(self.name, dir_fd=dir_fd)
                except FileNotFoundError:
                    pass  # removed by someone else meanwhile
            self.name = ""
            release_name()
            return
        renameat_exchange(dir_fd, self.name, target)  # put it back where it was
        mine = os.fstat(self.fd)
        try:
            back = os.stat(self.name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            back = None
        if back is None or (back.st_ino, back.st_dev) != (mine.st_ino, mine.st_dev):
            self.name = ""  # the name holds something else now (raced again): never remove what is not ours
            release_name()
        check(old)
        raise SpecialFileError(target)  # check refuses whatever is not a regular file; never reached

    def claim(self, dir_fd: int, target: str) -> bool:
        """Give the complete content the name ``target`` only if no entry has it: ``False`` (and no exception to
        pay for) if one does. Never replaces, nor follows a link that has the name."""
        if not self.name:
            return link_descriptor(self.fd, dir_fd, target)
        try:
            _link_new(dir_fd, self.name, target)
        except FileExistsError:
            return False
        self.name = ""
        release_name()
        return True

    def discard(self, dir_fd: int) -> None:
        """Close the descriptor and remove the temporary name if it is still there; idempotent."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.name:
            with contextlib.suppress(OSError):
                os.unlink(self.name, dir_fd=dir_fd)
            self.name = ""
            release_name()


def open_anonymous(dir_fd: int, registry: WriterRegistry) -> TempFile:
    """An ``O_TMPFILE`` in the directory ``dir_fd`` (no name anywhere); ``OSError`` if the system has none."""
    return TempFile(os.open(".", _ANONYMOUS_FLAGS, 0o666, dir_fd=dir_fd), "", registry)


def open_named(dir_fd: int, registry: WriterRegistry) -> TempFile:
    """A file under a fresh temporary name in ``dir_fd``, its writer registered first."""
    name, fd = registry.reserve(lambda name: os.open(name, _NAMED_FLAGS, 0o666, dir_fd=dir_fd))
    return TempFile(fd, name, registry)


def _name_anonymous(fd: int, dir_fd: int, name: str) -> None:
    """Link anonymous file ``fd`` as ``name`` in ``dir_fd`` (``FileExistsError`` if taken: a reservation retries)."""
    if not link_descriptor(fd, dir_fd, name):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))


def _link_new(dir_fd: int, temp: str, name: str) -> None:
    """Give a named temporary file its final name only if nothing has it (a file that appeared meanwhile
    wins), then drop the temporary name."""
    try:
        os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if not renameat_noreplace(dir_fd, temp, dir_fd, name):
            raise
        return
    os.unlink(temp, dir_fd=dir_fd)
