"""AsyncFilesystem: the same behaviour and errors, awaited, with the event loop left free."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from workspacefs import Capabilities, Filesystem, HostFilesystem, InMemoryFilesystem, UnsupportedOperationError
from workspacefs.asyncfs import AsyncByteReader, AsyncByteWriter, AsyncFilesystem, AsyncTextReader
from workspacefs.backends.sql import SqlFilesystem
from workspacefs.results import FileStat

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "host", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Filesystem]:
    """The same async calls over an in-memory, a host directory and a SQLite filesystem."""
    fs: Filesystem
    if request.param == "memory":
        fs = InMemoryFilesystem()
    elif request.param == "host":
        (tmp_path / "root").mkdir()
        fs = HostFilesystem(tmp_path / "root", snapshot_dir=tmp_path / "snapshots")
    else:
        fs = SqlFilesystem(f"sqlite:///{tmp_path / 'async.db'}", "async")
    yield fs
    close = getattr(fs, "close", None)
    if close is not None:
        close()


async def test_every_kind_of_call() -> None:
    afs = AsyncFilesystem(InMemoryFilesystem())
    await afs.write("a/b.txt", "hello\nworld\n")
    assert (await afs.read("a/b.txt")).content == "hello\nworld\n"
    assert (await afs.read_bytes("a/b.txt", offset=6)).content == b"world\n"
    assert await afs.exists("a")
    assert [e.name for e in await afs.list("a")] == ["b.txt"]
    assert [m.path for m in await afs.glob("**/*.txt")] == ["a/b.txt"]
    assert [m.line_number for m in await afs.grep("world")] == [2]
    snapshot = await afs.snapshot()
    await afs.copy("a/b.txt", "c.txt")
    await afs.move("c.txt", "d.txt")
    await afs.mkdir("e")
    await afs.delete("a", recursive=True)
    assert (await afs.diff(snapshot)).deleted == ("a/b.txt",)
    await afs.restore(snapshot)
    assert await afs.exists("a/b.txt")


async def test_streams_open_in_async_with_directly(backend: Filesystem) -> None:
    """The form the module docstring shows: ``async with afs.open_read(p) as r``, no ``await`` first."""
    afs = AsyncFilesystem(backend)
    async with afs.open_write("big.bin") as writer:
        assert isinstance(writer, AsyncByteWriter)
        await writer.write(b"x" * 100_000)
        await writer.write_all([b"y", b"z"])
    async with afs.open_read("big.bin") as reader:
        assert isinstance(reader, AsyncByteReader)
        chunks = [chunk async for chunk in reader]
    assert b"".join(chunks) == b"x" * 100_000 + b"yz"
    async with afs.open_write("big.bin", mode="append") as writer:
        await writer.write(b"\nline two\n")
    async with afs.open_text("big.bin") as text:
        assert isinstance(text, AsyncTextReader)
        assert [len(line) async for line in text] == [100_003, 9]


async def test_streams_awaited_then_used(backend: Filesystem) -> None:
    """``await afs.open_read(p)`` still gives the open stream, for ``async with`` or an explicit close."""
    afs = AsyncFilesystem(backend)
    async with await afs.open_write("a.txt") as writer:
        await writer.write(b"one\ntwo\n")
    reader = await afs.open_read("a.txt")
    assert await reader.read(4) == b"one\n"
    await reader.aclose()
    writer = await afs.open_write("b.txt", mode="create")
    await writer.write(b"kept")
    await writer.aclose()
    assert (await afs.read("b.txt")).content == "kept"
    text = await afs.open_text("a.txt")
    assert await text.readline() == "one\n"
    await text.aclose()


async def test_a_writer_opened_in_async_with_discards_on_error(backend: Filesystem) -> None:
    afs = AsyncFilesystem(backend)
    await afs.write("kept.txt", "old")
    with pytest.raises(RuntimeError, match="boom"):
        async with afs.open_write("kept.txt") as writer:
            await writer.write(b"new, half written")
            raise RuntimeError("boom")
    assert (await afs.read("kept.txt")).content == "old"


async def test_opening_errors_surface_where_the_stream_is_opened(backend: Filesystem) -> None:
    afs = AsyncFilesystem(backend)
    opening = afs.open_read("missing.txt")  # nothing runs yet
    with pytest.raises(FileNotFoundError):
        async with opening:
            pass
    with pytest.raises(FileNotFoundError):
        await afs.open_read("missing.txt")
    await afs.write("exists.txt", "x")
    with pytest.raises(FileExistsError):
        async with afs.open_write("exists.txt", mode="create"):
            pass


async def test_one_opening_is_one_stream_at_a_time() -> None:
    afs = AsyncFilesystem(InMemoryFilesystem())
    await afs.write("a.txt", "a")
    opening = afs.open_read("a.txt")
    async with opening as reader:
        with pytest.raises(RuntimeError, match="already open"):
            async with opening:
                pass
        assert await reader.read() == b"a"


async def test_errors_are_the_same() -> None:
    afs = AsyncFilesystem(InMemoryFilesystem())
    with pytest.raises(FileNotFoundError):
        await afs.read("missing.txt")
    with pytest.raises(PermissionError):
        await afs.read("../outside")
    with pytest.raises(ValueError):
        await afs.grep("(")
    with pytest.raises(RuntimeError), anyio.CancelScope():
        async with await afs.open_write("half.txt") as writer:
            await writer.write(b"partial")
            raise RuntimeError("boom")
    assert not await afs.exists("half.txt")


class _Slow(InMemoryFilesystem):
    def _stat(self, path: str) -> FileStat:
        time.sleep(0.3)  # a slow disk, database or container
        return super()._stat(path)


async def test_the_event_loop_stays_free() -> None:
    afs = AsyncFilesystem(_Slow())
    await afs.write("a.txt", "a")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        await afs.stat("a.txt")
        group.cancel_scope.cancel()
    assert ticks >= 10, "the loop stalled while the filesystem worked"


async def test_snapshot_of_a_filesystem_that_declares_none_is_unsupported(tmp_path: Path) -> None:
    class Plain:
        mount_point = None
        capabilities = Capabilities(snapshots=False)

    afs = AsyncFilesystem(Plain())  # type: ignore[arg-type]
    with pytest.raises(UnsupportedOperationError):
        await afs.snapshot()
