"""The providers' own file tools — Anthropic's text editor and memory tool, OpenAI's apply_patch, the Codex
patch grammar — answered on every backend, with the mistakes models make; tool definitions and calls go
through the official SDKs' own types, so a schema drift in an SDK fails here."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic.types as anthropic_types
import pytest
from anthropic.types import beta as anthropic_beta
from openai.types import responses as openai_responses
from pydantic import TypeAdapter

from workspacefs import HostFilesystem, InMemoryFilesystem, Policy, Quota
from workspacefs.backends.sql import SqlFilesystem, SqlStore
from workspacefs.protocol import Filesystem
from workspacefs.tools import ToolContext, dispatch
from workspacefs.tools.anthropic import handle_tool_use, memory_tool, text_editor_tool
from workspacefs.tools.openai import apply_patch_tool, handle_apply_patch_calls

_ids = itertools.count()
EDITOR = "str_replace_based_edit_tool"


@pytest.fixture(params=["memory", "host", "sqlite", "postgresql"])
def fs(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Filesystem]:
    kind, index = request.param, next(_ids)
    if kind == "memory":
        yield InMemoryFilesystem(mount_point="/workspace")
    elif kind == "host":
        root = fast_tmp / f"native-{index}"
        root.mkdir()
        with HostFilesystem(root, mount_point="/workspace") as host:
            yield host
    else:
        url = f"sqlite:///{fast_tmp / 'native.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_url")
        store = SqlStore(url)
        with SqlFilesystem(store, f"native-{index}", mount_point="/workspace") as sql:
            yield sql
        store.close()


def editor(ctx: ToolContext, name: str = EDITOR, **arguments: Any) -> tuple[str, bool]:
    result = handle_tool_use({"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments}, ctx)
    assert result["tool_use_id"] == "toolu_1"
    return str(result["content"]), bool(result.get("is_error"))


def memory(ctx: ToolContext, **arguments: Any) -> tuple[str, bool]:
    return editor(ctx, "memory", **arguments)


# --- Anthropic text editor -------------------------------------------------------------------------


def test_view_create_and_edit_in_the_reference_formats(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    text, error = editor(ctx, command="create", path="/workspace/src/app.py", file_text="def f():\n\treturn 1\n")
    assert (text, error) == ("File created successfully at: /workspace/src/app.py", False)
    fs.write("src/.hidden", "x")
    text, _ = editor(ctx, command="view", path="/workspace/src/app.py")
    assert (
        text
        == "Here's the result of running `cat -n` on /workspace/src/app.py:\n     1\tdef f():\n     2\t\treturn 1\n     3\t\n"
    )
    listing, _ = editor(ctx, command="view", path="/workspace")
    assert listing.splitlines() == [
        "Here's the files and directories up to 2 levels deep in /workspace, excluding hidden items:",
        "/workspace",
        "/workspace/src",
        "/workspace/src/app.py",
    ]
    text, error = editor(
        ctx, command="str_replace", path="/workspace/src/app.py", old_str="return 1", new_str="return 2"
    )
    assert not error and text.startswith("The file /workspace/src/app.py has been edited. Here's the result")
    assert "     2\t\treturn 2" in text and text.endswith("Edit the file again if necessary.")
    assert fs.read("src/app.py").content == "def f():\n\treturn 2\n"  # tabs stay tabs
    text, error = editor(ctx, command="insert", path="/workspace/src/app.py", insert_line=1, insert_text="\t# doc\n")
    assert not error and "     2\t\t# doc" in text
    assert fs.read("src/app.py").content == "def f():\n\t# doc\n\treturn 2\n"


def test_the_mistakes_models_make_change_nothing(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("a.py", "x = 1\ny = 2\nx = 1\n")
    editor(ctx, command="view", path="/workspace/a.py")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"command": "str_replace", "old_str": "y  =  2", "new_str": "y = 3"}, "did not appear verbatim in"),
        ({"command": "str_replace", "old_str": "zzz", "new_str": "q"}, "did not appear verbatim in /workspace/a.py."),
        (
            {"command": "str_replace", "old_str": "x = 1", "new_str": "x = 5"},
            "Multiple occurrences of old_str `x = 1` in lines [1, 3]",
        ),
        ({"command": "insert", "insert_line": 9, "insert_text": "z"}, "within the range of lines of the file: [0, 4]"),
        ({"command": "insert", "insert_line": -1, "insert_text": "z"}, "Invalid `insert_line` parameter: -1"),
        ({"command": "view", "view_range": [-1]}, "Invalid `view_range`. It should be a list of two integers."),
        ({"command": "view", "view_range": [3, 1]}, "should be larger or equal than its first `3`"),
        ({"command": "view", "view_range": [1, 99]}, "should be smaller than the number of lines in the file: `4`"),
        ({"command": "view", "view_range": [0, 2]}, "Its first element `0` should be within the range"),
        ({"command": "create", "file_text": "clobber"}, "File already exists at: /workspace/a.py. Cannot overwrite"),
        (
            {"command": "undo_edit"},
            "Unrecognized command undo_edit. The allowed commands for the str_replace_based_edit_tool tool are: view, create, str_replace, insert",
        ),
    ]
    for arguments, expected in cases:
        text, error = editor(ctx, path="/workspace/a.py", **arguments)
        assert error and expected in text, (arguments, text)
    assert (
        "matches near line 2 if whitespace is ignored"
        in editor(ctx, path="/workspace/a.py", command="str_replace", old_str="y  =  2", new_str="q")[0]
    )
    assert fs.read("a.py").content == "x = 1\ny = 2\nx = 1\n"
    text, error = editor(ctx, command="view", path="workspace/a.py")
    assert (
        error
        and "is not an absolute path, it should start with `/`. Maybe you meant /workspace/workspace/a.py?" in text
    )
    text, error = editor(ctx, command="view", path="/workspace/../../etc/passwd")
    assert error and "outside the workspace" in text
    text, error = editor(ctx, command="view", path="/workspace/missing.py")
    assert error and text == "The path /workspace/missing.py does not exist. Please provide a valid path."
    text, _ = editor(ctx, command="view", path="/workspace/a.py", view_range=[2, -1])
    assert text.endswith("     2\ty = 2\n     3\tx = 1\n     4\t\n")


def test_read_before_write_stale_writes_and_who_changed_them(fs: Filesystem) -> None:
    fs.write("notes.txt", "alpha\nbeta\n")
    mine = ToolContext(filesystem=fs, actor="agent-a")
    theirs = ToolContext(filesystem=fs, actor="agent-b")
    text, error = editor(mine, command="str_replace", path="/workspace/notes.txt", old_str="beta", new_str="gamma")
    assert error and "You have not read '/workspace/notes.txt' yet" in text and 'command="view"' in text
    editor(mine, command="view", path="/workspace/notes.txt")
    editor(theirs, command="view", path="/workspace/notes.txt")
    assert not editor(theirs, command="str_replace", path="/workspace/notes.txt", old_str="alpha", new_str="ALPHA")[1]
    text, error = editor(mine, command="str_replace", path="/workspace/notes.txt", old_str="beta", new_str="gamma")
    assert error and "has changed since you last read it (agent-b changed it)" in text
    assert "-alpha\n+ALPHA" in text  # the diff of what changed since the read
    fs.write("notes.txt", "outside\n")  # a change that did not come through the tools
    text, error = editor(theirs, command="insert", path="/workspace/notes.txt", insert_line=0, insert_text="x")
    assert error and "changed outside these tools" in text
    assert fs.read("notes.txt").content == "outside\n"


def test_crlf_and_binary_files(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write_bytes("win.txt", b"one\r\ntwo\r\nthree\r\n")
    editor(ctx, command="view", path="/workspace/win.txt")
    assert not editor(ctx, command="str_replace", path="/workspace/win.txt", old_str="one\ntwo", new_str="1\n2")[1]
    assert not editor(ctx, command="insert", path="/workspace/win.txt", insert_line=3, insert_text="four")[1]
    assert fs.read_bytes("win.txt").content == b"1\r\n2\r\nthree\r\nfour\r\n"
    blob = bytes(range(256)) * 4
    fs.write_bytes("logo.png", blob)
    for arguments in ({"command": "view"}, {"command": "str_replace", "old_str": "a", "new_str": "b"}):
        text, error = editor(ctx, path="/workspace/logo.png", **arguments)
        assert error and "is a binary file" in text and "read_file" not in text
    assert fs.read_bytes("logo.png").content == blob


def test_undo_edit_in_the_20250124_version(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    name = "str_replace_editor"
    editor(ctx, name, command="create", path="/workspace/u.txt", file_text="v1\n")
    editor(ctx, name, command="str_replace", path="/workspace/u.txt", old_str="v1", new_str="v2")
    editor(ctx, name, command="insert", path="/workspace/u.txt", insert_line=1, new_str="v3")
    assert fs.read("u.txt").content == "v2\nv3\n"
    text, error = editor(ctx, name, command="undo_edit", path="/workspace/u.txt")
    assert not error and text.startswith("Last edit to /workspace/u.txt undone successfully.")
    assert fs.read("u.txt").content == "v2\n"
    editor(ctx, name, command="undo_edit", path="/workspace/u.txt")
    assert fs.read("u.txt").content == "v1\n"
    editor(ctx, name, command="undo_edit", path="/workspace/u.txt")  # undoing the create removes the file
    assert not fs.exists("u.txt")
    fs.write("u.txt", "again")
    text, error = editor(ctx, name, command="undo_edit", path="/workspace/u.txt")
    assert error and text == "No edit history found for /workspace/u.txt."


def test_max_characters_clips_a_view() -> None:
    fs = InMemoryFilesystem()
    fs.write("big.txt", "".join(f"line {n}\n" for n in range(5000)))
    ctx = ToolContext(filesystem=fs)
    clipped = handle_tool_use({"command": "view", "path": "/big.txt"}, ctx, max_characters=100)
    assert "<response clipped>" in clipped["content"] and len(clipped["content"]) < 1000
    default = handle_tool_use({"command": "view", "path": "/big.txt"}, ctx)
    assert "<response clipped>" in default["content"]  # the reference's 16,000-character cut
    assert handle_tool_use({"command": "view", "path": "/big.txt", "view_range": [4999, 5000]}, ctx)[
        "content"
    ].endswith("  4999\tline 4998\n  5000\tline 4999\n")


# --- Anthropic memory tool -------------------------------------------------------------------------


def test_memory_commands_in_the_reference_formats(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    text, error = memory(ctx, command="view", path="/memories")
    assert not error and text.startswith("Here're the files and directories up to 2 levels deep in /memories")
    assert memory(ctx, command="create", path="/memories/prefs.md", file_text="likes coffee\nlives in Oslo\n") == (
        "File created successfully at: /memories/prefs.md",
        False,
    )
    assert memory(ctx, command="create", path="/memories/prefs.md", file_text="x") == (
        "File /memories/prefs.md already exists",
        True,
    )
    text, _ = memory(ctx, command="view", path="/memories/prefs.md")
    assert (
        text
        == "Here's the content of /memories/prefs.md with line numbers:\n     1\tlikes coffee\n     2\tlives in Oslo\n     3\t"
    )
    text, _ = memory(ctx, command="str_replace", path="/memories/prefs.md", old_str="coffee", new_str="tea")
    assert text.startswith("The memory file has been edited. Here is the snippet showing the change")
    assert memory(ctx, command="insert", path="/memories/prefs.md", insert_line=2, insert_text="vegan\n") == (
        "The file /memories/prefs.md has been edited.",
        False,
    )
    assert fs.read("memories/prefs.md").content == "likes tea\nlives in Oslo\nvegan\n"
    assert memory(ctx, command="rename", old_path="/memories/prefs.md", new_path="/memories/user/prefs.md")[1] is False
    listing, _ = memory(ctx, command="view", path="/memories")
    assert listing.splitlines()[1:] == ["0B\t/memories", "0B\t/memories/user/", "30B\t/memories/user/prefs.md"]
    assert memory(ctx, command="delete", path="/memories/user") == ("Successfully deleted /memories/user", False)
    assert fs.list("memories") == ()


def test_memory_stays_in_memories(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("secret.txt", "top secret")
    attempts = [
        ({"command": "view", "path": "/etc/passwd"}, "Path must start with /memories, got: /etc/passwd"),
        ({"command": "view", "path": "/memories/../secret.txt"}, "would escape /memories directory"),
        ({"command": "view", "path": "/memoriesX/a"}, "Path must start with /memories"),
        ({"command": "create", "path": "/memories/../../x", "file_text": "x"}, "outside the workspace"),
        ({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/../secret.txt"}, "would escape"),
        ({"command": "delete", "path": "/memories"}, "Cannot delete the /memories directory itself"),
        ({"command": "delete", "path": "/memories/.."}, "would escape /memories directory"),
    ]
    for arguments, expected in attempts:
        text, error = memory(ctx, **arguments)
        assert error and expected in text, (arguments, text)
    assert fs.read("secret.txt").content == "top secret"


def test_memories_in_sql_are_shared_by_the_sessions_of_one_agent(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / f'memories-{next(_ids)}.db'}"
    store = SqlStore(url)
    with SqlFilesystem(store, "agent-7-memory") as first:
        memory(ToolContext(filesystem=first), command="create", path="/memories/user.md", file_text="prefers tabs\n")
    store.close()
    store = SqlStore(url)  # a later conversation, in another process as far as the database can tell
    with SqlFilesystem(store, "agent-7-memory") as later:
        text, error = memory(ToolContext(filesystem=later), command="view", path="/memories/user.md")
        assert not error and "prefers tabs" in text
    store.close()


# --- OpenAI apply_patch ----------------------------------------------------------------------------


def call(call_id: str, kind: str, path: str, diff: str | None = None) -> Any:
    operation: dict[str, Any] = {"type": kind, "path": path}
    if diff is not None:
        operation["diff"] = diff
    item = {
        "type": "apply_patch_call",
        "id": f"apc_{call_id}",
        "call_id": call_id,
        "status": "completed",
        "operation": operation,
    }
    return openai_responses.ResponseApplyPatchToolCall.model_validate(item)  # the SDK's own response model


def test_apply_patch_calls_all_or_nothing(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("app.py", "import os\n\n\ndef main():\n    print('hi')\n    return 0\n")
    fs.write("old.txt", "bye\n")
    moved_context = "@@ def main():\n-    print('hi')\n+    print('hello')\n"
    fs.write("app.py", "# a header added since the model last looked\n" + fs.read("app.py").content)
    outputs = handle_apply_patch_calls(
        [
            call("c1", "update_file", "app.py", moved_context),
            call("c2", "create_file", "/workspace/pkg/new.py", "+x = 1\n+y = 2\n"),
            call("c3", "delete_file", "old.txt"),
        ],
        ctx,
    )
    adapter = TypeAdapter(openai_responses.ResponseInputItemParam)
    for output in outputs:
        adapter.validate_python(output)  # what goes back in `input=` is what the SDK accepts
    assert [(o["call_id"], o["status"], o["output"]) for o in outputs] == [
        ("c1", "completed", "Updated /workspace/app.py"),
        ("c2", "completed", "Created /workspace/pkg/new.py"),
        ("c3", "completed", "Deleted /workspace/old.txt"),
    ]
    assert "print('hello')" in fs.read("app.py").content and fs.read("pkg/new.py").content == "x = 1\ny = 2\n"
    assert not fs.exists("old.txt")


def test_a_half_valid_turn_applies_nothing(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("a.txt", "one\ntwo\n")
    fs.write_bytes("b.bin", b"\x00\x01binary")
    turns = [
        [
            call("ok", "update_file", "a.txt", "@@\n-one\n+ONE\n"),
            call("bad", "update_file", "a.txt", "@@\n-nothere\n+x\n"),
        ],
        [call("ok", "create_file", "c.txt", "+c\n"), call("bad", "update_file", "a.txt", "@@\n-not there\n+x\n")],
        [call("ok", "create_file", "d.txt", "+d\n"), call("bad", "create_file", "../../etc/evil", "+x\n")],
        [call("ok", "create_file", "e.txt", "+e\n"), call("bad", "update_file", "b.bin", "@@\n-x\n+y\n")],
        [call("ok", "delete_file", "a.txt"), call("bad", "update_file", "missing.txt", "@@\n-x\n+y\n")],
        [call("ok", "create_file", "f.txt", "+f\n"), call("bad", "update_file", "a.txt", "not a diff line\n")],
    ]
    for calls in turns:
        outputs = handle_apply_patch_calls(calls, ctx)
        assert [o["status"] for o in outputs] == ["failed", "failed"], outputs
        assert "No operation of this turn was applied" in outputs[1]["output"]
        assert "Not applied" in outputs[0]["output"]
    assert fs.read("a.txt").content == "one\ntwo\n"
    assert fs.read_bytes("b.bin").content == b"\x00\x01binary"
    assert sorted(e.name for e in fs.list(".")) == ["a.txt", "b.bin"]
    failed = handle_apply_patch_calls([call("x", "update_file", "a.txt", "@@\n-nothere\n+x\n")], ctx)[0]["output"]
    assert "Failed to find expected lines in /workspace/a.txt (section 1):\nnothere" in failed


def test_a_new_file_over_an_unread_one_and_crlf(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("keep.txt", "precious\n")
    refused = handle_apply_patch_calls([call("c", "create_file", "keep.txt", "+new\n")], ctx)[0]
    assert refused["status"] == "failed" and "You have not read '/workspace/keep.txt' yet" in refused["output"]
    fs.write_bytes("w.txt", b"a\r\nb\r\nc\r\n")
    done = handle_apply_patch_calls([call("c", "update_file", "w.txt", "@@\n a\n-b\n+B\n c\n")], ctx)[0]
    assert done["status"] == "completed"
    assert fs.read_bytes("w.txt").content == b"a\r\nB\r\nc\r\n"


def test_tool_definitions_are_what_the_sdks_accept() -> None:
    TypeAdapter(openai_responses.ApplyPatchToolParam).validate_python(apply_patch_tool())
    TypeAdapter(anthropic_types.ToolTextEditor20250728Param).validate_python(text_editor_tool(max_characters=5000))
    TypeAdapter(anthropic_types.ToolTextEditor20250124Param).validate_python(text_editor_tool("20250124"))
    TypeAdapter(anthropic_types.MemoryTool20250818Param).validate_python(memory_tool())
    TypeAdapter(anthropic_beta.BetaMemoryTool20250818Param).validate_python(memory_tool())
    with pytest.raises(ValueError, match="Unknown text editor version"):
        text_editor_tool("20990101")


def test_anthropic_tool_use_blocks_from_the_sdk() -> None:
    fs = InMemoryFilesystem(mount_point="/repo")
    ctx = ToolContext(filesystem=fs)
    message = anthropic_types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [
                {"type": "text", "text": "I'll create it."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": EDITOR,
                    "input": {"command": "create", "path": "/repo/x.md", "file_text": "# X\n"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "memory",
                    "input": {"command": "view", "path": "/memories"},
                },
            ],
        }
    )
    results = [handle_tool_use(block, ctx) for block in message.content if block.type == "tool_use"]
    adapter = TypeAdapter(anthropic_types.ToolResultBlockParam)
    for result in results:
        adapter.validate_python(result)
    assert [r["tool_use_id"] for r in results] == ["toolu_a", "toolu_b"]
    assert fs.read("x.md").content == "# X\n" and fs.stat("memories").is_directory
    unknown = handle_tool_use({"type": "tool_use", "id": "t", "name": "bash", "input": {"command": "ls"}}, ctx)
    assert unknown["is_error"] and "There is no tool named 'bash'" in unknown["content"]


# --- Codex patch grammar ---------------------------------------------------------------------------

PATCH = """*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Update File: src/app.py
*** Move to: src/main.py
@@ def main():
-    return 1
+    return 2
*** Delete File: junk.txt
*** End Patch
"""


def test_codex_patches_apply_whole_with_the_reference_tolerance(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("src/app.py", "import sys\n\n\ndef main():   \n    return 1\n")
    fs.write("junk.txt", "junk\n")
    result = dispatch("apply_patch", {"input": PATCH}, ctx)
    assert result.success, result.message
    assert (
        result.message
        == "Success. Updated the following files:\nA /workspace/docs/new.md\nM /workspace/src/main.py\nD /workspace/junk.txt"
    )
    assert fs.read("src/main.py").content == "import sys\n\n\ndef main():   \n    return 2\n"
    assert not fs.exists("src/app.py") and not fs.exists("junk.txt")
    fs.write("quotes.py", "msg = \u201chello\u201d  # \u2013 note\n")
    wrapped = "<<'EOF'\n*** Begin Patch\n*** Update File: quotes.py\n-msg = \"hello\"  # - note\n+msg = 'hi'\n*** End Patch\nEOF"
    assert dispatch("apply_patch", {"input": wrapped}, ctx).success
    assert fs.read("quotes.py").content == "msg = 'hi'\n"


def test_codex_patch_errors_quote_what_did_not_match(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("a.py", "x = 1\n")
    cases = [
        ("*** Update File: a.py\n@@\n-x = 1\n+x = 2\n", "The first line of the patch must be '*** Begin Patch'"),
        (
            "*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 2\n",
            "The last line of the patch must be '*** End Patch'",
        ),
        ("*** Begin Patch\n*** Frobnicate: a.py\n*** End Patch", "is not a valid file header"),
        (
            "*** Begin Patch\n*** Update File: a.py\n@@ class Missing:\n-x = 1\n+x = 2\n*** End Patch",
            "Failed to find context 'class Missing:' in /workspace/a.py",
        ),
        (
            "*** Begin Patch\n*** Update File: a.py\n-y = 1\n+x = 2\n*** End Patch",
            "Failed to find expected lines in /workspace/a.py (section 1):\ny = 1",
        ),
        (
            "*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 2\n*** Add File: ../../../etc/x\n+x\n*** End Patch",
            "outside the workspace",
        ),
        (
            "*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 2\n*** Delete File: a.py\n*** End Patch",
            "named by two operations",
        ),
    ]
    for patch, expected in cases:
        result = dispatch("apply_patch", {"input": patch}, ctx)
        assert not result.success and expected in result.message, (patch, result.message)
    assert fs.read("a.py").content == "x = 1\n"


def test_a_failed_write_rolls_back_the_files_written_before_it() -> None:
    fs = InMemoryFilesystem(quota=Quota(max_file_bytes=8))
    fs.write("a.txt", "a\n")
    fs.write("b.txt", "b\n")
    ctx = ToolContext(filesystem=fs)
    too_big = "+" + "B" * 20  # the second write fails only when it is made: past the quota
    patch = f"*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Update File: b.txt\n-b\n{too_big}\n*** End Patch"
    result = dispatch("apply_patch", {"input": patch}, ctx)
    assert not result.success and "b.txt" in result.message and "no file was changed" in result.message
    assert fs.read("a.txt").content == "a\n" and fs.read("b.txt").content == "b\n"


# --- every tool: stale writes, explicit preconditions, and the defects a model ran into ----------------


def test_expected_hash_replaces_the_read_and_refuses_a_stale_version(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("cfg.toml", "a = 1\n")
    stat = dispatch("stat", {"path": "cfg.toml"}, ctx)
    content_id = stat.value["content_id"]
    assert f"content id {content_id}" in stat.message and content_id == fs.content_id("cfg.toml")  # type: ignore[attr-defined]
    fs.write("cfg.toml", "a = 2\n")  # someone else, after the model looked
    stale = dispatch("write_file", {"path": "cfg.toml", "content": "a = 3\n", "expected_hash": content_id}, ctx)
    assert not stale.success and "no longer has content id" in stale.message
    fresh = fs.content_id("cfg.toml")  # type: ignore[attr-defined]
    edited = dispatch(
        "edit_file", {"path": "cfg.toml", "old_string": "2", "new_string": "3", "expected_hash": fresh}, ctx
    )
    assert edited.success, edited.message
    assert fs.read("cfg.toml").content == "a = 3\n"


def test_stale_write_file_names_who_changed_it_and_shows_the_diff(fs: Filesystem) -> None:
    first, second = ToolContext(filesystem=fs, actor="planner"), ToolContext(filesystem=fs, actor="coder")
    fs.write("plan.md", "step 1\nstep 2\n")
    dispatch("read_file", {"path": "plan.md"}, first)
    dispatch("read_file", {"path": "plan.md"}, second)
    assert dispatch("edit_file", {"path": "plan.md", "old_string": "step 2", "new_string": "step 2b"}, second).success
    refused = dispatch("write_file", {"path": "plan.md", "content": "mine\n"}, first)
    assert not refused.success and refused.error_code == "changed_since_read"
    assert "(coder changed it)" in refused.message and "-step 2\n+step 2b" in refused.message
    assert 'read_file(path="/workspace/plan.md")' in refused.message
    assert fs.read("plan.md").content == "step 1\nstep 2b\n"


def test_binary_files_get_advice_that_can_work(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write_bytes("img.png", b"\x89PNG\x00\x00binary")
    for name, arguments in (
        ("edit_file", {"path": "img.png", "old_string": "PNG", "new_string": "JPG"}),
        ("write_file", {"path": "img.png", "content": "text now"}),
    ):
        result = dispatch(name, arguments, ctx)
        assert not result.success and "is a binary file" in result.message, result.message
        assert "read_file(" not in result.message and "delete it with rm" in result.message
    assert fs.read_bytes("img.png").content == b"\x89PNG\x00\x00binary"


def test_searching_a_folder_that_does_not_exist_says_so(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("src/app.py", "print('hi')\n")
    for name, arguments in (
        ("grep", {"pattern": "hi", "path": "/workspace/lib"}),
        ("glob", {"pattern": "*.py", "path": "lib"}),
    ):
        result = dispatch(name, arguments, ctx)
        assert not result.success and "'/workspace/lib' does not exist, so nothing was searched" in result.message
    assert dispatch("grep", {"pattern": "absent", "path": "src"}, ctx).message.startswith("No lines match")


def test_glob_patterns_take_workspace_paths(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("src/app.py", "x\n")
    fs.write("src/deep/mod.py", "x\n")
    found = dispatch("glob", {"pattern": "/workspace/src/*.py"}, ctx)
    assert found.value == ["/workspace/src/app.py"]
    assert [m.path for m in fs.glob("/workspace/src/**/*.py")] == ["src/app.py", "src/deep/mod.py"]
    assert [m.path for m in fs.grep("x", glob="/workspace/src/deep/*.py")] == ["src/deep/mod.py"]


def test_moving_onto_a_directory_name_explains_dst(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("notes.txt", "n\n")
    fs.mkdir("docs")
    for overwrite in (False, True):
        result = dispatch("mv", {"src": "notes.txt", "dst": "docs", "overwrite": overwrite}, ctx)
        assert not result.success and "dst is the full new path" in result.message
        assert 'dst="/workspace/docs/notes.txt"' in result.message
    copied = dispatch("cp", {"src": "docs", "dst": "docs/inner"}, ctx)
    assert not copied.success and "Cannot copy" in copied.message and "copie " not in copied.message


def test_copy_and_move_never_make_paths_deeper_than_the_limit(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    deep = "a/" + "/".join(["d"] * 12) + "/f.txt"  # 14 segments: allowed
    fs.write(deep, "x")
    target = "/".join(["z"] * 5)
    for name in ("cp", "mv"):
        result = dispatch(name, {"src": "a", "dst": target}, ctx)
        assert not result.success and "too deep" in result.message, result.message
    for method in (fs.copy, fs.move):
        with pytest.raises(ValueError, match="more than 16 segments"):
            method("a", target)
    assert fs.read(deep).content == "x" and not fs.exists("z")
    fs.copy("a/d", "b")  # shallower: fine
    assert fs.exists("b/" + "/".join(["d"] * 11) + "/f.txt")


def test_a_patch_over_a_file_changed_since_the_callers_read_is_stale(fs: Filesystem) -> None:
    mine, theirs = ToolContext(filesystem=fs, actor="agent-a"), ToolContext(filesystem=fs, actor="agent-b")
    fs.write("a.py", "x = 1\ny = 2\n")
    dispatch("read_file", {"path": "a.py"}, mine)
    dispatch("read_file", {"path": "a.py"}, theirs)
    assert dispatch("edit_file", {"path": "a.py", "old_string": "y = 2", "new_string": "y = 3"}, theirs).success
    patch = "*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 9\n*** End Patch"
    stale = dispatch("apply_patch", {"input": patch}, mine)
    assert not stale.success and "(agent-b changed it)" in stale.message and "+y = 3" in stale.message
    outputs = handle_apply_patch_calls([call("c", "delete_file", "a.py")], mine)
    assert outputs[0]["status"] == "failed" and "changed since you last read it" in outputs[0]["output"]
    assert fs.read("a.py").content == "x = 1\ny = 3\n"
    fresh = ToolContext(filesystem=fs)  # never read it: matching context is enough
    assert dispatch("apply_patch", {"input": patch}, fresh).success


def test_insert_after_the_last_line_keeps_one_final_newline(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs, read_before_write=False)
    fs.write("list.txt", "a\nb\n")
    for line, expected in ((3, "a\nb\nc\n"), (0, "top\na\nb\nc\n")):
        text = "c" if line else "top"
        assert not editor(ctx, command="insert", path="/workspace/list.txt", insert_line=line, insert_text=text)[1]
        assert fs.read("list.txt").content == expected


# --- found by driving the native tools as a hostile model would ------------------------------------


def test_undo_and_delete_never_destroy_a_change_made_since(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    name = "str_replace_editor"
    fs.write("a.txt", "v0\n")
    editor(ctx, name, command="view", path="/workspace/a.txt")
    editor(ctx, name, command="str_replace", path="/workspace/a.txt", old_str="v0", new_str="v1")
    fs.write("a.txt", "OTHER WORK\n")
    text, error = editor(ctx, name, command="undo_edit", path="/workspace/a.txt")
    assert error and "has changed since you last read it" in text
    assert fs.read("a.txt").content == "OTHER WORK\n"
    fs.write("a.txt", "v1\n")  # back to what the edit left: the undo is still there to take
    assert not editor(ctx, name, command="undo_edit", path="/workspace/a.txt")[1]
    assert fs.read("a.txt").content == "v0\n"
    fs.write("memories/x.md", "v1\n")
    memory(ctx, command="view", path="/memories/x.md")
    fs.write("memories/x.md", "v2 by someone else\n")
    text, error = memory(ctx, command="delete", path="/memories/x.md")
    assert error and "has changed since you last read it" in text and fs.exists("memories/x.md")


def test_a_section_that_matches_no_line_proves_nothing(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("notes.txt", "private\n")
    blind = dispatch(
        "apply_patch", {"input": "*** Begin Patch\n*** Update File: notes.txt\n@@\n+blind\n*** End Patch"}, ctx
    )
    assert not blind.success and "You have not read" in blind.message
    outputs = handle_apply_patch_calls([call("c", "update_file", "notes.txt", "@@\n+x\n")], ctx)
    assert outputs[0]["status"] == "failed"
    assert fs.read("notes.txt").content == "private\n"
    anchored = "*** Begin Patch\n*** Update File: notes.txt\n@@ private\n+after it\n*** End Patch"
    assert dispatch("apply_patch", {"input": anchored}, ctx).success  # an anchor that matched is knowledge
    assert fs.read("notes.txt").content == "private\nafter it\n"


def test_anything_that_stops_a_patch_part_way_rolls_it_back() -> None:
    def approve(_request: object) -> bool:
        raise RuntimeError("the approval window went away")

    fs = InMemoryFilesystem()
    fs.write("a.txt", "a\n")
    ctx = ToolContext(filesystem=fs, policy=Policy.default(approve=approve))
    patch = "*** Begin Patch\n*** Update File: a.txt\n-a\n+CHANGED\n*** Add File: AGENTS.md\n+x\n*** End Patch"
    result = dispatch("apply_patch", {"input": patch}, ctx)
    assert not result.success
    assert fs.read("a.txt").content == "a\n" and not fs.exists("AGENTS.md")


def test_mixed_line_endings_are_left_as_they_are(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write_bytes("m.txt", b"a\r\nb\nc\n")
    editor(ctx, command="view", path="/workspace/m.txt")
    assert not editor(ctx, command="str_replace", path="/workspace/m.txt", old_str="b\nc", new_str="B\nC")[1]
    assert not editor(ctx, command="insert", path="/workspace/m.txt", insert_line=0, insert_text="top")[1]
    assert fs.read_bytes("m.txt").content == b"top\na\r\nB\nC\n"


def test_malformed_calls_are_answered_not_raised(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    for bad_input in ('{"command": "view"}', ["ab"], None, 7):
        answer = handle_tool_use({"type": "tool_use", "id": "t", "name": "memory", "input": bad_input}, ctx)
        assert answer["is_error"] and answer["tool_use_id"] == "t"
    for operation in (None, "x", [], {"type": "create_file", "path": "a", "diff": 3}, {"type": "rm", "path": "a"}):
        outputs = handle_apply_patch_calls({"type": "apply_patch_call", "call_id": "c", "operation": operation}, ctx)
        assert [o["status"] for o in outputs] == ["failed"]
    assert not fs.exists("a")


def test_refusals_stay_small_and_name_the_right_path(fs: Filesystem) -> None:
    ctx = ToolContext(filesystem=fs)
    fs.write("many.txt", "a\n" * 5000)
    editor(ctx, command="view", path="/workspace/many.txt")
    text, error = editor(ctx, command="str_replace", path="/workspace/many.txt", old_str="a", new_str="b")
    assert error and "in lines [1, 2, 3," in text and "(and 4980 more)" in text and len(text) < 500
    text, error = editor(ctx, command="str_replace", path="/workspace/many.txt", old_str="z" * 100_000, new_str="")
    assert error and len(text) < 1000
    fs.write("a.txt", "x\n")
    fs.mkdir("dir")
    moved = dispatch(
        "apply_patch",
        {"input": "*** Begin Patch\n*** Update File: a.txt\n*** Move to: dir\n-x\n+y\n*** End Patch"},
        ctx,
    )
    assert not moved.success and "'/workspace/dir'" in moved.message and "'/workspace/a.txt' is a" not in moved.message
