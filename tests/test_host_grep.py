"""Host grep with ripgrep picking candidates gives exactly what the shared engine gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import missing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workspacefs import HostFilesystem
from workspacefs.backends.host._ripgrep import Ripgrep, to_rust_regex
from workspacefs.search import GrepPattern

TREE: dict[str, bytes] = {
    "README.md": b"# Project\nSee docs/guide.md for the guide.\n",
    ".hidden/config.toml": b"[tool]\nname = 'hidden'\ncount = 42\n",
    ".gitignore": b"*.log\nbuild/\n",
    "debug.log": b"ERROR 2026-11-22 something failed\nINFO fine\n",
    "build/out.txt": b"built artifact with needle\n",
    "src/main.py": b"import os\n\ndef main():\n    print('needle in main')\n    return 0\n",
    "src/util.py": b"def util(x):\n\treturn x * 2  # tab indented\n",
    "src/unicode.txt": "caf\u00e9 na\u00efve \u00fcber \u03a9mega \u0661\u0662\u0663 digits\nsnake_case and CamelCase\n".encode(),
    "src/crlf.txt": b"windows line\r\nsecond needle\r\n",
    "src/latin1.txt": "caf\u00e9 needle latin-1\n".encode("latin-1"),
    "src/binary.bin": b"needle\x00\x01\x02binary",
    "src/late_nul.txt": b"needle early\n" + b"x" * 9000 + b"\x00\n",
    "src/long.txt": b"a" * 5000 + b" needle at the end of a long line\n",
    "src/empty.txt": b"",
    "deep/a/b/c/d/e.txt": b"deep needle\n",
    "spaces in name/file name.txt": b"needle with spaces\n",
    "100%/weird_[name].txt": b"needle weird\n",
}

PATTERNS = [
    "needle",
    "NEEDLE",
    "(?i)needle",
    r"\bneedle\b",
    r"\w+_\w+",
    r"\d+",
    r"\d{3}",
    r"[0-9]+",
    r"\s+needle",
    r"\S+@\S+",
    "^needle",
    "needle$",
    r"^\s*$",
    "^$",
    r"\Aneedle",
    r"end\z",
    "caf.",
    "caf\u00e9",
    "[\u00e9\u00ef]",
    r"\p{Greek}",
    r"[[:upper:]][[:lower:]]+",
    "import|return|print",
    "(foo|needle) (in|with)",
    "x{3,}",
    "a{4999}",
    r"\t",
    "\r$",
    r"[^\x00-\x7f]",
    r"[\w-]+\.md",
    r"(?m)^def \w+",
    ".",
    "",
    r"(\w)\1",
    r"(?<=in )main",
]


@pytest.fixture(scope="module")
def rg() -> Ripgrep:
    found = Ripgrep.find()
    if found is None:
        missing("ripgrep is not installed (pip install 'workspacefs[ripgrep]')")
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[tuple[HostFilesystem, HostFilesystem]]:
    root = tmp_path / "ws"
    for path, data in TREE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    with_rg = HostFilesystem(root, snapshot_dir=tmp_path / "s1", use_ripgrep=True)
    without = HostFilesystem(root, snapshot_dir=tmp_path / "s2", use_ripgrep=False)
    yield with_rg, without
    with_rg.close()
    without.close()


@pytest.mark.parametrize("pattern", PATTERNS)
def test_ripgrep_and_the_shared_engine_agree(
    workspace: tuple[HostFilesystem, HostFilesystem], rg: Ripgrep, pattern: str
) -> None:
    with_rg, without = workspace
    for path, glob in ((".", None), ("src", None), (".", "*.txt"), (".", "src/*.py")):
        assert with_rg.grep(pattern, path=path, glob=glob) == without.grep(pattern, path=path, glob=glob)


def test_ripgrep_really_narrows_the_candidates(workspace: tuple[HostFilesystem, HostFilesystem], rg: Ripgrep) -> None:
    with_rg, _ = workspace
    candidates = rg.candidates(with_rg.root, GrepPattern("needle"), "")
    assert candidates is not None
    assert "README.md" not in candidates
    assert "src/main.py" in candidates and "build/out.txt" in candidates and ".hidden/config.toml" not in candidates


def test_ripgrep_honours_max_matches_order(workspace: tuple[HostFilesystem, HostFilesystem], rg: Ripgrep) -> None:
    with_rg, without = workspace
    for limit in (0, 1, 3, 5):
        assert with_rg.grep("needle", max_matches=limit) == without.grep("needle", max_matches=limit)


_ATOMS = st.sampled_from(
    ["a", "e", "n", ".", "\\w", "\\d", "\\s", "\\b", "[a-e]", "[^a]", "(?i)N", "^", "$", "+", "*", "?", " ", "|"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.lists(_ATOMS, min_size=1, max_size=5).map("".join))
def test_random_patterns_agree(workspace: tuple[HostFilesystem, HostFilesystem], rg: Ripgrep, pattern: str) -> None:
    with_rg, without = workspace
    try:
        expected = without.grep(pattern)
    except ValueError:
        with pytest.raises(ValueError):
            with_rg.grep(pattern)
        return
    assert with_rg.grep(pattern) == expected


@pytest.mark.parametrize(
    ("re2", "rust"),
    [
        (r"\d+", "[0-9]+"),
        (r"[\w.]+", "[0-9A-Za-z_.]+"),
        (r"\bx\B", r"(?-u:\b)x(?-u:\B)"),
        (r"[^\s]", r"[^\t\n\f\r ]"),
        (r"[]a]", "[]a]"),
        (r"[[:alpha:]\d]", "[[:alpha:]0-9]"),
        (r"\.\*", r"\.\*"),
        (r"[\D]", None),
        (r"\Qa.b\E", None),
    ],
)
def test_to_rust_regex(re2: str, rust: str | None) -> None:
    assert to_rust_regex(re2) == rust
