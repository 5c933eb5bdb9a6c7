"""The filesystem tools on every backend: one definition, the behaviour a model needs."""

from __future__ import annotations

import itertools
import json
import logging
import os
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workspacefs import BaseFilesystem, HostFilesystem, InMemoryFilesystem
from workspacefs.protocol import Filesystem
from workspacefs.tools import (
    ALL_TOOLS,
    FILESYSTEM_TOOLS,
    SNAPSHOT_TOOLS,
    Tool,
    ToolContext,
    ToolResult,
    dispatch,
    tools_for,
)

_count = itertools.count()


@pytest.fixture(params=["memory", "host"])
def fs(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Filesystem]:
    if request.param == "memory":
        yield InMemoryFilesystem(mount_point="/workspace")
        return
    index = next(_count)
    root = fast_tmp / f"tools-{index}"
    root.mkdir()
    with HostFilesystem(root, mount_point="/workspace", snapshot_dir=fast_tmp / f"tools-snap-{index}") as host:
        yield host


@pytest.fixture
def ctx(fs: Filesystem) -> ToolContext:
    return ToolContext(filesystem=fs)


def call(ctx: ToolContext, name: str, **arguments: Any) -> ToolResult[Any]:
    return dispatch(name, json.dumps(arguments), ctx)


def seed(fs: Filesystem, files: dict[str, str | bytes]) -> None:
    for path, content in files.items():
        fs.write_bytes(path, content.encode() if isinstance(content, str) else content)


def test_the_tool_sets() -> None:
    assert [t.name for t in FILESYSTEM_TOOLS] == ["ls", "read_file", "write_file", "edit_file", "glob", "grep", "rm"]
    assert [t.name for t in ALL_TOOLS][7:] == ["mkdir", "mv", "cp", "stat"]


# --- read_file ------------------------------------------------------------------------------------


def test_read_file_numbers_lines_like_cat_n(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"a.py": "first\n\tindented\nlast"})
    result = call(ctx, "read_file", path="/workspace/a.py")
    assert result.success
    assert result.message == "     1\tfirst\n     2\t\tindented\n     3\tlast"
    assert result.value.total_lines == 3


def test_read_file_says_how_to_read_on(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"big.txt": "".join(f"line {i}\n" for i in range(2500))})
    result = call(ctx, "read_file", path="big.txt")
    assert result.message.count("\n") > 2000
    assert (
        'Showing lines 1-2000 of 2500. To read on, call read_file with path="/workspace/big.txt", offset=2000'
        in result.message
    )
    rest = call(ctx, "read_file", path="big.txt", offset=2000)
    assert rest.message.startswith("  2001\tline 2000")
    assert "To read on" not in rest.message


def test_read_file_caps_the_limit(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"big.txt": "x\n" * 3000})
    result = call(ctx, "read_file", path="big.txt", limit=5000)
    assert len(result.value.lines) == 2000


def test_read_file_cuts_long_lines(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"wide.txt": "é" * 5000 + "\nshort\n"})
    result = call(ctx, "read_file", path="wide.txt")
    first, second = result.message.split("\n")
    assert first.endswith("[line cut at 2000 characters]")
    assert first.count("é") == 2000
    assert second == "     2\tshort"


def test_read_file_refuses_binary_with_a_hint(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"img.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "latin.txt": "café".encode("latin-1")})
    for path in ("img.png", "latin.txt"):
        result = call(ctx, "read_file", path=path)
        assert not result.success
        assert "binary" in result.message and "stat" in result.message


def test_read_file_past_the_end_and_empty(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"three.txt": "a\nb\nc\n", "empty.txt": ""})
    past = call(ctx, "read_file", path="three.txt", offset=10)
    assert not past.success and "has 3 lines" in past.message
    empty = call(ctx, "read_file", path="empty.txt")
    assert empty.success and "empty" in empty.message


def test_read_file_keeps_crlf_out_of_the_display(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"win.txt": "one\r\ntwo\r\n"})
    assert call(ctx, "read_file", path="win.txt").message == "     1\tone\n     2\ttwo"


# --- write_file -----------------------------------------------------------------------------------


def test_write_file_creates_and_reports(ctx: ToolContext, fs: Filesystem) -> None:
    result = call(ctx, "write_file", path="/workspace/pkg/new.py", content="a = 1\nb = 2\n")
    assert result.success and result.message.startswith("Created '/workspace/pkg/new.py': 2 lines")
    assert fs.read("pkg/new.py").content == "a = 1\nb = 2\n"


def test_write_file_cap(ctx: ToolContext, fs: Filesystem) -> None:
    result = call(ctx, "write_file", path="big.txt", content="x" * 48_001)
    assert not result.success
    assert "48,000" in result.message and "append=true" in result.message
    assert not fs.exists("big.txt")
    assert call(ctx, "write_file", path="ok.txt", content="x" * 48_000).success


def test_write_file_append_in_parts(ctx: ToolContext, fs: Filesystem) -> None:
    assert call(ctx, "write_file", path="log.txt", content="part 1\n").success
    assert call(ctx, "write_file", path="log.txt", content="part 2\n", append=True).success
    assert fs.read("log.txt").content == "part 1\npart 2\n"
    assert call(ctx, "write_file", path="log.txt", content="rewrite\n").success  # it wrote all it knows


# --- read before write ----------------------------------------------------------------------------


def test_overwriting_an_unread_file_is_refused(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"notes.md": "precious\n"})
    result = call(ctx, "write_file", path="notes.md", content="clobbered")
    assert not result.success and "read_file" in result.message and "not read" in result.message
    assert not call(ctx, "edit_file", path="notes.md", old_string="precious", new_string="x").success
    assert fs.read("notes.md").content == "precious\n"
    assert call(ctx, "read_file", path="notes.md").success
    assert call(ctx, "write_file", path="notes.md", content="now allowed").success


def test_a_file_changed_since_it_was_read_must_be_read_again(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"notes.md": "v1\n"})
    call(ctx, "read_file", path="notes.md")
    fs.write("notes.md", "v2 by someone else\n")
    result = call(ctx, "edit_file", path="notes.md", old_string="v2", new_string="v3")
    assert not result.success and "changed since you last read it" in result.message
    assert fs.read("notes.md").content == "v2 by someone else\n"


def test_read_before_write_can_be_switched_off(fs: Filesystem) -> None:
    seed(fs, {"notes.md": "old\n"})
    context = ToolContext(filesystem=fs, read_before_write=False)
    assert dispatch("write_file", {"path": "notes.md", "content": "new"}, context).success


def test_read_state_is_per_path_and_follows_mount_point_spelling(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"a.txt": "a\n", "b.txt": "b\n"})
    call(ctx, "read_file", path="/workspace/a.txt")
    assert call(ctx, "edit_file", path="a.txt", old_string="a", new_string="A").success
    assert not call(ctx, "edit_file", path="b.txt", old_string="b", new_string="B").success


# --- edit_file ------------------------------------------------------------------------------------


def read_then(ctx: ToolContext, path: str) -> None:
    assert call(ctx, "read_file", path=path).success


def test_edit_replaces_a_unique_match_and_shows_a_diff(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"m.py": "def f():\n    return 1\n"})
    read_then(ctx, "m.py")
    result = call(ctx, "edit_file", path="m.py", old_string="return 1", new_string="return 2")
    assert result.success
    assert "-    return 1" in result.message and "+    return 2" in result.message
    assert fs.read("m.py").content == "def f():\n    return 2\n"


def test_edit_refuses_several_matches_naming_lines(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"m.py": "x = 1\ny = 2\nx = 1\n"})
    read_then(ctx, "m.py")
    result = call(ctx, "edit_file", path="m.py", old_string="x = 1", new_string="x = 3")
    assert not result.success
    assert "occurs more than once (at line 1, and again at line 3)" in result.message
    assert "replace_all" in result.message
    assert call(ctx, "edit_file", path="m.py", old_string="x = 1", new_string="x = 3", replace_all=True).success
    assert fs.read("m.py").content == "x = 3\ny = 2\nx = 3\n"


def test_edit_stops_looking_at_the_second_match(ctx: ToolContext, fs: Filesystem) -> None:
    """A one-line 8 MiB file holding old_string 2 million times: the refusal needs only two of them. Counting
    them all held every position (about 72 MiB on top of the file's 8); the peak is measured, not timed."""
    content = "abcd" * (2 * 1024 * 1024)
    seed(fs, {"min.js": content})
    read_then(ctx, "min.js")
    tracemalloc.start()
    try:
        result = call(ctx, "edit_file", path="min.js", old_string="abcd", new_string="x")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not result.success
    assert "occurs more than once (at line 1, and again at line 1)" in result.message
    assert peak < 4 * len(content), f"{peak / 2**20:.0f} MiB traced to refuse an edit of an 8 MiB file"
    assert fs.read("min.js").content == content


def test_edit_replace_all_replaces_every_match_in_one_pass(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"min.js": "abcd;" * 100_000, "few.txt": "a-b-c\n-d-\n"})
    read_then(ctx, "min.js")
    read_then(ctx, "few.txt")
    assert call(ctx, "edit_file", path="min.js", old_string="abcd", new_string="xy", replace_all=True).success
    assert fs.read("min.js").content == "xy;" * 100_000
    assert call(ctx, "edit_file", path="few.txt", old_string="-", new_string="+", replace_all=True).success
    assert fs.read("few.txt").content == "a+b+c\n+d+\n"


def test_edit_counts_occurrences_without_overlap(ctx: ToolContext, fs: Filesystem) -> None:
    # as str.replace counts them: "aa" occurs once in "aaa", so the edit is unique
    seed(fs, {"a.txt": "aaa\n"})
    read_then(ctx, "a.txt")
    assert call(ctx, "edit_file", path="a.txt", old_string="aa", new_string="b").success
    assert fs.read("a.txt").content == "ba\n"


def test_edit_refuses_empty_and_identical_strings(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"m.py": "a\n"})
    read_then(ctx, "m.py")
    assert "write_file" in call(ctx, "edit_file", path="m.py", old_string="", new_string="x").message
    assert "nothing to change" in call(ctx, "edit_file", path="m.py", old_string="a", new_string="a").message


def test_edit_keeps_tabs_crlf_and_bom(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"win.txt": "\ufeffalpha\r\n\tbeta\r\ngamma\r\n"})
    read_then(ctx, "win.txt")
    result = call(ctx, "edit_file", path="win.txt", old_string="\tbeta\ngamma", new_string="\tBETA\ngamma")
    assert result.success, result.message
    assert fs.read_bytes("win.txt").content == "\ufeffalpha\r\n\tBETA\r\ngamma\r\n".encode()


def test_multiple_edits_are_all_or_nothing(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"m.py": "a = 1\nb = 2\n"})
    read_then(ctx, "m.py")
    bad = call(
        ctx,
        "edit_file",
        path="m.py",
        edits=[{"old_string": "a = 1", "new_string": "a = 10"}, {"old_string": "c = 3", "new_string": "c = 30"}],
    )
    assert not bad.success and "Edit 2 of 2" in bad.message
    assert fs.read("m.py").content == "a = 1\nb = 2\n"
    good = call(
        ctx,
        "edit_file",
        path="m.py",
        edits=[{"old_string": "a = 1", "new_string": "a = 10"}, {"old_string": "b = 2", "new_string": "b = 20"}],
    )
    assert good.success and "2 edits" in good.message
    assert fs.read("m.py").content == "a = 10\nb = 20\n"


def test_edit_of_a_missing_file_points_to_write_file(ctx: ToolContext) -> None:
    result = call(ctx, "edit_file", path="nope.py", old_string="a", new_string="b")
    assert not result.success and "write_file" in result.message


# --- ls, glob, grep, rm and the extras -----------------------------------------------------------------


def test_ls_marks_directories_and_sizes(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"src/a.py": "x" * 1500, "b.txt": "hi"})
    result = call(ctx, "ls")
    assert result.message.splitlines() == ["/workspace: 1 file, 1 directory", "b.txt  (2 B)", "src/"]
    assert "1.5 KB" in call(ctx, "ls", path="src").message
    assert not call(ctx, "ls", path="b.txt").success


def test_glob_is_sorted(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"b.py": "", "a/z.py": "", "a.py": ""})
    result = call(ctx, "glob", pattern="**/*.py")
    assert result.value == ["/workspace/a.py", "/workspace/a/z.py", "/workspace/b.py"]
    assert "No files match" in call(ctx, "glob", pattern="*.rs").message


def test_grep_groups_by_file_and_says_when_capped(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"a.py": "hit 1\nmiss\nhit 2\n", "b.py": "hit 3\n"})
    result = call(ctx, "grep", pattern="hit")
    assert result.message.splitlines() == [
        "3 matching lines in 2 files:",
        "/workspace/a.py",
        "     1: hit 1",
        "     3: hit 2",
        "",
        "/workspace/b.py",
        "     1: hit 3",
    ]
    capped = call(ctx, "grep", pattern="hit", max_results=2)
    assert "showing the first 2" in capped.message and len(capped.value) == 2


def test_rm_says_what_it_removed(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"d/a.txt": "a", "d/e/b.txt": "b", "f.txt": "12345"})
    assert "Removed file '/workspace/f.txt' (5 B)" in call(ctx, "rm", path="f.txt").message
    refused = call(ctx, "rm", path="d")
    assert not refused.success and "2 files and 1 directory" in refused.message and fs.exists("d/a.txt")
    done = call(ctx, "rm", path="d", recursive=True)
    assert done.success and "with 2 files and 1 directory" in done.message
    assert not fs.exists("d")


def test_extras(ctx: ToolContext, fs: Filesystem) -> None:
    assert call(ctx, "mkdir", path="x/y").success and fs.stat("x/y").is_directory
    seed(fs, {"a.txt": "a"})
    assert call(ctx, "cp", src="a.txt", dst="x/a.txt").success
    assert "overwrite=true" in call(ctx, "mv", src="a.txt", dst="x/a.txt").message
    assert "not read" in call(ctx, "mv", src="a.txt", dst="x/a.txt", overwrite=True).message  # as write_file
    assert call(ctx, "read_file", path="x/a.txt").success
    assert call(ctx, "mv", src="a.txt", dst="x/a.txt", overwrite=True).success
    assert "into" not in call(ctx, "stat", path="x/a.txt").message
    assert "itself" in call(ctx, "mv", src="x", dst="x/y/z").message
    assert "is a file of 1 B" in call(ctx, "stat", path="/workspace/x/a.txt").message


# --- robustness -----------------------------------------------------------------------------------------


def test_no_filesystem_in_context() -> None:
    result = dispatch("ls", {}, ToolContext())
    assert not result.success and "No filesystem" in result.message


def test_unexpected_exceptions_become_a_failure_naming_the_tool(
    fs: Filesystem, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(params: Any, *, context: ToolContext) -> ToolResult[Any]:
        raise RuntimeError("disk on fire")

    broken = Tool("ls", "", FILESYSTEM_TOOLS[0].params, explode)
    with caplog.at_level(logging.ERROR, logger="workspacefs.tools"):
        result = dispatch("ls", {}, ToolContext(filesystem=fs), tools=[broken])
    assert not result.success and "Internal error in tool ls" in result.message and "disk on fire" in result.message
    assert "ls" in caplog.text


class _FailsMidCopy(InMemoryFilesystem):
    """Copies one file, then the disk 'fills up'."""

    copies = 0
    _copy_tree = BaseFilesystem._copy_tree  # file by file, so one can fail

    def _copy_file(self, src: str, dst: str) -> None:
        type(self).copies += 1
        if type(self).copies > 1:
            raise OSError(28, "No space left on device", dst)
        super()._copy_file(src, dst)


def test_a_tool_failing_part_way_is_rolled_back() -> None:
    fs = _FailsMidCopy()
    seed(fs, {"src/a.txt": "a", "src/b.txt": "b", "src/c.txt": "c"})
    result = dispatch("cp", {"src": "src", "dst": "copy"}, ToolContext(filesystem=fs))
    assert not result.success and "No space left" in result.message
    assert not fs.exists("copy")  # the half-made copy is gone
    fs.copies = 0
    off = dispatch("cp", {"src": "src", "dst": "copy"}, ToolContext(filesystem=fs, transactional=False))
    assert not off.success and fs.exists("copy")  # without transactions the partial copy stays


_ARGUMENT_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=10_000),
    st.text(max_size=30),
    st.sampled_from(["..", "/workspace/../x", "a\x00b", "**", "(", "[", "/etc/passwd", "a" * 200]),
    st.lists(st.dictionaries(st.sampled_from(["old_string", "new_string", "x"]), st.text(max_size=5)), max_size=2),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from([t.name for t in ALL_TOOLS] + ["bogus"]),
    arguments=st.one_of(
        st.dictionaries(
            st.sampled_from(
                [
                    "path",
                    "content",
                    "offset",
                    "limit",
                    "old_string",
                    "new_string",
                    "edits",
                    "pattern",
                    "glob",
                    "recursive",
                    "src",
                    "dst",
                    "overwrite",
                    "append",
                    "replace_all",
                    "max_results",
                    "extra",
                ]
            ),
            _ARGUMENT_VALUES,
            max_size=5,
        ),
        st.text(max_size=20),
    ),
)
def test_handlers_never_raise(name: str, arguments: Any) -> None:
    fs = InMemoryFilesystem(mount_point="/workspace")
    seed(fs, {"a.txt": "a\n", "d/b.txt": "b\n"})
    result = dispatch(name, arguments, ToolContext(filesystem=fs))
    assert isinstance(result, ToolResult)
    assert isinstance(result.message, str) and result.message


# --- snapshot, restore, diff ------------------------------------------------------------------------


def test_snapshot_tools_take_compare_and_restore(ctx: ToolContext, fs: Filesystem) -> None:
    seed(fs, {"plan.md": "v1\n", "keep.txt": "k\n"})
    taken = call(ctx, "snapshot", tag="before edits")
    assert taken.success and "before edits" in taken.message and "2 files" in taken.message
    snapshot_id = taken.value["snapshot_id"]
    assert call(ctx, "read_file", path="plan.md").success
    assert call(ctx, "write_file", path="plan.md", content="v2\n").success
    assert call(ctx, "write_file", path="new.txt", content="n\n").success
    assert call(ctx, "rm", path="keep.txt").success
    changes = call(ctx, "diff", snapshot_id=snapshot_id)
    assert changes.success
    assert changes.message.splitlines()[1:] == ["A new.txt", "M plan.md", "D keep.txt"]
    by_prefix = call(ctx, "diff", snapshot_id=snapshot_id[:8])
    assert by_prefix.message == changes.message
    restored = call(ctx, "restore", snapshot_id="before edits")
    assert restored.success and "3 files changed back" in restored.message
    assert fs.read("plan.md").content == "v1\n" and fs.exists("keep.txt") and not fs.exists("new.txt")
    refused = call(ctx, "write_file", path="plan.md", content="v3\n")  # the model must read it again
    assert not refused.success and "read" in refused.message.lower()
    assert "Nothing changed" in call(ctx, "diff", snapshot_id=snapshot_id).message


def test_snapshot_tools_explain_mistakes(ctx: ToolContext) -> None:
    none_yet = call(ctx, "restore", snapshot_id="anything")
    assert not none_yet.success and "none has been taken yet" in none_yet.message
    call(ctx, "snapshot", tag="one")
    unknown = call(ctx, "diff", snapshot_id="two")
    assert not unknown.success and "one" in unknown.message and "Recent ones" in unknown.message
    assert not call(ctx, "diff", snapshot_id="one", other_snapshot_id="nope").success
    no_fs = dispatch("snapshot", {}, ToolContext(filesystem=None), tools=SNAPSHOT_TOOLS)
    assert not no_fs.success and "cannot take snapshots" in no_fs.message


def test_tools_for_fits_the_filesystem() -> None:
    writable = InMemoryFilesystem()
    assert [t.name for t in tools_for(writable)][-3:] == ["snapshot", "restore", "diff"]
    read_only = InMemoryFilesystem(read_only=True)
    assert {t.name for t in tools_for(read_only)} == {"ls", "read_file", "glob", "grep", "stat", "diff"}
    assert {t.name for t in tools_for(writable, read_only=True)} == {"ls", "read_file", "glob", "grep", "stat", "diff"}
    assert tools_for(None) == ALL_TOOLS  # nothing that can snapshot: the file tools only


def test_a_refused_append_to_a_hard_linked_file_says_why(fast_tmp: Path) -> None:
    """Regression: the model was told the file was 'outside the workspace' (messages matched on text)."""
    root = fast_tmp / "hardlinked"
    root.mkdir()
    (root / "notes.txt").write_text("one\n")
    os.link(root / "notes.txt", root / "alias.txt")
    with HostFilesystem(root, snapshot_dir=fast_tmp / "hardlinked-snaps") as fs:
        result = dispatch("write_file", {"path": "notes.txt", "content": "two\n", "append": True}, ToolContext(fs))
        assert not result.success and result.error_code == "hard_link_refused"
        assert "hard links" in result.message and "outside the workspace" not in result.message
        assert fs.read("notes.txt").content == "one\n"
