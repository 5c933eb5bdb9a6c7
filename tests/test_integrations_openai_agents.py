"""OpenAI Agents SDK: a real ``Runner`` loop driven by the SDK's own scripted ``Model`` (``ScriptedModel``), with
``ApplyPatchTool(WorkspaceEditor)``, the looking tools as ``FunctionTool``s, and ``ShellTool(WorkspaceShell)`` on a
container workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from agents import Agent, ApplyPatchOperation, ApplyPatchTool, FunctionTool, RunConfig, Runner, ShellTool
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call
from conftest import missing
from openai.types.responses import ResponseFunctionShellToolCall
from test_integrations_toolsets import APP, TODO, Workspace, check_files, readme_workspace, run_readme_block, workspace  # noqa: F401

from workspacefs import InMemoryFilesystem, ToolContext, dispatch, open_filesystem, tools_for
from workspacefs.backends.container import ContainerSandbox
from workspacefs.integrations.openai_agents import WorkspaceEditor, WorkspaceShell, function_tools, workspace_tools
from workspacefs.testing._containers import busybox_image, podman_available
from workspacefs.tools import openai_strict_schema

QUIET = RunConfig(tracing_disabled=True)  # no trace export: the tests never touch the network


def patch(call_id: str, kind: str, path: str, diff: str | None = None) -> dict[str, Any]:
    operation = {"type": kind, "path": path, **({"diff": diff} if diff is not None else {})}
    return {"type": "apply_patch_call", "call_id": call_id, "status": "completed", "operation": operation}


def shell(call_id: str, *commands: str, timeout_ms: int | None = None) -> ResponseFunctionShellToolCall:
    return ResponseFunctionShellToolCall(
        id=call_id,
        call_id=call_id,
        type="shell_call",
        status="completed",
        action={"commands": list(commands), "timeout_ms": timeout_ms},  # type: ignore[arg-type]
    )


def added(text: str) -> str:
    return "".join(f"+{line}\n" for line in text.splitlines())


def run(model: ScriptedModel, tools: list[Any]) -> list[ToolCallOutputItem]:
    result = Runner.run_sync(Agent(name="coder", model=model, tools=tools), "go", run_config=QUIET)
    model.assert_complete()
    assert result.final_output == "done"
    return [item for item in result.new_items if isinstance(item, ToolCallOutputItem)]


def test_an_agent_writes_edits_reads_and_greps_through_the_sdk(workspace: Workspace) -> None:  # noqa: F811
    reading = {"path": "src/app.py", "offset": None, "limit": None}  # strict mode sends every key
    searching = {"pattern": "return|ship|keep", "path": None, "glob": None, "max_matches": None}
    workspace.fs.write("README.md", "# keep\n")  # there before the run: the model has never seen it
    model = ScriptedModel(
        [
            [
                patch("c1", "create_file", "src/app.py", added(APP)),
                patch("c2", "create_file", "notes/todo.md", added(TODO)),
            ],
            [
                patch("c3", "update_file", "src/app.py", "@@ def main():\n-    return 1\n+    return 2\n")
            ],  # no read first
            [function_call("read_file", reading, call_id="r1"), function_call("grep", searching, call_id="g1")],
            [patch("c4", "update_file", "src/app.py", "@@ def nope():\n-    x\n+    y\n")],  # context that is not there
            [patch("c5", "create_file", "README.md", "+clobbered\n")],
            [assistant_message("done")],
        ]
    )
    outputs = run(model, workspace_tools(workspace.fs))
    statuses = [item.raw_item.get("status") if isinstance(item.raw_item, dict) else None for item in outputs]
    texts = [item.output for item in outputs]
    assert texts[:3] == ["Created src/app.py", "Created notes/todo.md", "Updated src/app.py"]
    reference = ToolContext(filesystem=InMemoryFilesystem())
    dispatch("write_file", {"path": "src/app.py", "content": "def main():\n    return 2\n"}, reference)
    dispatch("write_file", {"path": "notes/todo.md", "content": TODO}, reference)
    dispatch("write_file", {"path": "README.md", "content": "# keep\n"}, reference)
    assert texts[3:5] == [dispatch(n, a, reference).message for n, a in [("read_file", reading), ("grep", searching)]]
    assert texts[5].startswith("Failed to find context 'def nope():' in src/app.py")
    assert "turn" not in texts[5] + texts[6]  # the SDK applies operations one by one: no all-or-nothing promised
    assert texts[6].startswith("You have not read 'README.md' yet")  # a new file over an unread one, as write_file
    assert statuses[:3] + statuses[5:] == ["completed"] * 3 + ["failed"] * 2
    check_files(workspace)
    assert workspace.reopen().read("README.md").content == "# keep\n"


def test_the_model_sees_apply_patch_and_the_looking_tools_with_strict_schemas() -> None:
    fs = InMemoryFilesystem()
    model = ScriptedModel([[assistant_message("done")]])
    run(model, workspace_tools(fs))
    assert model.first_call is not None
    offered = model.first_call.tools
    assert isinstance(offered[0], ApplyPatchTool) and isinstance(offered[0].editor, WorkspaceEditor)
    looking = tools_for(fs, read_only=True)
    assert [tool.name for tool in offered[1:]] == [tool.name for tool in looking]
    for given, tool in zip(offered[1:], looking, strict=True):
        assert isinstance(given, FunctionTool) and given.strict_json_schema
        assert (given.description, given.params_json_schema) == (tool.description, openai_strict_schema(tool.params))
    assert not any(isinstance(tool, ShellTool) for tool in offered)  # memory runs no commands
    assert [tool.name for tool in function_tools(fs)] == [tool.name for tool in tools_for(fs)]
    read_only = InMemoryFilesystem(read_only=True)
    assert [tool.name for tool in workspace_tools(read_only)] == [tool.name for tool in tools_for(read_only)]


def test_an_update_of_a_file_never_read_applies_its_context_is_the_proof(workspace: Workspace) -> None:  # noqa: F811
    workspace.fs.write("setup.cfg", "[tool]\nline = 100\n")  # there before the run, never read by the model
    model = ScriptedModel(
        [
            [patch("c1", "update_file", "setup.cfg", "@@ [tool]\n-line = 100\n+line = 120\n")],
            [patch("c2", "update_file", "setup.cfg", "@@ [tool]\n-line = 999\n+line = 1\n")],
            [assistant_message("done")],
        ]
    )
    applied, refused = run(model, workspace_tools(workspace.fs))
    assert applied.output == "Updated setup.cfg"
    assert refused.output == "Failed to find expected lines in setup.cfg (section 1):\nline = 999"
    assert workspace.reopen().read("setup.cfg").content == "[tool]\nline = 120\n"


def test_an_update_after_someone_else_changed_the_file_is_refused() -> None:
    fs = InMemoryFilesystem()
    fs.write("a.py", "x = 1\n")
    model = ScriptedModel(
        [
            [function_call("read_file", {"path": "a.py", "offset": None, "limit": None}, call_id="r1")],
            [patch("c1", "update_file", "a.py", "@@\n-x = 1\n+x = 2\n")],
            [assistant_message("done")],
        ]
    )
    tools = workspace_tools(fs)
    original = model.get_response

    async def change_between_turns(*args: Any, **kwargs: Any) -> Any:
        if len(model.calls) == 1:  # after the model read the file, before its patch
            fs.write("a.py", "x = 1\ny = 0\n")
        return await original(*args, **kwargs)

    model.get_response = change_between_turns  # type: ignore[method-assign]
    outputs = run(model, tools)
    assert "changed since" in outputs[1].output and "a.py" in outputs[1].output
    assert fs.read("a.py").content == "x = 1\ny = 0\n"


def test_an_update_can_move_the_file() -> None:
    fs = InMemoryFilesystem()
    fs.write("old.py", "x = 1\n")
    editor = WorkspaceEditor(fs)
    moved = ApplyPatchOperation(type="update_file", path="old.py", diff="@@\n-x = 1\n+x = 2\n", move_to="new.py")
    result = anyio.run(editor.update_file, moved)
    assert (result.status, result.output) == ("completed", "Updated old.py (moved to new.py)")
    assert fs.read("new.py").content == "x = 2\n" and not fs.exists("old.py")
    broken = ApplyPatchOperation(type="update_file", path="new.py", diff="@@\n-nothing\n+y\n", move_to="other.py")
    failed = anyio.run(editor.update_file, broken)
    assert failed.status == "failed" and failed.output and "new.py" in failed.output
    assert not fs.exists("other.py")


def test_a_shell_needs_a_workspace_that_runs_commands() -> None:
    with pytest.raises(ValueError, match="ContainerSandbox"):
        WorkspaceShell(InMemoryFilesystem())


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[ContainerSandbox]:
    if not podman_available():
        missing("Podman is not installed or does not answer (apt-get install podman runc)")
    with ContainerSandbox(busybox_image(), snapshot_strategy="copy", snapshot_dir=tmp_path / "snapshots") as opened:
        yield opened


def test_an_agent_patches_and_runs_commands_in_the_container(sandbox: ContainerSandbox) -> None:
    model = ScriptedModel(
        [
            [patch("c1", "create_file", "hello.sh", "+echo hello from $(pwd)\n+echo made > out.txt\n")],
            [shell("s1", "sh hello.sh", "grep -c made out.txt", "exit 3", "echo not reached")],
            [function_call("grep", {"pattern": "made", "path": None, "glob": None, "max_matches": None}, call_id="g1")],
            [shell("s2", "sleep 30", "echo not reached", timeout_ms=1000)],
            [assistant_message("done")],
        ]
    )
    tools = workspace_tools(sandbox)
    assert isinstance(tools[-1], ShellTool) and isinstance(tools[-1].executor, WorkspaceShell)
    outputs = run(model, tools)
    assert outputs[0].output == "Created /workspace/hello.sh"
    ran = outputs[1].raw_item["output"]  # type: ignore[index]
    assert [entry["stdout"] for entry in ran] == ["hello from /workspace\n", "1\n", "", "not reached\n"]
    assert [entry["outcome"] for entry in ran] == [{"type": "exit", "exit_code": code} for code in (0, 0, 3, 0)]
    assert "exit code: 3" in outputs[1].output
    assert "out.txt" in outputs[2].output  # a file a command wrote, found by the grep tool
    timed_out = outputs[3].raw_item["output"]  # type: ignore[index]
    assert [entry["outcome"]["type"] for entry in timed_out] == ["timeout"]  # the rest was not run
    assert sandbox.filesystem.read("out.txt").content == "made\n"
    assert (Path(sandbox.host_dir) / "out.txt").read_text() == "made\n"


def test_a_command_the_policy_refuses_reads_as_its_message(sandbox: ContainerSandbox) -> None:
    from workspacefs import Policy, PolicyRule

    context = ToolContext(filesystem=sandbox.filesystem, policy=Policy([PolicyRule("deny", ["exec"], "**")]))
    model = ScriptedModel([[shell("s1", "touch made", "echo second")], [assistant_message("done")]])
    outputs = run(model, [ShellTool(executor=WorkspaceShell(context))])
    ran = outputs[0].raw_item["output"]  # type: ignore[index]
    assert len(ran) == 1 and ran[0]["stderr"] and ran[0]["outcome"] == {"type": "exit", "exit_code": None}
    assert not sandbox.filesystem.exists("made")


def test_the_readme_line_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scope = run_readme_block("OpenAI Agents SDK", tmp_path, monkeypatch)
    model = ScriptedModel([[patch("c1", "create_file", "notes.md", "+kept\n")], [assistant_message("done")]])
    agent: Agent[Any] = scope["agent"].clone(model=model)
    assert Runner.run_sync(agent, "take a note", run_config=QUIET).final_output == "done"
    scope["fs"].close()
    with open_filesystem(readme_workspace(tmp_path)) as reopened:
        assert reopened.read("notes.md").content == "kept\n"
