"""PostgreSQL: a restore racing writers of its session, whose usage row (migration ``0009``) every change updates.

A writer locks its file row, then its statement's trigger updates the session's usage row; a restore changed
rows in several statements, so after its first one it held the usage row while it waited for a file row a writer
held: PostgreSQL broke the deadlock by failing one of them (SQLSTATE ``40P01``, an unclassified error). Now a
restore locks its rows first (``_lock_order``), and a deadlock that still happens is ``ConcurrentChangeError``.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from workspacefs import ConcurrentChangeError, Quota, SqlFilesystem, SqlStore
from workspacefs.results import FilesystemSnapshot
from workspacefs.testing._postgres import create_database

_ids = itertools.count()
FILES = 20
RESTORES = 20
WRITERS = 3
SESSION_ROUNDS = 40


class CountingFilesystem(SqlFilesystem):
    """Counts the restore's transactions: one per restore unless a deadlock made it run again."""

    attempts = 0

    def _restore_rows(self, connection: Any, snapshot: FilesystemSnapshot, tag: Any) -> list[str]:
        type(self).attempts += 1
        rows: list[str] = super()._restore_rows(connection, snapshot, tag)
        return rows


@pytest.fixture
def store(postgres_url: str) -> Iterator[SqlStore]:
    """A database of its own on the real PostgreSQL server."""
    opened = SqlStore(create_database(postgres_url, f"wsfs_restore_race_{os.getpid()}_{next(_ids)}"))
    yield opened
    opened.close()


def test_restores_and_writers_of_one_session_never_deadlock(store: SqlStore) -> None:
    quota = Quota(max_bytes=10**9, max_files=10**6)  # a quota: the session's usage row exists
    fs = SqlFilesystem(store, "s", quota=quota)
    for n in range(FILES):
        fs.write(f"f{n}.txt", "base\n")
    snapshot = fs.snapshot()
    failures: list[BaseException] = []
    done = threading.Event()
    writes = [0] * WRITERS

    def restore() -> None:
        restorer = CountingFilesystem(store, "s", quota=quota)
        try:
            for _ in range(RESTORES):
                restorer.restore(snapshot)
        except BaseException as exc:
            failures.append(exc)
        finally:
            done.set()

    def write(k: int) -> None:
        writer = SqlFilesystem(store, "s", quota=quota)
        while not done.is_set():
            writes[k] += 1
            try:  # files the restore puts back, and new files it deletes
                writer.write(f"f{(writes[k] * 7 + k) % FILES}.txt", f"writer {k}, write {writes[k]}\n")
                writer.write(f"new-{k}-{writes[k] % 5}.txt", "new\n")
            except BaseException as exc:
                failures.append(exc)

    threads = [threading.Thread(target=restore), *(threading.Thread(target=write, args=(k,)) for k in range(WRITERS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    assert CountingFilesystem.attempts == RESTORES  # no restore had to run again
    assert min(writes) > 1  # the writers ran beside the restores


@pytest.mark.parametrize("way", ["store", "driver"])
def test_a_deadlock_postgresql_breaks_is_a_concurrent_change(store: SqlStore, way: str) -> None:
    """Two transactions taking two locks in opposite orders: PostgreSQL fails one (``40P01``), which surfaces as
    ``ConcurrentChangeError`` (409 ``conflict``, "try again") through both ways to the database."""
    both_hold_one = threading.Barrier(2)
    raised: list[BaseException] = []

    def lock(key: int) -> str:
        return f"SELECT pg_advisory_xact_lock({key})"

    def take(first: int, second: int) -> None:
        try:
            if way == "store":
                with store.write() as connection:
                    connection.execute(sa.text(lock(first)))
                    both_hold_one.wait()
                    connection.execute(sa.text(lock(second)))
            else:
                with store.driver.transaction(write=True) as tx:
                    tx.run(lock(first))
                    tx.sync()
                    both_hold_one.wait()
                    tx.run(lock(second))
                    tx.sync()
        except BaseException as exc:
            raised.append(exc)

    threads = [threading.Thread(target=take, args=(1, 2)), threading.Thread(target=take, args=(2, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [type(exc) for exc in raised] == [ConcurrentChangeError]


def test_deleting_a_session_never_deadlocks_with_its_writers(store: SqlStore) -> None:
    """A session's delete cascades to its file rows; a writer holding one checked its foreign key against the
    session's row the delete held: PostgreSQL broke that deadlock. The delete locks the file rows first now."""
    failures: list[BaseException] = []
    for round_ in range(SESSION_ROUNDS):
        session = f"gone-{round_}"
        fs = SqlFilesystem(store, session)
        for n in range(5):
            fs.write(f"d/f{n}.txt", "a")
        start = threading.Barrier(WRITERS + 1)

        def write(k: int, session: str = session, start: threading.Barrier = start) -> None:
            writer = SqlFilesystem(store, session)
            start.wait()
            for n in range(20):
                try:
                    writer.write(f"d/f{n % 5}.txt" if n % 2 else f"d/new-{k}-{n}.txt", "x")
                except FileNotFoundError:
                    return  # the session is gone: what a write of a deleted session raises
                except BaseException as exc:
                    failures.append(exc)
                    return

        threads = [threading.Thread(target=write, args=(k,)) for k in range(WRITERS)]
        for thread in threads:
            thread.start()
        start.wait()
        try:
            fs.delete_session()
        except BaseException as exc:
            failures.append(exc)
        for thread in threads:
            thread.join()
    assert failures == []


def _deadlocks(store: SqlStore) -> int:
    """The database's deadlock count so far (the server's statistics flushed first)."""
    time.sleep(1.0)  # statistics reach pg_stat_database within a second: waited for, not measured
    with store.engine.connect() as connection:
        connection.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        found = connection.exec_driver_sql("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return int(found.scalar() or 0)


TREE_ROUNDS = 3
TREE_STEPS = 6


def _fill(fs: SqlFilesystem) -> None:
    for n in range(FILES):
        fs.write(f"d/f{n}.txt", "base\n")
        fs.write(f"d/sub/g{n}.txt", "base\n")


def _tree_steps(fs: SqlFilesystem) -> list[Any]:
    """A tree moved there and back; copied, copied over its copy (a tree delete and a graft in one transaction) and
    that undone; the copy moved over the tree it came from (both trees locked in one path order); moved and the
    move undone (a tree move back); deleted recursively and written again."""

    def undo_last() -> None:
        fs.undo(fs.history(limit=1)[0].entry_id, force=True)

    return [
        lambda: fs.move("d", "e"),
        lambda: fs.move("e", "d"),
        lambda: fs.copy("d", "u"),
        lambda: fs.copy("d", "u", overwrite=True),
        undo_last,
        lambda: fs.move("u", "d", overwrite=True),
        lambda: fs.move("d", "e"),
        undo_last,
        lambda: fs.delete("d", recursive=True),
        lambda: _fill(fs),
    ]


def test_tree_moves_and_deletes_beside_writers_of_the_tree_never_deadlock(store: SqlStore) -> None:
    """A move of a directory inserted its copies row by row (each statement's trigger taking the usage row), then
    deleted the old rows, waiting for one a writer held while that writer waited for the usage row: PostgreSQL
    broke the deadlock by failing one of them (about 1.5 deadlocks a move, 3 writers: ``ConcurrentChangeError`` to
    the mover or a writer). Tree moves and recursive deletes now lock the rows they delete first, in path order."""
    failures: list[BaseException] = []
    before = _deadlocks(store)
    for round_ in range(TREE_ROUNDS):
        session = f"tree-{round_}"
        fs = SqlFilesystem(store, session, quota=Quota(max_bytes=10**9, max_files=10**6))
        _fill(fs)
        done = threading.Event()
        writes = [0] * WRITERS

        def write(k: int, session: str = session, done: threading.Event = done, writes: list[int] = writes) -> None:
            writer = SqlFilesystem(store, session, create=False, quota=Quota(max_bytes=10**9, max_files=10**6))
            while not done.is_set():
                writes[k] += 1
                top = "deu"[writes[k] % 3]
                try:
                    writer.write(
                        f"{top}/f{(writes[k] * 7 + k) % FILES}.txt", f"{k} {writes[k]}\n", create_parents=False
                    )
                    writer.write(f"{top}/sub/new-{k}-{writes[k] % 4}.txt", "new\n", create_parents=False)
                except FileNotFoundError:
                    pass  # the tree is elsewhere just now
                except BaseException as exc:
                    failures.append(exc)

        threads = [threading.Thread(target=write, args=(k,)) for k in range(WRITERS)]
        for thread in threads:
            thread.start()
        try:
            for _ in range(TREE_STEPS):
                for step in _tree_steps(fs):
                    try:
                        step()
                    except (FileNotFoundError, FileExistsError):
                        pass  # a step before it failed: what the next one needs is not there (counted there)
                    except BaseException as exc:
                        failures.append(exc)
        finally:
            done.set()
            for thread in threads:
                thread.join()
    assert [type(exc).__name__ for exc in failures] == []
    assert _deadlocks(store) == before
