"""What a new user reads is true and complete: no project history in user-facing text, every environment
variable in the README's table, shell completion that works, and ``mcp --help`` naming every URL form."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from workspacefs.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
EXECUTABLE = Path(sys.executable).parent / "workspacefs"
ORIGIN = re.compile(r"\bseeds? 0\d\d", re.IGNORECASE)
"""How the specifications the project grew from were named; a user has never seen them."""


def _commands(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))


def test_user_facing_text_describes_the_product_not_where_it_came_from(tmp_path: Path) -> None:
    from workspacefs.backends.sql import SqlStore
    from workspacefs.server import create_app
    from workspacefs.tools import ALL_TOOLS, EXEC_TOOLS, NATIVE_TOOLS, SNAPSHOT_TOOLS, to_anthropic_tools

    store = SqlStore(f"sqlite:///{tmp_path / 'service.db'}")
    try:
        texts = {"/openapi.json": json.dumps(create_app(store).openapi())}
    finally:
        store.close()
    texts["README.md"] = README.read_text(encoding="utf-8")
    tools = (*ALL_TOOLS, *SNAPSHOT_TOOLS, *EXEC_TOOLS, *NATIVE_TOOLS)
    texts["tool descriptions"] = json.dumps(to_anthropic_tools(tools))
    runner = CliRunner()
    for path in _commands(main):
        shown = runner.invoke(main, [*path, "--help"], terminal_width=200)
        assert shown.exit_code == 0, shown.output
        texts[" ".join(("workspacefs", *path, "--help"))] = shown.output
    assert len(texts) > 20 and all(texts.values())
    assert "Session" in texts["/openapi.json"] and "Usage:" in texts["workspacefs mcp --help"]
    leaks = {where: ORIGIN.findall(text) for where, text in texts.items() if ORIGIN.search(text)}
    assert not leaks, leaks


# --- environment variables --------------------------------------------------------------------------------

_READS = [
    re.compile(r"environ\.get\(\s*[\"']([A-Z_][A-Z0-9_]*)[\"']"),
    re.compile(r"environ\[\s*[\"']([A-Z_][A-Z0-9_]*)[\"']\s*\]"),
    re.compile(r"[\"']([A-Z_][A-Z0-9_]*)[\"']\s+in\s+os\.environ"),
    re.compile(r"getenv\(\s*[\"']([A-Z_][A-Z0-9_]*)[\"']"),
    re.compile(r"envvar\s*=\s*[\"']([A-Z_][A-Z0-9_]*)[\"']"),
    re.compile(r"\b(WORKSPACEFS_[A-Z0-9_]+)\b"),  # any of our own names, wherever it is spelled
]


def variables_read() -> set[str]:
    """Every environment variable the package reads, and the ``WORKSPACEFS_…`` ones its tests and CI read
    (tests also pass ``HOME`` and ``PATH`` on to the processes they start: not settings of ours)."""
    found: set[str] = set()
    for source in (ROOT / "src").rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        for pattern in _READS:
            found.update(pattern.findall(text))
    for source in [*(ROOT / "tests").rglob("*.py"), ROOT / ".ci" / "run", ROOT / "Makefile"]:
        if source.name != Path(__file__).name:  # this module names variables only to test them
            found.update(_READS[-1].findall(source.read_text(encoding="utf-8")))
    return found


def documented_variables() -> dict[str, str]:
    """The README's environment variable table: name -> the rest of its row."""
    section = README.read_text(encoding="utf-8").split("## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \|(.*)$", section, re.MULTILINE)
    assert rows, "README has no table under '## Environment variables'"
    return dict(rows)


def test_the_scanner_finds_what_the_code_reads() -> None:
    found = variables_read()
    assert {"WORKSPACEFS_FS", "WORKSPACEFS_POLICY", "XDG_DATA_HOME", "XDG_CACHE_HOME", "DOCKER_HOST"} <= found
    assert {"WORKSPACEFS_REQUIRE_REAL_SERVICES", "WORKSPACEFS_TEST_POSTGRES_URL"} <= found


def test_every_environment_variable_is_in_the_readme_table() -> None:
    missing = variables_read() - set(documented_variables())
    assert not missing, f"add these to the README's environment variable table: {sorted(missing)}"


def test_the_readme_table_lists_only_variables_something_reads() -> None:
    read_elsewhere = {
        "_WORKSPACEFS_COMPLETE",  # click's, tested below
        "TMPDIR",  # Python's tempfile, where container workspaces are made
        "GIT_*",  # removed from git's environment (host snapshots)
    }
    stale = set(documented_variables()) - variables_read() - read_elsewhere
    assert not stale, f"nothing reads these any more: {sorted(stale)}"


def test_the_data_and_cache_defaults_are_where_the_table_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workspacefs.backends.host._temps import cache_dir_for
    from workspacefs.backends.sql import default_database

    table = documented_variables()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_database() == f"sqlite:///{tmp_path / 'data' / 'workspacefs' / 'workspace.db'}"
    assert "$XDG_DATA_HOME/workspacefs/workspace.db" in table["XDG_DATA_HOME"]
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_database() == f"sqlite:///{tmp_path / 'home' / '.local' / 'share' / 'workspacefs' / 'workspace.db'}"
    assert "`~/.local/share`" in table["XDG_DATA_HOME"]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert cache_dir_for(str(tmp_path), "snapshots").parent == (tmp_path / "cache" / "workspacefs" / "snapshots")
    assert "$XDG_CACHE_HOME/workspacefs/{snapshots,writers}" in table["XDG_CACHE_HOME"]


def test_the_variables_of_the_cli_work_as_the_table_says(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "hello.txt").write_text("hi\n")
    env = {**os.environ, "WORKSPACEFS_FS": f"file://{tmp_path / 'ws'}", "WORKSPACEFS_POLICY": "none"}
    listed = subprocess.run([str(EXECUTABLE), "ls"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert listed.returncode == 0 and listed.stdout.split() == ["hello.txt"], listed.stderr
    env["WORKSPACEFS_POLICY"] = str(tmp_path / "no-such-policy.toml")
    refused = subprocess.run([str(EXECUTABLE), "ls"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert refused.returncode != 0 and "no-such-policy.toml" in refused.stderr
    env["WORKSPACEFS_DB"] = f"sqlite:///{tmp_path / 'service.db'}"
    made = subprocess.run(
        [str(EXECUTABLE), "token", "create", "--agent", "a"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0 and (tmp_path / "service.db").is_file(), made.stderr
    with socket.socket() as taken:  # WORKSPACEFS_HOST and _PORT reach serve: it finds this port busy
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env.update(WORKSPACEFS_HOST="127.0.0.1", WORKSPACEFS_PORT=str(port))
        busy = subprocess.run(
            [str(EXECUTABLE), "serve"], env=env, capture_output=True, text=True, timeout=120, check=False
        )
    assert busy.returncode == 7 and f"127.0.0.1:{port}" in busy.stderr, busy.stderr


# --- shell completion -------------------------------------------------------------------------------------


def _completion_lines() -> dict[str, str]:
    section = README.read_text(encoding="utf-8").split("## Shell completion\n", 1)[1].split("\n## ", 1)[0]
    lines = re.findall(r"_WORKSPACEFS_COMPLETE=(\w+)_source workspacefs", section)
    return {shell: f"_WORKSPACEFS_COMPLETE={shell}_source workspacefs" for shell in lines}


def test_the_readme_documents_completion_for_bash_zsh_and_fish() -> None:
    assert set(_completion_lines()) == {"bash", "zsh", "fish"}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_documented_completion_command_prints_a_script(shell: str) -> None:
    env = {**os.environ, "_WORKSPACEFS_COMPLETE": f"{shell}_source"}
    done = subprocess.run([str(EXECUTABLE)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "_WORKSPACEFS_COMPLETE" in done.stdout and "workspacefs" in done.stdout
    assert {"bash": "complete -o nosort -F", "zsh": "compdef", "fish": "complete --no-files"}[shell] in done.stdout


def test_the_bash_script_completes_commands_in_a_real_bash() -> None:
    """Source what ``bash_source`` prints into bash and complete ``workspacefs snapshot <TAB>``."""
    script = (
        'eval "$(_WORKSPACEFS_COMPLETE=bash_source workspacefs)"\n'
        'COMP_WORDS=(workspacefs snapshot ""); COMP_CWORD=2\n'
        "_workspacefs_completion workspacefs\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{EXECUTABLE.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    snapshot = main.commands["snapshot"]
    assert isinstance(snapshot, click.Group)
    assert set(done.stdout.split()) == set(snapshot.commands)


# --- MCP ----------------------------------------------------------------------------------------------------


def test_mcp_help_lists_every_url_form_open_filesystem_accepts() -> None:
    from workspacefs.open import registered_backends

    built_in = sorted(
        scheme
        for scheme, spec in registered_backends().items()
        if getattr(spec.target, "__module__", "") == "workspacefs.open"
    )
    assert {"memory", "file", "sqlite", "postgresql", "podman", "docker"} <= set(built_in)
    shown = CliRunner().invoke(main, ["mcp", "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    for scheme in built_in:
        assert f"{scheme}://" in shown.output, scheme
    assert "sqlite:///file.db?session=ID" in shown.output and "postgresql://user@host/db?session=ID" in shown.output
    assert "claude mcp add workspacefs -- /abs/path/.venv/bin/workspacefs mcp --fs file:///abs/dir" in shown.output
