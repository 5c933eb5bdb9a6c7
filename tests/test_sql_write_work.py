"""The work a small write does besides its statements (counts, not times: the speed itself is in bench/).

PostgreSQL: ``wsfs_write_small`` keeps the session's usage row, the versions a snapshot by mark needs, the grep
queue and the journal's notification itself (migration ``0012``), so the trigger functions that do it after every
other statement run zero times for its call. Counted by PostgreSQL (``track_functions``: the calls of the current
transaction), in a transaction held open around the writes on the connection they use.

SQLite: the pages a commit appends to the WAL, one frame per page changed, each named by the B-tree it belongs to
(``dbstat``): a new file's write touches one page of each B-tree it inserts into, so the fewer B-trees, the fewer
pages.
"""

from __future__ import annotations

import itertools
import os
import select
import sqlite3
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from workspacefs import Quota, SqlFilesystem, SqlStore, Usage
from workspacefs.backends.sql._store import engine_url, inline_blob_id
from workspacefs.testing._postgres import create_database

_ids = itertools.count()

TRIGGER_FUNCTIONS = ("wsfs_files_usage", "wsfs_files_version", "wsfs_grep_enqueue", "wsfs_journal_notify")
"""What the triggers on ``wsfs_files`` (0008, 0009), ``wsfs_blobs`` (0004) and ``wsfs_journal`` (0006) call."""


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[SqlStore]:
    store = SqlStore(create_database(postgres_url, f"wsfs_work_{os.getpid()}_{next(_ids)}"))
    yield store
    store.close()


@contextmanager
def held_open(store: SqlStore) -> Iterator[Any]:
    """The driver's plain connection inside a transaction (rolled back after), counting PL/pgSQL calls: what the
    filesystem runs meanwhile on it (the pool hands back the one just returned) runs inside that transaction."""
    driver = store.driver
    driver.close()
    held = driver._checkout(pipelined=False)
    connection = held[0]
    connection.execute("SET track_functions = 'pl'")
    connection.execute("BEGIN")
    driver._checkin(held)
    try:
        yield connection
        assert driver._checkout(pipelined=False) is held  # the writes used (and returned) this connection
    finally:
        connection.execute("ROLLBACK")
        driver._checkin(held)


def calls(connection: Any) -> dict[str, int]:
    """How often each trigger function ran in the connection's transaction so far."""
    rows = connection.execute(
        "SELECT proname, coalesce(pg_stat_get_xact_function_calls(oid), 0) FROM pg_proc WHERE proname = ANY(%s)",
        (list(TRIGGER_FUNCTIONS),),
    ).fetchall()
    return {name: int(count) for name, count in rows}


def test_a_small_write_runs_no_trigger_function_and_keeps_their_books(pg_store: SqlStore) -> None:
    """A new file and an overwrite, in a session with a usage row and a snapshot by mark: no trigger function runs,
    and the usage row, the versions and the grep queue are what the triggers would have made. A statement of any
    other client after the call still fires them (the call's setting does not outlive it). Content already stored
    is not queued again; the call notifies the journal's listeners."""
    fs = SqlFilesystem(pg_store, "books", quota=Quota(max_bytes=10**9))
    fs.write_bytes("dir/old.txt", b"old content")
    assert fs.usage() == Usage(11, 1)  # the row is made
    fs.snapshot()  # a mark: the first change of each path after it keeps a version
    with held_open(pg_store) as connection:
        fs.write_bytes("dir/new.txt", b"new content!")
        fs.write_bytes("dir/old.txt", b"old content, rewritten")
        assert calls(connection) == dict.fromkeys(TRIGGER_FUNCTIONS, 0)
        usage = connection.execute("SELECT bytes, files FROM wsfs_session_usage WHERE session_id = 'books'").fetchone()
        assert usage == (12 + 22, 2)
        versions = connection.execute(
            "SELECT path, existed, blob_id FROM wsfs_file_versions WHERE session_id = 'books' ORDER BY seq"
        ).fetchall()
        assert versions == [("dir/new.txt", False, None), ("dir/old.txt", True, inline_blob_id(b"old content"))]
        queued = connection.execute("SELECT blob_id FROM wsfs_grep_queue").fetchall()
        new_blobs = {inline_blob_id(b"new content!"), inline_blob_id(b"old content, rewritten")}
        assert new_blobs <= {row[0] for row in queued}
        # another client's statements: every trigger runs for them
        connection.execute("UPDATE wsfs_files SET size_bytes = 1 WHERE session_id = 'books' AND path = 'dir/new.txt'")
        connection.execute("INSERT INTO wsfs_blobs (id, size, chunk_count, data) VALUES ('elsewhere', 5, 0, 'abcde')")
        assert calls(connection) == {
            "wsfs_files_usage": 1,
            "wsfs_files_version": 1,
            "wsfs_grep_enqueue": 1,
            "wsfs_journal_notify": 0,
        }
    stored_once(pg_store, fs)
    notified(pg_store, fs)


def stored_once(store: SqlStore, fs: SqlFilesystem) -> None:
    """Content already stored is not queued again (the index would add a second key for it): only a blob the call
    inserts is, as the trigger on its INSERT did."""
    fs.write_bytes("a.txt", b"same needle content")
    store.index_for_grep()
    fs.write_bytes("b.txt", b"same needle content")  # the same blob
    fs.write_bytes("a.txt", b"same needle content")  # rewritten with it
    with store.read() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM wsfs_grep_queue").scalar() == 0
    assert store.index_for_grep() == 0
    assert [m.path for m in fs.grep("needle")] == ["a.txt", "b.txt"]


def notified(store: SqlStore, fs: SqlFilesystem) -> None:
    """The call sends the journal's notification itself, ``<session> <seq>``, on commit."""
    url = engine_url(store.url)[0].replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute("LISTEN wsfs_journal")
        fs.write_bytes("a.txt", b"second")
        fs.write_bytes("c.txt", b"new")
        heard: list[str] = []
        while len(heard) < 2 and select.select([listener.fileno()], [], [], 10)[0]:
            heard += [note.payload for note in listener.notifies(timeout=0.1)]
    entries = fs.history(limit=2)
    assert heard == [f"{fs.session_id} {entry.entry_id}" for entry in reversed(entries)]


# --- SQLite: pages per commit -------------------------------------------------------------------------------------


def wal_pages(database: Path, operation: Callable[[], object]) -> list[str]:
    """The B-tree of each page ``operation``'s commit appended to the WAL (emptied first)."""
    with sqlite3.connect(database) as checkpoint:
        assert checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # not busy: emptied
    operation()
    wal = Path(f"{database}-wal").read_bytes()
    page_size = struct.unpack(">I", wal[8:12])[0]
    frames = range(32, len(wal), 24 + page_size)
    pages = [struct.unpack(">I", wal[at : at + 4])[0] for at in frames]
    with sqlite3.connect(database) as reader:
        owners = dict(reader.execute("SELECT pageno, name FROM dbstat"))
    return sorted(owners.get(page, f"page {page}") for page in pages)


def fewest_pages(database: Path, writes: list[Callable[[], object]]) -> list[str]:
    """The pages of the write that changed fewest (the others also split a page or grew the file)."""
    return min((wal_pages(database, write) for write in writes), key=len)


def test_a_new_file_writes_one_page_per_b_tree_it_needs(fast_tmp: Path) -> None:
    """A new file's content (its blob row, the key's index, the grep queue), its row (``wsfs_files`` without rowid:
    no second B-tree for the key; the parent index; the content index) and its journal row (the table, keyed by
    session since migration 0013: no session index; no ``sqlite_sequence``, no path index): seven pages, eight
    before 0013, eleven before 0012. An overwrite: seven, eight before 0013, ten before 0012. Entry numbers are
    still never given twice."""
    database = fast_tmp / f"pages-{next(_ids)}.db"
    store = SqlStore(f"sqlite:///{database}")
    try:
        fs = SqlFilesystem(store, "pages")
        fs.write_bytes("dir/first.txt", b"first")
        writes = [lambda i=i: fs.write_bytes(f"dir/new-{i}.txt", b"new content %d" % i) for i in range(6)]
        assert fewest_pages(database, writes) == sorted(
            [
                "wsfs_blobs",
                "sqlite_autoindex_wsfs_blobs_1",
                "wsfs_grep_queue",
                "wsfs_files",
                "wsfs_files_parent",
                "ix_wsfs_files_blob_id",
                "wsfs_journal",
            ]
        )
        rewrites = [lambda i=i: fs.write_bytes(f"dir/new-{i}.txt", b"rewritten %d" % i) for i in range(6)]
        assert fewest_pages(database, rewrites) == sorted(
            [
                "wsfs_blobs",
                "sqlite_autoindex_wsfs_blobs_1",
                "wsfs_grep_queue",
                "wsfs_files",
                "ix_wsfs_files_blob_id",
                "wsfs_journal",
                "wsfs_journal_before",  # the replaced content, kept for undo
            ]
        )
        never_twice(fs)
    finally:
        store.close()


def never_twice(fs: SqlFilesystem) -> None:
    """An entry's number is never given again, even once every entry above it went (``AUTOINCREMENT``'s promise,
    kept on SQLite by ``wsfs_journal_floor``)."""
    newest = fs.history(limit=1)[0].entry_id
    assert fs.prune_history(keep=0) > 0 and fs.history() == []
    fs.write_bytes("after-prune.txt", b"a")
    fs.write_bytes("after-prune.txt", b"b")
    assert [e.entry_id for e in fs.history()] == [newest + 2, newest + 1]
