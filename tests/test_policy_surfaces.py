"""The policy through every surface but REST (tests/test_server_policy.py): the CLI, MCP (with and without
elicitation, on 2025 and 2026 protocol versions), the FileManager and a container's command tool."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from click.testing import CliRunner, Result
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from workspacefs.cli import main

pytestmark = pytest.mark.anyio
_ids = itertools.count()


@pytest.fixture
def root(fast_tmp: Path) -> Path:
    made = fast_tmp / f"policy-surface-{next(_ids)}"
    made.mkdir()
    return made


def _url(root: Path) -> str:
    return f"file://{root}?snapshot_dir={root.parent / (root.name + '-snaps')}"


# --- CLI -----------------------------------------------------------------------------------------------------


def cli(root: Path, *arguments: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env=env).invoke(main, [*arguments, "--fs", _url(root)], input=stdin, catch_exceptions=False)


def test_the_cli_applies_the_default_policy_and_refuses_without_a_terminal(root: Path) -> None:
    refused = cli(root, "write", ".git/hooks/pre-commit", stdin=b"evil")
    assert refused.exit_code == 5 and "needs" not in refused.stdout
    assert "a person must approve" in refused.stderr or "approval" in refused.stderr
    assert not (root / ".git").exists()
    (root / ".env").write_text("TOKEN=secret\n")
    secret = cli(root, "cat", ".env")
    assert secret.exit_code == 5 and "secret" not in secret.stdout
    assert cli(root, "write", "ok.txt", stdin=b"fine").exit_code == 0


def test_the_cli_takes_a_policy_file_or_none(root: Path, tmp_path: Path) -> None:
    rules = tmp_path / "policy.toml"
    rules.write_text('include_default = false\n[[rules]]\naction = "deny"\noperations = ["write"]\npattern = "*.csv"\n')
    denied = cli(root, "write", "data/x.csv", "--policy", str(rules), stdin=b"a,b")
    assert denied.exit_code == 5 and "*.csv" in denied.stderr
    assert cli(root, "write", "AGENTS.md", "--policy", str(rules), stdin=b"x").exit_code == 0  # no default rules
    assert cli(root, "write", ".bashrc", "--policy", "none", stdin=b"x").exit_code == 0
    from_env = cli(root, "write", ".zshrc", stdin=b"x", env={"WORKSPACEFS_POLICY": "none"})
    assert from_env.exit_code == 0
    broken = tmp_path / "broken.json"
    broken.write_text('{"rules": [{"action": "sometimes"}]}')
    bad = cli(root, "ls", "--policy", str(broken))
    assert bad.exit_code == 6 and "action" in bad.stderr


# --- MCP -----------------------------------------------------------------------------------------------------


def _command(fs_url: str) -> StdioServerParameters:
    env = {"PYTHONUNBUFFERED": "1", "HOME": os.environ.get("HOME", "/root"), "PATH": os.environ.get("PATH", "")}
    return StdioServerParameters(command=sys.executable, args=["-m", "workspacefs", "mcp", "--fs", fs_url], env=env)


def _elicitation(answers: list[bool], asked: list[str]) -> Any:
    async def answer(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": answers.pop(0)})

    return answer


@asynccontextmanager
async def legacy(fs_url: str, elicitation: Any = None) -> AsyncIterator[ClientSession]:
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(_command(fs_url), errlog=errlog) as (read, write),
            ClientSession(read, write, elicitation_callback=elicitation) as session,
        ):
            await session.initialize()
            yield session


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_mcp_asks_by_elicitation_on_2025_protocols(root: Path) -> None:
    asked: list[str] = []
    async with legacy(_url(root), _elicitation([True, False], asked)) as session:
        allowed = await session.call_tool("write_file", {"path": "CLAUDE.md", "content": "be careful\n"})
        assert not allowed.is_error, _text(allowed)
        declined = await session.call_tool("write_file", {"path": ".github/workflows/ci.yml", "content": "x"})
        assert declined.is_error and "the user declined" in _text(declined)
    assert (root / "CLAUDE.md").read_text() == "be careful\n" and not (root / ".github").exists()
    assert len(asked) == 2 and "CLAUDE.md" in asked[0] and "write" in asked[0]


async def test_mcp_without_elicitation_refuses_and_says_why(root: Path) -> None:
    async with legacy(_url(root)) as session:
        result = await session.call_tool("write_file", {"path": ".vscode/tasks.json", "content": "{}"})
        assert result.is_error and "no one was there to approve it" in _text(result)
        assert (result.meta or {}).get("workspacefs/error_code") == "policy_denied"
    assert not (root / ".vscode").exists()


async def test_mcp_asks_through_an_input_request_on_the_2026_protocol(root: Path) -> None:
    asked: list[str] = []
    async with Client(_command(_url(root)), elicitation_callback=_elicitation([True, False], asked)) as client:
        assert client.protocol_version == "2026-07-28"
        allowed = await client.call_tool("write_file", {"path": "AGENTS.md", "content": "rules\n"})
        assert not allowed.is_error, _text(allowed)
        declined = await client.call_tool("rm", {"path": "AGENTS.md"})
        assert declined.is_error and "the user declined" in _text(declined)
    assert (root / "AGENTS.md").read_text() == "rules\n" and len(asked) == 2
