"""Defects a review found in grouped operations, check_undo and the host journal's groups (each test failed
before its fix): a path changed twice in one entry, a task outliving its group, nested groups of two
filesystems, a composite group crossing threads, ids out of the order of the changes, a multiprocessing
child's entries, a write finishing while its journal closes, a committer retrying a lasting error."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from workspacefs import CompositeFilesystem, InMemoryFilesystem
from workspacefs.backends.host import HostFilesystem


def host(tmp: Path) -> HostFilesystem:
    (tmp / "r").mkdir(exist_ok=True)
    return HostFilesystem(tmp / "r", snapshot_dir=tmp / "s")


# --- grouped / check_undo ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "host"])
def test_grouped_entry_touching_one_path_twice_can_be_undone(kind: str, tmp_path: Path) -> None:
    fs: Any = InMemoryFilesystem() if kind == "memory" else host(tmp_path)
    fs.write_bytes("/a.txt", b"0")
    with fs.grouped("edit"):
        fs.write_bytes("/a.txt", b"1")
        fs.write_bytes("/a.txt", b"2")
    entry = fs.history(limit=1)[0]
    fs.check_undo(entry.entry_id)  # UndoConflictError, later=() : nothing changed it since
    fs.undo(entry.entry_id)
    assert fs.read_bytes("/a.txt").content == b"0"


def test_a_change_by_a_task_outliving_the_grouped_block_is_journaled() -> None:
    fs = InMemoryFilesystem()

    async def main() -> None:
        async def later() -> None:
            await asyncio.sleep(0.01)
            fs.write_bytes("/late.txt", b"x")

        with fs.grouped("batch"):
            task = asyncio.create_task(later())
        await task

    asyncio.run(main())
    assert fs.exists("/late.txt")
    assert any("late.txt" in e.paths for e in fs.history(limit=None))


def test_undo_inside_a_grouped_block_is_refused_before_it_changes_anything() -> None:
    fs = InMemoryFilesystem()
    fs.write_bytes("/u.txt", b"1")
    fs.write_bytes("/u.txt", b"2")
    last = fs.history(limit=1)[0].entry_id
    with fs.grouped("outer"), pytest.raises(ValueError, match="grouped"):
        fs.undo(last)  # its entry would vanish into the group, and undo could not say what it did
    assert fs.read_bytes("/u.txt").content == b"2"


def test_grouped_of_another_filesystem_inside_keeps_the_outer_group() -> None:
    a, b = InMemoryFilesystem(), InMemoryFilesystem()
    with a.grouped("refactor"):
        a.write_bytes("/1.txt", b"1")
        with b.grouped("scratch"):
            a.write_bytes("/2.txt", b"2")
    assert [e.operation for e in a.history(limit=None)] == ["refactor"]


def test_composite_grouped_with_a_write_through_to_thread() -> None:
    fs = CompositeFilesystem({"/a": InMemoryFilesystem(), "/b": InMemoryFilesystem()})

    async def main() -> None:
        with fs.grouped("batch"):
            await asyncio.to_thread(fs.write_bytes, "/a/x.txt", b"1")

    asyncio.run(main())  # ValueError: Token was created in a different Context
    assert [e.paths for e in fs.history(limit=None)] == [("a/x.txt",)]


# --- host journal ------------------------------------------------------------------------------------------


def test_host_entries_of_two_filesystems_on_one_root_keep_the_order_of_the_changes(tmp_path: Path) -> None:
    a, b = host(tmp_path), host(tmp_path)
    a.write_bytes("/x.txt", b"1")
    a.history(limit=1)
    a.write_bytes("/x.txt", b"2")  # waits in memory
    b.move("/x.txt", "/y.txt")  # recorded at once, before a's older entry
    assert [e.operation for e in reversed(a.history(limit=None))] == ["write", "write", "move"]


def _child_writes(root: str, snaps: str) -> None:
    fs = HostFilesystem(root, snapshot_dir=snaps)
    for i in range(3):
        fs.write_bytes(f"/child{i}.txt", b"c")


def test_host_entries_of_a_multiprocessing_child_are_not_lost(tmp_path: Path) -> None:
    host(tmp_path)
    child = multiprocessing.get_context("fork").Process(
        target=_child_writes, args=(str(tmp_path / "r"), str(tmp_path / "s"))
    )
    child.start()
    child.join()
    assert child.exitcode == 0
    assert len(host(tmp_path).history(limit=None)) == 3


def test_host_write_under_way_while_closing_keeps_its_entry_or_fails(tmp_path: Path) -> None:
    fs = host(tmp_path)
    inside, go = threading.Event(), threading.Event()
    real = fs._tree.write_new

    def slow(*args: Any, **kwargs: Any) -> None:
        inside.set()
        go.wait(10)
        real(*args, **kwargs)

    fs._tree.write_new = slow  # type: ignore[method-assign]
    outcome: list[object] = []

    def write() -> None:
        with contextlib.suppress(ValueError):  # the journal closed under it: the write says so, not losing its entry
            outcome.append(fs.write_bytes("/c.txt", b"x"))

    thread = threading.Thread(target=write)
    thread.start()
    inside.wait(10)
    fs.close()
    go.set()
    thread.join()
    written = bool(outcome) and (tmp_path / "r" / "c.txt").exists()
    assert not written or len(host(tmp_path).history(limit=None)) == 1


def test_host_committer_does_not_spin_on_a_lasting_error(tmp_path: Path) -> None:
    fs = host(tmp_path)
    journal = fs._changes
    assert journal is not None
    attempts = [0]

    def failing() -> None:
        attempts[0] += 1
        error = sqlite3.OperationalError("attempt to write a readonly database")
        error.sqlite_errorcode = sqlite3.SQLITE_READONLY  # type: ignore[attr-defined]
        raise error

    real = journal._begin
    journal._begin = failing  # type: ignore[method-assign]
    start = time.monotonic()
    fs.write_bytes("/a.txt", b"1")
    time.sleep(0.2)  # the committer's chance to retry (how long it really was is read below)
    counted, elapsed = attempts[0], time.monotonic() - start
    journal._begin = real  # type: ignore[method-assign]
    fs.close()
    # a retry per group's time (5 ms) is 200 a second; the spin made 200,000: a count per second between
    assert counted < 2000 * elapsed + 10, f"{counted} BEGIN attempts in {elapsed:.2f} s for one waiting entry"
