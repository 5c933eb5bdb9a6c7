"""A host recursive ``delete`` and a ``copy`` of a directory to a new name, killed (SIGKILL) at each step: the tree is
wholly there or wholly gone, the copy wholly absent or wholly there, never a part; the next open removes what the
killed process left hidden. Beside the kills: each file goes (or is copied) out of view, undo still puts the whole
tree back (or takes the copy away), and a tree with a directory its user may not change is refused untouched."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_host_tree_replace_crash import hidden, kill_at, shown
from test_review_host import NOBODY, as_nobody

from workspacefs import HostFilesystem

KILLED = textwrap.dedent(
    """
    import os, sys
    from workspacefs import HostFilesystem, _hostio
    root, snapshots, history, operation, point = sys.argv[1:6]
    fs = HostFilesystem(root, snapshot_dir=snapshots, history=history == "on")
    armed = False

    def stop(at):
        if armed and at == point:  # the step took effect: the parent kills this process here
            print("stopped", flush=True)
            sys.stdin.readline()

    real_renameat2, real_unlink, real_rmdir, real_copy = _hostio._renameat2, os.unlink, os.rmdir, os.copy_file_range

    def renameat2(src_fd, src, dst_fd, dst, flags):
        done = real_renameat2(src_fd, src, dst_fd, dst, flags)
        if done == 0 and flags == 1 and dst in (b"b", b"c"):
            stop("rename")
        return done

    def unlink(path, *, dir_fd=None):
        real_unlink(path, dir_fd=dir_fd)
        if str(path).startswith("old"):  # a file of the deleted tree
            stop("unlink")

    def rmdir(path, *, dir_fd=None):
        real_rmdir(path, dir_fd=dir_fd)
        if path == "b":  # the top of the deleted tree
            stop("rmdir")

    def copy_file_range(src, dst, count, *more):
        try:
            return real_copy(src, dst, count, *more)
        finally:
            stop("copy")

    _hostio._renameat2, os.unlink, os.rmdir, os.copy_file_range = renameat2, unlink, rmdir, copy_file_range
    armed = True
    if operation == "delete":
        fs.delete("b", recursive=True)
    else:
        fs.copy("a", "c")
    print("done", flush=True)
    """
)

SOURCE = {"a": None, "a/new0.txt": "n0", "a/sub": None, "a/sub/new1.txt": "n1", "a/sub/new2.txt": "n2"}
TARGET = {"b": None, "b/old0.txt": "o0", "b/old1.txt": "o1", "b/deep": None, "b/deep/old2.txt": "o2"}
OLD = {path[2:]: content for path, content in TARGET.items() if path != "b"}
NEW = {path[2:]: content for path, content in SOURCE.items() if path != "a"}

DELETE_POINTS = ["rename", "unlink", "rmdir"]  # the tree hidden; a file removed there; its top removed there
COPY_POINTS = {"copy": None, "rename": NEW}  # a file copied, hidden; the copy put in place (its hidden directory left)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Writer registries under this test's own cache (the child inherits the variable)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(directory))
    return directory


def prepare(tmp_path: Path) -> tuple[Path, Path]:
    root, snapshots = tmp_path / "root", tmp_path / "snapshots"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        for path, content in {**SOURCE, **TARGET}.items():
            if content is not None:
                fs.write(path, content)
    return root, snapshots


@pytest.mark.parametrize("history", ["off", "on"])
@pytest.mark.parametrize("point", DELETE_POINTS)
def test_a_recursive_delete_killed_at_any_step_leaves_the_tree_whole_or_gone(
    tmp_path: Path, history: str, point: str
) -> None:
    """The tree was removed in place, file by file: a kill part way left some of its files and not others."""
    root, snapshots = prepare(tmp_path)
    kill_at(root, snapshots, history=history, operation="delete", point=point, script=KILLED)
    assert shown(root, "b") is None
    assert hidden(root) != []  # what is left of it waits, out of view
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:  # the reaper's pass
        assert (fs.reaped.writers_reaped, fs.reaped.trees_removed, fs.reaped.moves_completed) == (1, 1, 0)
    assert shown(root, "b") is None
    assert shown(root, "a") == NEW
    assert hidden(root) == []


@pytest.mark.parametrize("history", ["off", "on"])
@pytest.mark.parametrize("point", list(COPY_POINTS))
def test_a_directory_copy_killed_at_any_step_leaves_the_target_absent_or_whole(
    tmp_path: Path, history: str, point: str
) -> None:
    """The copy was made in place, file by file: a kill part way left a part of it at the target."""
    root, snapshots = prepare(tmp_path)
    kill_at(root, snapshots, history=history, operation="copy", point=point, script=KILLED)
    assert shown(root, "c") == COPY_POINTS[point]
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        assert (fs.reaped.writers_reaped, fs.reaped.trees_removed, fs.reaped.moves_completed) == (1, 1, 0)
    assert shown(root, "c") == COPY_POINTS[point]
    assert shown(root, "a") == NEW
    assert shown(root, "b") == OLD
    assert hidden(root) == []


def watching(monkeypatch: pytest.MonkeyPatch, name: str, look: Callable[[], Any]) -> list[Any]:
    """What ``look()`` returned at each call of ``os.<name>`` in this process (the call itself made)."""
    seen: list[Any] = []
    real = getattr(os, name)

    def watched(*args: Any, **kwargs: Any) -> Any:
        try:
            return real(*args, **kwargs)
        finally:
            seen.append(look())

    monkeypatch.setattr(os, name, watched)
    return seen


def test_a_recursive_delete_removes_each_file_out_of_view_and_undo_puts_the_whole_tree_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file was unlinked while the tree was in view; the journal entry is still every file's deletion."""
    root, snapshots = prepare(tmp_path)
    (root / "b" / "old0.txt").chmod(0o444)  # a read-only file goes as any other
    with HostFilesystem(root, snapshot_dir=snapshots, history=True) as fs:
        seen = watching(monkeypatch, "unlink", lambda: os.path.lexists(root / "b"))
        fs.delete("b", recursive=True)
        monkeypatch.undo()
        assert seen.count(False) >= 3  # the tree's three files
        assert True not in seen
        (entry,) = fs.history(limit=1)
        assert sorted(change.path for change in entry.changes) == [
            "b",
            "b/deep",
            "b/deep/old2.txt",
            "b/old0.txt",
            "b/old1.txt",
        ]
        fs.undo(entry.entry_id)
    assert shown(root, "b") == OLD
    assert hidden(root) == []


def test_a_directory_copy_is_made_out_of_view_and_undo_takes_it_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file was copied to the target's name while it was in view; the entry is still each file's copy."""
    root, snapshots = prepare(tmp_path)
    with HostFilesystem(root, snapshot_dir=snapshots, history=True) as fs:
        seen = watching(monkeypatch, "copy_file_range", lambda: os.path.lexists(root / "c"))
        fs.copy("a", "c")
        monkeypatch.undo()
        assert seen == [False, False, False]
        assert shown(root, "c") == NEW
        assert (root / "c").stat().st_mode & 0o777 == (root / "a").stat().st_mode & 0o777  # as mkdir makes it
        (entry,) = fs.history(limit=1)
        assert sorted(change.path for change in entry.changes) == [
            "c",
            "c/new0.txt",
            "c/sub",
            "c/sub/new1.txt",
            "c/sub/new2.txt",
        ]
        fs.undo(entry.entry_id)
    assert shown(root, "c") is None
    assert hidden(root) == []


def test_a_copy_over_a_directory_gives_it_the_mode_mkdir_gives(tmp_path: Path) -> None:
    """The copy's top was the hidden directory itself, made 0700: the target became unreadable to other users."""
    root, snapshots = prepare(tmp_path)
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        fs.copy("a", "b", overwrite=True)
    assert shown(root, "b") == NEW
    assert (root / "b").stat().st_mode & 0o777 == (root / "a").stat().st_mode & 0o777
    assert hidden(root) == []


def test_a_tree_with_a_directory_its_user_may_not_change_is_refused_untouched() -> None:
    """Removed in place, the files the walk reached before that directory were gone, and the rest stayed."""
    base = Path(tempfile.mkdtemp(prefix="wsfs-host-tree-"))  # in the system's /tmp: every user may pass through
    try:
        os.chmod(base, 0o755)
        os.chown(base, NOBODY, NOBODY)
        root = base / "root"
        for directory in (root, root / "b", root / "b" / "locked", root / "b" / "locked" / "inner"):
            directory.mkdir()
            os.chown(directory, NOBODY, NOBODY)
        for name in ("b/top.txt", "b/locked/inner/below.txt"):
            (root / name).write_text(name)
            os.chown(root / name, NOBODY, NOBODY)
        (root / "b" / "locked").chmod(0o555)  # its own user may not change it: "inner" cannot go

        def work() -> object:
            os.environ["XDG_CACHE_HOME"] = str(base / "cache")
            with HostFilesystem(root, snapshot_dir=base / "snapshots", history=False) as fs:
                try:
                    fs.delete("b", recursive=True)
                except PermissionError as exc:
                    return type(exc).__name__, exc.filename
            return "deleted"

        assert as_nobody(work) == ("PermissionError", "b/locked")
        assert shown(root, "b") == {
            "top.txt": "b/top.txt",
            "locked": None,
            "locked/inner": None,
            "locked/inner/below.txt": "b/locked/inner/below.txt",
        }
        assert hidden(root) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_directory_copy_refuses_what_appeared_at_its_target_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target was made first, then filled: a directory another process put there could not come meanwhile,
    and the copy's files landed in its place. Now another's directory stays as it is, the hidden copy goes."""
    root, snapshots = prepare(tmp_path)

    def theirs() -> None:
        if not os.path.lexists(root / "c"):
            (root / "c").mkdir()
            (root / "c" / "theirs.txt").write_text("theirs")

    with HostFilesystem(root, snapshot_dir=snapshots, history=True) as fs:
        watching(monkeypatch, "copy_file_range", theirs)
        with pytest.raises(FileExistsError) as raised:
            fs.copy("a", "c")
        monkeypatch.undo()
        assert raised.value.filename == "c"
        assert list(fs.history()) == []  # nothing journaled
    assert shown(root, "c") == {"theirs.txt": "theirs"}
    assert hidden(root) == []
