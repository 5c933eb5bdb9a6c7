"""The core install (no extras) works: the package, the command, and a clear hint where an extra is needed.

CI also installs the bare package in a fresh virtualenv (``.ci/run``); this test runs on every machine by
hiding the optional dependencies from a subprocess, so a module-level import of an extra fails here first.
"""

from __future__ import annotations

import subprocess
import sys

OPTIONAL = ("sqlalchemy", "alembic", "psycopg", "fastapi", "starlette", "uvicorn", "mcp", "mcp_types", "fsspec")

PRELUDE = f"""
import sys
for name in {OPTIONAL!r}:
    sys.modules[name] = None  # importing it now raises ImportError, as on a machine without the extra
"""


def run_without_extras(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, timeout=120, check=False
    )


def run_command_without_extras(*arguments: str) -> subprocess.CompletedProcess[str]:
    code = f"from workspacefs.cli import main\nsys.argv = ['workspacefs', *{list(arguments)!r}]\nmain()"
    return run_without_extras(code)


def test_the_package_imports_without_extras() -> None:
    done = run_without_extras(
        "import workspacefs\n"
        "fs = workspacefs.open_filesystem('memory://')\n"
        "fs.write('a.txt', 'x')\n"
        "print(workspacefs.dispatch('read_file', {'path': 'a.txt'}, workspacefs.ToolContext(fs)).success)\n"
        "assert 'sqlalchemy' not in sys.modules or sys.modules['sqlalchemy'] is None\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_the_command_runs_without_extras() -> None:
    assert run_command_without_extras("--help").returncode == 0
    listed = run_command_without_extras("ls", "--fs", "memory://")
    assert listed.returncode == 0, listed.stderr
    helped = run_command_without_extras("mcp", "--help")
    assert helped.returncode == 0 and "MCP" in helped.stdout, helped.stderr


def test_extras_are_named_when_missing() -> None:
    sql = run_command_without_extras("ls", "--fs", "sqlite:////tmp/never.db?session=x")
    assert sql.returncode == 1 and "workspacefs[sql]" in sql.stderr and "Traceback" not in sql.stderr, sql.stderr
    served = run_command_without_extras("serve")
    assert served.returncode == 1 and "workspacefs[server]" in served.stderr, served.stderr
    mcp = run_command_without_extras("mcp", "--fs", "memory://")
    assert mcp.returncode == 1 and "workspacefs[mcp]" in mcp.stderr, mcp.stderr
    assert "Traceback" not in served.stderr + mcp.stderr
