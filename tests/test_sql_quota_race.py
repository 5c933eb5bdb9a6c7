"""Two stores on one SQL session (two processes, as far as the database can tell) racing for its quota.

The check before a change reads the session's usage, and a writer of another store can commit between that
check and the change: each growing change checks again inside its own transaction, after its statements.
Here one writer stops right after its check passed (a hook of a test subclass; the database and both stores are
real) while the other commits; then the first must be refused, and nothing of it may land.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from workspacefs import FileStat, Quota, QuotaExceededError, SqlFilesystem, SqlStore, Usage
from workspacefs.testing._base import HANG_BUDGET_SECONDS
from workspacefs.testing._postgres import create_database

_ids = itertools.count()
BIG = 400_000
"""More than one chunk: written through the chunked path, not the small write's."""


class PausingFilesystem(SqlFilesystem):
    """Stops once, after its next quota check of a growing change passed, until the test lets it go on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.armed = False
        self.checked = threading.Event()
        self.go_on = threading.Event()

    def _check(
        self, path: str, *, bytes_delta: int, files_delta: int, largest: int = 0, usage: Usage | None = None
    ) -> None:
        super()._check(path, bytes_delta=bytes_delta, files_delta=files_delta, largest=largest, usage=usage)
        if self.armed and usage is None and (bytes_delta > 0 or files_delta > 0):  # not a stream's chunk
            self.armed = False
            self.checked.set()
            assert self.go_on.wait(HANG_BUDGET_SECONDS)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    """A database of its own."""
    if request.param == "sqlite":
        return f"sqlite:///{fast_tmp / f'quota-race-{next(_ids)}.db'}"
    return create_database(request.getfixturevalue("postgres_url"), f"wsfs_quota_race_{os.getpid()}_{next(_ids)}")


@pytest.fixture
def stores(url: str) -> Iterator[tuple[SqlStore, SqlStore]]:
    first, second = SqlStore(url), SqlStore(url)
    yield first, second
    first.close()
    second.close()


def race(
    slow: PausingFilesystem, change: Callable[[], object], meanwhile: Callable[[], object]
) -> BaseException | None:
    """Run ``change`` on ``slow`` and, while it waits after its check, ``meanwhile``; what ``change`` raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            change()
        except QuotaExceededError as exc:
            raised.append(exc)

    slow.armed = True
    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert slow.checked.wait(HANG_BUDGET_SECONDS), "the change never reached its check"
        meanwhile()
    finally:
        slow.go_on.set()
        thread.join(HANG_BUDGET_SECONDS)
    assert not thread.is_alive()
    return raised[0] if raised else None


def pair(stores: tuple[SqlStore, SqlStore], quota: Quota) -> tuple[PausingFilesystem, SqlFilesystem]:
    """The slow writer and, on the other store, a writer of the same session."""
    session = f"race-{next(_ids)}"
    return PausingFilesystem(stores[0], session, quota=quota), SqlFilesystem(stores[1], session, quota=quota)


def stream(fs: SqlFilesystem, path: str, data: bytes) -> None:
    with fs.open_write(path) as writer:
        writer.write(data)


def test_a_small_write_checked_before_another_commits_is_refused(stores: tuple[SqlStore, SqlStore]) -> None:
    slow, other = pair(stores, Quota(max_bytes=100))
    refused = race(slow, lambda: slow.write_bytes("a.bin", b"a" * 60), lambda: other.write_bytes("b.bin", b"b" * 60))
    assert isinstance(refused, QuotaExceededError)
    assert not slow.exists("a.bin") and slow.usage() == Usage(60, 1)
    slow.write_bytes("c.bin", b"c" * 40)  # the session is usable, and exactly full is allowed
    assert other.usage() == Usage(100, 2)


def test_the_file_count_is_checked_in_the_transaction_too(stores: tuple[SqlStore, SqlStore]) -> None:
    slow, other = pair(stores, Quota(max_files=1))
    refused = race(slow, lambda: slow.write_bytes("a.txt", b"a"), lambda: other.write_bytes("b.txt", b"b"))
    assert isinstance(refused, QuotaExceededError)
    assert not slow.exists("a.txt") and slow.usage() == Usage(1, 1)


@pytest.mark.parametrize(
    "how",
    ["big write", "stream", "append", "conditional write", "create", "copy", "copy of a tree"],
)
def test_every_growing_path_is_checked_again_in_its_transaction(stores: tuple[SqlStore, SqlStore], how: str) -> None:
    big = how == "big write"
    slow, other = pair(stores, Quota(max_bytes=3 * BIG if big else 100))
    slow.write_bytes("seed/s.bin", b"s" * 30)
    before: dict[str, FileStat] = {e.path: slow.stat(e.path) for e in slow.walk()}
    changes: dict[str, Callable[[], object]] = {
        "big write": lambda: slow.write_bytes("new.bin", b"n" * 2 * BIG),
        "stream": lambda: stream(slow, "new.bin", b"n" * 50),
        "append": lambda: slow.write_bytes("seed/s.bin", b"+" * 40, mode="append"),
        "conditional write": lambda: slow.write_bytes_if("seed/s.bin", b"c" * 70, expect=slow.content_id("seed/s.bin")),
        "create": lambda: slow.create_bytes("new.bin", b"n" * 50),
        "copy": lambda: slow.copy("seed/s.bin", "new.bin"),
        "copy of a tree": lambda: slow.copy("seed", "new"),
    }
    filler = b"o" * (BIG if big else 50)
    refused = race(slow, changes[how], lambda: other.write_bytes("other.bin", filler))
    assert isinstance(refused, QuotaExceededError), how
    after = {e.path: slow.stat(e.path) for e in slow.walk() if e.path != "other.bin"}
    assert after == before  # nothing of the refused change landed
    assert slow.read_bytes("seed/s.bin").content == b"s" * 30
    assert slow.usage() == Usage(30 + len(filler), 2)


class PausingInside(SqlFilesystem):
    """Stops once inside a write transaction, right after locking and checking the file's row (before it changes
    anything), until the test lets it go on: at the ``calls``-th row check from now (a stream checks the row
    when it opens, in a read transaction, then again in its commit's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.checked = threading.Event()
        self.go_on = threading.Event()

    def _check_writable_file(self, row: Any, path: str, mode: Any, *, unlocking: bool = False) -> None:
        super()._check_writable_file(row, path, mode, unlocking=unlocking)
        if self.calls:
            self.calls -= 1
            if not self.calls:
                self.checked.set()
                assert self.go_on.wait(HANG_BUDGET_SECONDS)


@pytest.mark.parametrize("how", ["big write", "stream", "copy"])
def test_on_postgres_a_writer_held_inside_its_transaction_is_refused(postgres_url: str, how: str) -> None:
    """PostgreSQL lets another writer commit while this one's transaction is open (SQLite holds the database):
    the row read after this one's statements counts the other's change."""
    url = create_database(postgres_url, f"wsfs_quota_inside_{os.getpid()}_{next(_ids)}")
    first, second = SqlStore(url), SqlStore(url)
    try:
        big = how == "big write"
        quota = Quota(max_bytes=3 * BIG if big else 100)
        slow, other = PausingInside(first, "held", quota=quota), SqlFilesystem(second, "held", quota=quota)
        slow.write_bytes("seed.bin", b"s" * 30)
        changes: dict[str, Callable[[], object]] = {
            "big write": lambda: slow.write_bytes("new.bin", b"n" * 2 * BIG),
            "stream": lambda: stream(slow, "new.bin", b"n" * 50),
            "copy": lambda: slow.copy("seed.bin", "new.bin"),
        }
        filler = b"o" * (BIG if big else 50)
        raised: list[BaseException] = []

        def run() -> None:
            try:
                changes[how]()
            except QuotaExceededError as exc:
                raised.append(exc)

        slow.calls = 2 if how == "stream" else 1
        thread = threading.Thread(target=run)
        thread.start()
        try:
            assert slow.checked.wait(HANG_BUDGET_SECONDS), "the change never reached its transaction"
            other.write_bytes("other.bin", filler)  # commits while the slow writer's transaction is open
        finally:
            slow.go_on.set()
            thread.join(HANG_BUDGET_SECONDS)
        assert len(raised) == 1 and isinstance(raised[0], QuotaExceededError), how
        assert not slow.exists("new.bin") and slow.usage() == Usage(30 + len(filler), 2)
    finally:
        first.close()
        second.close()


class PausingAfterChanges(SqlFilesystem):
    """Stops inside its write transaction after its statements (the usage row updated and locked by its trigger),
    before its own check and commit, until the test lets it go on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.changed = threading.Event()
        self.go_on = threading.Event()

    def _hold_to_quota(self, connection: Any, path: str, grew: Usage) -> None:
        self.changed.set()
        assert self.go_on.wait(HANG_BUDGET_SECONDS)
        super()._hold_to_quota(connection, path, grew)


def test_on_postgres_a_small_write_waits_for_a_writer_inside_its_transaction_and_is_refused(postgres_url: str) -> None:
    """The small write is one call of ``wsfs_write_small`` (no point between its statements to stop at): it passes
    the check before it while another writer's transaction is open, waits in its own for that writer's lock on the
    usage row, and then finds both writes in it: refused, nothing of it written."""
    url = create_database(postgres_url, f"wsfs_quota_small_{os.getpid()}_{next(_ids)}")
    first, second, watcher = SqlStore(url), SqlStore(url), SqlStore(url)
    try:
        quota = Quota(max_bytes=30 + BIG + 20)
        holder = PausingAfterChanges(second, "held", quota=quota)
        small = SqlFilesystem(first, "held", quota=quota)
        small.write_bytes("seed.bin", b"s" * 30)
        raised: list[BaseException] = []

        def run(work: Callable[[], object]) -> threading.Thread:
            def guarded() -> None:
                try:
                    work()
                except QuotaExceededError as exc:
                    raised.append(exc)

            thread = threading.Thread(target=guarded)
            thread.start()
            return thread

        holding = run(lambda: holder.write_bytes("big.bin", b"b" * BIG))
        waiting: threading.Thread | None = None
        try:
            assert holder.changed.wait(HANG_BUDGET_SECONDS), "the big write never reached its check"
            waiting = run(lambda: small.write_bytes("new.bin", b"n" * 50))  # passes its check: 80 bytes so far
            blocked = (
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND position('wsfs_write_small' in query) > 0"
            )
            for _ in range(int(HANG_BUDGET_SECONDS * 100)):  # until the call waits for the holder's row lock
                with watcher.engine.connect() as connection:
                    if connection.exec_driver_sql(blocked).scalar():
                        break
                threading.Event().wait(0.01)
            else:
                pytest.fail("the small write never waited for the other writer's transaction")
        finally:
            holder.go_on.set()
            holding.join(HANG_BUDGET_SECONDS)
            if waiting is not None:
                waiting.join(HANG_BUDGET_SECONDS)
        assert len(raised) == 1 and "new.bin" in str(raised[0])
        assert not small.exists("new.bin") and small.usage() == Usage(30 + BIG, 2)
    finally:
        for store in (first, second, watcher):
            store.close()


class UncheckedBefore(SqlFilesystem):
    """Skips the check before each change, so only the one inside the transaction can refuse it."""

    def _check(
        self, path: str, *, bytes_delta: int, files_delta: int, largest: int = 0, usage: Usage | None = None
    ) -> None:
        return


def test_refusals_in_the_transaction_leave_the_store_usable(stores: tuple[SqlStore, SqlStore]) -> None:
    """Many refusals in a row, each followed by ordinary writes on the same connections: on PostgreSQL a refused
    write's batch fails at the COMMIT, and a connection reused after that once named prepared statements the
    server no longer had (psycopg prepares a statement after five runs)."""
    fs = UncheckedBefore(stores[0], "refused", quota=Quota(max_bytes=100))
    filler = SqlFilesystem(stores[0], "refused")
    fs.write_bytes("a.bin", b"a" * 10)
    assert fs.usage() == Usage(10, 1)  # the usage row is made when first asked for (the skipped check asks)
    for index in range(12):
        filler.write_bytes("fill.bin", b"f" * 85)
        with pytest.raises(QuotaExceededError):
            fs.write_bytes(f"new-{index}.bin", b"n" * 10)
        filler.delete("fill.bin")
        fs.write_bytes(f"kept-{index % 3}.bin", b"k")
    assert fs.usage() == Usage(13, 4) and not any(fs.exists(f"new-{index}.bin") for index in range(12))
