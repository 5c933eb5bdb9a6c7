"""Fill a SQL session with many files at once, for tests and benchmarks of large workspaces.

Writing 100,000 files through the API takes minutes; here they are two set-based ``INSERT … SELECT`` statements
over a generated series (``generate_series`` on PostgreSQL, a recursive CTE on SQLite): small distinct inline
blobs, a thousand files per directory. The blob ids are made up (not content ids): fine for what is measured
here (forks, deletes, collection), not for checking content identity.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from workspacefs.backends.sql._schema import blobs, session_files
from workspacefs.backends.sql._store import SqlStore

__all__ = ["PER_DIRECTORY", "fill_session"]

PER_DIRECTORY = 1000
"""Files per directory: file ``i`` is ``d{i // 1000}/f{i}``."""

_SERIES = {
    "postgresql": "SELECT generate_series(0, :last) AS g",
    "sqlite": "WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g < :last) SELECT g FROM s",
}


def _series(dialect: str, count: int) -> Any:
    """The integers ``0 … count - 1`` as a subquery with column ``g``."""
    query = sa.text(_SERIES[dialect]).bindparams(last=count - 1).columns(sa.column("g", sa.Integer))
    return query.subquery("series")


def fill_session(store: SqlStore, session_id: str, files: int) -> list[str]:
    """Add ``files`` files (and their directories) to the existing session ``session_id``, each with its own
    blob, in one write transaction; returns the blob ids."""
    prefix, now = f"fill-{uuid.uuid4().hex[:12]}-", sa.literal(datetime.now(UTC), sa.DateTime(timezone=True))
    text, false, true = sa.Text, sa.literal(False), sa.literal(True)
    directories = _series(store.dialect, (files + PER_DIRECTORY - 1) // PER_DIRECTORY)
    every = _series(store.dialect, files)
    g, d = every.c.g, directories.c.g
    directory_of = sa.literal("d") + sa.cast(g // PER_DIRECTORY, text)
    columns = ["session_id", "path", "parent", "name", "is_directory", "is_readonly", "blob_id", "size_bytes"]
    with store.write() as connection:
        connection.execute(
            sa.insert(blobs).from_select(
                ["id", "size", "chunk_count", "data"],
                sa.select(sa.literal(prefix) + sa.cast(g, text), sa.literal(4), sa.literal(0), sa.literal(b"file")),
            )
        )
        name = sa.literal("d") + sa.cast(d, text)
        connection.execute(
            sa.insert(session_files).from_select(
                [*columns, "created_at", "updated_at"],
                sa.select(
                    sa.literal(session_id), name, sa.literal(""), name, true, false, sa.null(), sa.literal(0), now, now
                ),
            )
        )
        name = sa.literal("f") + sa.cast(g, text)
        connection.execute(
            sa.insert(session_files).from_select(
                [*columns, "created_at", "updated_at"],
                sa.select(
                    sa.literal(session_id),
                    directory_of + "/" + name,
                    directory_of,
                    name,
                    false,
                    false,
                    sa.literal(prefix) + sa.cast(g, text),
                    sa.literal(4),
                    now,
                    now,
                ),
            )
        )
    return [f"{prefix}{i}" for i in range(files)]
