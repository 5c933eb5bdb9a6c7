"""Round trips and statements per operation on PostgreSQL (counts, not times: the speed itself is in bench/).

The count comes from the wire: libpq's protocol trace of the connection the operation uses, where every
``Sync`` (extended protocol) or ``Query`` (simple protocol) sent is one wait for the server.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from workspacefs import Quota, SqlFilesystem, SqlStore
from workspacefs.backends.sql._driver import _hung_up


@dataclass
class Wire:
    round_trips: int
    statements: int
    text: str = field(default="", compare=False)
    """What the client sent, as libpq traced it (statement texts included)."""


@pytest.fixture(scope="module")
def pg_store(postgres_url: str) -> Iterator[SqlStore]:
    store = SqlStore(postgres_url)
    yield store
    store.close()


def on_the_wire(store: SqlStore, operation: Callable[[], Any]) -> Wire:
    """Run ``operation`` on traced connections (the driver's pool hands back the ones just returned): a plain one
    (single statements) and a pipelined one (transactions and batches); their messages are counted together."""
    driver = store.driver
    driver.close()
    held = [driver._checkout(pipelined=False), driver._checkout(pipelined=True)]
    with tempfile.TemporaryDirectory() as scratch:
        traces = [Path(scratch) / "plain", Path(scratch) / "pipelined"]
        with open(traces[0], "w") as plain, open(traces[1], "w") as pipelined:
            for connection, sink in zip(held, (plain, pipelined), strict=True):
                connection[0].pgconn.trace(sink.fileno())
                driver._checkin(connection)
            operation()
            for connection in held:
                connection[0].pgconn.untrace()
        sent = [line for trace in traces for line in trace.read_text().splitlines() if "\tF\t" in line]
        messages = [line.split("\t")[3].split(" ")[0] for line in sent]
    # the operation used (and returned) the traced connections
    assert [driver._checkout(pipelined=False), driver._checkout(pipelined=True)] == held
    for connection in held:
        driver._checkin(connection)
    return Wire(
        round_trips=sum(1 for m in messages if m in ("Sync", "Query")),
        statements=sum(1 for m in messages if m in ("Execute", "Query")),
        text="\n".join(sent),
    )


def test_a_small_write_is_one_round_trip_and_one_transaction(pg_store: SqlStore) -> None:
    fs = SqlFilesystem(pg_store, "round-trips-write")
    fs.write_bytes("dir/a.txt", b"first")
    new = on_the_wire(pg_store, lambda: fs.write_bytes("dir/b.txt", b"a new file"))
    overwrite = on_the_wire(pg_store, lambda: fs.write_bytes("dir/a.txt", b"replaced, the old content journaled"))
    # one call of wsfs_write_small: the checks, the content, the file row and its journal row, in its transaction;
    # the journal row keeps the replaced content, so there is nothing to collect
    assert new == Wire(round_trips=1, statements=1)
    assert overwrite == Wire(round_trips=1, statements=1)
    assert fs.read_bytes("dir/a.txt").content == b"replaced, the old content journaled"
    assert any(c.before is not None for e in fs.history(path="dir/a.txt") for c in e.changes)


def test_without_history_an_overwrite_collects_in_a_second_round_trip(postgres_url: str) -> None:
    store = SqlStore(postgres_url, history=False)
    try:
        fs = SqlFilesystem(store, "round-trips-no-history")
        fs.write_bytes("a.txt", b"first")
        before = store.content_stats()["blobs"]
        new = on_the_wire(store, lambda: fs.write_bytes("b.txt", b"a new file"))
        overwrite = on_the_wire(store, lambda: fs.write_bytes("a.txt", b"replaced, the old content collected"))
        assert new == Wire(round_trips=1, statements=1)
        assert overwrite == Wire(round_trips=2, statements=2)  # the call, then the collection on its own
        assert store.content_stats()["blobs"] == before + 1  # b.txt's content came, a.txt's first went
        assert fs.read_bytes("a.txt").content == b"replaced, the old content collected"
    finally:
        store.close()


def test_a_quota_costs_a_small_write_one_statement_and_no_round_trip(pg_store: SqlStore) -> None:
    """The quota is checked again inside the write's transaction (concurrent writers all pass the check before
    it): ``wsfs_write_small`` reads the session's usage row after its changes, given the limits (it fails past
    one the write grew toward): no statement and no round trip more than the check before it (the file's size,
    then the usage row where the write grows; the early, clear error)."""
    fs = SqlFilesystem(pg_store, "round-trips-quota", quota=Quota(max_bytes=10**9))
    fs.write_bytes("dir/a.txt", b"first")
    new = on_the_wire(pg_store, lambda: fs.write_bytes("dir/b.txt", b"a new file"))
    assert (new.round_trips, new.statements) == (2 + 1, 2 + 1)
    shrinking = on_the_wire(pg_store, lambda: fs.write_bytes("dir/b.txt", b"less"))
    assert (shrinking.round_trips, shrinking.statements) == (1 + 1, 1 + 1)  # nothing grew: no usage read before


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


def test_a_small_read_does_not_look_for_chunks(pg_store: SqlStore) -> None:
    """Inline content needs the file's row and its blob row: the chunk tables, which cost a quarter of a small read
    although they hold nothing for it, are not joined (content in chunks takes a second statement), and only the
    three columns a read uses are fetched (about 2 µs of server and 3 µs of client time less)."""
    fs = SqlFilesystem(pg_store, "round-trips-read-inline")
    fs.write_bytes("a.txt", b"alpha")
    fs.write_bytes("big.bin", b"b" * (256 * 1024 + 1))
    small = on_the_wire(pg_store, lambda: fs.read_bytes("a.txt"))
    assert small == Wire(round_trips=1, statements=1)
    assert "wsfs_blobs" in small.text and "wsfs_blob_chunks" not in small.text and "wsfs_chunks" not in small.text
    # nor does it ask for what it does not use: the file's path, flag, content id and times (READ_CONTENT)
    assert "SELECT f.is_directory, f.size_bytes, b.data FROM" in small.text and "created_at" not in small.text
    assert on_the_wire(pg_store, lambda: fs.read_bytes("big.bin")) == Wire(round_trips=2, statements=2)
    assert fs.read_bytes("big.bin").content == b"b" * (256 * 1024 + 1)


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
    assert on_the_wire(pg_store, lambda: fs.write_bytes("file", b"w")).round_trips == 1


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
