"""A host ``restore`` killed (SIGKILL) part way is finished by the next open of the workspace.

A restore changes many names, each atomically: a kill part way left some files as the snapshot holds them and the
rest as they were, for good. Now the next open that may write restores the snapshot again from the record the
killed restore left, and with history on journals it as one entry whose undo puts back what the workspace held
before the first attempt (also the files that attempt had already changed). Kill points: after the extras are
removed, after the first file is put back, and after every file is back but before the journal entry.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_host_tree_replace_crash import hidden, kill_at

from workspacefs import HostFilesystem
from workspacefs.history import JournalEntry

KILLED = textwrap.dedent(
    """
    import sys
    from workspacefs import HostFilesystem
    from workspacefs.backends.host import _filesystem, _snapshots, _tree
    root, snapshots, history, operation, point = sys.argv[1:6]
    fs = HostFilesystem(root, snapshot_dir=snapshots, history=history == "on")
    target = next(s for s in fs.snapshots() if s.tag == "v1")
    installed = 0

    def stop(at):
        if at == point:  # the step took effect: the parent kills this process here
            print("stopped", flush=True)
            sys.stdin.readline()

    real_extras, real_install = _snapshots.HostSnapshots._remove_extras, _tree.HostTree.install
    real_files = _filesystem.HostFilesystem._restore_files

    def remove_extras(self, manifest):
        real_extras(self, manifest)
        stop("extras")

    def install(self, *args, **kwargs):
        global installed
        real_install(self, *args, **kwargs)
        installed += 1
        if installed == 1:
            stop("install")

    def restore_files(self, snapshot):
        real_files(self, snapshot)
        stop("files")

    _snapshots.HostSnapshots._remove_extras = remove_extras
    _tree.HostTree.install = install
    _filesystem.HostFilesystem._restore_files = restore_files
    fs.restore(target)
    print("done", flush=True)
    """
)

V1 = {"a.txt": "a1\n", "b.txt": "b1\n", "d/c.txt": "c1\n", "d/e.txt": "e1\n"}
V2 = {"a.txt": "a2\n", "b.txt": "b2\n", "d/c.txt": "c2\n", "new.txt": "new\n", "d/more/f.txt": "f\n"}
"""After the snapshot: three files changed, ``d/e.txt`` deleted, two added."""


def files(root: Path) -> dict[str, str]:
    """The files the user sees and their text (nothing hidden)."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def prepare(tmp_path: Path, history: str) -> tuple[Path, Path]:
    root, snapshots = tmp_path / "root", tmp_path / "snapshots"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=snapshots, history=history == "on") as fs:
        for path, content in V1.items():
            fs.write(path, content)
        fs.snapshot(tag="v1")
        fs.delete("d/e.txt")
        for path, content in V2.items():
            fs.write(path, content)
    return root, snapshots


def restores(fs: HostFilesystem) -> list[JournalEntry]:
    return [entry for entry in fs.history() if entry.operation == "restore"]


@pytest.mark.parametrize("history", ["off", "on"])
@pytest.mark.parametrize("point", ["extras", "install", "files"])
def test_a_restore_killed_part_way_is_finished_by_the_next_open(tmp_path: Path, history: str, point: str) -> None:
    root, snapshots = prepare(tmp_path, history)
    kill_at(root, snapshots, history=history, operation="restore", point=point, script=KILLED)
    if point == "install":
        assert files(root) not in (V1, V2)  # the old code left this mix for good
    with HostFilesystem(root, snapshot_dir=snapshots, history=history == "on") as fs:
        assert files(root) == V1
        assert hidden(root) == []
        assert (fs.reaped.restores_finished, fs.reaped.restores_failed) == (1, 0)
        assert not list((snapshots / "restoring").iterdir())  # the record is gone
        if history == "on":
            [entry] = restores(fs)  # one entry, with every file the restore changed, the killed attempt's too
            assert sorted(change.path for change in entry.changes) == [
                "a.txt",
                "b.txt",
                "d/c.txt",
                "d/e.txt",
                "d/more/f.txt",
                "new.txt",
            ]
            fs.undo(entry.entry_id)
            assert files(root) == V2  # what it held before the first attempt, all of it
    with HostFilesystem(root, snapshot_dir=snapshots, history=history == "on") as fs:
        assert fs.reaped.restores_finished == 0  # nothing left to finish


def test_a_restore_in_progress_is_not_finished_by_another_open(tmp_path: Path) -> None:
    """The record is locked while its restorer lives: an open meanwhile leaves it alone, and a restore that
    returns (or raises) removes its record."""
    root, snapshots = prepare(tmp_path, "on")
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        target = next(s for s in fs.snapshots() if s.tag == "v1")
        with fs._restoring.held(target.snapshot_id, {}):
            with HostFilesystem(root, snapshot_dir=snapshots) as other:
                assert (other.reaped.restores_finished, other.reaped.restores_failed) == (0, 0)
            assert files(root) == {**{k: v for k, v in V1.items() if k != "d/e.txt"}, **V2}  # untouched
        assert not (snapshots / "restoring" / fs._restoring.path.name).exists()
        fs.restore(target)
        assert files(root) == V1 and not list((snapshots / "restoring").iterdir())


def test_a_write_after_the_killed_restore_is_kept_for_the_finished_restore_s_undo(tmp_path: Path) -> None:
    """Another process writes a file the killed attempt had already restored before an open finishes it: undoing
    the finished restore gives that write back, not what the file held before the first attempt (that write was
    otherwise lost for good: the journal keeps only what a change replaces)."""
    root, snapshots = prepare(tmp_path, "on")
    with HostFilesystem(root, snapshot_dir=snapshots) as writer:  # open before the kill: it finishes nothing
        kill_at(root, snapshots, history="on", operation="restore", point="install", script=KILLED)
        assert (root / "a.txt").read_text() == V1["a.txt"]  # the killed attempt put this one back already
        writer.write("a.txt", "later\n")
        writer.write("b.txt", "later b\n")  # not yet restored by the killed attempt
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        assert files(root) == V1 and fs.reaped.restores_finished == 1
        [entry] = restores(fs)
        fs.undo(entry.entry_id)
        assert (root / "a.txt").read_text() == "later\n"
        assert (root / "b.txt").read_text() == "later b\n"
        assert (root / "d/c.txt").read_text() == V2["d/c.txt"]


RESTORER = textwrap.dedent(
    """
    import sys
    from workspacefs import HostFilesystem
    fs = HostFilesystem(sys.argv[1], snapshot_dir=sys.argv[2])
    fs.restore(next(s for s in fs.snapshots() if s.tag == sys.argv[3]))
    """
)


def waits_on(lock: Path) -> bool:
    """Whether a process waits for a ``flock`` of ``lock`` (a ``->`` line of ``/proc/locks`` naming its inode)."""
    try:
        inode = os.stat(lock).st_ino
    except FileNotFoundError:
        return False
    lines = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and line.split()[6].endswith(f":{inode}") for line in lines)


def test_a_second_restore_of_a_root_waits_for_the_first(tmp_path: Path) -> None:
    """Two restores at once replaced each other's record: the first, killed, was never finished, and the second,
    killed, would be finished by an open while the first still ran. Now another process's restore waits."""
    root, snapshots = prepare(tmp_path, "on")
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        fs.snapshot(tag="v2")
        target = next(s for s in fs.snapshots() if s.tag == "v1")
        record = fs._restoring.path
        turn = snapshots / "roots" / f"{record.stem}.restoring.lock"
        with fs._restoring.held(target.snapshot_id, {}):  # a restore in progress
            ours = os.stat(record).st_ino
            child = subprocess.Popen([sys.executable, "-c", RESTORER, str(root), str(snapshots), "v2"])
            while not waits_on(turn):
                if child.poll() is not None:
                    pytest.fail("another process restored while this restore ran (its record replaced this one's)")
                time.sleep(0.01)
            assert os.stat(record).st_ino == ours
        assert child.wait() == 0
    assert files(root) == {**{k: v for k, v in V1.items() if k != "d/e.txt"}, **V2}
    assert not record.exists()


def test_a_directory_at_the_record_s_name_never_fails_an_open(tmp_path: Path) -> None:
    """Whatever is at the record's name, an open goes on: a directory there made every writable open fail
    (``IsADirectoryError``; a FIFO made it wait for a writer for ever: it is opened without waiting now)."""
    root, snapshots = prepare(tmp_path, "on")
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        record = fs._restoring.path
    record.parent.mkdir(exist_ok=True)
    record.mkdir()
    with HostFilesystem(root, snapshot_dir=snapshots) as fs:
        assert (fs.reaped.restores_finished, fs.reaped.restores_failed) == (0, 0)
        fs.write("a.txt", "still works\n")
