"""Conformance: read-only filesystems, and snapshots, restore and diff."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from workspacefs.errors import ReadOnlyError, SnapshotError, SnapshotIncompatibleError, SnapshotNotFoundError
from workspacefs.protocol import Filesystem, SnapshotableFilesystem
from workspacefs.results import FilesystemSnapshot
from workspacefs.testing._base import SuiteBase

__all__ = ["ReadOnlySuite", "SnapshotSuite"]

MUTATIONS: dict[str, Callable[[Filesystem], Any]] = {
    "write": lambda fs: fs.write("new.txt", "x"),
    "write_existing": lambda fs: fs.write("a.txt", "x"),
    "write_bytes": lambda fs: fs.write_bytes("a.txt", b"x", mode="append"),
    "open_write": lambda fs: fs.open_write("a.txt"),
    "delete": lambda fs: fs.delete("a.txt"),
    "delete_tree": lambda fs: fs.delete("dir", recursive=True),
    "mkdir": lambda fs: fs.mkdir("newdir"),
    "move": lambda fs: fs.move("a.txt", "b.txt"),
    "copy": lambda fs: fs.copy("a.txt", "b.txt"),
}
READ_ONLY_FILES = {"a.txt": "alpha\n", "dir/inner.txt": "inner\n"}


class ReadOnlySuite(SuiteBase):
    """``read_only=True``: reads work; every mutation raises ``PermissionError`` and changes nothing."""

    def test_read_only_property(self) -> None:
        fs = self.make_read_only(READ_ONLY_FILES)
        assert fs.read_only is True
        assert self.make().read_only is False

    def test_reads_work(self) -> None:
        fs = self.make_read_only(READ_ONLY_FILES)
        assert fs.read("a.txt").content == "alpha\n"
        assert [e.name for e in fs.list()] == ["a.txt", "dir"]
        assert [m.path for m in fs.glob("**/*.txt")] == ["a.txt", "dir/inner.txt"]
        assert [m.path for m in fs.grep("inner")] == ["dir/inner.txt"]
        with fs.open_read("a.txt") as reader:
            assert reader.read() == b"alpha\n"

    @pytest.mark.parametrize("mutation", sorted(MUTATIONS))
    def test_every_mutation_raises_permission_error(self, mutation: str) -> None:
        fs = self.make_read_only(READ_ONLY_FILES)
        with pytest.raises(ReadOnlyError):  # a PermissionError
            MUTATIONS[mutation](fs)
        assert self.tree(fs) == {"a.txt": b"alpha\n", "dir": None, "dir/inner.txt": b"inner\n"}

    def test_snapshot_allowed_restore_refused(self) -> None:
        fs = self.make_read_only(READ_ONLY_FILES)
        assert isinstance(fs, SnapshotableFilesystem)
        snapshot = fs.snapshot(tag="ro")
        with pytest.raises(ReadOnlyError):
            fs.restore(snapshot)

    def test_read_only_with_mount_point(self) -> None:
        fs = self.make_read_only(READ_ONLY_FILES, mount_point="/workspace")
        assert fs.read("/workspace/a.txt").content == "alpha\n"
        with pytest.raises(PermissionError):
            fs.write("/workspace/a.txt", "x")


class SnapshotSuite(SuiteBase):
    """``snapshot``/``restore``/``diff``/``current_snapshot_id`` round trips."""

    def test_is_snapshotable(self) -> None:
        assert isinstance(self.make(), SnapshotableFilesystem)

    def test_snapshot_fields(self) -> None:
        fs = self.make_snapshotable({"a.txt": "12345", "d/b.txt": "678"})
        snapshot = fs.snapshot(tag="first")
        assert isinstance(snapshot, FilesystemSnapshot)
        assert isinstance(snapshot.snapshot_id, uuid.UUID)
        assert snapshot.created_at.tzinfo is not None
        assert abs((datetime.now(UTC) - snapshot.created_at).total_seconds()) < 60
        assert snapshot.tag == "first"
        assert (snapshot.file_count, snapshot.total_bytes) == (2, 8)

    def test_parent_id_is_the_snapshot_the_state_descends_from(self) -> None:
        """``parent_id``: the newest snapshot this filesystem took or restored (``None`` before either)."""
        fs = self.make_snapshotable({"a.txt": "a"})
        first = fs.snapshot(tag="first")
        assert first.parent_id is None
        fs.write("a.txt", "b")
        second = fs.snapshot()
        assert second.parent_id == first.snapshot_id
        fs.restore(first)
        third = fs.snapshot()
        assert third.parent_id == first.snapshot_id  # a branch from the restored state
        fs.delete_snapshot(third)
        assert fs.snapshot().parent_id == first.snapshot_id  # lineage skips a deleted head

    def test_snapshots_are_listed_and_deleted(self) -> None:
        fs = self.make_snapshotable({"a.txt": "a"})
        first = fs.snapshot(tag="one")
        second = fs.snapshot(tag="two")
        listed = [s.snapshot_id for s in fs.snapshots()]
        assert listed[-2:] == [first.snapshot_id, second.snapshot_id]
        assert [s.tag for s in fs.snapshots() if s.snapshot_id == first.snapshot_id] == ["one"]
        fs.delete_snapshot(first)
        assert first.snapshot_id not in [s.snapshot_id for s in fs.snapshots()]
        with pytest.raises(SnapshotNotFoundError):
            fs.delete_snapshot(first)
        assert fs.diff(second).is_empty  # the other one still works

    def test_snapshot_ids_are_unique(self) -> None:
        fs = self.make_snapshotable({"a.txt": "a"})
        assert len({fs.snapshot().snapshot_id for _ in range(5)}) == 5

    def test_restore_undoes_additions(self) -> None:
        fs = self.make_snapshotable({"a.txt": "a"})
        snapshot = fs.snapshot()
        fs.write("new.txt", "new")
        fs.write("newdir/x.txt", "x")
        fs.restore(snapshot)
        assert self.tree(fs) == {"a.txt": b"a"}

    def test_restore_undoes_modifications(self) -> None:
        fs = self.make_snapshotable({"a.txt": "original", "b.bin": b"\x00\x01"})
        snapshot = fs.snapshot()
        fs.write("a.txt", "changed")
        fs.write_bytes("b.bin", b"\x02", mode="append")
        fs.restore(snapshot)
        assert fs.read("a.txt").content == "original"
        assert fs.read_bytes("b.bin").content == b"\x00\x01"

    def test_restore_undoes_recursive_deletes(self) -> None:
        files = {"dir/a.txt": "a", "dir/sub/b.txt": "b", "top.txt": "t"}
        fs = self.make_snapshotable(files)
        fs.mkdir("dir/empty")
        snapshot = fs.snapshot()
        fs.delete("dir", recursive=True)
        fs.delete("top.txt")
        fs.restore(snapshot)
        assert self.tree(fs) == {
            "dir": None,
            "dir/a.txt": b"a",
            "dir/empty": None,
            "dir/sub": None,
            "dir/sub/b.txt": b"b",
            "top.txt": b"t",
        }

    def test_restore_undoes_moves_and_copies(self) -> None:
        fs = self.make_snapshotable({"src/a.txt": "a"})
        snapshot = fs.snapshot()
        fs.copy("src", "copy")
        fs.move("src", "moved")
        fs.restore(snapshot)
        assert self.tree(fs) == {"src": None, "src/a.txt": b"a"}

    def test_several_snapshots(self) -> None:
        fs = self.make_snapshotable()
        fs.write("f.txt", "v1")
        first = fs.snapshot(tag="v1")
        fs.write("f.txt", "v2")
        fs.write("g.txt", "g")
        second = fs.snapshot(tag="v2")
        fs.write("f.txt", "v3")
        fs.delete("g.txt")
        fs.restore(first)
        assert self.tree(fs) == {"f.txt": b"v1"}
        fs.restore(second)
        assert self.tree(fs) == {"f.txt": b"v2", "g.txt": b"g"}
        fs.restore(first)
        assert self.tree(fs) == {"f.txt": b"v1"}

    def test_writes_after_restore_and_restore_again(self) -> None:
        fs = self.make_snapshotable({"f.txt": "base"})
        snapshot = fs.snapshot()
        fs.write("f.txt", "one")
        fs.restore(snapshot)
        fs.write("f.txt", "two")
        fs.write("extra.txt", "e")
        fs.restore(snapshot)
        assert self.tree(fs) == {"f.txt": b"base"}

    def test_empty_state_round_trip(self) -> None:
        fs = self.make_snapshotable()
        snapshot = fs.snapshot()
        fs.write("a/b.txt", "x")
        fs.restore(snapshot)
        assert list(fs.list()) == []

    def test_snapshot_is_isolated_from_later_writes(self) -> None:
        fs = self.make_snapshotable({"big.txt": "x" * 100_000})
        snapshot = fs.snapshot()
        fs.write("big.txt", "y" * 100_000)
        fs.write("big.txt", "z", mode="append")
        fs.restore(snapshot)
        assert fs.read("big.txt").content == "x" * 100_000

    def test_current_snapshot_id(self) -> None:
        fs = self.make_snapshotable({"a.txt": "a"})
        assert fs.current_snapshot_id is None
        first = fs.snapshot()
        assert fs.current_snapshot_id is None
        second = fs.snapshot()
        fs.restore(first)
        assert fs.current_snapshot_id == first.snapshot_id
        fs.restore(second)
        assert fs.current_snapshot_id == second.snapshot_id

    def test_diff_against_current_state(self) -> None:
        fs = self.make_snapshotable({"keep.txt": "k", "change.txt": "old", "remove.txt": "r", "d/gone.txt": "g"})
        base = fs.snapshot()
        fs.write("change.txt", "new")
        fs.write("add/new.txt", "n")
        fs.delete("remove.txt")
        fs.delete("d", recursive=True)
        diff = fs.diff(base)
        assert diff.added == ("add/new.txt",)
        assert diff.modified == ("change.txt",)
        assert diff.deleted == ("d/gone.txt", "remove.txt")
        assert diff.unchanged_count == 1

    def test_diff_between_two_snapshots(self) -> None:
        fs = self.make_snapshotable({"config.py": "DEBUG = True", "app.py": "from config import DEBUG"})
        v1 = fs.snapshot(tag="initial")
        fs.write("config.py", "DEBUG = False")
        fs.write("tests.py", "import pytest")
        v2 = fs.snapshot(tag="with-tests")
        fs.write("later.py", "ignored by the diff of v1 and v2")
        diff = fs.diff(v1, v2)
        assert (diff.added, diff.modified, diff.deleted, diff.unchanged_count) == (
            ("tests.py",),
            ("config.py",),
            (),
            1,
        )
        reverse = fs.diff(v2, v1)
        assert (reverse.added, reverse.deleted) == ((), ("tests.py",))

    def test_rewriting_same_bytes_is_not_a_modification(self) -> None:
        fs = self.make_snapshotable({"same.txt": "same"})
        base = fs.snapshot()
        fs.write("same.txt", "same")
        fs.copy("same.txt", "twin.txt")
        diff = fs.diff(base)
        assert (diff.added, diff.modified, diff.unchanged_count) == (("twin.txt",), (), 1)

    def test_diff_lists_files_only(self) -> None:
        fs = self.make_snapshotable()
        base = fs.snapshot()
        fs.mkdir("empty/dir")
        fs.write("d/f.txt", "f")
        assert fs.diff(base).added == ("d/f.txt",)

    def test_empty_diff(self) -> None:
        fs = self.make_snapshotable({"a.txt": "a"})
        diff = fs.diff(fs.snapshot())
        assert (diff.added, diff.modified, diff.deleted, diff.unchanged_count) == ((), (), (), 1)

    def test_restoring_a_foreign_snapshot_is_refused(self) -> None:
        fs = self.make_snapshotable({"a.txt": "a"})
        foreign = FilesystemSnapshot(snapshot_id=uuid.uuid4(), created_at=datetime.now(UTC), backend="elsewhere")
        with pytest.raises(SnapshotIncompatibleError) as caught:
            fs.restore(foreign)
        assert isinstance(caught.value, ValueError)
        assert isinstance(caught.value, SnapshotError) and isinstance(caught.value, RuntimeError)
        with pytest.raises(SnapshotIncompatibleError):
            fs.diff(foreign)
        assert fs.read("a.txt").content == "a"
        assert fs.current_snapshot_id is None

    def test_snapshot_tag_must_be_text(self) -> None:
        fs = self.make_snapshotable()
        with pytest.raises(TypeError):
            fs.snapshot(tag=42)  # type: ignore[arg-type]
