"""Conformance: ``merge(base, ours, theirs)`` and merging a ``fork()`` back, gated by ``capabilities``.

A backend without ``capabilities.merge`` must refuse with ``UnsupportedOperationError``; one with it must
give the same answers as every other. Branches are made by snapshot and restore on one filesystem, and
(``capabilities.fork``) by two forks edited apart, as two agents would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workspacefs.errors import UnsupportedOperationError
from workspacefs.merge import MergeResult
from workspacefs.testing._base import Content, SuiteBase

__all__ = ["MergeSuite"]

Edit = Callable[[Any], object]
TEXT = "".join(f"line {n}\n" for n in range(1, 11))


def _marked(ours: str, theirs: str) -> str:
    """A git-style conflict as the merge writes it (built here so no line of this file starts a doctest)."""
    return f"{'<' * 7} ours\n{ours}{'=' * 7}\n{theirs}{'>' * 7} theirs\n"


def _replace_line(text: str, number: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[number - 1] = new + "\n"
    return "".join(lines)


class MergeSuite(SuiteBase):
    """Three-way merge of snapshots; fork, work, merge back."""

    def fork_filesystem(self, fs: Any) -> Any:
        """A fork of ``fs``: ``fs.fork()``, or for a host directory ``fs.fork(root=...)`` in a fresh directory (override
        when your backend's ``fork`` needs other arguments)."""
        if fs.capabilities.host_directory:
            self._forks = getattr(self, "_forks", 0) + 1
            forked = fs.fork(root=self.tmp_path / f"fork-{self._forks}")
        else:
            forked = fs.fork()
        self._opened.append(forked)
        return forked

    def mergeable(self, files: Mapping[str, Content] | None = None) -> Any:
        """A filesystem holding ``files`` that can merge (the test fails if ``capabilities.merge`` is false)."""
        fs: Any = self.make(files)
        assert fs.capabilities.merge, "this test runs only where capabilities.merge is set"
        return fs

    def branch(self, files: Mapping[str, Content], ours: Edit, theirs: Edit) -> tuple[Any, MergeResult, MergeResult]:
        """Snapshot ``files`` as the base, apply each side's edit to its own branch, and merge them (without and
        with markers). The filesystem is left at ``ours``."""
        fs = self.mergeable(files)
        base = fs.snapshot(tag="base")
        theirs(fs)
        their_snapshot = fs.snapshot(tag="theirs")
        fs.restore(base)
        ours(fs)
        our_snapshot = fs.snapshot(tag="ours")
        plain = fs.merge(base, our_snapshot, their_snapshot)
        marked = fs.merge(base, our_snapshot, their_snapshot, markers=True)
        return fs, plain, marked

    def applied(self, fs: Any, result: MergeResult) -> dict[str, bytes | None]:
        fs.restore(result.snapshot)
        return self.tree(fs)

    # --- without the capability ------------------------------------------------------------------------

    def test_merge_refused_without_the_capability(self) -> None:
        fs: Any = self.make({"a.txt": "a"})
        if fs.capabilities.merge:
            return
        snapshot = fs.snapshot()
        with pytest.raises(UnsupportedOperationError):
            fs.merge(snapshot, snapshot, snapshot)

    # --- file level ----------------------------------------------------------------------------------------

    def test_changes_on_different_files_merge(self) -> None:
        if not self.make().capabilities.merge:
            return
        fs, result, _ = self.branch(
            {"a.txt": "a\n", "b.txt": "b\n", "gone.txt": "g\n"},
            lambda f: f.write("a.txt", "A\n"),
            lambda f: (f.write("b.txt", "B\n"), f.write("new/c.txt", "c\n"), f.delete("gone.txt")),
        )
        assert result.clean and result.conflicts == ()
        assert result.added == ("new/c.txt",) and result.modified == ("b.txt",) and result.deleted == ("gone.txt",)
        before = self.tree(fs)
        assert before["a.txt"] == b"A\n" and before["b.txt"] == b"b\n"  # merging never touches the live files
        after = self.applied(fs, result)
        assert {p: c for p, c in after.items() if c is not None} == {
            "a.txt": b"A\n",
            "b.txt": b"B\n",
            "new/c.txt": b"c\n",
        }
        assert fs.current_snapshot_id == result.snapshot.snapshot_id

    def test_same_change_on_both_sides_is_clean(self) -> None:
        if not self.make().capabilities.merge:
            return
        edit: Edit = lambda f: f.write("a.txt", "same\n")  # noqa: E731
        fs, result, _ = self.branch({"a.txt": "a\n"}, edit, edit)
        assert result.clean and result.modified == () and result.merged == ()
        assert self.applied(fs, result)["a.txt"] == b"same\n"

    # --- line level ------------------------------------------------------------------------------------------

    def test_different_lines_merge_cleanly(self) -> None:
        if not self.make().capabilities.merge:
            return
        fs, result, marked = self.branch(
            {"src/doc.txt": TEXT},
            lambda f: f.write("src/doc.txt", _replace_line(TEXT, 2, "ours two")),
            lambda f: f.write("src/doc.txt", _replace_line(TEXT, 8, "theirs eight")),
        )
        assert result.clean and marked.clean
        assert result.merged == ("src/doc.txt",) and result.modified == ("src/doc.txt",)
        expected = _replace_line(_replace_line(TEXT, 2, "ours two"), 8, "theirs eight").encode()
        assert self.applied(fs, result)["src/doc.txt"] == expected

    def test_same_line_conflicts(self) -> None:
        if not self.make().capabilities.merge:
            return
        ours_text, theirs_text = _replace_line(TEXT, 5, "ours five"), _replace_line(TEXT, 5, "theirs five")
        fs, result, marked = self.branch(
            {"doc.txt": TEXT},
            lambda f: f.write("doc.txt", ours_text),
            lambda f: f.write("doc.txt", theirs_text),
        )
        (conflict,) = result.conflicts
        assert (conflict.path, conflict.kind) == ("doc.txt", "content")
        (hunk,) = conflict.hunks
        assert (hunk.ours_start, hunk.ours, hunk.base, hunk.theirs) == (5, "ours five\n", "line 5\n", "theirs five\n")
        assert self.applied(fs, result)["doc.txt"] == ours_text.encode()  # no markers unless asked: ours kept
        assert [c.path for c in marked.conflicts] == ["doc.txt"]
        with_markers = self.applied(fs, marked)["doc.txt"]
        assert (
            with_markers
            == (
                "".join(f"line {n}\n" for n in range(1, 5))
                + _marked("ours five\n", "theirs five\n")
                + "".join(f"line {n}\n" for n in range(6, 11))
            ).encode()
        )

    # --- kinds of conflict -------------------------------------------------------------------------------------

    def test_modify_delete_conflicts(self) -> None:
        if not self.make().capabilities.merge:
            return
        fs, result, marked = self.branch(
            {"a.txt": "a\n", "b.txt": "b\n"},
            lambda f: (f.write("a.txt", "changed\n"), f.delete("b.txt")),
            lambda f: (f.delete("a.txt"), f.write("b.txt", "changed\n")),
        )
        assert [(c.path, c.kind) for c in result.conflicts] == [("a.txt", "modify/delete"), ("b.txt", "modify/delete")]
        tree = self.applied(fs, result)
        assert tree.get("a.txt") == b"changed\n" and "b.txt" not in tree  # ours kept
        assert [c.kind for c in marked.conflicts] == ["modify/delete", "modify/delete"]

    def test_add_add(self) -> None:
        if not self.make().capabilities.merge:
            return
        fs, result, marked = self.branch(
            {"keep.txt": "k\n"},
            lambda f: (f.write("same.txt", "one\n"), f.write("diff.txt", "ours\n")),
            lambda f: (f.write("same.txt", "one\n"), f.write("diff.txt", "theirs\n")),
        )
        assert [(c.path, c.kind) for c in result.conflicts] == [("diff.txt", "add/add")]
        tree = self.applied(fs, result)
        assert tree["same.txt"] == b"one\n" and tree["diff.txt"] == b"ours\n"
        assert self.applied(fs, marked)["diff.txt"] == _marked("ours\n", "theirs\n").encode()

    def test_binary_conflict(self) -> None:
        if not self.make().capabilities.merge:
            return
        fs, result, marked = self.branch(
            {"blob.bin": b"\x00\x01\x02\xff"},
            lambda f: f.write_bytes("blob.bin", b"\x00ours\xff"),
            lambda f: f.write_bytes("blob.bin", b"\x00theirs\xff"),
        )
        assert [(c.path, c.kind, c.hunks) for c in result.conflicts] == [("blob.bin", "binary", ())]
        assert [c.kind for c in marked.conflicts] == ["binary"]
        assert self.applied(fs, marked)["blob.bin"] == b"\x00ours\xff"  # markers never go into binary content

    def test_binary_changed_on_one_side_is_taken(self) -> None:
        if not self.make().capabilities.merge:
            return
        fs, result, _ = self.branch(
            {"blob.bin": b"\x00old\xff"}, lambda f: None, lambda f: f.write_bytes("blob.bin", b"\x00new\xff")
        )
        assert result.clean and self.applied(fs, result)["blob.bin"] == b"\x00new\xff"

    def test_file_against_directory_conflicts(self) -> None:
        if not self.make().capabilities.merge:
            return
        fs, result, _ = self.branch(
            {"keep.txt": "k\n"},
            lambda f: f.write("thing", "a file\n"),
            lambda f: f.write("thing/inside.txt", "in a directory\n"),
        )
        assert [(c.path, c.kind) for c in result.conflicts] == [("thing", "file/directory")]
        tree = self.applied(fs, result)
        assert tree["thing"] == b"a file\n" and "thing/inside.txt" not in tree

    def test_directory_against_file_keeps_ours(self) -> None:
        if not self.make().capabilities.merge:
            return
        fs, result, _ = self.branch(
            {"keep.txt": "k\n"},
            lambda f: f.write("thing/inside.txt", "in a directory\n"),
            lambda f: f.write("thing", "a file\n"),
        )
        assert [(c.path, c.kind) for c in result.conflicts] == [("thing", "file/directory")]
        assert self.applied(fs, result)["thing/inside.txt"] == b"in a directory\n"

    def test_theirs_directory_replaces_a_deleted_file(self) -> None:
        if not self.make().capabilities.merge:
            return
        fs, result, _ = self.branch(
            {"thing": "a file\n"},
            lambda f: None,
            lambda f: (f.delete("thing"), f.write("thing/inside.txt", "now a directory\n")),
        )
        assert result.clean
        assert self.applied(fs, result) == {"thing": None, "thing/inside.txt": b"now a directory\n"}

    # --- the read-only flag (capabilities.file_read_only) ------------------------------------------------------

    def flagged(self, files: Mapping[str, Content], locked: tuple[str, ...], ours: Edit, theirs: Edit) -> Any:
        """As :meth:`branch`, from ``files`` with ``locked`` read-only in the base: the merged result, applied."""
        fs = self.mergeable(files)
        for path in locked:
            fs.set_read_only(path)
        base = fs.snapshot()
        theirs(fs)
        their_snapshot = fs.snapshot()
        fs.restore(base)
        ours(fs)
        result = fs.merge(base, fs.snapshot(), their_snapshot)
        assert result.clean, result.conflicts
        fs.restore(result.snapshot)
        return fs

    def test_a_flag_set_on_one_side_is_taken(self) -> None:
        if not self.make().capabilities.file_read_only:
            return
        unlocked: Edit = lambda f: f.set_read_only("a.txt", False)  # noqa: E731
        theirs_locks = self.flagged({"a.txt": "a\n"}, (), lambda f: None, lambda f: f.set_read_only("a.txt"))
        assert theirs_locks.stat("a.txt").read_only
        ours_locks = self.flagged(
            {"a.txt": "a\n"}, (), lambda f: f.set_read_only("a.txt"), lambda f: f.write("a.txt", "theirs\n")
        )
        assert ours_locks.stat("a.txt").read_only and ours_locks.read("a.txt").content == "theirs\n"
        theirs_unlocks = self.flagged({"a.txt": "a\n"}, ("a.txt",), lambda f: None, unlocked)
        assert not theirs_unlocks.stat("a.txt").read_only
        relocked: Edit = lambda f: (unlocked(f), f.write("a.txt", "theirs\n"), f.set_read_only("a.txt"))  # noqa: E731
        ours_unlocks = self.flagged({"a.txt": "a\n"}, ("a.txt",), unlocked, relocked)
        assert not ours_unlocks.stat("a.txt").read_only and ours_unlocks.read("a.txt").content == "theirs\n"

    def test_a_line_merge_keeps_the_merged_flag(self) -> None:
        if not self.make().capabilities.file_read_only:
            return
        fs = self.flagged(
            {"doc.txt": TEXT},
            (),
            lambda f: (f.write("doc.txt", _replace_line(TEXT, 2, "ours")), f.set_read_only("doc.txt")),
            lambda f: f.write("doc.txt", _replace_line(TEXT, 8, "theirs")),
        )
        assert fs.read("doc.txt").content == _replace_line(_replace_line(TEXT, 2, "ours"), 8, "theirs")
        assert fs.stat("doc.txt").read_only

    def test_flags_set_differently_on_both_sides_keep_the_file_read_only(self) -> None:
        if not self.make().capabilities.file_read_only:
            return
        lock: Edit = lambda f: (f.write("new.txt", "same\n"), f.set_read_only("new.txt"))  # noqa: E731
        add: Edit = lambda f: f.write("new.txt", "same\n")  # noqa: E731
        ours_locked = self.flagged({"k.txt": "k\n"}, (), lock, add)
        theirs_locked = self.flagged({"k.txt": "k\n"}, (), add, lock)
        assert ours_locked.stat("new.txt").read_only and theirs_locked.stat("new.txt").read_only

    # --- forks: two agents ---------------------------------------------------------------------------------------

    def test_two_forks_editing_different_lines_merge_back(self) -> None:
        parent = self.make({"notes.md": TEXT})
        if not (parent.capabilities.fork and parent.capabilities.merge):
            return
        fs: Any = parent
        base = fs.snapshot(tag="base")
        alice, bob = self.fork_filesystem(fs), self.fork_filesystem(fs)
        alice.write("notes.md", _replace_line(TEXT, 1, "alice"))
        bob.write("notes.md", _replace_line(TEXT, 10, "bob"))
        bob.write("bob.txt", "new\n")
        result = fs.merge(base, alice.snapshot(tag="alice"), bob.snapshot(tag="bob"))
        assert result.clean, result.conflicts
        fs.restore(result.snapshot)
        assert fs.read("notes.md").content == _replace_line(_replace_line(TEXT, 1, "alice"), 10, "bob")
        assert fs.read("bob.txt").content == "new\n"

    def test_two_forks_editing_the_same_line_conflict(self) -> None:
        parent = self.make({"notes.md": TEXT})
        if not (parent.capabilities.fork and parent.capabilities.merge):
            return
        fs: Any = parent
        base = fs.snapshot(tag="base")
        alice, bob = self.fork_filesystem(fs), self.fork_filesystem(fs)
        alice.write("notes.md", _replace_line(TEXT, 3, "alice"))
        bob.write("notes.md", _replace_line(TEXT, 3, "bob"))
        result = fs.merge(base, alice.snapshot(), bob.snapshot(), markers=True)
        assert [(c.path, c.kind) for c in result.conflicts] == [("notes.md", "content")]
        fs.restore(result.snapshot)
        assert _marked("alice\n", "bob\n") in fs.read("notes.md").content

    def test_fork_is_independent_and_merges_into_the_live_parent(self) -> None:
        parent = self.make({"a.txt": "a\n", "b.txt": "b\n"})
        if not (parent.capabilities.fork and parent.capabilities.merge):
            return
        fs: Any = parent
        base = fs.snapshot()
        child = self.fork_filesystem(fs)
        child.write("b.txt", "child\n")
        assert fs.read("b.txt").content == "b\n"
        fs.write("a.txt", "parent\n")
        assert child.read("a.txt").content == "a\n"
        result = fs.merge(base, fs.snapshot(), child.snapshot())
        fs.restore(result.snapshot)
        assert (fs.read("a.txt").content, fs.read("b.txt").content) == ("parent\n", "child\n")
        child.restore(result.snapshot)  # the family shares snapshots both ways
        assert child.read("a.txt").content == "parent\n"

    # --- a property ----------------------------------------------------------------------------------------------

    def test_merging_into_an_unchanged_side_gives_the_other(self) -> None:
        lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "x\n", "y"]), max_size=6)
        runner = settings(
            max_examples=15,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )(given(lines, lines)(self._unchanged_side))
        runner()

    def _unchanged_side(self, base: list[str], theirs: list[str]) -> None:
        fs = self.make({"f.txt": "".join(base)})
        if not fs.capabilities.merge:
            return
        merging: Any = fs
        taken = merging.snapshot()
        fs.write("f.txt", "".join(theirs))
        other = merging.snapshot()
        result = merging.merge(taken, taken, other)
        assert result.clean
        merging.restore(result.snapshot)
        assert fs.read("f.txt").content == "".join(theirs)
        flipped = merging.merge(taken, other, taken)
        assert flipped.clean and flipped.added == flipped.modified == flipped.deleted == ()
