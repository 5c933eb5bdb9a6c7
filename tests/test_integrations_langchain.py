"""LangChain: a real ``create_agent`` loop (LangGraph underneath) runs the workspacefs ``StructuredTool``s, driven
by LangChain's own fake chat model emitting tool calls."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
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
from workspacefs.integrations.langchain import workspace_tools
from workspacefs.tools import portable_schema


class ToolCallingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, plus the ``bind_tools`` an agent asks of it (recording what it was given)."""

    bound: list[Any] = []  # noqa: RUF012 - a pydantic field, one list per instance

    def bind_tools(self, tools: Sequence[Any], **_kwargs: Any) -> Runnable[Any, Any]:
        self.bound = list(tools)
        return self


def scripted(calls: list[tuple[str, dict[str, Any]]]) -> ToolCallingFakeModel:
    """One tool call per turn, then a final answer."""
    turns: list[AIMessage | str] = [
        AIMessage("", tool_calls=[{"name": name, "args": arguments, "id": f"call-{i}", "type": "tool_call"}])
        for i, (name, arguments) in enumerate(calls)
    ]
    return ToolCallingFakeModel(messages=iter([*turns, AIMessage("done")]))


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def test_an_agent_writes_edits_reads_and_greps_through_the_tools(workspace: Workspace) -> None:  # noqa: F811
    agent = create_agent(scripted(SCRIPT), tools=workspace_tools(workspace.fs))
    state = agent.invoke({"messages": [("user", "Make main return 2 and note what is left to do.")]})
    answered = tool_messages(state)
    assert [m.content for m in answered] == expected_messages()
    assert [m.name for m in answered] == [name for name, _ in SCRIPT]
    assert state["messages"][-1].content == "done"
    check_files(workspace)


@pytest.mark.anyio
async def test_the_async_path_runs_the_same(workspace: Workspace) -> None:  # noqa: F811
    agent = create_agent(scripted(SCRIPT), tools=workspace_tools(workspace.fs))
    state = await agent.ainvoke({"messages": [("user", "go")]})
    assert [m.content for m in tool_messages(state)] == expected_messages()
    check_files(workspace)


def test_an_agent_runs_commands_in_a_container_workspace(sandbox: ContainerSandbox) -> None:  # noqa: F811
    state = create_agent(scripted(EXEC_SCRIPT), tools=workspace_tools(sandbox)).invoke({"messages": [("user", "go")]})
    check_exec(sandbox, [str(m.content) for m in tool_messages(state)])


def test_the_model_is_bound_to_the_tool_layers_names_descriptions_and_schemas() -> None:
    fs = InMemoryFilesystem()
    model = scripted([])
    create_agent(model, tools=workspace_tools(fs)).invoke({"messages": [("user", "hi")]})
    assert [tool.name for tool in model.bound] == [tool.name for tool in tools_for(fs)]
    for given, tool in zip(model.bound, tools_for(fs), strict=True):
        assert given.description == tool.description
        assert given.args_schema == portable_schema(tool.params)
        sent = convert_to_openai_tool(given)["function"]  # what a provider's bind_tools sends
        assert (sent["description"], sent["parameters"]) == (tool.description, portable_schema(tool.params))


def test_a_tool_invoked_with_a_bad_argument_answers_with_the_tool_layers_message() -> None:
    read_file = workspace_tools(InMemoryFilesystem(), tools=["read_file"])[0]
    message = read_file.invoke(
        {"name": "read_file", "args": {"path": "a", "offset": -1}, "id": "1", "type": "tool_call"}
    )
    assert isinstance(message, ToolMessage) and message.content.startswith("Invalid arguments for read_file: offset")


def test_the_readme_line_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = scripted([("write_file", {"path": "notes.md", "content": "kept\n"})])
    scope = run_readme_block("LangChain", tmp_path, monkeypatch, model=model)
    scope["agent"].invoke({"messages": [("user", "take a note")]})
    scope["fs"].close()
    with open_filesystem(readme_workspace(tmp_path)) as reopened:
        assert reopened.read("notes.md").content == "kept\n"
