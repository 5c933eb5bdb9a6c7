"""A recursive delete on the host that another process adds entries to while it runs (a command in a container
sharing the workspace) fails with ``DirectoryNotEmptyError``, as before, but its reason no longer tells the caller to
"pass recursive=True", which is what it did: it says entries were added meanwhile and to delete it again. What is
left is back in place and a second delete removes it. The other process's write is made at the removal's own
``rmdir`` of that directory, as the other process would win the race."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from workspacefs import HostFilesystem
from workspacefs.errors import DirectoryNotEmptyError

GROWS = "grows"


class AddAtRmdir:
    """Stands in for the other process: at the first ``rmdir`` of :data:`GROWS` by a descriptor, it first writes a
    file into that directory."""

    def __init__(self) -> None:
        self.added = False
        self._real = os.rmdir

    def __call__(self, path: Any, *, dir_fd: int | None = None) -> None:
        if path == GROWS and dir_fd is not None and not self.added:
            self.added = True
            fd = os.open(f"{GROWS}/late.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd)
            os.close(fd)
        self._real(path, dir_fd=dir_fd)


@pytest.mark.parametrize("history", [False, True])
def test_a_tree_that_grows_while_deleted_says_so_and_is_whole_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: bool
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    fs = HostFilesystem(root, snapshot_dir=tmp_path / "snapshots", history=history)
    fs.write("d/a.txt", "a")
    fs.write(f"d/deep/{GROWS}/b.txt", "b")
    add = AddAtRmdir()
    monkeypatch.setattr(os, "rmdir", add)
    with pytest.raises(DirectoryNotEmptyError) as caught:
        fs.delete("./d", recursive=True)
    monkeypatch.undo()
    assert add.added
    assert caught.value.errno == errno.ENOTEMPTY and caught.value.filename == "./d"
    assert "recursive=True" not in str(caught.value)  # the old advice: the caller had passed it
    assert "added" in caught.value.strerror and "again" in caught.value.strerror
    assert fs.exists(f"d/deep/{GROWS}/late.txt")  # what is left is back under its name, the hidden name is gone
    assert sorted(os.listdir(root)) == ["d"]
    fs.delete("d", recursive=True)
    assert sorted(os.listdir(root)) == []
