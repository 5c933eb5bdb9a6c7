"""``SessionCatalog``: which agent owns which session — the service's view over the storage's sessions.

Storage (``SqlStore``) knows sessions only as isolated trees of files; the service adds an owner. A session
created through the service gets an owner row in the same transaction; one created through the library
(``SqlFilesystem(url, "id")``) has none and belongs to the agent ``default``, so a workspace made in Python
can still be browsed in the web UI. Deleting a session removes its files, snapshots and owner together.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from workspacefs.backends.sql import SessionInfo, SqlStore
from workspacefs.server._tables import migrate_service, session_owners

__all__ = ["DEFAULT_AGENT", "CatalogEntry", "SessionCatalog"]

DEFAULT_AGENT = "default"
"""The agent that owns sessions created without one."""


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """A session and the agent it belongs to."""

    session_id: str
    agent_id: str
    created_at: datetime
    updated_at: datetime


class SessionCatalog:
    """Create, find, list and delete sessions per agent, in the service's database."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        migrate_service(store)

    def _owners(self) -> dict[str, str]:
        with self.store.read() as connection:
            rows = connection.execute(sa.select(session_owners.c.session_id, session_owners.c.agent_id)).all()
        return {row.session_id: row.agent_id for row in rows}

    @staticmethod
    def _entry(info: SessionInfo, owner: str | None) -> CatalogEntry:
        return CatalogEntry(info.session_id, owner or DEFAULT_AGENT, info.created_at, info.updated_at)

    def create(self, agent_id: str, session_id: str) -> CatalogEntry:
        """A new, empty session owned by ``agent_id`` (``FileExistsError`` if the id is taken)."""
        try:
            with self.store.write() as connection:
                self.store.create_session(connection, session_id)
                connection.execute(
                    sa.insert(session_owners).values(
                        session_id=session_id, agent_id=agent_id, created_at=datetime.now(UTC)
                    )
                )
        except IntegrityError:  # another request created the same id at the same moment
            raise FileExistsError(f"Session {session_id!r} already exists") from None
        found = self.get(session_id)
        assert found is not None
        return found

    def get(self, session_id: str) -> CatalogEntry | None:
        """A session and its owner, or ``None``."""
        info = self.store.session(session_id)
        if info is None:
            return None
        with self.store.read_once() as connection:
            owner = connection.execute(
                sa.select(session_owners.c.agent_id).where(session_owners.c.session_id == session_id)
            ).scalar()
        return self._entry(info, owner)

    def sessions(self, agent_id: str) -> list[CatalogEntry]:
        """An agent's sessions, oldest first."""
        owners = self._owners()
        entries = (self._entry(info, owners.get(info.session_id)) for info in self.store.sessions())
        return [entry for entry in entries if entry.agent_id == agent_id]

    def agents(self) -> list[str]:
        """Every agent that has a session, sorted."""
        owners = self._owners()
        return sorted({owners.get(info.session_id, DEFAULT_AGENT) for info in self.store.sessions()})

    def delete(self, session_id: str) -> bool:
        """Delete a session with its files, snapshots and owner; ``False`` if there was none."""
        with self.store.write() as connection:
            connection.execute(sa.delete(session_owners).where(session_owners.c.session_id == session_id))
            return self.store.delete_session(session_id, connection)
