"""Files as MCP resources, driven by the official SDK's client in process (the server object itself, over the
SDK's in-memory transport) on a memory and a SQLite workspace: list, read, subscribe, a write through a tool
call, the ``notifications/resources/updated`` it causes, and the new content read back."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPDeprecationWarning
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

from workspacefs import InMemoryFilesystem, SqlFilesystem, SqlStore
from workspacefs.mcp import build_server, offered_tools

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@pytest.fixture(params=["memory", "sqlite"])
def fs(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryFilesystem()
        return
    store = SqlStore(f"sqlite:///{fast_tmp / f'mcp-res-{uuid.uuid4().hex[:8]}.db'}")
    yield SqlFilesystem(store, "s")
    store.close()


class Updates:
    """The ``notifications/resources/updated`` a client receives."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self.arrived.set()

    async def wait_for(self, uri: str) -> None:
        with anyio.fail_after(60):
            while uri not in self.uris:
                await self.arrived.wait()
                self.arrived = anyio.Event()


def text(result: types.ReadResourceResult) -> str:
    [content] = result.contents
    assert isinstance(content, types.TextResourceContents)
    return content.text


async def test_subscribe_write_through_a_tool_be_told_read_the_new_content(fs: Any) -> None:
    fs.write("notes.md", "first\n")
    updates = Updates()
    async with Client(build_server(fs), mode="legacy", message_handler=updates) as client:
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.resources is not None
        assert capabilities.resources.subscribe
        listed = await client.list_resources()
        assert [str(r.uri) for r in listed.resources] == ["workspace://notes.md"]
        assert text(await client.read_resource("workspace://notes.md")) == "first\n"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource("workspace://notes.md")
        read = await client.call_tool("read_file", {"path": "notes.md"})
        assert not read.is_error
        written = await client.call_tool("write_file", {"path": "notes.md", "content": "second\n"})
        assert not written.is_error, written.content
        await updates.wait_for("workspace://notes.md")
        assert text(await client.read_resource("workspace://notes.md")) == "second\n"
        assert fs.history()[0].actor.via == "mcp" and fs.history()[0].actor.tool_call is not None
        await client.call_tool("write_file", {"path": "other.md", "content": "x"})  # not subscribed
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.unsubscribe_resource("workspace://notes.md")
        await client.call_tool("read_file", {"path": "notes.md"})
        await client.call_tool("write_file", {"path": "notes.md", "content": "third\n"})
        assert text(await client.read_resource("workspace:///notes.md")) == "third\n"
    assert updates.uris == ["workspace://notes.md"]  # other.md was not subscribed; notes.md no longer was


async def test_binary_missing_and_invalid_resources(fs: Any) -> None:
    fs.write_bytes("bin/blob.dat", b"\x00\x01\x02")
    fs.write("a dir/with space.txt", "spaced\n")
    async with Client(build_server(fs), mode="legacy") as client:
        uris = [str(r.uri) for r in (await client.list_resources()).resources]
        assert uris == ["workspace://a%20dir/with%20space.txt", "workspace://bin/blob.dat"]
        assert text(await client.read_resource(uris[0])) == "spaced\n"
        [blob] = (await client.read_resource("workspace://bin/blob.dat")).contents
        assert isinstance(blob, types.BlobResourceContents) and blob.blob == "AAEC"
        with pytest.raises(MCPError) as missing:
            await client.read_resource("workspace://nope.txt")
        assert missing.value.error.code == -32002
        with pytest.raises(MCPError):
            await client.read_resource("file:///etc/passwd")
        with pytest.raises(MCPError):
            await client.read_resource("workspace://../outside.txt")


async def test_a_foreign_cursor_or_a_non_utf8_escape_is_invalid_params(fs: Any) -> None:
    """A cursor this server never handed out was read as the first page ("abc", "-1"), or (over 4,300 digits) raised
    Python's ValueError as an internal error; ``%E9`` decoded to U+FFFD and named another file, ``caf\ufffd``."""
    fs.write("caf\ufffd.txt", "the wrong file\n")
    async with Client(build_server(fs), mode="legacy") as client:
        for cursor in ("abc", "-1", "9" * 5000, "\u0661"):  # the last: an Arabic-Indic one, a digit to isdigit()
            with pytest.raises(MCPError) as refused:
                await client.list_resources(cursor=cursor)
            assert refused.value.error.code == types.INVALID_PARAMS and "cursor" in refused.value.error.message
        assert (await client.list_resources(cursor="500")).resources == []
        with pytest.raises(MCPError) as undecodable:
            await client.read_resource("workspace://caf%E9.txt")
        assert undecodable.value.error.code == types.INVALID_PARAMS and "UTF-8" in undecodable.value.error.message
        assert text(await client.read_resource("workspace://caf%EF%BF%BD.txt")) == "the wrong file\n"


async def test_a_workspace_that_cannot_be_watched_offers_no_subscriptions(fast_tmp: Path) -> None:
    store = SqlStore(f"sqlite:///{fast_tmp / f'mcp-nowatch-{uuid.uuid4().hex[:8]}.db'}", history=False)
    fs = SqlFilesystem(store, "s")
    fs.write("a.txt", "a")
    async with Client(build_server(fs), mode="legacy") as client:
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.resources is not None
        assert not capabilities.resources.subscribe
        assert text(await client.read_resource("workspace://a.txt")) == "a"
    store.close()


def test_history_and_undo_are_served_only_when_named() -> None:
    fs = InMemoryFilesystem()
    assert not {tool.name for tool in offered_tools(fs)} & {"history", "undo"}
    assert [tool.name for tool in offered_tools(fs, ["ls", "history", "undo"])] == ["ls", "history", "undo"]
    assert [tool.name for tool in offered_tools(fs, ["history"], read_only=True)] == ["history"]
    with pytest.raises(ValueError, match="undo"):
        offered_tools(fs, ["undo"], read_only=True)


async def test_the_client_roots_narrow_resources_too(fast_tmp: Path) -> None:
    root = fast_tmp / f"mcp-res-roots-{uuid.uuid4().hex[:8]}"
    (root / "project").mkdir(parents=True)
    (root / "project" / "a.txt").write_text("inside\n")
    (root / "secret.txt").write_text("outside\n")

    async def list_roots(_ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=f"file://{root}/project", name="project")])

    from workspacefs import HostFilesystem

    async with Client(build_server(HostFilesystem(root)), mode="legacy", list_roots_callback=list_roots) as client:
        assert [str(r.uri) for r in (await client.list_resources()).resources] == ["workspace://project/a.txt"]
        with pytest.raises(MCPError, match="outside the client's roots"):
            await client.read_resource("workspace://secret.txt")
        assert text(await client.read_resource("workspace://project/a.txt")) == "inside\n"
        # where the host directory can be watched, subscribing is narrowed the same way; else not offered at all
        refusal = "outside the client's roots" if HostFilesystem(root).capabilities.watch else "Method not found"
        with pytest.raises(MCPError, match=refusal), warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource("workspace://secret.txt")


async def test_listen_on_the_2026_protocol_hears_a_write(fs: Any) -> None:
    fs.write("notes.md", "first\n")
    async with Client(build_server(fs)) as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=["workspace://notes.md"]) as subscription:
            await client.call_tool("read_file", {"path": "notes.md"})
            written = await client.call_tool("write_file", {"path": "notes.md", "content": "second\n"})
            assert not written.is_error, written.content
            with anyio.fail_after(60):
                async for event in subscription:
                    assert isinstance(event, ResourceUpdated) and event.uri == "workspace://notes.md"
                    break
        assert text(await client.read_resource("workspace://notes.md")) == "second\n"
