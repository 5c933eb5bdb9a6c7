"""History of a ``CompositeFilesystem`` over memory, SQLite and host mounts: one journal read across them, with
the composite's paths and ids (``inner * n + index``, the same in another process), undo and its conflicts
routed to the mount, a move between mounts as two entries, one watcher over every mount, pruning. The
conformance suite's history part runs through a composite of one mount in ``test_composite.py``."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from workspacefs import (
    CompositeFilesystem,
    HostFilesystem,
    InMemoryFilesystem,
    PolicyDeniedError,
    SqlFilesystem,
    SqlStore,
)
from workspacefs.errors import HistoryEntryNotFoundError, UndoConflictError, UnsupportedOperationError
from workspacefs.history import ChangeEvent, acting_as
from workspacefs.paths import ROOT
from workspacefs.policy import GuardedFilesystem, Policy, PolicyRule
from workspacefs.server._events import EventStream

WAIT = 30.0
"""How long a test waits for an event that must come (only a lost event uses it up)."""


class Mounts:
    """``/host`` (index 0), ``/mem`` (1) and ``/sql`` (2): three mounts, so a mount's entry ``i`` is the
    composite's ``3 * i + index``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.store = SqlStore(f"sqlite:///{tmp / 'journal.db'}")
        self.mem = InMemoryFilesystem()
        self.fs = self.compose(self.mem)

    def compose(self, mem: InMemoryFilesystem) -> CompositeFilesystem:
        """A composite over the same host directory and SQL session (what another process would mount)."""
        (self.tmp / "repo").mkdir(exist_ok=True)
        host = HostFilesystem(self.tmp / "repo", snapshot_dir=self.tmp / "snapshots")
        return CompositeFilesystem({"/sql": SqlFilesystem(self.store, "agent"), "/mem": mem, "/host": host})


@pytest.fixture
def mounts(fast_tmp: Path) -> Iterator[Mounts]:
    made = Mounts(Path(tempfile.mkdtemp(dir=fast_tmp)))
    yield made
    made.fs.close()
    made.store.close()


def test_history_merges_the_mounts_newest_first_in_the_composites_names(mounts: Mounts) -> None:
    fs = mounts.fs
    assert fs.capabilities.history and fs.capabilities.watch
    with acting_as("agent-1"):
        fs.write("/sql/notes/todo.md", "one\n")
        fs.write("/mem/scratch.txt", "s")
    fs.write("/host/src/app.py", "print(1)\n")
    fs.write("/sql/notes/todo.md", "two\n")
    entries = fs.history()
    assert [(e.operation, e.paths) for e in entries] == [
        ("write", ("sql/notes/todo.md",)),
        ("write", ("host/src/app.py",)),
        ("mkdir", ("host/src",)),
        ("write", ("mem/scratch.txt",)),
        ("write", ("sql/notes/todo.md",)),
        ("mkdir", ("sql/notes",)),
    ]
    newest = entries[0]
    [inner] = mounts.fs.mounts["/sql"].history(limit=1)  # type: ignore[attr-defined]
    assert newest.entry_id == inner.entry_id * 3 + 2 and inner.paths == ("notes/todo.md",)
    assert fs.history_entry(newest.entry_id) == newest
    assert fs.history_entry(entries[3].entry_id).paths == ("mem/scratch.txt",)
    assert [e.paths for e in fs.history("/sql/notes/todo.md")] == [("sql/notes/todo.md",)] * 2
    assert {p for e in fs.history("/mem") for p in e.paths} == {"mem/scratch.txt"}
    assert len(fs.history("/")) == 6 and fs.history(limit=2) == entries[:2]
    assert fs.history(actor="agent-1") == entries[3:]
    # since: after that entry in its own mount, from its time on in the others
    assert fs.history(since=entries[3].entry_id) == entries[:3]
    assert fs.history(since=entries[2].time) == entries[:2]
    for unknown in (10**12, -1):
        with pytest.raises(HistoryEntryNotFoundError):
            fs.history_entry(unknown)

    again = mounts.compose(mounts.mem)  # another process: the same ids, read from the same journals
    assert again.history() == entries


def test_a_writable_mount_without_history_is_named_and_a_read_only_one_left_out() -> None:
    plain = CompositeFilesystem({"/a": InMemoryFilesystem(), "/b": InMemoryFilesystem(history=False)})
    assert not plain.capabilities.history and not plain.capabilities.watch
    with pytest.raises(UnsupportedOperationError, match="/b"):
        plain.history()
    with pytest.raises(UnsupportedOperationError, match="/b"):
        plain.watch()
    reference = InMemoryFilesystem(history=False, read_only=True)
    kept = CompositeFilesystem({"/a": InMemoryFilesystem(), "/docs": reference})
    assert kept.capabilities.history
    kept.write("/a/x.txt", "x")
    assert [e.paths for e in kept.history()] == [("a/x.txt",)]


def test_undo_goes_to_the_mount_and_a_conflict_names_the_composites_path_and_entries(mounts: Mounts) -> None:
    fs = mounts.fs
    fs.write("/host/a.txt", "base\n")
    with acting_as("agent-2"):
        fs.write("/host/a.txt", "agent\n")
        fs.write("/mem/m.txt", "m")
    agent = fs.history("/host/a.txt")[0]
    fs.write("/host/a.txt", "user\n")
    later = fs.history(limit=1)[0]
    assert fs.read_version(agent.entry_id, "/host/a.txt", side="before") == b"base\n"
    assert fs.read_version(agent.entry_id, "/host/a.txt") == b"agent\n"
    with pytest.raises(FileNotFoundError, match=f"Entry {agent.entry_id} "):
        fs.read_version(agent.entry_id, "/host/other.txt")
    with pytest.raises(UndoConflictError) as refused:
        fs.undo(agent.entry_id)
    assert refused.value.later == (later.entry_id,) and refused.value.filename == "host/a.txt"
    [undone] = fs.undo(agent.entry_id, force=True)
    assert undone.undoes == agent.entry_id and undone.paths == ("host/a.txt",)
    assert fs.history_entry(undone.entry_id) == undone
    assert fs.read("/host/a.txt").content == "base\n"
    fs.write("/host/a.txt", "agent\n")  # as agent-2 left it, so its last two entries undo cleanly
    with acting_as("agent-2"):
        fs.write("/sql/s.txt", "s")
    undone_two = fs.undo(actor="agent-2", last=2)
    assert [e.paths for e in undone_two] == [("sql/s.txt",), ("mem/m.txt",)]
    assert not fs.exists("/sql/s.txt") and not fs.exists("/mem/m.txt")


def test_an_undo_over_several_mounts_changes_nothing_unless_every_mount_can(mounts: Mounts) -> None:
    fs = mounts.fs
    with acting_as("agent"):
        fs.write("/host/x.txt", "1")
        fs.write("/mem/y.txt", "1")
    [newest] = fs.history(limit=1)
    with pytest.raises(HistoryEntryNotFoundError):
        fs.undo([newest.entry_id, 3 * 1000])  # the second id names no entry: the first is not undone either
    assert fs.exists("/mem/y.txt")
    fs.write("/host/x.txt", "user")  # someone else changed what the older entry left
    with pytest.raises(UndoConflictError) as refused:
        fs.undo(actor="agent", last=2)
    assert refused.value.filename == "host/x.txt"
    assert fs.exists("/mem/y.txt")  # the other mount's share was checked, not undone


def test_a_move_between_mounts_is_a_copy_and_a_delete_in_two_journals(mounts: Mounts) -> None:
    fs = mounts.fs
    fs.write("/mem/tree/a.txt", "a")
    fs.write("/mem/tree/deep/b.txt", "b")
    fs.move("/mem/tree", "/sql/moved")
    away, into = fs.history(limit=2)  # one entry per mount, however many files moved: copied, then deleted
    assert (into.operation, away.operation) == ("move", "move")
    assert (into.entry_id % 3, away.entry_id % 3) == (2, 1)  # into /sql, away from /mem
    assert {(c.kind, c.path) for c in into.changes} == {
        ("created", p) for p in ("sql/moved", "sql/moved/a.txt", "sql/moved/deep", "sql/moved/deep/b.txt")
    }
    assert {c.kind for c in away.changes} == {"deleted"} and "mem/tree/deep/b.txt" in away.paths
    fs.copy("/sql/moved/a.txt", "/host/a.txt")
    [copied] = fs.history(limit=1)
    assert (copied.operation, copied.paths) == ("copy", ("host/a.txt",))
    fs.undo(away.entry_id)
    fs.undo(into.entry_id)
    assert fs.read("/mem/tree/deep/b.txt").content == "b" and not fs.exists("/sql/moved")


def test_one_watcher_hears_every_mount_with_the_composites_paths_and_ids(mounts: Mounts) -> None:
    fs = mounts.fs
    with fs.watch("/") as everything, fs.watch("/sql/notes", recursive=False) as notes:
        fs.write("/mem/x.txt", "x")
        fs.write("/sql/notes/n.md", "n")
        fs.move("/mem/x.txt", "/mem/y.txt")
        seen: list[ChangeEvent] = []
        while len(seen) < 4:
            event = everything.next_event(WAIT)
            assert event is not None, f"events missing; got {seen}"
            seen.append(event)
        assert {(e.kind, e.path, e.from_path) for e in seen} == {
            ("created", "mem/x.txt", None),
            ("created", "sql/notes", None),
            ("created", "sql/notes/n.md", None),
            ("moved", "mem/y.txt", "mem/x.txt"),
        }
        assert {e.entry_id for e in seen} == {e.entry_id for e in fs.history()}
        direct = [notes.next_event(WAIT) for _ in range(2)]  # the path itself, then what is directly in it
        assert [e.path if e else None for e in direct] == ["sql/notes", "sql/notes/n.md"]
    journals = [mounts.mem._journal(), mounts.fs.mounts["/sql"]._journal()]  # type: ignore[attr-defined]
    assert everything.closed and not any(journal.watched for journal in journals)


def test_pruning_keeps_the_composites_newest_entries(mounts: Mounts) -> None:
    fs = mounts.fs
    for name in ("/sql/1.txt", "/mem/2.txt", "/sql/3.txt", "/mem/4.txt"):
        fs.write(name, "x")
    *newest, oldest = fs.history(limit=3)
    assert fs.prune_history(keep=2) == 2  # one entry of each mount went
    assert fs.history() == newest
    with pytest.raises(HistoryEntryNotFoundError):
        fs.undo(oldest.entry_id)


def test_an_event_stream_resumed_over_a_composite_loses_no_entry_of_another_mount() -> None:
    """Ids grow within a mount, not across: a new entry of one mount may have a smaller id than the last entry
    a client saw of another, and the stream still sends it."""
    fs = CompositeFilesystem({"/a": InMemoryFilesystem(), "/b": InMemoryFilesystem()})
    for number in range(5):
        fs.write(f"/a/{number}.txt", "x")
    [seen] = fs.history(limit=1)  # what the client saw last, before it reconnected
    with fs.watch() as watcher:
        stream = EventStream(fs, watcher, ROOT, (seen.entry_id, None), lambda work, *args: work(*args))
        assert stream.backlog() == []
        fs.write("/b/new.txt", "n")
        event = watcher.next_event(WAIT)
        assert event is not None and event.entry_id is not None and event.entry_id < seen.entry_id
        assert b'"path":"/b/new.txt"' in b"".join(stream.render([event]))
    with fs.watch() as watcher:  # the same when retention has dropped the client's last entry
        fs.mounts["/a"].prune_history(keep=0)  # type: ignore[attr-defined]
        stream = EventStream(fs, watcher, ROOT, (seen.entry_id, None), lambda work, *args: work(*args))
        stream.backlog()
        fs.write("/b/newer.txt", "n")
        event = watcher.next_event(WAIT)
        assert event is not None and event.entry_id is not None and event.entry_id < seen.entry_id
        assert b'"path":"/b/newer.txt"' in b"".join(stream.render([event]))


def test_a_guarded_mount_is_checked_before_any_mount_undoes_and_groups_its_share(fast_tmp: Path) -> None:
    """A mount behind a policy is a journaled mount like any other: its own ``check_undo`` (the policy's
    refusal included) runs before any mount changes, and a composite operation is one entry in it."""
    guarded = GuardedFilesystem(InMemoryFilesystem(), Policy([PolicyRule("deny", ("delete",), "keep/**")]))
    fs = CompositeFilesystem({"/a": InMemoryFilesystem(), "/guarded": guarded})
    with acting_as("agent"):
        fs.write("/guarded/keep/x.txt", "x")  # undoing it deletes it: the policy refuses
        fs.write("/a/y.txt", "y")  # the newer entry, so its mount's share would go first
    with pytest.raises(PolicyDeniedError):
        fs.check_undo(actor="agent", last=2)
    with pytest.raises(PolicyDeniedError):
        fs.undo(actor="agent", last=2)
    assert fs.exists("/a/y.txt") and fs.exists("/guarded/keep/x.txt")  # all or none: nothing was undone
    assert [e.operation for e in fs.history(limit=2)] == ["write", "write"]
    fs.write("/a/tree/one.txt", "1")
    fs.write("/a/tree/two.txt", "2")
    fs.move("/a/tree", "/guarded/moved")
    into = guarded.history(limit=1)[0]
    assert into.operation == "move"  # both files copied in: one entry of the guarded mount, not one per file
    assert {c.path for c in into.changes} >= {"moved/one.txt", "moved/two.txt"}
