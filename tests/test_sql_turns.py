"""Writers of one SQLite database in a process take turns, first come first served (``sql/_turns.py``).

SQLite makes a waiting writer poll with growing sleeps, so a thread that commits and begins again at once kept
winning: a third writer waited through hundreds of the others' writes. Counted, not timed: how many writes the
busy threads make between two of a third's.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql._turns import Turns


def test_a_writer_waits_for_at_most_a_few_writes_of_three_busy_neighbours(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path}/db.sqlite")
    busy = [SqlFilesystem(store, f"busy{n}") for n in range(3)]
    third = SqlFilesystem(store, "third")
    done = itertools.count()
    stop = threading.Event()

    def keep_writing(fs: SqlFilesystem) -> None:
        for index in itertools.count():
            if stop.is_set():
                return
            fs.write_bytes(f"f{index % 50}.txt", b"x" * 100)
            next(done)

    threads = [threading.Thread(target=keep_writing, args=(fs,)) for fs in busy]
    for thread in threads:
        thread.start()
    try:
        marks = []
        for index in range(60):  # the neighbours' writes done while one of ours was under way (not between them)
            started = next(done)
            third.write_bytes(f"t{index}.txt", b"y")
            marks.append((started, next(done)))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    during = [ended - started - 1 for started, ended in marks]
    assert marks[-1][1] - marks[0][0] >= 120 + 60  # the neighbours were writing all along (ours count 120)
    assert max(during) <= 12, during  # each waited behind at most the three others' turns (before: 2,310)


def test_turns_go_first_come_first_served_and_a_holder_passes_through() -> None:
    turns = Turns()
    assert turns.take() and not turns.take()  # the holder passes through (and gives once)
    order: list[int] = []
    lined_up = []
    for n in range(3):
        ready = threading.Event()

        def wait(n: int = n, ready: threading.Event = ready) -> None:
            ready.set()
            assert turns.take()
            order.append(n)
            turns.give()

        thread = threading.Thread(target=wait)
        thread.start()
        ready.wait()
        while len(turns._waiting) < n + 1:  # in line before the next one comes
            threading.Event().wait(0.001)
        lined_up.append(thread)
    turns.give()
    for thread in lined_up:
        thread.join()
    assert order == [0, 1, 2]


def test_a_writer_that_loses_patience_leaves_the_line() -> None:
    turns = Turns(patience=0.01)
    assert turns.take()
    outcome: list[bool] = []
    thread = threading.Thread(target=lambda: outcome.append(turns.take()))
    thread.start()
    thread.join()
    assert outcome == [False] and not turns._waiting  # left to SQLite's own lock, nothing left in line
    turns.give()
    assert turns.take()  # free again
    turns.give()


@pytest.mark.parametrize("raised", [KeyboardInterrupt, ValueError])
def test_a_write_that_fails_gives_its_turn_back(tmp_path: Path, raised: type[BaseException]) -> None:
    store = SqlStore(f"sqlite:///{tmp_path}/db.sqlite")
    fs = SqlFilesystem(store, "s")
    with pytest.raises(raised), store.write():
        raise raised()
    fs.write_bytes("after.txt", b"the turn came back")  # would wait for ever otherwise
    assert fs.read_bytes("after.txt").content == b"the turn came back"
