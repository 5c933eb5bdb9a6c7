"""Alembic environment of the service's tables: run on the connection the caller hands over."""

from __future__ import annotations

from alembic import context

from workspacefs.server._tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the service's migrations run through workspacefs.server._tables.migrate_service()")
context.configure(connection=connection, target_metadata=metadata, version_table="wsfs_service_version")
with context.begin_transaction():
    context.run_migrations()
