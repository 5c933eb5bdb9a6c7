"""``run_command`` through every surface: dispatch (with transactions), provider schemas, and MCP over a
``podman://`` workspace — offered only where the backend declares it can run commands."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from workspacefs import InMemoryFilesystem, ToolContext, dispatch, to_openai_tools, tools_for
from workspacefs.backends.container import ContainerSandbox
from workspacefs.tools import RUN_COMMAND


@pytest.fixture
def sandbox(image: str, tmp_path: Path) -> Iterator[ContainerSandbox]:
    with ContainerSandbox(image, snapshot_strategy="copy", snapshot_dir=tmp_path / "snapshots") as opened:
        yield opened


def test_run_command_is_offered_only_where_commands_can_run(sandbox: ContainerSandbox) -> None:
    assert "run_command" in {tool.name for tool in tools_for(sandbox.filesystem)}
    assert "run_command" not in {tool.name for tool in tools_for(InMemoryFilesystem())}
    memory = dispatch("run_command", {"command": "true"}, ToolContext(InMemoryFilesystem()))
    assert not memory.success and "no tool named 'run_command'" in memory.message
    forced = dispatch("run_command", {"command": "true"}, ToolContext(InMemoryFilesystem()), tools=[RUN_COMMAND])
    assert not forced.success and forced.error_code == "unsupported"


def test_run_command_reports_exit_codes_and_output(sandbox: ContainerSandbox) -> None:
    context = ToolContext(filesystem=sandbox.filesystem)
    ok = dispatch("run_command", {"command": "echo hello; echo oops >&2"}, context)
    assert ok.success and "Exit code 0 (success)." in ok.message
    assert "stdout:\nhello" in ok.message and "stderr:\noops" in ok.message
    failed = dispatch("run_command", '{"command": "ls missing-file", "timeout": null, "cwd": null}', context)
    assert failed.success and "Exit code 1." in failed.message  # a failing command is a result to read
    assert failed.value is not None and failed.value["exit_code"] == 1
    absent = dispatch("run_command", {"command": "frobnicate"}, context)
    assert "127: the command was not found" in absent.message
    sandbox.filesystem.mkdir("sub")
    assert "/workspace/sub" in dispatch("run_command", {"command": "pwd", "cwd": "/workspace/sub"}, context).message
    nowhere = dispatch("run_command", {"command": "pwd", "cwd": "nope"}, context)
    assert not nowhere.success and "does not exist" in nowhere.message
    too_long = dispatch("run_command", {"command": "true", "timeout": 601}, context)
    assert not too_long.success and "timeout" in too_long.message


def test_long_output_is_cut_for_the_model(sandbox: ContainerSandbox) -> None:
    result = dispatch("run_command", {"command": "seq 1 200000"}, ToolContext(filesystem=sandbox.filesystem))
    assert result.success and len(result.message) < 31_000
    assert result.message.count(" cut] …") == 1 and "\n200000\n" in result.message[-200:]
    assert "the middle was cut" in result.message


def test_both_streams_long_are_each_cut_once_and_say_by_how_much(sandbox: ContainerSandbox) -> None:
    command = "seq 1 200000; seq 1 200000 >&2"
    result = dispatch("run_command", {"command": command}, ToolContext(filesystem=sandbox.filesystem))
    assert result.message.count(" bytes cut] …") == 2 and "characters cut" not in result.message
    assert len(result.message) < 31_000


def test_a_timed_out_command_says_its_changes_stay_and_costs_no_snapshot(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    fs.write("kept.txt", "before\n")
    context = ToolContext(filesystem=fs)
    result = dispatch(
        "run_command", {"command": "echo after > kept.txt; echo junk > new.txt; sleep 60", "timeout": 1}, context
    )
    assert not result.success and result.error_code == "timed_out"
    assert "killed after 1 s" in result.message and "stay changed" in result.message
    assert fs.read("kept.txt").content == "after\n" and fs.exists("new.txt")
    assert fs.snapshots() == []  # a command is never wrapped in a whole-workspace snapshot


def test_openai_schema_of_run_command() -> None:
    [definition] = to_openai_tools([RUN_COMMAND])
    parameters = definition["function"]["parameters"]
    assert parameters["required"] == ["command", "timeout", "cwd"]
    assert parameters["properties"]["timeout"]["type"] == ["integer", "null"]
    json.dumps(definition)


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[ClientSession]:
    env = {"PYTHONUNBUFFERED": "1", "HOME": os.environ.get("HOME", "/root"), "PATH": os.environ.get("PATH", "")}
    command = StdioServerParameters(command=sys.executable, args=["-m", "workspacefs", "mcp", "--fs", url], env=env)
    with open(os.devnull, "w") as errlog:
        async with stdio_client(command, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@pytest.mark.anyio
async def test_mcp_serves_run_command_on_a_podman_workspace(image: str) -> None:
    async with connected(f"podman://{image}") as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert "run_command" in listed
        annotations = listed["run_command"].annotations
        assert annotations is not None and annotations.destructive_hint and not annotations.read_only_hint
        written = await session.call_tool("write_file", {"path": "/workspace/job.sh", "content": "echo done\n"})
        assert not written.is_error
        ran = await session.call_tool("run_command", {"command": "sh job.sh"})
        text = "\n".join(b.text for b in ran.content if isinstance(b, types.TextContent))
        assert not ran.is_error and "stdout:\ndone" in text


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_command_too_long_to_run_is_refused_as_such_and_a_long_one_is_not_echoed_whole(
    sandbox: ContainerSandbox,
) -> None:
    context = ToolContext(filesystem=sandbox.filesystem)
    huge = dispatch("run_command", {"command": "echo " + "y" * 200_000}, context)
    assert huge.error_code == "invalid_argument" and "too long to run" in huge.message, huge.message
    assert "working directory" not in huge.message
    long = dispatch("run_command", {"command": "true " + "z" * 50_000}, context)
    assert long.success and len(long.message) < 3_000, len(long.message)
    assert "50,005 characters" in long.message
