"""Claude Agent SDK: the server ``create_sdk_mcp_server`` builds, driven by the official ``mcp`` client over its
in-memory transport — the same in-process connection the SDK makes to Claude Code, without the CLI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, McpSdkServerConfig
from mcp import Client
from test_integrations_toolsets import (  # noqa: F401
    EXEC_SCRIPT,
    SCRIPT,
    Workspace,
    check_exec,
    check_files,
    expected_messages,
    readme_workspace,
    run_readme_block,
    sandbox,
    workspace,
)

from workspacefs import InMemoryFilesystem, open_filesystem, tools_for
from workspacefs.backends.container import ContainerSandbox
from workspacefs.integrations.claude_agent_sdk import workspace_mcp_server, workspace_sdk_tools
from workspacefs.tools import portable_schema

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connected(server: McpSdkServerConfig) -> AsyncIterator[Client]:
    assert server["type"] == "sdk"
    async with Client(server["instance"]) as client:
        yield client


async def call(client: Client, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    result = await client.call_tool(name, arguments)
    assert len(result.content) == 1
    return result.content[0].text, bool(result.is_error)  # type: ignore[union-attr]


async def test_a_client_writes_edits_reads_and_greps_through_the_server(workspace: Workspace) -> None:  # noqa: F811
    server = workspace_mcp_server(workspace.fs)
    ClaudeAgentOptions(mcp_servers={"workspace": server}, allowed_tools=["mcp__workspace__read_file"])  # it fits
    async with connected(server) as client:
        answered = [await call(client, name, arguments) for name, arguments in SCRIPT]
    assert [text for text, _ in answered] == expected_messages()
    assert [is_error for _, is_error in answered] == [False] * 5 + [True, True]  # the two mistakes are isError
    check_files(workspace)


async def test_a_client_runs_commands_in_a_container_workspace(sandbox: ContainerSandbox) -> None:  # noqa: F811
    async with connected(workspace_mcp_server(sandbox.filesystem)) as client:
        answered = [await call(client, name, arguments) for name, arguments in EXEC_SCRIPT]
    check_exec(sandbox, [text for text, _ in answered])


async def test_the_server_lists_the_tool_layers_names_descriptions_schemas_and_hints() -> None:
    fs = InMemoryFilesystem()
    async with connected(workspace_mcp_server(fs, name="files")) as client:
        listed = (await client.list_tools()).tools
    assert [tool.name for tool in listed] == [tool.name for tool in tools_for(fs)]
    for given, tool in zip(listed, tools_for(fs), strict=True):
        assert given.description == tool.description
        assert given.input_schema == portable_schema(tool.params)
        hints = given.annotations
        assert hints is not None
        assert hints.read_only_hint == (not tool.mutating and tool.name != "snapshot")
        assert (hints.destructive_hint, hints.idempotent_hint) == (tool.destructive, tool.idempotent)


async def test_a_read_only_server_offers_only_tools_that_change_nothing() -> None:
    fs = InMemoryFilesystem()
    async with connected(workspace_mcp_server(fs, read_only=True)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        text, is_error = await call(client, "write_file", {"path": "a", "content": "b"})
    assert names == [tool.name for tool in tools_for(fs, read_only=True)]
    assert is_error and "write_file" in text
    assert not fs.exists("a")


def test_sdk_tools_can_join_a_server_of_ones_own() -> None:
    tools = workspace_sdk_tools(InMemoryFilesystem(), tools=["read_file", "grep"])
    assert [(tool.name, tool.input_schema) for tool in tools] == [
        (tool.name, portable_schema(tool.params))
        for tool in tools_for(InMemoryFilesystem())
        if tool.name in {"read_file", "grep"}
    ]


async def test_the_readme_line_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scope = run_readme_block("Claude Agent SDK", tmp_path, monkeypatch)
    options: ClaudeAgentOptions = scope["options"]
    server = options.mcp_servers["workspace"]  # type: ignore[index]
    async with connected(server) as client:
        text, is_error = await call(client, "write_file", {"path": "notes.md", "content": "kept\n"})
    assert not is_error, text
    scope["fs"].close()
    with open_filesystem(readme_workspace(tmp_path)) as reopened:
        assert reopened.read("notes.md").content == "kept\n"
