"""The SQL backend: ``SqlFilesystem`` sessions in one ``SqlStore`` (SQLite, the embedded default, or
PostgreSQL). ``_store.py`` owns the database and the deduplicated content, ``_schema.py`` the tables,
``_filesystem.py`` one session's files, ``migrations/`` the schema's history (Alembic)."""

from workspacefs.backends.sql._filesystem import SqlFilesystem
from workspacefs.backends.sql._reach import foreign_key_failed, key_taken, raised_in_database, refused
from workspacefs.backends.sql._store import (
    SessionInfo,
    SqlStore,
    default_database,
    engine_url,
    hold_schema_lock,
    migrate,
    missing_database,
)

__all__ = [
    "SessionInfo",
    "SqlFilesystem",
    "SqlStore",
    "default_database",
    "engine_url",
    "foreign_key_failed",
    "hold_schema_lock",
    "key_taken",
    "migrate",
    "missing_database",
    "raised_in_database",
    "refused",
]
