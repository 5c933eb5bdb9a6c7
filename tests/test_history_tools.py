"""The tool layer and history: every tool call is journaled under ``ToolContext.actor`` and the call's id
(``via="tool"``), and the opt-in ``history`` and ``undo`` tools, on memory and SQLite."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workspacefs import InMemoryFilesystem, SqlFilesystem, SqlStore, ToolContext, dispatch, tools_for
from workspacefs.history import Actor, acting_as
from workspacefs.tools import FILESYSTEM_TOOLS, HISTORY_TOOLS
from workspacefs.tools.anthropic import handle_tool_use
from workspacefs.tools.openai import handle_apply_patch_calls


@pytest.fixture(params=["memory", "sqlite"])
def fs(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryFilesystem()
        return
    store = SqlStore(f"sqlite:///{fast_tmp / f'tools-{uuid.uuid4().hex[:8]}.db'}")
    yield SqlFilesystem(store, "s")
    store.close()


def context(fs: Any, actor: str | None = "agent-7") -> ToolContext:
    return ToolContext(filesystem=fs, actor=actor, read_before_write=False)


def call(ctx: ToolContext, name: str, call_id: str | None = None, **arguments: Any) -> Any:
    tools = tools_for(ctx.filesystem, history=True)
    return dispatch(name, arguments, ctx, tools=tools, call_id=call_id)


def test_every_tool_call_is_journaled_under_the_context_actor_and_call_id(fs: Any) -> None:
    ctx = context(fs)
    assert dispatch("write_file", {"path": "a.txt", "content": "x\n"}, ctx, call_id="call-1").success
    assert fs.history()[0].actor == Actor("agent-7", None, "call-1", "tool")
    assert dispatch("rm", {"path": "a.txt"}, ctx).success
    assert fs.history()[0].actor == Actor("agent-7", None, None, "tool")
    with acting_as(Actor(session="s-9", via="mcp")):  # what the caller declared around it fills the rest
        assert dispatch("mkdir", {"path": "d"}, context(fs, actor=None), call_id="c2").success
    assert fs.history()[0].actor == Actor(None, "s-9", "c2", "mcp")
    answer = handle_tool_use(
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "str_replace_based_edit_tool",
            "input": {"command": "create", "path": "/b.txt", "file_text": "hi\n"},
        },
        ctx,
    )
    assert "is_error" not in answer, answer
    assert fs.history()[0].actor.tool_call == "toolu_1"
    call_item = {
        "type": "apply_patch_call",
        "call_id": "call_p1",
        "operation": {"type": "create_file", "path": "c.txt", "diff": "+patched\n"},
    }
    [output] = handle_apply_patch_calls([call_item], ctx)
    assert output["status"] == "completed", output
    assert fs.history()[0].actor == Actor("agent-7", None, "call_p1", "tool")


def test_history_and_undo_are_offered_only_when_asked(fs: Any) -> None:
    default = {tool.name for tool in tools_for(fs)}
    assert not default & {"history", "undo"}
    assert {tool.name for tool in tools_for(fs, history=True)} >= {"history", "undo"}
    assert "undo" not in {tool.name for tool in tools_for(fs, read_only=True, history=True)}
    assert not {t.name for t in FILESYSTEM_TOOLS} & {t.name for t in HISTORY_TOOLS}
    refused = dispatch("undo", {"entry_id": 1}, context(fs))
    assert not refused.success and "no tool named 'undo'" in refused.message


def test_history_lists_who_changed_what(fs: Any) -> None:
    ctx = context(fs)
    call(ctx, "write_file", "c1", path="src/app.py", content="print(1)\n")
    call(ctx, "write_file", "c2", path="notes.md", content="n\n")
    shown = call(ctx, "history", limit=5)
    assert shown.success, shown.message
    assert "agent-7 (call c2) via tool write: A notes.md" in shown.message
    assert shown.message.index("notes.md") < shown.message.index("src/app.py")  # newest first
    only = call(ctx, "history", path="src")
    assert "notes.md" not in only.message and "src/app.py" in only.message
    assert "No changes of 'nothing-here' are recorded." in call(ctx, "history", path="nothing-here").message


def test_undo_by_entry_then_by_last_and_a_conflict(fs: Any) -> None:
    ctx = context(fs)
    call(ctx, "write_file", path="f.txt", content="one\n")
    call(ctx, "write_file", path="f.txt", content="two\n")
    second = fs.history()[0].entry_id
    undone = call(ctx, "undo", "c9", entry_id=second)
    assert undone.success, undone.message
    assert f"Undid #{second}" in undone.message and fs.read("f.txt").content == "one\n"
    assert fs.history()[0].actor == Actor("agent-7", None, "c9", "tool")
    call(ctx, "write_file", path="g.txt", content="g\n")
    again = call(ctx, "undo", last=1)
    assert again.success and not fs.exists("g.txt")
    first = fs.history(path="f.txt")[-1].entry_id
    call(ctx, "write_file", path="f.txt", content="three\n")  # f.txt no longer holds what entry 1 left
    refused = call(ctx, "undo", entry_id=first)
    assert not refused.success and refused.error_code == "undo_conflict"
    assert "f.txt" in refused.message and "Undo the later entries first" in refused.message
    missing = call(ctx, "undo", entry_id=999_999)
    assert not missing.success and "Call history" in missing.message
    both = call(ctx, "undo", entry_id=1, last=1)
    assert not both.success and "not both" in both.message
    anonymous = call(context(fs, actor=None), "undo", last=1)
    assert not anonymous.success and "entry_id" in anonymous.message


def test_an_undone_file_must_be_read_again_before_it_is_overwritten(fs: Any) -> None:
    ctx = ToolContext(filesystem=fs, actor="agent-7")
    assert call(ctx, "write_file", path="f.txt", content="one\n").success
    assert call(ctx, "read_file", path="f.txt").success
    assert call(ctx, "write_file", path="f.txt", content="two\n").success
    assert call(ctx, "undo", last=1).success
    stale = call(ctx, "write_file", path="f.txt", content="three\n")
    assert not stale.success and fs.read("f.txt").content == "one\n"


def test_no_history_no_tools(fast_tmp: Path) -> None:
    store = SqlStore(f"sqlite:///{fast_tmp / f'nohistory-{uuid.uuid4().hex[:8]}.db'}", history=False)
    fs = SqlFilesystem(store, "s")
    assert not {tool.name for tool in tools_for(fs, history=True)} & {"history", "undo"}
    refused = dispatch("history", {}, context(fs), tools=HISTORY_TOOLS)
    assert not refused.success and "keeps no history" in refused.message
    store.close()
