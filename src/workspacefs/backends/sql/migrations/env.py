"""Alembic environment: run migrations on the connection the caller hands over."""

from __future__ import annotations

from alembic import context

from workspacefs.backends.sql._schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("workspacefs migrations run through workspacefs.backends.sql.migrate()")
context.configure(connection=connection, target_metadata=metadata, version_table="wsfs_alembic_version")
with context.begin_transaction():
    context.run_migrations()
