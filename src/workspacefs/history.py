"""History: who changed what, when — the journal's values, the caller's identity, and change events.

Every mutation made through workspacefs appends a :class:`JournalEntry` to its filesystem's journal: a
sequence number (``entry_id``), the time, the :class:`Actor` that made it, the operation, and one
:class:`Change` per path with the content id before and after. The actor is *declared* by the caller —
``with acting_as(Actor(agent="a1", session="s")):`` around the calls, which ``ToolContext(actor=…)``, the
service (from the request's token and headers), the CLI and MCP do for their callers — never guessed.
A :class:`ChangeEvent` is what ``fs.watch()`` yields for each changed path.

A journal (:class:`Journal`) is where a backend keeps the entries: in process for memory, a SQLite file
outside the root for a host directory, a table written in the same transaction as the change for SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable

from workspacefs.paths import ROOT, is_within

__all__ = [
    "DIRECTORY",
    "NOT_KEPT",
    "Actor",
    "Change",
    "ChangeEvent",
    "ChangeWatcher",
    "HistoryFilesystem",
    "Journal",
    "JournalEntry",
    "acting_as",
    "current_actor",
]

DIRECTORY = "directory"
"""What :attr:`Change.before`/:attr:`Change.after` hold for a directory (a file holds its content id)."""

NOT_KEPT = "not-kept"
"""What :attr:`Change.before` holds for a file whose prior content the journal did not keep (a command run in a
sandbox changed it, and the workspace was too large to copy first): an undo of its entry is refused."""

EventKind = Literal["created", "modified", "deleted", "moved"]


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change, as the caller declared it: an agent (``name``), its ``session``, the model's
    ``tool_call`` id, and the surface it came ``via`` (``"tool"``, ``"rest"``, ``"browser"``, ``"cli"``,
    ``"mcp"``, ``"library"``). Every field is optional; an empty actor is an undeclared library caller."""

    name: str | None = None
    session: str | None = None
    tool_call: str | None = None
    via: str | None = None

    @property
    def label(self) -> str:
        """One line for logs and the browser: ``agent-7 (session s1, call c9) via tool``."""
        who = self.name or "unnamed caller"
        extra = ", ".join(
            part
            for part in (self.session and f"session {self.session}", self.tool_call and f"call {self.tool_call}")
            if part
        )
        return who + (f" ({extra})" if extra else "") + (f" via {self.via}" if self.via else "")

    def matches(self, query: str | Actor) -> bool:
        """True if ``query`` (an actor, or a name/session/tool-call id) names this actor."""
        if isinstance(query, Actor):
            return all(mine == wanted for mine, wanted in zip(self.fields(), query.fields(), strict=True) if wanted)
        return query in (self.name, self.session, self.tool_call)

    def fields(self) -> tuple[str | None, str | None, str | None, str | None]:
        """``(name, session, tool_call, via)``."""
        return (self.name, self.session, self.tool_call, self.via)

    def to_json(self) -> str:
        """A compact JSON object of the fields that are set (what journals store)."""
        return json.dumps({k: v for k, v in zip(_ACTOR_KEYS, self.fields(), strict=True) if v}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> Actor:
        """The actor :meth:`to_json` wrote (unknown keys are ignored; bad JSON is an anonymous actor)."""
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        return cls(*(str(data[k]) if data.get(k) is not None else None for k in _ACTOR_KEYS))


_ACTOR_KEYS = ("name", "session", "tool_call", "via")
_NOBODY = Actor()
_ACTOR: ContextVar[Actor] = ContextVar("workspacefs_actor", default=_NOBODY)


def current_actor() -> Actor:
    """The actor declared by the innermost :func:`acting_as` (an empty :class:`Actor` when none is)."""
    return _ACTOR.get()


def acting_as(actor: Actor | str | None = None, **fields: str | None) -> ActingAs:
    """Declare who makes the changes inside the block (thread- and task-local): ``with acting_as(...) as who:``.

    Pass an :class:`Actor`, a name, or fields (``session=``, ``tool_call=``, ``via=``); fields not given
    are inherited from the enclosing declaration, so a service can set the session and a tool call its id.
    """
    return ActingAs(actor, fields)


class ActingAs:
    """The context manager :func:`acting_as` returns (a class, not a generator: it runs on every request and
    tool call, and a generator-based one cost several times as much)."""

    __slots__ = ("_actor", "_fields", "_token")

    def __init__(self, actor: Actor | str | None, fields: dict[str, str | None]) -> None:
        self._actor = actor
        self._fields = fields
        self._token: Token[Actor] | None = None

    def __enter__(self) -> Actor:
        outer = _ACTOR.get()
        actor, fields = self._actor, self._fields
        base = Actor(name=actor) if isinstance(actor, str) else (actor or outer)
        if outer is _NOBODY and not fields:  # the common case: nothing to inherit
            merged = base
        else:
            merged = Actor(
                *(
                    fields.get(key, mine if mine is not None else theirs)
                    for key, mine, theirs in zip(_ACTOR_KEYS, base.fields(), outer.fields(), strict=True)
                )
            )
        self._token = _ACTOR.set(merged)
        return merged

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _ACTOR.reset(self._token)
            self._token = None


@dataclass(frozen=True, slots=True)
class Change:
    """One path an entry changed: content id ``before`` and ``after`` (``None``: nothing there;
    :data:`DIRECTORY`: a directory; ``before`` :data:`NOT_KEPT`: a file whose content was not kept), the size
    each had, and for a move the path it came ``from_path``.

    Where a backend has a per-file read-only flag (``capabilities.file_read_only``) and the change set it,
    ``read_only_before``/``read_only_after`` say what it was and became (``None``: the flag was not changed);
    a flag-only change has the same content id on both sides. A read-only file that went (deleted, or a
    directory in its place) has ``read_only_before`` true and ``read_only_after`` ``None``: undo brings it back
    read-only."""

    path: str
    before: str | None
    after: str | None
    size_before: int = 0
    size_after: int = 0
    from_path: str | None = None
    read_only_before: bool | None = None
    read_only_after: bool | None = None

    @property
    def kind(self) -> EventKind:
        """``created``, ``modified``, ``deleted`` or ``moved`` (a move's destination)."""
        if self.from_path is not None:
            return "moved"
        if self.before is None:
            return "created"
        if self.after is None:
            return "deleted"
        return "modified"

    @property
    def size_delta(self) -> int:
        """Bytes the workspace gained (negative: lost); a move gains nothing but loses a file it replaced."""
        return -self.size_before if self.from_path is not None else self.size_after - self.size_before


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One mutation: its sequence number, time, actor, operation and the paths it changed.

    ``undoes`` names the entry this one undid (an undo is itself an entry, and can be undone)."""

    entry_id: int
    time: datetime
    actor: Actor
    operation: str
    changes: tuple[Change, ...]
    undoes: int | None = None
    detail: str | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the entry touched, in order (a move lists its source and its destination)."""
        seen: dict[str, None] = {}
        for change in self.changes:
            if change.from_path is not None:
                seen.setdefault(change.from_path, None)
            seen.setdefault(change.path, None)
        return tuple(seen)

    @property
    def size_delta(self) -> int:
        """Bytes the entry added to the workspace (negative: removed)."""
        return sum(change.size_delta for change in self.changes)

    def touches(self, path: str) -> bool:
        """True if the entry changed ``path`` or anything below it, or moved a directory holding it (a directory's
        move is one change, its files named by no row of their own); ``""``: the root, always."""
        if path == ROOT or any(is_within(each, path) for each in self.paths):
            return True
        return any(
            change.from_path is not None
            and change.after == DIRECTORY
            and (is_within(path, change.path) or is_within(path, change.from_path))
            for change in self.changes
        )

    def events(self) -> list[ChangeEvent]:
        """One :class:`ChangeEvent` per change."""
        return [
            ChangeEvent(
                kind=change.kind,
                path=change.path,
                actor=self.actor,
                content_id=change.after if change.after != DIRECTORY else None,
                entry_id=self.entry_id,
                time=self.time,
                is_directory=DIRECTORY in (change.before, change.after),
                from_path=change.from_path,
            )
            for change in self.changes
        ]


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """A path that changed: ``created``, ``modified``, ``deleted`` or ``moved`` (from ``from_path``), who
    changed it, its new content id (``None`` when deleted or a directory) and the journal entry (``None`` for
    a change made outside workspacefs, seen by watching the directory)."""

    kind: EventKind
    path: str
    actor: Actor
    content_id: str | None
    entry_id: int | None
    time: datetime = field(default_factory=lambda: datetime.now(UTC))
    is_directory: bool = False
    from_path: str | None = None


class ChangeWatcher:
    """The events of one ``fs.watch()``: iterate it (``for event in watcher``) or ``async for`` it; close it
    (or leave the ``with`` block) to stop. ``next_event(timeout)`` returns ``None`` when nothing came."""

    def __init__(self, path: str, recursive: bool, on_close: Callable[[ChangeWatcher], None]) -> None:
        self._path = path
        self._recursive = recursive
        self._queue: queue.SimpleQueue[ChangeEvent | None] = queue.SimpleQueue()
        self._on_close = on_close
        self._closed = False

    def wants(self, event: ChangeEvent) -> bool:
        """True if the event is at the watched path, below it (recursive) or directly in it."""
        for path in (event.path, event.from_path):
            if path is None:
                continue
            if self._path == ROOT and self._recursive:
                return True
            if path == self._path:
                return True
            if self._recursive and is_within(path, self._path):
                return True
            if not self._recursive and path.rpartition("/")[0] == self._path:
                return True
        return False

    def deliver(self, event: ChangeEvent) -> None:
        """Queue an event this watcher wants (called by the journal, from any thread)."""
        if not self._closed and self.wants(event):
            self._queue.put(event)

    def next_event(self, timeout: float | None = None) -> ChangeEvent | None:
        """The next event, waiting up to ``timeout`` seconds (``None``: until one comes or it is closed)."""
        if self._closed and self._queue.empty():
            return None
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop watching; an iteration in progress ends."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._on_close(self)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def __enter__(self) -> ChangeWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[ChangeEvent]:
        while True:
            event = self.next_event()
            if event is None:
                return
            yield event

    async def __aiter__(self) -> AsyncIterator[ChangeEvent]:
        while not self._closed or not self._queue.empty():
            event = await asyncio.to_thread(self.next_event, 0.25)
            if event is not None:
                yield event


class Journal(ABC):
    r"""Where one filesystem keeps its entries, and who is watching them.

    Each kind records in its own way (in process, in a SQLite file beside a host directory, in the change's
    own SQL transaction) and then :meth:`publish`\ es the entry's events to every watcher; ``fs.history`` and
    ``fs.undo`` read with :meth:`entries` and :meth:`entry`.
    """

    def __init__(self) -> None:
        self._watchers: list[ChangeWatcher] = []
        self._watch_lock = threading.Lock()

    def record(
        self,
        operation: str,
        changes: Sequence[Any],
        actor: Actor,
        *,
        undoes: int | None = None,
        detail: str | None = None,
    ) -> int:
        """Keep one entry made of ``changes`` (and publish it); returns its id. A journal that writes its rows
        in each change's own transaction (SQL) records there instead and refuses this."""
        raise NotImplementedError(f"{type(self).__name__} records in each change's own transaction")

    def note(self, operation: str, changes: Sequence[Any], actor: Actor) -> None:
        """Keep an entry whose id nobody waits for (one plain change): as :meth:`record`, unless the journal
        writes such entries a little later, in groups (the host journal does)."""
        self.record(operation, changes, actor)

    @abstractmethod
    def entries(
        self,
        *,
        path: str | None = None,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> list[JournalEntry]:
        """Entries newest first: touching ``path`` (or below it), after entry id / time ``since``, by
        ``actor``; at most ``limit``."""

    @abstractmethod
    def entry(self, entry_id: int) -> JournalEntry:
        """One entry; ``KeyError`` if there is none (never was, or pruned)."""

    @abstractmethod
    def prune(self, *, before: datetime | None = None, keep: int | None = None) -> int:
        """Drop entries older than ``before`` and all but the newest ``keep``; returns how many went."""

    def later_touching(self, entry: JournalEntry) -> list[JournalEntry]:
        """Entries after ``entry`` that changed one of its paths (what makes undoing it a conflict)."""
        paths = set(entry.paths)
        later = self.entries(since=entry.entry_id, limit=None)
        return [each for each in later if paths.intersection(each.paths)]

    # --- watching -----------------------------------------------------------------------------------

    def watch(self, path: str, recursive: bool) -> ChangeWatcher:
        """A new watcher of this journal's events at ``path``."""
        watcher = ChangeWatcher(path, recursive, self._forget)
        with self._watch_lock:
            self._watchers.append(watcher)
        self._watching_started()
        return watcher

    def _forget(self, watcher: ChangeWatcher) -> None:
        with self._watch_lock:
            if watcher in self._watchers:
                self._watchers.remove(watcher)
            remaining = len(self._watchers)
        if not remaining:
            self._watching_stopped()

    def _watching_started(self) -> None:
        """A journal that also watches outside changes (a host directory) starts doing so here."""

    def _watching_stopped(self) -> None:
        """…and stops here, when the last watcher closes."""

    @property
    def watched(self) -> bool:
        """True while someone watches (a backend may skip building events nobody reads)."""
        return bool(self._watchers)

    def publish(self, events: Sequence[ChangeEvent]) -> None:
        """Deliver events to every watcher (from any thread)."""
        if not self._watchers:
            return
        with self._watch_lock:
            watchers = list(self._watchers)
        for event in events:
            for watcher in watchers:
                watcher.deliver(event)


def entry_matches(
    entry: JournalEntry, *, path: str | None, since: int | datetime | None, actor: str | Actor | None
) -> bool:
    """The filter every journal applies (a database journal applies it in its query instead)."""
    if since is not None:
        if isinstance(since, datetime):
            if entry.time <= since:
                return False
        elif entry.entry_id <= since:
            return False
    if actor is not None and not entry.actor.matches(actor):
        return False
    return path is None or entry.touches(path)


@runtime_checkable
class HistoryFilesystem(Protocol):
    """What a filesystem with ``capabilities.history`` (and ``watch``) offers; every built-in backend has
    these methods, and ``capabilities`` says whether they work."""

    def history(
        self,
        path: str | None = None,
        *,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> list[JournalEntry]: ...

    def history_entry(self, entry_id: int) -> JournalEntry: ...

    def read_version(self, entry_id: int, path: str, *, side: str = "after") -> bytes: ...

    def undo(
        self,
        entry_id: int | Sequence[int] | None = None,
        *,
        actor: str | Actor | None = None,
        last: int | None = None,
        force: bool = False,
    ) -> list[JournalEntry]: ...

    def check_undo(
        self,
        entry_id: int | Sequence[int] | None = None,
        *,
        actor: str | Actor | None = None,
        last: int | None = None,
        force: bool = False,
    ) -> list[JournalEntry]: ...

    def grouped(self, operation: str) -> contextlib.AbstractContextManager[None]: ...

    def prune_history(self, *, before: datetime | None = None, keep: int | None = None) -> int: ...

    def watch(self, path: str = "/", *, recursive: bool = True) -> ChangeWatcher: ...
