"""Conformance: listing, glob and grep (DESIGN §3 "Listing and search")."""

from __future__ import annotations

import pytest

from workspacefs.errors import PatternTooLargeError, PatternTooSlowError
from workspacefs.testing._base import SuiteBase, finishes

__all__ = ["GlobSuite", "GrepSuite", "ListingSuite"]

TREE = {
    "README.md": "# readme\n",
    ".env": "SECRET=1\n",
    "src/main.py": "import os\nprint('main')\n",
    "src/util.py": "def util():\n    return 42\n",
    "src/.hidden.py": "hidden = True\n",
    "src/pkg/__init__.py": "",
    "src/pkg/deep/mod.py": "VALUE = 'deep'\n",
    "docs/guide.md": "guide\n",
    "docs/a.txt": "a\n",
    "data.txt": "top\n",
}


class ListingSuite(SuiteBase):
    """``list``: one directory, sorted by name, files and directories marked."""

    def test_list_empty_root(self) -> None:
        assert list(self.make().list()) == []

    def test_list_sorted_by_name_in_code_point_order(self) -> None:
        fs = self.make({"b.txt": "", "B.txt": "", "a.txt": "", "a-b.txt": "", "_x": "", "é.txt": "", "Z/x": ""})
        assert [e.name for e in fs.list()] == sorted(["b.txt", "B.txt", "a.txt", "a-b.txt", "_x", "é.txt", "Z"])

    def test_entries_describe_files_and_directories(self) -> None:
        fs = self.make({"dir/inner.txt": "x", "file.txt": "12345"})
        entries = {e.name: e for e in fs.list()}
        assert entries["dir"].path == "dir"
        assert (entries["dir"].is_directory, entries["dir"].is_file, entries["dir"].size_bytes) == (True, False, None)
        assert entries["file.txt"].path == "file.txt"
        assert (entries["file.txt"].is_file, entries["file.txt"].is_directory) == (True, False)
        assert entries["file.txt"].size_bytes == 5

    def test_list_nested_directory(self) -> None:
        fs = self.make({"a/b/c.txt": "x", "a/b/d.txt": "y", "a/e.txt": "z"})
        assert [(e.name, e.path) for e in fs.list("a/b")] == [("c.txt", "a/b/c.txt"), ("d.txt", "a/b/d.txt")]

    def test_list_shows_empty_directories(self) -> None:
        fs = self.make(dirs=("empty", "full"))
        fs.write("full/x.txt", "x")
        assert [e.name for e in fs.list()] == ["empty", "full"]
        assert list(fs.list("empty")) == []

    def test_list_only_direct_children(self) -> None:
        fs = self.make(TREE)
        assert [e.name for e in fs.list("src")] == [".hidden.py", "main.py", "pkg", "util.py"]

    def test_list_missing_raises_file_not_found(self) -> None:
        fs = self.make()
        with pytest.raises(FileNotFoundError):
            fs.list("missing")

    def test_list_file_raises_not_a_directory(self) -> None:
        fs = self.make({"file.txt": "x"})
        with pytest.raises(NotADirectoryError):
            fs.list("file.txt")

    def test_list_below_a_file_raises(self) -> None:
        fs = self.make({"file.txt": "x"})
        with pytest.raises(FileNotFoundError):
            fs.list("file.txt/child")

    def test_prefix_siblings_are_not_children(self) -> None:
        fs = self.make({"a/x.txt": "1", "ab/y.txt": "2", "a_b/z.txt": "3", "a%/w.txt": "4"})
        assert [e.name for e in fs.list("a")] == ["x.txt"]


class GlobSuite(SuiteBase):
    """``glob``: ``*``/``?`` stay in one segment, ``**`` spans directories, results sorted, files only."""

    def paths(self, pattern: str, path: str = ".") -> list[str]:
        fs = self.make(TREE)
        return [m.path for m in fs.glob(pattern, path=path)]

    def test_star_matches_one_level(self) -> None:
        assert self.paths("*.txt") == ["data.txt"]

    def test_star_never_crosses_slash(self) -> None:
        assert self.paths("src*") == []
        assert self.paths("src/*.py") == ["src/.hidden.py", "src/main.py", "src/util.py"]

    def test_double_star_spans_any_depth_including_none(self) -> None:
        assert self.paths("**/*.py") == [
            "src/.hidden.py",
            "src/main.py",
            "src/pkg/__init__.py",
            "src/pkg/deep/mod.py",
            "src/util.py",
        ]
        assert self.paths("**/*.txt") == ["data.txt", "docs/a.txt"]

    def test_double_star_in_the_middle_matches_zero_directories(self) -> None:
        assert self.paths("src/**/main.py") == ["src/main.py"]
        assert self.paths("src/**/mod.py") == ["src/pkg/deep/mod.py"]

    def test_trailing_double_star_matches_everything_below(self) -> None:
        assert self.paths("docs/**") == ["docs/a.txt", "docs/guide.md"]
        assert len(self.paths("**")) == len(TREE)

    def test_question_mark_is_one_character(self) -> None:
        assert self.paths("docs/?.txt") == ["docs/a.txt"]
        assert self.paths("dat?.txt") == ["data.txt"]
        assert self.paths("?") == []

    def test_dotfiles_match(self) -> None:
        assert ".env" in self.paths("*")
        assert "src/.hidden.py" in self.paths("**/*.py")
        assert self.paths(".*") == [".env"]

    def test_character_classes(self) -> None:
        assert self.paths("docs/[ab].txt") == ["docs/a.txt"]
        assert self.paths("docs/[!a].txt") == []
        assert self.paths("[dR]*") == ["README.md", "data.txt"]

    def test_results_are_sorted_by_path(self) -> None:
        fs = self.make({"b/z.txt": "", "a.txt": "", "a/b.txt": "", "B.txt": "", "a-c.txt": ""})
        found = [m.path for m in fs.glob("**/*.txt")]
        assert found == sorted(found) == ["B.txt", "a-c.txt", "a.txt", "a/b.txt", "b/z.txt"]

    def test_matches_files_only(self) -> None:
        fs = self.make({"pkg.d/file.d": "x"}, dirs=("empty.d",))
        assert [m.path for m in fs.glob("**/*.d")] == ["pkg.d/file.d"]
        assert all(m.is_file for m in fs.glob("**"))

    def test_path_sets_the_base_and_results_stay_root_relative(self) -> None:
        assert self.paths("*.py", path="src") == ["src/.hidden.py", "src/main.py", "src/util.py"]
        assert self.paths("**/*.py", path="src/pkg") == ["src/pkg/__init__.py", "src/pkg/deep/mod.py"]

    def test_missing_base_returns_nothing(self) -> None:
        assert self.paths("*", path="nowhere") == []

    def test_file_as_base_returns_nothing(self) -> None:
        assert self.paths("*", path="data.txt") == []

    def test_leading_dot_slash_in_pattern(self) -> None:
        assert self.paths("./*.txt") == ["data.txt"]

    @pytest.mark.parametrize("pattern", ["", "/", "../*", "a/../*"])
    def test_bad_patterns_raise_value_error(self, pattern: str) -> None:
        fs = self.make(TREE)
        with pytest.raises(ValueError):
            fs.glob(pattern)

    def test_literal_special_characters(self) -> None:
        fs = self.make({"100%.txt": "", "a_b.txt": "", "axb.txt": ""})
        assert [m.path for m in fs.glob("a_b.txt")] == ["a_b.txt"]
        assert [m.path for m in fs.glob("100%*")] == ["100%.txt"]

    def test_many_stars_do_not_hang(self) -> None:
        fs = self.make({"a" * 70 + ".txt": ""})
        assert finishes(lambda: list(fs.glob("*a*a*a*a*a*a*a*a*a*a*b"))) == []


class GrepSuite(SuiteBase):
    """``grep``: one match per line, 1-based lines that agree with ``read``, sorted, capped, safe."""

    def test_basic_match(self) -> None:
        fs = self.make({"f.txt": "alpha\nbeta gamma\n"})
        [match] = fs.grep("gam+a")
        assert (match.path, match.line_number, match.line_content) == ("f.txt", 2, "beta gamma")
        assert (match.match_start, match.match_end) == (5, 10)

    def test_one_match_per_line_with_the_first_span(self) -> None:
        fs = self.make({"f.txt": "xx ab ab ab\n"})
        [match] = fs.grep("ab")
        assert (match.match_start, match.match_end) == (3, 5)

    def test_results_sorted_by_path_then_line(self) -> None:
        fs = self.make({"b.txt": "hit\nno\nhit\n", "a/z.txt": "hit\n", "a.txt": "no\nhit\n"})
        assert [(m.path, m.line_number) for m in fs.grep("hit")] == [
            ("a.txt", 2),
            ("a/z.txt", 1),
            ("b.txt", 1),
            ("b.txt", 3),
        ]

    def test_line_numbers_agree_with_read(self) -> None:
        fs = self.make(TREE)
        fs.write("crlf.txt", "one\r\ntarget\r\nthree")
        matches = fs.grep("e")
        assert matches
        for match in matches:
            line = fs.read(match.path, offset=match.line_number - 1, limit=1).content
            assert line.removesuffix("\n") == match.line_content

    def test_line_content_has_no_newline(self) -> None:
        fs = self.make({"f.txt": "last line without newline"})
        [match] = fs.grep("newline")
        assert match.line_content == "last line without newline"

    def test_offsets_are_characters(self) -> None:
        fs = self.make({"u.txt": "héllo wörld 😀 ok\n"})
        [match] = fs.grep("ok")
        assert match.line_content[match.match_start : match.match_end] == "ok"
        assert match.match_start == 14

    def test_anchors_apply_per_line(self) -> None:
        fs = self.make({"f.txt": "start middle end\nend\nstart\n"})
        assert [m.line_number for m in fs.grep("^end$")] == [2]
        assert [m.line_number for m in fs.grep("^start")] == [1, 3]
        assert [m.line_number for m in fs.grep("end$")] == [1, 2]

    def test_text_anchors_behave_like_line_anchors(self) -> None:
        fs = self.make({"f.txt": "ab\nab\n"})
        assert [m.line_number for m in fs.grep(r"\Aab\z")] == [1, 2]

    def test_empty_lines_match_caret_dollar(self) -> None:
        fs = self.make({"f.txt": "a\n\nb\n\n"})
        assert [m.line_number for m in fs.grep("^$")] == [2, 4]

    def test_matches_never_span_lines(self) -> None:
        fs = self.make({"f.txt": "foo\nbar\n"})
        assert list(fs.grep(r"foo\sbar")) == []
        assert list(fs.grep("foo.bar")) == []
        assert list(fs.grep("(?s)foo.bar")) == []

    def test_case_insensitive_flag(self) -> None:
        fs = self.make({"f.txt": "Hello\nHELLO\nhello\n"})
        assert len(fs.grep("(?i)hello")) == 3

    def test_glob_without_slash_filters_by_file_name(self) -> None:
        fs = self.make(TREE)
        assert sorted({m.path for m in fs.grep(".", glob="*.py")}) == [
            "src/.hidden.py",
            "src/main.py",
            "src/pkg/deep/mod.py",
            "src/util.py",
        ]

    def test_glob_with_slash_filters_by_path_under_base(self) -> None:
        fs = self.make(TREE)
        assert sorted({m.path for m in fs.grep(".", glob="src/*.py")}) == [
            "src/.hidden.py",
            "src/main.py",
            "src/util.py",
        ]
        assert sorted({m.path for m in fs.grep(".", path="src", glob="pkg/**/*.py")}) == ["src/pkg/deep/mod.py"]

    def test_path_limits_the_search(self) -> None:
        fs = self.make(TREE)
        assert {m.path for m in fs.grep(".", path="docs")} == {"docs/a.txt", "docs/guide.md"}

    def test_path_may_name_a_file(self) -> None:
        fs = self.make(TREE)
        assert [m.path for m in fs.grep("main", path="src/main.py")] == ["src/main.py"]

    def test_missing_path_returns_nothing(self) -> None:
        fs = self.make(TREE)
        assert list(fs.grep(".", path="nowhere")) == []

    def test_binary_files_are_skipped(self) -> None:
        fs = self.make({"bin.dat": b"needle\x00\x01needle\n", "text.txt": "needle\n"})
        assert [m.path for m in fs.grep("needle")] == ["text.txt"]

    def test_nul_after_the_first_8_kib_is_not_binary(self) -> None:
        fs = self.make({"late.dat": b"needle\n" + b"x" * 9000 + b"\x00\n"})
        assert [m.line_number for m in fs.grep("needle")] == [1]

    def test_invalid_utf8_does_not_break_grep(self) -> None:
        fs = self.make({"latin1.txt": "café needle\n".encode("latin-1"), "ok.txt": "needle\n"})
        matches = fs.grep("needle")
        assert [m.path for m in matches] == ["latin1.txt", "ok.txt"]
        assert matches[0].line_content.endswith("needle")

    def test_max_matches_defaults_to_1000(self) -> None:
        fs = self.make({"many.txt": "hit\n" * 1500})
        assert len(fs.grep("hit")) == 1000

    def test_max_matches_keeps_the_first_in_order(self) -> None:
        fs = self.make({"b.txt": "hit\nhit\n", "a.txt": "hit\nhit\nhit\n"})
        assert [(m.path, m.line_number) for m in fs.grep("hit", max_matches=4)] == [
            ("a.txt", 1),
            ("a.txt", 2),
            ("a.txt", 3),
            ("b.txt", 1),
        ]
        assert list(fs.grep("hit", max_matches=0)) == []

    def test_negative_max_matches_raises(self) -> None:
        fs = self.make({"a.txt": "hit\n"})
        with pytest.raises(ValueError):
            fs.grep("hit", max_matches=-1)

    @pytest.mark.parametrize("pattern", ["(", "[a-", "*x", "a**", "a{2,1}"])
    def test_invalid_regex_raises_value_error(self, pattern: str) -> None:
        fs = self.make({"a.txt": "x\n"})
        with pytest.raises(ValueError):
            fs.grep(pattern)
        with pytest.raises(ValueError):
            fs.grep(pattern, path="missing")

    def test_catastrophic_backtracking_cannot_hang(self) -> None:
        fs = self.make({"evil.txt": "a" * 30_000 + "!\n"})
        assert finishes(lambda: list(fs.grep("(a+)+$"))) == []

    def test_backtracking_only_syntax_is_bounded(self) -> None:
        fs = self.make({"evil.txt": "a" * 30_000 + "!\n"})

        def search() -> list[object]:
            try:
                return list(fs.grep(r"(?=a)(a+)+$"))
            except PatternTooSlowError:  # refused by the fallback engine's deadline: also fine
                return []

        assert finishes(search) == []

    @pytest.mark.parametrize(
        "pattern",
        [
            "(?:a{1000}){1000}",  # RE2 refuses the counts; compiled unbounded it took 260 MB
            "(?<=x)(?:a{1000}){1000}",  # lookaround: only the backtracking engine can run it
            "(?x) (?: a {1000} ) {1000}",  # verbose mode cannot hide the repetition
        ],
    )
    def test_patterns_too_large_to_compile_are_refused(self, pattern: str) -> None:
        fs = self.make({"a.txt": "a" * 100 + "\n"})
        with pytest.raises(PatternTooLargeError):
            fs.grep(pattern)
        with pytest.raises(PatternTooLargeError):
            fs.grep(pattern, path="missing")  # refused before anything is searched

    @pytest.mark.parametrize(
        ("pattern", "lines"),
        [
            (r"(?<=price: )\d+", [1]),
            (r"(\w)\1", [2, 3]),
            (r"(?<!x)a{1001}", [3]),  # beyond RE2's counts, small enough for the fallback
            (r"(?:a{10}){101}b", [3]),  # RE2 refuses the product of the counts
        ],
    )
    def test_backtracking_only_patterns_still_search(self, pattern: str, lines: list[int]) -> None:
        fs = self.make({"a.txt": "price: 42\nbook keeper\n" + "a" * 1010 + "b\n"})
        assert [m.line_number for m in fs.grep(pattern)] == lines

    @pytest.mark.parametrize(
        ("pattern", "lines"),
        [
            (r"[[:alpha:]]x", [1, 2]),
            (r"[^]]x", [1, 2]),
            (r"\x41BC", [3]),
            (r"\101BC", [3]),
            (r"\pLfoo", [4, 5]),
            (r"[[:upper:]]foo", [5]),
            (r"\x{41}BC", [3]),
        ],
    )
    def test_classes_and_escapes_are_never_taken_for_literals(self, pattern: str, lines: list[int]) -> None:
        """Regression: a pre-filter took ``41`` in ``\\x41`` (or ``:]`` in ``[[:alpha:]]``) for required text."""
        fs = self.make({"f.txt": "ax\nbx\nABC\nafoo\nSfoo\n"})
        assert [m.line_number for m in fs.grep(pattern)] == lines

    def test_lookaround_and_backreferences_work(self) -> None:
        fs = self.make({"f.txt": "price: $42\nlook: aa\nnone\n"})
        assert [m.line_number for m in fs.grep(r"(?<=\$)\d+")] == [1]
        assert [m.line_number for m in fs.grep(r"(\w)\1")] == [2]

    def test_grep_names_with_like_wildcards(self) -> None:
        fs = self.make({"100%/a.txt": "hit\n", "1000/b.txt": "hit\n", "a_b/c.txt": "hit\n", "axb/d.txt": "hit\n"})
        assert [m.path for m in fs.grep("hit", path="100%")] == ["100%/a.txt"]
        assert [m.path for m in fs.grep("hit", path="a_b")] == ["a_b/c.txt"]

    def test_many_files(self) -> None:
        fs = self.make({f"d{i % 7}/f{i:03}.txt": f"line\nneedle {i}\n" for i in range(120)})
        matches = fs.grep(r"needle \d+")
        assert len(matches) == 120
        assert [m.path for m in matches] == sorted(m.path for m in matches)
        assert all(m.line_number == 2 for m in matches)
