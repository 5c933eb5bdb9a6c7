"""The one glob and grep engine, shared by every backend without a faster native one (DESIGN §3).

Glob: ``*`` and ``?`` never cross ``/``; ``**`` as a whole segment spans any number of
directories, none included; dotfiles match like any name; ``[abc]``/``[!abc]`` classes.

Grep: one match per matching line (the span of the first match, in characters), lines split on
``\\n`` and numbered from 1, binary files (a NUL in the first 8 KiB) skipped. Patterns run on
RE2, whose matching time is linear in the text, so no pattern can hang a search. RE2 syntax is
Python's for everything common; its ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII-only. The few
constructs RE2 lacks (backreferences, lookaround) run on the ``regex`` module under a deadline:
a search that would take longer is refused with ``PatternTooSlowError`` (a ``ValueError``) instead of
hanging. That module's compiled program grows with the product of nested repetition counts, so a
pattern whose program would pass ``MAX_FALLBACK_PROGRAM_SIZE`` is refused with ``PatternTooLargeError``
before it is compiled. Only the public API of ``google-re2`` is used.
"""

from __future__ import annotations

import base64
import importlib
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import re2  # google-re2

from workspacefs.errors import InvalidPatternError, PatternTooLargeError, PatternTooSlowError
from workspacefs.paths import MAX_PATH_CHARS, basename, check_text, relative_to
from workspacefs.protocol import ByteReader
from workspacefs.results import GrepMatch

if TYPE_CHECKING:
    import regex

__all__ = [
    "BINARY_SNIFF_BYTES",
    "FALLBACK_BUDGET_SECONDS",
    "FALLBACK_CALL_TIMEOUT_SECONDS",
    "MAX_FALLBACK_PROGRAM_SIZE",
    "GlobMatcher",
    "GrepPattern",
    "PathFilter",
    "fallback_program_size",
    "is_binary",
    "required_literal",
    "rewrite_text_anchors",
    "search_content",
    "text_or_base64",
]

BINARY_SNIFF_BYTES = 8192
"""A NUL byte within this many leading bytes marks a file as binary."""
FALLBACK_CALL_TIMEOUT_SECONDS = 0.5
"""Longest one line may take under the backtracking fallback engine."""
FALLBACK_BUDGET_SECONDS = 5.0
"""Longest a whole grep may spend in the backtracking fallback engine."""
MAX_FALLBACK_PROGRAM_SIZE = 30_000
"""Largest pattern the backtracking fallback compiles, in parsed elements once repetitions are expanded.

Measured peak memory of ``regex.compile`` (2026.11): about 270 bytes an element (literals, classes,
lookaround, backreferences), 1.3 KB for the heaviest (``\\X``, full case folding), so at most 8 to 40 MB;
without a bound ``(?:(?:a{1000}){1000}){3}`` took 1 GB. RE2's own default budget is 8 MB a program."""
_STREAM_BLOCK = 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# More unbounded wildcards than this and a backtracking matcher could go polynomial; use RE2.
_MAX_BACKTRACKING_STARS = 3


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    return options


def is_binary(head: bytes) -> bool:
    """True if a NUL byte occurs in the first 8 KiB."""
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def text_or_base64(data: bytes) -> tuple[str, Literal["text", "base64"]]:
    """Content for a JSON wire: UTF-8 text, or base64 when it is binary (above) or not valid UTF-8."""
    if not is_binary(data):
        try:
            return data.decode("utf-8"), "text"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(data).decode("ascii"), "base64"


# --- glob -----------------------------------------------------------------------------------------


def _translate_segment(segment: str) -> tuple[str, int]:
    """Regex for one glob segment and how many unbounded wildcards it holds."""
    out: list[str] = []
    stars = 0
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        i += 1
        if char == "*":
            while i < n and segment[i] == "*":
                i += 1
            out.append("[^/]*")
            stars += 1
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = i
            if end < n and segment[end] in "!^":
                end += 1
            if end < n and segment[end] == "]":
                end += 1
            end = segment.find("]", end)
            if end < 0:
                out.append(re.escape(char))
                continue
            body = segment[i:end]
            i = end + 1
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            body = body.replace("\\", "\\\\").replace("[", "\\[")
            out.append(f"[^/{body}]" if negate else f"(?!/)[{body}]")
        else:
            out.append(re.escape(char))
    return "".join(out), stars


def _split_pattern(pattern: str, what: str) -> list[str]:
    if not isinstance(pattern, str):
        raise TypeError(f"{what} must be a str, not {type(pattern).__name__}")
    check_text(what, pattern)
    if len(pattern) > MAX_PATH_CHARS:
        raise InvalidPatternError(f"{what} is longer than {MAX_PATH_CHARS} characters")
    if _CONTROL.search(pattern) is not None:
        raise InvalidPatternError(f"{what} contains a control character: {pattern!r}")
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    if ".." in segments:
        raise InvalidPatternError(f"{what} must not contain '..': {pattern!r}")
    if not segments:
        raise InvalidPatternError(f"{what} is empty: {pattern!r}")
    return segments


class GlobMatcher:
    """A compiled glob pattern matched against ``/``-separated relative paths."""

    __slots__ = ("_match", "pattern", "regex")

    def __init__(self, pattern: str, *, what: str = "glob pattern") -> None:
        self.pattern = pattern
        self.regex: str | None = None
        """The Python regular expression (``re.DOTALL``, matched whole) the pattern became; ``None`` when it
        has too many stars for a backtracking engine and runs on the linear-time one."""
        segments = _split_pattern(pattern, what)
        parts: list[str] = []
        stars = 0
        last = len(segments) - 1
        for index, segment in enumerate(segments):
            if segment == "**":
                parts.append(".*" if index == last else "(?:[^/]*/)*")
                stars += 1
                continue
            regex_text, segment_stars = _translate_segment(segment)
            parts.append(regex_text if index == last else regex_text + "/")
            stars += segment_stars
        text = "".join(parts)
        self._match: Callable[[str], bool]
        if stars > _MAX_BACKTRACKING_STARS:
            linear = re2.compile(text, _re2_options())
            self._match = lambda path: linear.fullmatch(path) is not None
        else:
            compiled = re.compile(text, re.DOTALL)
            self._match = lambda path: compiled.fullmatch(path) is not None
            self.regex = text

    def matches(self, relative_path: str) -> bool:
        """True if the whole relative path matches."""
        return self._match(relative_path)


class PathFilter:
    """grep's ``glob=`` filter: without a ``/`` it matches file names, with one paths under the base."""

    __slots__ = ("_by_name", "_matcher")

    def __init__(self, pattern: str) -> None:
        self._by_name = "/" not in pattern.strip("/")
        self._matcher = GlobMatcher(pattern, what="glob filter")

    def accepts(self, path: str, base: str) -> bool:
        """True if the file at normalised ``path`` passes, searched from directory ``base``."""
        if self._by_name:
            return self._matcher.matches(basename(path))
        return self._matcher.matches(relative_to(path, base))


# --- grep -----------------------------------------------------------------------------------------


def rewrite_text_anchors(pattern: str) -> str:
    r"""Make ``\A``, ``\z`` and ``\Z`` mean line start/end, as they do when a line is searched alone."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            following = pattern[i + 1]
            out.append({"A": "^", "z": "$", "Z": "$"}.get(following, char + following))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


_QUANTIFIERS = "*+?{"
_BREAKERS = ".^$"


def _after_quantifier(pattern: str, i: int) -> tuple[int, bool | None]:
    """Skip a quantifier at ``i``: (next index, whether it allows zero); ``None`` when there is none."""
    n = len(pattern)
    if i >= n or pattern[i] not in _QUANTIFIERS:
        return i, None
    optional = pattern[i] in "*?" or pattern.startswith(("{0,", "{0}"), i)
    if pattern[i] == "{":
        end = pattern.find("}", i)
        i = n if end < 0 else end + 1
    else:
        i += 1
    if i < n and pattern[i] in "?+":  # lazy or possessive
        i += 1
    return i, optional


_ESCAPE_WIDTH = {"x": 2, "u": 4, "U": 8}
"""Fixed-width escapes: how many hex digits follow (``\\x41``, ``\\u0041``); ``\\x{…}`` is braced."""


def _escape_end(pattern: str, i: int) -> int:
    """The index after the escape at ``pattern[i] == "\\"`` whose letter or digit is ``pattern[i + 1]``,
    arguments included (``\\x41``, ``\\x{263a}``, ``\\101``, ``\\pL``, ``\\p{Greek}``, ``\\k<name>``)."""
    n = len(pattern)
    letter = pattern[i + 1]
    j = i + 2
    if j < n and pattern[j] in "{<" and letter in "xpPkgN":
        close = pattern.find("}" if pattern[j] == "{" else ">", j)
        return n if close < 0 else close + 1
    if letter in _ESCAPE_WIDTH:
        return min(n, j + _ESCAPE_WIDTH[letter])
    if letter in "pP":
        return min(n, j + 1)
    if letter.isdigit():
        while j < n and j < i + 4 and pattern[j].isdigit():
            j += 1
    return j


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class opening at ``pattern[i] == "["`` (``[^]]``, ``[[:alpha:]]``,
    escapes inside)."""
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] == "^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1  # a ']' first is a member, not the end
    while j < n and pattern[j] != "]":
        if pattern[j] == "\\":
            j += 2
        elif pattern.startswith("[:", j):
            close = pattern.find(":]", j + 2)
            j = j + 1 if close < 0 else close + 2
        else:
            j += 1
    return min(n, j + 1)


def _token(pattern: str, i: int) -> tuple[str, str | None, int]:
    """The token at ``i``: (kind, literal character or None, next index). Kinds: ``literal``,
    ``other`` (class, anchor, escape class), ``open``, ``flags``, ``close``, ``or``."""
    char = pattern[i]
    if char == "\\" and i + 1 < len(pattern):
        following = pattern[i + 1]
        if following.isalnum():  # a class, an anchor, a code point or a reference: never a plain literal
            return "other", None, _escape_end(pattern, i)
        return "literal", following, i + 2  # escaped punctuation is a literal
    if char == "[":
        return "other", None, _class_end(pattern, i)
    if char == "(":
        flags = pattern.startswith("(?", i) and not pattern.startswith(("(?:", "(?P<", "(?<"), i)
        return ("flags" if flags else "open"), None, i + 1
    if char == ")":
        return "close", None, i + 1
    if char == "|":
        return "or", None, i + 1
    if char in _BREAKERS:
        return "other", None, i + 1
    return "literal", char, i + 1


def _literal_runs(pattern: str) -> list[str] | None:
    """Runs of literal characters every match must contain; ``None`` if that cannot be known."""
    runs: list[str] = []
    current: list[str] = []
    depth = 0
    i = 0
    while i < len(pattern):
        kind, atom, i = _token(pattern, i)
        if kind == "flags" or (kind == "or" and depth == 0):
            return None  # inline flags change what a literal means; a top-level '|' requires nothing
        depth += 1 if kind == "open" else -1 if kind == "close" and depth else 0
        i, optional = _after_quantifier(pattern, i) if kind not in ("open", "or") else (i, None)
        if atom is None or depth > 0 or optional:
            runs.append("".join(current))  # classes, groups, anchors and optional atoms end the run
            current = []
            continue
        current.append(atom)
        if optional is False:
            runs.append("".join(current))  # 'a+': one 'a' is certain, what follows may be more of them
            current = []
    runs.append("".join(current))
    return [run for run in runs if run]


def required_literal(pattern: str) -> bytes | None:
    """The longest literal every line matching ``pattern`` contains, as UTF-8 bytes, or ``None``.

    Conservative by design (groups, classes, alternatives and inline flags end a run): backends use
    it to pick candidate files, and a wrong answer would hide matches.
    """
    runs = _literal_runs(pattern)
    if not runs:
        return None
    return max(runs, key=len).encode("utf-8")


# (?-m) or (?i-m:…) would turn line anchors back into text anchors, which block search cannot honour.
_DISABLES_MULTILINE = re.compile(r"\(\?[a-zA-Z]*-[a-zA-Z]*m")


@dataclass(slots=True)
class _Budget:
    """Time the backtracking fallback may still spend in this grep."""

    deadline: float

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


def _compile_re2(pattern: str | bytes, options: re2.Options) -> Any:
    """An RE2 program through the package's public ``compile``, or ``None`` if RE2 cannot run it."""
    try:
        return re2.compile(pattern, options)
    except re2.error:
        return None


class GrepPattern:
    """A compiled grep pattern; ``InvalidPatternError`` (a ``ValueError``) if it is not a valid regex."""

    __slots__ = ("_block", "_line", "_literal", "engine", "pattern")

    def __init__(self, pattern: str) -> None:
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str, not {type(pattern).__name__}")
        check_text("pattern", pattern)
        self.pattern = pattern
        options = _re2_options()
        options.never_nl = True  # a match never spans lines, as when each line is searched alone
        self._block: Any = None
        self._line: _LineSearch | None = None
        # every matching line holds this literal: a block without it needs no regex at all (a C substring
        # search, far cheaper than a call into the engine for the many files that do not match)
        self._literal = required_literal(pattern) or b""
        rewritten = rewrite_text_anchors(pattern)
        per_line = _compile_re2(rewritten, options)
        if per_line is not None:
            self.engine = "re2"
            if _DISABLES_MULTILINE.search(pattern) is None:
                self._block = _compile_re2(("(?m)" + rewritten).encode("utf-8"), options)
            if self._block is None:
                self._line = _re2_line_search(per_line)
            return
        # RE2 refused the pattern, for a construct it lacks or for its size; which one does not matter (and is
        # never read from RE2's message): the fallback judges the pattern itself, from its own parse, and
        # refuses one too large to compile before compiling it.
        self.engine = "regex"
        self._line = _regex_line_search(_compile_fallback(pattern), pattern)

    def new_budget(self) -> _Budget:
        """A fresh time budget for one grep call."""
        return _Budget(time.monotonic() + FALLBACK_BUDGET_SECONDS)

    def scan(self, path: str, block: bytes, first_line: int, limit: int, budget: _Budget) -> list[GrepMatch]:
        """Matches in ``block`` (whole lines; line ``first_line`` first), at most ``limit``."""
        if self._literal and self._literal not in block:
            return []
        if self._block is not None:
            return _scan_block(self._block, path, block, first_line, limit)
        assert self._line is not None
        return _scan_lines(self._line, path=path, block=block, first_line=first_line, limit=limit, budget=budget)


def _compile_fallback(pattern: str) -> regex.Pattern[str]:
    """``pattern`` compiled by the ``regex`` module, if its program stays within ``MAX_FALLBACK_PROGRAM_SIZE``.

    Not kept in the module's cache: a large program is freed when the grep that needed it ends.
    """
    import regex  # noqa: PLC0415 - the backtracking fallback is rare: load it on first use

    try:
        size = fallback_program_size(pattern)
        if size > MAX_FALLBACK_PROGRAM_SIZE:
            shown = pattern if len(pattern) <= 80 else pattern[:80] + "…"
            raise PatternTooLargeError(
                f"Regular expression {shown!r} is too large to search with: more than "
                f"{MAX_FALLBACK_PROGRAM_SIZE:,} elements once its repetitions are expanded"
            )
        return regex.compile(pattern, cache_pattern=False)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise InvalidPatternError(f"Invalid regular expression {pattern!r}: {exc}") from None


def fallback_program_size(pattern: str) -> int:
    """Elements of the ``regex`` module's program for ``pattern``, counted from that module's own parse (so
    no syntax only it reads, such as verbose mode or nested classes, can hide a repetition). Counting stops
    once past ``MAX_FALLBACK_PROGRAM_SIZE``.

    The module copies the body of ``x{m,n}`` ``m + 1`` times (measured), so nested counts multiply. The
    pattern's length bounds the parse itself, which holds a Python object per element.
    """
    if len(pattern) > MAX_FALLBACK_PROGRAM_SIZE:
        return len(pattern)
    core = importlib.import_module("regex._regex_core")  # the parser is not public API: see test_search.py
    total = 0
    pending: list[tuple[Any, int]] = [(_parse_like_regex(core, pattern), 1)]
    while pending and total <= MAX_FALLBACK_PROGRAM_SIZE:
        node, weight = pending.pop()
        total += weight
        min_count = getattr(node, "min_count", None)
        if isinstance(min_count, int):  # GreedyRepeat, LazyRepeat, PossessiveRepeat
            weight *= min_count + 1
        pending.extend((child, weight) for child in _child_nodes(core, node))
    return total


def _parse_like_regex(core: Any, pattern: str) -> Any:
    """The parse tree ``regex.compile(pattern)`` builds (its ``_compile``, up to the parse: a flag such as
    ``(?x)`` met mid-pattern restarts the parse with it applied to the whole pattern)."""
    flags = 0
    while True:
        source = core.Source(pattern)
        info = core.Info(flags, source.char_type, {})
        info.guess_encoding = core.UNICODE
        source.ignore_space = bool(info.flags & core.VERBOSE)
        try:
            return core._parse_pattern(source, info)
        except core._UnscopedFlagSet:
            flags = info.global_flags


def _child_nodes(core: Any, node: Any) -> Iterator[Any]:
    """The parse nodes directly below ``node`` (subpatterns, sequence items, branches, set members)."""
    for name, value in vars(node).items():
        if name in ("_key", "info"):  # a hashing key and the shared parse state, not children
            continue
        if isinstance(value, core.RegexBase):
            yield value
        elif isinstance(value, list | tuple):
            yield from (item for item in value if isinstance(item, core.RegexBase))


_LineSearch = Callable[[str, _Budget], "tuple[int, int] | None"]


def _re2_line_search(compiled: Any) -> _LineSearch:
    def search(line: str, _budget: _Budget) -> tuple[int, int] | None:
        match = compiled.search(line)  # str in, character offsets out
        return None if match is None else match.span()

    return search


def _regex_line_search(compiled: regex.Pattern[str], pattern: str) -> _LineSearch:
    def search(line: str, budget: _Budget) -> tuple[int, int] | None:
        remaining = min(FALLBACK_CALL_TIMEOUT_SECONDS, budget.remaining())
        try:
            if remaining <= 0:
                raise TimeoutError
            match = compiled.search(line, timeout=remaining)
        except TimeoutError:
            raise PatternTooSlowError(
                f"Regular expression {pattern!r} is too slow to search with (it backtracks "
                "catastrophically); simplify it or avoid backreferences and lookaround"
            ) from None
        return None if match is None else match.span()

    return search


def _decoded_length(data: bytes) -> int:
    return len(data.decode("utf-8", "replace"))


def _scan_block(compiled: Any, path: str, block: bytes, first_line: int, limit: int) -> list[GrepMatch]:
    """Search a block of whole lines in one RE2 pass: lines without a match cost no Python at all."""
    found: list[GrepMatch] = []
    end = len(block)
    trailing_newline = end == 0 or block[-1] == 0x0A
    position = 0
    counted_to = 0
    line_number = first_line
    while position <= end and len(found) < limit:
        match = compiled.search(block, position, end)
        if match is None:
            break
        start, stop = match.span()
        if start == end and trailing_newline:
            break
        line_start = block.rfind(b"\n", 0, start) + 1
        line_end = block.find(b"\n", start)
        line_end = end if line_end < 0 else line_end
        line_number += block.count(b"\n", counted_to, line_start)
        counted_to = line_start
        line = block[line_start:line_end]
        char_start = _decoded_length(block[line_start:start])
        found.append(
            GrepMatch(
                path=path,
                line_number=line_number,
                line_content=line.decode("utf-8", "replace"),
                match_start=char_start,
                match_end=char_start + _decoded_length(block[start:stop]),
            )
        )
        position = line_end + 1
    return found


def _scan_lines(
    search: _LineSearch,
    *,
    path: str,
    block: bytes,
    first_line: int,
    limit: int,
    budget: _Budget,
) -> list[GrepMatch]:
    """Search line by line (engines that cannot search a block as independent lines)."""
    found: list[GrepMatch] = []
    lines = block.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for index, line in enumerate(lines):
        span = search(line, budget)
        if span is not None:
            found.append(GrepMatch(path, first_line + index, line, span[0], span[1]))
            if len(found) >= limit:
                break
    return found


def _blocks(reader: ByteReader) -> Iterator[bytes]:
    """Whole-line blocks of about 1 MiB from a stream (a longer line makes a longer block)."""
    pending = b""
    while chunk := reader.read(_STREAM_BLOCK):
        pending += chunk
        cut = pending.rfind(b"\n")
        if cut < 0:
            continue
        yield pending[: cut + 1]
        pending = pending[cut + 1 :]
    if pending:
        yield pending


def search_content(
    pattern: GrepPattern, path: str, content: bytes | ByteReader, limit: int, budget: _Budget
) -> list[GrepMatch]:
    """Matches of one file, given its bytes or an open reader (closed here); binary files give none."""
    if isinstance(content, bytes | bytearray | memoryview):
        data = bytes(content)
        if is_binary(data):
            return []
        return pattern.scan(path, data, 1, limit, budget)
    with content:
        if is_binary(content.read(BINARY_SNIFF_BYTES)):
            return []
        content.seek(0)
        found: list[GrepMatch] = []
        line = 1
        for block in _blocks(content):
            found += pattern.scan(path, block, line, limit - len(found), budget)
            if len(found) >= limit:
                break
            line += block.count(b"\n")
        return found


def sorted_unique(paths: Iterable[str]) -> list[str]:
    """Paths in code-point order, as every listing is sorted."""
    return sorted(set(paths))
