"""The examples run, and do what they say."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_scripted_agent_fixes_the_bug_and_rolls_back_its_mistake(capsys: object) -> None:
    transcripts = load("scripted_agent").main()
    assert set(transcripts) == {"memory (OpenAI-shaped calls)", "host (Anthropic-shaped calls)"}
    for lines in transcripts.values():
        text = "\n".join(lines)
        assert "FAILED" not in text
        assert "+    return a + b" in text
        assert "Created '/workspace/tests/test_calc.py'" in text
        assert "Removed directory '/workspace/src'" in text
        assert "rolled back to the checkpoint" in text
        assert text.rstrip().splitlines()[-3] == "     2\t    return a + b"


def test_container_agent_fixes_its_program_and_restores_the_first_draft(capsys: object) -> None:
    from conftest import missing

    from workspacefs.testing._containers import busybox_image, podman_available

    if not podman_available():
        missing("Podman is not installed or does not answer (apt-get install podman runc)")
    text = "\n".join(load("container_agent").main([busybox_image()]))
    assert "run_command" in text.splitlines()[0]
    assert "Exit code 2." in text and "arithmetic syntax error" in text  # the first run fails
    assert "Exit code 0 (success).\nstdout:\nsum: 60" in text  # the fixed run passes
    assert "FAILED" not in text
    assert text.rstrip().endswith("numbers.txt\nsum.sh\n10\n20\n3O")  # back to the first draft, typo and all
