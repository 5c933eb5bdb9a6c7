"""``PathConstraints``: which paths, extensions and sizes a manager allows — checked before any I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from workspacefs.errors import FileTooLargeError, InvalidPathError, PathEscapeError, PolicyDeniedError
from workspacefs.paths import is_within, normalize_path

__all__ = ["REFUSALS", "Operation", "PathConstraints", "refusal_reason"]

DEFAULT_MAX_FILE_SIZE = 100 * 1024 * 1024

Operation = Literal["read", "write", "delete"]
"""What an operation does to one path (the names ``PolicyDeniedError.operation`` uses)."""

REFUSALS: tuple[type[Exception], ...] = (
    PolicyDeniedError,
    FileTooLargeError,
    PathEscapeError,
    InvalidPathError,
    TypeError,
)
"""Every error :meth:`PathConstraints.check` raises: a refusal by a rule, as opposed to a failed I/O."""


@dataclass
class PathConstraints:
    """Access rules on workspace paths.

    Every rule applies to the *normalised* path (``..`` resolved, duplicate slashes gone), and
    containment is by whole segments, so allowing ``/safe`` never admits ``/safe-evil`` or
    ``/safe/../etc``. An empty ``allowed_paths`` or ``allowed_extensions`` means no restriction.
    ``max_file_size`` bounds the size a file has *after* an operation (an append counts what is already
    there, a copy the source's size), and every rule applies to each file a directory operation touches.
    Symbolic links are never followed by any workspacefs filesystem; ``allow_symlinks`` is accepted so
    configurations that name it keep working, and setting it true is refused.
    """

    allowed_paths: list[str] = field(default_factory=list)
    allowed_extensions: set[str] = field(default_factory=set)
    blocked_patterns: list[str] = field(default_factory=list)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    allow_symlinks: bool = False
    _compiled: list[re.Pattern[str]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.allowed_paths = [normalize_path(p) for p in self.allowed_paths]
        self.allowed_extensions = {self._extension(e) for e in self.allowed_extensions}
        self._compiled = [re.compile(p) for p in self.blocked_patterns]
        if self.allow_symlinks:
            raise ValueError("workspacefs never follows symbolic links; allow_symlinks cannot be enabled")

    @staticmethod
    def _extension(extension: str) -> str:
        extension = extension.strip().lower()
        return extension if extension.startswith(".") else "." + extension

    def add_allowed_path(self, path: str) -> None:
        """Allow ``path`` and everything below it."""
        self.allowed_paths.append(normalize_path(str(path)))

    def add_allowed_extension(self, extension: str) -> None:
        """Allow files ending in ``extension`` (``".txt"`` or ``"txt"``; case-insensitive)."""
        self.allowed_extensions.add(self._extension(extension))

    def block_pattern(self, pattern: str) -> None:
        """Refuse paths matching the regular expression ``pattern`` (searched in ``/``-prefixed paths)."""
        self._compiled.append(re.compile(pattern))
        self.blocked_patterns.append(pattern)

    def check(
        self, path: str, *, size: int | None = None, is_file: bool = True, operation: Operation = "write"
    ) -> None:
        """Raise the typed error of the first rule refusing ``path``; ``size`` is the size the file will have.

        The one place the rules live: every caller passes the size a file has *after* the operation.
        Raises ``PathEscapeError``/``InvalidPathError``/``TypeError`` for a bad path, ``PolicyDeniedError``
        for a path rule and ``FileTooLargeError`` for ``max_file_size``; no I/O.
        """
        norm = normalize_path(path)
        shown = "/" + norm
        if self.allowed_paths and not any(is_within(norm, allowed) for allowed in self.allowed_paths):
            allowed = ", ".join("/" + a for a in self.allowed_paths)
            reason = f"allowed_paths: '{shown}' is not under any allowed path ({allowed})"
            raise PolicyDeniedError(path, reason, operation=operation)
        if is_file and self.allowed_extensions:
            name = norm.rsplit("/", 1)[-1].lower()
            if not any(name.endswith(ext) and len(name) > len(ext) for ext in self.allowed_extensions):
                allowed = ", ".join(sorted(self.allowed_extensions))
                reason = f"allowed_extensions: '{shown}' does not end in an allowed extension ({allowed})"
                raise PolicyDeniedError(path, reason, operation=operation)
        for pattern in self._compiled:
            if pattern.search(shown):
                reason = f"blocked_patterns: '{shown}' matches blocked pattern {pattern.pattern!r}"
                raise PolicyDeniedError(path, reason, operation=operation, pattern=pattern.pattern)
        if size is not None and size > self.max_file_size:
            reason = f"max_file_size: {size} bytes exceeds the limit of {self.max_file_size} bytes"
            raise FileTooLargeError(path, reason)

    def violation(self, path: str, *, size: int | None = None, is_file: bool = True) -> str | None:
        """Why ``path`` (with ``size`` bytes of content) is refused, naming the rule; ``None`` if allowed."""
        try:
            self.check(path, size=size, is_file=is_file)
        except REFUSALS as exc:
            return refusal_reason(exc)
        return None

    def is_allowed(self, path: str, *, size: int | None = None) -> bool:
        """True if no rule refuses ``path``."""
        return self.violation(path, size=size) is None


def refusal_reason(exc: BaseException) -> str:
    """The reason a refusal gives, naming the rule (or the path's defect) so a model knows what to change."""
    if isinstance(exc, (PolicyDeniedError, FileTooLargeError)):
        return str(exc.strerror)
    if isinstance(exc, PathEscapeError):
        return f"path {exc.filename!r} escapes the workspace root"
    return f"invalid path: {exc}"
