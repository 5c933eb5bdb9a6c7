"""``SessionCatalog``: which agent owns which session — the service's view over the storage's sessions.

Storage (``SqlStore``) knows sessions only as isolated trees of files under a storage id; the service adds
an owner and the session's id *under that owner*, so every agent has its own namespace: agents A and B can
both have a session ``main``, with separate files, and nothing one of them does tells whether the other's
exists. The storage id of a new session is ``AGENT/SESSION`` (``/`` never occurs in an id of the API, so
these cannot collide with each other); the agent ``default`` keeps its ids as they are, like the sessions
made through the library (``SqlFilesystem(url, "id")``), which have no owner row and belong to ``default``.
Sessions created before ids were scoped keep their storage ids (the public id). Deleting a session removes
its files, snapshots and owner together.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from workspacefs.backends.sql import SqlStore, foreign_key_failed, key_taken, raised_in_database, refused
from workspacefs.errors import ConcurrentChangeError
from workspacefs.server._tables import migrate_service, session_owners, storage_files, storage_sessions

__all__ = ["DEFAULT_AGENT", "CatalogEntry", "SessionCatalog", "storage_id_for"]

DEFAULT_AGENT = "default"
"""The agent that owns sessions created without one."""
MAX_STORAGE_ID = 200
"""The longest session id the storage takes (``SqlFilesystem``)."""
_ATTEMPTS = 4


def storage_id_for(agent_id: str, session_id: str) -> str:
    """Where a new session of ``agent_id`` is stored: ``AGENT/SESSION``, readable for an operator who opens it
    with the CLI (``?session=AGENT/SESSION``); the agent ``default`` keeps the id itself, as the library does.
    Ids too long for the storage keep a readable head and a hash of the whole."""
    if agent_id == DEFAULT_AGENT:
        return session_id
    wanted = f"{agent_id}/{session_id}"
    if len(wanted) <= MAX_STORAGE_ID:
        return wanted
    digest = hashlib.sha256(f"{agent_id}\0{session_id}".encode()).hexdigest()[:16]
    return f"{agent_id[:80]}/{session_id[:80]}~{digest}"


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """A session, the agent it belongs to, and where its files are stored."""

    session_id: str
    agent_id: str
    created_at: datetime
    updated_at: datetime
    storage_id: str
    """The storage's id (``SqlFilesystem(store, storage_id)``); not the id in the URL."""
    file_count: int | None = None
    """How many files (not folders) it holds: counted for listings (:meth:`SessionCatalog.sessions`) only."""
    changed_at: datetime | None = None
    """When a file in it was last written (its creation if none was): for listings only."""


def _utc(stamp: datetime) -> datetime:
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _unowned() -> Any:
    """Storage sessions no agent was recorded for: the agent ``default``'s, under their storage id."""
    return ~sa.exists().where(session_owners.c.session_id == storage_sessions.c.id)


def _found(agent_id: str) -> sa.Select[Any]:
    """The sessions of ``agent_id``: storage id, public id and times (filter further by public id)."""
    s, o = storage_sessions.c, session_owners.c
    owned = sa.select(s.id, o.public_id, s.created_at, s.updated_at).join(session_owners, o.session_id == s.id)
    return owned.where(o.agent_id == agent_id)


class SessionCatalog:
    """Create, find, list and delete sessions per agent, in the service's database."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        migrate_service(store)

    def _query(self, agent_id: str, session_id: str | None) -> Any:
        """One statement for an agent's sessions (or the one named ``session_id``): owner rows, and for the
        agent ``default`` the storage sessions nobody owns."""
        owned = _found(agent_id)
        if session_id is not None:
            owned = owned.where(session_owners.c.public_id == session_id)
        if agent_id != DEFAULT_AGENT:
            return owned
        library = sa.select(
            storage_sessions.c.id,
            storage_sessions.c.id.label("public_id"),
            storage_sessions.c.created_at,
            storage_sessions.c.updated_at,
        ).where(_unowned())
        if session_id is not None:
            library = library.where(storage_sessions.c.id == session_id)
        return sa.union_all(owned, library)

    @staticmethod
    def _entry(agent_id: str, row: Any) -> CatalogEntry:
        return CatalogEntry(row.public_id, agent_id, _utc(row.created_at), _utc(row.updated_at), row.id)

    def _storage_id(self, connection: Connection, agent_id: str, session_id: str) -> str | None:
        row = connection.execute(self._query(agent_id, session_id)).first()
        return None if row is None else str(row.id)

    def _free_storage_id(self, connection: Connection, agent_id: str, session_id: str) -> str:
        """The storage id for a new session: the usual one, or (when a library session or one made before ids
        were scoped already holds it) the same with a random suffix — never an answer that tells anyone else's
        session exists."""
        wanted = storage_id_for(agent_id, session_id)
        candidate = wanted
        for _ in range(_ATTEMPTS):
            if (
                connection.execute(sa.select(storage_sessions.c.id).where(storage_sessions.c.id == candidate)).first()
                is None
            ):
                return candidate
            candidate = f"{wanted[: MAX_STORAGE_ID - 9]}~{secrets.token_hex(4)}"
        raise FileExistsError(f"No free storage id for session {session_id!r}")

    def create(self, agent_id: str, session_id: str) -> CatalogEntry:
        """A new, empty session of ``agent_id`` (``FileExistsError`` only if *this agent* has that id;
        ``ConcurrentChangeError`` if other requests kept making and deleting one of that id meanwhile)."""
        for _ in range(_ATTEMPTS):
            try:
                with self.store.write() as connection:
                    if self._storage_id(connection, agent_id, session_id) is not None:
                        raise FileExistsError(f"Session {session_id!r} already exists")
                    storage_id = self._free_storage_id(connection, agent_id, session_id)
                    self.store.create_session(connection, storage_id)
                    connection.execute(
                        sa.insert(session_owners).values(
                            session_id=storage_id,
                            agent_id=agent_id,
                            public_id=session_id,
                            created_at=datetime.now(UTC),
                        )
                    )
            except IntegrityError as exc:
                # a concurrent request took the id or the storage row, or made the session and another deleted it
                # before the owner's row (its foreign key): look again. Anything else fails the same way every time
                if not key_taken(exc) and not foreign_key_failed(exc):
                    raise refused(exc, session_id) from exc
                continue
            except sa.exc.DBAPIError as exc:
                if raised_in_database(exc):  # a trigger's RAISE without a code of its own: no race either
                    raise refused(exc, session_id) from exc
                raise
            found = self.get(agent_id, session_id)
            if found is None:  # made, then deleted by another request before this one could read it back
                raise ConcurrentChangeError(session_id, "The session was deleted as it was made; create it again")
            return found
        # every attempt met a session of that id that other requests made or deleted meanwhile: none exists now
        raise ConcurrentChangeError(session_id, "Other requests made and deleted this session meanwhile; try again")

    def get(self, agent_id: str, session_id: str) -> CatalogEntry | None:
        """``agent_id``'s session ``session_id``, or ``None`` (one indexed statement)."""
        with self.store.read_once() as connection:
            row = connection.execute(self._query(agent_id, session_id)).first()
        return None if row is None else self._entry(agent_id, row)

    def sessions(self, agent_id: str) -> list[CatalogEntry]:
        """An agent's sessions, oldest first, each with its file count and last change (what a person picks a
        session by). Both are read from the files' rows through their primary key, one pass over each listed
        session's files: the storage keeps no per-session counters a write would have to contend for."""
        query = self._query(agent_id, None).subquery()
        files = storage_files.c
        count = sa.select(sa.func.count()).where(files.session_id == query.c.id, ~files.is_directory)
        changed = sa.select(sa.func.max(files.updated_at)).where(files.session_id == query.c.id)
        ordered = sa.select(
            query, count.scalar_subquery().label("file_count"), changed.scalar_subquery().label("changed_at")
        ).order_by(query.c.created_at, query.c.public_id)
        with self.store.read() as connection:
            rows = connection.execute(ordered).all()
        return [
            replace(self._entry(agent_id, row), file_count=row.file_count, changed_at=_utc(row.changed_at))
            for row in rows
        ]

    def agents(self) -> list[str]:
        """Every agent that has a session, sorted."""
        with self.store.read() as connection:
            owners = {r[0] for r in connection.execute(sa.select(session_owners.c.agent_id).distinct())}
            if connection.execute(sa.select(storage_sessions.c.id).where(_unowned()).limit(1)).first() is not None:
                owners.add(DEFAULT_AGENT)
        return sorted(owners)

    def delete(self, agent_id: str, session_id: str) -> bool:
        """Delete ``agent_id``'s session with its files, snapshots and owner; ``False`` if it has none."""
        with self.store.write() as connection:
            storage_id = self._storage_id(connection, agent_id, session_id)
            if storage_id is None:
                return False
            connection.execute(sa.delete(session_owners).where(session_owners.c.session_id == storage_id))
            return self.store.delete_session(storage_id, connection)
