"""The client's own work per hot operation on PostgreSQL (counts, not times: the speed itself is in bench/).

A psycopg cursor's Python code (query conversion, prepare bookkeeping, the execute generators) cost a small write
more CPU than the rest of the client: the hot single statements run on libpq with psycopg's C adapters instead.
The count is of the Python functions of psycopg's cursor and query modules the operation calls (a profile hook);
each operation also runs past psycopg's ``prepare_threshold``, so its statement runs unnamed, is prepared, then runs
prepared, and must answer the same all along.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

from workspacefs import Quota, SqlFilesystem, SqlStore

_CURSOR_CODE = ("/psycopg/cursor.py", "/psycopg/_cursor_base.py", "/psycopg/_queries.py", "/psycopg/_preparing.py")


@pytest.fixture(scope="module")
def pg_store(postgres_url: str) -> Iterator[SqlStore]:
    store = SqlStore(postgres_url)
    yield store
    store.close()


def cursor_calls(operation: Callable[[], Any]) -> int:
    """How many calls of psycopg's cursor and query code ``operation`` makes."""
    calls = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_filename.replace("\\", "/").endswith(_CURSOR_CODE):
            calls += 1

    sys.setprofile(hook)
    try:
        operation()
    finally:
        sys.setprofile(None)
    return calls


def test_small_writes_reads_and_stats_run_no_cursor_code(pg_store: SqlStore) -> None:
    fs = SqlFilesystem(pg_store, "client-work", quota=Quota(max_bytes=10**9))
    fs.write_bytes("dir/a.txt", b"first")
    for _ in range(7):  # run unnamed, then prepared (psycopg's prepare_threshold: 5)
        fs.write_bytes("dir/a.txt", b"again")
        fs.read_bytes("dir/a.txt")
        fs.stat("dir/a.txt")
    assert cursor_calls(lambda: fs.write_bytes("dir/a.txt", b"a growing write, checked against the quota")) == 0
    assert cursor_calls(lambda: fs.write_bytes("dir/b.txt", b"a new file")) == 0
    assert cursor_calls(lambda: fs.read_bytes("dir/a.txt")) == 0
    assert cursor_calls(lambda: fs.stat("dir/a.txt")) == 0
    assert cursor_calls(lambda: fs.open_versioned("dir/a.txt").reader.close()) == 0  # noqa: PLW0108 - opened inside
    assert fs.read_bytes("dir/a.txt").content == b"a growing write, checked against the quota"
    assert fs.read_bytes("dir/b.txt").content == b"a new file"


def test_errors_keep_their_types_and_the_connection(pg_store: SqlStore) -> None:
    """A refused write or read raises what it raised through a cursor, without cursor code either (a server error
    by its SQLSTATE: a foreign key's, of a deleted session), and the connection stays usable."""
    fs = SqlFilesystem(pg_store, "client-errors", quota=Quota(max_bytes=100))
    fs.write_bytes("a.txt", b"x" * 60)
    refused: list[tuple[type[Exception], Callable[[], Any]]] = [
        (FileExistsError, lambda: fs.write_bytes("a.txt", b"y", mode="create")),
        (IsADirectoryError, lambda: fs.read_bytes(".")),
        (FileNotFoundError, lambda: fs.read_bytes("missing.txt")),
        (OSError, lambda: fs.write_bytes("b.txt", b"z" * 60)),  # past the quota
    ]
    for _ in range(7):  # unnamed, preparing, prepared
        for error, operation in refused:

            def failing(error: type[Exception] = error, operation: Callable[[], Any] = operation) -> None:
                with pytest.raises(error):
                    operation()

            assert cursor_calls(failing) == 0
        with pytest.raises(NotADirectoryError):  # the call says the parent is missing: SQLAlchemy tells why
            fs.write_bytes("a.txt/under", b"y")
    fs.write_bytes("a.txt", b"fits")
    assert fs.read_bytes("a.txt").content == b"fits"
    driver = pg_store.driver
    held = driver._checkout(pipelined=False)
    held[0].execute("DEALLOCATE ALL")  # what psycopg sends after a ROLLBACK it saw: the prepared statements go
    driver._checkin(held)
    assert cursor_calls(lambda: fs.write_bytes("a.txt", b"again")) == 0  # prepared again, then run
    assert driver._checkout(pipelined=False) is held
    driver._checkin(held)
    assert fs.read_bytes("a.txt").content == b"again"
    gone = SqlFilesystem(pg_store, "client-gone")
    gone.write_bytes("a.txt", b"x")
    gone.write_bytes("a.txt", b"y")
    pg_store.delete_session("client-gone")
    for _ in range(7):
        with pytest.raises(FileNotFoundError):  # the call's foreign key refused it (23503)
            gone.write_bytes("a.txt", b"z")
    assert fs.read_bytes("a.txt").content == b"again"
