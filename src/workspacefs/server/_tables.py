"""The service's own tables — bearer tokens, and which agent owns each session — and their migrations.

Storage (files, content, snapshots) belongs to the backend; these tables belong to the service and live
in the same database, migrated by their own Alembic history (version table ``wsfs_service_version``),
which runs after the storage's. ``storage_sessions`` is only a view of the storage's session table, for
joins: the service reads it and never defines it.
"""

from __future__ import annotations

import threading
from importlib import resources

import sqlalchemy as sa

from workspacefs.backends.sql import SqlStore, hold_schema_lock

__all__ = [
    "approvals",
    "metadata",
    "migrate_service",
    "session_owners",
    "session_policies",
    "signin_codes",
    "storage_files",
    "storage_sessions",
    "tokens",
]

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
    sa.Column("scope", sa.Text, nullable=False, server_default="write"),  # read, write or admin (s0003)
    sa.Column("expires_at", Stamp, nullable=True),
    sa.Column("rate_limit", sa.Integer, nullable=True),  # requests per minute; NULL: the service's default
    sa.Column("policy", sa.Text, nullable=True),  # the token's own path policy as JSON (s0004); NULL: none
    sa.Column("browser", sa.Boolean, nullable=False, server_default=sa.false()),  # a browser's sign-in (s0005)
    sa.Column("parent_id", sa.Text, nullable=True),  # the token a browser signed in with; revoked with it
    sa.Index("wsfs_tokens_parent", "parent_id"),
)
"""Bearer tokens, by SHA-256 of the secret (a unique index: verifying one is one indexed lookup);
``agent_id`` NULL means every agent."""

signin_codes = sa.Table(
    "wsfs_signin_codes",
    metadata,
    sa.Column("code_hash", sa.Text, primary_key=True),
    sa.Column("agent_id", sa.Text, nullable=True),
    sa.Column("scope", sa.Text, nullable=False),
    sa.Column("created_at", Stamp, nullable=False),
    sa.Column("expires_at", Stamp, nullable=False),
)
"""One-time browser sign-in codes (``workspacefs serve`` and ``workspacefs open`` print them in a link), by
SHA-256 like tokens; redeeming one deletes its row, so it works once, in whichever process gets it first."""

session_owners = sa.Table(
    "wsfs_session_owners",
    metadata,
    sa.Column("session_id", sa.Text, primary_key=True),  # wsfs_sessions.id, ON DELETE CASCADE (see s0001)
    sa.Column("agent_id", sa.Text, nullable=False),
    sa.Column("public_id", sa.Text, nullable=False),  # the id in the URL, unique per agent (s0002)
    sa.Column("created_at", Stamp, nullable=False),
    sa.Index("wsfs_session_owners_public", "agent_id", "public_id", unique=True),
)
"""The agent each session was created for, and its id under that agent (``session_id`` is the storage's id).
A session without a row (made through the library) belongs to the agent ``default``, under its storage id."""

session_policies = sa.Table(
    "wsfs_session_policies",
    metadata,
    sa.Column("session_id", sa.Text, primary_key=True),  # wsfs_sessions.id, ON DELETE CASCADE (see s0004)
    sa.Column("policy", sa.Text, nullable=False),  # Policy.to_dict() as JSON
    sa.Column("updated_at", Stamp, nullable=False),
)
"""A session's path policy, set by an admin; a session without a row follows the service's policy."""

approvals = sa.Table(
    "wsfs_approvals",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("agent_id", sa.Text, nullable=False),
    sa.Column("session_id", sa.Text, nullable=False),  # the id in the URL (public), for the prompt
    sa.Column("token_id", sa.Text, nullable=True),  # who asked; NULL without auth
    sa.Column("operation", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("paths", sa.Text, nullable=False),  # JSON list of the canonical paths the rule matched
    sa.Column("pattern", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Column("status", sa.Text, nullable=False),  # pending, approved, denied or expired
    sa.Column("created_at", Stamp, nullable=False),
    sa.Column("expires_at", Stamp, nullable=False),
    sa.Column("decided_at", Stamp, nullable=True),
    sa.Column("decided_by", sa.Text, nullable=True),  # the admin token's id; NULL without auth
    sa.Index("wsfs_approvals_status", "status", "created_at"),
)
"""Requests held for a person's decision (an ``ask`` rule); the waiting process polls its row."""

storage_sessions = sa.table(
    "wsfs_sessions",
    sa.column("id", sa.Text),
    sa.column("created_at", Stamp),
    sa.column("updated_at", Stamp),
)
"""The storage's sessions, as far as the service joins them (the backend owns and migrates that table)."""

storage_files = sa.table(
    "wsfs_files",
    sa.column("session_id", sa.Text),
    sa.column("is_directory", sa.Boolean),
    sa.column("updated_at", Stamp),
)
"""The storage's files, as far as the session listing counts them (the backend owns that table too)."""

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
            hold_schema_lock(connection)
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        _migrated.add(store.url)
