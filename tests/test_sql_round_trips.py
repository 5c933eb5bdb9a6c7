"""Round trips and statements per operation on PostgreSQL (counts, not times: the speed itself is in bench/).

The count comes from the wire: libpq's protocol trace of the connection the operation uses, where every
``Sync`` (extended protocol) or ``Query`` (simple protocol) sent is one wait for the server.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from workspacefs import Quota, SqlFilesystem, SqlStore
from workspacefs.backends.sql._driver import _hung_up


@dataclass
class Wire:
    round_trips: int
    statements: int


@pytest.fixture(scope="module")
def pg_store(postgres_url: str) -> Iterator[SqlStore]:
    store = SqlStore(postgres_url)
    yield store
    store.close()


def on_the_wire(store: SqlStore, operation: Callable[[], Any], *, transaction: bool = False) -> Wire:
    """Run ``operation`` on a traced connection (the driver's pool hands back the one just returned):
    a pipelined one for a ``transaction``, else a plain one (single statements)."""
    driver = store.driver
    driver.close()
    held = driver._checkout(pipelined=transaction)
    with tempfile.TemporaryDirectory() as scratch:
        trace = Path(scratch) / "trace"
        with open(trace, "w") as sink:
            held[0].pgconn.trace(sink.fileno())
            driver._checkin(held)
            operation()
            held[0].pgconn.untrace()
        messages = [line.split("\t")[3].split(" ")[0] for line in trace.read_text().splitlines() if "\tF\t" in line]
    assert driver._checkout(pipelined=transaction) is held  # the operation used (and returned) the traced one
    driver._checkin(held)
    return Wire(
        round_trips=sum(1 for m in messages if m in ("Sync", "Query")),
        statements=sum(1 for m in messages if m in ("Execute", "Query")),
    )


def test_a_small_write_is_two_round_trips_in_one_transaction(pg_store: SqlStore) -> None:
    fs = SqlFilesystem(pg_store, "round-trips-write")
    fs.write_bytes("dir/a.txt", b"first")
    new = on_the_wire(pg_store, lambda: fs.write_bytes("dir/b.txt", b"a new file"), transaction=True)
    overwrite = on_the_wire(
        pg_store, lambda: fs.write_bytes("dir/a.txt", b"replaced, the old content collected"), transaction=True
    )
    assert new.round_trips == 2 and overwrite.round_trips == 2
    # BEGIN and one statement that stores the content and locks the rows; the file row, its journal row, COMMIT
    assert new.statements == 5
    assert overwrite.statements == 5 + 1  # and, after the COMMIT, the collection of the replaced content
    assert fs.read_bytes("dir/a.txt").content == b"replaced, the old content collected"


def test_a_quota_costs_a_small_write_one_statement_and_no_round_trip(pg_store: SqlStore) -> None:
    """The quota is checked again inside the write's transaction (concurrent writers all pass the check before
    it): one indexed single-row read of the session's usage, in the batch of the COMMIT (it fails past a limit).
    Its check before the transaction, on its own connection, is not traced here."""
    fs = SqlFilesystem(pg_store, "round-trips-quota", quota=Quota(max_bytes=10**9))
    fs.write_bytes("dir/a.txt", b"first")
    new = on_the_wire(pg_store, lambda: fs.write_bytes("dir/b.txt", b"a new file"), transaction=True)
    assert (new.round_trips, new.statements) == (2, 5 + 1)
    shrinking = on_the_wire(pg_store, lambda: fs.write_bytes("dir/b.txt", b"less"), transaction=True)
    assert (shrinking.round_trips, shrinking.statements) == (2, 5 + 1)  # nothing grew: nothing to check again


def test_reads_stats_and_listings_are_one_round_trip(pg_store: SqlStore) -> None:
    fs = SqlFilesystem(pg_store, "round-trips-read")
    fs.write_bytes("dir/a.txt", b"alpha")

    def versioned() -> None:
        fs.open_versioned("dir/a.txt").reader.close()

    for operation in (
        lambda: fs.read_bytes("dir/a.txt"),
        lambda: fs.read("dir/a.txt"),
        lambda: fs.stat("dir/a.txt"),
        lambda: fs.list("dir"),
        lambda: fs.list_stats("dir"),
        versioned,
    ):
        assert on_the_wire(pg_store, operation) == Wire(round_trips=1, statements=1)


def test_a_failed_write_leaves_the_connection_usable(pg_store: SqlStore) -> None:
    fs = SqlFilesystem(pg_store, "round-trips-errors")
    fs.write_bytes("file", b"x")
    with pytest.raises(NotADirectoryError):
        fs.write_bytes("file/under", b"y")
    with pytest.raises(FileExistsError):
        fs.write_bytes("file", b"z", mode="create")
    with pytest.raises(FileNotFoundError):
        fs.write_bytes("missing/x", b"y", create_parents=False)
    assert fs.read_bytes("file").content == b"x"
    assert on_the_wire(pg_store, lambda: fs.write_bytes("file", b"w"), transaction=True).round_trips == 2


def test_the_trace_counts_what_the_server_sees(postgres_url: str) -> None:
    """The wire count is honest: a no-op statement is one round trip and one statement."""
    store = SqlStore(postgres_url)
    try:

        def select_one() -> None:
            with store.driver.statement() as tx:
                tx.run("SELECT 1")

        assert on_the_wire(store, select_one) == Wire(round_trips=1, statements=1)
    finally:
        store.close()


def test_connections_the_server_closed_are_replaced_not_failed(pg_store: SqlStore) -> None:
    fs = SqlFilesystem(pg_store, "round-trips-restart")
    fs.write_bytes("a.txt", b"before")
    idle = [held[0].info.backend_pid for kind in (False, True) for held in pg_store.driver._idle[kind]]
    assert idle
    with pg_store.engine.connect() as connection:  # as a server restart or an idle timeout would
        for pid in idle:
            connection.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)}, 5000)")  # waits for the exit
    for _ in range(500):  # the precondition: the backends' sockets are closed (the kernel does it at exit)
        if all(_hung_up(held[0]) for kind in (False, True) for held in pg_store.driver._idle[kind]):
            break
        time.sleep(0.01)
    assert fs.read_bytes("a.txt").content == b"before"
    fs.write_bytes("a.txt", b"after")
    assert fs.read_bytes("a.txt").content == b"after"
