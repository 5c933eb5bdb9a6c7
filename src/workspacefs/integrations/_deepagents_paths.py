"""The paths a deepagents backend takes and shows: one absolute spelling per workspace file.

deepagents matches its own permission rules against the paths the model gives, so a second spelling of the same
file (``/workspace/.env`` beside ``/.env``) would walk past a rule. Here every path is ``/`` plus the workspace
path, under the filesystem's mount point when it has one (``/workspace/src/app.py`` in a container, where
commands see the same path); any other spelling is outside the workspace.
"""

from __future__ import annotations

from workspacefs.errors import PathEscapeError
from workspacefs.paths import normalize_path

__all__ = ["VirtualPaths", "relative"]


class VirtualPaths:
    """Translation between deepagents' absolute paths and workspace paths, for one mount point (or none)."""

    def __init__(self, mount_point: str | None) -> None:
        self.prefix = "/" + normalize_path(mount_point) if mount_point else ""

    @staticmethod
    def absolute(path: str) -> str:
        """``path`` canonical and absolute, through the one validator (``InvalidPathError`` and kin)."""
        return "/" + normalize_path(path)

    def inside(self, path: str) -> str:
        """The workspace path ``path`` names (``""``: the root).

        Raises:
            PathEscapeError: ``path`` is not under the mount point.
        """
        absolute = self.absolute(path)
        if not self.prefix:
            return absolute[1:]
        if absolute == self.prefix:
            return ""
        if absolute.startswith(self.prefix + "/"):
            return absolute[len(self.prefix) + 1 :]
        raise PathEscapeError(path, f"Outside the workspace, which is {self.prefix}")

    def above(self, path: str) -> str | None:
        """The directory below ``path`` on the way to the mount point when ``path`` is above it (``/`` holds
        ``/workspace``), else ``None``."""
        base = self.absolute(path).rstrip("/")
        if not self.prefix.startswith(base + "/"):
            return None
        end = self.prefix.find("/", len(base) + 1)
        return self.prefix if end < 0 else self.prefix[:end]

    def shown(self, norm: str) -> str:
        """A workspace path as deepagents shows it."""
        if not norm:
            return self.prefix or "/"
        return f"{self.prefix}/{norm}"


def relative(shown: str, base: str) -> str:
    """``shown`` relative to the absolute directory ``base`` (its name when it is not below ``base``: a search of
    one file), as deepagents' glob rules match paths."""
    if base == "/":
        return shown[1:]
    return shown[len(base) + 1 :] if shown.startswith(base + "/") else shown.rsplit("/", 1)[-1]
