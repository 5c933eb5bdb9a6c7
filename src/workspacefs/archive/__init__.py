"""Portable tar export and import of any filesystem: how a workspace moves between backends.

Both directions stream: file content flows through the backends' own readers and writers in chunks,
so a tree of any size moves in fixed memory, to or from a pipe. Import is safe by construction:
names are validated by ``paths.py`` (no absolute names, no ``..``), only regular files and
directories are accepted (links, devices and FIFOs are refused), and on a snapshotable filesystem a
refused archive leaves nothing behind (the import is rolled back). What tarfile itself would take on trust
from a hostile stream is refused in ``_reading.py``.
"""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Literal

from workspacefs.archive._reading import UnsafeArchiveError, check_gzip_end, open_archive, reading
from workspacefs.errors import not_a_directory
from workspacefs.paths import ancestors, join, normalize_path, relative_to
from workspacefs.protocol import ByteReader, Filesystem
from workspacefs.undo import UndoLog

__all__ = ["ArchiveStats", "UnsafeArchiveError", "export_tar", "import_tar"]

_COPY_BLOCK = 1024 * 1024

Progress = Callable[[int, "int | None"], None]
"""Called as content moves: ``(bytes so far, total bytes or None when unknown)``."""


class _Counted:
    """A reader that reports what passes through it (tar pulls file content from this)."""

    def __init__(self, reader: ByteReader, report: Callable[[int], None]) -> None:
        self._reader = reader
        self._report = report

    def read(self, size: int = -1) -> bytes:
        data = self._reader.read(size)
        self._report(len(data))
        return data


@dataclass(frozen=True, slots=True)
class ArchiveStats:
    """What moved: files, directories and bytes of content."""

    files: int
    directories: int
    bytes: int


def _walk(fs: Filesystem, base: str) -> list[tuple[str, bool, int]]:
    """(path, is_directory, size) below ``base``, sorted (so parents come before children)."""
    return sorted((entry.path, entry.is_directory, entry.size_bytes or 0) for entry in fs.walk(base or "."))


def export_tar(
    fs: Filesystem,
    stream: IO[bytes],
    *,
    path: str = ".",
    compression: Literal["", "gz"] = "",
    progress: Progress | None = None,
) -> ArchiveStats:
    """Write the tree under ``path`` to ``stream`` as a tar (streamed: any size, fixed memory).

    Member names are relative to ``path``; empty directories are kept. ``progress`` hears about every
    block of content, with the total known from the listing taken first.

    Raises:
        FileNotFoundError, NotADirectoryError: ``path`` is missing or a file (an empty archive would pass
            for a backup of it).
    """
    base = normalize_path(path, mount_point=fs.mount_point)
    if not fs.stat(path).is_directory:
        raise not_a_directory(path)
    files = dirs = total = 0
    mode: Literal["w|", "w|gz"] = "w|gz" if compression == "gz" else "w|"
    members = _walk(fs, base)
    expected = sum(size for _, is_directory, size in members if not is_directory)
    moved = 0

    def report(count: int) -> None:
        nonlocal moved
        moved += count
        if progress is not None:
            progress(moved, max(expected, moved))

    with tarfile.open(fileobj=stream, mode=mode, format=tarfile.PAX_FORMAT) as tar:
        for member_path, is_directory, _ in members:
            name = relative_to(member_path, base)
            info = tarfile.TarInfo(name)
            stat = fs.stat(member_path)
            if stat.modified_at is not None:
                info.mtime = int(stat.modified_at.timestamp())
            if is_directory:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
                dirs += 1
                continue
            info.mode = 0o644
            with fs.open_read(member_path) as reader:
                info.size = reader.size
                tar.addfile(info, _Counted(reader, report))
            files += 1
            total += info.size
    return ArchiveStats(files, dirs, total)


@dataclass(slots=True)
class _Claimed:
    """The paths the archive's members have named so far: each once, a file never also a directory."""

    files: set[str] = field(default_factory=set)
    named_dirs: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    """Directories named by a member or lying above one."""

    def claim(self, member: tarfile.TarInfo, relative: str) -> None:
        """Record ``relative`` (the member's normalised name) or refuse a member that contradicts another."""
        name = member.name
        if relative in self.files or relative in self.named_dirs:
            raise UnsafeArchiveError(f"Refusing archive member {name!r}: an earlier member names the same path")
        if member.isdir():
            self.named_dirs.add(relative)
        elif relative == "" or relative in self.dirs:
            raise UnsafeArchiveError(f"Refusing archive member {name!r}: a file where the archive has a directory")
        for above in ancestors(relative):
            if above in self.files:
                raise UnsafeArchiveError(f"Refusing archive member {name!r}: it lies below the file {above!r}")
            self.dirs.add(above)
        (self.dirs if member.isdir() else self.files).add(relative)


def _member_path(member: tarfile.TarInfo, base: str, claimed: _Claimed) -> str:
    name = member.name
    if name.startswith("/") or ".." in name.replace("\\", "/").split("/"):
        raise UnsafeArchiveError(f"Refusing archive member {name!r}: absolute names and '..' could leave the target")
    if not (member.isfile() or member.isdir()) or member.sparse is not None:
        raise UnsafeArchiveError(f"Refusing archive member {name!r}: only files and directories are imported")
    if member.size < 0:
        raise UnsafeArchiveError(f"Refusing archive member {name!r}: its header declares {member.size} bytes")
    try:
        relative = normalize_path(name)
    except (ValueError, PermissionError) as exc:
        raise UnsafeArchiveError(f"Refusing archive member {name!r}: {exc}") from None
    claimed.claim(member, relative)
    return join(base, relative) if relative else base


def _import(fs: Filesystem, tar: tarfile.TarFile, base: str, progress: Progress | None, undo: UndoLog) -> ArchiveStats:
    files = dirs = total = moved = 0
    claimed = _Claimed()
    where = "after its first header"
    while True:
        with reading(where):
            member = tar.next()
        if member is None:
            break
        tar.members.clear()  # type: ignore[attr-defined]  # a stream keeps every header read; one is needed
        where = f"after member {member.name!r}"
        target = _member_path(member, base, claimed)
        if member.isdir():
            if target:
                undo.will_create(target)
                fs.mkdir(target)
            dirs += 1
            continue
        source = tar.extractfile(member)
        assert source is not None
        undo.will_change(target)
        with fs.open_write(target) as writer:
            while True:
                with reading(f"in member {member.name!r}"):
                    block = source.read(_COPY_BLOCK)
                if not block:
                    break
                writer.write(block)
                moved += len(block)
                if progress is not None:
                    progress(moved, None)
        files += 1
        total += member.size
    return ArchiveStats(files, dirs, total)


def import_tar(fs: Filesystem, stream: IO[bytes], *, path: str = ".", progress: Progress | None = None) -> ArchiveStats:
    """Unpack a tar (plain or compressed, streamed) from ``stream`` under ``path``; ``progress`` hears
    about every block written (the total of a stream is not known ahead).

    Memory stays fixed in the content and grows only with the members' names (each path may be named once).

    Raises:
        UnsafeArchiveError: a member is absolute, climbs with ``..``, is a link, special or sparse file, names
            a path an earlier member named (``a`` and ``./a``) or a file where the archive has a directory; or
            the archive is not a readable tar, or its headers hold more than 1 MiB of metadata for one member.
            Nothing of the archive remains: each path is recorded before it is written (an
            :class:`~workspacefs.undo.UndoLog`, costing what the import changes) and put back on failure.
    """
    base = normalize_path(path, mount_point=fs.mount_point)
    with UndoLog(fs) as undo:
        try:
            tar, source = open_archive(stream)
            with tar:
                stats = _import(fs, tar, base, progress, undo)
            if isinstance(source, gzip.GzipFile):
                check_gzip_end(source)
            return stats
        except BaseException as exc:
            undo.rollback_after(exc)
            raise
