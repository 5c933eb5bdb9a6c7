"""A move or copy over a directory on SQL is one transaction: the old tree's deletion and the new tree's rows commit
together, so a refusal (or a crash) part way leaves both trees as they were, and the journal holds nothing of it.

The refusal is the database's own: a trigger (SQLite) or a ``CHECK`` (PostgreSQL) added after the trees were
written refuses the row of a file named ``refused`` that the move or copy would insert below the target.
"""

from __future__ import annotations

import errno
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from workspacefs import Quota, SqlFilesystem, SqlStore, Usage
from workspacefs.testing._postgres import throwaway_database

SQLITE_REFUSAL = (
    "CREATE TRIGGER wsfs_test_refuse BEFORE INSERT ON wsfs_files WHEN NEW.name = 'refused'"
    " BEGIN SELECT RAISE(ABORT, 'refused by the test''s trigger'); END"
)
POSTGRES_REFUSAL = "ALTER TABLE wsfs_files ADD CONSTRAINT wsfs_test_refuse CHECK (name <> 'refused') NOT VALID"
TREES = {
    "src/x.txt": "new x",
    "src/sub/refused": "new r",
    "dst/x.txt": "old x",
    "dst/keep/k.txt": "old k",
}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[SqlStore]:
    """A store on a database of its own (the test changes its schema)."""
    if request.param == "sqlite":
        opened = SqlStore(f"sqlite:///{fast_tmp / f'tree-replace-{uuid.uuid4().hex}.db'}")
        yield opened
        opened.close()
        return
    with throwaway_database(request.getfixturevalue("postgres_url"), "wsfs_tree_replace") as url:
        opened = SqlStore(url)
        yield opened
        opened.close()


def refusing(store: SqlStore) -> SqlFilesystem:
    """A session holding :data:`TREES`, whose database then refuses any new row named ``refused``."""
    fs = SqlFilesystem(store, "s")
    for path, content in TREES.items():
        fs.write(path, content)
    with store.engine.begin() as connection:
        connection.exec_driver_sql(SQLITE_REFUSAL if store.dialect == "sqlite" else POSTGRES_REFUSAL)
    return fs


def files(fs: SqlFilesystem, below: str = ".") -> dict[str, str]:
    return {e.path: fs.read(e.path).content for e in fs.walk(below) if e.is_file}


@pytest.mark.parametrize("operation", ["move", "copy"])
def test_a_refusal_part_way_leaves_both_trees_and_the_journal_as_they_were(store: SqlStore, operation: str) -> None:
    fs = refusing(store)
    newest = fs.history(limit=1)[0].entry_id
    with pytest.raises(OSError) as raised:
        getattr(fs, operation)("src", "dst", overwrite=True)
    assert raised.value.errno == errno.EIO
    assert files(fs) == TREES  # the old code had deleted dst's tree in a transaction of its own
    assert fs.exists("dst/keep") and fs.history(limit=1)[0].entry_id == newest


@pytest.mark.parametrize("over_limit_by", ["bytes", "files"])
def test_a_copy_over_a_tree_that_frees_more_than_it_adds_is_allowed_over_the_limit(
    store: SqlStore, over_limit_by: str
) -> None:
    """Shrinking is always allowed (as in memory): the check in the copy's transaction is on what the deletion and
    the copy add up to, not on the copy alone (which refused it, and the old code had deleted ``dst`` by then)."""
    filler = SqlFilesystem(store, "q")  # another writer, without the quota, put the session past it
    filler.write("src/a.txt", "x" * 10)
    filler.write("dst/a.txt", "y" * 100)
    filler.write("dst/b.txt", "y" * 100)
    filler.write("other.txt", "z" * 200)
    limits = Quota(max_bytes=150) if over_limit_by == "bytes" else Quota(max_files=2)
    fs = SqlFilesystem(store, "q", quota=limits)
    assert fs.usage() == Usage(410, 4)  # past both limits (and the usage row made, which the check reads)
    fs.copy("src", "dst", overwrite=True)
    assert files(fs) == {"src/a.txt": "x" * 10, "dst/a.txt": "x" * 10, "other.txt": "z" * 200}
    assert fs.usage() == Usage(220, 3)


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[SqlStore]:
    """A PostgreSQL database of its own."""
    with throwaway_database(postgres_url, "wsfs_tree_lock") as url:
        opened = SqlStore(url)
        yield opened
        opened.close()


def _waiting(store: SqlStore) -> int:
    """Backends of this database waiting for a lock (asked in a transaction of its own: a transaction reads one
    snapshot of ``pg_stat_activity``)."""
    with store.engine.connect() as connection:
        found = connection.exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(found.scalar() or 0)


@pytest.mark.parametrize(
    ("operation", "src", "dst"),
    [("move", "d", "p/u"), ("copy", "d", "p/u"), ("move", "d/x.txt", "p/u/x.txt")],
    ids=["move-tree", "copy-tree", "move-file"],
)
def test_a_move_or_copy_takes_the_parent_it_adds_to_in_path_order(
    postgres_store: SqlStore, operation: str, src: str, dst: str
) -> None:
    """A tree operation on ``p`` locks ``p``, then ``p/u`` and below (path order). A move or copy over ``p/u`` that
    locked ``p/u``'s tree first and then waited for ``p`` (the parent it adds to) deadlocked with it: PostgreSQL
    failed one of the two (a file moved over ``p/u/x.txt`` likewise, with ``p/u``). Here the other transaction
    holds the parent, the change starts and waits, and then the other asks for the rows below: both must finish."""
    fs = SqlFilesystem(postgres_store, "s")
    for name in ("x", "y"):
        fs.write(f"d/{name}.txt", "new")
        fs.write(f"p/u/{name}.txt", "old")
    fs.write("p/u/sub/z.txt", "old")
    above = dst.rpartition("/")[0]
    failed: list[BaseException] = []

    def change() -> None:
        try:
            getattr(fs, operation)(src, dst, overwrite=True)
        except BaseException as exc:
            failed.append(exc)

    where = {"s": "s", "path": above, "low": above + "/", "high": above + "0"}
    with postgres_store.engine.connect() as other, other.begin():  # the first half of a tree operation on it
        other.exec_driver_sql("SELECT 1 FROM wsfs_files WHERE session_id = %(s)s AND path = %(path)s FOR UPDATE", where)
        thread = threading.Thread(target=change)
        thread.start()
        polls = 0
        while not _waiting(postgres_store) and thread.is_alive() and polls < 10_000:
            polls += 1
            time.sleep(0.005)
        assert thread.is_alive(), failed  # the change waits for the parent
        other.exec_driver_sql(  # the second half: the parent's tree, in path order
            "SELECT count(*) FROM (SELECT 1 FROM wsfs_files WHERE session_id = %(s)s AND path > %(low)s"
            " AND path < %(high)s ORDER BY path FOR UPDATE) AS locked",
            where,
        )
    thread.join()
    assert not failed, failed  # a deadlock: ConcurrentChangeError here, or DeadlockDetected in the block above
    assert files(fs, "p/u")["p/u/x.txt"] == "new"
