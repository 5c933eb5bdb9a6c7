"""search.py: the glob translation and the grep engine, against Python's own engines."""

from __future__ import annotations

import fnmatch
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workspacefs.search import GlobMatcher, GrepPattern, PathFilter, is_binary, required_literal, search_content


def _grep(pattern: str, text: str) -> list[tuple[int, str, int, int]]:
    compiled = GrepPattern(pattern)
    matches = search_content(compiled, "f", text.encode(), 10_000, compiled.new_budget())
    return [(m.line_number, m.line_content, m.match_start, m.match_end) for m in matches]


def _reference(pattern: str, text: str) -> list[tuple[int, str, int, int]]:
    found = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        match = re.search(pattern, line, re.ASCII)
        if match:
            found.append((number, line, match.start(), match.end()))
    return found


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "d/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "d/e/a.py", True),
        ("d/**/a.py", "d/a.py", True),
        ("d/**", "d/x/y", True),
        ("d/**", "dx/y", False),
        ("?.py", "ab.py", False),
        ("[a-c].txt", "b.txt", True),
        ("[!a-c].txt", "b.txt", False),
        ("[!a-c].txt", "d.txt", True),
        ("[].txt", "[].txt", True),
        ("a[", "a[", True),
        ("*", ".env", True),
        ("a/*/c", "a/b/x/c", False),
        ("100%", "100%", True),
        ("a.b", "axb", False),
    ],
)
def test_glob_matcher(pattern: str, path: str, matches: bool) -> None:
    assert GlobMatcher(pattern).matches(path) is matches


@given(
    st.text(alphabet="ab.*?", min_size=1, max_size=6).filter(lambda p: p not in (".", "..")),
    st.text(alphabet="ab.", min_size=1, max_size=6),
)
def test_single_segment_glob_agrees_with_fnmatch(pattern: str, name: str) -> None:
    assert GlobMatcher(pattern).matches(name) is fnmatch.fnmatchcase(name, pattern)


def test_path_filter_by_name_and_by_path() -> None:
    by_name = PathFilter("*.py")
    assert by_name.accepts("src/deep/a.py", "")
    by_path = PathFilter("src/*.py")
    assert by_path.accepts("src/a.py", "")
    assert not by_path.accepts("src/deep/a.py", "")
    assert by_path.accepts("root/src/a.py", "root")


def test_is_binary() -> None:
    assert is_binary(b"abc\x00")
    assert not is_binary(b"a" * 8192 + b"\x00")


def test_engines() -> None:
    assert GrepPattern("a+b").engine == "re2"
    assert GrepPattern(r"(\w)\1").engine == "regex"
    with pytest.raises(ValueError, match="Invalid regular expression"):
        GrepPattern("(")


_PATTERN_ATOMS = st.sampled_from(["a", "b", ".", "a*", "b+", "[ab]", "x?", r"\d", "^", "$", " ", "(a|b)"])
_TEXT = st.text(alphabet="ab x1\n", max_size=60)


@settings(max_examples=300)
@given(st.lists(_PATTERN_ATOMS, min_size=1, max_size=4).map("".join), _TEXT)
def test_block_search_agrees_with_line_by_line_python(pattern: str, text: str) -> None:
    assert _grep(pattern, text) == _reference(pattern, text)


def test_multibyte_offsets_are_characters() -> None:
    assert _grep("ö+", "xx\nhéllo wöörld\n") == [(2, "héllo wöörld", 7, 9)]


def test_streamed_content_agrees_with_inline_content() -> None:
    import io

    from workspacefs.streams import StreamReader

    text = "".join(f"line {i} {'needle' if i % 97 == 0 else ''}\n" for i in range(300_000)).encode()
    compiled = GrepPattern("needle")
    inline = search_content(compiled, "f", text, 10_000, compiled.new_budget())
    streamed = search_content(
        compiled, "f", StreamReader("f", io.BytesIO(text), len(text)), 10_000, compiled.new_budget()
    )
    assert inline == streamed
    assert len(inline) == (300_000 + 96) // 97


_PATTERN_PIECES = st.sampled_from(
    [
        "a",
        "b",
        "x",
        "A",
        "1",
        ".",
        "*",
        "+",
        "?",
        "|",
        "(",
        ")",
        "[",
        "]",
        "^",
        "$",
        "\\",
        "{2}",
        ":",
        "-",
        "[:alpha:]",
        "\\x41",
        "\\101",
        "\\pL",
        "\\d",
        "\\w",
        "(?i)",
        "\\Q",
        "\\E",
        "\\b",
    ]
)
_LINE_CHARACTERS = st.text(alphabet="abxA1.:-]( ", max_size=12)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PATTERN_PIECES, min_size=1, max_size=8).map("".join), st.lists(_LINE_CHARACTERS, max_size=6))
def test_the_required_literal_is_in_every_matching_line(pattern: str, lines: list[str]) -> None:
    """The pre-filter grep and the SQL backend rely on: a wrong literal would silently hide matches."""
    try:
        compiled = GrepPattern(pattern)
    except ValueError:
        return
    literal = required_literal(pattern)
    text = "\n".join(lines) + "\n"
    for match in search_content(compiled, "f", text.encode(), 10_000, compiled.new_budget()):
        assert literal is None or literal in match.line_content.encode(), (pattern, match.line_content)
