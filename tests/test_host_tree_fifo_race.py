"""A tree's removal on the host never opens a FIFO another process swaps in for one of its directories.

``shutil.rmtree`` looks at each entry (``lstat``), then opens the directories among them without ``O_NONBLOCK``: a
process that swaps a directory for a FIFO between the two (a command in a container sharing the workspace) made a
recursive delete wait forever for a writer. The removal now opens only directories, without blocking, and unlinks
what is no longer one. The swap is made at the removal's own ``open`` of that name, as the other process would win
the race; a writer thread counts the readers it finds waiting on the FIFO (and lets each go).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from workspacefs import HostFilesystem

VICTIM = "victim"


class SwapAtOpen:
    """Stands in for the other process: at the first ``open`` of :data:`VICTIM` by a directory's descriptor, the
    (empty) directory there becomes a FIFO."""

    def __init__(self) -> None:
        self.fifo: str | None = None
        self._real = os.open

    def __call__(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if path == VICTIM and dir_fd is not None and self.fifo is None:
            os.rmdir(VICTIM, dir_fd=dir_fd)
            os.mkfifo(VICTIM, dir_fd=dir_fd)
            self.fifo = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), VICTIM)
        return self._real(path, flags, mode, dir_fd=dir_fd)


def waiting_readers(swap: SwapAtOpen, done: threading.Event, met: list[int]) -> None:
    """Open the FIFO for writing whenever a reader waits on it (so it goes on), counting each one met."""
    while not done.is_set():
        if swap.fifo is not None:
            try:
                os.close(os.open(swap.fifo, os.O_WRONLY | os.O_NONBLOCK))
                met.append(1)
            except OSError as exc:
                if exc.errno not in (errno.ENXIO, errno.ENOENT, errno.ENOTDIR):
                    raise
        time.sleep(0.005)


@pytest.mark.parametrize("history", [False, True])
def test_a_recursive_delete_never_waits_on_a_fifo_swapped_in_for_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: bool
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    fs = HostFilesystem(root, snapshot_dir=tmp_path / "snapshots", history=history)
    fs.write("d/a.txt", "a")
    fs.write("d/deep/b.txt", "b")
    fs.mkdir(f"d/deep/{VICTIM}")
    swap, done, met = SwapAtOpen(), threading.Event(), []
    writer = threading.Thread(target=waiting_readers, args=(swap, done, met))
    writer.start()
    monkeypatch.setattr(os, "open", swap)
    try:
        fs.delete("d", recursive=True)
    finally:
        monkeypatch.undo()
        done.set()
        writer.join()
    assert swap.fifo is not None  # the swap was made
    assert met == []  # the old removal opened the FIFO and waited for this writer
    assert not fs.exists("d") and sorted(os.listdir(root)) == []
