"""``with composite.grouped(name):`` is one journal entry per mount, whatever thread makes the changes: worker
threads that carry the block's context (``asyncio.to_thread``, ``copy_context().run`` in an executor: how async
tool handlers and the REST service run sync calls) join it; mounts alternate freely; undo inside it is refused
for every mount (memory, host, SQLite, behind a policy view); groups nest with a mount's own group and with
another composite; a change made after the block ended, or still under way when it ended, is an entry of its
own, never lost. Each test failed before the fix (branch composite-threads)."""

from __future__ import annotations

import asyncio
import contextvars
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from workspacefs import CompositeFilesystem, HostFilesystem, InMemoryFilesystem, SqlFilesystem, SqlStore
from workspacefs.backends._history import Scope
from workspacefs.history import JournalEntry
from workspacefs.policy import GuardedFilesystem, Policy

KINDS = ["memory", "host", "sqlite", "guarded"]
WAIT = 30.0
"""How long a thread waits for a step that must come (only a hang uses it up)."""


class Mounts:
    """A composite with ``/a`` of one kind (memory, host, SQLite, or memory behind a policy view) and ``/b`` in
    memory: ``a`` is the mounted filesystem, for asking its own journal."""

    def __init__(self, kind: str, tmp: Path) -> None:
        self.store: SqlStore | None = None
        self.a: Any
        if kind == "memory":
            self.a = InMemoryFilesystem()
        elif kind == "host":
            (tmp / "root").mkdir()
            self.a = HostFilesystem(tmp / "root", snapshot_dir=tmp / "snapshots")
        elif kind == "sqlite":
            self.store = SqlStore(f"sqlite:///{tmp / 'a.db'}")
            self.a = SqlFilesystem(self.store, "agent")
        else:
            self.a = GuardedFilesystem(InMemoryFilesystem(), Policy())
        self.b = InMemoryFilesystem()
        self.fs = CompositeFilesystem({"/a": self.a, "/b": self.b})

    def entries(self) -> list[tuple[str, frozenset[str]]]:
        """Every entry of the composite, oldest first: operation and paths."""
        return [(e.operation, frozenset(e.paths)) for e in reversed(self.fs.history(limit=None))]

    def close(self) -> None:
        self.fs.close()
        if self.store is not None:
            self.store.close()


@pytest.fixture(params=KINDS)
def mounts(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Mounts]:
    made = Mounts(request.param, Path(tempfile.mkdtemp(dir=fast_tmp)))
    yield made
    made.close()


def memory_pair() -> CompositeFilesystem:
    return CompositeFilesystem({"/a": InMemoryFilesystem(), "/b": InMemoryFilesystem()})


def files(prefix: str, count: int) -> set[str]:
    return {f"{prefix}/f{i}.txt" for i in range(count)}


def in_threads(work: list[Callable[[], object]]) -> None:
    """Run each callable in a pool thread with a copy of this context (as an async handler's executor does)."""
    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(contextvars.copy_context().run, each) for each in work]:
            future.result()


# --- worker threads join the group ---------------------------------------------------------------------------


def test_to_thread_writes_are_one_entry_per_mount(mounts: Mounts) -> None:
    fs = mounts.fs

    async def main() -> None:
        with fs.grouped("batch"):
            writes = [asyncio.to_thread(fs.write_bytes, f"/{m}/f{i}.txt", b"x") for i in range(4) for m in "ab"]
            await asyncio.gather(*writes)

    asyncio.run(main())
    assert sorted(mounts.entries()) == [("batch", frozenset(files("a", 4))), ("batch", frozenset(files("b", 4)))]


def test_sequential_to_thread_writes_to_one_mount_are_one_entry(mounts: Mounts) -> None:
    fs = mounts.fs

    async def main() -> None:
        with fs.grouped("batch"):
            for i in range(3):
                await asyncio.to_thread(fs.write_bytes, f"/a/f{i}.txt", b"x")

    asyncio.run(main())
    assert mounts.entries() == [("batch", frozenset(files("a", 3)))]
    assert [e.operation for e in mounts.a.history(limit=None)] == ["batch"]  # the mount's own journal agrees


def test_executor_threads_with_a_copied_context_are_one_entry_per_mount(mounts: Mounts) -> None:
    fs = mounts.fs
    with fs.grouped("batch"):
        in_threads([lambda i=i, m=m: fs.write_bytes(f"/{m}/f{i}.txt", b"x") for i in range(4) for m in "ab"])
    assert sorted(mounts.entries()) == [("batch", frozenset(files("a", 4))), ("batch", frozenset(files("b", 4)))]


def test_a_threaded_group_is_undone_one_entry_per_mount(mounts: Mounts) -> None:
    fs = mounts.fs
    fs.write_bytes("/a/keep.txt", b"old")
    with fs.grouped("batch"):
        in_threads([lambda i=i: fs.write_bytes(f"/a/f{i}.txt", b"x") for i in range(3)])
        in_threads([lambda: fs.write_bytes("/a/keep.txt", b"new"), lambda: fs.write_bytes("/b/f.txt", b"x")])
    batch = [e for e in fs.history(limit=None) if e.operation == "batch"]
    assert len(batch) == 2
    fs.undo([e.entry_id for e in batch])
    assert fs.read_bytes("/a/keep.txt").content == b"old"
    assert sorted(e.path for e in fs.walk("/")) == ["a", "a/keep.txt", "b"]


def test_composite_operations_in_worker_threads_join_the_group() -> None:
    fs = memory_pair()
    fs.write_bytes("/a/tree/x.txt", b"x")
    fs.write_bytes("/a/tree/y.txt", b"y")
    fs.write_bytes("/b/old.txt", b"o")
    fs.write_bytes("/b/kept.txt", b"k")
    before = len(fs.history(limit=None))
    with fs.grouped("reorganise"):
        in_threads([lambda: fs.mkdir("/a/made"), lambda: fs.delete("/b/old.txt")])
        in_threads([lambda: fs.move("/a/tree", "/b/tree"), lambda: fs.copy("/b/kept.txt", "/a/c.txt")])
    made = fs.history(limit=None)[: len(fs.history(limit=None)) - before]
    assert sorted(e.entry_id % 2 for e in made) == [0, 1]  # one entry in each mount
    assert {e.operation for e in made} == {"reorganise"}


def test_a_group_going_back_and_forth_between_mounts_is_one_entry_per_mount() -> None:
    fs = memory_pair()
    with fs.grouped("edit"):
        for name in ("/a/1.txt", "/b/1.txt", "/a/2.txt", "/b/2.txt", "/a/3.txt"):
            fs.write_bytes(name, b"x")
    assert sorted((e.operation, e.paths) for e in fs.history(limit=None)) == [
        ("edit", ("a/1.txt", "a/2.txt", "a/3.txt")),
        ("edit", ("b/1.txt", "b/2.txt")),
    ]


# --- undo inside the group -----------------------------------------------------------------------------------


def entry_of(fs: CompositeFilesystem, path: str) -> JournalEntry:
    return next(e for e in fs.history(limit=None) if path in e.paths)


def test_undo_inside_a_composite_group_is_refused_for_every_mount(mounts: Mounts) -> None:
    fs = mounts.fs
    fs.write_bytes("/a/u.txt", b"1")
    fs.write_bytes("/b/u.txt", b"1")
    for path in ("a/u.txt", "b/u.txt"):
        entry = entry_of(fs, path)
        with fs.grouped("group"):
            with pytest.raises(ValueError, match="grouped"):
                fs.check_undo(entry.entry_id)
            with pytest.raises(ValueError, match="grouped"):
                fs.undo(entry.entry_id)
        assert fs.read_bytes("/" + path).content == b"1"
    fs.undo(entry_of(fs, "a/u.txt").entry_id)  # after the group it works
    assert not fs.exists("/a/u.txt")


def test_undo_inside_a_group_is_refused_after_the_group_changed_another_mount(mounts: Mounts) -> None:
    fs = mounts.fs
    fs.write_bytes("/a/u.txt", b"1")
    entry = entry_of(fs, "a/u.txt")
    with fs.grouped("group"):
        fs.write_bytes("/b/v.txt", b"2")
        with pytest.raises(ValueError, match="grouped"):
            fs.undo(entry.entry_id)
    assert fs.read_bytes("/a/u.txt").content == b"1"


def test_a_mounts_own_undo_inside_the_composite_group_is_refused(mounts: Mounts) -> None:
    fs = mounts.fs
    mounts.a.write_bytes("u.txt", b"1")
    [own] = mounts.a.history(limit=1)
    with fs.grouped("group"), pytest.raises(ValueError, match="grouped"):
        mounts.a.undo(own.entry_id)  # its entry would vanish into the composite's group
    assert mounts.a.read_bytes("u.txt").content == b"1"


def test_undo_from_a_worker_thread_inside_the_group_is_refused() -> None:
    fs = memory_pair()
    fs.write_bytes("/a/u.txt", b"1")
    entry = entry_of(fs, "a/u.txt")
    refused: list[BaseException] = []

    def undo() -> None:
        try:
            fs.undo(entry.entry_id)
        except ValueError as exc:
            refused.append(exc)

    with fs.grouped("group"):
        in_threads([undo])
    assert len(refused) == 1 and fs.exists("/a/u.txt")


# --- nesting -------------------------------------------------------------------------------------------------


def test_a_mounts_own_group_inside_the_composite_group_joins_it() -> None:
    a = InMemoryFilesystem()
    fs = CompositeFilesystem({"/a": a, "/b": InMemoryFilesystem()})
    with fs.grouped("outer"):
        with a.grouped("inner"):
            a.write_bytes("1.txt", b"1")
        fs.write_bytes("/a/2.txt", b"2")
    assert [(e.operation, e.paths) for e in a.history(limit=None)] == [("outer", ("1.txt", "2.txt"))]


def test_a_composite_group_inside_a_mounts_group_with_threads() -> None:
    a = InMemoryFilesystem()
    fs = CompositeFilesystem({"/a": a, "/b": InMemoryFilesystem()})

    async def main() -> None:
        with a.grouped("outer"):
            a.write_bytes("0.txt", b"0")
            with fs.grouped("inner"):
                await asyncio.gather(
                    *[asyncio.to_thread(fs.write_bytes, f"/{m}/{i}.txt", b"x") for i in range(3) for m in "ab"]
                )

    asyncio.run(main())
    assert sorted((e.operation, e.paths) for e in fs.history(limit=None)) == [
        ("inner", ("b/0.txt", "b/1.txt", "b/2.txt")),
        ("outer", ("a/0.txt", "a/1.txt", "a/2.txt")),
    ]


def test_a_composite_mounted_in_a_composite_groups_each_leaf_mount_from_threads() -> None:
    inner = memory_pair()
    outer = CompositeFilesystem({"/in": inner, "/c": InMemoryFilesystem()})
    with outer.grouped("deep"):
        in_threads(
            [
                lambda i=i, m=m: outer.write_bytes(f"{m}/f{i}.txt", b"x")
                for i in range(3)
                for m in ("/in/a", "/in/b", "/c")
            ]
        )
    assert sorted((e.operation, e.paths) for e in outer.history(limit=None)) == [
        ("deep", tuple(sorted(files(m, 3)))) for m in ("c", "in/a", "in/b")
    ]


def test_a_group_of_another_composite_inside_keeps_the_outer_group() -> None:
    shared = InMemoryFilesystem()
    first = CompositeFilesystem({"/s": shared, "/x": InMemoryFilesystem()})
    second = CompositeFilesystem({"/s": shared, "/y": InMemoryFilesystem()})
    with first.grouped("first"):
        first.write_bytes("/x/1.txt", b"1")
        with second.grouped("second"):
            first.write_bytes("/x/2.txt", b"2")
            first.write_bytes("/s/1.txt", b"1")
            second.write_bytes("/s/2.txt", b"2")
    assert [(e.operation, e.paths) for e in first.history(limit=None) if e.paths[0].startswith("x")] == [
        ("first", ("x/1.txt", "x/2.txt"))
    ]
    assert [(e.operation, e.paths) for e in shared.history(limit=None)] == [("first", ("1.txt", "2.txt"))]


# --- the block ends while workers still write ----------------------------------------------------------------


def test_a_worker_writing_after_the_composite_group_ended_is_journaled() -> None:
    fs = memory_pair()
    started, ended = threading.Event(), threading.Event()

    def late() -> None:
        fs.write_bytes("/a/early.txt", b"e")
        started.set()
        ended.wait(WAIT)
        fs.write_bytes("/a/late.txt", b"l")
        fs.write_bytes("/b/late.txt", b"l")

    with ThreadPoolExecutor(1) as pool:
        with fs.grouped("batch"):
            future = pool.submit(contextvars.copy_context().run, late)
            started.wait(WAIT)
        ended.set()
        future.result()
    assert sorted((e.operation, e.paths) for e in fs.history(limit=None)) == [
        ("batch", ("a/early.txt",)),
        ("write", ("a/late.txt",)),
        ("write", ("b/late.txt",)),
    ]


class _Pausing:
    """A filesystem whose next change in a worker thread, once it has found the group it belongs to, waits for
    ``go`` (the moment a write is under way when its group ends)."""

    armed = False
    found = go = threading.Event()

    def _current_scope(self) -> Scope | None:
        scope: Scope | None = super()._current_scope()  # type: ignore[misc]
        if self.armed and scope is not None and threading.current_thread() is not threading.main_thread():
            self.armed = False
            self.found.set()
            self.go.wait(WAIT)
        return scope


class _PausingMemory(_Pausing, InMemoryFilesystem):
    pass


class _PausingHost(_Pausing, HostFilesystem):
    pass


@pytest.mark.parametrize("kind", ["memory", "host"])
def test_a_write_under_way_when_the_group_ends_is_not_lost(kind: str, fast_tmp: Path) -> None:
    tmp = Path(tempfile.mkdtemp(dir=fast_tmp))
    (tmp / "root").mkdir()
    a = _PausingMemory() if kind == "memory" else _PausingHost(tmp / "root", snapshot_dir=tmp / "snapshots")
    a.found, a.go = threading.Event(), threading.Event()
    fs = CompositeFilesystem({"/a": a, "/b": InMemoryFilesystem()})
    with ThreadPoolExecutor(1) as pool:
        with fs.grouped("batch"):
            fs.write_bytes("/a/first.txt", b"1")
            a.armed = True
            future = pool.submit(contextvars.copy_context().run, fs.write_bytes, "/a/racing.txt", b"2")
            assert a.found.wait(WAIT)
        a.go.set()
        future.result()
    assert sorted((e.operation, e.paths) for e in fs.history(limit=None)) == [
        ("batch", ("a/first.txt",)),
        ("write", ("a/racing.txt",)),  # too late for the group, and not lost
    ]
    fs.close()


class _PausingComposite(CompositeFilesystem):
    """A composite whose next change in a worker thread, once it has found the operation in progress, waits for
    ``go`` (a change reaching a mount the block has not changed yet just as the block ends)."""

    armed = False
    found = go = threading.Event()

    def _operation(self) -> Any:
        running = super()._operation()
        if self.armed and running is not None and threading.current_thread() is not threading.main_thread():
            self.armed = False
            self.found.set()
            self.go.wait(WAIT)
        return running


def test_a_worker_reaching_an_unchanged_mount_as_the_group_ends_opens_no_group() -> None:
    fs = _PausingComposite({"/a": InMemoryFilesystem(), "/b": InMemoryFilesystem()})
    fs.found, fs.go = threading.Event(), threading.Event()
    kept: list[contextvars.Context] = []

    def write() -> None:
        fs.write_bytes("/b/racing.txt", b"2")
        kept.append(contextvars.copy_context())  # a context that lives on (a pool thread's) keeps what it holds

    with ThreadPoolExecutor(1) as pool:
        with fs.grouped("batch"):
            fs.write_bytes("/a/first.txt", b"1")
            fs.armed = True
            future = pool.submit(contextvars.copy_context().run, write)
            assert fs.found.wait(WAIT)
        fs.go.set()
        future.result()
    assert sorted((e.operation, e.paths) for e in fs.history(limit=None)) == [
        ("batch", ("a/first.txt",)),
        ("write", ("b/racing.txt",)),
    ]
