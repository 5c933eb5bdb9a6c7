"""When a hot PostgreSQL statement polls for its answer before sleeping (``_poll``), on a real server.

What is checked is the decision (which call polls, and for how long) and that the answer is the same either way:
the time it saves is in ``bench/`` (``bench_pg_floor.py``, ``bench_targets.py``), never asserted here. Each test sets
the statement's recent round trips itself, so the decision does not depend on how busy the machine is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql import _driver
from workspacefs.backends.sql._poll import POLL_NS, Turnaround, poll


@pytest.fixture(scope="module")
def pg_store(postgres_url: str) -> Iterator[SqlStore]:
    store = SqlStore(postgres_url)
    yield store
    store.close()


@pytest.fixture
def polls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The budgets (ns) the driver polls with, recorded around the real :func:`poll`."""
    budgets: list[int] = []

    def recorded(pgconn: Any, deadline: int) -> None:
        budgets.append(deadline - time.perf_counter_ns())
        poll(pgconn, deadline)

    monkeypatch.setattr(_driver, "poll", recorded)
    return budgets


def _statement(store: SqlStore, sql: str, params: tuple[Any, ...]) -> _driver.Prepared:
    store.driver.fetch_row(sql, params)  # made on first use
    return store.driver._statements[sql]


def test_the_budget_follows_the_recent_round_trips() -> None:
    turnaround = Turnaround()
    assert turnaround.budget(1) == 0  # nothing measured yet: sleep and measure
    for _ in range(60):
        turnaround.observe(30_000)
    assert 30_000 <= turnaround.average < 32_000
    assert turnaround.budget(1) == 2 * turnaround.average
    assert turnaround.budget(2) == 0  # another statement of the process in flight: no polling
    turnaround.observe(300_000)  # one slow answer (a busy moment): still polls, for no longer than the limit
    assert 0 < turnaround.budget(1) <= POLL_NS
    for _ in range(30):
        turnaround.observe(400_000)  # a run of slow ones (a write, a remote server, a busy machine): stops
    assert turnaround.budget(1) == 0
    for _ in range(60):
        turnaround.observe(20_000)  # the sleeping calls still measure, so fast answers bring it back
    assert turnaround.budget(1) > 0


def test_a_lone_quick_statement_polls_and_answers_the_same(pg_store: SqlStore, polls: list[int]) -> None:
    sql = "SELECT %s::int + 1, %s::text"
    statement = _statement(pg_store, sql, (0, ""))
    for i in range(8):  # unnamed, prepared, then prepared runs (prepare_threshold 5)
        statement.turnaround.average = 20_000
        assert pg_store.driver.fetch_row(sql, (i, f"row {i}")) == (i + 1, f"row {i}")
    assert len(polls) == 8
    assert all(0 < budget <= 40_000 for budget in polls)


def test_a_slow_statement_sleeps(pg_store: SqlStore, polls: list[int]) -> None:
    sql = "SELECT %s::int * 2"
    statement = _statement(pg_store, sql, (0,))
    statement.turnaround.average = POLL_NS
    assert pg_store.driver.fetch_row(sql, (21,)) == (42,)
    assert polls == []


def test_an_answer_later_than_the_budget_is_waited_for(pg_store: SqlStore, polls: list[int]) -> None:
    """The poll gives up at its deadline and the call sleeps as usual; the slow round trip raises the average."""
    sql = "SELECT pg_sleep(0.05)::text, %s::int"
    statement = _statement(pg_store, sql, (0,))
    statement.turnaround.average = 10_000
    assert pg_store.driver.fetch_row(sql, (5,)) == ("", 5)
    assert len(polls) == 1
    assert statement.turnaround.average > 10_000 + 40_000_000 // 8


def test_statements_running_side_by_side_do_not_poll(pg_store: SqlStore, polls: list[int]) -> None:
    """While one thread's statement is in flight, another's sleeps: polling threads would take each other's cores."""
    slow = "SELECT pg_sleep(0.5)::text, %s::int"
    quick = "SELECT %s::int + 100"
    statement = _statement(pg_store, quick, (0,))
    polls.clear()
    slow_done = threading.Event()

    def run_slow() -> None:
        try:
            pg_store.driver.fetch_row(slow, (1,))
        finally:
            slow_done.set()

    worker = threading.Thread(target=run_slow)
    worker.start()
    try:
        while pg_store.driver._running == 0 and not slow_done.is_set():
            time.sleep(0.001)
        statement.turnaround.average = 20_000
        assert pg_store.driver.fetch_row(quick, (1,)) == (101,)
        alongside = slow_done.is_set()
    finally:
        worker.join()
    assert not alongside, "the slow statement ended before the quick one ran: nothing was in flight beside it"
    assert polls == []  # neither: the slow one is new, so it has no quick round trips behind it


def test_a_filesystem_reads_and_writes_the_same_when_polling(pg_store: SqlStore) -> None:
    """Every hot statement of a filesystem polling from its first call: the files read back as written."""
    fs = SqlFilesystem(pg_store, "polling")
    for i in range(12):
        for statement in pg_store.driver._statements.values():
            statement.turnaround.average = 20_000
        fs.write_bytes(f"d/f{i % 3}.txt", f"content {i}".encode())
        assert fs.read_bytes(f"d/f{i % 3}.txt").content == f"content {i}".encode()
        assert fs.stat(f"d/f{i % 3}.txt").size_bytes == len(f"content {i}")
