"""The service's own tables — bearer tokens, and which agent owns each session — and their migrations.

Storage (files, content, snapshots) belongs to the backend; these tables belong to the service and live
in the same database, migrated by their own Alembic history (version table ``wsfs_service_version``),
which runs after the storage's.
"""

from __future__ import annotations

import threading
from importlib import resources

import sqlalchemy as sa

from workspacefs.backends.sql import SqlStore

__all__ = ["metadata", "migrate_service", "session_owners", "tokens"]

Stamp = sa.DateTime(timezone=True)
metadata = sa.MetaData()

tokens = sa.Table(
    "wsfs_tokens",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("token_hash", sa.Text, nullable=False, unique=True),
    sa.Column("agent_id", sa.Text, nullable=True),
    sa.Column("label", sa.Text, nullable=True),
    sa.Column("created_at", Stamp, nullable=False),
)
"""Bearer tokens, by SHA-256 of the secret; ``agent_id`` NULL means every agent (admin)."""

session_owners = sa.Table(
    "wsfs_session_owners",
    metadata,
    sa.Column("session_id", sa.Text, primary_key=True),  # wsfs_sessions.id, ON DELETE CASCADE (see s0001)
    sa.Column("agent_id", sa.Text, nullable=False),
    sa.Column("created_at", Stamp, nullable=False),
    sa.Index("wsfs_session_owners_agent", "agent_id"),
)
"""The agent each session was created for; a session without a row (made through the library) belongs to the
agent ``default``."""

_migrated: set[str] = set()
_lock = threading.Lock()


def migrate_service(store: SqlStore) -> None:
    """Bring the service's tables up to date in ``store``'s database (idempotent; once per process and URL)."""
    with _lock:
        if store.url in _migrated:
            return
        from alembic import command  # noqa: PLC0415 - only needed when migrating
        from alembic.config import Config  # noqa: PLC0415

        config = Config()
        config.set_main_option("script_location", str(resources.files("workspacefs.server") / "migrations"))
        with store.write() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        _migrated.add(store.url)
