"""Changes made to a host directory outside workspacefs (an editor, a command in a container), as events.

While someone watches a host filesystem, a thread follows the root with inotify through ``watchfiles``
(``pip install watchfiles``; it comes with ``workspacefs[server]``). A change the journal already reported
(what the path holds now is what its newest entry left there) is dropped, so a watcher sees each change
once; any other is published with ``entry_id=None`` and the actor ``Actor(via="outside")``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import threading
from collections.abc import Callable

from workspacefs._hostio import TEMP_PREFIX, is_listable_name
from workspacefs.history import DIRECTORY, Actor, ChangeEvent, Journal

__all__ = ["OUTSIDE", "OutsideWatcher", "can_watch_outside"]

_ANONYMOUS = re.compile(r"#\d+")
"""How inotify names an ``O_TMPFILE`` file (a writer's anonymous temporary file) before it is linked."""

OUTSIDE = Actor(via="outside")
"""Who made a change seen on disk without a journal entry: nobody workspacefs knows."""

Observe = Callable[[str], tuple[str | None, int]]


def can_watch_outside() -> bool:
    """True if ``watchfiles`` is installed (without it, watchers see changes made through workspacefs only)."""
    return importlib.util.find_spec("watchfiles") is not None


class OutsideWatcher:
    """A thread publishing to ``journal`` the changes inotify sees under ``root`` that no entry explains."""

    def __init__(self, root: str, journal: Journal, observe: Observe, *, held: Callable[[], bool] = bool) -> None:
        self._root = os.path.realpath(root)
        self._journal = journal
        self._observe = observe
        self._held = held
        """True while a command runs through workspacefs: what it changes waits for its entry, which explains it."""
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wsfs-host-watch", daemon=True)

    def start(self) -> None:
        """Begin following the root (returns once inotify is set up, or after a few seconds)."""
        self._thread.start()
        self._ready.wait(5)

    def stop(self) -> None:
        """Stop following, and wait for the thread."""
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        import watchfiles  # noqa: PLC0415 - optional: only a watcher of a host directory needs it

        kinds = {watchfiles.Change.added: "created", watchfiles.Change.modified: "modified"}
        seen: dict[str, str] = {}  # one event per path: what it holds when its batch (or those held) is looked at
        with contextlib.suppress(Exception):  # the root going away ends the watch, not the process
            for batch in watchfiles.watch(
                self._root,
                stop_event=self._stop,
                debounce=50,
                step=10,
                rust_timeout=200,
                yield_on_timeout=True,
                raise_interrupt=False,
            ):
                self._ready.set()
                for change, absolute in sorted(batch, key=lambda item: item[1]):
                    path = self._relative(absolute)
                    if path is not None:
                        seen[path] = kinds.get(change, "deleted")
                if self._held():
                    continue  # an empty batch comes every rust_timeout: these are looked at once the entry is there
                events = [self._unexplained(kind, path) for path, kind in seen.items()]
                seen = {}
                self._journal.publish([event for event in events if event is not None])
        self._ready.set()

    def _relative(self, absolute: str) -> str | None:
        """The workspace path of ``absolute`` (``None``: the root itself, a writer's temporary file, or anything
        below a hidden directory: a tree a move or copy over a directory prepares or removes there)."""
        if not absolute.startswith(self._root + os.sep):
            return None
        path = absolute[len(self._root) + 1 :]
        name = os.path.basename(path)
        if name.startswith(TEMP_PREFIX) or not is_listable_name(name) or _ANONYMOUS.fullmatch(name):
            return None
        if TEMP_PREFIX in path and any(part.startswith(TEMP_PREFIX) for part in path.split(os.sep)):
            return None
        return path

    def _unexplained(self, kind: str, path: str) -> ChangeEvent | None:
        """An event for ``path``, unless the journal's newest entry for it left exactly what is there now."""
        held, _ = self._observe(path)
        known = False
        for entry in self._journal.entries(path=path, limit=1):
            for change in entry.changes:
                if (change.path == path and change.after == held) or (change.from_path == path and held is None):
                    return None
                known = known or (change.path == path and change.after is not None)
        if held is None:
            kind = "deleted"
        elif kind == "deleted" or known:  # a file the journal knows, changed in place (or replaced)
            kind = "modified"
        return ChangeEvent(
            kind=kind,  # type: ignore[arg-type]
            path=path,
            actor=OUTSIDE,
            content_id=held if held != DIRECTORY else None,
            entry_id=None,
            is_directory=held == DIRECTORY,
        )
