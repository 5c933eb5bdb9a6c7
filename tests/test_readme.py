"""Every code example in the README runs, prints what it says, and the commands it names exist.

Each ```python block runs in a fresh working directory with the real backends. The few that need
something more are run by their own tests below (``NEEDS``): a live service, Podman, PostgreSQL, pytest.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _python_blocks() -> list[tuple[str, str]]:
    """``(section, code)`` of every python block in order; the section is the ``##`` heading above it."""
    heading = ""
    blocks: list[tuple[str, str]] = []
    for match in re.finditer(r"^## ([^\n]*)$|^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S):
        if match.group(1) is not None:
            heading = match.group(1)
        else:
            blocks.append((heading, match.group(2)))
    return blocks


BLOCKS = _python_blocks()

NEEDS = {
    "A container to run code in": "Podman",
    "SQLite and PostgreSQL": "PostgreSQL",
    "The workspace service": "a running service",
    "What is here": "pytest, on a test module of its own",
}
"""Blocks that need more than a working directory; each has its own test below."""

PRINTS: dict[str, list[str]] = {
    "History: who changed what, undo, and live changes": ["write agent-7 modified", "draft", "deleted"],
    "Quickstart": [
        "['notes', 'src']",
        "    print('hello')",
        "['src/app.py']",
        "src/app.py:2:     print('hello')",
        "FilesystemDiff(added=(), modified=('src/app.py',), deleted=('notes/todo.md',), unchanged_count=0)",
        "262144",
    ],
    "A host directory, sandboxed": ["print('hello')"],
    "Several backends in one tree": [
        "['docs', 'memories', 'scratch']",
        "['docs/guide.md', 'memories/rules.md']",
        "Ask the user first.",
    ],
    "Tools for a model": ["['snapshot', 'restore', 'diff']", "True Created '/workspace/a.py': 1 line, 6 B."],
    "The models' own file tools": [
        "File created successfully at: /repo/app.py",
        "completed",
        "Success. Updated the following files:",
        "A /repo/NOTES.md",
    ],
    "Guard rails: a path policy, quotas, and undo that costs what it changes": ["policy_denied"],
    "Forks and merging": ["True ('plan.md',)", "[('plan.md', 'content')]"],
    "Async, documents by offset, and moving workspaces": ["b'started\\n'", "# Guide", "# Guide"],
    "pandas, DuckDB and other fsspec tools": ["8", "['/data/prices.csv', '/data/prices.parquet']"],
    "Errors, capabilities and compare-and-set": [
        "Capabilities(snapshots=True, cheap_snapshots=True, persistent=False, fork=True, merge=True, "
        "conditional_writes=True, file_read_only=False, host_directory=False, exec=False, watch=True, history=True)"
    ],
}
"""What each block prints, line for line (the comments beside its ``print`` calls say the same)."""


def _block(section: str) -> str:
    found = [code for heading, code in BLOCKS if heading == section]
    assert len(found) == 1, f"README should have one python block under '## {section}', has {len(found)}"
    return found[0]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working directory, with the user's data and cache directories inside it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / "cache"))
    return tmp_path


def _run(code: str, **scope: object) -> tuple[list[str], dict[str, object]]:
    """Run ``code`` as the README shows it; what it printed, and its globals."""
    namespace: dict[str, object] = {"__name__": "__readme__", **scope}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(README), "exec"), namespace)
    return printed.getvalue().splitlines(), namespace


def test_the_readme_has_python_examples_and_every_special_one_exists() -> None:
    headings = [heading for heading, _ in BLOCKS]
    assert len(BLOCKS) >= 10
    assert set(NEEDS) <= set(headings), "a section in NEEDS lost its example (or was renamed)"
    assert set(PRINTS) <= set(headings) - set(NEEDS)


@pytest.mark.parametrize("section", [heading for heading, _ in BLOCKS if heading not in NEEDS])
def test_readme_python_example_runs_and_prints_what_it_says(section: str, workdir: Path) -> None:
    printed, _ = _run(_block(section))
    assert printed == PRINTS.get(section, []), f"'## {section}' printed {printed}; its comments must say so"


def test_readme_quickstart_matches_the_example_file() -> None:
    example = (ROOT / "examples" / "quickstart.py").read_text(encoding="utf-8")
    assert _block("Quickstart").strip() in example


def test_readme_sql_example_runs_on_sqlite_and_a_real_postgresql(workdir: Path, postgres_url: str) -> None:
    code = _block("SQLite and PostgreSQL")
    placeholder = "postgresql://user@db.internal/workspaces"
    assert placeholder in code
    printed, scope = _run(code.replace(placeholder, postgres_url))
    assert printed == ["alice's notes"]
    assert (workdir / "workspace.db").is_file()  # a relative sqlite:/// path is in the working directory
    assert scope["bob"].read("notes.md").content == "bob's notes\n"  # type: ignore[attr-defined]


def test_readme_service_example_runs_against_a_live_service(fast_tmp: Path) -> None:
    from workspacefs.testing._service import running_service

    with running_service(f"sqlite:///{fast_tmp / 'readme-service.db'}") as service:
        printed, scope = _run(_block("The workspace service"), base_url=service.url, token=service.token)
    assert printed == ["fn main() { run() }"]
    assert scope["session"] == "ticket-4711"  # the id the example chose
    assert scope["saved"].status_code == 200  # type: ignore[attr-defined]
    match = scope["hits"]["data"][0]["matches"][0]  # type: ignore[index]
    assert (match["path"], match["line_content"], match["line"]) == ("/src/main.rs",) + ("fn main() { run() }",) * 2
    assert scope["snap"]["tag"] == "v1"  # type: ignore[index]


def test_readme_container_example_runs() -> None:
    from conftest import missing

    from workspacefs.testing._containers import busybox_image, podman_available

    if not podman_available():
        missing("Podman is not installed or does not answer (apt-get install podman runc)")
    code = _block("A container to run code in").replace("localhost/tools:1", busybox_image())
    printed, _ = _run(code)
    assert printed == ["0 hello", ""]  # the command's own newline, then print's


def test_readme_third_party_suite_passes_when_pytest_runs_it(tmp_path: Path) -> None:
    """The conformance-suite example is a real test module: pytest collects it and every test passes."""
    (tmp_path / "test_my_backend.py").write_text(_block("What is here"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "test_my_backend.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed and int(passed.group(1)) >= 300, done.stdout[-500:]


def test_readme_names_the_commands_ci_runs() -> None:
    readme = README.read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in readme and "make test" in ci
    assert "make run" in readme


def test_make_run_starts_the_service() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    run_target = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "workspacefs serve" in run_target


def _section_blocks(title: str, language: str) -> list[str]:
    section = README.read_text(encoding="utf-8").split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    found = re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert found, f"README has no {language} block under '## {title}'"
    return found


_VOLATILE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def test_readme_terminal_transcript_is_what_the_cli_prints(tmp_path: Path) -> None:
    """Run every ``$`` line of the transcript in one shell and compare what each prints."""
    commands: list[str] = []
    expected: list[list[str]] = []
    for line in _section_blocks("The command line", "console")[0].splitlines():
        if line.startswith("$ "):
            commands.append(line[2:])
            expected.append([])
        else:
            expected[-1].append(line)
    marker = "@@@ next command @@@"
    script = "\n".join(f"echo '{marker}'\n{{ {command} ; }} 2>&1" for command in commands)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    printed = done.stdout.split(marker + "\n")[1:]
    assert len(printed) == len(commands), done.stdout + done.stderr
    for command, want, got in zip(commands, expected, printed, strict=True):
        assert _VOLATILE.sub("<uuid>", got).splitlines() == [_VOLATILE.sub("<uuid>", w) for w in want], command


MCP = "MCP: the tools for any agent client"
EXECUTABLE = "/home/me/src/workspacefs/.venv/bin/workspacefs"
WORKSPACE = "file:///home/me/agent-workspace"


def test_readme_mcp_setups_use_absolute_paths_and_agree() -> None:
    """The JSON configuration and the ``claude mcp add`` line start the same absolute command."""
    server = json.loads(_section_blocks(MCP, "json")[0])["mcpServers"]["workspacefs"]
    assert server["command"] == EXECUTABLE and Path(server["command"]).is_absolute()
    claude = [line for block in _section_blocks(MCP, "sh") for line in block.splitlines() if "claude mcp add" in line]
    assert len(claude) == 1
    words = shlex.split(claude[0])
    assert words[:4] == ["claude", "mcp", "add", "workspacefs"] and words[4] == "--"
    assert words[5:] == [server["command"], *server["args"]]
    assert WORKSPACE in server["args"]


def test_readme_mcp_client_configuration_starts_a_working_server(tmp_path: Path) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    server = json.loads(_section_blocks(MCP, "json")[0])["mcpServers"]["workspacefs"]
    command = server["command"].replace(EXECUTABLE, str(Path(sys.executable).parent / "workspacefs"))
    args = [arg.replace(WORKSPACE, f"file://{tmp_path}") for arg in server["args"]]
    (tmp_path / "hello.txt").write_text("hi\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def use() -> list[str]:
        parameters = StdioServerParameters(command=command, args=args, cwd=elsewhere)  # started from elsewhere
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("read_file", {"path": "hello.txt"})
            assert not result.is_error, result
            return [tool.name for tool in (await session.list_tools()).tools]

    assert {"read_file", "snapshot"} <= set(anyio.run(use))


def test_readme_lists_every_pattern_the_default_policy_protects() -> None:
    from workspacefs.policy import default_rules

    readme = README.read_text(encoding="utf-8")
    section = readme.split("**What the default protects.**", 1)[1].split("**How rules match.**", 1)[0]
    listed = set(re.findall(r"`([^`]+)`", section))
    assert {rule.pattern for rule in default_rules()} <= listed
