"""Portable tar export and import of any filesystem: how a workspace moves between backends.

Both directions stream: file content flows through the backends' own readers and writers in chunks,
so a tree of any size moves in fixed memory, to or from a pipe. Import is safe by construction:
names are validated by ``paths.py`` (no absolute names, no ``..``), only regular files and
directories are accepted (links, devices and FIFOs are refused), and on a snapshotable filesystem a
refused archive leaves nothing behind (the import is rolled back).
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Literal

from workspacefs.paths import join, normalize_path, relative_to
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


class UnsafeArchiveError(ValueError):
    """An archive member that could leave the target directory, or that is not a file or directory."""


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
    """
    base = normalize_path(path, mount_point=fs.mount_point)
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


def _member_path(member: tarfile.TarInfo, base: str) -> str:
    name = member.name
    if name.startswith("/") or ".." in name.replace("\\", "/").split("/"):
        raise UnsafeArchiveError(f"Refusing archive member {name!r}: absolute names and '..' could leave the target")
    if not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(f"Refusing archive member {name!r}: only files and directories are imported")
    try:
        return join(base, normalize_path(name)) if normalize_path(name) else base
    except (ValueError, PermissionError) as exc:
        raise UnsafeArchiveError(f"Refusing archive member {name!r}: {exc}") from None


def _import(fs: Filesystem, tar: tarfile.TarFile, base: str, progress: Progress | None, undo: UndoLog) -> ArchiveStats:
    files = dirs = total = moved = 0
    for member in tar:
        target = _member_path(member, base)
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
            while block := source.read(_COPY_BLOCK):
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

    Raises:
        UnsafeArchiveError: a member is absolute, climbs with ``..``, or is a link or special file.
            Nothing of the archive remains: each path is recorded before it is written (an
            :class:`~workspacefs.undo.UndoLog`, costing what the import changes) and put back on failure.
    """
    base = normalize_path(path, mount_point=fs.mount_point)
    with UndoLog(fs) as undo:
        try:
            with tarfile.open(fileobj=stream, mode="r|*") as tar:
                return _import(fs, tar, base, progress, undo)
        except BaseException:
            undo.rollback()
            raise
