"""A SQL session's usage is one row kept by triggers (migration ``0009``), exact whoever changes the session.

A quota asks for usage before every growing change; counting every file row each time made a quota'd write into
a SQLite session of 20,000 files take 43 ms (0.1 ms without a quota). Checked here: the row is what a count
would say after every kind of change, from this store and another; a quota check reads the row, not the files;
and a first count made while other writers run misses none of their changes.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from workspacefs import Quota, QuotaExceededError, SqlFilesystem, SqlStore, Usage
from workspacefs.testing._postgres import create_database

_ids = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    """A database of its own."""
    if request.param == "sqlite":
        return f"sqlite:///{fast_tmp / f'usage-{next(_ids)}.db'}"
    return create_database(request.getfixturevalue("postgres_url"), f"wsfs_usage_{os.getpid()}_{next(_ids)}")


@pytest.fixture
def stores(url: str) -> Iterator[Callable[[], SqlStore]]:
    opened: list[SqlStore] = []

    def new() -> SqlStore:
        opened.append(SqlStore(url))
        return opened[-1]

    yield new
    for store in opened:
        store.close()


def counted(store: SqlStore, session: str) -> Usage:
    """What counting every file row says."""
    with store.engine.connect() as connection:
        total, files = connection.exec_driver_sql(
            "SELECT coalesce(sum(size_bytes), 0), count(*) FROM wsfs_files WHERE session_id = "
            + ("?" if store.dialect == "sqlite" else "%s")
            + " AND NOT is_directory",
            (session,),
        ).one()
    return Usage(int(total), int(files))


def test_the_row_is_what_a_count_says_after_every_kind_of_change(stores: Callable[[], SqlStore]) -> None:
    store, other_store = stores(), stores()
    fs = SqlFilesystem(store, "s", quota=Quota(max_bytes=10**9))
    fs.write_bytes("a/one.txt", b"1" * 100)
    assert fs.usage() == Usage(100, 1)  # the first ask counts and makes the row
    other = SqlFilesystem(other_store, "s")  # another process's view of the same session: no quota of its own
    snapshot = fs.snapshot()
    steps: list[Callable[[], object]] = [
        lambda: fs.write_bytes("a/two.txt", b"2" * 50),
        lambda: fs.write_bytes("a/one.txt", b"1" * 10),  # smaller
        lambda: fs.write_bytes("a/one.txt", b"+" * 7, mode="append"),
        lambda: fs.mkdir("b/c", parents=True),
        lambda: fs.copy("a", "b/c/a"),
        lambda: fs.move("b/c/a", "moved"),
        lambda: other.write_bytes("from-elsewhere.txt", b"o" * 33),
        lambda: other.delete("a/two.txt"),
        lambda: fs.set_read_only("moved/one.txt"),
        lambda: fs.delete("moved", recursive=True),
        lambda: fs.restore(snapshot),
    ]
    for step in steps:
        step()
        assert fs.usage() == counted(store, "s"), step
    with fs.open_write("streamed.bin") as stream:
        stream.write(b"s" * 300_000)
    assert fs.usage() == counted(store, "s")
    fork = fs.fork()
    fork.write_bytes("only-in-fork.txt", b"f" * 5)
    assert fork.usage() == counted(store, fork.session_id) and fs.usage() == counted(store, "s")


def test_a_quota_check_reads_the_row_not_the_files(stores: Callable[[], SqlStore]) -> None:
    store = stores()
    fs = SqlFilesystem(store, "q", quota=Quota(max_bytes=1000))
    fs.write_bytes("a.txt", b"a" * 100)
    assert fs.usage() == Usage(100, 1)
    with store.engine.begin() as connection:  # what only the row says: the files are not counted again
        connection.execute(sa.text("UPDATE wsfs_session_usage SET bytes = 950 WHERE session_id = 'q'"))
    assert fs.usage() == Usage(950, 1)
    with pytest.raises(QuotaExceededError):
        fs.write_bytes("b.txt", b"b" * 100)


def test_a_first_count_beside_running_writers_misses_none_of_their_changes(stores: Callable[[], SqlStore]) -> None:
    writers = [SqlFilesystem(stores(), "busy") for _ in range(3)]
    writers[0].write_bytes("seed.txt", b"x")
    stop = threading.Event()

    def write(fs: SqlFilesystem, n: int) -> None:
        for index in itertools.count():
            if stop.is_set():
                return
            fs.write_bytes(f"w{n}/f{index % 40}.txt", b"y" * (index % 97))
            if index % 5 == 4 and fs.exists(f"w{n}/f{(index * 7) % 40}.txt"):
                fs.delete(f"w{n}/f{(index * 7) % 40}.txt")

    threads = [threading.Thread(target=write, args=(fs, n)) for n, fs in enumerate(writers)]
    for thread in threads:
        thread.start()
    try:
        asker_store = stores()
        asker = SqlFilesystem(asker_store, "busy")
        for _ in range(5):
            asker.write_bytes("asker.txt", b"z")
        first = asker.usage()  # counted and made while the others write
        assert first.files >= 1
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert asker.usage() == counted(asker_store, "busy")


def test_a_deleted_session_gets_no_row(stores: Callable[[], SqlStore]) -> None:
    store = stores()
    fs = SqlFilesystem(store, "gone")
    fs.write_bytes("a.txt", b"a")
    assert fs.usage() == Usage(1, 1)
    fs.delete_session()
    with store.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT count(*) FROM wsfs_session_usage").scalar_one()
    assert rows == 0  # it went with its session


def test_a_read_only_filesystem_counts_without_writing(stores: Callable[[], SqlStore]) -> None:
    """Review 3: a read-only filesystem made the usage row in a write transaction (a database it may only read,
    or a writer holding the lock, stopped its ``usage()``). It counts in a read transaction and keeps nothing."""
    store = stores()
    SqlFilesystem(store, "ro").write_bytes("a.txt", b"abc")
    viewer = SqlFilesystem(store, "ro", read_only=True)
    with store.engine.connect() as connection:
        before = connection.exec_driver_sql("SELECT count(*) FROM wsfs_session_usage").scalar_one()
    assert viewer.usage() == Usage(3, 1)
    with store.engine.connect() as connection:
        after = connection.exec_driver_sql("SELECT count(*) FROM wsfs_session_usage").scalar_one()
    assert (before, after) == (0, 0)
