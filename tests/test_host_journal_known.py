"""What a journaled host write replaces, when this object wrote it: its content id is known, so it is not read
and hashed again, unless anything changed the file since (then it is, and the journal records the truth).

Counted through the journal's own counter of files it hashed (``HostJournal.hashed``), never timed."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from workspacefs import HostFilesystem
from workspacefs.streams import content_id_of

BIG = 20 * 1024
"""Above the size from which writes are remembered (16 KiB)."""


def content(letter: bytes, size: int = BIG) -> bytes:
    return letter * (size - 1) + b"\n"


@pytest.fixture
def make_fs(fast_tmp: Path, tmp_path: Path) -> Iterator[Callable[..., HostFilesystem]]:
    made: list[HostFilesystem] = []

    def make(**options: Any) -> HostFilesystem:
        root = Path(os.path.join(fast_tmp, f"{tmp_path.name}-{len(made)}"))
        root.mkdir()
        fs = HostFilesystem(root, snapshot_dir=Path(f"{root}-snapshots"), **options)
        made.append(fs)
        return fs

    yield make
    for fs in made:
        fs.close()


def objects(fs: HostFilesystem) -> list[str]:
    assert fs._changes is not None
    return sorted(name for name in os.listdir(fs._changes.objects) if not name.startswith("."))


def test_overwriting_files_this_object_wrote_hashes_none_of_them(make_fs: Callable[..., HostFilesystem]) -> None:
    """Twenty files written, then overwritten twice: what each overwrite replaces is kept for undo (copied once
    per content), but never read and hashed to learn its id (the old code hashed all 40)."""
    fs = make_fs()
    journal = fs._changes
    assert journal is not None
    for n in range(20):
        fs.write_bytes(f"d/f{n}.txt", content(b"a"))
    for n in range(20):
        fs.write_bytes(f"d/f{n}.txt", content(b"b"))
    for n in range(20):
        fs.write_bytes(f"d/f{n}.txt", content(b"c"))
    assert journal.hashed == 0
    assert objects(fs) == sorted([content_id_of(content(b"a")), content_id_of(content(b"b"))])
    entry = fs.history(path="d/f7.txt")[0]
    assert [(c.before, c.after) for c in entry.changes] == [
        (content_id_of(content(b"b")), content_id_of(content(b"c")))
    ]
    fs.undo(entry.entry_id)
    assert fs.read_bytes("d/f7.txt").content == content(b"b")
    fs.undo(fs.history(path="d/f7.txt")[2].entry_id)  # then the first overwrite (the undo is the newest entry)
    assert fs.read_bytes("d/f7.txt").content == content(b"a")


def _rewrite_in_place(path: Path, data: bytes, *, keep_times: bool) -> None:
    """What a command in a sandbox may do: write the same inode, same size, at once (in the same clock tick as
    the write before, as often as not); ``keep_times`` puts its times back as they were, as ``cp -p`` does."""
    before = os.stat(path)
    with open(path, "r+b") as handle:
        handle.write(data)
    if keep_times:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_ino == before.st_ino and os.stat(path).st_size == before.st_size


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("keep_times", [False, True])
@pytest.mark.parametrize("size", [1024, BIG])
def test_a_file_changed_outside_between_two_writes_is_recorded_as_it_was(
    make_fs: Callable[..., HostFilesystem], keep_times: bool, size: int, kept: bool
) -> None:
    """Changed in place by another process between two journaled writes: the second write's entry names the
    content the file really held (read and hashed), and undo puts those bytes back, not what this object wrote;
    whether or not what this object wrote is kept already (``kept``: the second write need not copy it)."""
    fs = make_fs()
    ours, theirs, last = content(b"o", size), content(b"t", size), content(b"l", size)
    if kept:
        fs.write_bytes("seed.txt", ours)
        fs.write_bytes("seed.txt", last)  # keeps ours
        assert content_id_of(ours) in objects(fs)
    for round_ in range(5):  # several rounds: some of them land in the clock tick of the write before
        path = f"f{round_}.txt"
        fs.write_bytes(path, ours)
        _rewrite_in_place(Path(fs.root) / path, theirs, keep_times=keep_times)
        fs.write_bytes(path, last)
        entry = fs.history(path=path)[0]
        assert [(c.before, c.after) for c in entry.changes] == [(content_id_of(theirs), content_id_of(last))]
        fs.undo(entry.entry_id)
        assert fs.read_bytes(path).content == theirs


def test_a_file_replaced_outside_by_one_of_the_same_size_is_read(make_fs: Callable[..., HostFilesystem]) -> None:
    """Replaced by a rename (a new inode), even with the times of the file this object wrote: read and hashed."""
    fs = make_fs()
    root = Path(fs.root)
    fs.write_bytes("f.txt", content(b"o"))
    written = os.stat(root / "f.txt")
    (root / "other").write_bytes(content(b"t"))
    os.utime(root / "other", ns=(written.st_atime_ns, written.st_mtime_ns))
    os.replace(root / "other", root / "f.txt")
    fs.write_bytes("f.txt", content(b"l"))
    entry = fs.history(path="f.txt")[0]
    assert entry.changes[0].before == content_id_of(content(b"t"))
    fs.undo(entry.entry_id)
    assert fs.read_bytes("f.txt").content == content(b"t")
