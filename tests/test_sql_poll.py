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
from workspacefs.backends.sql._poll import POLL_NS, QUIET, Turnaround, poll


@pytest.fixture(scope="module")
def pg_store(postgres_url: str) -> Iterator[SqlStore]:
    store = SqlStore(postgres_url)
    yield store
    store.close()


@pytest.fixture
def polls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """What is left of each budget (ns) the driver polls with when it starts polling, recorded around the real
    :func:`poll`."""
    budgets: list[int] = []

    def recorded(pgconn: Any, deadline: int) -> bool:
        budgets.append(deadline - time.perf_counter_ns())  # what is left of it: the call was sent a moment ago
        return poll(pgconn, deadline)

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


def test_a_poll_that_ran_out_makes_the_next_calls_sleep() -> None:
    turnaround = Turnaround()
    for _ in range(60):
        turnaround.observe(30_000)
    turnaround.observe(1_000_000, ran_out=True)  # a read that waited for the disk, polled for nothing
    for _ in range(QUIET):
        turnaround.average = 30_000  # as quick as before
        assert turnaround.budget(1) == 0
        turnaround.observe(30_000)
    assert turnaround.budget(1) == 60_000
    turnaround.observe(1_000_000)  # slow, but nobody polled for it: nothing burnt, the average decides
    turnaround.average = 30_000
    assert turnaround.budget(1) == 60_000


def test_a_statement_now_and_then_slow_polls_for_it_once(pg_store: SqlStore, polls: list[int]) -> None:
    """Mostly quick answers kept the average under the limit, and each slow one burnt a whole poll (client CPU per call
    26 -> 40 µs with one call in ten waiting 1 ms): after a poll that ran out the statement sleeps for QUIET calls."""
    sql = "SELECT pg_sleep(%s::float8)::text"
    statement = _statement(pg_store, sql, (0,))
    statement.turnaround.average = 10_000
    assert pg_store.driver.fetch_row(sql, (0.01,)) == ("",)  # polls 20 µs, for an answer 10 ms away
    assert len(polls) == 1
    for _ in range(QUIET):
        statement.turnaround.average = 10_000  # as if quick answers had brought it back down
        assert pg_store.driver.fetch_row(sql, (0,)) == ("",)
    assert len(polls) == 1
    statement.turnaround.average = 10_000
    assert pg_store.driver.fetch_row(sql, (0,)) == ("",)
    assert len(polls) == 2


def test_a_lone_quick_statement_polls_and_answers_the_same(pg_store: SqlStore, polls: list[int]) -> None:
    sql = "SELECT %s::int + 1, %s::text"
    statement = _statement(pg_store, sql, (0, ""))
    for i in range(8):  # unnamed, prepared, then prepared runs (prepare_threshold 5)
        statement.turnaround.average = 20_000
        statement.turnaround.quiet = 0  # the last poll may have run out (a busy machine's answer takes longer)
        assert pg_store.driver.fetch_row(sql, (i, f"row {i}")) == (i + 1, f"row {i}")
    assert len(polls) == 8  # the driver polls only with a budget
    assert all(left <= 40_000 for left in polls)  # what is left may be nothing: the thread can wait for a core first


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
            statement.turnaround.quiet = 0
        fs.write_bytes(f"d/f{i % 3}.txt", f"content {i}".encode())
        assert fs.read_bytes(f"d/f{i % 3}.txt").content == f"content {i}".encode()
        assert fs.stat(f"d/f{i % 3}.txt").size_bytes == len(f"content {i}")
