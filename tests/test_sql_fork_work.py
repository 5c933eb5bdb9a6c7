"""What ``fork()`` costs on the SQL backends, counted (issue 15), and SQLite's foreign keys around it.

A fork copies the session's file rows set-based: the statements it issues do not grow with the files (counted
with SQLAlchemy's ``before_cursor_execute``). On SQLite the copy runs with foreign key checks off (its rows are
copies of valid rows): the virtual machine's instructions per copied file drop from about 129 to about 105
(counted with a progress handler called on every one), and the checks are on again for every later writer, also
after a fork that failed halfway (its connection is discarded).
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql._schema import session_files
from workspacefs.testing._sql_rows import fill_session

SMALL, LARGE = 200, 2_000
STEPS_PER_FILE = 117
"""SQLite instructions per copied file: about 105 without foreign key checks, about 129 with them."""


def _is_copy(statement: str) -> bool:
    return statement.startswith("INSERT INTO wsfs_files") and "SELECT" in statement


class Watch:
    """Counts a store's statements (and on SQLite its instructions) and, at the fork's copy, SQLite's
    foreign key setting; ``fail`` makes the copy raise there, like a full disk."""

    def __init__(self, store: SqlStore) -> None:
        self.statements = self.steps = 0
        self.keys_at_copy: list[int] = []
        self.keys_checked_in: list[int] = []
        self.fail = False
        self.failed: Any = None
        self.store = store
        event.listen(store.engine, "before_cursor_execute", self._before)
        event.listen(store.engine, "checkin", self._checkin)
        if store.dialect == "sqlite":
            event.listen(store.engine, "checkout", self._checkout)

    def _step(self) -> int:
        self.steps += 1
        return 0

    def _checkout(self, dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        dbapi_connection.set_progress_handler(self._step, 1)

    def _checkin(self, dbapi_connection: Any, _record: Any) -> None:
        if dbapi_connection is not None and self.store.dialect == "sqlite":
            assert dbapi_connection is not self.failed, "a connection whose fork failed went back to the pool"
            self.keys_checked_in.append(dbapi_connection.execute("PRAGMA foreign_keys").fetchone()[0])

    def _before(self, connection: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.statements += 1
        if not _is_copy(statement) or self.store.dialect != "sqlite":
            return
        raw = connection.connection.driver_connection
        self.keys_at_copy.append(raw.execute("PRAGMA foreign_keys").fetchone()[0])
        if self.fail:
            self.failed = raw
            raise RuntimeError("disk full")


@pytest.fixture
def sqlite_store() -> Iterator[SqlStore]:
    """A store on a fresh SQLite file (the backend whose fork turns foreign keys off)."""
    opened = SqlStore(f"sqlite:///{tempfile.mkdtemp()}/fork.db")
    yield opened
    opened.close()


def _filled(store: SqlStore, files: int) -> SqlFilesystem:
    fs = SqlFilesystem(store, f"work-{uuid.uuid4().hex[:8]}")
    fill_session(store, fs.session_id, files)
    return fs


def _assert_checks_on(store: SqlStore) -> None:
    """A later writer still gets foreign key checks: a file row of no session is refused."""
    now = datetime.now(UTC)
    row = {"session_id": "no-such-session", "path": "x", "parent": "", "name": "x", "is_directory": True}
    stamp = {"is_readonly": False, "size_bytes": 0, "created_at": now, "updated_at": now}
    with pytest.raises(IntegrityError), store.write() as connection:
        connection.execute(sa.insert(session_files).values(**row, **stamp))


def test_a_fork_issues_the_same_statements_whatever_the_files(store: SqlStore) -> None:
    small, large = _filled(store, SMALL), _filled(store, LARGE)
    watch = Watch(store)
    counted = []
    for fs, files in ((small, SMALL), (large, LARGE)):
        watch.statements = watch.steps = 0
        fork = fs.fork()
        counted.append(watch.statements)
        assert fork.exists(f"d{(files - 1) // 1000}/f{files - 1}")
        if store.dialect == "sqlite":
            assert watch.steps / files < STEPS_PER_FILE
    assert counted[0] == counted[1]


def test_a_sqlite_fork_copies_without_foreign_key_checks_and_turns_them_on_again(sqlite_store: SqlStore) -> None:
    fs = _filled(sqlite_store, SMALL)
    watch = Watch(sqlite_store)

    fork = fs.fork()

    assert watch.keys_at_copy == [0]
    assert fork.read_bytes("d0/f7").content == b"file"
    assert watch.keys_checked_in and set(watch.keys_checked_in) == {1}
    _assert_checks_on(sqlite_store)


def test_a_failing_sqlite_fork_discards_its_connection(sqlite_store: SqlStore) -> None:
    fs = _filled(sqlite_store, SMALL)
    watch = Watch(sqlite_store)
    watch.fail = True

    with pytest.raises(RuntimeError, match="disk full"):
        fs.fork(session_id="failed-fork")

    assert watch.keys_at_copy == [0]
    assert sqlite_store.session("failed-fork") is None
    watch.fail = False
    for _ in range(3):  # the pool's connections, whichever comes next, check foreign keys
        _assert_checks_on(sqlite_store)
    assert set(watch.keys_checked_in) == {1}
    assert fs.fork(session_id="failed-fork").exists("d0/f7")
