"""``workspacefs mcp`` driven by the official SDK's client over stdio, on every backend kind.

Each test launches the real command as a subprocess, so what is checked is what an MCP client gets:
the tool list with its annotations, every tool with good and bad arguments, ``isError`` results that
carry the Python tool's own message, and roots that can only narrow access.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import mcp_types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from workspacefs import InMemoryFilesystem, ToolContext, dispatch

pytestmark = pytest.mark.anyio
_ids = itertools.count()

FILE_TOOLS = {"ls", "read_file", "write_file", "edit_file", "glob", "grep", "rm", "mkdir", "mv", "cp", "stat"}
SNAPSHOT_TOOLS = {"snapshot", "restore", "diff"}
READ_ONLY_TOOLS = {"ls", "read_file", "glob", "grep", "stat", "diff"}

# (tool, arguments, succeeds, a fragment of the message); run in order against one workspace
SCRIPT: list[tuple[str, dict[str, Any], bool, str]] = [
    ("write_file", {"path": "src/app.py", "content": "def main():\n    print('hi')\n"}, True, "Created"),
    ("write_file", {"path": "src/app.py"}, False, "Invalid arguments for write_file"),
    ("write_file", {"path": "src/app.py/inner.py", "content": "x"}, False, "src/app.py"),
    ("read_file", {"path": "src/app.py"}, True, "print('hi')"),
    ("read_file", {"path": "src/missing.py"}, False, "missing.py"),
    ("read_file", {"path": "../outside.txt"}, False, "outside the workspace"),
    ("edit_file", {"path": "src/app.py", "old_string": "'hi'", "new_string": "'hello'"}, True, "src/app.py"),
    ("edit_file", {"path": "src/app.py", "old_string": "not there", "new_string": "x"}, False, "was not found"),
    ("ls", {"path": "src"}, True, "app.py"),
    ("ls", {"path": "src/app.py"}, False, "app.py"),
    ("glob", {"pattern": "**/*.py"}, True, "src/app.py"),
    ("glob", {"pattern": 7}, False, "Invalid arguments for glob"),
    ("grep", {"pattern": "hel+o"}, True, "src/app.py"),
    ("grep", {"pattern": "(unclosed"}, False, "regular expression"),
    ("stat", {"path": "src/app.py"}, True, "is a file"),
    ("stat", {"path": "nope"}, False, "nope"),
    ("mkdir", {"path": "docs/guides"}, True, "docs/guides"),
    ("mkdir", {"path": "src/app.py"}, False, "src/app.py"),
    ("cp", {"src": "src/app.py", "dst": "src/copy.py"}, True, "Copied"),
    ("cp", {"src": "src/app.py", "dst": "src/copy.py"}, False, "already exists"),
    ("mv", {"src": "src/copy.py", "dst": "docs/moved.py"}, True, "Moved"),
    ("mv", {"src": "src/gone.py", "dst": "x.py"}, False, "gone.py"),
    ("snapshot", {"tag": "checkpoint"}, True, "Took snapshot"),
    ("rm", {"path": "docs"}, False, "recursive=true"),
    ("rm", {"path": "docs", "recursive": True}, True, "Removed directory"),
    ("diff", {"snapshot_id": "checkpoint"}, True, "D docs/moved.py"),
    ("diff", {"snapshot_id": "no-such-snapshot"}, False, "no-such-snapshot"),
    ("restore", {"snapshot_id": "checkpoint"}, True, "Restored snapshot"),
    ("restore", {"snapshot_id": "00000000-0000-0000-0000-000000000000"}, False, "There is no snapshot"),
    ("read_file", {"path": "docs/moved.py"}, True, "print('hello')"),
    ("frobnicate", {}, False, "There is no tool named 'frobnicate'"),
]


def _command(fs_url: str, *extra: str) -> StdioServerParameters:
    env = {"PYTHONUNBUFFERED": "1", "HOME": os.environ.get("HOME", "/root"), "PATH": os.environ.get("PATH", "")}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "workspacefs", "mcp", "--fs", fs_url, *extra], env=env
    )


@asynccontextmanager
async def connected(fs_url: str, *extra: str, roots: list[str] | None = None) -> AsyncIterator[ClientSession]:
    """A client session (protocol 2025-11-25, the initialize handshake) with the real command."""

    async def list_roots(_ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=f"root{n}") for n, uri in enumerate(roots or [])])

    with open(os.devnull, "w") as errlog:  # the server's stderr (warnings, logs) must not break anything
        async with stdio_client(_command(fs_url, *extra), errlog=errlog) as (read, write):
            callback = list_roots if roots is not None else None
            async with ClientSession(read, write, list_roots_callback=callback) as session:
                await session.initialize()
                yield session


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.fixture(params=["memory", "host", "sqlite", "postgresql", "composite"])
def backend_url(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[str]:
    kind = request.param
    if kind == "memory":
        yield "memory://"
    elif kind == "host":
        root = fast_tmp / f"mcp-host-{next(_ids)}"
        root.mkdir()
        yield f"file://{root}?snapshot_dir={fast_tmp / f'mcp-snaps-{next(_ids)}'}"
    elif kind == "sqlite":
        yield f"sqlite:///{fast_tmp / 'mcp.db'}?session=mcp-{uuid.uuid4().hex[:8]}"
    elif kind == "composite":  # a host directory mounted at the root of a composite, opened from its URL
        root = fast_tmp / f"mcp-composite-{next(_ids)}"
        root.mkdir()
        inner = f"file://{root}?snapshot_dir={fast_tmp / f'mcp-snaps-{next(_ids)}'}"
        yield "composite://?" + urlencode({"/": inner})
    else:
        url = request.getfixturevalue("postgres_url")
        yield f"{url}?session=mcp-{uuid.uuid4().hex[:8]}"


async def test_every_tool_good_and_bad_on_every_backend(backend_url: str) -> None:
    async with connected(backend_url, "--create") as session:
        listed = (await session.list_tools()).tools
        assert {tool.name for tool in listed} == FILE_TOOLS | SNAPSHOT_TOOLS
        for tool in listed:
            assert tool.description and tool.input_schema["type"] == "object"
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is (tool.name in READ_ONLY_TOOLS), tool.name
        hints = {tool.name: tool.annotations for tool in listed if tool.annotations}
        assert hints["rm"].destructive_hint and hints["write_file"].destructive_hint
        assert not hints["mkdir"].destructive_hint and hints["mv"].idempotent_hint is False
        for name, arguments, succeeds, fragment in SCRIPT:
            result = await session.call_tool(name, arguments)
            message = text_of(result)
            assert result.is_error is (not succeeds), f"{name} {arguments}: {message}"
            assert fragment in message, f"{name} {arguments}: {message!r} lacks {fragment!r}"


_VOLATILE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[^ ,.)]*"
)


async def test_messages_are_exactly_the_python_tools_messages() -> None:
    local = ToolContext(filesystem=InMemoryFilesystem())
    async with connected("memory://") as session:
        for name, arguments, _succeeds, _fragment in SCRIPT:
            remote = await session.call_tool(name, arguments)
            expected = dispatch(name, arguments, local)
            assert _VOLATILE.sub("…", text_of(remote)) == _VOLATILE.sub("…", expected.message), name
            assert remote.is_error is (not expected.success)


async def test_read_only_and_a_chosen_tool_set(fast_tmp: Path) -> None:
    root = fast_tmp / f"mcp-ro-{next(_ids)}"
    root.mkdir()
    (root / "notes.md").write_text("keep me\n")
    async with connected(f"file://{root}", "--read-only") as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names == READ_ONLY_TOOLS
        refused = await session.call_tool("write_file", {"path": "notes.md", "content": "x"})
        assert refused.is_error and "There is no tool named 'write_file'" in text_of(refused)
        assert "keep me" in text_of(await session.call_tool("read_file", {"path": "notes.md"}))
    assert (root / "notes.md").read_text() == "keep me\n"
    async with connected(f"file://{root}", "--tools", "ls,stat") as session:
        assert [tool.name for tool in (await session.list_tools()).tools] == ["ls", "stat"]


def test_bad_command_lines_fail_with_a_message(fast_tmp: Path) -> None:
    """One line and the exit code ``ls`` gives for the same URL: no usage text, no traceback."""
    for arguments, code, fragment in (
        (["--fs", "nope://x"], 6, "Unknown filesystem scheme"),
        (["--fs", "memory://", "--tools", "ls,teleport"], 6, "teleport"),
        (["--fs", "sqlite:///x.db"], 6, "session"),
        (["--fs", str(fast_tmp)], 6, f"file://{fast_tmp}"),
        (["--fs", f"file://{fast_tmp}/no-such-dir"], 3, "does not exist"),
        (["--fs", f"sqlite:///{fast_tmp}/no-such.db?session=a"], 3, "No such database"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "workspacefs", "mcp", *arguments],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        lines = [line for line in done.stderr.splitlines() if not line.startswith("workspacefs: memory://")]
        assert (done.returncode, len(lines)) == (code, 1) and fragment in done.stderr, done.stderr
    assert not (fast_tmp / "no-such-dir").exists() and not (fast_tmp / "no-such.db").exists()


@pytest.fixture
def narrowed(fast_tmp: Path) -> Path:
    root = fast_tmp / f"mcp-roots-{next(_ids)}"
    (root / "project").mkdir(parents=True)
    (root / "project" / "a.txt").write_text("inside\n")
    (root / "secret.txt").write_text("outside\n")
    return root


async def test_roots_narrow_access_on_2025_protocols(narrowed: Path) -> None:
    async with connected(f"file://{narrowed}", roots=[f"file://{narrowed}/project", "file:///etc"]) as session:
        inside = await session.call_tool("read_file", {"path": "project/a.txt"})
        assert not inside.is_error and "inside" in text_of(inside)
        outside = await session.call_tool("read_file", {"path": "secret.txt"})
        assert outside.is_error and "outside the client's roots" in text_of(outside)
        assert (await session.call_tool("ls", {})).is_error  # the root holds more than the roots allow
        escape = await session.call_tool("mv", {"src": "project/a.txt", "dst": "stolen.txt"})
        assert escape.is_error and "stolen.txt" in text_of(escape)
        assert (await session.call_tool("snapshot", {})).is_error
        assert (await session.call_tool("grep", {"pattern": "outside"})).is_error
        found = await session.call_tool("grep", {"pattern": "inside", "path": "project"})
        assert not found.is_error and "project/a.txt" in text_of(found)
    assert (narrowed / "project" / "a.txt").exists()


async def test_roots_outside_the_workspace_grant_nothing(narrowed: Path) -> None:
    async with connected(f"file://{narrowed}", roots=["file:///home/someone/else"]) as session:
        denied = await session.call_tool("read_file", {"path": "project/a.txt"})
        assert denied.is_error and "nothing in this workspace" in text_of(denied)
    async with connected(f"file://{narrowed}", roots=[f"file://{narrowed.parent}"]) as session:
        whole = await session.call_tool("read_file", {"path": "secret.txt"})  # a root holding it all
        assert not whole.is_error


async def test_roots_on_the_2026_protocol_through_input_requests(narrowed: Path) -> None:
    async def list_roots(_ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=f"file://{narrowed}/project", name="project")])

    async with Client(_command(f"file://{narrowed}"), list_roots_callback=list_roots) as client:
        assert client.protocol_version == "2026-07-28"
        inside = await client.call_tool("read_file", {"path": "project/a.txt"})
        assert not inside.is_error and "inside" in text_of(inside)
        outside = await client.call_tool("read_file", {"path": "secret.txt"})
        assert outside.is_error and "outside the client's roots" in text_of(outside)
        assert {tool.name for tool in (await client.list_tools()).tools} == FILE_TOOLS | SNAPSHOT_TOOLS


async def test_native_tools_by_name_and_within_roots(narrowed: Path) -> None:
    names = "str_replace_based_edit_tool,str_replace_editor,memory,apply_patch,read_file"
    roots = [f"file://{narrowed}/project", f"file://{narrowed}/memories"]
    async with connected(f"file://{narrowed}", "--tools", names, roots=roots) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert sorted(listed) == sorted(names.split(","))
        assert "command" in listed["str_replace_based_edit_tool"].input_schema["properties"]
        viewed = await session.call_tool("str_replace_based_edit_tool", {"command": "view", "path": "/project/a.txt"})
        assert not viewed.is_error and "     1\tinside" in text_of(viewed)
        edited = await session.call_tool(
            "str_replace_based_edit_tool",
            {"command": "str_replace", "path": "/project/a.txt", "old_str": "inside", "new_str": "changed"},
        )
        assert not edited.is_error, text_of(edited)
        remembered = await session.call_tool(
            "memory", {"command": "create", "path": "/memories/user.md", "file_text": "likes tea\n"}
        )
        assert not remembered.is_error, text_of(remembered)
        patch = "*** Begin Patch\n*** Update File: project/a.txt\n-changed\n+patched\n*** End Patch"
        applied = await session.call_tool("apply_patch", {"input": patch})
        assert not applied.is_error and "M project/a.txt" in text_of(applied)
        sneaky = "*** Begin Patch\n*** Update File: secret.txt\n-outside\n+stolen\n*** End Patch"
        refused = await session.call_tool("apply_patch", {"input": sneaky})
        assert refused.is_error and "outside the client's roots" in text_of(refused)
        peek = await session.call_tool("str_replace_based_edit_tool", {"command": "view", "path": "/secret.txt"})
        assert peek.is_error
    assert (narrowed / "project" / "a.txt").read_text() == "patched\n"
    assert (narrowed / "memories" / "user.md").read_text() == "likes tea\n"
    assert (narrowed / "secret.txt").read_text() == "outside\n"
