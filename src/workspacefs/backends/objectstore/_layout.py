"""Where a workspace's files and directories live in a bucket, and how a listing becomes a tree.

A file at ``a/b.txt`` is the plain object ``<root>/a/b.txt``, readable by any S3 tool. A directory is a
zero-byte marker object ``<root>/a/`` (the S3 console's convention): object stores have no directories,
and a marker is what lets an empty directory exist and a directory outlive its last file. Listings still
read key prefixes, so directories that other tools made without a marker show too.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from dataclasses import dataclass, field

from workspacefs.backends._objects._client import BucketMissingError, ObjectInfo
from workspacefs.errors import ConcurrentChangeError
from workspacefs.paths import MAX_PATH_DEPTH, ROOT, ancestors, name_problem

__all__ = ["Layout", "Tree", "split_root", "usable_name", "vanished"]


def split_root(root: str) -> tuple[str, str]:
    """``"s3://bucket/some/prefix/"`` (scheme optional) as ``("bucket", "some/prefix")``."""
    if not isinstance(root, str):
        raise TypeError(f"root must be a str such as 'bucket/prefix', not {type(root).__name__}")
    rest = root.split("://", 1)[1] if "://" in root else root
    parts = [part for part in rest.split("/") if part]
    if not parts:
        raise ValueError(f"root must name a bucket, optionally with a prefix ('bucket/prefix'), not {root!r}")
    if any(part in (".", "..") for part in parts):
        raise ValueError(f"root must not contain '.' or '..' segments: {root!r}")
    return parts[0], "/".join(parts[1:])


def usable_name(name: str) -> bool:
    """True if ``name`` can be a segment of a workspace path (objects with other names are not shown)."""
    return name not in ("", ".", "..") and name_problem(name) is None


class Layout:
    """Maps workspace paths to keys under one root (``bucket/prefix``)."""

    __slots__ = ("base", "bucket", "prefix")

    def __init__(self, bucket: str, prefix: str) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self.base = f"{bucket}/{prefix}/" if prefix else f"{bucket}/"
        """Key prefix of every object of the workspace (the root directory's marker when there is a prefix)."""

    def key(self, path: str) -> str:
        """The file object's key for a normalised path."""
        return self.base + path

    def dir_key(self, path: str) -> str:
        """The directory marker's key (also the prefix of everything below the directory)."""
        return self.base + path + "/" if path else self.base

    def path_of(self, key: str) -> str | None:
        """The workspace path of a key under the root (``None`` for the root's own marker or foreign keys)."""
        if not key.startswith(self.base) or len(key) == len(self.base):
            return None
        return key[len(self.base) :]

    def named(self, key: str) -> str:
        """What an error about the object at ``key`` names: its workspace path (a marker's without the slash), the
        root for any other key; never the key, which would show the bucket (DESIGN §3)."""
        return (self.path_of(key) or ROOT).rstrip("/")


def vanished(exc: FileNotFoundError, path: str, reason: str) -> OSError:
    """The error for an object the store no longer had when a request named it: a change meanwhile (``reason``), or
    the workspace's bucket gone; either names ``path`` (the store's error names the key)."""
    if isinstance(exc, BucketMissingError):
        return FileNotFoundError(errno.ENOENT, "The workspace's bucket no longer exists", path)
    return ConcurrentChangeError(path, reason)


@dataclass(slots=True)
class Tree:
    """A workspace's objects from one recursive listing: files, every directory, and the markers present."""

    files: dict[str, ObjectInfo] = field(default_factory=dict)
    directories: set[str] = field(default_factory=set)
    markers: set[str] = field(default_factory=set)

    @classmethod
    def from_listing(cls, layout: Layout, base: str, items: Iterable[ObjectInfo | str]) -> Tree:
        """Sort a recursive listing of ``base`` into files and directories (implicit ones included); keys whose
        path is not a valid workspace path are left out, and so is a directory shadowed by a file."""
        tree = cls()
        for item in items:
            if not isinstance(item, ObjectInfo):
                continue
            relative = layout.path_of(item.key)
            if relative is None:
                continue
            marker = relative.endswith("/")
            path = relative[:-1] if marker else relative
            parts = path.split("/")
            if len(parts) > MAX_PATH_DEPTH or not all(usable_name(part) for part in parts):
                continue
            if marker:
                tree.markers.add(path)
                tree.directories.add(path)
            else:
                tree.files[path] = item
            tree.directories.update(ancestors(path))
        tree.directories.discard(ROOT)
        if base:
            tree.directories = {d for d in tree.directories if d.startswith(base + "/")}
            tree.markers.discard(base)
        shadowed = tree.directories & tree.files.keys()
        if shadowed:
            tree.directories = {d for d in tree.directories if not any(_within(d, s) for s in shadowed)}
            tree.files = {p: i for p, i in tree.files.items() if not any(p.startswith(s + "/") for s in shadowed)}
        return tree


def _within(path: str, base: str) -> bool:
    return path == base or path.startswith(base + "/")
