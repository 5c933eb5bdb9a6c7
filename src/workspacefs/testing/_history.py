"""Conformance: the journal, undo and change events (``capabilities.history`` / ``watch``).

A backend that keeps no history must say so in ``capabilities`` and refuse ``history()`` with
``UnsupportedOperationError``; one that keeps it must journal every mutation with its actor, undo it as a new
entry, refuse an undo over a later change, and (with ``watch``) report each change to a watcher.
"""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import pytest

from workspacefs.errors import HistoryEntryNotFoundError, UndoConflictError, UnsupportedOperationError
from workspacefs.history import DIRECTORY, Actor, ChangeEvent, HistoryFilesystem, acting_as
from workspacefs.streams import content_id_of
from workspacefs.testing._base import SuiteBase

__all__ = ["HistorySuite"]

_WAIT = 30.0
"""How long a test waits for an event that must come (only a lost event uses it up)."""


class HistorySuite(SuiteBase):
    """``history``, ``history_entry``, ``read_version``, ``undo``, ``prune_history`` and ``watch``."""

    def journaled(self, files: dict[str, str] | None = None) -> Any:
        """A filesystem that keeps history, holding ``files``, or ``None`` (then the refusal is checked)."""
        fs: Any = self.make(files or {})
        if not fs.capabilities.history:
            with pytest.raises(UnsupportedOperationError):
                fs.history()
            return None
        assert isinstance(fs, HistoryFilesystem)
        return fs

    @staticmethod
    def newest(fs: Any) -> Any:
        return fs.history(limit=1)[0]

    def test_every_mutation_is_an_entry_with_content_ids(self) -> None:
        fs = self.journaled()
        if fs is None:
            return
        fs.write("a.txt", "one\n")
        created = self.newest(fs)
        assert (created.operation, [c.kind for c in created.changes]) == ("write", ["created"])
        assert created.changes[0].after == content_id_of(b"one\n") and created.changes[0].before is None
        fs.write("a.txt", "two!\n")
        modified = self.newest(fs).changes[0]
        assert (modified.kind, modified.before, modified.after) == (
            "modified",
            content_id_of(b"one\n"),
            content_id_of(b"two!\n"),
        )
        assert modified.size_delta == 1
        fs.mkdir("d")
        assert [(c.path, c.after) for c in self.newest(fs).changes] == [("d", DIRECTORY)]
        fs.copy("a.txt", "d/b.txt")
        assert self.newest(fs).operation == "copy" and self.newest(fs).paths == ("d/b.txt",)
        fs.move("d/b.txt", "d/c.txt")
        moved = self.newest(fs).changes[0]
        assert (moved.kind, moved.from_path, moved.path) == ("moved", "d/b.txt", "d/c.txt")
        with fs.open_write("d/s.bin") as writer:
            writer.write(b"streamed")
        assert self.newest(fs).changes[0].after == content_id_of(b"streamed")
        fs.delete("d", recursive=True)
        removed = self.newest(fs)
        assert removed.operation == "delete" and set(removed.paths) == {"d", "d/c.txt", "d/s.bin"}
        assert all(c.kind == "deleted" for c in removed.changes)
        ids = [entry.entry_id for entry in fs.history()]
        assert ids == sorted(ids, reverse=True) and len(set(ids)) == len(ids)

    def test_entries_carry_the_declared_actor_and_can_be_filtered(self) -> None:
        fs = self.journaled()
        if fs is None:
            return
        with acting_as(Actor(name="agent-7", session="s1", tool_call="call-1", via="tool")):
            fs.write("src/app.py", "print(1)\n")
        with acting_as("user via browser"):
            fs.write("notes.md", "hello\n")
        mine = fs.history(actor="agent-7")
        assert [e.actor.tool_call for e in mine if e.operation == "write"] == ["call-1"]
        assert all(e.actor.session == "s1" for e in mine)
        assert [e.paths for e in fs.history(actor=Actor(name="user via browser"))] == [("notes.md",)]
        assert {p for e in fs.history("src") for p in e.paths} <= {"src", "src/app.py"}
        first = fs.history()[-1]
        assert all(e.entry_id > first.entry_id for e in fs.history(since=first.entry_id))
        assert len(fs.history(limit=1)) == 1
        assert fs.history_entry(first.entry_id) == first
        with pytest.raises(HistoryEntryNotFoundError):
            fs.history_entry(10**12)

    def test_since_a_time_without_a_zone_is_utc(self) -> None:
        fs = self.journaled()
        if fs is None:
            return
        fs.write("a.txt", "a")
        made = self.newest(fs)
        for earlier, later in [(made.time - timedelta(minutes=1), made.time + timedelta(hours=1))]:
            for zone in (None, UTC):  # `workspacefs log --since 2026-11-24T10:00` gives a time without a zone
                assert [e.entry_id for e in fs.history(since=earlier.astimezone(UTC).replace(tzinfo=zone))] == [
                    made.entry_id
                ]
                assert fs.history(since=later.astimezone(UTC).replace(tzinfo=zone)) == []

    def test_undo_puts_back_what_an_entry_changed_as_a_new_entry(self) -> None:
        fs = self.journaled({"keep.txt": "v1\n"})
        if fs is None:
            return
        fs.write("keep.txt", "v2\n")
        overwrite = self.newest(fs)
        [undone] = fs.undo(overwrite.entry_id)
        assert fs.read("keep.txt").content == "v1\n"
        assert undone.operation == "undo" and undone.undoes == overwrite.entry_id
        fs.undo(undone.entry_id)  # an undo can be undone
        assert fs.read("keep.txt").content == "v2\n"
        fs.write("tree/x.txt", "x")
        fs.write("tree/deep/y.txt", "y")
        fs.delete("tree", recursive=True)
        fs.undo(self.newest(fs).entry_id)
        assert self.tree(fs, "tree") == {"tree/x.txt": b"x", "tree/deep": None, "tree/deep/y.txt": b"y"}
        fs.move("tree", "moved")
        fs.undo(self.newest(fs).entry_id)
        assert fs.exists("tree/deep/y.txt") and not fs.exists("moved")

    def test_a_move_or_copy_over_a_directory_is_one_entry_whose_undo_puts_the_old_tree_back(self) -> None:
        old = {"dst/x.txt": "old x", "dst/keep/k.txt": "old k"}
        fs = self.journaled({"src/x.txt": "new x", "src/sub/n.txt": "new n", **old})
        if fs is None:
            return
        before = self.tree(fs)
        fs.copy("src", "dst", overwrite=True)
        copied = self.newest(fs)
        assert copied.operation == "copy" and {"dst/keep/k.txt", "dst/sub/n.txt"} <= set(copied.paths)
        assert self.tree(fs, "dst") == {"dst/x.txt": b"new x", "dst/sub": None, "dst/sub/n.txt": b"new n"}
        fs.undo(copied.entry_id)
        assert self.tree(fs) == before
        fs.move("src", "dst", overwrite=True)
        moved = self.newest(fs)
        assert moved.operation == "move" and "dst/keep/k.txt" in moved.paths
        assert not fs.exists("src") and self.tree(fs, "dst")["dst/sub/n.txt"] == b"new n"
        assert not fs.exists("dst/keep")
        fs.undo(moved.entry_id)
        assert self.tree(fs) == before

    def test_a_file_s_history_includes_the_move_of_a_directory_holding_it(self) -> None:
        """A directory's move is one change naming the directory: a file's history under its old name and under its
        new one lists it (it left out the move that took the file away), a file beside the tree does not."""
        fs = self.journaled({"top/a/x.txt": "one", "top/other.txt": "o"})
        if fs is None:
            return
        fs.move("top/a", "b")
        moved = self.newest(fs)
        fs.write("b/x.txt", "two")
        for path in ("top/a/x.txt", "b/x.txt", "top/a", "b"):
            assert moved.entry_id in [e.entry_id for e in fs.history(path)], path
        assert moved.entry_id not in [e.entry_id for e in fs.history("top/other.txt")]
        assert moved.entry_id not in [e.entry_id for e in fs.history("b/x.txt", since=moved.entry_id)]

    def test_undo_refuses_over_a_later_change_and_changes_nothing(self) -> None:
        fs = self.journaled({"a.txt": "base\n"})
        if fs is None:
            return
        fs.write("a.txt", "agent\n")
        agent = self.newest(fs)
        fs.write("a.txt", "user\n")
        later = self.newest(fs)
        with pytest.raises(UndoConflictError) as refused:
            fs.undo(agent.entry_id)
        assert later.entry_id in refused.value.later
        assert fs.read("a.txt").content == "user\n"
        assert self.newest(fs) == later
        fs.undo(agent.entry_id, force=True)
        assert fs.read("a.txt").content == "base\n"

    def test_undo_the_last_entries_of_one_actor(self) -> None:
        fs = self.journaled()
        if fs is None:
            return
        fs.write("mine.txt", "mine")
        with acting_as("agent-2"):
            fs.write("a.txt", "1")
            fs.write("b.txt", "2")
            fs.write("a.txt", "3")
        fs.write("b.txt", "user")  # someone else changed what the middle entry left
        with pytest.raises(UndoConflictError):
            fs.undo(actor="agent-2", last=3)
        assert fs.read("a.txt").content == "3"  # all or nothing: the newest entry was not undone either
        fs.write("b.txt", "2")  # back as the agent left it: no conflict now
        undone = fs.undo(actor="agent-2", last=3)
        assert len(undone) == 3
        assert not fs.exists("a.txt") and not fs.exists("b.txt") and fs.exists("mine.txt")
        fs.undo([each.entry_id for each in undone])  # several ids at once: newest first, all or none
        assert fs.read("a.txt").content == "3" and fs.read("b.txt").content == "2"
        with acting_as("agent-3"):
            fs.write("d/f.txt", "x")
            fs.move("d", "e")
        fs.undo(actor="agent-3", last=2)  # the move goes back first, then the file goes from where it was
        assert not fs.exists("e") and not fs.exists("d/f.txt")
        with acting_as("agent-4"):
            fs.mkdir("made")
        fs.write("made/user.txt", "mine")  # someone else's file in the directory the agent made
        with pytest.raises(UndoConflictError):
            fs.undo(actor="agent-4")  # putting the directory back would delete it
        assert fs.read("made/user.txt").content == "mine"
        with pytest.raises(ValueError):
            fs.undo(actor="agent-2", last=0)

    def test_conditional_writes_are_entries_too(self) -> None:
        """``write_bytes_if``/``open_write_if`` (the REST API's ``If-Match``) change files like any write."""
        fs = self.journaled({"a.txt": "one"})
        if fs is None or not fs.capabilities.conditional_writes:
            return
        fs.write_bytes_if("a.txt", b"two", expect=content_id_of(b"one"))
        with fs.open_write_if("a.txt", expect=content_id_of(b"two")) as writer:
            writer.write(b"three")
        entries = fs.history(limit=2)
        assert [(c.before, c.after) for e in reversed(entries) for c in e.changes] == [
            (content_id_of(b"one"), content_id_of(b"two")),
            (content_id_of(b"two"), content_id_of(b"three")),
        ]
        fs.undo(entries[0].entry_id)
        assert fs.read("a.txt").content == "two"

    def test_check_undo_says_what_undo_would_do_and_changes_nothing(self) -> None:
        fs = self.journaled({"a.txt": "base\n"})
        if fs is None:
            return
        fs.write("a.txt", "agent\n")
        agent = self.newest(fs)
        assert [e.entry_id for e in fs.check_undo(agent.entry_id)] == [agent.entry_id]
        fs.write("a.txt", "user\n")
        later = self.newest(fs)
        with pytest.raises(UndoConflictError) as refused:
            fs.check_undo(agent.entry_id)
        assert later.entry_id in refused.value.later
        assert [e.entry_id for e in fs.check_undo([agent.entry_id, later.entry_id])] == [
            later.entry_id,
            agent.entry_id,
        ]  # newest first: undoing both is no conflict
        assert [e.entry_id for e in fs.check_undo(agent.entry_id, force=True)] == [agent.entry_id]
        with pytest.raises(HistoryEntryNotFoundError):
            fs.check_undo(later.entry_id + 1_000_000)
        assert fs.read("a.txt").content == "user\n" and self.newest(fs) == later

    def test_grouped_changes_are_one_entry_undone_as_one(self) -> None:
        fs = self.journaled({"old.txt": "old"})
        if fs is None:
            return
        with acting_as("agent-5"), fs.grouped("refactor"):
            fs.write("a.txt", "a")
            fs.write("d/b.txt", "b")
            fs.delete("old.txt")
        entry = self.newest(fs)
        assert (entry.operation, entry.actor.name) == ("refactor", "agent-5")
        assert {c.path for c in entry.changes} >= {"a.txt", "d/b.txt", "old.txt"}
        fs.undo(entry.entry_id)
        assert not fs.exists("a.txt") and not fs.exists("d") and fs.read("old.txt").content == "old"
        with pytest.raises(ValueError):
            fs.grouped("")

    def test_an_operation_inside_a_group_keeps_its_detail_in_the_group_entry(self) -> None:
        """A restore (or a sandbox's command) run inside a grouped block is part of the group's entry; the group's
        ``detail`` says what it was, as the operation's own entry would have."""
        fs = self.journaled({"a.txt": "a1"})
        if fs is None:
            return
        snapshot = fs.snapshot()
        fs.write("a.txt", "a2")
        with fs.grouped("try, then go back"):
            fs.write("b.txt", "b")
            fs.restore(snapshot)
        entry = self.newest(fs)
        assert entry.operation == "try, then go back" and {"a.txt", "b.txt"} <= set(entry.paths)
        assert entry.detail is not None and entry.detail.startswith("restore: ")  # a composite's: its mount's snapshot
        if fs.capabilities.snapshots and not hasattr(fs, "mounts"):
            assert entry.detail == f"restore: {snapshot.snapshot_id}"

    def test_restore_is_journaled_and_undoable(self) -> None:
        fs = self.journaled({"a.txt": "a1", "b.txt": "b1"})
        if fs is None:
            return
        snapshot = fs.snapshot()
        fs.write("a.txt", "a2")
        fs.delete("b.txt")
        fs.write("c.txt", "c")
        fs.restore(snapshot)
        restored = self.newest(fs)
        assert restored.operation == "restore"
        assert {"a.txt", "b.txt", "c.txt"} <= set(restored.paths)
        fs.undo(restored.entry_id)
        assert self.tree(fs) == {"a.txt": b"a2", "c.txt": b"c"}

    def test_read_version_reads_any_version_of_a_file(self) -> None:
        fs = self.journaled()
        if fs is None:
            return
        for text in ("1\n", "2\n", "3\n"):
            fs.write("f.txt", text)
        first, second, third = reversed(fs.history("f.txt"))
        assert fs.read_version(second.entry_id, "f.txt", side="before") == b"1\n"
        assert fs.read_version(second.entry_id, "f.txt") == b"2\n"
        assert fs.read_version(third.entry_id, "f.txt") == b"3\n"
        with pytest.raises(FileNotFoundError):
            fs.read_version(first.entry_id, "f.txt", side="before")  # nothing was there

    def test_pruning_drops_old_entries(self) -> None:
        fs = self.journaled()
        if fs is None:
            return
        fs.write("a.txt", "1")
        fs.write("a.txt", "2")
        old = fs.history()[-1]
        assert fs.prune_history(keep=1) >= 1
        assert len(fs.history()) == 1
        with pytest.raises(HistoryEntryNotFoundError):
            fs.undo(old.entry_id)

    def test_a_watcher_sees_each_change_with_its_actor(self) -> None:
        fs: Any = self.make()
        if not fs.capabilities.watch:
            with pytest.raises(UnsupportedOperationError):
                fs.watch()
            return
        with fs.watch("/") as everything, fs.watch("/only", recursive=False) as only:
            with acting_as("agent-9"):
                fs.write("x.txt", "x")
            fs.write("only/y.txt", "y")
            fs.write("only/deeper/z.txt", "z")
            fs.move("x.txt", "moved.txt")
            fs.delete("moved.txt")
            seen: list[ChangeEvent] = []
            while len({(e.kind, e.path) for e in seen}) < 7:
                event = everything.next_event(_WAIT)
                assert event is not None, f"events missing; got {seen}"
                seen.append(event)
            kinds = {(e.kind, e.path) for e in seen}
            assert {("created", "x.txt"), ("created", "only/y.txt"), ("moved", "moved.txt")} <= kinds
            assert ("deleted", "moved.txt") in kinds
            first = next(e for e in seen if e.path == "x.txt")
            assert first.actor.name == "agent-9" and first.content_id == content_id_of(b"x")
            direct = [only.next_event(_WAIT) for _ in range(3)]  # the path itself and its direct entries
            assert [e.path if e else None for e in direct] == ["only", "only/y.txt", "only/deeper"]
        assert everything.closed
