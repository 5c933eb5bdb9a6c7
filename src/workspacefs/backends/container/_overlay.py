"""Overlay workspaces (seed 002's ``OVERLAY_REFLINK`` / ``OVERLAY_COPY``): changes live in an upper directory,
so a snapshot copies only what the agent changed.

The workspace the container and ``HostFilesystem`` see is an OverlayFS mount: a read-only lower layer (the
``host_dir`` given, which is never modified, or an empty directory) under an upper directory that receives
every change — new and modified files, and whiteouts for deletions. A snapshot is a copy of the upper
directory (reflinked where the filesystem can, else copied), so it costs what changed, not what the
workspace holds. A restore unmounts, puts the snapshot's upper directory back, mounts again, and restarts the
container so it sees the new mount (processes running in the sandbox end; files are what the snapshot held).
Needs root and OverlayFS.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from workspacefs.backends.container._runtime import workspace_prefix
from workspacefs.backends.host._snapshots import RACY_WINDOW_NS, ContentFingerprint
from workspacefs.backends.host._strategies import digest_of
from workspacefs.errors import (
    SnapshotCreationError,
    SnapshotIncompatibleError,
    SnapshotRestoreError,
    UnsupportedOperationError,
)
from workspacefs.paths import MAX_PATH_DEPTH
from workspacefs.results import FilesystemSnapshot
from workspacefs.snapshots import DirectorySnapshotStore, SnapshotRetentionPolicy, select_prunable

__all__ = ["OverlayWorkspace"]

_OPAQUE: Final = "trusted.overlay.opaque"
_STRATEGIES: Final = ("overlay_reflink", "overlay_copy")


def _run(*argv: str) -> None:
    """A system command as argv (never a shell); ``OSError`` with its message if it fails."""
    done = subprocess.run(argv, capture_output=True, check=False, timeout=300)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"
        raise OSError(f"{argv[0]} failed: {message}")


def _copy_tree(source: Path, target: Path, *, reflink: bool) -> None:
    """Copy a directory with everything overlay needs kept: whiteouts (device files), xattrs, times, modes."""
    _run("cp", "-a", f"--reflink={'always' if reflink else 'never'}", "--", f"{source}/.", str(target))


def _whiteout(info: os.stat_result) -> bool:
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def _opaque(path: Path) -> bool:
    try:
        return os.getxattr(path, _OPAQUE, follow_symlinks=False) == b"y"
    except OSError:
        return False


def _layer_entries(root: Path) -> dict[str, tuple[Path, os.stat_result]]:
    """Every entry of one layer by workspace path (symlinks and special files included; nothing followed)."""
    found: dict[str, tuple[Path, os.stat_result]] = {}
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            path, rel = directory / name, f"{prefix}{name}"
            try:
                info = os.lstat(path)
            except OSError:
                continue
            found[rel] = (path, info)
            if stat.S_ISDIR(info.st_mode) and rel.count("/") < MAX_PATH_DEPTH:
                pending.append((path, rel + "/"))
    return found


def merged_view(lower: Path, upper: Path) -> dict[str, tuple[Path, os.stat_result]]:
    """The regular files an overlay of ``upper`` on ``lower`` shows, each with where its bytes live."""
    view = _layer_entries(lower)
    for rel, (path, info) in sorted(_layer_entries(upper).items()):
        hidden = _whiteout(info) or (stat.S_ISDIR(info.st_mode) and _opaque(path)) or not stat.S_ISDIR(info.st_mode)
        if hidden:  # a whiteout, an opaque directory or a file: nothing of the lower layer shows below it
            for below in [p for p in view if p.startswith(rel + "/")]:
                del view[below]
        if _whiteout(info):
            view.pop(rel, None)
        else:
            view[rel] = (path, info)
    return {rel: entry for rel, entry in view.items() if stat.S_ISREG(entry[1].st_mode)}


def _digest_loader(path: Path, size: int) -> Callable[[str], str]:
    def load(kind: str) -> str:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            return digest_of(fd, size, kind)
        finally:
            os.close(fd)

    return load


class OverlayWorkspace:
    """The overlay mount of one sandbox and its snapshots (see the module docstring)."""

    def __init__(
        self,
        *,
        lower: str | None,
        snapshot_dir: str | os.PathLike[str] | None,
        retention: SnapshotRetentionPolicy | None = None,
    ) -> None:
        if os.geteuid() != 0:
            raise UnsupportedOperationError("overlay snapshots mount OverlayFS, which needs root")
        # the layers live beside the snapshots when those have a home: one filesystem, so copies can reflink
        home = None if snapshot_dir is None else Path(os.path.realpath(snapshot_dir))
        for part in (str(home or tempfile.gettempdir()), os.path.realpath(lower) if lower else ""):
            if "," in part or ":" in part:
                raise ValueError(f"overlay layers cannot live in a path with ',' or ':' (OverlayFS options): {part!r}")
        if home is not None:
            home.mkdir(parents=True, exist_ok=True)
        self.state = Path(tempfile.mkdtemp(prefix=workspace_prefix("overlay"), dir=home))
        self.lower = Path(os.path.realpath(lower)) if lower is not None else self.state / "lower"
        self.upper, self.work, self.merged = self.state / "upper", self.state / "work", self.state / "merged"
        for directory in (self.lower, self.upper, self.work, self.merged):
            directory.mkdir(exist_ok=True)
        self.snapshots = home if home is not None else self.state / "snapshots"
        self._store = DirectorySnapshotStore(self.snapshots / "meta", on_delete=self._discard)
        self._retention = retention or SnapshotRetentionPolicy()
        self.reflink = False
        self._mounted = False
        try:
            self.mount()
        except OSError as exc:
            shutil.rmtree(self.state, ignore_errors=True)
            raise UnsupportedOperationError(f"OverlayFS cannot be mounted here: {self._scrub(exc)}") from None
        try:
            self.reflink = self._can_reflink()
        except BaseException:
            self.close()
            raise

    # --- the mount -------------------------------------------------------------------------------------

    def _scrub(self, exc: BaseException) -> str:
        """An error's text without host paths (it may reach a model): the layers by their roles."""
        text = str(exc)
        for place, shown in ((self.state, "<overlay>"), (self.snapshots, "<snapshot_dir>"), (self.lower, "<base>")):
            text = text.replace(str(place), shown)
        return text

    def mount(self) -> None:
        # nosuid, nodev: a setuid file a command made never runs as its owner from here; redirects and metacopy
        # off, so each layer holds whole files and renamed directories, which is what the snapshots read
        options = (
            f"lowerdir={self.lower},upperdir={self.upper},workdir={self.work},"
            "nosuid,nodev,redirect_dir=off,metacopy=off"
        )
        _run("mount", "-t", "overlay", "overlay", "-o", options, str(self.merged))
        self._mounted = True

    @property
    def mounted(self) -> bool:
        """True while the overlay is mounted at :attr:`merged`."""
        return self._mounted

    def unmount(self) -> None:
        if self._mounted:
            _run("umount", str(self.merged))
            self._mounted = False

    def close(self) -> None:
        """Unmount and remove the layers the sandbox made (never a given lower directory or snapshot_dir);
        idempotent."""
        if not self.state.exists():
            return
        try:
            self.unmount()
        except OSError:
            _run("umount", "--lazy", str(self.merged))
        # the layers (and, without a snapshot_dir, the snapshots inside them) were made here; a given lower
        # directory and a given snapshot_dir live elsewhere and stay
        shutil.rmtree(self.state, ignore_errors=True)

    def _can_reflink(self) -> bool:
        """Whether a file beside the upper layer can be cloned into the snapshots' directory (one filesystem
        that has reflinks: XFS, btrfs)."""
        self.snapshots.mkdir(parents=True, exist_ok=True)
        source = self.state / ".reflink-probe"
        target = Path(tempfile.mkdtemp(dir=self.snapshots, prefix=".probe-")) / "b"
        try:
            source.write_bytes(b"x")
            done = subprocess.run(
                ["cp", "--reflink=always", str(source), str(target)], capture_output=True, check=False
            )
            return done.returncode == 0
        finally:
            source.unlink(missing_ok=True)
            shutil.rmtree(target.parent, ignore_errors=True)

    # --- snapshots -------------------------------------------------------------------------------------

    def _copy_of(self, snapshot_id: uuid.UUID) -> Path:
        return self.snapshots / "overlay" / str(snapshot_id)

    def capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        """Copy the upper directory (what changed) and record the snapshot."""
        target = self._copy_of(draft.snapshot_id)
        target.mkdir(parents=True)
        try:
            _copy_tree(self.upper, target, reflink=self.reflink)
        except OSError as exc:
            shutil.rmtree(target, ignore_errors=True)
            raise SnapshotCreationError(f"The overlay's changes could not be copied: {self._scrub(exc)}") from exc
        files = merged_view(self.lower, target)
        snapshot = dataclasses.replace(
            draft,
            file_count=len(files),
            total_bytes=sum(info.st_size for _, info in files.values()),
            strategy=_STRATEGIES[0] if self.reflink else _STRATEGIES[1],
        )
        self._store.save(snapshot)
        for doomed in select_prunable(self._store.list(), self._retention):
            self._store.delete(doomed.snapshot_id)
        return snapshot

    def _kept(self, snapshot: FilesystemSnapshot) -> Path:
        self._store.load(snapshot.snapshot_id)  # SnapshotNotFoundError once deleted
        if snapshot.strategy not in _STRATEGIES:
            raise SnapshotIncompatibleError(f"Snapshot {snapshot.snapshot_id} was not taken of an overlay")
        return self._copy_of(snapshot.snapshot_id)

    def restore(self, snapshot: FilesystemSnapshot, *, unmounted: Callable[[], None]) -> None:
        """Put the snapshot's changes back in place of the current ones; ``unmounted`` runs while nothing is
        mounted (the sandbox stops its container and lets go of the directory there).

        The snapshot's copy is staged first, beside the current layer: a failure before the swap changes
        nothing, and one after it puts the current layer back and mounts it again.
        """
        copy = self._kept(snapshot)
        staged = self.state / "upper.restoring"
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir()
        try:
            _copy_tree(copy, staged, reflink=self.reflink)
        except OSError as exc:
            shutil.rmtree(staged, ignore_errors=True)
            raise SnapshotRestoreError(
                f"Snapshot {snapshot.snapshot_id} could not be staged: {self._scrub(exc)}"
            ) from exc
        unmounted()
        previous = self.state / "upper.previous"
        try:
            if self._mounted:  # lazily: a reader still open keeps the old view, and does not block the restore
                _run("umount", "--lazy", str(self.merged))
                self._mounted = False
            self.upper.rename(previous)
            staged.rename(self.upper)
            shutil.rmtree(self.work)
            self.work.mkdir()
            self.mount()
        except OSError as exc:
            if previous.exists() and not self._mounted:  # back to what was there
                shutil.rmtree(self.upper, ignore_errors=True)
                previous.rename(self.upper)
                with contextlib.suppress(OSError):
                    self.mount()
            raise SnapshotRestoreError(
                f"Snapshot {snapshot.snapshot_id} could not be restored: {self._scrub(exc)}"
            ) from exc
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        shutil.rmtree(previous, ignore_errors=True)

    def manifest(self, snapshot: FilesystemSnapshot) -> Mapping[str, ContentFingerprint]:
        """Every file the snapshot shows (lower layer under its copy of the changes) with a fingerprint."""
        copy = self._kept(snapshot)
        captured = int(snapshot.created_at.timestamp() * 1e9)  # taken just before the copy: "racy" counts from it
        found = {}
        for rel, (path, info) in merged_view(self.lower, copy).items():
            racy = info.st_mtime_ns >= captured - RACY_WINDOW_NS
            loader = _digest_loader(path, info.st_size)
            found[rel] = ContentFingerprint(
                info.st_size, info.st_mtime_ns, racy=racy, kind=None, digest=None, loader=loader
            )
        return found

    def list(self) -> Sequence[FilesystemSnapshot]:
        return self._store.list()

    def delete(self, snapshot: FilesystemSnapshot) -> None:
        self._store.delete(snapshot.snapshot_id)

    def _discard(self, snapshot_id: uuid.UUID) -> None:
        shutil.rmtree(self._copy_of(snapshot_id), ignore_errors=True)
