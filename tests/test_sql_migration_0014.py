"""Migration 0014 (PostgreSQL): ``wsfs_write_small`` updates the row it locked by its address; the journal is keyed
by ``(session_id, seq)``.

Up from 0013 with files, journal entries and a quota in use, writes through the new function keep every book
(content, journal, usage, grep queue) and the journal has one index fewer; down again, ``0012``'s function and the
journal's two indexes are back and writes go on. A small overwrite
descends ``wsfs_files_pkey`` once (the lock), not twice (the lock and the update): counted in the transaction.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from conftest import migrate_to

from workspacefs import Quota, QuotaExceededError, SqlFilesystem, SqlStore
from workspacefs.backends.sql._store import inline_blob_id
from workspacefs.testing._postgres import create_database

_ids = itertools.count()

CALL = (
    "SELECT * FROM wsfs_write_small(%s, %s, %s, %s, %s, %s, %s, now(), false, false, NULL, NULL,"
    " true, NULL, 'write', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
)
"""A journaled small write of ``(session, path, parent, name, blob, size, data)``, as the client sends it."""


@pytest.fixture
def url(postgres_url: str) -> str:
    """A PostgreSQL database of its own."""
    return create_database(postgres_url, f"wsfs_m14_{os.getpid()}_{next(_ids)}")


@pytest.fixture
def store(url: str) -> Iterator[SqlStore]:
    """The store (migrated to the head), closed after."""
    opened = SqlStore(url)
    try:
        yield opened
    finally:
        opened.close()


def books(store: SqlStore, session: str) -> dict[str, Any]:
    """What a write keeps besides the content: journal rows, usage, the grep queue."""
    with store.read() as connection:
        one = connection.exec_driver_sql

        def count(sql: str) -> int:
            return int(one(sql, (session,)).scalar() or 0)

        return {
            "journal": count("SELECT count(*) FROM wsfs_journal WHERE session_id = %s"),
            "usage": tuple(one("SELECT bytes, files FROM wsfs_session_usage WHERE session_id = %s", (session,)).one()),
            "queued": count(
                "SELECT count(*) FROM wsfs_grep_queue q JOIN wsfs_files f ON f.blob_id = q.blob_id"
                " WHERE f.session_id = %s"
            ),
            "revision": one("SELECT version_num FROM wsfs_alembic_version").scalar(),
            "journal indexes": [
                r[0]
                for r in one(
                    "SELECT indexdef FROM pg_indexes WHERE tablename = 'wsfs_journal' ORDER BY indexname"
                ).all()
            ],
        }


def write_round(fs: SqlFilesystem, tag: str) -> None:
    """A new file, an overwrite of it, and one past the quota (refused, nothing written)."""
    fs.write_bytes(f"d/{tag}.txt", f"first {tag}".encode())
    fs.write_bytes(f"d/{tag}.txt", f"second {tag}, longer".encode())
    with pytest.raises(QuotaExceededError):
        fs.write_bytes(f"d/{tag}-big.txt", b"x" * 190)


def test_up_from_0013_with_data_then_down_again(store: SqlStore) -> None:
    migrate_to(store, "0013")
    fs = SqlFilesystem(store, "m14", quota=Quota(max_bytes=200))
    fs.write_bytes("d/old.txt", b"written at 0013")
    write_round(fs, "at13")
    at13 = books(store, "m14")
    assert at13["revision"] == "0013"
    assert [d.split(" USING ")[1] for d in at13["journal indexes"]] == [
        "btree (before_id) WHERE (before_id IS NOT NULL)",
        "btree (op_key) WHERE (op_key IS NOT NULL)",
        "btree (seq)",
        "btree (session_id, seq)",
    ]
    migrate_to(store, "head")
    write_round(fs, "at14")
    at14 = books(store, "m14")
    assert at14["revision"] == "0014"
    assert [d.split(" USING ")[1] for d in at14["journal indexes"]] == [  # the key is the session index
        "btree (before_id) WHERE (before_id IS NOT NULL)",
        "btree (op_key) WHERE (op_key IS NOT NULL)",
        "btree (session_id, seq)",
    ]
    assert "wsfs_journal_pkey" in at14["journal indexes"][2]
    assert at14["journal"] == at13["journal"] + 2
    assert at14["queued"] == at13["queued"] + 1  # the overwrite's content; the first was replaced (still queued)
    expected = len(b"written at 0013") + len(b"second at13, longer") + len(b"second at14, longer")
    assert at14["usage"] == (expected, 3)
    assert fs.read_bytes("d/at14.txt").content == b"second at14, longer"
    assert [c.path for e in fs.history(limit=2) for c in e.changes] == ["d/at14.txt", "d/at14.txt"]
    migrate_to(store, "0013")
    write_round(fs, "back")
    down = books(store, "m14")
    assert down["revision"] == "0013"
    assert down["journal indexes"] == at13["journal indexes"]
    assert down["usage"] == (expected + len(b"second back, longer"), 4)
    assert fs.read_bytes("d/back.txt").content == b"second back, longer"


def test_a_small_overwrite_descends_the_primary_key_once(store: SqlStore, url: str) -> None:
    fs = SqlFilesystem(store, "scan")
    fs.write_bytes("d/f.txt", b"seed")
    scans = []
    for n in range(3):  # a connection per write: the counts it has not reported yet are this write's
        with psycopg.connect(url) as connection:
            data = f"content {n}".encode()
            connection.execute(CALL, ("scan", "d/f.txt", "d", "f.txt", inline_blob_id(data), len(data), data))
            counted = connection.execute("SELECT pg_stat_get_xact_numscans('wsfs_files_pkey'::regclass)").fetchone()
            scans.append(counted[0] if counted else None)
    assert scans == [1, 1, 1]  # the lock's lookup only: the update went by the row's address
    assert fs.read_bytes("d/f.txt").content == b"content 2"
    assert [c.after for e in fs.history(limit=3) for c in e.changes] == [
        inline_blob_id(f"content {n}".encode()) for n in (2, 1, 0)
    ]
