"""``MemoryJournal``: a journal kept in process (the in-memory backend's).

Recording must cost next to nothing on the hot path of a write, so an entry is kept raw — the states'
own node objects before and after each change — and turned into a :class:`JournalEntry` (content ids,
sizes) only when someone reads it. The node objects also hold the before-content an undo puts back;
they are shared with the filesystem's states, so keeping them costs no copy. Retention drops the oldest
entries (and with them the only references to content nothing else holds).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

from workspacefs.errors import HistoryEntryNotFoundError
from workspacefs.history import Actor, Change, Journal, JournalEntry, entry_matches
from workspacefs.paths import ROOT, ancestors, is_within

__all__ = ["DEFAULT_MAX_ENTRIES", "MemoryJournal", "RawChange"]

DEFAULT_MAX_ENTRIES = 100_000
"""Entries a journal keeps by default (an eighth more between two drops); older ones are dropped."""


class RawChange(NamedTuple):
    """A change as recorded: the backend's own objects for the path before and after (``None``: absent).
    The journal reads it by position, so the hot path may pass a plain tuple of the same four fields."""

    path: str
    before: Any
    after: Any
    from_path: str | None = None


Describe = Callable[[Any], tuple[str | None, int]]
"""Turns a recorded object into ``(content id or DIRECTORY or None, size)``."""


_Raw = tuple[int, float, Actor, str, tuple[Any, ...], "int | None", "str | None"]
"""An entry as read: ``(entry id, time, actor, operation, changes, undoes, detail)``; each change a plain
``(path, before, after, from_path)`` tuple on the write path (a named tuple costs ten times as much)."""
_ID: Final = 0
_STAMP: Final = 1
_ACTOR: Final = 2
_OPERATION: Final = 3
_CHANGES: Final = 4
_UNDOES: Final = 5
_DETAIL: Final = 6
_PATH: Final = 0
_BEFORE: Final = 1
_AFTER: Final = 2
_FROM: Final = 3


class MemoryJournal(Journal):
    """Entries in columns (ids contiguous from ``_first``), described on demand by ``describe``.

    Columns, not a tuple per entry: every object an entry keeps alive is one more for the cyclic garbage
    collector to walk on each full collection, which cost a journaled write more than recording it did. A
    one-change entry keeps no object of its own (its path and objects sit in three columns); several changes
    are kept as one tuple; a path's first entry id is kept as a plain int in the path index.
    """

    def __init__(self, describe: Describe, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        super().__init__()
        self._describe = describe
        self._lock = threading.Lock()
        self._first = 1
        """The id of the oldest entry kept (the one at index 0 of every column)."""
        self._stamps: list[float] = []
        self._actors: list[Actor] = []
        self._operations: list[str] = []
        self._paths: list[str | None] = []
        """Per entry: the path of its one change (``_befores``/``_afters`` hold the objects), or ``None`` when
        ``_befores`` holds a tuple of its changes (several, or one with a ``from_path``)."""
        self._befores: list[Any] = []
        self._afters: list[Any] = []
        self._extras: list[tuple[int | None, str | None] | None] = []
        """Per entry: ``(undoes, detail)``, or ``None`` for the many that have neither."""
        self._built: dict[int, JournalEntry] = {}
        self._by_path: dict[str, int | list[int]] = {}
        """Entry ids by each path they changed (a path's history is found without a walk of the journal)."""
        self._next = 1
        self.max_entries = max_entries

    @property
    def max_entries(self) -> int:
        """Entries kept; past an eighth more, the oldest are dropped (in batches: a drop walks the path index)."""
        return self._max_entries

    @max_entries.setter
    def max_entries(self, value: int) -> None:
        self._max_entries = value
        self._cap = value + value // 8

    def record(
        self,
        operation: str,
        changes: Sequence[Any],
        actor: Actor,
        *,
        undoes: int | None = None,
        detail: str | None = None,
    ) -> int:
        """Keep one entry (and publish it to watchers); returns its id."""
        if len(changes) == 1 and changes[0][_FROM] is None and undoes is None and detail is None:
            path, before, after = changes[0][_PATH], changes[0][_BEFORE], changes[0][_AFTER]
            return self.record_change(operation, path, before, after, actor, stamp=time.time())
        with self._lock:
            entry_id = self._next
            self._next = entry_id + 1
            self._stamps.append(time.time())
            self._actors.append(actor)
            self._operations.append(operation)
            self._paths.append(None)
            self._befores.append(tuple(changes))
            self._afters.append(None)
            self._extras.append(None if undoes is None and detail is None else (undoes, detail))
            for change in changes:
                _index(self._by_path, change[_PATH], entry_id)
                if change[_FROM] is not None:
                    _index(self._by_path, change[_FROM], entry_id)
            raw = self._kept(entry_id)
        if raw is not None:
            self.publish(self._build(raw).events())
        return entry_id

    def record_change(self, operation: str, path: str, before: Any, after: Any, actor: Actor, *, stamp: float) -> int:
        """:meth:`record` for the commonest entry, one change without a ``from_path``, at ``stamp`` (the
        caller's ``time.time()``): no object of its own (three columns), and written inline: it runs on every write."""
        with self._lock:
            entry_id = self._next
            self._next = entry_id + 1
            self._stamps.append(stamp)
            self._actors.append(actor)
            self._operations.append(operation)
            self._paths.append(path)
            self._befores.append(before)
            self._afters.append(after)
            self._extras.append(None)
            by_path = self._by_path
            if path in by_path:
                _index(by_path, path, entry_id)
            else:
                by_path[path] = entry_id
            if entry_id - self._first >= self._cap:  # _kept, inline: a call here costs 2% of a write
                self._drop(len(self._stamps) - self.max_entries)
            raw = self._raw(entry_id) if self._watchers else None
        if raw is not None:
            self.publish(self._build(raw).events())
        return entry_id

    def _kept(self, entry_id: int) -> _Raw | None:
        """After an entry went in (the lock is held): drop the oldest past the cap; the entry, if watchers wait."""
        if entry_id - self._first >= self._cap:
            self._drop(len(self._stamps) - self.max_entries)
        return self._raw(entry_id) if self._watchers else None

    def _raw(self, entry_id: int) -> _Raw:
        """The entry ``entry_id`` as one tuple (the lock is held; the id is kept)."""
        return self._columns(entry_id)[0](entry_id)

    def _columns(self, start: int) -> tuple[Callable[[int], _Raw], int]:
        """A reader of entries ``start`` and newer over copies of the columns, usable without the lock, and the
        id after the newest (the lock is held: copying is a slice per column, the old list's cost)."""
        at = start - self._first
        stamps, actors, operations = self._stamps[at:], self._actors[at:], self._operations[at:]
        paths, befores, afters, extras = self._paths[at:], self._befores[at:], self._afters[at:], self._extras[at:]

        def raw(entry_id: int) -> _Raw:
            i = entry_id - start
            path = paths[i]
            each = befores[i] if path is None else ((path, befores[i], afters[i], None),)
            undoes, detail = extras[i] or (None, None)
            return (entry_id, stamps[i], actors[i], operations[i], each, undoes, detail)

        return raw, self._next

    def _build(self, raw: _Raw) -> JournalEntry:
        built = self._built.get(raw[_ID])
        if built is None:
            changes = []
            for change in raw[_CHANGES]:
                before, size_before = self._describe(change[_BEFORE])
                after, size_after = self._describe(change[_AFTER])
                changes.append(Change(change[_PATH], before, after, size_before, size_after, change[_FROM]))
            built = JournalEntry(
                raw[_ID],
                datetime.fromtimestamp(raw[_STAMP], UTC),
                raw[_ACTOR],
                raw[_OPERATION],
                tuple(changes),
                raw[_UNDOES],
                raw[_DETAIL],
            )
            self._built[raw[_ID]] = built
        return built

    def _find(self, entry_id: int) -> _Raw:
        with self._lock:
            if self._first <= entry_id < self._next:
                return self._raw(entry_id)
        raise HistoryEntryNotFoundError(f"No journal entry {entry_id}")

    def before_object(self, entry_id: int, index: int) -> Any:
        """The recorded object the entry's ``index``-th change replaced (what an undo puts back)."""
        return self._find(entry_id)[_CHANGES][index][_BEFORE]

    def entries(
        self,
        *,
        path: str | None = None,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> list[JournalEntry]:
        with self._lock:
            start = max(self._first, since + 1) if isinstance(since, int) else self._first
            ids: list[int] | None = None
            if path is not None and path != ROOT:  # only the entries the path index names
                named = {i for p, each in self._by_path.items() if is_within(p, path) for i in _ids(each)}
                for above in ancestors(path):  # a directory moved with ``path`` in it (see JournalEntry.touches)
                    kept = self._by_path.get(above)
                    named.update(() if kept is None else _ids(kept))
                ids = sorted(i for i in named if start <= i < self._next)
            read, end = self._columns(start)
        window = map(read, reversed(range(start, end) if ids is None else ids))
        found: list[JournalEntry] = []
        for raw in window:  # filter the raw entry first: describing one hashes its content
            if actor is not None and not raw[_ACTOR].matches(actor):
                continue
            if path is not None and path != ROOT and not any(_touches(change, path) for change in raw[_CHANGES]):
                continue
            entry = self._build(raw)
            if entry_matches(entry, path=path, since=since, actor=actor):
                found.append(entry)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def entry(self, entry_id: int) -> JournalEntry:
        return self._build(self._find(entry_id))

    def prune(self, *, before: datetime | None = None, keep: int | None = None) -> int:
        with self._lock:
            doomed = 0
            if before is not None:
                doomed = bisect.bisect_left(self._stamps, before.timestamp())
            if keep is not None:
                doomed = max(doomed, len(self._stamps) - keep)
            self._drop(doomed)
            return doomed

    def _drop(self, count: int) -> None:
        """Forget the ``count`` oldest entries (the lock is held)."""
        if not count:
            return
        oldest = self._first + count
        for entry_id in range(self._first, oldest):
            self._built.pop(entry_id, None)
        columns = (self._stamps, self._actors, self._operations, self._paths, self._befores, self._afters, self._extras)
        for column in columns:
            del column[:count]
        self._first = oldest
        for path in list(self._by_path):
            ids = [i for i in _ids(self._by_path[path]) if i >= oldest]
            if not ids:
                del self._by_path[path]
            else:
                self._by_path[path] = ids[0] if len(ids) == 1 else ids


def _index(by_path: dict[str, int | list[int]], path: str, entry_id: int) -> None:
    """Add ``entry_id`` to ``path``'s ids: a plain int for its first (most paths change once), then a list."""
    ids = by_path.get(path)
    if ids is None:
        by_path[path] = entry_id
    elif type(ids) is int:
        by_path[path] = [ids, entry_id]
    else:
        ids.append(entry_id)  # type: ignore[union-attr]  # not an int: the list


def _ids(kept: int | list[int]) -> Sequence[int]:
    return (kept,) if type(kept) is int else kept  # type: ignore[return-value]  # not an int: the list


def _touches(change: tuple[Any, ...], path: str) -> bool:
    """The raw pre-filter of :meth:`JournalEntry.touches`: ``path`` or below, or a move of something above it."""
    return any(
        each is not None and (is_within(each, path) or (change[_FROM] is not None and is_within(path, each)))
        for each in (change[_PATH], change[_FROM])
    )
