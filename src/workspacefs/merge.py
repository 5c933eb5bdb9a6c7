"""Three-way merge: the result values (``MergeResult``, ``MergeConflict``, ``ConflictHunk``) and the line merge.

``fs.merge(base, ours, theirs)`` (``backends/_merging.py``) decides file by file over three snapshots' manifests
and calls :func:`merge_lines` for a text file both sides changed. The line merge is diff3's: lines unchanged
between the three versions are "stable"; between two stable runs, a side that left the base's lines alone takes
the other side's, and two sides that changed them differently conflict. Adjacent edits (no unchanged line
between them) conflict, as in git.

Written here over the standard library's ``difflib`` rather than taken from ``merge3`` (PyPI): that package is
GPL-2.0-or-later, which an Apache-2.0 library cannot ship as a dependency, and no permissively licensed, maintained
diff3 exists on PyPI. The algorithm is the classic one (Khanna, Kunal and Pierce, "A Formal Investigation of
Diff3"), about sixty lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, Literal

from workspacefs.results import FilesystemSnapshot

__all__ = [
    "CONFLICT_KINDS",
    "ConflictHunk",
    "ConflictKind",
    "LineMerge",
    "MergeConflict",
    "MergeResult",
    "is_text",
    "merge_lines",
    "split_lines",
]

ConflictKind = Literal["content", "binary", "modify/delete", "add/add", "file/directory"]
"""Why a path could not be merged:

- ``content``: both sides changed the same lines of a text file differently;
- ``binary``: both sides changed a file that is not UTF-8 text (or too large to merge by line) differently;
- ``modify/delete``: one side changed a file the other deleted;
- ``add/add``: both sides added a file at a path the base did not have, with different content;
- ``file/directory``: one side has a file where the other has a directory.
"""
CONFLICT_KINDS: tuple[ConflictKind, ...] = ("content", "binary", "modify/delete", "add/add", "file/directory")

OURS_MARKER = b"<<<<<<< ours\n"
SEPARATOR = b"=======\n"
THEIRS_MARKER = b">>>>>>> theirs\n"
_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class ConflictHunk:
    """One run of lines both sides changed differently. Line numbers are 1-based, each in its own version of
    the file (as ``grep`` numbers them); a hunk that only inserts has an empty ``base`` starting where it would be."""

    ours_start: int
    ours: str
    base_start: int
    base: str
    theirs_start: int
    theirs: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "ours_start": self.ours_start,
            "ours": self.ours,
            "base_start": self.base_start,
            "base": self.base,
            "theirs_start": self.theirs_start,
            "theirs": self.theirs,
        }


@dataclass(frozen=True, slots=True)
class MergeConflict:
    """A path the merge could not decide: what kind of conflict, why, and (``content``) the hunks."""

    path: str
    kind: ConflictKind
    message: str
    hunks: tuple[ConflictHunk, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "kind": self.kind,
            "message": self.message,
            "hunks": [hunk.to_dict() for hunk in self.hunks],
        }


@dataclass(frozen=True, slots=True)
class MergeResult:
    """What :meth:`merge` made: a new snapshot (apply it with ``fs.restore(result.snapshot)``) and the conflicts.

    The path lists say how the result differs from ``ours``: ``added``, ``modified`` and ``deleted`` files;
    ``merged`` names the files both sides changed whose lines merged cleanly. A conflicting path keeps ``ours``
    in the snapshot, or (``markers=True``, text in conflict) holds git-style conflict markers.
    """

    snapshot: FilesystemSnapshot
    conflicts: tuple[MergeConflict, ...] = ()
    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    merged: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        """True when nothing conflicted."""
        return not self.conflicts

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the CLI's and the REST API's answer)."""
        return {
            "snapshot_id": str(self.snapshot.snapshot_id),
            "clean": self.clean,
            "conflicts": [conflict.to_dict() for conflict in self.conflicts],
            "added": list(self.added),
            "modified": list(self.modified),
            "deleted": list(self.deleted),
            "merged": list(self.merged),
        }


@dataclass(frozen=True, slots=True)
class LineMerge:
    """The outcome of :func:`merge_lines`: the merged bytes (conflicts shown with markers) and the hunks."""

    content: bytes
    conflicts: tuple[ConflictHunk, ...]


def is_text(data: bytes) -> bool:
    """UTF-8 without a NUL byte in its first 8 KiB: what grep searches is what merges by line."""
    if b"\0" in data[:_SNIFF_BYTES]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def split_lines(data: bytes) -> list[bytes]:
    """Lines split on ``\\n`` only, newlines kept (a final unterminated line is one line)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


_Sync = tuple[int, int, int, int, int, int]


def _stable_runs(base: Sequence[bytes], ours: Sequence[bytes], theirs: Sequence[bytes]) -> list[_Sync]:
    """Runs of base lines both sides kept, as ``(base_start, base_end, ours_start, ours_end, theirs_start,
    theirs_end)``, in order, closed by an empty run at the three ends."""
    ours_blocks = SequenceMatcher(None, base, ours, autojunk=False).get_matching_blocks()
    theirs_blocks = SequenceMatcher(None, base, theirs, autojunk=False).get_matching_blocks()
    runs: list[_Sync] = []
    i = j = 0
    while i < len(ours_blocks) and j < len(theirs_blocks):
        o_base, o_at, o_len = ours_blocks[i]
        t_base, t_at, t_len = theirs_blocks[j]
        start, end = max(o_base, t_base), min(o_base + o_len, t_base + t_len)
        if start < end:
            o_start, t_start = o_at + start - o_base, t_at + start - t_base
            runs.append((start, end, o_start, o_start + end - start, t_start, t_start + end - start))
        if o_base + o_len < t_base + t_len:
            i += 1
        else:
            j += 1
    runs.append((len(base), len(base), len(ours), len(ours), len(theirs), len(theirs)))
    return runs


def _with_newline(lines: Sequence[bytes]) -> bytes:
    joined = b"".join(lines)
    return joined if not joined or joined.endswith(b"\n") else joined + b"\n"


def merge_lines(base: bytes, ours: bytes, theirs: bytes) -> LineMerge:
    r"""diff3 of three versions of a text: the merged content and the conflicting hunks.

    In the content, each conflict holds git-style markers (``<<<<<<< ours`` … ``=======`` … ``>>>>>>> theirs``);
    when there is none, the content is the clean merge.

    >>> merge_lines(b"a\nb\nc\n", b"A\nb\nc\n", b"a\nb\nC\n").content
    b'A\nb\nC\n'
    >>> [(hunk.ours, hunk.theirs) for hunk in merge_lines(b"a\n", b"x\n", b"y\n").conflicts]
    [('x\n', 'y\n')]
    """
    b, o, t = split_lines(base), split_lines(ours), split_lines(theirs)
    out: list[bytes] = []
    hunks: list[ConflictHunk] = []
    zb = zo = zt = 0
    for b_start, b_end, o_start, o_end, t_start, t_end in _stable_runs(b, o, t):
        old, mine, yours = b[zb:b_start], o[zo:o_start], t[zt:t_start]
        if yours in (mine, old):
            out += mine
        elif mine == old:
            out += yours
        else:
            hunks.append(
                ConflictHunk(
                    zo + 1,
                    b"".join(mine).decode("utf-8"),
                    zb + 1,
                    b"".join(old).decode("utf-8"),
                    zt + 1,
                    b"".join(yours).decode("utf-8"),
                )
            )
            out += [OURS_MARKER, _with_newline(mine), SEPARATOR, _with_newline(yours), THEIRS_MARKER]
        out += b[b_start:b_end]
        zb, zo, zt = b_end, o_end, t_end
    return LineMerge(b"".join(out), tuple(hunks))
