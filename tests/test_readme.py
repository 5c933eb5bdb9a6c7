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
