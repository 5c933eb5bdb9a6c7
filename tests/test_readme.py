"""The README quickstart runs, and is the same code as examples/quickstart.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _first_block(heading: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"README has no python block under {heading!r}"
    return match.group(1)


def _quickstart() -> str:
    return _first_block("## Quickstart")


def test_readme_errors_example_runs() -> None:
    code = _first_block("## Errors, capabilities and compare-and-set")
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})


def test_readme_native_tools_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code = _first_block("## The models' own file tools")
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == [
        "File created successfully at: /repo/app.py",
        "completed",
        "Success. Updated the following files:",
    ]


def test_readme_quickstart_runs(capsys: object) -> None:
    code = _quickstart()
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})


def test_readme_quickstart_matches_the_example_file() -> None:
    example = (ROOT / "examples" / "quickstart.py").read_text(encoding="utf-8")
    assert _quickstart().strip() in example


def test_readme_names_the_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in readme and "make test" in ci
    assert "make run" in readme


def test_make_run_starts_the_service() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    run_target = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "workspacefs serve" in run_target


def test_readme_service_example_runs_against_a_live_service(fast_tmp: Path) -> None:
    from workspacefs.testing._service import running_service

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The workspace service", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "README has no python block under '## The workspace service'"
    with running_service(f"sqlite:///{fast_tmp / 'readme-service.db'}") as service:
        scope = {"__name__": "__readme__", "base_url": service.url, "token": service.token}
        exec(compile(match.group(1), "README.md", "exec"), scope)
        assert scope["saved"].status_code == 200
        assert scope["hits"]["data"][0]["path"] == "/src/main.rs"
        assert scope["snap"]["tag"] == "v1"


def _section_block(title: str, language: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(f"## {title}", 1)[1]
    match = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert match, f"README has no {language} block under '## {title}'"
    return match.group(1)


_VOLATILE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def test_readme_terminal_transcript_is_what_the_cli_prints(tmp_path: Path) -> None:
    """Run every ``$`` line of the transcript in one shell and compare what each prints."""
    import subprocess
    import sys

    commands: list[str] = []
    expected: list[list[str]] = []
    for line in _section_block("The command line", "console").splitlines():
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


def test_readme_mcp_client_configuration_starts_a_working_server(tmp_path: Path) -> None:
    import json
    import sys

    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    config = json.loads(_section_block("MCP: the tools for any agent client", "json"))
    server = config["mcpServers"]["workspace"]
    assert server["command"] == "workspacefs"
    args = [arg.replace("file:///home/me/agent-workspace", f"file://{tmp_path}") for arg in server["args"]]
    (tmp_path / "hello.txt").write_text("hi\n")
    command = str(Path(sys.executable).parent / server["command"])

    async def use() -> list[str]:
        parameters = StdioServerParameters(command=command, args=args)
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("read_file", {"path": "hello.txt"})
            assert not result.is_error
            return [tool.name for tool in (await session.list_tools()).tools]

    assert "read_file" in anyio.run(use)


def test_readme_container_example_runs() -> None:
    from conftest import missing

    from workspacefs.testing._containers import busybox_image, podman_available

    if not podman_available():
        missing("Podman is not installed or does not answer (apt-get install podman runc)")
    code = _first_block("## A container to run code in").replace("localhost/tools:1", busybox_image())
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})


def test_readme_guard_rails_example_runs(monkeypatch: object) -> None:
    code = _first_block("## Guard rails")
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})


def test_readme_lists_every_pattern_the_default_policy_protects() -> None:
    from workspacefs.policy import default_rules

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("**What the default protects.**", 1)[1].split("**How rules match.**", 1)[0]
    listed = set(re.findall(r"`([^`]+)`", section))
    assert {rule.pattern for rule in default_rules()} <= listed
