"""A tool call costs what it changes: the undo log records only the paths it touches, on every backend.

Regression for issue 14 defect 1 (a 3-byte ``write_file`` took 33 to 118 s because the dispatcher snapshotted
the whole workspace around it). Costs are counted — snapshots taken, files opened for reading, bytes saved —
never timed.
"""

from __future__ import annotations

import io
import os
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem, import_tar
from workspacefs.backends.base import BaseFilesystem
from workspacefs.protocol import ByteReader
from workspacefs.results import FilesystemSnapshot
from workspacefs.tools import ToolContext, dispatch
from workspacefs.undo import UndoLog

BIG = 8 * 1024 * 1024


class Counting(BaseFilesystem):
    """Counts the snapshots a backend takes and the files it opens for reading (instrumentation, not a mock:
    every call goes to the real backend)."""

    snapshots_taken: int
    opened: list[str]

    def _count_init(self) -> None:
        self.snapshots_taken = 0
        self.opened = []

    def _capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        self.snapshots_taken += 1
        return super()._capture(draft)  # type: ignore[safe-super]

    def _open_reader(self, path: str) -> ByteReader:
        self.opened.append(path)
        return super()._open_reader(path)  # type: ignore[safe-super]

    def _open_content(self, path: str, inline_limit: int) -> bytes | ByteReader:
        self.opened.append(path)
        return super()._open_content(path, inline_limit)


class CountingMemory(Counting, InMemoryFilesystem):
    pass


class CountingHost(Counting, HostFilesystem):
    pass


class CountingSql(Counting, SqlFilesystem):
    pass


@pytest.fixture(params=["memory", "host", "sqlite"])
def counted(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Counting]:
    fs: Counting
    if request.param == "memory":
        fs = CountingMemory()
    elif request.param == "host":
        root = fast_tmp / f"undo-{uuid.uuid4().hex}"
        root.mkdir()
        fs = CountingHost(root, snapshot_dir=fast_tmp / f"undo-snaps-{uuid.uuid4().hex}")
    else:
        fs = CountingSql(f"sqlite:///{fast_tmp / f'undo-{uuid.uuid4().hex}.db'}", "s")
    fs._count_init()
    with fs:
        yield fs


def _fill_big(fs: Counting) -> None:
    """A large file beside the one a tool changes (on a host, a 4 GiB sparse file as in the report)."""
    if isinstance(fs, HostFilesystem):
        with open(os.path.join(fs.root, "huge.bin"), "wb") as handle:
            handle.truncate(4 * 1024**3)
    fs.write_bytes("big.bin", b"x" * BIG)
    fs.write("notes/a.txt", "a\n")
    fs.opened.clear()


def test_a_small_write_beside_big_files_takes_no_snapshot_and_reads_nothing_else(counted: Counting) -> None:
    _fill_big(counted)
    context = ToolContext(filesystem=counted)
    assert dispatch("write_file", {"path": "new/deep/x.txt", "content": "abc"}, context).success
    assert dispatch("mkdir", {"path": "made/here"}, context).success
    assert dispatch("mv", {"src": "new/deep/x.txt", "dst": "moved.txt"}, context).success
    assert dispatch("cp", {"src": "notes", "dst": "notes2"}, context).success
    assert dispatch("rm", {"path": "notes2", "recursive": True}, context).success
    assert counted.snapshots_taken == 0
    assert "big.bin" not in counted.opened and "huge.bin" not in counted.opened
    assert set(counted.opened) <= {"new/deep/x.txt", "notes/a.txt"}  # the tools' own reads: nothing for undo


def test_a_failed_call_changes_nothing_and_reads_only_what_it_touched(counted: Counting) -> None:
    _fill_big(counted)
    context = ToolContext(filesystem=counted)
    result = dispatch("write_file", {"path": "big.bin/inside.txt", "content": "x"}, context)
    assert not result.success
    result = dispatch("mv", {"src": "missing.txt", "dst": "a/b/c.txt"}, context)
    assert not result.success and not counted.exists("a")
    assert counted.snapshots_taken == 0 and "big.bin" not in counted.opened


class _FailsSecondCopy(SqlFilesystem):
    """A copy that fills the disk after one file (the tree copy goes file by file, and over a tree in two steps,
    as on a backend that cannot make it one change)."""

    _copy_tree = BaseFilesystem._copy_tree
    _copy_over_tree = BaseFilesystem._copy_over_tree
    copies = 0

    def _copy_file(self, src: str, dst: str) -> None:
        self.copies += 1
        if self.copies > 1:
            raise OSError(28, "No space left on device", dst)
        super()._copy_file(src, dst)


def test_a_copy_over_an_existing_tree_that_fails_part_way_puts_the_old_tree_back(fast_tmp: Path) -> None:
    with _FailsSecondCopy(f"sqlite:///{fast_tmp / f'undo-{uuid.uuid4().hex}.db'}", "s") as fs:
        fs.write("src/a.txt", "new a")
        fs.write("src/b.txt", "new b")
        fs.write("dst/a.txt", "old a")
        fs.write("dst/keep/k.txt", "old k")
        fs.set_read_only("dst/a.txt")
        result = dispatch("cp", {"src": "src", "dst": "dst", "overwrite": True}, ToolContext(filesystem=fs))
        assert not result.success and "rolled back" in result.message
        assert fs.read("dst/a.txt").content == "old a" and fs.stat("dst/a.txt").read_only
        assert fs.read("dst/keep/k.txt").content == "old k" and not fs.exists("dst/b.txt")


def test_the_log_saves_only_what_will_be_replaced() -> None:
    fs = InMemoryFilesystem()
    fs.write_bytes("big.bin", b"b" * 1000)
    fs.write("dir/one.txt", "1")
    fs.write("dir/sub/two.txt", "22")
    with UndoLog(fs) as log:
        log.will_create("a/b/c/new.txt")
        log.will_create("a/b/other.txt")  # under an absent path already recorded
        assert (log.stats.paths, log.stats.bytes_saved) == (1, 0)
        log.will_change("dir")
        assert log.stats.files_saved == 2 and log.stats.bytes_saved == 3
        log.will_move("big.bin", "moved.bin")  # the move is recorded as its inverse: nothing copied
        assert log.stats.bytes_saved == 3
        fs.write("a/b/c/new.txt", "x")
        fs.delete("dir", recursive=True)
        fs.move("big.bin", "moved.bin")
        assert log.rollback()
    assert not fs.exists("a") and not fs.exists("moved.bin")
    assert fs.read_bytes("big.bin").content == b"b" * 1000
    assert fs.read("dir/sub/two.txt").content == "22" and fs.read("dir/one.txt").content == "1"


def test_rolling_back_an_unchanged_path_writes_nothing() -> None:
    fs = CountingMemory()
    fs._count_init()
    fs.write("a.txt", "same")
    writes: list[str] = []
    original = fs._write_content

    def counting_write(path: str, data: bytes, mode: Any) -> None:
        writes.append(path)
        original(path, data, mode)

    fs._write_content = counting_write  # type: ignore[method-assign]
    with UndoLog(fs) as log:
        log.will_change("a.txt")
        assert not log.rollback()
    assert writes == []


def test_big_saved_files_spill_to_disk_and_come_back_whole() -> None:
    fs = InMemoryFilesystem()
    data = os.urandom(3 * 1024 * 1024)
    fs.write_bytes("blob.bin", data)
    with UndoLog(fs) as log:
        log.will_change("blob.bin")
        fs.write_bytes("blob.bin", b"short")
        assert log.rollback()
    assert fs.read_bytes("blob.bin").content == data


def _tar(members: dict[str, bytes], bad_last: bool = False) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if bad_last:
            link = tarfile.TarInfo("evil")
            link.type = tarfile.SYMTYPE
            link.linkname = "/etc/passwd"
            tar.addfile(link)
    buffer.seek(0)
    return buffer


def test_a_refused_archive_leaves_nothing_and_costs_only_what_it_overwrote(counted: Counting) -> None:
    _fill_big(counted)
    counted.write("notes/a.txt", "old\n")
    counted.opened.clear()
    with pytest.raises(ValueError):
        import_tar(counted, _tar({"notes/a.txt": b"new\n", "fresh/b.txt": b"b"}, bad_last=True))
    assert counted.read("notes/a.txt").content == "old\n" and not counted.exists("fresh")
    assert counted.snapshots_taken == 0
    assert set(counted.opened) <= {"notes/a.txt"}  # the one file the import replaced was saved; nothing else


def test_a_recorded_directory_gets_back_its_empty_directories_and_loses_what_was_made_in_it(counted: Counting) -> None:
    counted.write("d/keep.txt", "k")
    counted.mkdir("d/empty/inner")
    with UndoLog(counted) as log:
        log.will_change("d")
        log.will_create("d/new/made.txt")
        counted.delete("d", recursive=True)
        counted.write("d/new/made.txt", "m")
        assert log.rollback()
    assert sorted(e.path for e in counted.walk(".")) == ["d", "d/empty", "d/empty/inner", "d/keep.txt"]
