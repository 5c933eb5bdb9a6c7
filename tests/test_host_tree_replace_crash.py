"""A host ``move``/``copy(overwrite=True)`` of a directory over a directory killed (SIGKILL) at each step: the target
shows its whole old tree or the whole new one, never a part or nothing; the source is intact or gone; and the next
open finishes what the killed process left hidden (a move completed, a copy's or an old tree removed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workspacefs import HostFilesystem
from workspacefs._hostio import TEMP_PREFIX

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
        if done == 0 and dst == b"b":
            stop({1: "noreplace", 2: "exchange"}.get(flags))
        return done

    def unlink(path, *, dir_fd=None):
        real_unlink(path, dir_fd=dir_fd)
        if str(path).startswith("old"):  # a file of the target's old tree
            stop("unlink")

    def rmdir(path, *, dir_fd=None):
        real_rmdir(path, dir_fd=dir_fd)
        if path == "b":  # the top of the target's old tree
            stop("rmdir")

    def copy_file_range(src, dst, count, *more):
        try:
            return real_copy(src, dst, count, *more)
        finally:
            if os.readlink(f"/proc/self/fd/{src}").startswith(f"{root}/a/"):  # a file of the source's tree
                stop("copy")

    _hostio._renameat2, os.unlink, os.rmdir, os.copy_file_range = renameat2, unlink, rmdir, copy_file_range
    armed = True
    getattr(fs, operation)("a", "b", overwrite=True)
    print("done", flush=True)
    """
)

SOURCE = {"a": None, "a/new0.txt": "n0", "a/sub": None, "a/sub/new1.txt": "n1"}
TARGET = {"b": None, "b/old0.txt": "o0", "b/old1.txt": "o1", "b/deep": None, "b/deep/old2.txt": "o2"}
OLD = {path[2:]: content for path, content in TARGET.items() if path != "b"}
NEW = {path[2:]: content for path, content in SOURCE.items() if path != "a"}

MOVE_POINTS = {
    # point: (the target before the next open, after it; whether the source is left before it)
    "noreplace": (OLD, NEW, False),  # the source taken aside: hidden, the target whole; the next open moves it
    "exchange": (NEW, NEW, False),
    "unlink": (NEW, NEW, False),  # the old tree part removed, hidden
    "rmdir": (NEW, NEW, False),  # the old tree removed, its hidden directory left
}
COPY_POINTS = {"copy": (OLD, OLD), "exchange": (NEW, NEW), "unlink": (NEW, NEW)}


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Writer registries under this test's own cache (the child inherits the variable)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(directory))
    return directory


def shown(root: Path, top: str) -> dict[str, str | None] | None:
    """What the user sees below ``top`` (files' text, ``None`` for directories; nothing hidden); ``None``: no entry."""
    base = root / top
    if not base.is_dir():
        assert not os.path.lexists(base), f"{top} is no directory"
        return None
    seen: dict[str, str | None] = {}
    for directory, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if not d.startswith(TEMP_PREFIX)]
        below = Path(directory).relative_to(base)
        for name in dirs:
            seen[str(below / name)] = None
        for name in files:
            if not name.startswith(TEMP_PREFIX):
                seen[str(below / name)] = (Path(directory) / name).read_text()
    return seen


def hidden(root: Path) -> list[str]:
    """Every hidden entry below ``root`` (what git, a container or a quota sees)."""
    return [str(Path(d, n)) for d, dirs, files in os.walk(root) for n in dirs + files if n.startswith(TEMP_PREFIX)]


def kill_at(root: Path, snapshots: Path, *, history: str, operation: str, point: str, script: str = KILLED) -> None:
    """Run the operation in a child process (``script``) and SIGKILL it right after ``point``'s call took effect."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(root), str(snapshots), history, operation, point],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # synchronised by the pipe, never by time
    finally:
        child.kill()  # SIGKILL: nothing of the operation's own clean-up runs
        _, errors = child.communicate()
    assert line == "stopped\n", f"the {operation} ended without that step ({line!r}) {errors}"


def prepare(tmp_path: Path) -> tuple[Path, Path]:
    root, snapshots = tmp_path / "root", tmp_path / "snapshots"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        for path, content in {**SOURCE, **TARGET}.items():
            if content is not None:
                fs.write(path, content)
    return root, snapshots


@pytest.mark.parametrize("history", ["off", "on"])
@pytest.mark.parametrize("point", list(MOVE_POINTS))
def test_a_move_over_a_directory_killed_at_any_step_leaves_the_target_whole_old_or_whole_new(
    tmp_path: Path, history: str, point: str
) -> None:
    """The target's tree was removed first, then the source renamed: a kill during the removal left the target
    part removed, and between the two steps left it gone."""
    root, snapshots = prepare(tmp_path)
    kill_at(root, snapshots, history=history, operation="move", point=point)
    before, after, source_left = MOVE_POINTS[point]
    assert shown(root, "b") == before
    assert shown(root, "a") == (NEW if source_left else None)
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:  # the reaper's pass
        assert (fs.reaped.writers_reaped, fs.reaped.trees_removed) == (1, 1)
        assert fs.reaped.moves_completed == (before is not after)
    assert shown(root, "b") == after
    assert shown(root, "a") is None
    assert hidden(root) == []


@pytest.mark.parametrize("history", ["off", "on"])
@pytest.mark.parametrize("point", list(COPY_POINTS))
def test_a_copy_over_a_directory_killed_at_any_step_leaves_the_target_whole_old_or_whole_new(
    tmp_path: Path, history: str, point: str
) -> None:
    """The target's tree was removed first, then the copy made in its place: a kill during either left a part."""
    root, snapshots = prepare(tmp_path)
    kill_at(root, snapshots, history=history, operation="copy", point=point)
    before, after = COPY_POINTS[point]
    assert shown(root, "b") == before
    assert shown(root, "a") == NEW
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        assert (fs.reaped.writers_reaped, fs.reaped.trees_removed, fs.reaped.moves_completed) == (1, 1, 0)
    assert shown(root, "b") == after
    assert shown(root, "a") == NEW
    assert hidden(root) == []


@pytest.mark.parametrize("meanwhile", ["removed", "replaced"])
def test_a_source_taken_aside_by_a_killed_move_is_never_removed_by_the_reaper(tmp_path: Path, meanwhile: str) -> None:
    """Killed with the source hidden beside the target, and the target changed before the next open: a target that
    went leaves its name to the source; a new directory there stays, and the source stays hidden, never removed."""
    root, snapshots = prepare(tmp_path)
    kill_at(root, snapshots, history="off", operation="move", point="noreplace")
    shutil.rmtree(root / "b")
    if meanwhile == "replaced":
        (root / "b").mkdir()
        (root / "b" / "theirs.txt").write_text("theirs")
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        assert fs.reaped.moves_completed == (meanwhile == "removed")
    if meanwhile == "removed":
        assert shown(root, "b") == NEW
        assert hidden(root) == []
        return
    assert shown(root, "b") == {"theirs.txt": "theirs"}
    [aside] = [Path(path) for path in hidden(root)]
    assert shown(aside, "b") == NEW  # kept whole, under the hidden directory, for good
