"""Writers of one SQLite database in this process take turns, first come first served.

SQLite lets one writer in at a time and makes the others poll (``busy_timeout`` sleeps 1, 2, 5 … 100 ms
between tries), so a thread that commits and begins again at once wins over one asleep in that loop: with three
threads writing, a fourth's snapshot waited up to a second, and one writer got a third of another's share. Here
a writer that finds the database taken by another thread of this process waits in line and is woken when its
turn comes, so SQLite's polling is left to writers in other processes.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque

__all__ = ["Turns", "turns_for"]


class Turns:
    """A first-come-first-served lock; a thread that holds it passes through again (its nested write then
    meets SQLite's own lock, as it would without this)."""

    __slots__ = ("__weakref__", "_lock", "_owner", "_patience", "_waiting")

    def __init__(self, patience: float = -1) -> None:
        self._patience = patience
        """How long a writer waits in line (negative: for ever) before it leaves SQLite's lock to decide."""
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._waiting: deque[tuple[int, threading.Lock]] = deque()
        _ALL.add(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._owner = None
        self._waiting = deque()

    def take(self) -> bool:
        """Wait for this thread's turn (for at most the patience given); ``False`` if it already had it or lost
        patience (then :meth:`give` is not called, and SQLite's own lock decides)."""
        me = threading.get_ident()
        with self._lock:
            if self._owner is None:
                self._owner = me
                return True
            if self._owner == me:
                return False
            woken = threading.Lock()
            woken.acquire()
            self._waiting.append((me, woken))
        try:
            if woken.acquire(timeout=self._patience):  # released by give(), which has made this thread the owner
                return True
        except BaseException:  # interrupted in line: leave it, or pass on a turn that came meanwhile
            if not self._leave(woken):
                self.give()
            raise
        return not self._leave(woken)  # the turn may have come as patience ran out

    def _leave(self, woken: threading.Lock) -> bool:
        """Leave the line; ``False`` if this waiter was already given the turn."""
        with self._lock:
            for each in self._waiting:
                if each[1] is woken:
                    self._waiting.remove(each)
                    return True
        return False

    def give(self) -> None:
        """End this thread's turn: the longest waiting thread's begins."""
        with self._lock:
            if self._waiting:
                self._owner, woken = self._waiting.popleft()
                woken.release()
            else:
                self._owner = None


_ALL: weakref.WeakSet[Turns] = weakref.WeakSet()
_BY_DATABASE: dict[str, Turns] = {}
_BY_DATABASE_LOCK = threading.Lock()


def _forget() -> None:
    """In a forked child: the parent's other threads, and so their turns and locks, are not here."""
    global _BY_DATABASE_LOCK  # noqa: PLW0603 - a fresh lock: the parent's may have been held at the fork
    _BY_DATABASE_LOCK = threading.Lock()
    for turns in list(_ALL):
        turns._reset()


os.register_at_fork(after_in_child=_forget)


def turns_for(database: str | None, patience: float = -1) -> Turns:
    """The turns of a SQLite database file, shared by every store of it in this process (an in-memory or
    temporary database gets its own)."""
    if not database or database == ":memory:":
        return Turns(patience)
    key = os.path.realpath(database)
    with _BY_DATABASE_LOCK:
        found = _BY_DATABASE.get(key)
        if found is None:
            found = _BY_DATABASE[key] = Turns(patience)
        return found
