"""A host ``move(overwrite=True)`` killed (SIGKILL) at each step: every name the workspace shows holds its old
content or its new one, never the target's old file under the source's name, and the next open reaps what the
killed mover left under its temporary name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workspacefs import HostFilesystem

MOVER = textwrap.dedent(
    """
    import os, sys, types
    from workspacefs import HostFilesystem
    from workspacefs.backends.host import _tree
    root, snapshots, history, src, dst, point = sys.argv[1:7]
    fs = HostFilesystem(root, snapshot_dir=snapshots, history=history == "on")

    def then_wait(call):
        def called(*args, **options):
            done = call(*args, **options)
            if done is not False:  # the step took effect: the parent kills this process here
                print("stopped", flush=True)
                sys.stdin.readline()
            return done
        return called

    if point == "exchange":
        _tree.renameat_exchange = then_wait(_tree.renameat_exchange)
    else:  # the move's own os.link / os.rename, nobody else's
        _tree.os = types.SimpleNamespace(**vars(os))
        setattr(_tree.os, point, then_wait(getattr(os, point)))
    fs.move(src, dst, overwrite=True)
    print("moved", flush=True)
    """
)

AFTER = {"link": ("mine", "theirs"), "exchange": ("mine", "mine"), "rename": (None, "mine")}
"""What the source and the target hold once the mover is killed right after each step (``None``: no entry)."""


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Writer registries under this test's own cache (the child inherits the variable)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(directory))
    return directory


def entries(root: Path) -> list[str]:
    """Every entry below ``root``, hidden ones included (what git, a container or a quota sees)."""
    return sorted(str(Path(d, n).relative_to(root)) for d, dirs, files in os.walk(root) for n in dirs + files)


def kill_mid_move(root: Path, snapshots: Path, *, history: str, src: str, dst: str, point: str) -> None:
    """Run the move in a child process and SIGKILL it right after ``point``'s call took effect."""
    mover = subprocess.Popen(
        [sys.executable, "-c", MOVER, str(root), str(snapshots), history, src, dst, point],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert mover.stdout is not None
        line = mover.stdout.readline()  # synchronised by the pipe, never by time
    finally:
        mover.kill()  # SIGKILL: nothing of the move's own clean-up runs
        _, errors = mover.communicate()
    assert line == "stopped\n", f"the move ended without that step ({line!r}) {errors}"


@pytest.mark.parametrize("point", ["link", "exchange", "rename"])
@pytest.mark.parametrize("history", ["off", "on"])
@pytest.mark.parametrize(("src", "dst"), [("a.txt", "b.txt"), ("a.txt", "sub/b.txt"), ("sub/a.txt", "b.txt")])
def test_a_move_over_a_file_killed_at_any_step_leaves_each_name_its_old_content_or_the_moved_one(
    tmp_path: Path, history: str, src: str, dst: str, point: str
) -> None:
    """The exchange of the source with the target put the target's old file at the source's name until it was
    removed: a crash there left ``a.txt`` holding what only ``b.txt`` ever held, for good."""
    root, snapshots = tmp_path / "root", tmp_path / "snapshots"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        fs.write(src, "mine")
        fs.write(dst, "theirs")
    kill_mid_move(root, snapshots, history=history, src=src, dst=dst, point=point)
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        held = tuple(fs.read(path).content if fs.exists(path) else None for path in (src, dst))
        assert held == AFTER[point]
        assert (fs.reaped.writers_reaped, fs.reaped.files_removed) == (1, 1)  # the mover's temporary name
    shown = [path for path, content in zip((src, dst), held, strict=True) if content is not None]
    assert entries(root) == sorted(shown + (["sub"] if "sub/" in src + dst else []))  # nothing hidden left
