"""Where host snapshots keep file content: reflink clones, a git object store, a tar archive, a copy.

A strategy only stores and returns *content*. Walking the workspace (race-proof, through the
resolver), the manifest of paths and metadata, and restoring (through the backend's own atomic,
race-proof writes) are shared in ``_snapshots.py``, so no strategy ever reads or writes the
workspace by name.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, ClassVar, Final

from workspacefs._hostio import FICLONE
from workspacefs.errors import SnapshotCreationError, SnapshotRestoreError
from workspacefs.paths import normalize_path

__all__ = [
    "STRATEGIES",
    "ArchiveStrategy",
    "CopyStrategy",
    "GitStrategy",
    "ReflinkStrategy",
    "Sink",
    "SnapshotStrategy",
    "digest_of",
]

_CHUNK: Final = 1024 * 1024
Fill = Callable[[int], None]
"""Writes one file's stored content into an open descriptor."""


def _new_hash(kind: str, size: int) -> hashlib._Hash:
    if kind == "git":
        digest = hashlib.sha1(usedforsecurity=False)
        digest.update(b"blob %d\0" % size)  # git's blob id: so unchanged files need not be re-sent
        return digest
    return hashlib.sha256()


def digest_of(fd: int, size: int, kind: str) -> str:
    """Digest of an open file's content (``kind`` ``"sha256"`` or ``"git"``), read from its start."""
    digest = _new_hash(kind, size)
    for chunk in _chunks(fd, size):
        digest.update(chunk)
    return digest.hexdigest()


def _chunks(fd: int, size: int) -> Iterator[bytes]:
    """Exactly ``size`` bytes of a file from offset 0; a file that shrank meanwhile is an error."""
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(_CHUNK, size - offset), offset)
        if not chunk:
            raise SnapshotCreationError("A file shrank while the snapshot was being taken; take it again")
        offset += len(chunk)
        yield chunk


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _copy_stream(source: IO[bytes], fd: int) -> None:
    while chunk := source.read(_CHUNK):
        _write_all(fd, chunk)


class Sink(ABC):
    """One snapshot being taken: it receives every directory and file, then commits or aborts."""

    @abstractmethod
    def add_dir(self, path: str, mode: int) -> None:
        """Record a directory."""

    @abstractmethod
    def add_file(self, path: str, fd: int, info: os.stat_result, known_digest: str | None) -> str | None:
        """Store a file's content from ``fd``; return its digest if this strategy keeps one.

        ``known_digest`` is the digest of identical content stored by an earlier snapshot, when
        the file's size and time say it is unchanged; a strategy may use it instead of reading.
        """

    @abstractmethod
    def commit(self, message: str) -> str | None:
        """Make the snapshot durable; return the strategy's reference to it."""

    @abstractmethod
    def abort(self) -> None:
        """Drop whatever was stored."""


class SnapshotStrategy(ABC):
    """A place for snapshot content inside ``directory`` (the snapshot directory, outside the root)."""

    name: ClassVar[str]
    digest_kind: ClassVar[str | None] = None
    """Digest every manifest entry carries (``None``: content is compared on demand)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.git_dir: Path | None = None
        """The external git repository content is kept in (the git strategy), recorded in each snapshot."""

    @classmethod
    @abstractmethod
    def available(cls, root_fd: int, directory: Path) -> bool:
        """Whether this strategy works for this root and snapshot directory."""

    @abstractmethod
    def begin(self, snapshot_id: str) -> Sink:
        """Start taking a snapshot."""

    @abstractmethod
    def fills(self, snapshot_id: str, wanted: dict[str, str | None]) -> Iterator[tuple[str, Fill]]:
        """For each wanted path (mapped to its digest), a function filling a descriptor with its content.

        Call each function before advancing: archives are read in one pass.
        """

    @abstractmethod
    def discard(self, snapshot_id: str) -> None:
        """Delete a snapshot's content."""

    def close(self) -> None:
        """Release helper processes."""

    def _data(self, snapshot_id: str) -> Path:
        return self.directory / "data" / snapshot_id


# --- copy and reflink: a directory tree per snapshot ---------------------------------------------------


class _TreeSink(Sink):
    def __init__(self, strategy: CopyStrategy, snapshot_id: str) -> None:
        self._final = strategy._data(snapshot_id)
        self._staging = self._final.with_name(snapshot_id + ".partial")
        self._staging.mkdir(parents=True)
        self._strategy = strategy

    def add_dir(self, path: str, mode: int) -> None:
        (self._staging / path).mkdir(parents=True, exist_ok=True)

    def add_file(self, path: str, fd: int, info: os.stat_result, known_digest: str | None) -> str | None:
        target = self._staging / path
        target.parent.mkdir(parents=True, exist_ok=True)
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            return self._strategy._store(fd, out, info.st_size)
        finally:
            os.close(out)

    def commit(self, message: str) -> str | None:
        self._staging.rename(self._final)
        return self._final.name

    def abort(self) -> None:
        shutil.rmtree(self._staging, ignore_errors=True)


class CopyStrategy(SnapshotStrategy):
    """A full copy of every file (works everywhere; costs the workspace's size per snapshot)."""

    name = "copy"
    digest_kind: ClassVar[str | None] = "sha256"

    @classmethod
    def available(cls, root_fd: int, directory: Path) -> bool:
        return True

    def begin(self, snapshot_id: str) -> Sink:
        return _TreeSink(self, snapshot_id)

    def _store(self, src: int, dst: int, size: int) -> str | None:
        digest = _new_hash("sha256", size)
        for chunk in _chunks(src, size):
            digest.update(chunk)
            _write_all(dst, chunk)
        return digest.hexdigest()

    def fills(self, snapshot_id: str, wanted: dict[str, str | None]) -> Iterator[tuple[str, Fill]]:
        base = self._data(snapshot_id)
        for path in sorted(wanted):
            yield path, self._filler(base / path)

    def _filler(self, stored: Path) -> Fill:
        def fill(fd: int) -> None:
            with open(stored, "rb") as source:
                _copy_stream(source, fd)

        return fill

    def discard(self, snapshot_id: str) -> None:
        shutil.rmtree(self._data(snapshot_id), ignore_errors=True)


class ReflinkStrategy(CopyStrategy):
    """Copy-on-write clones (XFS, btrfs): a snapshot costs metadata, not the workspace's size."""

    name = "reflink"
    digest_kind: ClassVar[str | None] = None

    @classmethod
    def available(cls, root_fd: int, directory: Path) -> bool:
        """Detected, never assumed: same filesystem as the root, and a test clone succeeds."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if os.fstat(root_fd).st_dev != os.stat(directory).st_dev:
                return False
            probe = directory / f".reflink-probe-{os.getpid()}"
            clone = probe.with_suffix(".clone")
            try:
                probe.write_bytes(b"probe")
                with open(probe, "rb") as source, open(clone, "wb") as target:
                    fcntl.ioctl(target.fileno(), FICLONE, source.fileno())
            finally:
                probe.unlink(missing_ok=True)
                clone.unlink(missing_ok=True)
        except OSError:
            return False
        return True

    def _store(self, src: int, dst: int, size: int) -> str | None:
        fcntl.ioctl(dst, FICLONE, src)
        return None

    def _filler(self, stored: Path) -> Fill:
        def fill(fd: int) -> None:
            with open(stored, "rb") as source:
                try:
                    fcntl.ioctl(fd, FICLONE, source.fileno())
                except OSError as exc:
                    if exc.errno not in (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL):
                        raise
                    _copy_stream(source, fd)

        return fill


# --- archive: one tar.gz per snapshot ------------------------------------------------------------------


class _HashingReader:
    """Feeds ``tarfile`` exactly ``size`` bytes of a descriptor while hashing them."""

    def __init__(self, fd: int, size: int) -> None:
        self._chunks = _chunks(fd, size)
        self._pending = b""
        self.digest = _new_hash("sha256", size)

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._pending) < size:
            chunk = next(self._chunks, b"")
            if not chunk:
                break
            self.digest.update(chunk)
            self._pending += chunk
        if size < 0:
            size = len(self._pending)
        data, self._pending = self._pending[:size], self._pending[size:]
        return data


class _ArchiveSink(Sink):
    def __init__(self, target: Path) -> None:
        self._target = target
        self._staging = target.with_name(target.name + ".partial")
        self._tar = tarfile.open(  # noqa: SIM115 - closed by commit() or abort()
            self._staging, "w:gz", compresslevel=1, format=tarfile.PAX_FORMAT
        )

    def add_dir(self, path: str, mode: int) -> None:
        info = tarfile.TarInfo(path)
        info.type = tarfile.DIRTYPE
        info.mode = mode & 0o7777
        self._tar.addfile(info)

    def add_file(self, path: str, fd: int, info: os.stat_result, known_digest: str | None) -> str | None:
        member = tarfile.TarInfo(path)
        member.size = info.st_size
        member.mode = info.st_mode & 0o7777
        member.mtime = int(info.st_mtime)
        reader = _HashingReader(fd, info.st_size)
        self._tar.addfile(member, reader)
        return reader.digest.hexdigest()

    def commit(self, message: str) -> str | None:
        self._tar.close()
        self._staging.rename(self._target)
        return self._target.name

    def abort(self) -> None:
        self._tar.close()
        self._staging.unlink(missing_ok=True)


class ArchiveStrategy(SnapshotStrategy):
    """A compressed tar per snapshot; extraction refuses absolute names, ``..`` and links."""

    name = "archive"
    digest_kind = "sha256"

    @classmethod
    def available(cls, root_fd: int, directory: Path) -> bool:
        return True

    def _archive(self, snapshot_id: str) -> Path:
        return self.directory / "data" / f"{snapshot_id}.tar.gz"

    def begin(self, snapshot_id: str) -> Sink:
        self._archive(snapshot_id).parent.mkdir(parents=True, exist_ok=True)
        return _ArchiveSink(self._archive(snapshot_id))

    def fills(self, snapshot_id: str, wanted: dict[str, str | None]) -> Iterator[tuple[str, Fill]]:
        try:
            archive = tarfile.open(self._archive(snapshot_id), "r:gz")  # noqa: SIM115 - closed just below
        except (OSError, tarfile.TarError) as exc:
            raise SnapshotRestoreError(f"Snapshot {snapshot_id} archive cannot be read: {exc}") from None
        with archive:
            for member in archive:
                name = _checked_member(member)
                if name not in wanted or not member.isfile():
                    continue
                source = archive.extractfile(member)
                assert source is not None
                yield name, _stream_filler(source)

    def discard(self, snapshot_id: str) -> None:
        self._archive(snapshot_id).unlink(missing_ok=True)


def _checked_member(member: tarfile.TarInfo) -> str:
    """The member's workspace path; ``SnapshotRestoreError`` for anything that could leave the root."""
    name = member.name
    if name.startswith("/") or ".." in name.split("/") or not (member.isfile() or member.isdir()):
        raise SnapshotRestoreError(f"Refusing unsafe archive member {name!r} (absolute, '..' or a link)")
    try:
        return normalize_path(name)
    except (ValueError, PermissionError) as exc:
        raise SnapshotRestoreError(f"Refusing unsafe archive member {name!r}: {exc}") from None


def _stream_filler(source: IO[bytes]) -> Fill:
    def fill(fd: int) -> None:
        _copy_stream(source, fd)

    return fill


# --- git: an external bare repository as a deduplicating object store ---------------------------------


def _quote(path: str) -> str:
    """A path for ``git fast-import``, C-quoted so any name survives."""
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


class _GitSink(Sink):
    def __init__(self, strategy: GitStrategy, snapshot_id: str) -> None:
        self._strategy = strategy
        self._ref = f"refs/snapshots/{snapshot_id}"
        self._process = strategy._start(
            "fast-import", "--quiet", "--done", stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        stdin = self._process.stdin
        assert stdin is not None
        self._stdin: IO[bytes] = stdin
        self._stdin.write(b"feature done\n")
        self._lines: list[bytes] = []
        self._mark = 0

    def add_dir(self, path: str, mode: int) -> None:
        """Git trees cannot hold empty directories: the manifest keeps them."""

    def add_file(self, path: str, fd: int, info: os.stat_result, known_digest: str | None) -> str | None:
        mode = "100755" if info.st_mode & 0o111 else "100644"
        if known_digest is not None:
            self._lines.append(f"M {mode} {known_digest} {_quote(path)}\n".encode())
            return known_digest
        self._mark += 1
        digest = _new_hash("git", info.st_size)
        self._stdin.write(b"blob\nmark :%d\ndata %d\n" % (self._mark, info.st_size))
        for chunk in _chunks(fd, info.st_size):
            digest.update(chunk)
            self._stdin.write(chunk)
        self._stdin.write(b"\n")
        self._lines.append(f"M {mode} :{self._mark} {_quote(path)}\n".encode())
        return digest.hexdigest()

    def commit(self, message: str) -> str | None:
        body = message.encode()
        self._stdin.write(f"commit {self._ref}\n".encode())
        self._stdin.write(f"committer workspacefs <workspacefs@localhost> {int(time.time())} +0000\n".encode())
        self._stdin.write(b"data %d\n%s\n" % (len(body), body))
        self._stdin.writelines(self._lines)
        self._stdin.write(b"\ndone\n")
        self._stdin.close()
        if self._process.wait() != 0:
            raise SnapshotCreationError(f"git fast-import failed: {self._strategy._stderr(self._process)}")
        return self._strategy._run("rev-parse", self._ref).strip()

    def abort(self) -> None:
        self._process.kill()
        self._process.wait()


class _CatFile:
    """A ``git cat-file --batch`` process streaming blobs by id."""

    def __init__(self, strategy: GitStrategy) -> None:
        self._process = strategy._start("cat-file", "--batch", stdin=subprocess.PIPE)
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._stdin = self._process.stdin
        self._stdout = self._process.stdout

    def fill(self, digest: str, fd: int) -> None:
        self._stdin.write(digest.encode() + b"\n")
        self._stdin.flush()
        header = self._stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise SnapshotRestoreError(f"Blob {digest} is missing from the snapshot store")
        remaining = int(header[2])
        while remaining:
            chunk = self._stdout.read(min(_CHUNK, remaining))
            if not chunk:
                raise SnapshotRestoreError(f"Blob {digest} ended early")
            _write_all(fd, chunk)
            remaining -= len(chunk)
        self._stdout.read(1)  # the newline after each object

    def close(self) -> None:
        self._stdin.close()
        self._process.wait()


def _blob_filler(reader: _CatFile, digest: str) -> Fill:
    def fill(fd: int) -> None:
        reader.fill(digest, fd)

    return fill


class GitStrategy(SnapshotStrategy):
    """Commits in an external bare repository (``<snapshot_dir>/git``); nothing is written in the root.

    Content is streamed into ``git fast-import`` from the race-proof reads, so ``.gitignore``
    files, ``GIT_*`` variables and a workspace's own ``.git`` directory change nothing: every file
    is captured, and restored through the backend's own writes (never ``git checkout``).
    """

    name = "git"
    digest_kind = "git"
    _GC_EVERY: ClassVar[int] = 20

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.repo = directory / "git"
        self.git_dir = self.repo
        if not (self.repo / "HEAD").exists():
            self._init()

    def _init(self) -> None:
        """Make the bare repository beside its place and rename it there, so two processes opening a new root
        at once do not both write into one half-made repository (one rename wins; the other's is removed)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".git-init-", dir=self.directory))
        try:
            made = subprocess.run(
                self._command(("init", "--bare", "--quiet", str(building))),
                env={**self._env(), "GIT_DIR": str(building)},
                capture_output=True,
                check=False,
                cwd=self.directory,
            )
            if made.returncode != 0:
                raise SnapshotCreationError(f"git init failed: {made.stderr.decode(errors='replace').strip()}")
            try:
                os.rename(building, self.repo)  # replaces an empty directory, never a repository
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not (self.repo / "HEAD").exists():
                    raise
        finally:
            shutil.rmtree(building, ignore_errors=True)

    @classmethod
    def available(cls, root_fd: int, directory: Path) -> bool:
        return shutil.which("git") is not None

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(
            GIT_DIR=str(self.repo),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_TERMINAL_PROMPT="0",
            HOME=str(self.directory),
            LC_ALL="C",
        )
        return env

    @staticmethod
    def _command(args: tuple[str, ...]) -> list[str]:
        settings = ["-c", "init.defaultBranch=main", "-c", "core.bigFileThreshold=64m", "-c", "gc.auto=0"]
        return ["git", *settings, *args]

    def _run(self, *args: str) -> str:
        result = subprocess.run(
            self._command(args), env=self._env(), capture_output=True, check=False, cwd=self.directory
        )
        if result.returncode != 0:
            raise SnapshotCreationError(f"git {args[0]} failed: {result.stderr.decode(errors='replace').strip()}")
        return result.stdout.decode()

    def _start(self, *args: str, stdin: int | None = None, stdout: int = subprocess.PIPE) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self._command(args),
            env=self._env(),
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            cwd=self.directory,
        )

    @staticmethod
    def _stderr(process: subprocess.Popen[bytes]) -> str:
        return process.stderr.read().decode(errors="replace").strip() if process.stderr else ""

    def begin(self, snapshot_id: str) -> Sink:
        return _GitSink(self, snapshot_id)

    def fills(self, snapshot_id: str, wanted: dict[str, str | None]) -> Iterator[tuple[str, Fill]]:
        reader = _CatFile(self)
        try:
            for path in sorted(wanted):
                digest = wanted[path]
                if digest is None:
                    raise SnapshotRestoreError(f"Snapshot {snapshot_id} has no content id for {path!r}")
                yield path, _blob_filler(reader, digest)
        finally:
            reader.close()

    def discard(self, snapshot_id: str) -> None:
        self._run("update-ref", "-d", f"refs/snapshots/{snapshot_id}")
        counter = self.repo / "workspacefs-deletions"
        deletions = int(counter.read_text() or 0) + 1 if counter.exists() else 1
        if deletions >= self._GC_EVERY:
            self._run("gc", "--prune=now", "--quiet")
            deletions = 0
        counter.write_text(str(deletions))


STRATEGIES: dict[str, type[SnapshotStrategy]] = {
    "reflink": ReflinkStrategy,
    "git": GitStrategy,
    "archive": ArchiveStrategy,
    "copy": CopyStrategy,
}
"""By preference: the first available one is chosen when none is asked for."""
