"""The mount table of a ``CompositeFilesystem``: which filesystem serves a path (longest mount point wins),
and which directories exist only because a mount point lies below them.

Paths here are normalised workspace paths (``""`` is the root). A mount at ``""`` serves everything no other
mount claims; without one, the root and the ancestors of the mount points are directories of the composite
itself, which hold nothing but what is mounted below them.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from workspacefs.paths import ROOT, ancestors, is_within, join, normalize_path
from workspacefs.protocol import Filesystem

__all__ = ["MountTable", "Mounted"]


@dataclass(frozen=True, slots=True)
class Mounted:
    """One mounted filesystem and where it sits (``point`` normalised; ``""`` is the root)."""

    point: str
    fs: Filesystem
    spelled: str
    """The mount point as given (``/workspace``), for messages and snapshot records."""

    def inner(self, path: str) -> str:
        """``path`` (at or below the mount point) as the mounted filesystem names it (``"."`` for its root)."""
        if not self.point:
            return path or "."
        return path[len(self.point) + 1 :] or "." if path != self.point else "."

    def outer(self, inner_path: str) -> str:
        """A path of the mounted filesystem as the composite names it."""
        inner_path = inner_path.lstrip("/")
        if inner_path in ("", "."):
            return self.point
        return join(self.point, inner_path)

    @contextmanager
    def speaking_outside(self) -> Iterator[None]:
        """Rename the paths an error of the mounted filesystem names into the composite's paths."""
        try:
            yield
        except OSError as exc:
            for slot in ("filename", "filename2"):
                name = getattr(exc, slot)
                if isinstance(name, str) and not name.startswith("/"):
                    setattr(exc, slot, self.outer(name))
            raise


class MountTable:
    """Mount points, normalised and checked, and the questions routing asks of them."""

    def __init__(self, mounts: Mapping[str, Filesystem]) -> None:
        if not isinstance(mounts, Mapping) or not mounts:
            raise ValueError("A CompositeFilesystem needs at least one mount, such as {'/workspace': fs}")
        table: dict[str, Mounted] = {}
        for spelled, fs in mounts.items():
            if not isinstance(spelled, str) or not spelled.startswith("/"):
                raise ValueError(f"Mount points are absolute paths such as '/workspace', not {spelled!r}")
            if not isinstance(fs, Filesystem):
                raise TypeError(f"The mount {spelled!r} is a {type(fs).__name__}, not a workspacefs filesystem")
            point = normalize_path(spelled)
            if point in table:
                raise ValueError(f"Two mounts at {spelled!r} (as {table[point].spelled!r})")
            table[point] = Mounted(point, fs, "/" + point)
        self._mounts = table
        self._by_depth = sorted(table.values(), key=lambda m: -len(m.point))  # longest first
        self._holding: set[str] = {ROOT}
        for point in table:
            self._holding.add(point)
            self._holding.update(ancestors(point))

    def __iter__(self) -> Iterator[Mounted]:
        """Every mount, by mount point."""
        return iter(sorted(self._mounts.values(), key=lambda m: m.point))

    def __len__(self) -> int:
        """How many filesystems are mounted."""
        return len(self._mounts)

    def route(self, path: str) -> Mounted | None:
        """The mount serving ``path`` (the longest mount point at or above it), or ``None``."""
        for mounted in self._by_depth:
            if is_within(path, mounted.point):
                return mounted
        return None

    def serving(self, path: str) -> Mounted:
        """The mount serving ``path``; a path no mount serves can hold nothing, so it is not found."""
        mounted = self.route(path)
        if mounted is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory (nothing is mounted here)", path)
        return mounted

    def holds_mount(self, path: str) -> bool:
        """True if ``path`` is a mount point, or a directory with a mount point below it (or the root)."""
        return path in self._holding

    def is_mount_point(self, path: str) -> bool:
        """True if a filesystem is mounted exactly at ``path``."""
        return path in self._mounts

    def children(self, path: str) -> list[str]:
        """Names of the mount points, and of the directories leading to them, directly below ``path``."""
        depth = len(path) + 1 if path else 0
        names = {held[depth:].split("/", 1)[0] for held in self._holding if held != path and is_within(held, path)}
        names.discard("")
        return sorted(names)

    def below(self, path: str) -> list[Mounted]:
        """The mounts strictly below ``path``."""
        return [m for m in self if m.point != path and is_within(m.point, path) and (path or m.point)]

    def shadowed(self, mounted: Mounted, path: str) -> bool:
        """True if ``path`` (in ``mounted``'s part of the tree) is hidden by a mount point nested in it."""
        return any(
            other.point != mounted.point and is_within(other.point, mounted.point) and is_within(path, other.point)
            for other in self._by_depth
        )

    def spelled(self) -> str:
        """The mount points, for messages."""
        return ", ".join(m.spelled for m in self)
