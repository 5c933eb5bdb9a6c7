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
from workspacefs.errors import FileTooLargeError, PathEscapeError, PolicyDeniedError
from workspacefs.manager import FileAction, FileManager, FileRequest, FileResponse, PathConstraints
from workspacefs.policy import Policy
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


# --- limits judged on what an operation leaves behind (issue 14) --------------------------------------------


def _limited(fs: Filesystem, **rules: Any) -> FileManager:
    return FileManager(fs, constraints=PathConstraints(max_file_size=10, **rules))


def _refused(response: FileResponse, code: str) -> bool:
    return not response.success and response.metadata.get("error_code") == code


async def test_append_is_judged_on_the_size_the_file_will_have(fs: Filesystem) -> None:
    manager = _limited(fs)
    fs.write("ten.txt", "0123456789")
    assert _refused(await manager.writer.execute("append", "ten.txt", "x"), "file_too_large")
    assert _refused(await manager.writer.execute("write", "ten.txt", "x", mode="a"), "file_too_large")
    appended = await manager.execute(FileRequest(action=FileAction.APPEND, path="ten.txt", content="x"))
    assert _refused(appended, "file_too_large")
    assert fs.read("ten.txt").content == "0123456789"
    assert not await manager.validate_operation(FileAction.APPEND, "ten.txt", content="x")
    fs.write("five.txt", "01234")
    assert (await manager.writer.execute("append", "five.txt", "56789")).success  # exactly the limit
    assert fs.read("five.txt").content == "0123456789"
    assert (await manager.writer.execute("append", "new.txt", "0123456789")).success  # a missing file starts at 0


async def test_copy_and_move_carry_the_sources_size(fs: Filesystem) -> None:
    manager = _limited(fs)
    fs.write("big.txt", "x" * 50)
    for action in ("copy", "move"):
        refused = await manager.writer.execute(action, "big.txt", dst="copy.txt")
        assert _refused(refused, "file_too_large"), refused
        assert "max_file_size" in (refused.error or "")
    request = FileRequest(action=FileAction.COPY, path="big.txt", options={"dst": "copy.txt"})
    assert _refused(await manager.execute(request), "file_too_large")
    fs.write("small.txt", "y" * 10)
    assert _refused(await manager.writer.execute("copy", "big.txt", dst="small.txt", overwrite=True), "file_too_large")
    assert fs.read("big.txt").content == "x" * 50 and fs.read("small.txt").content == "y" * 10
    assert not fs.exists("copy.txt")
    assert (await manager.writer.execute("copy", "small.txt", dst="copy.txt")).success
    assert (await manager.writer.execute("move", "copy.txt", dst="moved.txt")).success


async def test_a_directory_copy_with_one_file_too_big_copies_nothing(fs: Filesystem) -> None:
    manager = _limited(fs)
    fs.write("src/a.txt", "small")
    fs.write("src/deep/er/big.txt", "x" * 11)
    fs.write("src/z.txt", "small")
    for action in ("copy", "move"):
        refused = await manager.writer.execute(action, "src", dst="dst")
        assert _refused(refused, "file_too_large"), refused
        assert "max_file_size" in (refused.error or "")
    assert not fs.exists("dst")
    assert sorted(e.path for e in fs.walk("src")) == [
        "src/a.txt",
        "src/deep",
        "src/deep/er",
        "src/deep/er/big.txt",
        "src/z.txt",
    ]
    fs.write("src/deep/er/big.txt", "x" * 10)
    assert (await manager.writer.execute("copy", "src", dst="dst")).success
    assert fs.read("dst/deep/er/big.txt").content == "x" * 10


async def test_directory_operations_apply_the_path_rules_to_everything_inside(fs: Filesystem) -> None:
    constraints = PathConstraints(blocked_patterns=[r"/secret/", r"\.key$"])
    manager = FileManager(fs, constraints=constraints, policy=Policy())  # the constraints alone (no path policy)
    fs.write("docs/readme.txt", "hello")
    fs.write("docs/secret/plan.txt", "hidden")
    for action in ("copy", "move"):
        refused = await manager.writer.execute(action, "docs", dst="public")
        assert _refused(refused, "policy_denied") and "blocked_patterns" in (refused.error or ""), refused
    assert _refused(await manager.writer.execute("delete", "docs", recursive=True), "policy_denied")
    assert fs.read("docs/secret/plan.txt").content == "hidden" and not fs.exists("public")
    fs.write("keys/id.pem", "k")
    fs.write("keys/old/secretive.txt", "k")
    manager.constraints.block_pattern(r"^/copied/old/")  # only the destination of one file inside is blocked
    assert _refused(await manager.writer.execute("copy", "keys", dst="copied"), "policy_denied")
    assert not fs.exists("copied")
    renamed = await manager.writer.execute("move", "keys/id.pem", dst="keys/id2.key")
    assert _refused(renamed, "policy_denied") and fs.exists("keys/id.pem")
    assert (await manager.writer.execute("copy", "keys", dst="kept")).success


async def test_copy_destination_is_held_to_the_allowed_paths_and_extensions(fs: Filesystem) -> None:
    manager = FileManager(fs, constraints=PathConstraints(allowed_paths=["/safe"], allowed_extensions={"txt"}))
    fs.write("safe/dir.txt/inner.exe", "x")  # a directory named like an allowed file, holding a refused one
    refused = await manager.writer.execute("copy", "safe/dir.txt", dst="safe/out.txt")
    assert _refused(refused, "policy_denied") and "allowed_extensions" in (refused.error or "")
    fs.write("safe/a.txt", "x")
    for action in ("copy", "move"):
        outside = await manager.writer.execute(action, "safe/a.txt", dst="elsewhere/a.txt")
        assert _refused(outside, "policy_denied") and "allowed_paths" in (outside.error or "")
        renamed = await manager.writer.execute(action, "safe/a.txt", dst="safe/a.sh")
        assert _refused(renamed, "policy_denied") and "allowed_extensions" in (renamed.error or "")
    assert not fs.exists("safe/out.txt") and not fs.exists("elsewhere") and fs.exists("safe/a.txt")


async def test_a_stream_past_the_limit_is_refused_and_leaves_the_old_content(fs: Filesystem) -> None:
    manager = _limited(fs)
    fs.write("f.txt", "old")
    with pytest.raises(FileTooLargeError):
        async with manager.writer.open_stream("f.txt") as stream:
            await stream.write(b"0123456")
            await stream.write(b"789")  # exactly the limit
            await stream.write(b"x")
    assert fs.read("f.txt").content == "old"
    async with manager.writer.open_stream("f.txt") as stream:  # a refusal swallowed inside still commits nothing
        await stream.write(b"new")
        with pytest.raises(FileTooLargeError):
            await stream.write(memoryview(b"y" * 8))
        with pytest.raises(FileTooLargeError):
            await stream.write(b"z")
    assert fs.read("f.txt").content == "old"
    async with manager.writer.open_stream("f.txt") as stream:
        assert await stream.write_all([b"01234", b"56789"]) == 10
    assert fs.read("f.txt").content == "0123456789"


async def test_an_appending_stream_counts_the_existing_content(fs: Filesystem) -> None:
    manager = _limited(fs)
    fs.write("f.txt", "01234567")
    with pytest.raises(FileTooLargeError):
        async with manager.writer.open_stream("f.txt", append=True) as stream:
            await stream.write(b"89")
            await stream.write(b"!")
    assert fs.read("f.txt").content == "01234567"
    async with manager.writer.open_stream("f.txt", append=True) as stream:
        await stream.write(b"89")
    assert fs.read("f.txt").content == "0123456789"
    async with manager.writer.open_stream("f.txt", append=True) as stream:
        assert stream.size == 10  # already at the limit: appending nothing is fine, one byte more is not
        with pytest.raises(FileTooLargeError):
            await stream.write(b"!")
    assert fs.read("f.txt").content == "0123456789"
    fs.write("big.txt", "x" * 11)  # written around the manager: even an empty append is refused
    with pytest.raises(FileTooLargeError):
        async with manager.writer.open_stream("big.txt", append=True):
            pass
    assert fs.read("big.txt").content == "x" * 11


async def test_a_stream_to_a_refused_path_opens_nothing(fs: Filesystem) -> None:
    manager = FileManager(fs, constraints=PathConstraints(allowed_paths=["/safe"], allowed_extensions={"txt"}))
    for path, error in (("out/x.txt", PolicyDeniedError), ("safe/x.sh", PolicyDeniedError), ("../x", PathEscapeError)):
        with pytest.raises(error):
            async with manager.writer.open_stream(path):
                pass
    assert not fs.exists("out") and not fs.exists("safe")
    async with manager.writer.open_stream("/safe/x.txt") as stream:
        await stream.write(b"ok")
    assert fs.read("safe/x.txt").content == "ok"
    assert any(state.path == "safe/x.txt" for state in manager.states.values())


async def test_the_manager_obeys_the_default_path_policy(fs: Filesystem) -> None:
    manager = FileManager(fs)
    written = await manager.writer.execute("write", ".git/hooks/pre-commit", content="evil")
    assert _refused(written, "policy_denied") and not fs.exists(".git")
    fs.write(".env", "TOKEN=secret")
    read = await manager.reader.execute("open", ".env")
    assert _refused(read, "policy_denied") and "secret" not in str(read.content)
    approving = FileManager(fs, policy=Policy.default(approve=lambda request: request.operation == "write"))
    assert (await approving.writer.execute("write", "AGENTS.md", content="rules")).success
    assert fs.read("AGENTS.md").content == "rules"
