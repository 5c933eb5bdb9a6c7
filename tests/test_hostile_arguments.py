"""A hostile or broken model's arguments on every surface of the tool layer: lone surrogates (valid JSON, no
Unicode), over-long values that a refusal would echo, a file moved onto itself. Each must get a clean refusal
a model can act on, the same on Python's ``dispatch``, the providers' native tools and MCP over stdio.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import Client
from mcp.shared.exceptions import MCPError

from workspacefs import InMemoryFilesystem, SqlStore
from workspacefs.cli import main
from workspacefs.mcp import build_server
from workspacefs.protocol import Filesystem
from workspacefs.server import create_app
from workspacefs.tools import ToolContext, dispatch
from workspacefs.tools.openai import handle_apply_patch_calls

LONE = "\ud800"

# (tool, arguments): every one holds a lone surrogate somewhere a model can put text
SURROGATE_CALLS: list[tuple[str, Any]] = [
    ("write_file", {"path": "new.txt", "content": f"x{LONE}y"}),
    ("write_file", '{"path": "new.txt", "content": "x\\ud800y"}'),  # as a model's JSON carries it
    ("write_file", {"path": f"n{LONE}.txt", "content": "x"}),
    ("edit_file", {"path": "a.txt", "old_string": "hello", "new_string": LONE}),
    ("edit_file", {"path": "a.txt", "edits": [{"old_string": "hello", "new_string": LONE}]}),
    ("glob", {"pattern": LONE}),
    ("grep", {"pattern": "x", "glob": LONE}),
    ("grep", {"pattern": LONE}),
    ("str_replace_based_edit_tool", {"command": "create", "path": "/s.txt", "file_text": LONE}),
    ("memory", {"command": "create", "path": "/memories/m.txt", "file_text": LONE}),
    ("apply_patch", {"input": f"*** Begin Patch\n*** Add File: p.txt\n+{LONE}\n*** End Patch"}),
]


@pytest.fixture
def fs(three_backends: Filesystem) -> Filesystem:
    """Memory, host and SQLite (``conftest.three_backends``)."""
    return three_backends


@pytest.mark.parametrize(
    ("tool", "arguments"), SURROGATE_CALLS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(SURROGATE_CALLS)]
)
def test_a_lone_surrogate_is_refused_by_name_and_changes_nothing(fs: Filesystem, tool: str, arguments: Any) -> None:
    fs.write("a.txt", "hello\n")
    context = ToolContext(filesystem=fs)
    dispatch("read_file", {"path": "a.txt"}, context)
    before = sorted(match.path for match in fs.glob("**"))
    result = dispatch(tool, arguments, context)
    assert not result.success and result.error_code == "invalid_argument", result
    assert "U+D800" in result.message and "lone UTF-16 surrogate" in result.message, result.message
    assert result.message.encode("utf-8")  # the refusal itself is sendable text
    assert sorted(match.path for match in fs.glob("**")) == before
    assert fs.read("a.txt").content == "hello\n"


def test_openai_apply_patch_refuses_a_lone_surrogate_in_a_diff_or_a_path(fs: Filesystem) -> None:
    context = ToolContext(filesystem=fs)
    for operation in (
        {"type": "create_file", "path": "p.txt", "diff": f"+{LONE}\n"},
        {"type": "create_file", "path": f"p{LONE}.txt", "diff": "+x\n"},
    ):
        [output] = handle_apply_patch_calls(
            [{"type": "apply_patch_call", "call_id": "c1", "operation": operation}], context
        )
        assert output["status"] == "failed" and "U+D800" in output["output"], output
        assert output["output"].encode("utf-8")
    assert not fs.exists("p.txt")


def test_a_refusal_does_not_echo_an_over_long_argument_back(fs: Filesystem) -> None:
    fs.write("a.txt", "hello\n")
    context = ToolContext(filesystem=fs)
    huge = "q" * 100_000
    refused = dispatch("restore", {"snapshot_id": huge}, context)
    assert refused.error_code == "invalid_argument" and len(refused.message) < 500, refused.message[:300]
    stale = dispatch("write_file", {"path": "a.txt", "content": "x", "expected_hash": huge}, context)
    assert not stale.success and len(stale.message) < 500, stale.message[:300]
    patch = f"*** Begin Patch\n*** Update File: a.txt\n@@\n-{huge}\n+x\n*** End Patch"
    mismatch = dispatch("apply_patch", {"input": patch}, context)
    assert mismatch.error_code == "patch_mismatch", mismatch.message[:300]
    assert len(mismatch.message) < 9_000 and "characters of this message cut" in mismatch.message
    assert mismatch.message.startswith("The patch was not applied")
    call = {"type": "apply_patch_call", "call_id": "c1", "operation": {"type": "update_file", "path": "a.txt"}}
    call["operation"]["diff"] = f"@@\n-{huge}\n+x\n"
    [output] = handle_apply_patch_calls([call], context)
    assert output["status"] == "failed" and len(output["output"]) < 9_000, len(output["output"])
    assert fs.read("a.txt").content == "hello\n"


def test_moving_or_copying_a_file_onto_itself_says_it_is_the_same_path(fs: Filesystem) -> None:
    fs.write("a.txt", "hello\n")
    context = ToolContext(filesystem=fs)
    for tool in ("mv", "cp"):
        result = dispatch(tool, {"src": "a.txt", "dst": "./a.txt", "overwrite": True}, context)
        assert not result.success and "same path" in result.message and "directory" not in result.message, result
    assert fs.read("a.txt").content == "hello\n"


# --- MCP over stdio ---------------------------------------------------------------------------------------------
# The official client cannot send a lone surrogate (its serializer refuses one), but JSON allows the escape and
# a JavaScript client sends it; so these requests are written on the wire by hand.


class RawMcp:
    """``workspacefs mcp`` driven line by line over stdio, answers read in the order they come."""

    def __init__(self, url: str) -> None:
        env = {"PYTHONUNBUFFERED": "1", "HOME": os.environ.get("HOME", "/root"), "PATH": os.environ.get("PATH", "")}
        env |= {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}  # the code under test
        command = [sys.executable, "-m", "workspacefs", "mcp", "--create", "--fs", url]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode("ascii") + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        """The next answer; a hang guard of 60 s fails the test rather than waiting for ever."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        assert ready, "the server sent no answer"
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


@pytest.fixture
def raw_mcp(fast_tmp: Path) -> Iterator[RawMcp]:
    server = RawMcp(f"sqlite:///{fast_tmp / 'mcp.db'}?session=hostile")
    server.send(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
    )
    assert server.answer()["id"] == 1
    server.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    yield server
    server.close()


def _call(request_id: int, name: str, arguments: str) -> str:
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", '
        f'"params": {{"name": "{name}", "arguments": {arguments}}}}}'
    )


def test_mcp_answers_a_tool_call_holding_a_lone_surrogate_in_turn(raw_mcp: RawMcp) -> None:
    raw_mcp.send(_call(2, "write_file", '{"path": "a.txt", "content": "x\\ud800"}'))
    raw_mcp.send(_call(3, "write_file", '{"path": "b.txt", "content": "fine"}'))
    refused = raw_mcp.answer()  # before the next call's answer: the request was not dropped
    assert refused["id"] == 2, refused
    assert refused["result"]["isError"] is True
    assert refused["result"]["_meta"]["workspacefs/error_code"] == "invalid_argument"
    assert "U+D800" in refused["result"]["content"][0]["text"]
    written = raw_mcp.answer()
    assert written["id"] == 3 and written["result"]["isError"] is False, written
    raw_mcp.send(_call(4, "read_file", '{"path": "a.txt"}'))
    assert "does not exist" in raw_mcp.answer()["result"]["content"][0]["text"]


def test_mcp_answers_any_request_holding_a_lone_surrogate(raw_mcp: RawMcp) -> None:
    raw_mcp.send(_call(2, "no_such_tool\\udc00", "{}"))
    unknown = raw_mcp.answer()
    assert unknown["id"] == 2 and unknown["result"]["isError"] is True, unknown
    assert "lone UTF-16 surrogate" in unknown["result"]["content"][0]["text"]
    raw_mcp.send('{"jsonrpc": "2.0", "id": "r5", "method": "resources/read", "params": {"uri": "workspace://\\ud800"}}')
    error = raw_mcp.answer()
    assert error["id"] == "r5" and error["error"]["code"] == -32602, error


@pytest.mark.anyio
async def test_an_mcp_resource_refusal_reads_cleanly_and_does_not_echo_a_huge_uri() -> None:
    async with Client(build_server(InMemoryFilesystem())) as client:
        with pytest.raises(MCPError) as escape:
            await client.read_resource("workspace://../outside.txt")
        assert "Path escapes the workspace root" in escape.value.error.message
        assert "Errno" not in escape.value.error.message, escape.value.error.message
        with pytest.raises(MCPError) as huge:
            await client.read_resource("workspace://" + "x" * 100_000)
        assert len(huge.value.error.message) < 500, len(huge.value.error.message)


def test_the_native_tools_carry_the_error_code_of_a_typed_refusal(fs: Filesystem) -> None:
    context = ToolContext(filesystem=fs)
    cases = [
        (
            "str_replace_based_edit_tool",
            {"command": "create", "path": "/.git/config", "file_text": "x"},
            "policy_denied",
        ),
        ("str_replace_based_edit_tool", {"command": "view", "path": "/" + "x" * 5000}, "path_too_long"),
        ("str_replace_based_edit_tool", {"command": "view", "path": "/a\x00b"}, "invalid_path"),
        ("str_replace_editor", {"command": "create", "path": "/AGENTS.md", "file_text": "x"}, "policy_denied"),
        ("memory", {"command": "view", "path": "/memories/" + "x" * 5000}, "path_too_long"),
        ("memory", {"command": "create", "path": "/memories/a\x01b", "file_text": "x"}, "invalid_path"),
    ]
    for tool, arguments, code in cases:
        result = dispatch(tool, arguments, context)
        assert not result.success and result.error_code == code, (tool, arguments, result)


# --- the REST service ---------------------------------------------------------------------------------------


def test_the_service_refuses_a_url_whose_escapes_are_not_utf8_instead_of_naming_a_file_u_fffd(fast_tmp: Path) -> None:
    store = SqlStore(f"sqlite:///{fast_tmp / 'service.db'}")
    with TestClient(create_app(store, auth=False)) as client:
        assert client.post("/v1/agents/a/sessions", json={"id": "s"}).status_code == 201
        files = "/v1/agents/a/sessions/s/fs"
        for name in ("caf%E9.txt", "%FF", "%ED%A0%80"):  # Latin-1, a stray byte, an encoded surrogate
            created = client.post(f"{files}/{name}", json={"content": "x"})
            assert created.status_code == 400, (name, created.text)
            assert created.json()["error"]["code"] == "invalid_path" and "UTF-8" in created.json()["error"]["message"]
        searched = client.post(f"{files}/_/glob?path=%FF", json={"pattern": "*"})
        assert searched.status_code == 400 and searched.json()["error"]["code"] == "bad_request", searched.text
        assert client.get(files).json()["data"] == []  # nothing was made under a replacement character
        kept = client.post(f"{files}/caf%C3%A9.txt", json={"content": "x"})  # UTF-8 escapes still work
        assert kept.status_code == 201 and kept.json()["name"] == "café.txt"
    store.close()


def test_the_command_line_refuses_an_argument_that_is_not_utf8_before_any_backend_sees_it(fast_tmp: Path) -> None:
    root = fast_tmp / "cli-root"
    root.mkdir()
    url = f"file://{root}?snapshot_dir={fast_tmp / 'cli-snaps'}"
    runner = CliRunner()
    for args in (["snapshot", "create", "--tag", "a\udcffb"], ["grep", "\udcff"], ["glob", "x\udcfe"]):
        result = runner.invoke(main, [*args, "--fs", url])
        assert result.exit_code == 6, (args, result.output)
        assert "is not UTF-8 text" in result.output, result.output
    assert runner.invoke(main, ["snapshot", "list", "--fs", url]).output.strip() in ("", "No snapshots.")


def test_parallel_edits_of_one_file_in_one_conversation_are_refused_as_the_models_own(fs: Filesystem) -> None:
    """A model's parallel tool calls of one turn edit one file: those that lose the race are told that another of
    its own calls changed it (they said "another conversation", or "outside these tools, by a person")."""
    context = ToolContext(filesystem=fs)
    refusals: list[str] = []
    for _ in range(30):  # rounds until some call loses a race (almost always the first, on a busy machine later)
        fs.write("f.txt", "".join(f"line{i}\n" for i in range(16)))
        dispatch("read_file", {"path": "f.txt"}, context)
        results: list[Any] = []
        start = threading.Barrier(16)

        def edit(i: int) -> None:
            edit_args = {"path": "f.txt", "old_string": f"line{i}\n", "new_string": f"LINE{i}\n"}
            start.wait()  # noqa: B023 - all at once: the race this test is about
            results.append(dispatch("edit_file", edit_args, context))  # noqa: B023

        threads = [threading.Thread(target=edit, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        refusals += [result.message for result in results if not result.success]
        assert fs.read("f.txt").content.count("LINE") == sum(result.success for result in results)  # none lost
        if refusals:
            break
    if not refusals:  # every call won its race in every round (memory's writes may): nothing to attribute
        assert isinstance(fs, InMemoryFilesystem) or len(results) == 16, results
        return
    for message in refusals:
        assert "another of your calls, running at the same time" in message, message


def test_the_write_that_made_the_content_is_named_however_late_the_parallel_calls_before_it_end() -> None:
    """The ledger of who wrote a file kept the last 8 writes in the order they *ended*: a call that wrote the
    current content and ended first was pushed out by 8 calls of the same turn that wrote before it but ended after
    it (seen under load in CI), and the refused calls were told the file "was changed outside these tools"."""
    from workspacefs.tools._editing import Writer, _LastWriters

    fs = InMemoryFilesystem()
    ledger = _LastWriters()
    earlier = [Writer(None, f"id-{i}", 1) for i in range(15)]
    last = Writer(None, "id-current", 1)  # its write came after every other one
    for writer in (*earlier, last):
        ledger.begin(fs, "f.txt", writer)
    ledger.end(fs, "f.txt", last, made=True)  # ... but it returned first
    for writer in earlier:
        ledger.end(fs, "f.txt", writer, made=True)
    assert ledger.of(fs, "f.txt", "id-current") is last
