"""The agent-framework adapters share one bridge: its tools, schemas and messages are the tool layer's own.

This module holds what every framework's end-to-end test uses — the workspaces (memory, a host directory,
SQLite), the scripted task, and the check of the files it leaves — plus the rules every adapter keeps: an
install hint when its framework is missing, and no import of an integration from the core.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import missing

from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem, ToolContext, dispatch, tools_for
from workspacefs.backends.container import ContainerSandbox
from workspacefs.integrations._toolbridge import bridge_tools
from workspacefs.protocol import Filesystem
from workspacefs.testing._containers import busybox_image, podman_available
from workspacefs.tools import NATIVE_TOOLS, openai_strict_schema, portable_schema

APP = "def main():\n    return 1\n"
TODO = "- ship it\n"

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"path": "src/app.py", "content": APP}),
    ("edit_file", {"path": "src/app.py", "old_string": "return 1", "new_string": "return 2"}),
    ("write_file", {"path": "notes/todo.md", "content": TODO}),
    ("read_file", {"path": "src/app.py"}),
    ("grep", {"pattern": "return|ship"}),
    ("read_file", {"path": "missing.py"}),  # a model's mistake: a message to act on, never an exception
    ("edit_file", {"path": "notes/todo.md", "old_string": "no such text", "new_string": "x"}),
]
"""The task every framework runs: write, edit, write, read, grep, and two mistakes."""


README = Path(__file__).resolve().parent.parent / "README.md"


def readme_block(subsection: str) -> str:
    """The one ``py`` block under ``### <subsection>`` of the README's "Agent frameworks" (each framework's test
    runs it: the README's own runner takes one ``python`` block per ``##`` section)."""
    section = README.read_text(encoding="utf-8").split("\n## Agent frameworks\n", 1)[1].split("\n## ", 1)[0]
    part = section.split(f"\n### {subsection}\n", 1)[1].split("\n### ", 1)[0]
    found = re.findall(r"^```py\n(.*?)^```", part, re.M | re.S)
    assert len(found) == 1, f"README should have one py block under '### {subsection}'"
    return str(found[0])


README_WORKSPACE = "sqlite:///workspace.db?session=ticket-42"
"""The workspace the README's framework examples open."""


def run_readme_block(subsection: str, where: Path, monkeypatch: pytest.MonkeyPatch, **scope: Any) -> dict[str, Any]:
    """Run a README block in ``where`` as a user would; its globals. The database is named by its absolute path:
    ``SqlStore`` remembers migrated databases by URL, and a relative one means another file in each directory."""
    monkeypatch.chdir(where)
    code = readme_block(subsection)
    assert README_WORKSPACE in code
    code = code.replace(README_WORKSPACE, readme_workspace(where))
    namespace: dict[str, Any] = {"__name__": "__readme__", **scope}
    exec(compile(code, str(README), "exec"), namespace)
    return namespace


def readme_workspace(where: Path) -> str:
    """The README's workspace URL, for the database in ``where``."""
    return f"sqlite:///{where / 'workspace.db'}?session=ticket-42"


def expected_messages() -> list[str]:
    """What the tool layer itself answers to :data:`SCRIPT`: each framework must pass these on word for word."""
    context = ToolContext(filesystem=InMemoryFilesystem())
    return [dispatch(name, arguments, context).message for name, arguments in SCRIPT]


@dataclass
class Workspace:
    """A filesystem under test and a way to look at its files from outside the run."""

    kind: str
    fs: Filesystem
    reopen: Any  # () -> Filesystem: the same files through a new object (a new connection, the host's own view)


@pytest.fixture(params=["memory", "host", "sqlite"])
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    """A fresh workspace of each kind the framework tests run on."""
    if request.param == "memory":
        memory = InMemoryFilesystem()
        yield Workspace("memory", memory, lambda: memory)
    elif request.param == "host":
        root = tmp_path / "workspace"
        root.mkdir()
        yield Workspace("host", HostFilesystem(root), lambda: HostFilesystem(root, read_only=True))
    else:
        url = f"sqlite:///{tmp_path / 'workspace.db'}"
        sql = SqlFilesystem(url, "agent-1")
        opened: list[Filesystem] = []

        def reopen() -> Filesystem:
            opened.append(SqlFilesystem(url, "agent-1", read_only=True))
            return opened[-1]

        yield Workspace("sqlite", sql, reopen)
        for fs in (*opened, sql):
            fs.close()  # type: ignore[attr-defined]


EXEC_SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"path": "hello.sh", "content": "echo hello from $(pwd)\necho made > out.txt\n"}),
    ("run_command", {"command": "sh hello.sh && cat out.txt"}),
    ("grep", {"pattern": "made"}),
]
"""On a container workspace: write a script, run it inside the container, find what it wrote."""


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[ContainerSandbox]:
    """A Podman container workspace (a missing Podman fails the run where CI demands real services)."""
    if not podman_available():
        missing("Podman is not installed or does not answer (apt-get install podman runc)")
    with ContainerSandbox(busybox_image(), snapshot_strategy="copy", snapshot_dir=tmp_path / "snapshots") as opened:
        yield opened


def check_exec(sandbox: ContainerSandbox, messages: list[str]) -> None:
    """What :data:`EXEC_SCRIPT` answers and leaves: the command ran inside the container, in the workspace."""
    assert messages[1].startswith("$ sh hello.sh && cat out.txt\nExit code 0 (success).")
    assert "hello from /workspace\nmade" in messages[1]
    assert "out.txt" in messages[2] and "hello.sh" in messages[2]
    assert (Path(sandbox.host_dir) / "out.txt").read_text() == "made\n"


def check_files(workspace: Workspace) -> None:
    """The files :data:`SCRIPT` leaves, seen through a new view of the workspace (and, on a host, on disk)."""
    seen = workspace.reopen()
    assert seen.read("src/app.py").content == "def main():\n    return 2\n"
    assert seen.read("notes/todo.md").content == TODO
    assert not seen.exists("missing.py")
    if workspace.kind == "host":
        assert (Path(seen.root) / "src" / "app.py").read_text() == "def main():\n    return 2\n"


def test_the_script_means_what_it_says() -> None:
    messages = expected_messages()
    assert messages[0] == "Created 'src/app.py': 2 lines, 25 B."
    assert "     2\t    return 2" in messages[3]
    assert "src/app.py" in messages[4] and "notes/todo.md" in messages[4]
    assert messages[5] == "'missing.py' does not exist. Use ls or glob to find the right path."
    assert messages[6].startswith("No change made to 'notes/todo.md'. old_string was not found.")


def test_the_bridge_offers_tools_for_with_their_own_schemas() -> None:
    fs = InMemoryFilesystem()
    bridged = bridge_tools(fs)
    assert [b.name for b in bridged] == [tool.name for tool in tools_for(fs)]
    for b in bridged:
        assert b.description == b.tool.description
        assert b.schema == portable_schema(b.tool.params)
        assert b.strict_schema == openai_strict_schema(b.tool.params)
    assert len({id(b.context) for b in bridged}) == 1  # one context: read-before-write spans the tools


def test_the_bridge_runs_the_script_with_the_tool_layers_messages(workspace: Workspace) -> None:
    by_name = {b.name: b for b in bridge_tools(workspace.fs)}
    assert [by_name[name](arguments) for name, arguments in SCRIPT] == expected_messages()
    check_files(workspace)


def test_the_bridge_runs_commands_where_the_workspace_can(sandbox: ContainerSandbox) -> None:
    by_name = {b.name: b for b in bridge_tools(sandbox.filesystem)}
    assert "run_command" in by_name
    check_exec(sandbox, [by_name[name](arguments) for name, arguments in EXEC_SCRIPT])


def test_the_bridge_picks_tools_by_name_and_refuses_unknown_ones() -> None:
    fs = InMemoryFilesystem()
    assert [b.name for b in bridge_tools(fs, tools=["read_file", "apply_patch"])] == ["read_file", "apply_patch"]
    assert [b.name for b in bridge_tools(fs, read_only=True)] == [t.name for t in tools_for(fs, read_only=True)]
    with pytest.raises(ValueError, match="teleport"):
        bridge_tools(fs, tools=["teleport"])
    with pytest.raises(ValueError, match="apply_patch"):
        bridge_tools(InMemoryFilesystem(read_only=True), tools=["apply_patch"])
    assert {tool.name for tool in NATIVE_TOOLS} <= {b.name for b in bridge_tools(fs, tools=list(NATIVE_TOOLS))}


def test_a_call_outside_the_offered_set_is_a_message() -> None:
    reader = bridge_tools(InMemoryFilesystem(), tools=["read_file"])[0]
    result = reader.run({"path": "a.txt", "bogus": 1})
    assert not result.success and "Invalid arguments for read_file" in result.message
    assert not reader.run("{not json").success


MODULES = {
    "openai_agents": ("agents", "openai-agents"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
    "langchain": ("langchain_core", "langchain"),
    "claude_agent_sdk": ("claude_agent_sdk", "claude-agent-sdk"),
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_missing_framework_names_the_extra_to_install(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    framework, extra = MODULES[module]
    name = f"workspacefs.integrations.{module}"
    for loaded in [m for m in sys.modules if m == framework or m.startswith(framework + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.setitem(sys.modules, framework, None)  # what an absent package looks like to import
    monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(ImportError, match=rf"pip install 'workspacefs\[{extra}\]'"):
        importlib.import_module(name)


def test_the_core_loads_no_integration_and_no_framework() -> None:
    code = (
        "import sys, workspacefs, workspacefs.tools, workspacefs.agent, workspacefs.mcp, workspacefs.cli\n"
        "from workspacefs import InMemoryFilesystem\n"
        "InMemoryFilesystem().write('a', 'b')\n"
        "names = ('workspacefs.integrations', 'agents', 'pydantic_ai', 'langchain', 'claude_agent_sdk')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in names or m.startswith(names[0])))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout
