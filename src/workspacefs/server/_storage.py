"""Where sessions keep their files: the service's SQL database (the default), or any workspacefs URL.

The catalogue (owners, ids, times), tokens and policies always live in the service's database; this decides
only where each session's files and snapshots are. ``serve --sessions-root URL``:

- ``file:///srv/agents``: the directory ``/srv/agents/AGENT/SESSION`` per session, its snapshots in
  ``/srv/agents/.snapshots/AGENT/SESSION`` (ids start with a letter or digit, so no agent is ``.snapshots``);
- ``s3://bucket/prefix?endpoint_url=…``: the prefix ``prefix/AGENT/SESSION`` per session;
- any URL may place ``{agent}`` and ``{session}`` itself, ``composite://`` descriptions included (their mount
  URLs are filled in the same way), so each session gets its own tree of several backends.

Every session is served through the same protocol (``ConditionalWrites``: ``If-Match`` is decided by the
session's own storage), whatever it is.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import weakref
from abc import ABC, abstractmethod
from typing import Any, ClassVar, cast
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from workspacefs.backends.sql import SqlFilesystem, SqlStore
from workspacefs.open import display_url, open_filesystem, registered_backends, url_parameters
from workspacefs.protocol import Filesystem, SnapshotableFilesystem
from workspacefs.quota import QUOTA_URL_PARAMETERS, Quota
from workspacefs.server.catalog import DEFAULT_AGENT, CatalogEntry

__all__ = ["SessionStorage", "SqlSessions", "UrlSessions", "session_storage"]

_PLACES = ("{agent}", "{session}")
_APPENDED = ("file", "s3")
"""Schemes whose sessions root gets ``/AGENT/SESSION`` appended when the URL places neither itself."""


class SessionStorage(ABC):
    """Opens, makes and removes the storage of one session of the catalogue."""

    counts_files: ClassVar[bool] = False
    """True if the catalogue's listing can count the files (they are rows of the service's database)."""

    @abstractmethod
    def open(self, entry: CatalogEntry, *, quota: Quota | None) -> Filesystem:
        """The session's files (it exists: the catalogue made it)."""

    def open_shared(self, entry: CatalogEntry, *, quota: Quota | None) -> Filesystem:
        """The session's files, as the one instance every request of this process uses while any holds it.

        A watcher (``GET …/events``) hears the changes made through its own filesystem object's journal; on
        SQLite nothing else tells it (PostgreSQL's ``LISTEN`` reaches every process), so while a stream holds
        the session's filesystem, every request of the process writes through that same object. Nothing is
        cached past its last user: the registry holds its values weakly."""
        key = (entry.storage_id, quota)
        live = _SHARED.get(self)
        if live is not None:
            found = live.get(key)
            if found is not None:
                return found
        opened = self.open(entry, quota=quota)
        with _SHARED_LOCK:
            table = _SHARED.get(self)
            if table is None:
                table = _SHARED[self] = weakref.WeakValueDictionary()
            return table.setdefault(key, opened)

    @abstractmethod
    def create(self, entry: CatalogEntry) -> None:
        """Make the storage of a session the catalogue has just recorded."""

    @abstractmethod
    def delete(self, entry: CatalogEntry) -> None:
        """Remove a deleted session's files and snapshots."""

    @abstractmethod
    def describe(self) -> str:
        """Where sessions are, for the start-up banner."""


_SHARED: weakref.WeakKeyDictionary[SessionStorage, weakref.WeakValueDictionary[Any, Filesystem]] = (
    weakref.WeakKeyDictionary()
)
_SHARED_LOCK = threading.Lock()


class SqlSessions(SessionStorage):
    """Sessions in the service's own database: the catalogue makes and removes their rows with its own."""

    counts_files = True

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def open(self, entry: CatalogEntry, *, quota: Quota | None) -> Filesystem:
        return SqlFilesystem(self.store, entry.storage_id, create=False, quota=quota)

    def create(self, entry: CatalogEntry) -> None:
        """Nothing more: the catalogue's transaction made the session's row."""

    def delete(self, entry: CatalogEntry) -> None:
        """Nothing more: the catalogue's transaction deleted its files, snapshots and row."""

    def describe(self) -> str:
        return "in the service's database"


class UrlSessions(SessionStorage):
    """Sessions at a URL template (see the module's description)."""

    def __init__(self, root: str) -> None:
        parts = urlsplit(root)
        scheme = parts.scheme.lower()
        if "://" not in root or scheme not in registered_backends():
            raise ValueError(
                f"The sessions root must be a workspace URL such as file:///srv/agents, not {display_url(root)!r}"
            )
        # a composite description places them in its mounts' URLs (its opener checks that one does)
        self.placed = scheme == "composite" or any(place in unquote(root) for place in _PLACES)
        if not self.placed and scheme not in _APPENDED:
            raise ValueError(
                f"A {scheme}:// sessions root must place {{agent}} and {{session}} in its URL (or its mounts' URLs), "
                "so sessions do not share one tree"
            )
        given = url_parameters(root)  # a parameter given twice is refused at start, not at each session's open
        if scheme == "composite" and {"agent", "session"} & given.keys():
            raise ValueError("A composite:// sessions root leaves agent= and session= to the service, which adds them")
        self.root = root
        self.scheme = scheme

    def url(self, entry: CatalogEntry) -> str:
        """The session's own URL."""
        agent, session = entry.agent_id or DEFAULT_AGENT, entry.session_id
        if self.scheme == "composite":
            return f"{self.root}{'&' if '?' in self.root else '?'}agent={quote(agent)}&session={quote(session)}"
        if self.placed:
            return _filled(self.root, agent, session)
        parts = urlsplit(self.root)
        base = parts.path.rstrip("/")
        path = f"{base}/{quote(agent)}/{quote(session)}"
        query = parts.query
        if self.scheme == "file" and "snapshot_dir=" not in query:
            snapshots = f"snapshot_dir={quote(unquote(base) + f'/.snapshots/{agent}/{session}', safe='/')}"
            query = f"{query}&{snapshots}" if query else snapshots
        return urlunsplit((parts.scheme, parts.netloc, path, query, parts.fragment))

    def _open(self, entry: CatalogEntry, *, create: bool, quota: Quota | None = None) -> Filesystem:
        options: dict[str, Any] = {"create": "true" if create else "false"}
        if quota is not None:
            options |= {
                name: str(getattr(quota, field))
                for name, field in QUOTA_URL_PARAMETERS.items()
                if getattr(quota, field) is not None
            }
        return open_filesystem(self.url(entry), **options)

    def open(self, entry: CatalogEntry, *, quota: Quota | None) -> Filesystem:
        return self._open(entry, create=False, quota=quota)

    def create(self, entry: CatalogEntry) -> None:
        fs = self._open(entry, create=True)
        _close(fs)

    def delete(self, entry: CatalogEntry) -> None:
        try:
            fs = self._open(entry, create=False)
        except FileNotFoundError:
            return  # never made, or removed already
        try:
            if fs.capabilities.snapshots:
                snapshots = cast(SnapshotableFilesystem, fs)
                for snapshot in snapshots.snapshots():
                    snapshots.delete_snapshot(snapshot)
            for child in fs.list("/"):
                fs.delete(child.path, recursive=True)
        finally:
            _close(fs)
        if self.scheme == "file" and not self.placed:
            self._remove_directories(entry)

    def _remove_directories(self, entry: CatalogEntry) -> None:
        """Remove the emptied session directory, the session's own snapshot directory (what is left of the
        snapshot strategy's bookkeeping), then their agents' directories if empty. ``rmdir`` removes only
        empty directories; ``rmtree`` never follows a link out of the tree it removes."""
        base = unquote(urlsplit(self.root).path).rstrip("/")
        agent = entry.agent_id or DEFAULT_AGENT
        shutil.rmtree(f"{base}/.snapshots/{agent}/{entry.session_id}", ignore_errors=True)
        for directory in (f"{base}/{agent}/{entry.session_id}", f"{base}/{agent}", f"{base}/.snapshots/{agent}"):
            with contextlib.suppress(OSError):
                os.rmdir(directory)

    def describe(self) -> str:
        return f"one per session under {display_url(self.root).split('?', 1)[0]}"


def _filled(template: str, agent: str, session: str) -> str:
    filled = template
    for place, value in (("agent", agent), ("session", session)):
        filled = filled.replace("{" + place + "}", value).replace("%7B" + place + "%7D", value)
        filled = filled.replace("%7b" + place + "%7d", value)
    return filled


def _close(fs: Filesystem) -> None:
    close = getattr(fs, "close", None)
    if callable(close):
        close()


def session_storage(store: SqlStore, sessions_root: str | None) -> SessionStorage:
    """The storage ``serve --sessions-root`` names (``None``: the service's database)."""
    return SqlSessions(store) if sessions_root is None else UrlSessions(sessions_root)
