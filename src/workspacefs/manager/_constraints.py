"""``PathConstraints``: which paths, extensions and sizes a manager allows — checked before any I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from workspacefs.paths import is_within, normalize_path

__all__ = ["PathConstraints"]

DEFAULT_MAX_FILE_SIZE = 100 * 1024 * 1024


@dataclass
class PathConstraints:
    """Access rules on workspace paths (seed 003).

    Every rule applies to the *normalised* path (``..`` resolved, duplicate slashes gone), and
    containment is by whole segments, so allowing ``/safe`` never admits ``/safe-evil`` or
    ``/safe/../etc``. An empty ``allowed_paths`` or ``allowed_extensions`` means no restriction.
    Symbolic links are never followed by any workspacefs filesystem; ``allow_symlinks`` exists for
    the seed's rule and stays false.
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

    def violation(self, path: str, *, size: int | None = None, is_file: bool = True) -> str | None:
        """Why ``path`` (with ``size`` bytes of content) is refused, naming the rule; ``None`` if allowed."""
        try:
            norm = normalize_path(path)
        except PermissionError:
            return f"path {path!r} escapes the workspace root"
        except (ValueError, TypeError) as exc:
            return f"path {path!r} is invalid: {exc}"
        if self.allowed_paths and not any(is_within(norm, allowed) for allowed in self.allowed_paths):
            allowed = ", ".join("/" + a for a in self.allowed_paths)
            return f"allowed_paths: '/{norm}' is not under any allowed path ({allowed})"
        if is_file and self.allowed_extensions:
            name = norm.rsplit("/", 1)[-1].lower()
            if not any(name.endswith(ext) and len(name) > len(ext) for ext in self.allowed_extensions):
                allowed = ", ".join(sorted(self.allowed_extensions))
                return f"allowed_extensions: '/{norm}' does not end in an allowed extension ({allowed})"
        for pattern in self._compiled:
            if pattern.search("/" + norm):
                return f"blocked_patterns: '/{norm}' matches blocked pattern {pattern.pattern!r}"
        if size is not None and size > self.max_file_size:
            return f"max_file_size: {size} bytes exceeds the limit of {self.max_file_size} bytes"
        return None

    def is_allowed(self, path: str, *, size: int | None = None) -> bool:
        """True if no rule refuses ``path``."""
        return self.violation(path, size=size) is None
