"""The session catalogue's two races with other requests, provoked for real by SQLite triggers standing in for them.

- A session made, then deleted by another request before this one read it back: the old code's ``assert`` raised
  ``AssertionError`` (a 500 with no type). It is ``ConcurrentChangeError`` (409), "create it again".
- Every attempt meeting a session of that id which other requests made or deleted meanwhile: the old code said
  ``FileExistsError`` "already exists" after its last attempt, of a session that does not exist. It is
  ``ConcurrentChangeError`` too, and nothing is left behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from workspacefs import SqlStore
from workspacefs.errors import ConcurrentChangeError
from workspacefs.server.catalog import SessionCatalog


def with_trigger(tmp_path: Path, trigger: str) -> tuple[SqlStore, SessionCatalog]:
    store = SqlStore(f"sqlite:///{tmp_path / 'service.db'}")
    catalog = SessionCatalog(store)  # migrates the service's tables
    catalog.create("alice", "warm-up")
    with store.write() as connection:
        connection.execute(sa.text(trigger))
    return store, catalog


def test_a_session_deleted_as_it_is_made_is_a_concurrent_change(tmp_path: Path) -> None:
    store, catalog = with_trigger(
        tmp_path,
        "CREATE TRIGGER deleted_at_once AFTER INSERT ON wsfs_session_owners"
        " BEGIN DELETE FROM wsfs_sessions WHERE id = NEW.session_id; END",
    )
    with pytest.raises(ConcurrentChangeError) as caught:
        catalog.create("alice", "main")
    assert caught.value.filename == "main" and "create it again" in caught.value.strerror
    assert catalog.get("alice", "main") is None
    store.close()


def test_a_session_other_requests_keep_taking_is_a_concurrent_change_not_one_that_exists(tmp_path: Path) -> None:
    store, catalog = with_trigger(
        tmp_path,
        "CREATE TRIGGER taken_first BEFORE INSERT ON wsfs_session_owners BEGIN"
        " INSERT INTO wsfs_session_owners (session_id, agent_id, public_id, created_at)"
        " VALUES (NEW.session_id, 'bob', NEW.public_id, NEW.created_at); END",
    )
    with pytest.raises(ConcurrentChangeError) as caught:
        catalog.create("alice", "main")
    assert not isinstance(caught.value, FileExistsError)
    assert caught.value.filename == "main" and "try again" in caught.value.strerror
    assert catalog.get("alice", "main") is None and catalog.get("bob", "main") is None  # nothing left behind
    store.close()
