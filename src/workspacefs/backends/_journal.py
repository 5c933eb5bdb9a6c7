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
from workspacefs.paths import ROOT, is_within

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
"""An entry as kept: ``(entry id, time, actor, operation, changes, undoes, detail)``, a plain tuple (and
each change a plain ``(path, before, after, from_path)`` tuple on the write path): a named tuple costs
ten times as much to make, and this is made on every write."""
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
    """Raw entries in a list (ids ascending), described on demand by ``describe``."""

    def __init__(self, describe: Describe, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        super().__init__()
        self._describe = describe
        self._lock = threading.Lock()
        self._raw: list[_Raw] = []
        self._built: dict[int, JournalEntry] = {}
        self._by_path: dict[str, list[int]] = {}
        """Entry ids by each path they changed (a path's history is found without a walk of the journal)."""
        self._next = 1
        self.max_entries = max_entries

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
        kept = changes if type(changes) is tuple else tuple(changes)
        with self._lock:
            entry_id = self._next
            raw = (entry_id, time.time(), actor, operation, kept, undoes, detail)
            self._next = entry_id + 1
            self._raw.append(raw)
            by_path = self._by_path
            for change in kept:
                ids = by_path.get(change[_PATH])
                if ids is None:
                    by_path[change[_PATH]] = [entry_id]
                else:
                    ids.append(entry_id)
                if change[_FROM] is not None:
                    by_path.setdefault(change[_FROM], []).append(entry_id)
            if len(self._raw) > self.max_entries + self.max_entries // 8:  # in batches: a drop walks the index
                self._drop(len(self._raw) - self.max_entries)
        if self._watchers:
            self.publish(self._build(raw).events())
        return entry_id

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
            at = bisect.bisect_left(self._raw, entry_id, key=_entry_id)
            if at < len(self._raw) and self._raw[at][_ID] == entry_id:
                return self._raw[at]
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
            kept = self._raw
            start = bisect.bisect_right(kept, since, key=_entry_id) if isinstance(since, int) else 0
            if path is not None and path != ROOT:  # only the entries the path index names
                ids = sorted({i for p, each in self._by_path.items() if is_within(p, path) for i in each})
                oldest = kept[0][_ID] if kept else 0
                window = [kept[i - oldest] for i in ids if start <= i - oldest < len(kept)]
            else:
                window = kept[start:]
        found: list[JournalEntry] = []
        for raw in reversed(window):  # filter the raw entry first: describing one hashes its content
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
                doomed = bisect.bisect_left(self._raw, before.timestamp(), key=lambda raw: raw[_STAMP])
            if keep is not None:
                doomed = max(doomed, len(self._raw) - keep)
            self._drop(doomed)
            return doomed

    def _drop(self, count: int) -> None:
        """Forget the ``count`` oldest entries (the lock is held)."""
        if not count:
            return
        for raw in self._raw[:count]:
            self._built.pop(raw[_ID], None)
        del self._raw[:count]
        oldest = self._raw[0][_ID] if self._raw else self._next
        for path in list(self._by_path):
            ids = [i for i in self._by_path[path] if i >= oldest]
            if ids:
                self._by_path[path] = ids
            else:
                del self._by_path[path]


def _touches(change: tuple[Any, ...], path: str) -> bool:
    return any(each is not None and is_within(each, path) for each in (change[_PATH], change[_FROM]))


def _entry_id(raw: _Raw) -> int:
    return raw[_ID]
