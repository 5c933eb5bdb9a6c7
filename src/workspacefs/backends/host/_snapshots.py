"""Host snapshots: manifests, persistence under ``snapshot_dir``, restore and diff for every strategy.

A snapshot is a manifest (every directory and regular file with size, mtime, permissions and, for
most strategies, a content digest) plus content kept by a strategy (``_strategies.py``). The
workspace is read only through the race-proof resolver and restored only through the backend's
atomic writes. Metadata lives in a :class:`DirectorySnapshotStore`, so another process on the same
root and ``snapshot_dir`` can list and restore what an earlier one took.

"Unchanged" is decided git-style: equal size and modification time, unless the time is within two
seconds of the capture (a "racy" entry could have changed inside the clock's granularity), in
which case content decides.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workspacefs._hostio import DIR_FLAGS, TEMP_PREFIX, remove_tree_at
from workspacefs.backends.host._identity import claim_state
from workspacefs.backends.host._strategies import STRATEGIES, SnapshotStrategy, digest_of
from workspacefs.backends.host._temps import cache_dir_for, root_key
from workspacefs.backends.host._tree import HostTree
from workspacefs.errors import SnapshotCreationError, SnapshotIncompatibleError, SnapshotRestoreError
from workspacefs.paths import join
from workspacefs.results import FilesystemSnapshot
from workspacefs.snapshots import DirectorySnapshotStore, SnapshotRetentionPolicy, select_prunable

__all__ = ["RACY_WINDOW_NS", "ContentFingerprint", "HostSnapshots", "Manifest", "ManifestEntry", "SnapshotStrategy"]

RACY_WINDOW_NS = 2_000_000_000


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One directory or regular file of a snapshot."""

    is_dir: bool
    size: int = 0
    mtime_ns: int = 0
    mode: int = 0o644
    digest: str | None = None


@dataclass(frozen=True, slots=True)
class Manifest:
    """Everything a snapshot holds, by normalised path."""

    entries: dict[str, ManifestEntry]
    captured_ns: int
    strategy: str
    digest_kind: str | None

    def racy(self, entry: ManifestEntry) -> bool:
        """Modified so close to the capture that its time cannot vouch for its content."""
        return entry.mtime_ns >= self.captured_ns - RACY_WINDOW_NS

    def to_json(self) -> str:
        rows = {p: [e.is_dir, e.size, e.mtime_ns, e.mode, e.digest] for p, e in self.entries.items()}
        body = {"captured_ns": self.captured_ns, "strategy": self.strategy, "digest_kind": self.digest_kind}
        return json.dumps({**body, "entries": rows})

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        entries = {
            p: ManifestEntry(bool(r[0]), int(r[1]), int(r[2]), int(r[3]), r[4]) for p, r in data["entries"].items()
        }
        return cls(entries, int(data["captured_ns"]), str(data["strategy"]), data["digest_kind"])


class ContentFingerprint:
    """What ``diff`` compares: size and time first, content (digests computed on demand) when in doubt."""

    __slots__ = ("_digests", "_loader", "kind", "mtime_ns", "racy", "size")

    def __init__(
        self,
        size: int,
        mtime_ns: int,
        *,
        racy: bool,
        kind: str | None,
        digest: str | None,
        loader: Callable[[str], str],
    ) -> None:
        self.size = size
        self.mtime_ns = mtime_ns
        self.racy = racy
        self.kind = kind if digest is not None else None
        self._digests = {kind: digest} if kind is not None and digest is not None else {}
        self._loader = loader

    def digest(self, kind: str) -> str:
        if kind not in self._digests:
            self._digests[kind] = self._loader(kind)
        return self._digests[kind]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContentFingerprint):
            return NotImplemented
        if self.size != other.size:
            return False
        if self.mtime_ns == other.mtime_ns and not (self.racy or other.racy):
            return True
        kind = self.kind or other.kind or "sha256"
        return self.digest(kind) == other.digest(kind)

    __hash__ = None  # type: ignore[assignment]


def default_snapshot_dir(root: str) -> Path:
    """Per-root directory under the user's cache, so a later process finds earlier snapshots."""
    return cache_dir_for(root, "snapshots")


class HostSnapshots:
    """Snapshot machinery of one host root, working through its :class:`HostTree`."""

    def __init__(
        self,
        tree: HostTree,
        root: str,
        *,
        backend: str,
        strategy: str | SnapshotStrategy | None,
        snapshot_dir: str | os.PathLike[str] | None,
        retention: SnapshotRetentionPolicy | None,
    ) -> None:
        self._tree = tree
        self._backend = backend
        self._root = os.path.realpath(root)
        self.directory = Path(snapshot_dir) if snapshot_dir is not None else default_snapshot_dir(root)
        self.directory = Path(os.path.realpath(self.directory))
        root_path = Path(self._root)
        if (
            self.directory == root_path
            or self.directory.is_relative_to(root_path)
            or root_path.is_relative_to(self.directory)
        ):
            raise ValueError("snapshot_dir must lie outside the workspace root (where the agent could rewrite it)")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._store = DirectorySnapshotStore(self.directory / "meta", on_delete=self._drop)
        self.retention = retention or SnapshotRetentionPolicy()
        """Which snapshots of this root are kept (a fork keeps the same)."""
        self._strategies: dict[str, SnapshotStrategy] = {}
        self.strategy = self._choose(strategy)
        self.on_drop: Callable[[uuid.UUID], None] | None = None
        """Told about every snapshot that goes (deleted or pruned), after its data: a container drops its image."""

    def _choose(self, wanted: str | SnapshotStrategy | None) -> SnapshotStrategy:
        if isinstance(wanted, SnapshotStrategy):
            self._strategies[wanted.name] = wanted
            return wanted
        if wanted is not None:
            if wanted not in STRATEGIES:
                raise ValueError(f"Unknown snapshot strategy {wanted!r}; use one of {', '.join(STRATEGIES)}")
            if not STRATEGIES[wanted].available(self._tree.resolver.root_fd, self.directory):
                raise ValueError(f"Snapshot strategy {wanted!r} is not available for this root and snapshot_dir")
            return self._strategy(wanted)
        for name, kind in STRATEGIES.items():
            if kind.available(self._tree.resolver.root_fd, self.directory):
                return self._strategy(name)
        raise RuntimeError("No snapshot strategy is available")  # copy always is; kept for clarity

    def _strategy(self, name: str) -> SnapshotStrategy:
        if name not in self._strategies:
            if name not in STRATEGIES:
                raise SnapshotRestoreError(f"Snapshot was taken with unknown strategy {name!r}")
            self._strategies[name] = STRATEGIES[name](self.directory)
        return self._strategies[name]

    def _scrub(self, exc: BaseException) -> str:
        """An error's text without host paths: messages reach models and clients, which never see the host."""
        text = str(exc)
        for place, shown in ((str(self.directory), "<snapshot_dir>"), (self._root, "<root>")):
            text = text.replace(place, shown)
        return text

    def _manifest_file(self, snapshot_id: uuid.UUID | str) -> Path:
        return self.directory / "manifests" / f"{snapshot_id}.json"

    def _load_manifest(self, snapshot_id: uuid.UUID | str) -> Manifest:
        try:
            return Manifest.from_json(self._manifest_file(snapshot_id).read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SnapshotRestoreError(f"Snapshot {snapshot_id} has no readable manifest: {self._scrub(exc)}") from None

    # --- capture ------------------------------------------------------------------------------------

    def _previous(self) -> Manifest | None:
        """The newest manifest of this strategy, whose digests may be reused for unchanged files."""
        for snapshot in reversed(self.list()):
            if snapshot.strategy == self.strategy.name:
                try:
                    return self._load_manifest(snapshot.snapshot_id)
                except SnapshotRestoreError:
                    return None
        return None

    @property
    def root(self) -> str:
        """The root's real path: what every snapshot of it records as ``root_path``."""
        return self._root

    def capture(self, draft: FilesystemSnapshot, tree: HostTree | None = None) -> FilesystemSnapshot:
        """Keep the workspace's state (or that of ``tree``, a scratch tree a merge built) under ``draft``'s id;
        the completed, stored snapshot."""
        snapshot_id = draft.snapshot_id
        tag = draft.tag
        previous = self._previous() if self.strategy.digest_kind == "git" and tree is None else None
        tree = self._tree if tree is None else tree
        captured_ns = time.time_ns()
        sink = self.strategy.begin(str(snapshot_id))
        entries: dict[str, ManifestEntry] = {}
        try:
            for path, is_dir in tree.resolver.walk(""):
                if is_dir:
                    mode = _dir_mode(tree, path)
                    sink.add_dir(path, mode)
                    entries[path] = ManifestEntry(True, mode=mode)
                    continue
                try:
                    fd, info = tree.open_regular(path)
                except OSError:
                    continue  # vanished, or replaced by something that is not a file, since the walk
                try:
                    known = _reusable_digest(previous, path, info)
                    digest = sink.add_file(path, fd, info, known)
                finally:
                    os.close(fd)
                entries[path] = ManifestEntry(False, info.st_size, info.st_mtime_ns, stat.S_IMODE(info.st_mode), digest)
            commit_ref = sink.commit(tag or f"snapshot {snapshot_id}")
        except SnapshotCreationError:
            sink.abort()
            raise
        except Exception as exc:
            sink.abort()
            raise SnapshotCreationError(f"Could not snapshot the workspace: {self._scrub(exc)}") from exc
        manifest = Manifest(entries, captured_ns, self.strategy.name, self.strategy.digest_kind)
        self._manifest_file(snapshot_id).parent.mkdir(parents=True, exist_ok=True)
        self._manifest_file(snapshot_id).write_text(manifest.to_json(), encoding="utf-8")
        files = [e for e in entries.values() if not e.is_dir]
        snapshot = dataclasses.replace(
            draft,
            file_count=len(files),
            total_bytes=sum(e.size for e in files),
            commit_ref=commit_ref,
            git_dir=None if self.strategy.git_dir is None else str(self.strategy.git_dir),
            strategy=self.strategy.name,
        )
        self._store.save(snapshot)
        self._prune()
        return snapshot

    def _prune(self) -> None:
        for snapshot in select_prunable(self.list(), self.retention):
            self.delete(snapshot.snapshot_id)

    # --- catalogue ------------------------------------------------------------------------------------

    def list(self) -> Sequence[FilesystemSnapshot]:
        return [s for s in self._store.list() if s.root_path == self._root]

    def load(self, snapshot: FilesystemSnapshot) -> FilesystemSnapshot:
        """The stored record of ``snapshot`` (``SnapshotNotFoundError`` if it was pruned)."""
        stored = self._store.load(snapshot.snapshot_id)
        if stored.root_path != self._root and stored.root_path not in self.family():
            raise SnapshotIncompatibleError(f"Snapshot {snapshot.snapshot_id} belongs to another workspace root")
        return stored

    def opened(self, snapshot: FilesystemSnapshot) -> tuple[FilesystemSnapshot, Manifest, SnapshotStrategy]:
        """A kept snapshot's record, manifest and the strategy holding its content (for merges)."""
        stored = self.load(snapshot)
        manifest = self._load_manifest(stored.snapshot_id)
        return stored, manifest, self._strategy(manifest.strategy)

    def _family_file(self) -> Path:
        return self.directory / "family"

    def family(self) -> set[str]:
        """The roots whose snapshots this root may restore and merge: itself, and, when it is one of them, every
        root a fork joined to this snapshot directory (``fork(root=...)``)."""
        try:
            listed = set(self._family_file().read_text(encoding="utf-8").splitlines())
        except FileNotFoundError:
            listed = set()
        return {self._root, *listed} if self._root in listed else {self._root}

    def claim(self, identity: str) -> bool:
        """Make this root's state that of the directory ``identity`` names (see ``_identity.py``): what another
        directory at this path left is retired first; whether there was any."""
        return claim_state(self.directory, self._root, root_key(self._root), identity, self._store)

    def join_family(self, root: str) -> None:
        """Make ``root`` (a fork's) one family with this root: both see each other's snapshots."""
        with self._family_file().open("a", encoding="utf-8") as family:
            family.write(f"{self._root}\n{os.path.realpath(root)}\n")

    def family_snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots of every root of the family, oldest first."""
        roots = self.family()
        return [s for s in self._store.list() if s.root_path in roots]

    def delete(self, snapshot_id: uuid.UUID) -> None:
        self._store.delete(snapshot_id)

    def _drop(self, snapshot_id: uuid.UUID) -> None:
        manifest_file = self._manifest_file(snapshot_id)
        try:
            strategy = self._strategy(self._load_manifest(snapshot_id).strategy)
        except SnapshotRestoreError:
            strategy = self.strategy
        strategy.discard(str(snapshot_id))
        manifest_file.unlink(missing_ok=True)
        if self.on_drop is not None:
            self.on_drop(snapshot_id)

    def rebind(self, tree: HostTree) -> None:
        """Work through ``tree`` from now on (the root was mounted again: a fresh descriptor of it)."""
        self._tree = tree

    def close(self) -> None:
        for strategy in self._strategies.values():
            strategy.close()

    # --- restore --------------------------------------------------------------------------------------

    def restore(self, snapshot: FilesystemSnapshot) -> None:
        stored = self.load(snapshot)
        manifest = self._load_manifest(stored.snapshot_id)
        strategy = self._strategy(manifest.strategy)
        try:
            self._remove_extras(manifest)
            for path in sorted(p for p, e in manifest.entries.items() if e.is_dir):
                self._ensure_dir(path)
            wanted = self._changed_files(manifest)
            for path, fill in strategy.fills(str(stored.snapshot_id), {p: manifest.entries[p].digest for p in wanted}):
                entry = manifest.entries[path]
                self._tree.install(path, fill, entry.mode, entry.mtime_ns)
                wanted.discard(path)
        except OSError as exc:
            raise SnapshotRestoreError(f"Restoring snapshot {stored.snapshot_id} failed: {self._scrub(exc)}") from exc
        if wanted:
            raise SnapshotRestoreError(f"Snapshot {stored.snapshot_id} is missing content for {sorted(wanted)[:5]}")

    def _remove_extras(self, manifest: Manifest) -> None:
        """Delete everything the snapshot does not hold (links, FIFOs and odd names included)."""
        _prune_tree(os.open(".", DIR_FLAGS, dir_fd=self._tree.resolver.root_fd), "", manifest.entries)

    def _ensure_dir(self, path: str) -> None:
        with contextlib.suppress(FileExistsError):
            self._tree.make_dir(path)

    def _changed_files(self, manifest: Manifest) -> set[str]:
        """Files of the snapshot whose current content differs (or is missing)."""
        changed: set[str] = set()
        for path, entry in manifest.entries.items():
            if entry.is_dir:
                continue
            try:
                fd, info = self._tree.open_regular(path)
            except OSError:
                changed.add(path)
                continue
            try:
                if info.st_size != entry.size:
                    changed.add(path)
                elif (info.st_mtime_ns == entry.mtime_ns and not manifest.racy(entry)) or (
                    entry.digest is not None
                    and digest_of(fd, entry.size, manifest.digest_kind or "sha256") == entry.digest
                ):
                    self._restore_metadata(path, fd, info, entry)
                else:
                    changed.add(path)
            finally:
                os.close(fd)
        return changed

    def _restore_metadata(self, path: str, fd: int, info: os.stat_result, entry: ManifestEntry) -> None:
        """Give a file whose content is already right its recorded mode and time. An inode with other links
        (one may live outside the root) is never changed: this name gets a fresh copy instead."""
        if stat.S_IMODE(info.st_mode) == entry.mode and info.st_mtime_ns == entry.mtime_ns:
            return
        if info.st_nlink > 1:
            self._tree.install_copy(path, fd, info.st_size, entry.mode, entry.mtime_ns)
            return
        os.fchmod(fd, entry.mode)
        os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))

    # --- diff -----------------------------------------------------------------------------------------

    def manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Any]:
        if snapshot is None:
            return self._current_manifest()
        stored = self.load(snapshot)
        manifest = self._load_manifest(stored.snapshot_id)
        strategy = self._strategy(manifest.strategy)
        found = {}
        for path, entry in manifest.entries.items():
            if not entry.is_dir:
                loader = _stored_loader(strategy, str(stored.snapshot_id), path, entry, self.directory)
                found[path] = ContentFingerprint(
                    entry.size,
                    entry.mtime_ns,
                    racy=manifest.racy(entry),
                    kind=manifest.digest_kind,
                    digest=entry.digest,
                    loader=loader,
                )
        return found

    def _current_manifest(self) -> Mapping[str, Any]:
        now = time.time_ns()
        found = {}
        for path in self._tree.resolver.walk_files(""):
            try:
                info = self._tree.resolver.fstat_path(path)
            except OSError:
                continue
            racy = info.st_mtime_ns >= now - RACY_WINDOW_NS
            found[path] = ContentFingerprint(
                info.st_size, info.st_mtime_ns, racy=racy, kind=None, digest=None, loader=self._current_loader(path)
            )
        return found

    def _current_loader(self, path: str) -> Callable[[str], str]:
        def load(kind: str) -> str:
            fd, info = self._tree.open_regular(path)
            try:
                return digest_of(fd, info.st_size, kind)
            finally:
                os.close(fd)

        return load


def _dir_mode(tree: HostTree, path: str) -> int:
    try:
        return stat.S_IMODE(tree.resolver.fstat_path(path).st_mode)
    except OSError:
        return 0o755


def _reusable_digest(previous: Manifest | None, path: str, info: os.stat_result) -> str | None:
    if previous is None:
        return None
    entry = previous.entries.get(path)
    if entry is None or entry.is_dir or entry.digest is None or previous.racy(entry):
        return None
    if entry.size != info.st_size or entry.mtime_ns != info.st_mtime_ns:
        return None
    return entry.digest


def _stored_loader(
    strategy: SnapshotStrategy, snapshot_id: str, path: str, entry: ManifestEntry, scratch: Path
) -> Callable[[str], str]:
    """Digest a stored file on demand, in any kind: the strategy fills a scratch file with it, the way
    a restore does, so every strategy can be compared with every other (git and archive included)."""

    def load(kind: str) -> str:
        with tempfile.TemporaryFile(dir=scratch) as copy:
            for _, fill in strategy.fills(snapshot_id, {path: entry.digest}):
                fill(copy.fileno())
            return digest_of(copy.fileno(), entry.size, kind)

    return load


def _prune_tree(fd: int, prefix: str, wanted: Mapping[str, ManifestEntry]) -> None:
    """Remove, below an open directory (closed here), every entry ``wanted`` does not list as such."""
    try:
        with os.scandir(fd) as listing:
            entries = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in listing]
        for name, is_dir, is_file in entries:
            if name.startswith(TEMP_PREFIX):
                continue  # another writer's in-flight file
            want = wanted.get(join(prefix, name))
            if is_dir and want is not None and want.is_dir:
                try:
                    child = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                        continue
                    raise
                _prune_tree(child, join(prefix, name), wanted)
            elif is_dir:
                remove_tree_at(fd, name)
            elif not (is_file and want is not None and not want.is_dir):
                os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)
