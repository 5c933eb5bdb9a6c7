"""Collecting a big session's content on the SQL backends: more blob ids than one statement may bind.

PostgreSQL takes at most 65,535 bind parameters a statement: collecting every blob of a larger session in one
``IN`` list failed, and psycopg's client-side refusal surfaced as "Cannot reach the database". (SQLite's limit
here is 250,000 with Python's build, 32,766 by default.) The session is filled set-based
(:mod:`workspacefs.testing._sql_rows`), not by 70,000 API writes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql._schema import blobs, session_files
from workspacefs.testing._sql_rows import fill_session

FILES = 70_000
"""More than PostgreSQL's 65,535 bind parameters."""


@pytest.fixture
def store(postgres_url: str) -> Iterator[SqlStore]:
    """A store on the real PostgreSQL server, the database whose parameter limit this is about."""
    opened = SqlStore(postgres_url)
    yield opened
    opened.close()


def test_deleting_a_session_of_more_files_than_bind_parameters_collects_its_content(store: SqlStore) -> None:
    session = f"big-{uuid.uuid4().hex[:8]}"
    SqlFilesystem(store, session)
    ids = fill_session(store, session, FILES)

    assert store.delete_session(session)

    with store.read() as connection:
        left = connection.execute(
            sa.select(sa.func.count()).select_from(blobs).where(blobs.c.id.in_(ids[:1000]))
        ).scalar_one()
        rows = connection.execute(
            sa.select(sa.func.count()).select_from(session_files).where(session_files.c.session_id == session)
        ).scalar_one()
    assert (left, rows) == (0, 0)


def test_gc_collects_more_unreferenced_blobs_than_bind_parameters(store: SqlStore) -> None:
    session = f"gc-{uuid.uuid4().hex[:8]}"
    SqlFilesystem(store, session)
    ids = fill_session(store, session, FILES)
    with store.write() as connection:  # the rows go behind the store's back: their blobs are left unreferenced
        connection.execute(
            sa.delete(session_files).where(session_files.c.session_id == session, session_files.c.path != "")
        )

    store.gc()

    with store.read() as connection:
        left = connection.execute(sa.select(sa.func.count()).select_from(blobs).where(blobs.c.id.in_(ids[:1000])))
        assert left.scalar_one() == 0
