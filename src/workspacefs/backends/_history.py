"""``history``, ``undo``, ``watch`` and ``prune_history``, written once over a backend's journal.

A backend with ``capabilities.history`` keeps a :class:`~workspacefs.history.Journal` and records each
change its primitives make. Operations made of several primitives (a recursive delete, a move, a copy,
an undo) open one *scope*, so their changes become one entry; a primitive outside any scope is an entry
of its own. The actor is read from :func:`~workspacefs.history.current_actor` when the entry is made.

Undo is written here, over the public methods, so it is itself journaled (as ``undo``, naming the entry
it undid) and passes every check an ordinary write does.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from workspacefs.backends._core import FilesystemCore
from workspacefs.errors import (
    HistoryEntryNotFoundError,
    UndoConflictError,
    UndoContentNotKeptError,
    UnsupportedOperationError,
)
from workspacefs.history import DIRECTORY, NOT_KEPT, Actor, Change, ChangeWatcher, Journal, JournalEntry, current_actor
from workspacefs.protocol import ByteReader, ByteWriter
from workspacefs.results import WriteMode, WriteResult

__all__ = ["HistoryMixin", "Scope", "in_operation", "operation_key", "undo_in_group", "undo_request", "without"]

_T = TypeVar("_T")


MAX_GROUP_DETAIL = 4000
"""Characters of the details a grouped entry keeps of the operations run inside it (commands, restores)."""

_ENDING = threading.Lock()
"""Orders a worker thread's change against its scope's end: it joins the scope or is an entry of its own (one lock
for every scope: it is held for a list's extend, and a lock per scope would cost each operation one more object)."""


@dataclass(slots=True)
class Scope:
    """One operation in progress on one filesystem: its changes become one journal entry."""

    owner: object
    operation: str
    key: str
    actor: Actor
    undoes: int | None = None
    detail: str | None = None
    changes: list[Any] = field(default_factory=list)
    entry_id: int | None = None
    """The entry the scope's changes became (set once the first is recorded, or when the scope ends)."""
    ended: bool = False
    """Set when the operation's block ends: a change made later (by a task it started) is not part of it."""

    def join(self, changes: Sequence[Any]) -> bool:
        """Add ``changes`` unless the block has ended (``False``: they are an entry of their own, not lost)."""
        with _ENDING:
            if self.ended:
                return False
            self.changes.extend(changes)
            return True

    def end(self) -> None:
        """The block ended: no change joins from now on (a worker thread still writing records its own)."""
        with _ENDING:
            self.ended = True

    def absorb(self, operation: str, detail: str | None) -> None:
        """An operation run inside this one (a command in a grouped block) gives its detail to this entry, one
        line each (``exec: make test``): the entry keeps what ran, as the operation's own entry would have."""
        if detail is None:
            return
        line = f"{operation}: {detail}"
        joined = line if self.detail is None else f"{self.detail}\n{line}"
        self.detail = joined if len(joined) <= MAX_GROUP_DETAIL else joined[: MAX_GROUP_DETAIL - 1] + "…"


class _Mutations(Protocol):
    """What undo needs of the filesystem it is mixed into (``BaseFilesystem``)."""

    def _content_id(self, path: str) -> str: ...
    def move(self, src: str, dst: str, *, overwrite: bool = False) -> None: ...
    def delete(self, path: str, *, recursive: bool = False) -> None: ...
    def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None: ...
    def write_bytes(
        self, path: str, content: bytes, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult: ...
    def open_write(self, path: str, *, mode: WriteMode = "overwrite", create_parents: bool = True) -> ByteWriter: ...
    def open_read(self, path: str) -> ByteReader: ...


def undo_request(
    entry_id: int | Sequence[int] | None, actor: str | Actor | None, last: int | None
) -> tuple[list[int] | None, int]:
    """What an undo's arguments ask for: ids (newest first), or (``None``) the ``last`` n entries of ``actor``
    with n; ``ValueError`` for arguments that ask for neither (every ``undo`` and ``check_undo`` reads them so)."""
    if entry_id is not None:
        if actor is not None or last is not None:
            raise ValueError("give an entry id, or an actor with last=n, not both")
        ids = [entry_id] if isinstance(entry_id, int) else list(entry_id)
        if not ids:
            raise ValueError("give at least one entry id to undo")
        return sorted({_entry_id(each) for each in ids}, reverse=True), len(ids)
    if actor is None:
        raise ValueError("give the entry id to undo, or an actor and last=n")
    count = 1 if last is None else last
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError("last must be a positive number of entries")
    return None, count


def undo_in_group() -> ValueError:
    """The refusal of an undo inside a grouped block: its entry would vanish into the group's."""
    return ValueError("undo cannot run inside an operation in progress (a grouped block): undo after it")


def operation_key() -> str:
    """A unique key for one operation's journal rows, ordered by time (an index on it grows at one end)."""
    return f"{time.time_ns():016x}{os.urandom(4).hex()}"


_SCOPE: ContextVar[tuple[Scope, ...]] = ContextVar("workspacefs_journal_scope", default=())
"""The operations in progress in this thread or task, innermost first (one per filesystem)."""


def in_operation() -> bool:
    """Whether an operation is in progress in this thread or task (on any filesystem): a change made now may
    join its entry instead of being one of its own."""
    return bool(_SCOPE.get())


@contextlib.contextmanager
def _grouping(opened: contextlib.AbstractContextManager[Scope]) -> Iterator[None]:
    """``opened`` (an operation's scope), yielding nothing: the scope is the filesystem's own business."""
    with opened:
        yield


class HistoryMixin(FilesystemCore):
    """The journal's public face for every backend (``capabilities.history`` says whether it is kept)."""

    def _journal(self) -> Journal | None:
        """The journal this filesystem records into (``None``: it keeps no history)."""
        return None

    def _current_scope(self) -> Scope | None:
        """The operation in progress on this filesystem in this thread or task, if any (a task started inside
        an operation that outlives it sees the operation ended: its changes are entries of their own)."""
        for scope in _SCOPE.get():
            if scope.owner is self:
                return None if scope.ended else scope
        return None

    @contextlib.contextmanager
    def _journaled(self, operation: str, *, undoes: int | None = None, detail: str | None = None) -> Iterator[Scope]:
        """Group every change made inside the block into one entry named ``operation`` (an operation
        already in progress on this filesystem absorbs it)."""
        scope = self._current_scope()
        if scope is not None:
            scope.absorb(operation, detail)
            yield scope
            return
        scope = Scope(self, operation, operation_key(), current_actor(), undoes, detail)
        outer = _SCOPE.get()
        _SCOPE.set((scope, *outer))  # the operations of other filesystems in progress stay open
        try:
            yield scope
        finally:
            scope.end()
            # not a token's reset: the block may end in another context (a worker thread), and groups of several
            # filesystems (a composite's mounts) may end in any order: this scope leaves, the others stay
            _SCOPE.set(without(_SCOPE.get(), scope))
            if scope.changes:
                self._scope_finished(scope)

    def _note(self, operation: str, changes: Sequence[Any]) -> None:
        """Journal what a primitive changed: into the operation in progress, or as an entry of its own (for
        journals that record after the change; SQL writes its rows in the change's transaction instead)."""
        if _SCOPE.get():  # the common case, no operation in progress anywhere, without a walk of the scopes
            scope = self._current_scope()
            if scope is not None and scope.join(changes):
                return
        journal = self._journal()
        if changes and journal is not None:
            journal.note(operation, changes, current_actor())

    def _scope_finished(self, scope: Scope) -> None:
        """Record a finished scope's changes as one entry."""
        journal = self._journal()
        if journal is not None:
            scope.entry_id = journal.record(
                scope.operation, scope.changes, scope.actor, undoes=scope.undoes, detail=scope.detail
            )

    # --- reading ------------------------------------------------------------------------------------

    def _require_journal(self) -> Journal:
        journal = self._journal()
        if journal is None:
            raise UnsupportedOperationError(f"{type(self).__name__} keeps no history of changes")
        return journal

    def history(
        self,
        path: str | None = None,
        *,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> builtins.list[JournalEntry]:
        """Journal entries, newest first: those touching ``path`` (or below it), after entry id or time
        ``since`` (UTC where it names no zone), made by ``actor`` (an :class:`Actor` or a name, session or
        tool-call id); at most ``limit``.

        Raises:
            UnsupportedOperationError: the filesystem keeps no history (``capabilities.history``).
        """
        journal = self._require_journal()
        if limit is not None and limit < 0:
            raise ValueError("limit must not be negative")
        norm = None if path is None else self._norm(path)
        if isinstance(since, datetime) and since.tzinfo is None:
            since = since.replace(tzinfo=UTC)  # entries are stamped in UTC: a time without a zone is read so
        return journal.entries(path=norm, since=since, actor=actor, limit=limit)

    def history_entry(self, entry_id: int) -> JournalEntry:
        """One journal entry.

        Raises:
            HistoryEntryNotFoundError: no entry has that id (or retention dropped it).
        """
        return self._require_journal().entry(_entry_id(entry_id))

    def read_version(self, entry_id: int, path: str, *, side: str = "after") -> bytes:
        """The bytes ``path`` held just ``before`` or ``after`` journal entry ``entry_id`` (a diff between any
        two versions of a file reads two of these).

        Raises:
            HistoryEntryNotFoundError: no such entry.
            FileNotFoundError: the entry did not change ``path``, or left no file there (created, deleted,
                a directory), or that content is no longer kept.
        """
        if side not in {"before", "after"}:
            raise ValueError("side must be 'before' or 'after'")
        journal = self._require_journal()
        norm = self._norm(path)
        entry = journal.entry(_entry_id(entry_id))
        index = next((i for i, c in enumerate(entry.changes) if c.path == norm), None)
        if index is None:
            raise FileNotFoundError(2, f"Entry {entry_id} did not change this path", path)
        change = entry.changes[index]
        wanted = change.before if side == "before" else change.after
        if wanted is None or wanted == DIRECTORY:
            raise FileNotFoundError(2, f"No file was there {side} entry {entry_id}", path)
        if wanted == NOT_KEPT:
            raise FileNotFoundError(2, f"The content before entry {entry_id} was not kept", path)
        if side == "before":
            return _whole(self._history_content(entry, index))
        for later in reversed(journal.entries(path=norm, since=entry.entry_id, limit=None)):  # oldest first
            for position, each in enumerate(later.changes):
                if each.path == norm and each.before == wanted:
                    return _whole(self._history_content(later, position))
        if self._version_now(norm) == wanted:
            with cast(_Mutations, self).open_read(path) as reader:
                return bytes(reader.read())
        raise FileNotFoundError(2, f"The content after entry {entry_id} is no longer kept", path)

    def prune_history(self, *, before: datetime | None = None, keep: int | None = None) -> int:
        """Drop entries older than ``before`` and all but the newest ``keep``; returns how many went."""
        if keep is not None and keep < 0:
            raise ValueError("keep must not be negative")
        return self._require_journal().prune(before=before, keep=keep)

    def watch(self, path: str = "/", *, recursive: bool = True) -> ChangeWatcher:
        """Events for changes at ``path`` (and below it when ``recursive``) from now on: iterate the watcher,
        or ``async for`` it; close it to stop.

        Raises:
            UnsupportedOperationError: the filesystem cannot be watched (``capabilities.watch``).
        """
        if not self.capabilities.watch:
            raise UnsupportedOperationError(f"{type(self).__name__} cannot be watched")
        return self._require_journal().watch(self._norm(path), recursive)

    # --- undo ---------------------------------------------------------------------------------------

    def grouped(self, operation: str) -> contextlib.AbstractContextManager[None]:
        """Make every change made through this filesystem inside the ``with`` block one journal entry named
        ``operation``, undone as one (inside an operation already in progress: part of that one). Without a
        journal the block just runs.

        Threads and tasks started in the block with its context join it; a change they make after it ended,
        or still under way as it ends, is an entry of its own (:meth:`Scope.join`)."""
        if not isinstance(operation, str) or not operation.strip():
            raise ValueError("operation must be a non-empty name")
        return _grouping(self._group(operation))

    def _group(self, operation: str) -> contextlib.AbstractContextManager[Scope]:
        """The operation :meth:`grouped` opens (a composite's opens every mount's group at its start)."""
        return self._journaled(operation)

    def check_undo(
        self,
        entry_id: int | Sequence[int] | None = None,
        *,
        actor: str | Actor | None = None,
        last: int | None = None,
        force: bool = False,
    ) -> builtins.list[JournalEntry]:
        """The entries ``undo`` with the same arguments would put back, newest first; or the error it would
        raise. Changes nothing (a composite checks every mount's share this way before undoing any).

        Raises:
            HistoryEntryNotFoundError: no such entry.
            UndoContentNotKeptError: an entry's prior content was not kept (:data:`NOT_KEPT`), even with ``force``.
            UndoConflictError: a path changed again since (only without ``force``).
            ReadOnlyFileError: content would go back into a file locked since (its flag must be cleared first).
        """
        journal = self._require_journal()
        self._writable("/")
        if self._current_scope() is not None:
            raise undo_in_group()
        ids, count = undo_request(entry_id, actor, last)
        if ids is not None:
            targets = [journal.entry(each) for each in ids]
        else:
            targets = journal.entries(actor=actor, limit=count)
            if not targets:
                raise HistoryEntryNotFoundError(f"No journal entries by {actor!r}")
        for target in targets:  # first: content never kept is a refusal that force cannot lift
            _check_recorded(target)
        if not force:  # every entry is checked before anything changes: all are undone, or none
            self._check_undoable(journal, targets)
        for target in targets:
            self._check_kept(target)
        self._check_locks(targets)
        return targets

    def undo(
        self,
        entry_id: int | Sequence[int] | None = None,
        *,
        actor: str | Actor | None = None,
        last: int | None = None,
        force: bool = False,
    ) -> builtins.list[JournalEntry]:
        """Put back what journal entry ``entry_id`` changed (or each of several ids) — or the ``last`` n
        entries of ``actor`` — newest first, each as a new ``undo`` entry (so an undo can be undone). Returns
        the new entries.

        Refuses, changing nothing, when a later change (or one made outside workspacefs) touched the same
        path, unless ``force``; every entry is checked first (:meth:`check_undo`), so all are undone or none.

        Raises:
            HistoryEntryNotFoundError: no such entry.
            UndoContentNotKeptError: an entry's prior content was not kept, even with ``force``.
            UndoConflictError: a path changed again since (only without ``force``).
        """
        targets = self.check_undo(entry_id, actor=actor, last=last, force=force)
        undone: builtins.list[JournalEntry] = []
        for target in targets:  # newest first: each undo sees the state the later one left
            with self._journaled("undo", undoes=target.entry_id, detail=target.operation) as scope:
                for index in reversed(range(len(target.changes))):
                    self._put_back(target, index)
            made = self._scope_entry(scope) if scope.changes else None
            if made is not None:
                undone.append(made)
        return undone

    def _scope_entry(self, scope: Scope) -> JournalEntry | None:
        """The entry a finished scope became (a journal that writes rows as it goes finds it by the key)."""
        return None if scope.entry_id is None else self._require_journal().entry(scope.entry_id)

    def _check_undoable(self, journal: Journal, targets: Sequence[JournalEntry]) -> None:
        """Raise ``UndoConflictError`` unless each path of each target (newest first) will hold what the
        target left there when its turn comes: now, or as the newer targets' undo leaves it (a directory the
        target made must hold nothing else then: putting it back deletes it).

        The state decides, not the mere presence of later entries: a later change undone since (or one that
        wrote the same bytes again) is no conflict. The error names the later entries that touched the path;
        none means it was changed outside workspacefs."""
        plan = _Plan(self._version_now)
        for target in targets:
            made = {c.path for c in target.changes if c.before is None}
            for change in reversed(target.changes):  # as undo puts them back: a path changed twice in one
                moved_away = change.from_path is not None and plan.state(change.from_path) is not None
                if plan.state(change.path) != change.after or moved_away:  # entry is checked at each step
                    path = change.from_path if moved_away and change.from_path is not None else change.path
                    raise UndoConflictError(path, later=_later(journal, target, path))
                if change.before is None and change.after == DIRECTORY and change.from_path is None:
                    self._check_emptied(journal, target, plan, change.path, made)
                plan.undo_change(change)

    def _check_emptied(self, journal: Journal, target: JournalEntry, plan: _Plan, path: str, made: set[str]) -> None:
        """A directory ``target`` made is deleted with all it holds when the target is undone: refuse if it
        will hold anything the target did not make (another actor's file written there since)."""
        where = plan.now(path)
        if where is None:
            return
        for entry in self._walk(where):
            inside = path + entry.path[len(where) :]
            if inside not in made and plan.state(inside) is not None:
                raise UndoConflictError(inside, later=_later(journal, target, inside))

    def _version_now(self, path: str) -> str | None:
        """What ``path`` holds now, as a change records it: a content id, ``DIRECTORY`` or ``None``."""
        try:
            info = self._stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return DIRECTORY if info.is_directory else cast(_Mutations, self)._content_id(path)

    def _put_back(self, entry: JournalEntry, index: int) -> None:
        """Return one change's path to what it was before ``entry`` (a move goes back to its source)."""
        change: Change = entry.changes[index]
        fs = cast(_Mutations, self)
        now = self._version_now(change.path)
        if change.from_path is not None:  # moved here from from_path: move it back, then what it replaced
            if now is not None:
                fs.move("/" + change.path, "/" + change.from_path, overwrite=True)
            now = None
        if now == change.before:
            return
        if change.before is None:
            if now is not None:
                fs.delete("/" + change.path, recursive=now == DIRECTORY)
            return
        if change.before == DIRECTORY:
            if now is not None and now != DIRECTORY:
                fs.delete("/" + change.path)
            fs.mkdir("/" + change.path, parents=True, exist_ok=True)
            return
        content = self._history_content(entry, index)
        if now == DIRECTORY:
            fs.delete("/" + change.path, recursive=True)
        if isinstance(content, bytes):
            fs.write_bytes("/" + change.path, content)
            return
        with content, fs.open_write("/" + change.path) as writer:
            writer.write_all(content)

    def _history_content(self, entry: JournalEntry, index: int) -> bytes | ByteReader:
        """The content the entry's ``index``-th change replaced (what an undo writes back)."""
        raise UnsupportedOperationError(f"{type(self).__name__} keeps no content for undo")

    def _check_locks(self, targets: Sequence[JournalEntry]) -> None:
        """Raise ``ReadOnlyFileError`` if putting the targets back (newest first) would write content into a file
        read-only at that point that the entry did not lock itself; a backend without the per-file flag has
        nothing to check. Even with ``force``: the flag says the content may not change, whoever asks."""

    def _check_kept(self, entry: JournalEntry) -> None:
        """Raise ``FileNotFoundError`` if content the entry replaced is no longer kept (undo checks every target
        before changing anything). A backend whose entries and kept content go together has nothing to check."""

    # --- helpers for backends -----------------------------------------------------------------------

    @staticmethod
    def _actor() -> Actor:
        """The actor an entry made now is attributed to."""
        return current_actor()


class _Plan:
    """The tree as the undo of the newer targets will leave it, over the tree as it is now: exact paths put
    back, and directories moved back (a path below one is found where it is now)."""

    def __init__(self, version_now: Callable[[str], str | None]) -> None:
        self._version_now = version_now
        self._steps: list[tuple[dict[str, str | None], tuple[str, str] | None]] = []
        """Newest last: what a target's undo puts at exact paths, and a directory it moves back (src, dst)."""

    def undo_change(self, change: Change) -> None:
        """Add putting back one change (a target's are added the last first)."""
        values: dict[str, str | None] = {change.path: change.before}
        moved: tuple[str, str] | None = None
        if change.from_path is not None:
            values[change.from_path] = change.after
            moved = (change.from_path, change.path)
        self._steps.append((values, moved))

    def now(self, path: str) -> str | None:
        """Where what will be at ``path`` is now (``None``: the plan decides what is there)."""
        decided, found = self._follow(path)
        return None if decided else found

    def state(self, path: str) -> str | None:
        """What ``path`` will hold: a content id, ``DIRECTORY`` or ``None``."""
        decided, found = self._follow(path)
        return found if decided or found is None else self._version_now(found)

    def _follow(self, path: str) -> tuple[bool, str | None]:
        """``(True, what the plan puts at path)``, or ``(False, where it is now)``: the plan's steps, newest
        first, either decide the path or carry it back along a directory they move."""
        for values, moved in reversed(self._steps):
            if path in values:
                return True, values[path]
            if any(values.get(a, DIRECTORY) != DIRECTORY for a in _ancestors(path)):
                return True, None  # below something the plan removes or makes a file
            if moved is not None:
                src, dst = moved
                if path.startswith(src + "/"):
                    path = dst + path[len(src) :]
                elif path.startswith(dst + "/"):
                    return True, None  # moved away with its directory
        return False, path


def without(items: tuple[_T, ...], item: _T) -> tuple[_T, ...]:
    """``items`` less ``item`` (by identity; it is most often the first)."""
    if items and items[0] is item:
        return items[1:]
    return tuple(each for each in items if each is not item)


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _check_recorded(entry: JournalEntry) -> None:
    """Raise ``UndoContentNotKeptError`` if the entry changed a file whose prior content it never kept."""
    for change in entry.changes:
        if change.before == NOT_KEPT:
            raise UndoContentNotKeptError(
                change.path,
                f"Entry {entry.entry_id} ({entry.operation}) did not keep what this path held before, so it cannot "
                "be undone (force cannot help); restore a snapshot",
            )


def _later(journal: Journal, target: JournalEntry, path: str) -> tuple[int, ...]:
    return tuple(each.entry_id for each in journal.later_touching(target) if path in each.paths)


def _whole(content: bytes | ByteReader) -> bytes:
    if isinstance(content, bytes):
        return content
    with content:
        return bytes(content.read())


def _entry_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a journal entry id is an int, not {type(value).__name__}")
    return value


def entries_after(journal: Journal, entry_id: int) -> Sequence[JournalEntry]:
    """Every entry after ``entry_id``, oldest first (what an SSE client resuming from it missed)."""
    return list(reversed(journal.entries(since=entry_id, limit=None)))
