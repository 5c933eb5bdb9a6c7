"""Calls a hostile or confused model can make that once got past a rule of the tool layer: a file never read
replaced by ``mv``/``cp`` with ``overwrite`` or by a patch whose only context is blank, a new file written over one
another caller created meanwhile, an edit grown past 32 MiB in memory before the backend refused it, ``true`` read
as 1, arguments nested too deep to parse, a view or listing past its cut, a refused call that first copied a whole
tree to roll back. Each must be refused (or bounded), changing nothing, on every backend it names.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from workspacefs import InMemoryFilesystem
from workspacefs.policy import ApprovalRequest, Policy, PolicyRule
from workspacefs.protocol import Filesystem
from workspacefs.tools import NATIVE_TOOLS, ToolContext, dispatch, tools_for
from workspacefs.tools.anthropic import handle_tool_use
from workspacefs.tools.openai import handle_apply_patch_calls
from workspacefs.undo import UndoLog


@pytest.fixture
def fs(three_backends: Filesystem) -> Filesystem:
    """Memory, host and SQLite (``conftest.three_backends``)."""
    return three_backends


def _context(fs: Filesystem) -> ToolContext:
    return ToolContext(filesystem=fs, policy=Policy.default())


@pytest.mark.parametrize("tool", ["mv", "cp"])
def test_a_file_never_read_is_not_replaced_by_moving_or_copying_onto_it(fs: Filesystem, tool: str) -> None:
    fs.write("precious.txt", "the user's work\n")
    ctx = _context(fs)
    assert dispatch("write_file", {"path": "draft.txt", "content": "model's draft\n"}, ctx).success
    refused = dispatch(tool, {"src": "draft.txt", "dst": "precious.txt", "overwrite": True}, ctx)
    assert not refused.success and refused.error_code == "not_read_before_write", refused.message
    assert 'read_file(path="precious.txt")' in refused.message
    assert fs.read("precious.txt").content == "the user's work\n" and fs.exists("draft.txt")
    fs.write("precious.txt", "changed by the user\n")
    assert dispatch("read_file", {"path": "precious.txt"}, ctx).success
    fs.write("precious.txt", "changed again\n")  # read, then changed: stale, as for write_file
    stale = dispatch(tool, {"src": "draft.txt", "dst": "precious.txt", "overwrite": True}, ctx)
    assert not stale.success and stale.error_code == "changed_since_read", stale.message
    assert dispatch("read_file", {"path": "precious.txt"}, ctx).success
    assert dispatch(tool, {"src": "draft.txt", "dst": "precious.txt", "overwrite": True}, ctx).success
    assert fs.read("precious.txt").content == "model's draft\n"
    fs.write("a.txt", "a\n")
    fs.write("b.txt", "b\n")
    assert dispatch(tool, {"src": "a.txt", "dst": "new.txt", "overwrite": True}, ctx).success  # nothing replaced
    fs.write("a.txt", "a\n")
    off = ToolContext(filesystem=fs, read_before_write=False)  # switched off: as write_file, no read needed
    assert dispatch(tool, {"src": "a.txt", "dst": "b.txt", "overwrite": True}, off).success
    assert fs.read("b.txt").content == "a\n"


def _peak_allocated(run: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        return run(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_replace_all_that_would_pass_32_mib_is_refused_before_the_text_is_built(fs: Filesystem) -> None:
    fs.write("a.txt", "a" * 1100 + "\n")
    ctx = _context(fs)
    assert dispatch("read_file", {"path": "a.txt"}, ctx).success
    grow = {"path": "a.txt", "old_string": "a", "new_string": "b" * 32_000, "replace_all": True}  # 35.2 M characters
    refused, peak = _peak_allocated(lambda: dispatch("edit_file", grow, ctx))
    assert not refused.success and refused.error_code == "too_large", refused.message
    assert "at least 33.6 MB" in refused.message and "fewer" in refused.message
    assert peak < 4 * 1024 * 1024, peak  # never built: the old code held the 35 MB text, then its encoding
    doubling = [{"old_string": "a", "new_string": "aa", "replace_all": True}] * 16  # 1,100 * 2**16 = 72 M by the end
    chained, peak = _peak_allocated(lambda: dispatch("edit_file", {"path": "a.txt", "edits": doubling}, ctx))
    assert not chained.success and chained.error_code == "too_large" and "Edit 15 of 16" in chained.message
    assert peak < 64 * 1024 * 1024, peak  # stops at the edit that would pass 32 MiB (edit 14 made 18 M characters)
    assert fs.read("a.txt").content == "a" * 1100 + "\n"
    assert dispatch(
        "edit_file", {"path": "a.txt", "old_string": "a", "new_string": "bb", "replace_all": True}, ctx
    ).success


BOOLEAN_NUMBERS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "a.txt", "offset": True}),
    ("read_file", {"path": "a.txt", "limit": False}),
    ("grep", {"pattern": "l", "max_results": True}),
    ("str_replace_based_edit_tool", {"command": "insert", "path": "/a.txt", "insert_line": True, "insert_text": "X"}),
    ("str_replace_editor", {"command": "view", "path": "/a.txt", "max_characters": True}),
    ("memory", {"command": "insert", "path": "/memories/m.md", "insert_line": False, "insert_text": "X"}),
    ("memory", {"command": "view", "path": "/memories/m.md", "view_range": [True, 2]}),
]


@pytest.mark.parametrize(
    ("tool", "arguments"), BOOLEAN_NUMBERS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(BOOLEAN_NUMBERS)]
)
def test_true_or_false_where_a_number_belongs_is_refused_not_read_as_one_or_zero(
    fs: Filesystem, tool: str, arguments: dict[str, Any]
) -> None:
    fs.write("a.txt", "l1\nl2\n")
    fs.write("memories/m.md", "m1\nm2\n")
    ctx = _context(fs)
    assert dispatch("read_file", {"path": "a.txt"}, ctx).success
    assert dispatch("memory", {"command": "view", "path": "/memories/m.md"}, ctx).success
    refused = dispatch(tool, arguments, ctx)
    assert not refused.success and refused.error_code == "invalid_argument", refused.message
    assert "number" in refused.message and ("true" in refused.message or "false" in refused.message)
    assert fs.read("a.txt").content == "l1\nl2\n" and fs.read("memories/m.md").content == "m1\nm2\n"
    numbered = {**arguments, **{k: 1 if isinstance(v, bool) else v for k, v in arguments.items()}}
    if isinstance(numbered.get("view_range"), list):
        numbered["view_range"] = [1, 2]
    read = dispatch("read_file", {"path": "a.txt", "offset": "1"}, ctx)  # a number sent as a string still is one
    assert read.success and read.value.lines == ("l2",)
    assert dispatch(tool, numbered, ctx).success  # the same call with a number is answered


PATCH_REFUSALS: list[tuple[str, str]] = [
    ("*** Add File: AGENTS.md\n+x", "policy_denied"),
    ("*** Update File: a.txt\n*** Move to: .git/hooks/pre-commit\n@@\n-a\n+b", "policy_denied"),
    ("*** Add File: " + "x" * 5000 + "\n+x", "path_too_long"),
    ("*** Add File: a.txt/x\n+x", "not_a_directory"),
    ("*** Delete File: gone.txt", "not_found"),
]


@pytest.mark.parametrize(("body", "code"), PATCH_REFUSALS, ids=[code for _, code in PATCH_REFUSALS])
def test_a_patch_refused_by_a_typed_error_carries_its_code_as_the_other_tools_do(
    fs: Filesystem, body: str, code: str
) -> None:
    fs.write("a.txt", "a\n")
    ctx = _context(fs)
    assert dispatch("read_file", {"path": "a.txt"}, ctx).success
    patch = f"*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+changed\n{body}\n*** End Patch"
    if body.startswith("*** Update File: a.txt"):
        patch = f"*** Begin Patch\n{body}\n*** End Patch"
    refused = dispatch("apply_patch", {"input": patch}, ctx)
    assert not refused.success and refused.error_code == code, refused
    assert fs.read("a.txt").content == "a\n" and [e.path for e in fs.walk(".")] == ["a.txt"]


def test_edit_file_takes_at_most_48000_characters_of_new_text_per_call_as_the_text_editor_does(fs: Filesystem) -> None:
    fs.write("a.txt", "start\nend\n")
    ctx = _context(fs)
    assert dispatch("read_file", {"path": "a.txt"}, ctx).success
    one = dispatch("edit_file", {"path": "a.txt", "old_string": "start", "new_string": "x" * 48_001}, ctx)
    assert not one.success and "48,001 characters" in one.message and "48,000" in one.message, one.message
    halves = [{"old_string": "start", "new_string": "x" * 30_000}, {"old_string": "end", "new_string": "y" * 30_000}]
    both = dispatch("edit_file", {"path": "a.txt", "edits": halves}, ctx)
    assert not both.success and "60,000 characters" in both.message and "edit_file call" in both.message
    editor = dispatch(
        "str_replace_based_edit_tool",
        {"command": "str_replace", "path": "/a.txt", "old_str": "start", "new_str": "x" * 48_001},
        ctx,
    )
    assert not editor.success and "48,001 characters" in editor.message  # the same rule, the same words
    assert fs.read("a.txt").content == "start\nend\n"
    assert dispatch("edit_file", {"path": "a.txt", "edits": halves[:1]}, ctx).success


def test_a_model_cannot_raise_the_cut_of_a_text_editor_view_by_sending_max_characters(fs: Filesystem) -> None:
    fs.write("big.txt", ("x" * 99 + "\n") * 2_000)  # 200,000 characters
    ctx = _context(fs)
    asked = {"command": "view", "path": "/big.txt", "max_characters": 10**7}
    view = dispatch("str_replace_based_edit_tool", asked, ctx)
    assert view.success and "<response clipped>" in view.message and len(view.message) < 20_000, len(view.message)
    block = {"type": "tool_use", "id": "t1", "name": "str_replace_based_edit_tool", "input": asked}
    defined = handle_tool_use(block, ctx, max_characters=100)  # the tool definition's cut wins
    assert "<response clipped>" in defined["content"] and len(defined["content"]) < 1_000, len(defined["content"])
    wider = handle_tool_use({**block, "input": {"command": "view", "path": "/big.txt"}}, ctx, max_characters=50_000)
    assert 50_000 < len(wider["content"]) < 60_000  # an application may set a wider cut than the default
    less = dispatch("str_replace_based_edit_tool", {**asked, "max_characters": 10}, ctx)
    assert less.success and "x" * 10 + "<response clipped>" in less.message  # and a model may ask for less


def test_a_listing_a_model_reads_is_bounded_as_glob_and_the_text_editor_bound_theirs() -> None:
    fs = InMemoryFilesystem()
    for index in range(1_200):
        fs.write(f"d/f{index:05}.txt", "x")
        fs.write(f"memories/note-{index:05}.md", "x")
    ctx = _context(fs)
    listed = dispatch("ls", {"path": "d"}, ctx)
    assert listed.success and "f00999.txt" in listed.message and "f01000.txt" not in listed.message
    assert '… and 200 more; glob with path="d"' in listed.message and len(listed.value) == 1_200  # code sees all
    memories = dispatch("memory", {"command": "view", "path": "/memories"}, ctx)
    assert memories.success and len(memories.message) < 16_500, len(memories.message)
    assert "more not shown" in memories.message and memories.message.count("\n") < 700


CREATES: list[tuple[str, dict[str, Any], str]] = [
    ("write_file", {"path": "new.txt", "content": "mine\n"}, "new.txt"),
    ("str_replace_based_edit_tool", {"command": "create", "path": "/new.txt", "file_text": "mine\n"}, "new.txt"),
    ("memory", {"command": "create", "path": "/memories/new.md", "file_text": "mine\n"}, "memories/new.md"),
    ("apply_patch", {"input": "*** Begin Patch\n*** Add File: new.txt\n+mine\n*** End Patch"}, "new.txt"),
]


@pytest.mark.parametrize(("tool", "arguments", "path"), CREATES, ids=[tool for tool, _, _ in CREATES])
def test_a_new_file_created_by_another_caller_between_the_look_and_the_write_is_not_overwritten(
    fs: Filesystem, tool: str, arguments: dict[str, Any], path: str
) -> None:
    def someone_else_creates_it_first(request: ApprovalRequest) -> bool:  # runs after the look, before the write
        if not fs.exists(path):
            fs.write(path, "theirs\n")
        return True

    policy = Policy([PolicyRule("ask", ("write",), "new.*")], approve=someone_else_creates_it_first)
    ctx = ToolContext(filesystem=fs, policy=policy)
    refused = dispatch(tool, arguments, ctx)
    assert not refused.success and refused.error_code == "changed_since_read", refused.message
    assert "did not exist when you looked, but was created since" in refused.message, refused.message
    assert fs.read(path).content == "theirs\n"


def _nested(depth: int) -> list[Any]:
    top: list[Any] = []
    inner = top
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return top


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", '{"path": ' + "[" * 100_000 + "]" * 100_000 + "}"),  # as a model's JSON text
        ("read_file", {"path": "a.txt", "extra": _nested(5_000)}),  # as an SDK hands it over, parsed
        ("str_replace_based_edit_tool", {"command": "view", "path": "/a.txt", "junk": _nested(5_000)}),
        ("memory", {"command": "view", "path": "/memories", "junk": _nested(5_000)}),
    ],
    ids=["json-text", "read_file", "text-editor", "memory"],
)
def test_arguments_nested_thousands_deep_are_refused_not_raised(tool: str, arguments: Any) -> None:
    fs = InMemoryFilesystem()
    fs.write("a.txt", "a\n")
    refused = dispatch(tool, arguments, _context(fs))
    assert not refused.success and refused.error_code == "invalid_argument", refused
    assert "nested too deeply" in refused.message and "path" in refused.message


def test_the_48000_character_limit_counts_the_text_the_model_sent_not_a_crlf_files_line_ends(fs: Filesystem) -> None:
    fs.write("crlf.txt", "one\r\ntwo\r\n")
    ctx = _context(fs)
    assert dispatch("str_replace_based_edit_tool", {"command": "view", "path": "/crlf.txt"}, ctx).success
    lines = "x\n" * 20_000  # 40,000 characters sent; 60,000 once its line ends are the file's CRLF
    edit = {"command": "str_replace", "path": "/crlf.txt", "old_str": "one\ntwo\n", "new_str": lines}
    done = dispatch("str_replace_based_edit_tool", edit, ctx)
    assert done.success, done.message
    assert fs.read_bytes("crlf.txt").content == b"x\r\n" * 20_000


@pytest.mark.parametrize(
    "section", ["@@\n  \n+pwned", "@@\n- \n+pwned", "@@\n \u3000\n+pwned"], ids=["space", "minus", "ideographic"]
)
def test_a_patch_whose_only_context_is_blank_proves_nothing_and_needs_the_file_read(
    fs: Filesystem, section: str
) -> None:
    fs.write("p.txt", "precious\n\nmore\n")  # never read; its blank line matches any whitespace-only context
    ctx = _context(fs)
    codex = dispatch(
        "apply_patch", {"input": f"*** Begin Patch\n*** Update File: p.txt\n{section}\n*** End Patch"}, ctx
    )
    assert not codex.success and codex.error_code == "not_read_before_write", codex.message
    call = {
        "type": "apply_patch_call",
        "call_id": "c1",
        "operation": {"type": "update_file", "path": "p.txt", "diff": section},
    }
    native = handle_apply_patch_calls([call], ctx)
    assert native[0]["status"] == "failed" and "not read" in native[0]["output"], native
    assert fs.read("p.txt").content == "precious\n\nmore\n"
    assert dispatch("read_file", {"path": "p.txt"}, ctx).success
    assert dispatch(
        "apply_patch", {"input": f"*** Begin Patch\n*** Update File: p.txt\n{section}\n*** End Patch"}, ctx
    ).success


REFUSED_BEFORE_ANY_CHANGE: list[tuple[str, dict[str, Any]]] = [
    ("cp", {"src": "a.txt", "dst": "big"}),  # onto an existing directory, without overwrite
    ("mv", {"src": "a.txt", "dst": "big"}),
    ("cp", {"src": "a.txt", "dst": "big", "overwrite": True}),  # a file cannot replace a directory
    ("str_replace_based_edit_tool", {"command": "insert", "path": "/big", "insert_line": 0, "insert_text": "x"}),
    ("str_replace_based_edit_tool", {"command": "create", "path": "/big/f0.bin", "file_text": "x"}),
    ("str_replace_editor", {"command": "undo_edit", "path": "/big"}),
    ("memory", {"command": "str_replace", "path": "/memories/big", "old_str": "x", "new_str": "y"}),
    ("memory", {"command": "create", "path": "/memories/big/f0.bin", "file_text": "x"}),
    ("memory", {"command": "delete", "path": "/memories/big"}),  # one delete, as rm's: nothing to put back part way
]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    REFUSED_BEFORE_ANY_CHANGE,
    ids=[f"{t}-{i}" for i, (t, _) in enumerate(REFUSED_BEFORE_ANY_CHANGE)],
)
def test_a_call_refused_before_any_change_copies_nothing_to_roll_back(tool: str, arguments: dict[str, Any]) -> None:
    fs = InMemoryFilesystem()
    for index in range(50):
        fs.write_bytes(f"big/f{index}.bin", b"x" * 10_000)
        fs.write_bytes(f"memories/big/f{index}.bin", b"x" * 10_000)
    fs.write("a.txt", "a")
    ctx = _context(fs)
    chosen = {t.name: t for t in tools_for(fs, history=True) + NATIVE_TOOLS}[tool]
    assert chosen.undo is not None
    with UndoLog(fs) as log:  # what the dispatcher records before the call: the plan's work, counted
        chosen.undo(chosen.params.model_validate(arguments), log)
        assert log.stats.files_saved == 0 and log.stats.bytes_saved == 0, log.stats
    assert dispatch(tool, arguments, ctx).success == (arguments.get("command") == "delete")
    fs.write("d/a.txt", "a")
    fs.write("e/b.txt", "b")
    cp = {t.name: t for t in tools_for(fs)}["cp"]
    assert cp.undo is not None
    with UndoLog(fs) as log:  # a call that can change its target still records it
        cp.undo(cp.params.model_validate({"src": "d", "dst": "e", "overwrite": True}), log)
        assert log.stats.files_saved == 1  # e/b.txt, which the copy replaces
