"""Every ``>>>`` example in the package's docstrings runs and prints what it shows, and every code example
in a docstring is a ``>>>`` one (so none can go stale untested)."""

from __future__ import annotations

import ast
import doctest
import importlib
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "workspacefs"


def _module_name(source: Path) -> str:
    parts = source.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = sorted(
    source
    for source in PACKAGE.rglob("*.py")
    if "migrations" not in source.parts and source.name != "__main__.py"  # Alembic runs env.py on import
)
WITH_EXAMPLES = [_module_name(source) for source in SOURCES if ">>>" in source.read_text(encoding="utf-8")]


def test_the_package_has_docstring_examples() -> None:
    assert {"workspacefs.asyncfs", "workspacefs.tools._sets", "workspacefs.tools._dispatch"} <= set(WITH_EXAMPLES)
    assert "workspacefs.testing" in WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    module = importlib.import_module(name)
    tests = [test for test in doctest.DocTestFinder(exclude_empty=True).find(module, name) if test.examples]
    assert tests, f"{name} has '>>>' in its source but no docstring example doctest can find"
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test, out=report.append)
    summary = runner.summarize(verbose=False)
    assert summary.attempted > 0
    assert summary.failed == 0, "".join(report)


_LITERAL_BLOCK = re.compile(r"::\s*\n\s*\n?(?P<indent>[ \t]+)\S")
"""A reStructuredText literal block (``Example::`` and an indented block): code that doctest never runs."""


def test_every_code_example_in_a_docstring_is_a_doctest() -> None:
    untested = []
    for source in SOURCES:
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                docstring = ast.get_docstring(node, clean=True) or ""
                if _LITERAL_BLOCK.search(docstring):
                    untested.append(f"{_module_name(source)}:{getattr(node, 'name', '<module>')}")
    assert not untested, f"write these examples as '>>>' doctests: {untested}"


def test_the_literal_block_check_can_fail() -> None:
    assert _LITERAL_BLOCK.search("A factory::\n\n    class Test(Suite):\n        ...")
    assert not _LITERAL_BLOCK.search("Use ``fs.read``: it returns a result.")
