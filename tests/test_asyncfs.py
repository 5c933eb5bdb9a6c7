"""AsyncFilesystem: the same behaviour and errors, awaited, with the event loop left free."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from workspacefs import Capabilities, InMemoryFilesystem, UnsupportedOperationError
from workspacefs.asyncfs import AsyncFilesystem
from workspacefs.results import FileStat

pytestmark = pytest.mark.anyio


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


async def test_streams() -> None:
    afs = AsyncFilesystem(InMemoryFilesystem())
    async with await afs.open_write("big.bin") as writer:
        await writer.write(b"x" * 100_000)
        await writer.write_all([b"y", b"z"])
    async with await afs.open_read("big.bin") as reader:
        chunks = [chunk async for chunk in reader]
    assert b"".join(chunks) == b"x" * 100_000 + b"yz"
    async with await afs.open_text("big.bin") as text:
        assert len(await text.read(10)) == 10


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
