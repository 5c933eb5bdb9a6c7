"""ripgrep as a candidate filter for host grep: it finds the files worth searching, nothing more.

ripgrep lists the files with a matching line; the shared engine then reads each of them through
the race-proof resolver and produces every result. So a symlink swapped in while ripgrep walks can
at worst make it name a file that the resolver then refuses, and results are identical to the
shared engine's by construction. The pattern is translated so ripgrep's Rust regex matches at
least what RE2 matches (ASCII classes made explicit); when a pattern cannot be translated, or
ripgrep fails, the caller falls back to walking the tree itself.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from workspacefs._hostio import TEMP_PREFIX, is_listable_name
from workspacefs.paths import MAX_PATH_DEPTH, normalize_path
from workspacefs.search import GrepPattern, rewrite_text_anchors

__all__ = ["Ripgrep", "to_rust_regex"]

RIPGREP_TIMEOUT_SECONDS = 60.0

# RE2's Perl classes are ASCII; Rust's are Unicode. Spelled out, both engines agree.
_CLASS_BODY = {"d": "0-9", "w": "0-9A-Za-z_", "s": "\\t\\n\\f\\r "}
_OUTSIDE = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[0-9A-Za-z_]",
    "W": "[^0-9A-Za-z_]",
    "s": "[\\t\\n\\f\\r ]",
    "S": "[^\\t\\n\\f\\r ]",
    "b": "(?-u:\\b)",
    "B": "(?-u:\\B)",
}
_UNSUPPORTED = {"C", "Q", "E"}  # RE2's any-byte and quoting escapes have no Rust equivalent


def to_rust_regex(pattern: str) -> str | None:
    """The pattern for ripgrep, matching at least what RE2 matches; ``None`` if it cannot be said."""
    out: list[str] = []
    in_class = False
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            following = pattern[i + 1]
            i += 2
            if following in _UNSUPPORTED:
                return None
            if in_class:
                if following in "DWS":
                    return None  # a negated class inside a class has no plain spelling
                out.append(_CLASS_BODY.get(following, "\\" + following))
            else:
                out.append(_OUTSIDE.get(following, "\\" + following))
            continue
        if in_class:
            if char == "]" and out[-1] not in ("[", "[^"):
                in_class = False
            elif char == "[" and pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end > 0:
                    out.append(pattern[i : end + 2])
                    i = end + 2
                    continue
        elif char == "[":
            in_class = True
            if pattern.startswith("[^", i):
                out.append("[^")
                i += 2
                continue
        out.append(char)
        i += 1
    return "".join(out)


class Ripgrep:
    """A located ``rg`` binary."""

    def __init__(self, binary: str) -> None:
        self.binary = binary

    @classmethod
    def find(cls) -> Ripgrep | None:
        """``rg`` on ``PATH``, or beside the running interpreter (the ``ripgrep`` wheel puts it there)."""
        found = shutil.which("rg")
        if found is None:
            beside = Path(sys.executable).with_name("rg")
            found = str(beside) if beside.is_file() else None
        return cls(found) if found else None

    def candidates(self, root: str, pattern: GrepPattern, base: str) -> list[str] | None:
        """Files below ``base`` (normalised, relative to ``root``) with a line ripgrep matches.

        ``None`` when ripgrep cannot answer for this pattern: the caller searches every file.
        """
        if pattern.engine != "re2":
            return None
        translated = to_rust_regex(rewrite_text_anchors(pattern.pattern))
        if translated is None:
            return None
        depth = MAX_PATH_DEPTH - (base.count("/") + 1 if base else 0)
        command = [
            self.binary,
            "--files-with-matches",
            "--null",
            "--no-config",
            "--no-ignore",
            "--hidden",
            "--no-follow",
            "--text",
            "--no-messages",
            f"--max-depth={depth}",
            f"--glob=!{TEMP_PREFIX}*",
            "--regexp",
            translated,
            "--",
            base or ".",
        ]
        try:
            result = subprocess.run(
                command,
                cwd=root,
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=RIPGREP_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if result.returncode not in (0, 1):
            return None  # a pattern ripgrep rejects, or a partial walk: let the shared engine decide
        found = []
        for raw in result.stdout.split(b"\0"):
            if not raw:
                continue
            try:
                name = raw.decode("utf-8")
                path = normalize_path(name)
            except (UnicodeDecodeError, ValueError, PermissionError):
                continue
            if all(is_listable_name(part) for part in path.split("/")):
                found.append(path)
        return found
