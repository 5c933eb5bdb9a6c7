"""FileManager, PathConstraints, ReaderTool and WriterTool (seed 003) on the in-memory and host backends."""

from __future__ import annotations

import gc
import itertools
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from workspacefs import HostFilesystem, InMemoryFilesystem
from workspacefs.manager import FileAction, FileManager, FileRequest, FileResponse, PathConstraints
from workspacefs.protocol import Filesystem

pytestmark = pytest.mark.anyio
_count = itertools.count()


@pytest.fixture(params=["memory", "host"])
def fs(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Filesystem]:
    if request.param == "memory":
        yield InMemoryFilesystem()
        return
    index = next(_count)
    (fast_tmp / f"mgr-{index}").mkdir()
    with HostFilesystem(fast_tmp / f"mgr-{index}", snapshot_dir=fast_tmp / f"mgr-snap-{index}") as host:
        yield host


async def test_the_seeds_usage_example_runs(fs: Filesystem) -> None:
    file_manager = FileManager(fs)
    file_manager.constraints.add_allowed_path("/safe/path")
    file_manager.constraints.add_allowed_extension(".txt")

    writer = file_manager.get_tool("writer")
    response = await writer.execute(action="write", path="/safe/path/file.txt", content="Hello World")
    assert response.success

    reader = file_manager.get_tool("reader")
    open_response = await reader.execute(action="open", path="/safe/path/file.txt")
    doc_id = open_response.doc_id
    content = await reader.execute(action="read", doc_id=doc_id, start_offset=0, end_offset=100)
    assert content.content == "Hello World"

    responses = await writer.execute_batch(
        [
            {"action": "write", "path": "/safe/path/file1.txt", "content": "Hello"},
            {"action": "write", "path": "/safe/path/file2.txt", "content": "World"},
        ]
    )
    assert [r.success for r in responses] == [True, True]

    chunks = [chunk async for chunk in reader.stream_chunks(path="/safe/path/file1.txt", chunk_size=2)]
    assert chunks == ["He", "ll", "o"]
    assert await file_manager.cleanup() >= 0


class _Spy(InMemoryFilesystem):
    """Counts every call that reaches the filesystem."""

    calls: list[str]

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_") and name not in ("mount_point", "calls"):
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)


TRAPS = [
    ("/safe-evil/x.txt", "allowed_paths"),
    ("/safe/../etc/passwd.txt", "allowed_paths"),
    ("/safe/../../x.txt", "escapes"),
    ("/safe//../safe-evil/x.txt", "allowed_paths"),
    ("safe-evil/x.txt", "allowed_paths"),
    ("/safe/x.exe", "allowed_extensions"),
    ("/safe/x.txt.exe", "allowed_extensions"),
    ("/safe/.txt", "allowed_extensions"),
    ("/safe/secret/key.txt", "blocked_patterns"),
    ("/safe/x\x00.txt", "invalid"),
]


@pytest.mark.parametrize(("path", "rule"), TRAPS)
async def test_constraints_refuse_every_trap_without_touching_the_filesystem(path: str, rule: str) -> None:
    spy = _Spy()
    spy.calls = []
    manager = FileManager(
        spy,
        constraints=PathConstraints(
            allowed_paths=["/safe"], allowed_extensions={"txt"}, blocked_patterns=[r"/secret/"]
        ),
    )
    spy.calls.clear()
    responses = [
        await manager.writer.execute("write", path, "content"),
        await manager.writer.execute("append", path, "content"),
        await manager.writer.execute("delete", path),
        await manager.writer.execute("copy", "/safe/ok.txt", dst=path),
        await manager.reader.execute("open", path),
        await manager.execute(FileRequest(action=FileAction.READ, path=path)),
    ]
    for response in responses:
        assert isinstance(response, FileResponse)
        assert not response.success
        assert rule in (response.error or ""), response.error
    assert spy.calls == []
    assert not await manager.validate_operation(FileAction.WRITE, path)


async def test_size_limit_names_its_rule(fs: Filesystem) -> None:
    manager = FileManager(fs, constraints=PathConstraints(max_file_size=10))
    refused = await manager.writer.execute("write", "big.txt", "x" * 11)
    assert not refused.success and "max_file_size" in (refused.error or "")
    fs.write("existing.txt", "y" * 50)
    opened = await manager.reader.open("existing.txt")
    assert not opened.success and "max_file_size" in (opened.error or "")
    assert not fs.exists("big.txt")


async def test_doc_ids_are_content_hashes_stable_across_processes(fs: Filesystem) -> None:
    fs.write("a.txt", "same content")
    fs.write("b.txt", "same content")
    manager = FileManager(fs)
    first = await manager.reader.open("a.txt")
    second = await manager.reader.open("b.txt")
    assert first.doc_id == second.doc_id and first.doc_id
    script = textwrap.dedent(
        """
        import anyio
        from workspacefs import InMemoryFilesystem
        from workspacefs.manager import FileManager
        async def main():
            fs = InMemoryFilesystem()
            fs.write("elsewhere.txt", "same content")
            print((await FileManager(fs).reader.open("elsewhere.txt")).doc_id)
        anyio.run(main)
        """
    )
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    assert other == first.doc_id


async def test_offsets_are_characters_and_clamped(fs: Filesystem) -> None:
    fs.write("u.txt", "héllo wörld 😀 end")
    manager = FileManager(fs)
    doc = (await manager.reader.open("u.txt")).doc_id
    assert doc is not None
    read = manager.reader.read
    assert (await read(doc, 1, 5)).content == "éllo"
    assert (await read(doc, 12, 13)).content == "😀"
    assert (await read(doc, 14, 10_000)).content == "end"
    assert (await read(doc, -5, 2)).content == "hé"
    assert (await read(doc, 8, 3)).content == ""
    assert (await read(doc)).content == "héllo wörld 😀 end"
    assert (await manager.reader.open("u.txt")).metadata["length"] == 17


async def test_reading_a_changed_document_asks_to_open_again(fs: Filesystem) -> None:
    fs.write("a.txt", "version one")
    manager = FileManager(fs)
    doc = (await manager.reader.open("a.txt")).doc_id
    assert doc is not None
    fs.write("a.txt", "version two, longer")
    response = await manager.reader.read(doc, 0, 5)
    assert not response.success and "open it again" in (response.error or "")
    assert not (await manager.reader.read("DOC_unknown")).success


async def test_list_dir_and_writer_actions(fs: Filesystem) -> None:
    manager = FileManager(fs)
    writer = manager.writer
    assert (await writer.execute("create_dirs", "a/b")).success
    assert (await writer.execute("write", "a/b/x.txt", "x")).success
    assert (await writer.execute("append", "a/b/x.txt", "y")).success
    assert fs.read("a/b/x.txt").content == "xy"
    assert (await writer.execute("copy", "a/b/x.txt", dst="a/y.txt")).success
    assert (await writer.execute("move", "a/y.txt", dst="z.txt")).success
    listing = await manager.reader.list_dir("a")
    assert [e["name"] for e in listing.entries or []] == ["b"]
    missing = await writer.execute("delete", "nope.txt")
    assert not missing.success and "FileNotFoundError" in (missing.error or "")
    assert (await writer.execute("delete", "a", recursive=True)).success
    no_parents = await writer.execute("write", "q/r.txt", "x", create_dirs=False)
    assert not no_parents.success
    bad = await writer.execute_batch([{"action": "write", "path": "ok.txt", "content": "1"}, {"bogus": 1}])
    assert [r.success for r in bad] == [True, False]


async def test_execute_requests_and_file_states(fs: Filesystem) -> None:
    manager = FileManager(fs)
    created = await manager.execute(FileRequest(action=FileAction.CREATE, path="doc.txt", content="abcdef"))
    assert created.success and created.file_id in manager.states
    again = await manager.execute(FileRequest(action=FileAction.CREATE, path="doc.txt", content="x"))
    assert not again.success and "FileExistsError" in (again.error or "")
    read = await manager.execute(FileRequest(action=FileAction.READ, path="doc.txt", options={"start_offset": 2}))
    assert read.content == "cdef"
    chunk = await manager.execute(
        FileRequest(action=FileAction.CHUNK, path="doc.txt", options={"chunk_size": 4, "index": 1})
    )
    assert chunk.content == "ef"
    directory = await manager.execute(FileRequest(action=FileAction.CREATE, path="d", options={"is_directory": True}))
    assert directory.success and fs.stat("d").is_directory
    state = manager.states[created.file_id or ""]
    assert state.path == "doc.txt" and state.size == 6
    manager.state_ttl = manager.state_ttl * 0
    tracked = len(manager.states)
    assert await manager.cleanup() == tracked
    assert manager.states == {}


async def _drain(chunks: AsyncIterator[str]) -> tuple[int, int]:
    count = total = 0
    async for chunk in chunks:
        count += 1
        total += len(chunk)
    return count, total


async def test_stream_chunks_of_256_mib_in_fixed_memory(fast_tmp: Path) -> None:
    root = fast_tmp / "stream-mgr"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=fast_tmp / "stream-mgr-snaps") as fs:
        line = ("é" * 63 + "\n").encode()  # multi-byte characters straddle every block boundary
        with fs.open_write("big.txt") as writer:
            for _ in range(256 * 1024 * 1024 // (len(line) * 1024)):
                writer.write(line * 1024)
        size = fs.stat("big.txt").size_bytes
        manager = FileManager(fs, constraints=PathConstraints(max_file_size=1 << 30))
        gc.collect()
        tracemalloc.start()
        try:
            count, total = await _drain(manager.reader.stream_chunks("big.txt", chunk_size=1_000_000))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert total == size // len(line) * 64
        assert count == -(-total // 1_000_000)
        assert peak < 32 * 1024 * 1024, f"peaked at {peak / 2**20:.1f} MiB"
        fs.delete("big.txt")
