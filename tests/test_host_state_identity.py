"""A host workspace's snapshots, journal and restore record belong to the directory that made them, not to its path.

They are found by the root's path (by default under the user's cache). A workspace deleted and another made at its
path (a fresh checkout, a temporary directory whose name comes round again) saw the first one's history, could undo
into it, and listed and restored its snapshots: another workspace's files. The first open of the new directory now
sets the old state aside (kept under ``<snapshot_dir>/retired/``, never shown to it); the same directory, reopened
or moved away and back, keeps its own.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from workspacefs import HostFilesystem
from workspacefs.backends.host._temps import root_key
from workspacefs.errors import HistoryEntryNotFoundError, SnapshotError


def made(root: Path, snapshots: Path | None, files: dict[str, str]) -> None:
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        for path, content in files.items():
            fs.write(path, content)
        fs.snapshot(tag="first")
        fs.write("later.txt", "later\n")


def replaced(root: Path) -> None:
    """Another workspace at the same path: the first one deleted, a new directory with other files."""
    shutil.rmtree(root)
    root.mkdir()
    (root / "theirs.txt").write_text("another workspace's file\n")


@pytest.mark.parametrize("default_dir", [False, True])
def test_a_new_directory_at_a_workspace_s_path_sees_none_of_its_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, default_dir: bool
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root, snapshots = tmp_path / "ws", None if default_dir else tmp_path / "snapshots"
    made(root, snapshots, {"secret.txt": "the first workspace's secret\n"})
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        [old] = fs.snapshots()
        old_entries = fs.history()
        assert len(old_entries) == 2
    replaced(root)
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        assert fs.history() == []  # the old code listed the first workspace's two writes
        assert fs.snapshots() == []  # ... and its snapshot
        with pytest.raises(SnapshotError):
            fs.restore(old)  # the old code put secret.txt into this workspace and deleted theirs.txt
        with pytest.raises(HistoryEntryNotFoundError):
            fs.undo(old_entries[0].entry_id)
        assert sorted(os.listdir(root)) == ["theirs.txt"]
        assert fs.reaped.state_retired
        fs.write("mine.txt", "new\n")
        assert [e.operation for e in fs.history()] == ["write"]
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:  # its own state stays its own
        assert not fs.reaped.state_retired and [e.operation for e in fs.history()] == ["write"]
    kept = (tmp_path / "cache" / "workspacefs" / "snapshots" / root_key(str(root))) if default_dir else snapshots
    assert kept is not None
    [aside] = (kept / "retired").iterdir()  # set aside, not deleted
    assert sorted(p.name for p in aside.iterdir()) == ["journal", "snapshots"]


def test_the_same_directory_reopened_or_moved_back_keeps_its_state(tmp_path: Path) -> None:
    root, snapshots = tmp_path / "ws", tmp_path / "snapshots"
    made(root, snapshots, {"a.txt": "a\n"})
    root.rename(tmp_path / "away")
    (tmp_path / "away").rename(root)
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        assert not fs.reaped.state_retired
        assert len(fs.history()) == 2 and [s.tag for s in fs.snapshots()] == ["first"]


def test_state_from_before_identities_were_recorded_is_adopted(tmp_path: Path) -> None:
    root, snapshots = tmp_path / "ws", tmp_path / "snapshots"
    made(root, snapshots, {"a.txt": "a\n"})
    shutil.rmtree(snapshots / "roots")  # as an older version left it
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        assert not fs.reaped.state_retired and len(fs.history()) == 2 and len(fs.snapshots()) == 1


def test_a_restore_record_the_old_directory_left_is_never_finished_in_the_new_one(tmp_path: Path) -> None:
    """A restore killed in the first workspace: its record names that workspace's snapshot. The next open of the
    path, now another directory, must not restore it there."""
    root, snapshots = tmp_path / "ws", tmp_path / "snapshots"
    made(root, snapshots, {"secret.txt": "the first workspace's secret\n"})
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        [old] = fs.snapshots()
        record = fs._restoring.path
    record.parent.mkdir(exist_ok=True)
    record.write_text(json.dumps({"snapshot": str(old.snapshot_id), "before": {}}))  # nobody holds it: dead
    replaced(root)
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        assert fs.reaped.state_retired and fs.reaped.restores_finished == 0
        assert sorted(os.listdir(root)) == ["theirs.txt"]
        assert not record.exists()


def test_a_fork_made_again_where_a_deleted_fork_was_is_one_family_with_its_parent(tmp_path: Path) -> None:
    """``fork(root=...)`` joins the family before it opens the new root: that open, finding the deleted fork's
    identity, took the path out of the family again, and the fork failed ("belongs to another workspace root")."""
    root, snapshots, forked = tmp_path / "root", tmp_path / "snapshots", tmp_path / "fork"
    made(root, snapshots, {"a.txt": "a\n"})
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        with fs.fork(root=forked) as first:
            first.write("old-fork.txt", "old\n")
            old = first.snapshot(tag="old fork")
        shutil.rmtree(forked)
        with fs.fork(root=forked) as again:
            assert again.reaped.state_retired  # the deleted fork's state is set aside
            assert (forked / "a.txt").read_text() == "a\n" and not (forked / "old-fork.txt").exists()
            work = again.snapshot(tag="fork work")
            mergeable = {s.snapshot_id for s in fs.mergeable_snapshots()}
            assert work.snapshot_id in mergeable and old.snapshot_id not in mergeable


@pytest.mark.parametrize("recorded", ["inode only", "another birth time"])
def test_an_identity_recorded_without_a_birth_time_keeps_the_directory_s_state(tmp_path: Path, recorded: str) -> None:
    """An open through a file system, kernel or libc that gives no birth time records the inode only: an open that
    gets one must keep that directory's state (it retired it), and still retire another directory's."""
    root, snapshots = tmp_path / "ws", tmp_path / "snapshots"
    made(root, snapshots, {"a.txt": "a\n"})
    inode = os.stat(root).st_ino
    record = snapshots / "roots" / root_key(str(root))
    assert record.read_text().startswith(f"{inode}:")  # this machine gives birth times
    record.write_text(str(inode) if recorded == "inode only" else f"{inode}:1.000000000")
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        assert fs.reaped.state_retired is (recorded != "inode only")
        assert len(fs.history()) == (2 if recorded == "inode only" else 0)
    assert record.read_text().startswith(f"{inode}:") and record.read_text() != f"{inode}:1.000000000"
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        assert not fs.reaped.state_retired
