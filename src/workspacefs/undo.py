"""``UndoLog``: the before-state of only the paths one operation touches, so a failure part way can be undone.

A tool call, an archive import or a multi-step request records what it is about to change, then does it;
if it fails, :meth:`UndoLog.rollback` puts those paths back. It costs what the operation changes — a path
it creates is recorded as absent (nothing read), a file it overwrites or deletes is copied (in memory up to
1 MiB, then spooled to a temporary file), a move is recorded as its inverse — and never what the rest of
the workspace holds, unlike a whole-workspace snapshot (kept for explicit snapshot calls).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import IO, Protocol, cast

from workspacefs.paths import ROOT, is_within, normalize_path, parent
from workspacefs.protocol import ConditionalWrites, Filesystem

__all__ = ["UndoLog", "UndoStats", "disown"]

_IN_MEMORY_BYTES = 1024 * 1024
"""A saved file stays in memory up to this size, then spills to a temporary file."""
_COPY_BLOCK = 1024 * 1024


class _FileFlags(Protocol):
    """The per-file read-only flag, where ``capabilities.file_read_only`` says a backend has it."""

    def set_read_only(self, path: str, read_only: bool = True) -> None: ...


@dataclass(slots=True)
class UndoStats:
    """What recording cost: paths recorded, files whose bytes were saved, and how many bytes."""

    paths: int = 0
    files_saved: int = 0
    bytes_saved: int = 0


@dataclass(slots=True)
class _Absent:
    """Nothing was at ``path``: undo removes whatever is there now."""

    path: str


@dataclass(slots=True)
class _Directory:
    """A directory was at ``path``: undo makes it again (its entries have records of their own)."""

    path: str


@dataclass(slots=True)
class _File:
    """A file was at ``path`` with these bytes (and flag); undo writes them back unless they are still there."""

    path: str
    saved: IO[bytes]
    read_only: bool
    content_id: str | None


@dataclass(slots=True)
class _Moved:
    """``src`` was moved to ``dst``: undo moves it back."""

    src: str
    dst: str


_Record = _Absent | _Directory | _File | _Moved


@dataclass
class UndoLog:
    """Records before-states on ``fs``; :meth:`rollback` restores them in reverse order, :meth:`close` forgets.

    Use it as a context manager around the operation: it closes (releasing saved copies) on exit and does
    not roll back by itself — the caller decides what counts as failure.
    """

    fs: Filesystem
    stats: UndoStats = field(default_factory=UndoStats)
    _records: list[_Record] = field(default_factory=list)
    _tokens: list[Token[UndoLog | None]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _absent: set[str] = field(default_factory=set)

    # --- recording -------------------------------------------------------------------------------------

    def will_create(self, path: str) -> None:
        """Record that an operation may create ``path`` and its missing parents (an existing ``path`` it
        replaces in one atomic step needs no record): undo removes what it created."""
        target = self._highest_missing(self._norm(path))
        if target is not None:
            self._remember(_Absent(target))

    def will_change(self, path: str) -> None:
        """Record ``path`` (and, if it is a directory, everything below it) before it is written, replaced
        or deleted; a missing path is recorded as the highest missing ancestor, which the change may create."""
        norm = self._norm(path)
        if norm in self._seen or norm == ROOT:
            return
        target = self._highest_missing(norm)
        if target is not None:
            self._remember(_Absent(target))
            return
        info = self.fs.stat(norm)
        if info.is_file:
            self._save_file(norm, info.read_only)
            return
        self._remember(_Directory(norm))
        for entry in self.fs.walk(norm):  # parents first: undo, in reverse, restores children before parents
            if entry.path in self._seen:
                continue
            if entry.is_directory:
                self._remember(_Directory(entry.path))
            else:
                self._save_file(entry.path, self.fs.stat(entry.path).read_only)

    def will_move(self, src: str, dst: str) -> None:
        """Record a move of ``src`` to ``dst``: what ``dst`` holds now, and the move itself (undone by moving
        back, so the moved content is never copied)."""
        self.will_change(dst)
        self._records.append(_Moved(self._norm(src), self._norm(dst)))
        self.stats.paths += 1

    def _norm(self, path: str) -> str:
        return normalize_path(path, mount_point=self.fs.mount_point)

    def _highest_missing(self, norm: str) -> str | None:
        """The top-most missing path among ``norm`` and its ancestors, or ``None`` if ``norm`` exists."""
        missing = None
        current = norm
        while current != ROOT and not self.fs.exists(current):
            missing = current
            current = parent(current)
        return missing

    def _remember(self, record: _Absent | _Directory) -> None:
        if record.path in self._seen or any(above in self._absent for above in _ancestors(record.path)):
            return  # an ancestor recorded as absent is removed whole; one recorded as a directory keeps only
            # itself, so what lies below it (an empty directory, a path made later) needs a record of its own
        self._seen.add(record.path)
        if isinstance(record, _Absent):
            self._absent.add(record.path)
        self._records.append(record)
        self.stats.paths += 1

    def _save_file(self, path: str, read_only: bool) -> None:
        saved: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=_IN_MEMORY_BYTES)  # noqa: SIM115 - closed by close()
        try:
            with self.fs.open_read(path) as reader:
                for chunk in reader.chunks(_COPY_BLOCK):
                    saved.write(chunk)
                    self.stats.bytes_saved += len(chunk)
        except BaseException:
            saved.close()
            raise
        self._seen.add(path)
        self._records.append(_File(path, saved, read_only, self._content_id(path)))
        self.stats.paths += 1
        self.stats.files_saved += 1

    def _content_id(self, path: str) -> str | None:
        if not self.fs.capabilities.conditional_writes:
            return None
        try:
            return cast(ConditionalWrites, self.fs).content_id(path)  # the capability promises it
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    # --- undoing ---------------------------------------------------------------------------------------

    def rollback(self) -> bool:
        """Put every recorded path back as it was, newest record first; ``True`` if anything had changed."""
        changed = False
        for record in reversed(self._records):
            changed |= self._undo(record)
        return changed

    def rollback_after(self, cause: BaseException) -> None:
        """:meth:`rollback` because ``cause`` stopped the operation; ``cause`` stays the error the caller raises,
        and if putting things back fails too, a note on it says so (the workspace is then not as it was)."""
        try:
            self.rollback()
        except Exception as failure:  # the operation's own error is the one to report, not the undo's
            cause.add_note(
                f"Putting back what it changed failed too ({type(failure).__name__}: {failure}); "
                "the workspace is not as it was before"
            )

    def _undo(self, record: _Record) -> bool:
        fs = self.fs
        if isinstance(record, _Moved):
            if fs.exists(record.dst) and not fs.exists(record.src):
                fs.move(record.dst, record.src)
                return True
            return False
        if isinstance(record, _Absent):
            return self._remove(record.path)
        if isinstance(record, _Directory):
            with contextlib.suppress(FileNotFoundError):
                if fs.stat(record.path).is_directory:
                    return False
            self._remove(record.path)
            fs.mkdir(record.path, parents=True, exist_ok=True)
            return True
        return self._put_back(record)

    def _remove(self, path: str) -> bool:
        if not self.fs.exists(path):  # never made (the operation failed first): nothing to ask a read-only fs
            return False
        try:
            self.fs.delete(path, recursive=True)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def _put_back(self, record: _File) -> bool:
        fs = self.fs
        try:
            now = fs.stat(record.path)
        except (FileNotFoundError, NotADirectoryError):
            now = None
        unchanged = now is not None and now.is_file and now.read_only == record.read_only
        if unchanged and record.content_id is not None and self._content_id(record.path) == record.content_id:
            return False
        if now is not None and now.is_directory:
            fs.delete(record.path, recursive=True)
        flags = cast(_FileFlags, fs) if fs.capabilities.file_read_only else None
        if flags is not None and now is not None and now.is_file and now.read_only:
            flags.set_read_only(record.path, False)
        record.saved.seek(0)
        with fs.open_write(record.path, create_parents=True) as writer:
            for block in _blocks(record.saved):
                writer.write(block)
        if flags is not None and record.read_only:
            flags.set_read_only(record.path, True)
        return True

    # --- lifecycle -------------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the saved copies; the log records nothing more and can no longer roll back."""
        for record in self._records:
            if isinstance(record, _File):
                record.saved.close()
        self._records.clear()
        self._seen.clear()
        self._absent.clear()

    def disown(self, path: str) -> None:
        """Never put ``path`` back, nor remove a missing ancestor recorded for it: what it holds now is someone
        else's (a file this operation found missing, created by another caller before its own write)."""
        norm = self._norm(path)
        self._records = [
            record
            for record in self._records
            if not (isinstance(record, (_Absent, _File)) and is_within(norm, record.path))
        ]

    def __enter__(self) -> UndoLog:
        self._tokens.append(_ACTIVE.set(self))
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._tokens:
            with contextlib.suppress(ValueError, RuntimeError):  # left in another context: a stale entry is harmless
                _ACTIVE.reset(self._tokens.pop())
        self.close()


_ACTIVE: ContextVar[UndoLog | None] = ContextVar("workspacefs_undo_log", default=None)
"""The log of the operation under way in this context (the innermost ``with log:``)."""


def disown(path: str) -> None:
    """:meth:`UndoLog.disown` on the log of the operation under way, if there is one."""
    log = _ACTIVE.get()
    if log is not None:
        log.disown(path)


def _ancestors(path: str) -> Iterator[str]:
    while (path := parent(path)) != ROOT:
        yield path


def _blocks(saved: IO[bytes]) -> Iterator[bytes]:
    while block := saved.read(_COPY_BLOCK):
        yield block
