"""Review of host tree removal (review7): ``remove_tree_at`` when the tree's own ``rmdir`` fails, and the permission
look of a recursive delete on a tree deeper than Python's recursion limit, both as an unprivileged user."""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_review_host import NOBODY, as_nobody, nobody_root

from workspacefs import HostFilesystem
from workspacefs._hostio import remove_tree_at

DEEP = 1500
"""Levels of a deep tree: past Python's recursion limit (1000)."""


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory in the system's /tmp that every user may pass through (pytest's own is its owner's only)."""
    made = Path(tempfile.mkdtemp(prefix="wsfs-review7-"))
    os.chmod(made, 0o755)
    try:
        yield made
    finally:
        subprocess.run(["rm", "-rf", str(made)], check=False)  # any depth, whatever the code under test left


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_tree_whose_own_rmdir_fails_raises_that_error_and_closes_each_descriptor_once(base: Path) -> None:
    """The tree is emptied but its parent may not be changed (``EACCES`` at the last ``rmdir``): the error is that
    one, with no descriptor left open; the top's descriptor was closed twice (``EBADF`` raised instead, and in a
    threaded program the second close could close another thread's file)."""
    # base is root's: unwritable to the user below
    (base / "top" / "a" / "b").mkdir(parents=True)
    (base / "top" / "a" / "f").write_text("x")
    for where in ("top", "top/a", "top/a/b", "top/a/f"):
        os.chown(base / where, NOBODY, NOBODY)

    def work() -> object:
        parent = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        before = _open_fds()
        try:
            remove_tree_at(parent, "top")
        except OSError as exc:
            return exc.errno, _open_fds() - before <= 0
        return "removed"

    assert as_nobody(work) == (errno.EACCES, True)  # none left open (the child may close inherited ones)
    assert os.listdir(base / "top") == []  # emptied, as far as it could go


def test_a_recursive_delete_of_a_tree_deeper_than_the_recursion_limit_is_removed(base: Path) -> None:
    """Without ``CAP_DAC_OVERRIDE`` the delete first looks at each directory (``faccessat``); that look recursed,
    so a tree 1500 levels deep (one a model or a process in a container can make) raised ``RecursionError``,
    untyped, and nothing was removed."""
    root = nobody_root(base)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEEP):  # by descriptor: the path is longer than PATH_MAX
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.fchown(below, NOBODY, NOBODY)
        os.close(fd)
        fd = below
    os.close(fd)
    fs = HostFilesystem(root, snapshot_dir=base / "snapshots", history=False)

    def work() -> object:
        before = _open_fds()
        try:
            fs.delete("d", recursive=True)
        except BaseException as exc:
            return type(exc).__name__
        return os.listdir(root), _open_fds() - before <= 0

    try:
        assert as_nobody(work) == ([], True)  # none left open (the child may close inherited ones)
    finally:
        fs.close()


def test_a_directory_copy_that_fails_part_way_names_the_target_path_not_the_hidden_one(base: Path) -> None:
    """A directory copy is built under a hidden ``.wsfs-tmp-*.trash`` directory: a write failing there (``EFBIG``
    past ``RLIMIT_FSIZE``, as ``ENOSPC`` on a full disk) named that hidden path; it names the target's, as the copy
    in place did, and leaves nothing at the target."""
    root = nobody_root(base)
    (root / "src" / "sub").mkdir(parents=True)
    (root / "src" / "sub" / "big.bin").write_bytes(b"x" * 150_000)
    for where in ("src", "src/sub", "src/sub/big.bin"):
        os.chown(root / where, NOBODY, NOBODY)
    fs = HostFilesystem(root, snapshot_dir=base / "snapshots", history=False)

    def work() -> object:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        try:
            fs.copy("src", "dst")
        except OSError as exc:
            return exc.errno, exc.filename, sorted(os.listdir(root))
        return "copied"

    try:
        assert as_nobody(work) == (errno.EFBIG, "dst/sub/big.bin", ["src"])
    finally:
        fs.close()
