"""Merge hooks of host snapshots: read one file of a snapshot, and make a snapshot from a merge's plan.

Host snapshots are a manifest plus content kept by a strategy, so a merged state is built for real: the
``ours`` snapshot is filled into a scratch directory under ``snapshot_dir`` (outside the root), the merge's
writes and deletions are applied there, and the scratch tree is captured with the root's strategy like any
workspace, recorded as a snapshot of this root. The live files are never touched.

Cost: a copy of ``ours`` — clones on a reflink filesystem (metadata only), objects streamed out of git, or
one pass over an archive — plus one capture of the result; the scratch tree is removed at the end. Every
strategy supports it (each can fill files and capture a tree).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Collection, Mapping

from workspacefs.backends._merging import Written
from workspacefs.backends.host._snapshots import HostSnapshots, Manifest
from workspacefs.backends.host._tree import HostTree
from workspacefs.errors import SnapshotCreationError
from workspacefs.paths import MAX_CONVENIENCE_BYTES, ancestors
from workspacefs.protocol import ByteReader
from workspacefs.results import FilesystemSnapshot
from workspacefs.streams import StreamReader

__all__ = ["capture_merged", "snapshot_content"]

_NEW_FILE_MODE = 0o644


def snapshot_content(snapshots: HostSnapshots, snapshot: FilesystemSnapshot, path: str) -> bytes | ByteReader:
    """File ``path`` as ``snapshot`` keeps it: filled by its strategy into a temporary file in ``snapshot_dir``."""
    stored, manifest, strategy = snapshots.opened(snapshot)
    entry = manifest.entries.get(path)
    if entry is None or entry.is_dir:
        raise FileNotFoundError(2, "No such file in the snapshot", path)
    copy = tempfile.TemporaryFile(dir=snapshots.directory)  # noqa: SIM115 - returned open, or closed below
    try:
        for _, fill in strategy.fills(str(stored.snapshot_id), {path: entry.digest}):
            fill(copy.fileno())
        copy.seek(0)
        if entry.size <= MAX_CONVENIENCE_BYTES:
            with copy:
                return copy.read()
    except BaseException:
        copy.close()
        raise
    return StreamReader(path, copy, entry.size)


def _kept(path: str, dropped: Collection[str]) -> bool:
    return path not in dropped and not any(above in dropped for above in ancestors(path))


def capture_merged(
    snapshots: HostSnapshots,
    draft: FilesystemSnapshot,
    start: FilesystemSnapshot,
    writes: Mapping[str, Written],
    deletes: Collection[str],
) -> FilesystemSnapshot:
    """Build ``start`` plus the plan in a scratch tree and capture it under ``draft``'s id (see the module)."""
    scratch = snapshots.directory / "scratch" / uuid.uuid4().hex
    scratch.mkdir(parents=True)
    tree = HostTree(str(scratch), durable=False)
    try:
        stored, manifest, strategy = snapshots.opened(start)
        # a written path replaces whatever start had there, and any file on the way to it
        dropped = {*deletes, *writes, *(a for p in writes for a in ancestors(p) if _is_file(manifest, a))}
        entries = {p: e for p, e in manifest.entries.items() if p and _kept(p, dropped)}
        for path in sorted(p for p, e in entries.items() if e.is_dir):
            tree.make_dir(path)
        wanted = {p: e.digest for p, e in entries.items() if not e.is_dir}
        for path, fill in strategy.fills(str(stored.snapshot_id), wanted):
            tree.install(path, fill, entries[path].mode, entries[path].mtime_ns)
        for path in sorted(writes):
            _make_parents(tree, path)
            _write(snapshots, tree, path, writes[path])
        return snapshots.capture(draft, tree)
    except OSError as exc:
        raise SnapshotCreationError(f"Could not build the merged snapshot: {exc.strerror or exc}") from None
    finally:
        tree.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _is_file(manifest: Manifest, path: str) -> bool:
    entry = manifest.entries.get(path)
    return entry is not None and not entry.is_dir


def _make_parents(tree: HostTree, path: str) -> None:
    for directory in ancestors(path):
        with contextlib.suppress(FileExistsError):
            tree.make_dir(directory)


def _write(snapshots: HostSnapshots, tree: HostTree, path: str, wanted: Written) -> None:
    if isinstance(wanted, bytes):
        data = wanted

        def fill(fd: int) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]

        tree.install(path, fill, _NEW_FILE_MODE, time.time_ns())
        return
    stored, manifest, strategy = snapshots.opened(wanted.snapshot)
    entry = manifest.entries[wanted.path]
    for _, source in strategy.fills(str(stored.snapshot_id), {wanted.path: entry.digest}):
        tree.install(path, source, stat.S_IMODE(entry.mode), entry.mtime_ns)
