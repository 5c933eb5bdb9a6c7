"""Snapshot hooks of ``ObjectStoreFilesystem``: capture into manifests, restore and diff from them.

Capture lists the workspace once, learns each file's content id (from the object's metadata, in one
concurrent batch of ``HEAD`` requests for versions this process has not seen), copies inside the store only
content no snapshot holds yet, and writes one manifest. Restore compares the manifest with one listing of
the workspace and touches only what differs: deletes what the snapshot lacks, copies back (inside the store)
the files whose content differs, puts back directory markers. Each file is replaced atomically; the tree as a
whole is not (an object store has no transaction), so restore while another process writes gives a mix.
"""

from __future__ import annotations

import threading
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from workspacefs.backends._core import Fingerprint
from workspacefs.backends._objects._client import ObjectClient, ObjectInfo, PreconditionFailed
from workspacefs.backends._snapshotting import SnapshotMixin
from workspacefs.backends.objectstore._layout import Layout, Tree
from workspacefs.backends.objectstore._manifests import Entry, Manifest, ManifestStore
from workspacefs.errors import SnapshotCreationError, SnapshotNotFoundError, SnapshotRestoreError
from workspacefs.results import FilesystemSnapshot

__all__ = ["ObjectSnapshots"]

T = TypeVar("T")
R = TypeVar("R")

_ATTEMPTS = 3


class _Changed(Exception):  # noqa: N818 - a signal to list again, never seen by callers
    """A file changed between the listing and the copy of its content."""


class ObjectSnapshots(SnapshotMixin):
    """The snapshot hooks (``_capture``, ``_restore_state``, ``_manifest`` …) over manifests in the store."""

    _client: ObjectClient
    _layout: Layout
    _store: ManifestStore
    _blobs_seen: set[str]
    """Content ids this process knows the store holds (so a snapshot asks only about new content)."""
    _blobs_lock: threading.Lock

    @abstractmethod
    def _tree(self, base: str) -> Tree:
        """The workspace below ``base`` from one recursive listing."""

    @abstractmethod
    def _ids_of(self, infos: Sequence[ObjectInfo]) -> list[str]:
        """Content ids of many objects."""

    @abstractmethod
    def _parallel(self, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``work`` over every item, several requests in flight."""

    # --- capture -------------------------------------------------------------------------------------

    def _capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        fs = self
        for _ in range(_ATTEMPTS):
            tree = fs._tree("")
            paths = sorted(tree.files)
            infos = [tree.files[path] for path in paths]
            ids = fs._ids_of(infos)
            try:
                self._keep_content(infos, ids)
            except _Changed:
                continue
            files = {
                path: Entry(content_id, info.size, info.etag, info.modified.isoformat())
                for path, info, content_id in zip(paths, infos, ids, strict=True)
            }
            snapshot = self._completed(
                draft,
                file_count=len(files),
                total_bytes=sum(entry.size for entry in files.values()),
                strategy="manifest",
                commit_ref=str(draft.snapshot_id),
            )
            fs._store.write(snapshot, Manifest(frozenset(tree.directories), files))
            return snapshot
        raise SnapshotCreationError("Files kept changing while the snapshot was taken; take it again")

    def _keep_content(self, infos: Sequence[ObjectInfo], ids: Sequence[str]) -> None:
        """Make sure the store holds one copy of every content id (copying only what it lacks)."""
        fs = self
        seen, lock = self._blobs_seen, self._blobs_lock
        sources: dict[str, ObjectInfo] = {}
        for info, content_id in zip(infos, ids, strict=True):
            sources.setdefault(content_id, info)
        with lock:
            unknown = sorted(set(sources) - seen)
        if not unknown:
            return
        found, _ = fs._client.probe([fs._store.blob_key(content_id) for content_id in unknown], [])
        missing = [content_id for content_id, info in zip(unknown, found, strict=True) if info is None]

        def keep(content_id: str) -> None:
            try:
                fs._client.copy(sources[content_id], fs._store.blob_key(content_id), content_id=content_id)
            except PreconditionFailed:
                raise _Changed from None

        fs._parallel(keep, missing)
        with lock:
            seen.update(unknown)

    # --- restore -------------------------------------------------------------------------------------

    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        fs = self
        manifest = fs._store.manifest(snapshot.snapshot_id)
        tree = fs._tree("")
        doomed = [info.key for path, info in tree.files.items() if path not in manifest.files]
        doomed += [fs._layout.dir_key(d) for d in tree.markers if d not in manifest.directories]
        wanted = self._differing(manifest, tree)
        fs._client.delete(doomed)
        content_ids = sorted({manifest.files[path].content_id for path in wanted})
        found, _ = fs._client.probe([fs._store.blob_key(content_id) for content_id in content_ids], [])
        blobs = dict(zip(content_ids, found, strict=True))
        lost = sorted(content_id for content_id, info in blobs.items() if info is None)
        if lost:
            raise SnapshotRestoreError(
                f"Snapshot {snapshot.snapshot_id} refers to content the store no longer holds ({len(lost)} object(s))"
            )

        def put_back(path: str) -> None:
            content_id = manifest.files[path].content_id
            blob = blobs[content_id]
            assert blob is not None
            fs._client.copy(blob, fs._layout.key(path), content_id=content_id)

        fs._parallel(put_back, wanted)
        markers = [fs._layout.dir_key(d) for d in sorted(manifest.directories) if d not in tree.markers]
        fs._parallel(lambda key: fs._client.put(key, b""), markers)

    def _differing(self, manifest: Manifest, tree: Tree) -> list[str]:
        """The manifest's files whose live object is missing or holds other content."""
        fs = self
        wanted: list[str] = []
        suspects: list[tuple[str, ObjectInfo]] = []
        for path, entry in manifest.files.items():
            live = tree.files.get(path)
            if live is None:
                wanted.append(path)
            elif (live.etag, live.size, live.modified.isoformat()) != (entry.etag, entry.size, entry.modified):
                suspects.append((path, live))  # another version since: compare content ids
        ids = fs._ids_of([live for _, live in suspects])
        wanted += [path for (path, _), now in zip(suspects, ids, strict=True) if now != manifest.files[path].content_id]
        return sorted(wanted)

    # --- manifests, the catalogue, deletion -----------------------------------------------------------

    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        fs = self
        if snapshot is not None:
            return {path: entry.content_id for path, entry in fs._store.manifest(snapshot.snapshot_id).files.items()}
        tree = fs._tree("")
        paths = sorted(tree.files)
        return dict(zip(paths, fs._ids_of([tree.files[path] for path in paths]), strict=True))

    def _kept_snapshots(self) -> Sequence[FilesystemSnapshot]:
        fs = self

        def record(snapshot_id: uuid.UUID) -> FilesystemSnapshot | None:
            try:
                return fs._store.record(snapshot_id, self.backend_name, self._snapshot_root())
            except SnapshotNotFoundError:
                return None  # deleted meanwhile

        found = [s for s in fs._parallel(record, fs._store.snapshot_ids()) if s is not None]
        return sorted(found, key=lambda snapshot: snapshot.created_at)

    def _drop_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        """Forget the snapshot and delete the content no other snapshot of this workspace holds."""
        fs = self
        if not fs._store.exists(snapshot.snapshot_id):
            raise SnapshotNotFoundError(f"No snapshot {snapshot.snapshot_id} in this workspace's snapshot store")
        held = fs._store.drop(snapshot.snapshot_id)
        seen, lock = self._blobs_seen, self._blobs_lock
        with lock:
            seen.difference_update(held)
            fs._store.collect(held, fs._store.snapshot_ids())
