"""A host ``move(overwrite=True)`` killed (SIGKILL) right after its exchange took effect: every name the workspace
shows holds its old content or its new one, never the target's old file under the source's name."""

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
    import sys
    from workspacefs import HostFilesystem
    from workspacefs.backends.host import _tree
    root, snapshots, history, src, dst = sys.argv[1:6]
    fs = HostFilesystem(root, snapshot_dir=snapshots, history=history == "on")
    exchange = _tree.renameat_exchange

    def exchange_then_wait(*args):
        done = exchange(*args)
        if done:  # the exchange took effect: the parent kills this process here
            print("exchanged", flush=True)
            sys.stdin.readline()
        return done

    _tree.renameat_exchange = exchange_then_wait
    fs.move(src, dst, overwrite=True)
    print("moved", flush=True)
    """
)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Writer registries under this test's own cache (the child inherits the variable)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(directory))
    return directory


def visible(root: Path) -> list[str]:
    """Every entry below ``root`` a user or a tool sees (a writer's temporary names included: git would)."""
    return sorted(str(Path(d, n).relative_to(root)) for d, dirs, files in os.walk(root) for n in dirs + files)


@pytest.mark.parametrize("history", ["off", "on"])
@pytest.mark.parametrize(("src", "dst"), [("a.txt", "b.txt"), ("a.txt", "sub/b.txt"), ("sub/a.txt", "b.txt")])
def test_a_move_over_a_file_killed_after_its_exchange_never_shows_the_targets_old_content_at_the_source(
    tmp_path: Path, history: str, src: str, dst: str
) -> None:
    """The exchange of the source with the target put the target's old file at the source's name until it was
    removed: a crash there left ``a.txt`` holding what only ``b.txt`` ever held, for good."""
    root, snapshots = tmp_path / "root", tmp_path / "snapshots"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        fs.write(src, "mine")
        fs.write(dst, "theirs")
    mover = subprocess.Popen(
        [sys.executable, "-c", MOVER, str(root), str(snapshots), history, src, dst],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert mover.stdout is not None
        line = mover.stdout.readline()  # synchronised by the pipe, never by time
        assert line == "exchanged\n", mover.communicate()[1]
    finally:
        mover.kill()  # SIGKILL: nothing of the move's own clean-up runs
        mover.communicate()
    with HostFilesystem(root, snapshot_dir=snapshots, history=False) as fs:
        assert fs.read(dst).content == "mine"
        assert not fs.exists(src) or fs.read(src).content == "mine"  # the moved file, or nothing; never "theirs"
        assert (fs.reaped.writers_reaped, fs.reaped.files_removed) == (1, 1)  # the dead mover's temporary name
    assert visible(root) == sorted(["sub", src, dst] if "sub/" in src + dst else [src, dst])
    assert all((root / name).read_text() == "mine" for name in (src, dst))
