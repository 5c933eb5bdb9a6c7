"""Quota enforcement shared by every backend: checks before a change, a counting writer for streams.

The public methods of ``base.py`` and ``_conditional.py`` ask :meth:`QuotaMixin._check` before anything
is written, and wrap streaming writers in :class:`QuotaWriter`, which refuses the chunk that would pass a
limit; the stream is then discarded and the old content stays. A change that shrinks the workspace is
always allowed, so a full workspace can be cleaned up. Usage comes from :meth:`QuotaMixin._usage`: live
where a backend can answer cheaply (memory, SQL), otherwise counted once by a walk and kept up to date
by the backend's own changes (:attr:`QuotaMixin.usage_is_live`).
"""

from __future__ import annotations

from typing import ClassVar

from workspacefs.backends._core import FilesystemCore
from workspacefs.errors import FileTooLargeError, QuotaExceededError
from workspacefs.protocol import ByteWriter
from workspacefs.quota import Quota, Usage
from workspacefs.results import FileStat, FilesystemSnapshot, WriteMode
from workspacefs.streams import StreamWriter

__all__ = ["QuotaMixin", "QuotaWriter"]


class QuotaMixin(FilesystemCore):
    """Usage accounting and quota checks over the primitives."""

    usage_is_live: ClassVar[bool] = False
    """True if :meth:`_usage` is cheap and always current (nothing is cached); otherwise it is counted once."""

    def __init__(self, *, read_only: bool = False, mount_point: str | None = None, quota: Quota | None = None) -> None:
        super().__init__(read_only=read_only, mount_point=mount_point)
        if quota is not None and not isinstance(quota, Quota):
            raise TypeError(f"quota must be a workspacefs.Quota, not {type(quota).__name__}")
        self._quota = quota if quota is not None and quota.limited else None
        self._usage_cache: Usage | None = None

    @property
    def quota(self) -> Quota | None:
        """The limits this workspace enforces (``None``: none)."""
        return self._quota

    def usage(self) -> Usage:
        """Bytes in files and the number of files the workspace holds now."""
        return self._current_usage()

    # --- usage ------------------------------------------------------------------------------------------

    def _usage(self) -> Usage:
        """Count usage from scratch; a backend that knows it cheaply overrides this (and sets ``usage_is_live``)."""
        total = files = 0
        for entry in self._walk(""):
            if entry.is_file:
                files += 1
                total += entry.size_bytes if entry.size_bytes is not None else self._stat(entry.path).size_bytes
        return Usage(total, files)

    def _current_usage(self) -> Usage:
        if self.usage_is_live:
            return self._usage()
        if self._usage_cache is None:
            self._usage_cache = self._usage()
        return self._usage_cache

    def _state_replaced(self) -> None:
        """Count again on next use: something replaced the files wholesale (a restore, a command)."""
        self._usage_cache = None
        super()._state_replaced()

    def _check_restore(self, snapshot: FilesystemSnapshot) -> None:
        """Refuse a restore that would grow past a limit (a merge's result can hold more than either side)."""
        if self._quota is not None:
            now = self._current_usage()
            self._check("/", bytes_delta=snapshot.total_bytes - now.bytes, files_delta=snapshot.file_count - now.files)
        super()._check_restore(snapshot)

    def _apply(self, bytes_delta: int, files_delta: int) -> None:
        """Keep a counted usage current after a change succeeded (live usage needs nothing)."""
        if self._quota is None or self.usage_is_live or self._usage_cache is None:
            return
        cached = self._usage_cache
        self._usage_cache = Usage(max(cached.bytes + bytes_delta, 0), max(cached.files + files_delta, 0))

    # --- checks -----------------------------------------------------------------------------------------

    def _check(
        self, path: str, *, bytes_delta: int, files_delta: int, largest: int = 0, usage: Usage | None = None
    ) -> None:
        """Refuse a change that adds ``bytes_delta`` bytes and ``files_delta`` files (its largest file being
        ``largest`` bytes) if it would pass a limit; growing past a limit is refused, shrinking never is."""
        quota = self._quota
        if quota is None:
            return
        if quota.max_file_bytes is not None and largest > quota.max_file_bytes:
            raise FileTooLargeError(
                path,
                f"File larger than the workspace allows ({largest} bytes; the largest file allowed is "
                f"{quota.max_file_bytes} bytes)",
            )
        if (bytes_delta <= 0 or quota.max_bytes is None) and (files_delta <= 0 or quota.max_files is None):
            return
        now = usage if usage is not None else self._current_usage()
        if bytes_delta > 0 and quota.max_bytes is not None and now.bytes + bytes_delta > quota.max_bytes:
            raise QuotaExceededError(
                path,
                f"Workspace quota exceeded (it would hold {now.bytes + bytes_delta} bytes; the limit is "
                f"{quota.max_bytes} bytes)",
            )
        if files_delta > 0 and quota.max_files is not None and now.files + files_delta > quota.max_files:
            total = now.files + files_delta
            raise QuotaExceededError(
                path, f"Workspace quota exceeded (it would hold {total} files; the limit is {quota.max_files})"
            )

    def _existing_size(self, path: str) -> int | None:
        """The size of the file at ``path`` (``None``: no file there, so a write adds one)."""
        try:
            info = self._stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return info.size_bytes if info.is_file else None

    def _check_write(self, path: str, size: int, mode: WriteMode) -> tuple[int, int] | None:
        """Check a whole-file write of ``size`` bytes; the ``(bytes, files)`` change to apply once it succeeds."""
        if self._quota is None:
            return None
        old = self._existing_size(path)
        new = size + (old or 0) if mode == "append" else size
        change = (new - (old or 0), 1 if old is None else 0)
        self._check(path, bytes_delta=change[0], files_delta=change[1], largest=new)
        return change

    def _quota_writer(self, path: str, mode: WriteMode, writer: ByteWriter) -> ByteWriter:
        """``writer`` itself without a quota, else wrapped so every chunk is counted against it."""
        if self._quota is None:
            return writer
        return QuotaWriter(self, path, mode, writer)

    def _check_copy(self, src: str, source: FileStat, dst: str) -> tuple[int, int] | None:
        """Check a copy of ``src`` over ``dst`` (whose old content it replaces); the change to apply after."""
        if self._quota is None:
            return None
        added = self._tree_usage(src, source)
        try:
            replaced = self._tree_usage(dst, self._stat(dst))
        except (FileNotFoundError, NotADirectoryError):
            replaced = (Usage(), 0)
        change = (added[0].bytes - replaced[0].bytes, added[0].files - replaced[0].files)
        self._check(dst, bytes_delta=change[0], files_delta=change[1], largest=added[1])
        return change

    def _tree_usage(self, path: str, info: FileStat) -> tuple[Usage, int]:
        """Usage of one file or of a directory's tree, and the size of its largest file."""
        if info.is_file:
            return Usage(info.size_bytes, 1), info.size_bytes
        total = files = largest = 0
        for entry in self._walk(path):
            if entry.is_file:
                size = entry.size_bytes if entry.size_bytes is not None else self._stat(entry.path).size_bytes
                total, files, largest = total + size, files + 1, max(largest, size)
        return Usage(total, files), largest

    def _released(self, path: str, info: FileStat) -> tuple[int, int] | None:
        """What deleting ``path`` gives back, measured before the delete (only when usage is counted here)."""
        if self._quota is None or self.usage_is_live or self._usage_cache is None:
            return None
        usage = self._tree_usage(path, info)[0]
        return -usage.bytes, -usage.files


class QuotaWriter(StreamWriter):
    """Counts a stream against the quota as it arrives and refuses the chunk that would pass a limit; the
    caller's ``with`` block then discards the stream, so the old content stays."""

    __slots__ = ("_base", "_fs", "_inner", "_old", "_usage")

    def __init__(self, fs: QuotaMixin, path: str, mode: WriteMode, inner: ByteWriter) -> None:
        super().__init__(path)
        self._fs = fs
        self._inner = inner
        self._old = fs._existing_size(path)
        self._base = (self._old or 0) if mode == "append" else 0
        self._usage = fs._current_usage()  # per chunk against this; at commit against a fresh count

    def _change(self, size: int) -> tuple[int, int]:
        return size - (self._old or 0), 1 if self._old is None else 0

    def _write_chunk(self, data: bytes) -> None:
        size = self._base + self.bytes_written + len(data)
        bytes_delta, files_delta = self._change(size)
        self._fs._check(self.path, bytes_delta=bytes_delta, files_delta=files_delta, largest=size, usage=self._usage)
        self._inner.write(data)

    def _commit(self) -> None:
        size = self._base + self.bytes_written
        bytes_delta, files_delta = self._change(size)
        self._fs._check(self.path, bytes_delta=bytes_delta, files_delta=files_delta, largest=size)
        self._inner.close()
        self._fs._apply(bytes_delta, files_delta)

    def _discard(self) -> None:
        self._inner.abort()
