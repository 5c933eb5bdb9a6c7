"""Patch texts models write: the Codex ``*** Begin Patch`` grammar and OpenAI's V4A diffs, parsed and applied
to text (pure functions: no filesystem here).

Parsing follows the Codex reference (``codex-rs/apply-patch``): the patch is trimmed, may be wrapped in a
``<<'EOF'`` heredoc, markers are matched without surrounding whitespace, the first chunk of an update may
omit ``@@``, and an empty line inside a chunk is an empty context line. Context is found as the reference
finds it — exactly, then ignoring trailing whitespace, then surrounding whitespace, then with typographic
dashes, quotes and spaces read as their ASCII forms — and every failure quotes the lines that did not match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Chunk",
    "FileOperation",
    "PatchError",
    "apply_chunks",
    "parse_patch",
    "parse_v4a_create",
    "parse_v4a_update",
    "proves_nothing",
]

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE, MOVE = "*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: "
END_OF_FILE = "*** End of File"
_HEREDOCS = ("<<EOF", "<<'EOF'", '<<"EOF"')


class PatchError(ValueError):
    """A patch that cannot be parsed or does not fit the file it names (the message quotes what failed)."""


@dataclass(slots=True)
class Chunk:
    """One ``@@`` section: the anchor lines before it, the lines it expects and the lines it leaves."""

    anchors: list[str] = field(default_factory=list)
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    end_of_file: bool = False


@dataclass(slots=True)
class FileOperation:
    """One file of a patch: ``add`` (``content``), ``delete``, or ``update`` (``chunks``, maybe ``move_to``)."""

    kind: Literal["add", "delete", "update"]
    path: str
    content: str = ""
    chunks: list[Chunk] = field(default_factory=list)
    move_to: str | None = None


def _lines(text: str) -> list[str]:
    """Split on LF only, dropping each line's CR (as Rust's ``lines``), without the empty tail."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _unwrap(text: str) -> list[str]:
    lines = _lines(text.strip())
    if len(lines) >= 4 and lines[0].strip() in _HEREDOCS and lines[-1].strip().endswith("EOF"):
        lines = lines[1:-1]
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"The first line of the patch must be '{BEGIN}'.")
    end = len(lines) - 1
    while end > 0 and not lines[end].strip():
        end -= 1
    if end == 0 or lines[end].strip() != END:
        raise PatchError(f"The last line of the patch must be '{END}'.")
    return lines[1:end]


def _header(line: str) -> tuple[str, str] | None:
    stripped = line.strip()
    for marker in (ADD, DELETE, UPDATE):
        if stripped == marker.rstrip() or stripped.startswith(marker):  # a header without its path is still one
            return marker, stripped[len(marker) :].strip()
    return None


def _hunk_error(number: int, message: str) -> PatchError:
    return PatchError(f"Invalid patch at line {number}: {message}")


def parse_patch(text: str) -> list[FileOperation]:
    """The operations of a ``*** Begin Patch`` … ``*** End Patch`` text (``PatchError`` if malformed)."""
    lines = _unwrap(text)
    operations: list[FileOperation] = []
    index = 0
    while index < len(lines):
        number = index + 2  # 1-based, counting the Begin Patch line
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        header = _header(line)
        if header is None or not header[1]:
            raise _hunk_error(
                number,
                f"'{line.strip()}' is not a valid file header. Valid headers: '{ADD}<path>', '{DELETE}<path>', "
                f"'{UPDATE}<path>'.",
            )
        marker, path = header
        index += 1
        if marker == DELETE:
            operations.append(FileOperation("delete", path))
        elif marker == ADD:
            body: list[str] = []
            while index < len(lines) and lines[index].startswith("+"):
                body.append(lines[index][1:])
                index += 1
            operations.append(FileOperation("add", path, content="".join(f"{b}\n" for b in body)))
        else:
            operation = FileOperation("update", path)
            if index < len(lines) and lines[index].strip().startswith(MOVE.rstrip()):
                operation.move_to = lines[index].strip()[len(MOVE) :].strip() or None
                index += 1
            index = _parse_chunks(lines, index, operation.chunks, number)
            if not operation.chunks and operation.move_to is None:
                raise _hunk_error(number, f"the update of '{path}' is empty.")
            operations.append(operation)
    if not operations:
        raise PatchError("The patch changes no files.")
    return operations


def _add_line(current: Chunk | None, chunks: list[Chunk], line: str) -> Chunk:
    """Add a ' ', '-' or '+' line (an empty line is empty context) to the open chunk, opening one if needed."""
    if current is None:
        current = Chunk()
        chunks.append(current)
    kind, body = (line[0], line[1:]) if line else (" ", "")
    if kind in " -":
        current.old.append(body)
    if kind in " +":
        current.new.append(body)
    return current


def _parse_chunks(lines: Sequence[str], index: int, chunks: list[Chunk], number: int) -> int:
    """Read ``@@`` sections from ``lines[index:]`` into ``chunks`` until the next file header; the index after."""
    current: Chunk | None = None
    while index < len(lines):
        line = lines[index]
        trimmed = line.rstrip()
        if _header(line) is not None or trimmed == END:
            break
        if trimmed == END_OF_FILE:
            if current is None or not (current.old or current.new):
                raise _hunk_error(index + 2, f"'{END_OF_FILE}' must follow the lines of a chunk.")
            current.end_of_file = True
            current = None
        elif trimmed == "@@" or trimmed.startswith("@@ "):
            anchor = trimmed[3:] if trimmed.startswith("@@ ") else None
            if current is None or current.old or current.new:
                current = Chunk()
                chunks.append(current)
            if anchor is not None:
                current.anchors.append(anchor)  # stacked anchors narrow the place step by step
        elif line == "" or line[0] in " +-":
            current = _add_line(current, chunks, line)
        else:
            raise _hunk_error(
                index + 2,
                f"unexpected line '{line}'. Every line of a chunk starts with ' ' (context), '+' (added) or "
                "'-' (removed); a new section starts with '@@'.",
            )
        index += 1
    if any(not (chunk.old or chunk.new) for chunk in chunks):
        raise _hunk_error(number, "a '@@' section has no lines.")
    return index


def parse_v4a_update(diff: str) -> list[Chunk]:
    """The sections of an OpenAI ``update_file`` diff (V4A: ``@@`` anchors, then ' '/'-'/'+' lines)."""
    lines = _lines(diff)
    chunks: list[Chunk] = []
    index = _parse_chunks(lines, 0, chunks, 1)
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index < len(lines) and lines[index].rstrip() != END:
        raise _hunk_error(index + 1, f"unexpected line '{lines[index]}' in an update_file diff.")
    if not chunks:
        raise PatchError("The diff has no changes: give '@@' sections with ' ', '-' and '+' lines.")
    return chunks


def parse_v4a_create(diff: str) -> str:
    """The content of an OpenAI ``create_file`` diff: every line starts with '+'."""
    body: list[str] = []
    for number, line in enumerate(_lines(diff), start=1):
        if not line.startswith("+"):
            raise _hunk_error(number, f"'{line}' does not start with '+'; every line of a new file does.")
        body.append(line[1:])
    return "".join(f"{b}\n" for b in body)


# --- applying -------------------------------------------------------------------------------------

_PUNCTUATION = str.maketrans(
    {
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
        **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "),
    }
)
_WHITESPACE = (  # Unicode White_Space, as Rust's trim (Python's strip also takes \x1c-\x1f)
    " \t\n\r\x0b\x0c\u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def _exact(line: str) -> str:
    return line


def _rstrip(line: str) -> str:
    return line.rstrip(_WHITESPACE)


def _strip(line: str) -> str:
    return line.strip(_WHITESPACE)


def _normalised(line: str) -> str:
    return line.strip(_WHITESPACE).translate(_PUNCTUATION)


_PASSES = (_exact, _rstrip, _strip, _normalised)


def seek(
    lines: list[str],
    pattern: Sequence[str],
    start: int,
    *,
    end_of_file: bool = False,
    normalised: dict[Callable[[str], str], list[str]] | None = None,
) -> int | None:
    """Where ``pattern`` first occurs in ``lines`` at or after ``start`` (at the very end with
    ``end_of_file``), trying each tolerance in turn; ``None`` if it occurs nowhere. ``normalised`` keeps
    each tolerance's view of ``lines`` between calls on the same lines."""
    if not pattern:
        return start
    last = len(lines) - len(pattern)
    first = max(last, start) if end_of_file else start
    if first > last:
        return None
    views = normalised if normalised is not None else {}
    for normalise in _PASSES:
        wanted = [normalise(p) for p in pattern]
        view = lines if normalise is _exact else views.get(normalise)
        if view is None:  # made once per tolerance for the whole patch of this file, never per chunk
            view = views[normalise] = [normalise(line) for line in lines]
        position = first
        while True:  # jump between places where the first line matches; compare the rest as one slice
            try:
                position = view.index(wanted[0], position, last + 1)
            except ValueError:
                break
            if view[position : position + len(wanted)] == wanted:
                return position
            position += 1
    return None


def proves_nothing(chunk: Chunk) -> bool:
    """True if ``chunk`` names no line of the file: no anchor, and every line it expects is blank (whitespace alone
    matches any empty line, since context is also matched ignoring surrounding whitespace)."""
    return not chunk.anchors and all(not _strip(line) for line in chunk.old)


def apply_chunks(text: str, chunks: Sequence[Chunk], where: str, *, insert_at_end: bool) -> str:
    """``text`` with every chunk applied in order (``PatchError`` quoting the first that does not fit).

    CRLF files stay CRLF, and the file keeps (or lacks) its final newline. A chunk that only adds lines goes
    after its anchor when it has one, else at the end (``insert_at_end``, Codex) or at the current place.
    """
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    body = text.replace("\r\n", "\n") if crlf else text
    final_newline = body.endswith("\n") or body == ""
    lines = body.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    replacements: list[tuple[int, int, list[str]]] = []
    views: dict[Callable[[str], str], list[str]] = {}  # the lines change only after every chunk is placed
    cursor = 0
    for number, chunk in enumerate(chunks, start=1):
        anchored = False
        for anchor in chunk.anchors:
            found = seek(lines, [anchor], cursor, normalised=views)
            if found is None:
                raise PatchError(f"Failed to find context '{anchor}' in {where} (section {number}).")
            cursor, anchored = found + 1, True
        if not chunk.old:
            at = cursor if anchored or not insert_at_end else len(lines)
            replacements.append((at, 0, chunk.new))
            continue
        old, new = chunk.old, chunk.new
        found = seek(lines, old, cursor, end_of_file=chunk.end_of_file, normalised=views)
        if found is None and old[-1] == "":  # a trailing empty context line the file may not have
            old, new = old[:-1], new[:-1] if new and new[-1] == "" else new
            found = seek(lines, old, cursor, end_of_file=chunk.end_of_file, normalised=views) if old else cursor
        if found is None:
            quoted = "\n".join(chunk.old)
            raise PatchError(f"Failed to find expected lines in {where} (section {number}):\n{quoted}")
        replacements.append((found, len(old), new))
        cursor = found + len(old)
    ordered = sorted(enumerate(replacements), key=lambda item: (item[1][0], item[0]), reverse=True)
    for _, (at, length, new) in ordered:  # from the end, so earlier places stay where they were
        lines[at : at + length] = new
    result = "\n".join(lines) + ("\n" if final_newline and lines else "")
    return result.replace("\n", "\r\n") if crlf else result
