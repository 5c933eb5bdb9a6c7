"""Quota enforcement shared by every backend: one step from a change's check to its end, and a counting writer.

The public methods of ``base.py``, ``_conditional.py`` and ``_snapshotting.py`` make each growing change inside
``with self._quota_step() as step``: ``step.admit(...)`` refuses it if it would pass a limit, and what it admits
counts against every other check until the block ends, so writers checked at the same moment (a model's
parallel tool calls) cannot all pass and then exceed the quota together. How a backend makes check and change
one step depends on where its usage comes from (:attr:`QuotaMixin.usage_is_live`):

- **counted** (host, container, object store): usage is counted once by a walk and kept current by this
  object's own changes. An admitted change *reserves* its growth under a small lock; the reservation is
  released, and the count takes the change, when the block ends (nothing when it failed). No lock is held
  while the change itself runs. Exact for the threads of one filesystem object; *not* across processes (or
  several objects on one directory or prefix): each keeps its own count and reservations and sees the others'
  changes only when it counts again (after a restore or a container command), so together they can pass the
  quota by what they write between counts. A shared count would need a lock the storage itself provides
  (the host has none across machines, an object store none at all), so the guarantee stops here.
- **live** (memory, SQL): usage is read from the state itself. Memory holds its state lock from the check to
  the change (:meth:`QuotaMixin._quota_hold`); SQL checks again inside the change's own transaction, after its
  statements, which is exact for every process writing the session (see ``sql/_filesystem.py``).

Streams are wrapped in :class:`QuotaWriter`, which refuses the chunk that would pass a limit (counting what
other writers reserved) and makes its commit such a step; no lock is held while a stream is written. A change
that shrinks the workspace is always allowed, so a full workspace can be cleaned up.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import TracebackType
from typing import ClassVar

from workspacefs.backends._core import FilesystemCore
from workspacefs.errors import FileTooLargeError, QuotaExceededError
from workspacefs.protocol import ByteWriter
from workspacefs.quota import Quota, Usage
from workspacefs.results import FileStat, FilesystemSnapshot, WriteMode
from workspacefs.streams import StreamWriter

__all__ = ["QuotaMixin", "QuotaStep", "QuotaWriter", "over_quota"]


def over_quota(path: str, quota: Quota, after: Usage, bytes_delta: int, files_delta: int) -> QuotaExceededError | None:
    """The error for a change that leaves the workspace at ``after`` having grown it by the deltas, if that
    passes a limit it grew toward (``None``: within the quota, or the change did not grow what is over)."""
    if bytes_delta > 0 and quota.max_bytes is not None and after.bytes > quota.max_bytes:
        return QuotaExceededError(
            path,
            f"Workspace quota exceeded (it would hold {after.bytes} bytes; the limit is {quota.max_bytes} bytes)",
        )
    if files_delta > 0 and quota.max_files is not None and after.files > quota.max_files:
        return QuotaExceededError(
            path, f"Workspace quota exceeded (it would hold {after.files} files; the limit is {quota.max_files})"
        )
    return None


class QuotaStep:
    """One change held to the quota from its check to its end (``with fs._quota_step() as step``): what
    ``admit`` let in is reserved (counted usage) or guarded by the state lock (memory) until the block ends."""

    __slots__ = ("_fs", "_hold", "change", "reserved")

    def __init__(self, fs: QuotaMixin) -> None:
        self._fs = fs
        self._hold = fs._quota_hold() if fs._quota is not None else nullcontext()  # no quota: nothing to hold
        self.change = Usage()
        """The change admitted: bytes and files it adds (negative: frees); counted usage takes it at the end."""
        self.reserved = Usage()
        """The growth reserved for it, released at the end."""

    def __enter__(self) -> QuotaStep:
        self._hold.__enter__()
        return self

    def admit(self, path: str, *, bytes_delta: int, files_delta: int, largest: int = 0) -> None:
        """Refuse the change (``QuotaExceededError``, ``FileTooLargeError``) or let it in; see ``QuotaMixin._check``."""
        self._fs._admit(self, path, bytes_delta, files_delta, largest)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        try:
            self._fs._settle(self, succeeded=kind is None)
        finally:
            self._hold.__exit__(kind, error, trace)


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
        self._reserving: set[QuotaStep] = set()
        """The steps holding a reservation (counted usage only; changed under ``_quota_lock``). Each step keeps
        its own, so a step's end releases exactly what it holds, whenever an exception (a ``KeyboardInterrupt``)
        stopped it: there is no total kept apart from the steps for the two to disagree."""
        self._quota_lock = threading.Lock()

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
        if self.usage_is_live or self._quota is None:  # without a quota no change keeps a count current
            return self._usage()
        cached = self._usage_cache
        if cached is not None:
            return cached
        with self._quota_lock:
            return self._counted_usage()

    def _counted_usage(self) -> Usage:
        """The count, made the first time (``_quota_lock`` held: no change is counted twice or missed meanwhile)."""
        if self._usage_cache is None:
            self._usage_cache = self._usage()
        return self._usage_cache

    def _state_replaced(self) -> None:
        """Count again on next use: something replaced the files wholesale (a restore, a command)."""
        self._usage_cache = None
        super()._state_replaced()

    @contextmanager
    def _restore_guard(self, snapshot: FilesystemSnapshot) -> Iterator[None]:
        """Refuse a restore that would grow past a limit (a merge's result can hold more than either side); the
        growth it may bring stays admitted until the restore ends."""
        if self._quota is None:
            yield
            return
        with self._quota_step() as step:
            now = self._current_usage()
            step.admit("/", bytes_delta=snapshot.total_bytes - now.bytes, files_delta=snapshot.file_count - now.files)
            yield

    def _apply(self, bytes_delta: int, files_delta: int) -> None:
        """Keep a counted usage current after a change succeeded (live usage needs nothing)."""
        if self._quota is None or self.usage_is_live or self._usage_cache is None:
            return
        with self._quota_lock:
            self._count(Usage(bytes_delta, files_delta))

    def _count(self, change: Usage) -> None:
        """Add ``change`` to the counted usage (``_quota_lock`` held)."""
        cached = self._usage_cache
        if cached is not None:
            self._usage_cache = Usage(max(cached.bytes + change.bytes, 0), max(cached.files + change.files, 0))

    # --- one step from check to change --------------------------------------------------------------------

    def _quota_step(self) -> QuotaStep:
        """A change's quota step: ``with self._quota_step() as step: step.admit(...); <the change>``."""
        return QuotaStep(self)

    def _quota_hold(self) -> AbstractContextManager[object]:
        """Held from a change's check to its end. Nothing by default: counted usage reserves, SQL checks in its
        transaction. Memory returns its state lock, so check and change are one step there."""
        return nullcontext()

    @property
    def _reserved(self) -> Usage:
        """Growth admitted but not yet counted: what every step holding a reservation holds (a copy of the set is
        taken in one step, so a check outside the lock reads it while another thread reserves)."""
        steps = tuple(self._reserving)
        return Usage(sum(s.reserved.bytes for s in steps), sum(s.reserved.files for s in steps))

    def _admit(self, step: QuotaStep, path: str, bytes_delta: int, files_delta: int, largest: int) -> None:
        """Check a change for ``step``; on counted usage, reserve its growth against every other check.

        The reservation is the step's own (one assignment, after the step joined :attr:`_reserving`): an exception
        at any point leaves nothing its ``__exit__`` (:meth:`_settle`) does not release."""
        if self._quota is None:
            return
        if self.usage_is_live:
            self._check(path, bytes_delta=bytes_delta, files_delta=files_delta, largest=largest)
            return
        grows = Usage(max(bytes_delta, 0), max(files_delta, 0))
        with self._quota_lock:
            now = self._counted_usage()
            self._check(path, bytes_delta=bytes_delta, files_delta=files_delta, largest=largest, usage=now)
            self._reserving.add(step)
            step.reserved = Usage(step.reserved.bytes + grows.bytes, step.reserved.files + grows.files)
        step.change = Usage(step.change.bytes + bytes_delta, step.change.files + files_delta)

    def _settle(self, step: QuotaStep, *, succeeded: bool) -> None:
        """The end of ``step``: release what it reserved and, if its change succeeded, count it. An exception
        while counting (a ``KeyboardInterrupt``) still releases, and drops the count (made again on next use)."""
        if step not in self._reserving and not step.change.bytes and not step.change.files:
            return
        with self._quota_lock:
            try:
                if succeeded:
                    self._count(step.change)
            except BaseException:
                self._usage_cache = None  # counted or not, nobody knows: count again
                raise
            finally:
                self._reserving.discard(step)

    # --- checks -----------------------------------------------------------------------------------------

    def _check(
        self, path: str, *, bytes_delta: int, files_delta: int, largest: int = 0, usage: Usage | None = None
    ) -> None:
        """Refuse a change that adds ``bytes_delta`` bytes and ``files_delta`` files (its largest file being
        ``largest`` bytes) if it would pass a limit, counting the growth other changes reserved; growing past a
        limit is refused, shrinking never is."""
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
        reserved = self._reserved
        after = Usage(now.bytes + reserved.bytes + bytes_delta, now.files + reserved.files + files_delta)
        refused = over_quota(path, quota, after, bytes_delta, files_delta)
        if refused is not None:
            raise refused

    def _existing_size(self, path: str) -> int | None:
        """The size of the file at ``path`` (``None``: no file there, so a write adds one)."""
        try:
            info = self._stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return info.size_bytes if info.is_file else None

    def _check_write(self, path: str, size: int, mode: WriteMode, step: QuotaStep) -> None:
        """Admit into ``step`` a whole-file write of ``size`` bytes at ``path``."""
        if self._quota is None:
            return
        old = self._existing_size(path)
        new = size + (old or 0) if mode == "append" else size
        step.admit(path, bytes_delta=new - (old or 0), files_delta=1 if old is None else 0, largest=new)

    def _quota_writer(self, path: str, mode: WriteMode, writer: ByteWriter) -> ByteWriter:
        """``writer`` itself without a quota, else wrapped so every chunk is counted against it."""
        if self._quota is None:
            return writer
        return QuotaWriter(self, path, mode, writer)

    def _check_copy(self, src: str, source: FileStat, dst: str, step: QuotaStep) -> None:
        """Admit into ``step`` a copy of ``src`` over ``dst`` (whose old content it replaces)."""
        if self._quota is None:
            return
        added = self._tree_usage(src, source)
        try:
            replaced = self._tree_usage(dst, self._stat(dst))
        except (FileNotFoundError, NotADirectoryError):
            replaced = (Usage(), 0)
        step.admit(
            dst,
            bytes_delta=added[0].bytes - replaced[0].bytes,
            files_delta=added[0].files - replaced[0].files,
            largest=added[1],
        )

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
    caller's ``with`` block then discards the stream, so the old content stays. Its commit is a quota step:
    checked against a fresh usage and every other writer's reservation, then made."""

    __slots__ = ("_base", "_fs", "_inner", "_mode", "_old", "_usage")

    def __init__(self, fs: QuotaMixin, path: str, mode: WriteMode, inner: ByteWriter) -> None:
        super().__init__(path)
        self._fs = fs
        self._inner = inner
        self._mode = mode
        self._old = fs._existing_size(path)
        self._base = (self._old or 0) if mode == "append" else 0
        self._usage = fs._current_usage()  # per chunk against this (and the reservations); at commit, fresh

    def _write_chunk(self, data: bytes) -> None:
        size = self._base + self.bytes_written + len(data)
        bytes_delta, files_delta = size - (self._old or 0), 1 if self._old is None else 0
        self._fs._check(self.path, bytes_delta=bytes_delta, files_delta=files_delta, largest=size, usage=self._usage)
        self._inner.write(data)

    def _commit(self) -> None:
        fs = self._fs
        with fs._quota_step() as step:
            # what the commit replaces, asked again (in the step: memory holds its lock); an append grows in
            # place on some backends, so it keeps what it measured when it opened
            old = self._old if self._mode == "append" else fs._existing_size(self.path)
            size = self._base + self.bytes_written
            step.admit(self.path, bytes_delta=size - (old or 0), files_delta=1 if old is None else 0, largest=size)
            self._inner.close()

    def _discard(self) -> None:
        self._inner.abort()
