"""Snapshot, restore and diff on the SQL backend cost what changed, not the workspace's size (issue 15).

Work is counted, never timed: on PostgreSQL the rows each transaction read and wrote (``pg_stat_xact_user_tables``
at its start and just before it commits; sequential scans off, so that a planner's choice to scan a small shared
table does not count other tests' rows), on SQLite the virtual machine's instructions (a progress handler called
on every one), which grow with every row a statement visits. A workspace of 200 files and one of 2,000 get the same k
changes after a snapshot; taking the snapshot, diffing and restoring must then do the same work in both (the
whole-manifest copy and comparison this replaced did ten times as much in the larger one).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.testing._postgres import create_database

_ids = itertools.count()

_PG_ROWS = (
    "SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0) + n_tup_ins + n_tup_upd + n_tup_del), 0)"
    " FROM pg_stat_xact_user_tables WHERE starts_with(relname, 'wsfs_')"
)
"""Rows the transaction read (by scans and through indexes) and wrote, in the store's tables."""


class Counter:
    """Wraps a store's transactions (the SQLAlchemy ones snapshot, restore and diff use) to count their work."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.work = 0
        self.statements = 0
        self.counting = False

    def _step(self) -> int:
        self.work += 1
        return 0  # go on

    @contextmanager
    def _wrap(self, opened: Callable[[], Any]) -> Iterator[Any]:
        with opened() as connection:
            if not self.counting:
                yield connection
                return
            raw = connection.connection.driver_connection
            if self.store.dialect == "sqlite":
                raw.set_progress_handler(self._step, 1)
                try:
                    yield connection
                finally:
                    raw.set_progress_handler(None, 1)
            else:
                # a small table is scanned whole when that is cheaper, whatever else it holds (other tests'
                # sessions): with scans off, a scan left in a plan is a statement no index can serve
                connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
                # counts not yet flushed include earlier transactions of the same connection: take the difference
                start = int(connection.exec_driver_sql(_PG_ROWS).scalar_one())
                yield connection
                # the transaction's own row counts, before it commits (the wrapped context commits it)
                self.work += int(connection.exec_driver_sql(_PG_ROWS).scalar_one()) - start

    @contextmanager
    def counted(self) -> Iterator[Counter]:
        self.work = self.statements = 0
        self.counting = True
        try:
            yield self
        finally:
            self.counting = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        write, read = self.store.write, self.store.read
        monkeypatch.setattr(self.store, "write", lambda: self._wrap(write))
        monkeypatch.setattr(self.store, "read", lambda: self._wrap(read))

        def statement(*_: Any) -> None:
            if self.counting:
                self.statements += 1

        sa.event.listen(self.store.engine, "before_cursor_execute", statement)


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Callable[[], SqlStore]]:
    """Opens a store on a database of its own each call: what other sessions (or tests) left in a shared one
    does not count, nor steer the plans."""
    opened: list[SqlStore] = []

    def new() -> SqlStore:
        if request.param == "sqlite":
            url = f"sqlite:///{fast_tmp / f'work-{next(_ids)}.db'}"
        else:
            url = create_database(request.getfixturevalue("postgres_url"), f"wsfs_work_{os.getpid()}_{next(_ids)}")
        opened.append(SqlStore(url))
        return opened[-1]

    yield new
    for store in opened:
        store.close()


@pytest.fixture
def store(stores: Callable[[], SqlStore]) -> SqlStore:
    return stores()


def workspace(store: SqlStore, files: int) -> SqlFilesystem:
    fs = SqlFilesystem(store, f"work-{next(_ids)}")
    for i in range(files):
        fs.write_bytes(f"d{i % 10}/f{i:05d}.txt", b"file %d\n" % i)
    if store.dialect == "postgresql":
        # statistics as autovacuum keeps them in a live database (and cached plans made before them dropped):
        # the plans then are those a workspace of this size gets
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("ANALYZE wsfs_files, wsfs_file_versions, wsfs_snapshots, wsfs_journal")
    return fs


def change(fs: SqlFilesystem) -> None:
    """k = 6 changes: two overwrites, a delete, two new files (one in a new directory), a read-only flag."""
    fs.write_bytes("d1/f00001.txt", b"changed\n")
    fs.write_bytes("d2/f00002.txt", b"changed too\n")
    fs.delete("d3/f00003.txt")
    fs.write_bytes("d4/new.txt", b"new\n")
    fs.write_bytes("brand/new/file.txt", b"new\n")
    fs.set_read_only("d5/f00005.txt")


def measure(store: SqlStore, monkeypatch: pytest.MonkeyPatch, files: int) -> dict[str, tuple[int, int]]:
    counter = Counter(store)
    counter.install(monkeypatch)
    fs = workspace(store, files)
    found: dict[str, tuple[int, int]] = {}
    fs.snapshot()  # an older snapshot the session keeps: versions start before the one measured
    fs.write_bytes("d6/f00006.txt", b"before the snapshot measured\n")
    with counter.counted():
        snapshot = fs.snapshot()
    found["snapshot"] = (counter.work, counter.statements)
    assert (snapshot.file_count, snapshot.total_bytes) == (files, sum(len(b"file %d\n" % i) for i in range(files)) + 22)
    change(fs)
    with counter.counted():
        diff = fs.diff(snapshot)
    found["diff"] = (counter.work, counter.statements)
    assert diff.added == ("brand/new/file.txt", "d4/new.txt")
    assert diff.modified == ("d1/f00001.txt", "d2/f00002.txt")
    assert diff.deleted == ("d3/f00003.txt",)
    assert diff.unchanged_count == files - 3
    with counter.counted():
        fs.restore(snapshot)
    found["restore"] = (counter.work, counter.statements)
    assert fs.diff(snapshot).unchanged_count == files
    assert fs.read_bytes("d1/f00001.txt").content == b"file 1\n"
    assert not fs.exists("brand") and fs.exists("d3/f00003.txt")
    assert not fs.stat("d5/f00005.txt").read_only
    change(fs)  # again, after the restore: the versions the restore itself wrote count too
    with counter.counted():
        fs.restore(snapshot)
    found["second restore"] = (counter.work, counter.statements)
    change(fs)
    fs.delete("d7", recursive=True)
    counted = fs.snapshot()  # its totals come from the measured snapshot's and the paths changed since
    usage = fs.usage()
    assert (counted.file_count, counted.total_bytes) == (usage.files, usage.bytes)
    return found


@pytest.mark.parametrize("history", [True, False], ids=["journal", "no-journal"])
def test_restore_and_diff_do_the_same_work_at_200_and_2000_files(
    stores: Callable[[], SqlStore], monkeypatch: pytest.MonkeyPatch, history: bool
) -> None:
    found = {}
    for files in (200, 2000):
        store = stores()
        monkeypatch.setattr(store, "history", history)
        monkeypatch.setattr(store, "journaled", lambda: False)  # no retention pass in between: it is not this work
        found[files] = measure(store, monkeypatch, files)
    small, large = found[200], found[2000]
    assert {k: v[1] for k, v in large.items()} == {k: v[1] for k, v in small.items()}  # the same statements
    for name in small:
        # the same work, up to a B-tree level or two: the whole-manifest way did 10x at 2,000
        assert large[name][0] <= small[name][0] * 1.2 + 50, (name, small, large)


def test_a_snapshot_copies_no_rows(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Taking a snapshot writes one row, whatever the workspace holds (its aggregate reads the files once)."""
    fs = workspace(store, 300)
    snapshot = fs.snapshot()
    mine = {"s": fs.session_id, "id": str(snapshot.snapshot_id)}
    with store.read() as connection:
        entries = connection.execute(
            sa.text("SELECT count(*) FROM wsfs_snapshot_entries WHERE snapshot_id = :id"), mine
        ).scalar_one()
        kept = connection.execute(sa.text("SELECT count(*) FROM wsfs_file_versions WHERE session_id = :s"), mine)
        assert (entries, kept.scalar_one()) == (0, 0)  # nothing changed since: nothing kept
    fs.write_bytes("d0/f00000.txt", b"changed\n")
    fs.write_bytes("d0/f00000.txt", b"changed again\n")
    with store.read() as connection:
        kept = connection.execute(sa.text("SELECT count(*) FROM wsfs_file_versions WHERE session_id = :s"), mine)
        assert kept.scalar_one() == 1  # the first change after the mark is the one a restore needs
    fs.delete_snapshot(snapshot)
    with store.read() as connection:
        kept = connection.execute(sa.text("SELECT count(*) FROM wsfs_file_versions WHERE session_id = :s"), mine)
        assert kept.scalar_one() == 0  # no snapshot needs them: collected with it


def test_a_database_from_before_0008_keeps_its_snapshots_and_takes_new_ones_by_mark(fast_tmp: Path) -> None:
    """Upgrade: a snapshot written out in entries (as before 0008) still restores, diffs and forks; new ones
    are taken by mark; the old one's entries go when it is deleted."""
    from alembic import command

    from workspacefs.backends.sql._store import migration_config

    url = f"sqlite:///{fast_tmp / f'upgrade-{next(_ids)}.db'}"
    store = SqlStore(url)
    fs = SqlFilesystem(store, "old")
    fs.write_bytes("a.txt", b"a before\n")
    fs.write_bytes("dir/b.txt", b"b before\n")
    store.close()
    engine = sa.create_engine(url)
    config = migration_config()
    with engine.connect() as connection, connection.begin():
        config.attributes["connection"] = connection
        command.downgrade(config, "0007")
        # what a snapshot was before 0008: its row, and every file row copied into its entries
        connection.exec_driver_sql(
            "INSERT INTO wsfs_snapshots (id, session_id, tag, parent_id, file_count, total_bytes, created_at)"
            " VALUES ('00000000-0000-4000-8000-000000000001', 'old', 'before', NULL, 2, 18, '2026-01-01 00:00:00')"
        )
        connection.exec_driver_sql(
            "INSERT INTO wsfs_snapshot_entries SELECT '00000000-0000-4000-8000-000000000001', path, parent, name,"
            " is_directory, is_readonly, blob_id, size_bytes, created_at, updated_at FROM wsfs_files"
            " WHERE session_id = 'old'"
        )
    engine.dispose()
    SqlStore._migrated.discard(url)
    store = SqlStore(url)  # opening migrates to 0008
    fs = SqlFilesystem(store, "old")
    (old,) = fs.snapshots()
    fs.write_bytes("a.txt", b"a after\n")
    fs.delete("dir", recursive=True)
    diff = fs.diff(old)
    assert (diff.modified, diff.deleted) == (("a.txt",), ("dir/b.txt",))
    new = fs.snapshot()
    fs.restore(old)
    assert fs.read_bytes("a.txt").content == b"a before\n"
    assert fs.read_bytes("dir/b.txt").content == b"b before\n"
    assert fs.diff(old, new).modified == ("a.txt",)
    fs.restore(new)
    assert fs.read_bytes("a.txt").content == b"a after\n" and not fs.exists("dir")
    fork = fs.fork(old)
    assert fork.read_bytes("dir/b.txt").content == b"b before\n"
    fs.delete_snapshot(old)
    with store.read() as connection:
        left = connection.execute(sa.text("SELECT count(*) FROM wsfs_snapshot_entries")).scalar_one()
        marks = connection.execute(sa.text("SELECT mark IS NOT NULL FROM wsfs_snapshots")).scalars().all()
    assert left == 0 and marks == [True]
    store.close()


class _Turns:
    """Keeps writers and snapshots interleaved however the threads are scheduled: a writer more than ``ahead``
    writes past the last snapshot waits for the next one (snapshots then always run among writes)."""

    def __init__(self, wanted: int, ahead: int = 8) -> None:
        self.wanted, self.ahead, self.taken = wanted, ahead, 0
        self.changed = threading.Condition()

    def snapshot_taken(self) -> None:
        with self.changed:
            self.taken += 1
            self.changed.notify_all()

    def may_write(self, written: int) -> bool:
        """Whether a writer that wrote ``written`` files goes on (it waits its turn first)."""
        with self.changed:
            while self.taken < self.wanted and written >= (self.taken + 1) * self.ahead:
                self.changed.wait()
            return self.taken < self.wanted


def _write_in_turn(store: SqlStore, session_id: str, w: int, turns: _Turns, failures: list[BaseException]) -> None:
    """Writer ``w``: files one after another (overwriting the one before, so versions carry content) until
    enough snapshots were taken."""
    mine = SqlFilesystem(store, session_id, create=False)
    try:
        i = 0
        while turns.may_write(i):
            mine.write_bytes(f"w{w}/f{i:04d}", b"%d" % i)
            if i % 2:
                mine.write_bytes(f"w{w}/f{i - 1:04d}", b"again %d" % i)
            i += 1
    except BaseException as exc:  # reported by the test
        failures.append(exc)


def test_snapshots_taken_while_others_write_restore_to_a_state_that_was(store: SqlStore) -> None:
    """Writers add files one after another while snapshots are taken: every snapshot restores to a prefix of each
    writer's sequence (a state the session was in) whose count is the snapshot's own — never a mix."""
    fs = SqlFilesystem(store, f"race-{next(_ids)}")
    writers, wanted = 3, 6
    for w in range(writers):
        fs.mkdir(f"w{w}")
    turns = _Turns(wanted)
    failures: list[BaseException] = []
    threads = [
        threading.Thread(target=_write_in_turn, args=(store, fs.session_id, w, turns, failures)) for w in range(writers)
    ]
    for thread in threads:
        thread.start()
    taken = []
    while any(t.is_alive() for t in threads):
        taken.append(fs.snapshot())
        turns.snapshot_taken()
    for thread in threads:
        thread.join()
    assert not failures
    assert len(taken) >= wanted
    for snapshot in taken:
        fs.restore(snapshot)
        files = [e.path for e in fs.walk("/") if e.is_file]
        assert len(files) == snapshot.file_count
        assert sum(fs.stat(p).size_bytes for p in files) == snapshot.total_bytes
        for w in range(writers):
            numbers = sorted(int(p.rsplit("f", 1)[1]) for p in files if p.startswith(f"w{w}/"))
            assert numbers == list(range(len(numbers)))  # a prefix: written one after another
        assert fs.diff(snapshot).unchanged_count == snapshot.file_count
