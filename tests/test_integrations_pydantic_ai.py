"""pydantic-ai: a real ``Agent`` runs the workspacefs toolset with pydantic-ai's own test models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
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

from workspacefs import InMemoryFilesystem, ToolContext, open_filesystem, tools_for
from workspacefs.backends.container import ContainerSandbox
from workspacefs.integrations.pydantic_ai import workspace_tools, workspace_toolset
from workspacefs.tools import portable_schema


def scripted(calls: list[tuple[str, dict[str, Any]]], seen: list[AgentInfo]) -> FunctionModel:
    """A model that makes one call of ``calls`` per turn, then answers."""
    pending = list(calls)

    def respond(_messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        if pending:
            name, arguments = pending.pop(0)
            return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=f"call-{len(pending)}")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def returns(messages: list[ModelMessage]) -> list[str]:
    return [part.content for m in messages for part in m.parts if isinstance(part, ToolReturnPart)]


def test_an_agent_writes_edits_reads_and_greps_through_the_toolset(workspace: Workspace) -> None:  # noqa: F811
    seen: list[AgentInfo] = []
    agent = Agent(scripted(SCRIPT, seen), toolsets=[workspace_toolset(workspace.fs)])
    result = agent.run_sync("Make main return 2 and note what is left to do.")
    assert result.output == "done"
    assert returns(result.all_messages()) == expected_messages()
    check_files(workspace)


def test_an_agent_runs_commands_in_a_container_workspace(sandbox: ContainerSandbox) -> None:  # noqa: F811
    result = Agent(scripted(EXEC_SCRIPT, []), toolsets=[workspace_toolset(sandbox.filesystem)]).run_sync("run it")
    check_exec(sandbox, returns(result.all_messages()))


def test_the_model_sees_the_tool_layers_names_descriptions_and_schemas() -> None:
    fs = InMemoryFilesystem()
    seen: list[AgentInfo] = []
    Agent(scripted([], seen), toolsets=[workspace_toolset(fs)]).run_sync("hi")
    offered = {definition.name: definition for definition in seen[0].function_tools}
    assert list(offered) == [tool.name for tool in tools_for(fs)]
    for tool in tools_for(fs):
        assert offered[tool.name].description == tool.description
        assert offered[tool.name].parameters_json_schema == portable_schema(tool.params)
        assert offered[tool.name].sequential == (tool.mutating or tool.name == "snapshot")


def test_test_model_calls_every_tool_and_none_raises() -> None:
    """pydantic-ai's ``TestModel`` calls each tool with arguments made from its schema: every one answers."""
    fs = InMemoryFilesystem()
    fs.write("a", "text\n")
    result = Agent(TestModel(), toolsets=[workspace_toolset(fs)]).run_sync("use every tool")
    answered = [part for m in result.all_messages() for part in m.parts if isinstance(part, ToolReturnPart)]
    assert {part.tool_name for part in answered} == {tool.name for tool in tools_for(fs)}
    assert all(isinstance(part.content, str) and part.content for part in answered)


def test_tools_share_a_context_given_by_the_caller() -> None:
    fs = InMemoryFilesystem()
    fs.write("seen.txt", "old\n")
    context = ToolContext(filesystem=fs)
    toolset = FunctionToolset(workspace_tools(context, tools=["read_file", "write_file"]))
    calls = [
        ("write_file", {"path": "seen.txt", "content": "new\n"}),  # refused: never read
        ("read_file", {"path": "seen.txt"}),
        ("write_file", {"path": "seen.txt", "content": "new\n"}),
    ]
    result = Agent(scripted(calls, []), toolsets=[toolset]).run_sync("rewrite it")
    refused, _, written = returns(result.all_messages())
    assert "read" in refused.lower() and written.startswith("Overwrote 'seen.txt'")
    assert context.read_state.seen(fs, "seen.txt") is not None  # the caller's context saw the read
    assert fs.read("seen.txt").content == "new\n"


def test_the_readme_line_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "never-used")  # the provider is built, never called
    scope = run_readme_block("pydantic-ai", tmp_path, monkeypatch)
    agent: Agent[None, str] = scope["agent"]
    with agent.override(model=scripted([("write_file", {"path": "notes.md", "content": "kept\n"})], [])):
        assert agent.run_sync("take a note").output == "done"
    scope["fs"].close()
    with open_filesystem(readme_workspace(tmp_path)) as reopened:
        assert reopened.read("notes.md").content == "kept\n"
