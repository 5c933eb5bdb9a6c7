"""Tar export and import move whole workspaces between backends, safely and in fixed memory."""

from __future__ import annotations

import io
import itertools
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem
from workspacefs.archive import UnsafeArchiveError, export_tar, import_tar
from workspacefs.protocol import Filesystem

_count = itertools.count()
TREE: dict[str, bytes] = {
    "README.md": b"# workspace\n",
    "src/main.py": b"print('hi')\n",
    "src/pkg/__init__.py": b"",
    "data/blob.bin": bytes(range(256)) * 100,
    "data/unicode é.txt": "naïve\n".encode(),
    "big/large.bin": os.urandom(3 * 1024 * 1024),
}
EMPTY_DIRS = ("empty", "src/also-empty")


def tree(fs: Filesystem) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    pending = ["."]
    while pending:
        for entry in fs.list(pending.pop()):
            if entry.is_directory:
                found[entry.path] = None
                pending.append(entry.path)
            else:
                with fs.open_read(entry.path) as reader:
                    found[entry.path] = b"".join(reader)
    return found


@pytest.fixture
def makers(fast_tmp: Path) -> dict[str, Callable[[], Filesystem]]:
    def host() -> Filesystem:
        index = next(_count)
        (fast_tmp / f"arc-{index}").mkdir()
        return HostFilesystem(fast_tmp / f"arc-{index}", snapshot_dir=fast_tmp / f"arc-snap-{index}")

    def sql() -> Filesystem:
        return SqlFilesystem(f"sqlite:///{fast_tmp / 'archive.db'}", f"arc-{next(_count)}")

    return {"memory": InMemoryFilesystem, "host": host, "sqlite": sql}


def seeded(make: Callable[[], Filesystem]) -> Filesystem:
    fs = make()
    for directory in EMPTY_DIRS:
        fs.mkdir(directory)
    for path, data in TREE.items():
        fs.write_bytes(path, data)
    return fs


@pytest.mark.parametrize(("source", "target"), [("memory", "host"), ("host", "sqlite"), ("sqlite", "memory")])
def test_a_workspace_moves_between_backends_unchanged(
    makers: dict[str, Callable[[], Filesystem]], source: str, target: str
) -> None:
    origin = seeded(makers[source])
    buffer = io.BytesIO()
    stats = export_tar(origin, buffer)
    assert (stats.files, stats.directories) == (len(TREE), 6)
    buffer.seek(0)
    destination = makers[target]()
    assert import_tar(destination, buffer) == stats
    assert tree(destination) == tree(origin)


def test_export_and_import_under_a_path_with_compression() -> None:
    origin = seeded(InMemoryFilesystem)
    buffer = io.BytesIO()
    export_tar(origin, buffer, path="src", compression="gz")
    buffer.seek(0)
    destination = InMemoryFilesystem()
    import_tar(destination, buffer, path="restored/here")
    assert tree(destination)["restored/here/main.py"] == b"print('hi')\n"
    assert destination.stat("restored/here/also-empty").is_directory


def _archive(*members: tuple[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            data = b"payload"
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.linkname = "/etc/passwd"
                tar.addfile(info)
    buffer.seek(0)
    return buffer


@pytest.mark.parametrize(
    "evil",
    [
        ("/etc/cron.d/evil", tarfile.REGTYPE),
        ("../escape.txt", tarfile.REGTYPE),
        ("ok/../../escape.txt", tarfile.REGTYPE),
        ("link", tarfile.SYMTYPE),
        ("hardlink", tarfile.LNKTYPE),
        ("device", tarfile.CHRTYPE),
        ("fifo", tarfile.FIFOTYPE),
    ],
)
def test_unsafe_members_are_refused_and_nothing_remains(evil: tuple[str, bytes], fast_tmp: Path) -> None:
    root = fast_tmp / f"evil-{next(_count)}"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=fast_tmp / f"evil-snap-{next(_count)}") as fs:
        fs.write("keep.txt", "keep")
        with pytest.raises(UnsafeArchiveError):
            import_tar(fs, _archive(("first.txt", tarfile.REGTYPE), evil, ("last.txt", tarfile.REGTYPE)))
        assert sorted(p.name for p in root.iterdir()) == ["keep.txt"]
    assert not (fast_tmp / "escape.txt").exists()


def test_export_streams_to_a_pipe_in_fixed_memory(fast_tmp: Path) -> None:
    import tracemalloc

    root = fast_tmp / f"pipe-{next(_count)}"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=fast_tmp / f"pipe-snap-{next(_count)}") as fs:
        with fs.open_write("big.bin") as writer:
            for _ in range(64):
                writer.write(b"\1" * 1024 * 1024)
        read_end, write_end = os.pipe()
        sink = open(write_end, "wb")  # noqa: SIM115
        import threading

        received = []

        def consume() -> None:
            with open(read_end, "rb") as source:
                received.append(sum(len(block) for block in iter(lambda: source.read(1 << 20), b"")))

        thread = threading.Thread(target=consume)
        thread.start()
        tracemalloc.start()
        export_tar(fs, sink)
        sink.close()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        thread.join()
        assert received[0] > 64 * 1024 * 1024
        assert peak < 16 * 1024 * 1024
