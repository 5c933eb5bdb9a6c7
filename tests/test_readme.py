"""The README quickstart runs, and is the same code as examples/quickstart.py."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _quickstart() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "README has no python block under '## Quickstart'"
    return match.group(1)


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
