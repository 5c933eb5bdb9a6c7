"""Hydration: the files of a host directory, read race-free, for an in-memory filesystem.

``HostMount`` says which host directory and where its files land; :func:`collect_mount` reads them through
the same race-proof resolver as ``HostFilesystem`` (no symlink followed, special files passed over) and
``InMemoryFilesystem.hydrate_from_host`` applies them in one step.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workspacefs import errors
from workspacefs._hostio import HostResolver, host_error
from workspacefs.errors import LimitExceededError, PathEscapeError
from workspacefs.paths import join, normalize_path, relative_to
from workspacefs.search import PathFilter

__all__ = ["HostMount", "HydrationResult", "collect_mount", "locate_mount"]


@dataclass(frozen=True, slots=True)
class HostMount:
    """A host directory to copy into an in-memory filesystem.

    ``host_path`` is absolute, or relative to one of the allowed roots. ``mount_path`` is where its
    files land (default: ``host_path`` relative to its allowed root). ``include_glob`` and
    ``exclude_glob`` filter by name (no ``/``) or by path under ``host_path`` (with one), as grep's
    ``glob=`` does; ``max_bytes`` caps the total loaded.
    """

    host_path: str
    mount_path: str | None = None
    include_glob: tuple[str, ...] = ()
    exclude_glob: tuple[str, ...] = ()
    max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class HydrationResult:
    """What ``hydrate_from_host`` loaded, and how many entries it passed over (links, special files,
    names the path rules reject)."""

    files: int
    bytes: int
    skipped: int


def locate_mount(host_path: str, allowed_roots: Sequence[str | os.PathLike[str]]) -> tuple[str, str]:
    """The allowed root holding ``host_path`` and the path below it (segment-aware, lexical)."""
    roots = [os.path.realpath(os.fspath(r)) for r in allowed_roots]
    if not roots:
        raise PathEscapeError(host_path, "No allowed host roots were given")
    if os.path.isabs(host_path):
        wanted = os.path.normpath(host_path)
        for root in roots:
            if wanted == root or wanted.startswith(root.rstrip("/") + "/"):
                return root, normalize_path(wanted[len(root) :])
        raise PathEscapeError(host_path, "Mount is outside the allowed host roots")
    relative = normalize_path(host_path)  # '..' out of the root raises PermissionError
    for root in roots:
        if os.path.lexists(os.path.join(root, relative)) or len(roots) == 1:
            return root, relative
    return roots[0], relative


def collect_mount(
    mount: HostMount, root: str, relative: str, target_base: str, normalize: Callable[[str], str]
) -> tuple[dict[str, bytes], int, int]:
    """Read a mount's files race-free: ``({target path: bytes}, total bytes, entries skipped)``."""
    include = [PathFilter(g) for g in mount.include_glob]
    exclude = [PathFilter(g) for g in mount.exclude_glob]
    loaded: dict[str, bytes] = {}
    total = skipped = 0
    resolver = HostResolver(root)
    try:
        try:
            info = resolver.fstat_path(relative)
        except OSError as exc:
            raise host_error(exc.errno or errno.EIO, mount.host_path) from None
        if not stat.S_ISDIR(info.st_mode):
            raise errors.not_a_directory(mount.host_path)
        for path in resolver.walk_files(relative):
            inner = relative_to(path, relative)
            if include and not any(f.accepts(inner, "") for f in include):
                continue
            if any(f.accepts(inner, "") for f in exclude):
                continue
            data = _read_host_file(resolver, path)
            try:
                target = normalize(join(target_base, inner))
            except (ValueError, PermissionError):
                data = None
            if data is None:
                skipped += 1
                continue
            total += len(data)
            if mount.max_bytes is not None and total > mount.max_bytes:
                raise LimitExceededError(f"Mount {mount.host_path!r} holds more than max_bytes={mount.max_bytes}")
            loaded[target] = data
    finally:
        resolver.close()
    return loaded, total, skipped


def _read_host_file(resolver: HostResolver, path: str) -> bytes | None:
    """A regular file's bytes, or ``None`` for anything else (or something that vanished)."""
    try:
        fd = resolver.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 1024 * 1024):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
