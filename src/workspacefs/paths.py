"""The one path normaliser and validator, and every limit the backends share (DESIGN §3).

Every backend and every tool calls :func:`normalize_path` before touching storage. A normalised
path is relative to the workspace root, ``/``-separated, with no ``.``, ``..``, empty segment or
leading ``/``; the root itself is ``""``. Escapes raise ``PathEscapeError`` (a
``PermissionError``); malformed input raises ``InvalidPathError`` (a ``ValueError``). Validation is
purely lexical: it never consults the storage, so it cannot be raced.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator
from typing import Literal

from workspacefs.errors import (
    InvalidPathError,
    InvalidTextError,
    NameTooLongError,
    PathEscapeError,
    PathTooDeepError,
    PathTooLongError,
    UnsafeNameError,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_GREP_MATCHES",
    "DEFAULT_READ_LIMIT",
    "MAX_CONVENIENCE_BYTES",
    "MAX_PATH_CHARS",
    "MAX_PATH_DEPTH",
    "MAX_SEGMENT_LENGTH",
    "RESERVED_PREFIX",
    "ROOT",
    "ancestors",
    "anchored_pattern",
    "basename",
    "check_non_negative",
    "check_text",
    "display_path",
    "encode_text",
    "is_within",
    "join",
    "name_problem",
    "normalize_cached",
    "normalize_mount_point",
    "normalize_path",
    "parent",
    "relative_to",
    "strict_path",
    "strict_path_pattern",
]

MAX_PATH_DEPTH = 16
"""More segments than this raise ``PathTooDeepError`` (a ``ValueError``)."""
MAX_SEGMENT_LENGTH = 80
"""A segment longer than this many characters raises ``NameTooLongError`` (a ``ValueError``)."""
RESERVED_PREFIX = ".wsfs-tmp-"
"""Names beginning so, in any case, are workspacefs's own (a host's temporary files and hidden directories, never
listed): a path naming one raises ``InvalidPathError``, so nothing can be kept out of view under such a name."""
MAX_PATH_CHARS = 4096
"""Raw input longer than this is refused before any parsing (bounds the work a hostile path costs)."""
MAX_CONVENIENCE_BYTES = 32 * 1024 * 1024
"""``read``/``read_bytes``/``write``/``write_bytes`` admit exactly this much and no more."""
DEFAULT_READ_LIMIT = 2000
"""Lines returned by ``read`` when ``limit`` is ``None``."""
DEFAULT_MAX_GREP_MATCHES = 1000
"""Matches returned by ``grep`` when ``max_matches`` is ``None``."""
DEFAULT_CHUNK_SIZE = 64 * 1024
"""Chunk size of streaming reads."""

ROOT = ""
"""The normalised form of the workspace root."""

# C0 controls and DEL (DESIGN §3). NUL is among them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Unicode's Bidi_Control characters: they reorder how a name displays ("gpj.exe" shown as "exe.jpg").
_BIDI_CONTROL = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Lone surrogates: not Unicode text (a host name that is not UTF-8 arrives with them, surrogate-escaped).
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSAFE_CHAR = re.compile(f"{_BIDI_CONTROL.pattern}|{_SURROGATE.pattern}")


def check_text(argument: str, text: str) -> None:
    """Refuse text that is not Unicode (a lone surrogate: JSON carries ``"\\ud800"``, UTF-8 cannot encode it) with
    ``InvalidTextError`` naming ``argument``: the one check of tags and patterns, the same in every backend."""
    if not text.isascii() and (found := _SURROGATE.search(text)) is not None:
        raise _text_refusal(argument, text, found.start())


def encode_text(argument: str, text: str) -> bytes:
    """``text`` in UTF-8, or :func:`check_text`'s refusal (its check costs nothing until the encoding fails)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _text_refusal(argument, text, exc.start) from None


def _text_refusal(argument: str, text: str, at: int) -> InvalidTextError:
    return InvalidTextError(
        f"{argument} is not valid Unicode text: it holds a lone surrogate (U+{ord(text[at]):04X} at character {at}), "
        "which no file or store can keep; send valid text"
    )


def name_problem(name: str) -> InvalidPathError | None:
    """Why the validator refuses ``name`` (a directory entry's name: not empty, ``.``, ``..``, no ``/``) as a
    segment of a path, or ``None``. Host listings apply it too, so every name they show can be used.

    Refused: more than 80 characters, a control character, a lone surrogate, a bidirectional-control
    character, or a name not in Unicode NFC form (only NFC names exist, so no two names are NFC/NFD twins).
    """
    if len(name) > MAX_SEGMENT_LENGTH:
        return NameTooLongError(f"Path segment is longer than {MAX_SEGMENT_LENGTH} characters: {name[:20]!r}…")
    if _is_reserved(name):
        return _reserved(name)
    if name.isascii() and name.isprintable():  # the common case, in one pass: ASCII that is not C0 or DEL
        return None
    if _CONTROL.search(name) is not None:
        return InvalidPathError(f"Path contains a control character: {name!r}")
    if name.isascii() or _is_unicode_safe(name):
        return None
    return _unicode_refusal(name)


def _is_unicode_safe(text: str) -> bool:
    """The Unicode rule, for one name or a whole path (both tests give the same answer per segment: ``/``
    never composes with a neighbour): no lone surrogate, no bidirectional control, NFC form."""
    return _UNSAFE_CHAR.search(text) is None and unicodedata.is_normalized("NFC", text)


def _unicode_refusal(name: str) -> InvalidPathError:
    """The error for a name that breaks the Unicode rule, saying which part of it."""
    if (found := _SURROGATE.search(name)) is not None:
        return InvalidPathError(f"Path segment {name!r} is not valid Unicode (lone surrogate U+{ord(found[0]):04X})")
    if (found := _BIDI_CONTROL.search(name)) is not None:
        return UnsafeNameError(
            f"Path segment {name!r} contains the bidirectional-control character U+{ord(found[0]):04X}, which can "
            "make a name display as another"
        )
    composed = unicodedata.normalize("NFC", name)
    return UnsafeNameError(f"Path segment {name!a} is not in Unicode NFC form; write it composed, as {composed!r}")


def _first_problem(path: str) -> InvalidPathError:
    """The error of the first refused segment of ``path``, one that :func:`_is_unicode_safe` refused."""
    for segment in path.split("/"):
        problem = name_problem(segment)
        if problem is not None:
            return problem
    return _unicode_refusal(path)  # unreachable while the rule holds per segment; never let a bad path pass


def normalize_path(path: str, *, mount_point: str | None = None) -> str:
    """Return the normalised, root-relative form of ``path``; ``""`` means the root.

    ``""``, ``"."`` and ``"/"`` are the root. With ``mount_point="/workspace"``,
    ``"/workspace/a.txt"`` is ``"a.txt"``; any other leading ``/`` is root-relative, never the
    host's ``/``. ``..`` is resolved lexically.

    Raises:
        TypeError: ``path`` is not a ``str``.
        InvalidPathError (a ``ValueError``): control characters, lone surrogates; its subclasses
            ``NameTooLongError`` (a segment over 80 characters), ``PathTooDeepError`` (more than 16 segments),
            ``PathTooLongError``, ``UnsafeNameError`` (a bidirectional control, a name not in NFC form).
        PathEscapeError (a ``PermissionError``): ``..`` would leave the root.
    """
    if type(path) is not str:
        if not isinstance(path, str):
            raise TypeError(f"path must be a str, not {type(path).__name__}")
        path = str.__str__(path)  # a str subclass must not steer the cache below with its own __eq__
    return normalize_cached(path, mount_point)


@functools.lru_cache(maxsize=16384)
def normalize_cached(path: str, mount_point: str | None) -> str:
    """The work of :func:`normalize_path` for an exact ``str``, memoised: agents touch the same paths again
    and again. Callers must pass ``type(path) is str`` (a subclass could fool the cache with its ``__eq__``)."""
    if len(path) > MAX_PATH_CHARS:
        raise PathTooLongError(f"Path is longer than {MAX_PATH_CHARS} characters")
    if _CONTROL.search(path) is not None:
        raise InvalidPathError(f"Path contains a control character: {path!r}")
    if not path.isascii() and not _is_unicode_safe(path):  # ASCII, the common case, needs no Unicode check
        raise _first_problem(path)
    rest = path
    if mount_point and (rest == mount_point or rest.startswith(mount_point + "/")):
        rest = rest[len(mount_point) :]
    segments: list[str] = []
    for segment in rest.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise PathEscapeError(path)
            segments.pop()
            continue
        if len(segment) > MAX_SEGMENT_LENGTH:
            raise NameTooLongError(f"Path segment is longer than {MAX_SEGMENT_LENGTH} characters: {segment[:20]!r}…")
        segments.append(segment)
    return _joined(path, segments)


def _joined(path: str, segments: list[str]) -> str:
    """The normalised path of ``segments`` (of ``path``): not too deep, naming nothing reserved."""
    if len(segments) > MAX_PATH_DEPTH:
        raise PathTooDeepError(f"Path has more than {MAX_PATH_DEPTH} segments: {path!r}")
    if "." in path:
        for segment in segments:
            if _is_reserved(segment):
                raise _reserved(segment)
    return "/".join(segments)


def _is_reserved(name: str) -> bool:
    """Whether ``name`` begins with :data:`RESERVED_PREFIX` in any case (``.WSFS-TMP-``; U+017F long s for ``s``):
    on a case-insensitive host directory those are the same names."""
    return name[:1] == "." and name.casefold().startswith(RESERVED_PREFIX)


def _reserved(name: str) -> InvalidPathError:
    return InvalidPathError(f"Names beginning with {RESERVED_PREFIX!r} are reserved for workspacefs: {name!r}")


def strict_path(path: str) -> str:
    """Validate a path that must already be canonical (no ``..``, no ``//``) and normalise it.

    For wire protocols, where a client that sends ``a//b`` or ``a/../b`` has a bug worth reporting
    rather than a path worth guessing at. A leading ``/`` and one trailing ``/`` are accepted.

    Raises:
        ValueError: anything :func:`normalize_path` refuses, and ``.``/``..``/empty segments.
    """
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, not {type(path).__name__}")
    body = path[1:] if path.startswith("/") else path
    if body.endswith("/"):
        body = body[:-1]
        if not body:
            raise InvalidPathError(f"Path must be canonical; {path!r} has an empty segment (//)")
    if body:
        for segment in body.split("/"):
            if segment in ("", ".", ".."):
                kind = "an empty segment (//)" if not segment else f"a {segment!r} segment"
                raise InvalidPathError(f"Path must be canonical; {path!r} has {kind}")
    try:
        return normalize_path(body)
    except PermissionError as exc:  # cannot happen without '..', but keep the contract: ValueError only
        raise InvalidPathError(str(exc)) from None


def strict_path_pattern(
    *, slash: Literal["required", "optional", "forbidden"], allow_root: bool = True, reserved: str | None = None
) -> str:
    """A regular expression (no lookarounds, so JSON Schema tools can generate from it) for exactly the
    paths :func:`strict_path` accepts: 1 to 16 segments of 1 to 80 characters, none ``.`` or ``..``,
    no control or bidirectional-control character, one optional trailing ``/``. (That a name must be in NFC
    form is beyond a regular expression: the validator alone says so.) ``reserved``: a first segment that is refused.

    It documents the rule in API schemas; :func:`strict_path` stays the one that enforces it.
    """
    controls = r"\x00-\x1f\x7f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # and bidirectional controls
    char = rf"[^/{controls}]"
    longest = MAX_SEGMENT_LENGTH

    def segment(excluded: str = "") -> str:
        # anything but "." and "..": a first character that is not a dot, or a dot then a non-dot, or two
        # dots then more; a reserved first character only with more after it
        alternatives = [
            rf"[^/.{re.escape(excluded)}{controls}]{char}{{0,{longest - 1}}}",
            rf"\.[^/.{controls}]{char}{{0,{longest - 2}}}",
            rf"\.\.{char}{{1,{longest - 2}}}",
        ]
        if excluded:
            alternatives.append(rf"{re.escape(excluded)}{char}{{1,{longest - 1}}}")
        return "(?:" + "|".join(alternatives) + ")"

    if reserved is not None and (len(reserved) != 1 or reserved in "./" or _CONTROL.match(reserved)):
        raise ValueError("reserved must be one ordinary character")
    first = segment(reserved or "")
    rest = segment()
    body = f"{first}(?:/{rest}){{0,{MAX_PATH_DEPTH - 1}}}/?"
    lead = {"required": "/", "optional": "/?", "forbidden": ""}[slash]
    return f"^{lead}(?:{body})?$" if allow_root else f"^{lead}{body}$"


def normalize_mount_point(mount_point: str | None) -> str | None:
    """Validate a mount point: an absolute path such as ``/workspace``; ``None`` or ``"/"`` disable it."""
    if mount_point is None:
        return None
    if not isinstance(mount_point, str) or not mount_point.startswith("/"):
        raise ValueError(f"mount_point must be an absolute path such as '/workspace', got {mount_point!r}")
    normalized = normalize_path(mount_point)
    return "/" + normalized if normalized else None


def anchored_pattern(pattern: str, mount_point: str | None) -> str | None:
    """The root-relative form of a glob written as an absolute path (``/workspace/src/*.py`` under mount
    point ``/workspace``, or ``/src/*.py``), so patterns take the same paths every path parameter takes;
    ``None`` for a relative pattern."""
    if mount_point and (pattern == mount_point or pattern.startswith(mount_point + "/")):
        return pattern[len(mount_point) :].lstrip("/")
    if pattern.startswith("/"):
        return pattern.lstrip("/")
    return None


def check_non_negative(name: str, value: int | None) -> None:
    """Raise ``ValueError`` for a negative (or non-integer) offset or limit."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")


def join(base: str, name: str) -> str:
    """Join a normalised directory and a child name."""
    return f"{base}/{name}" if base else name


def parent(path: str) -> str:
    """Parent of a normalised path (the root's parent is the root)."""
    index = path.rfind("/")
    return path[:index] if index >= 0 else ROOT


def basename(path: str) -> str:
    """Last segment of a normalised path (``""`` for the root)."""
    return path[path.rfind("/") + 1 :]


def ancestors(path: str) -> Iterator[str]:
    """Proper ancestors of a normalised path, nearest the root first, excluding the root itself."""
    index = path.find("/")
    while index >= 0:
        yield path[:index]
        index = path.find("/", index + 1)


def is_within(path: str, base: str) -> bool:
    """True if ``path`` is ``base`` or below it, by whole segments (``a/bc`` is not within ``a/b``)."""
    return not base or path == base or path.startswith(base + "/")


def relative_to(path: str, base: str) -> str:
    """``path`` relative to ``base``; ``path`` must be within ``base``."""
    if not base:
        return path
    return "" if path == base else path[len(base) + 1 :]


def display_path(path: str) -> str:
    """A normalised path for a message: the root shows as ``/``."""
    return path or "/"
