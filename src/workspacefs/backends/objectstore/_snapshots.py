"""Snapshot hooks of ``ObjectStoreFilesystem``: capture into manifests, restore and diff from them.

Capture lists the workspace once, learns each file's content id (from the object's metadata, in one
concurrent batch of ``HEAD`` requests for versions this process has not seen) and writes one manifest.

- In a bucket with versioning on, the listing is of current versions and the manifest names them: nothing
  is copied, since the store keeps every version until it is deleted. Deleting the last snapshot that names
  a superseded version deletes that version, and so do the superseded versions no snapshot names, once
  superseded longer than a grace period (a capture in progress has listed them by then).
- Elsewhere capture copies inside the store only content no snapshot holds yet, into content-addressed
  blobs, and copies again a blob older than half the journal's ``tombstone_age`` that it reuses. Deleting a
  snapshot deletes the blobs nothing else holds only once they are older than ``tombstone_age`` (the journal's
  prune judges the same way): a snapshot being taken in another process (its blobs copied or reused, its
  manifest not listed yet) holds only young ones. The one window left, a blob judged old by the deletion and
  refreshed by a capture before the delete lands, is closed from both sides: the deletion lists the snapshots
  again afterwards and copies back what a new one names, the capture checks the blobs it refreshed once its
  manifest is listed. A change that keeps a blob for undo (it copies the blob again) after the age check is
  met by a second look at the journal's entries (and the snapshots) between the age check and the delete, and
  what one stored after that look names is copied back after the delete, from its file where that still holds
  the content. Left open: a change whose entry, copy and replacement of the file all fall between that second
  look and the delete request (no round trip apart), as for a capture whose file changes in the same moment.
  The journal's prune judges the same way (``ObjectJournal.prune``).

Restore compares the manifest with one listing of the workspace and touches only what differs: checks that
the store still holds every version or blob it needs (before changing anything), deletes what the snapshot
lacks, copies back (inside the store) the files whose content differs, puts back directory markers. Each
file is replaced atomically; the tree as a whole is not (an object store has no transaction), so restore
while another process writes gives a mix.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from workspacefs.backends._core import Fingerprint
from workspacefs.backends._objects._client import ObjectInfo, PreconditionFailed
from workspacefs.backends.objectstore._history import ObjectHistory, _Changed
from workspacefs.backends.objectstore._journal import Step
from workspacefs.backends.objectstore._layout import Tree
from workspacefs.backends.objectstore._manifests import Entry, Manifest
from workspacefs.errors import SnapshotCreationError, SnapshotNotFoundError, SnapshotRestoreError
from workspacefs.history import DIRECTORY, Change
from workspacefs.paths import ROOT
from workspacefs.results import FilesystemSnapshot

__all__ = ["ObjectSnapshots"]

_ATTEMPTS = 3
VERSION_GRACE = timedelta(minutes=10)
"""A superseded version no snapshot names is deleted only once superseded this long: a snapshot being
captured meanwhile (it lists, then writes its manifest) has named it by then if it is going to."""


class ObjectSnapshots(ObjectHistory):
    """The snapshot hooks (``_capture``, ``_restore_state``, ``_manifest`` …) over manifests in the store."""

    version_grace: timedelta = VERSION_GRACE
    """How long a superseded version stays after no snapshot names it (see :data:`VERSION_GRACE`)."""

    # --- capture -------------------------------------------------------------------------------------

    def _capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        fs = self
        versioned = fs._versions_kept()
        for _ in range(_ATTEMPTS):
            if versioned:
                tree = Tree.from_listing(fs._layout, "", fs._client.latest_versions(fs._layout.base))
            else:
                tree = fs._tree("")
            paths = sorted(tree.files)
            infos = [tree.files[path] for path in paths]
            ids = fs._ids_of(infos)
            refreshed: dict[str, ObjectInfo] = {}
            if not versioned:
                try:
                    refreshed = self._keep_content(infos, ids)
                except _Changed:
                    continue
            files = {
                path: Entry(
                    content_id, info.size, info.etag, info.modified.isoformat(), info.version_id if versioned else None
                )
                for path, info, content_id in zip(paths, infos, ids, strict=True)
            }
            snapshot = self._completed(
                draft,
                file_count=len(files),
                total_bytes=sum(entry.size for entry in files.values()),
                strategy="versions" if versioned else "manifest",
                commit_ref=str(draft.snapshot_id),
            )
            fs._store.write(snapshot, Manifest(frozenset(tree.directories), files))
            if not self._still_kept(refreshed):
                fs._store.drop(snapshot.snapshot_id)  # its content changed meanwhile: take it again
                continue
            return snapshot
        raise SnapshotCreationError("Files kept changing while the snapshot was taken; take it again")

    def _still_kept(self, refreshed: Mapping[str, ObjectInfo]) -> bool:
        """After the manifest is listed, check the blobs this capture refreshed (one concurrent batch of
        ``HEAD``s) and copy back any a snapshot's deletion in another process collected meanwhile: it judged them
        old just before the refresh, and did not list this snapshot yet. ``False``: one is gone and its source
        changed since (the snapshot must be taken again)."""
        fs = self
        if not refreshed:
            return True
        content_ids = sorted(refreshed)
        found, _ = fs._client.probe([fs._store.blob_key(content_id) for content_id in content_ids], [])
        gone = [content_id for content_id, info in zip(content_ids, found, strict=True) if info is None]
        return not self._copy_back({content_id: [refreshed[content_id]] for content_id in gone})

    # --- restore -------------------------------------------------------------------------------------

    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        fs = self
        manifest = fs._store.manifest(snapshot.snapshot_id)
        tree = Tree.from_listing(fs._layout, "", fs._listing(""))
        doomed = [info.key for path, info in tree.files.items() if path not in manifest.files]
        doomed += [fs._layout.dir_key(d) for d in tree.markers if d not in manifest.directories]
        wanted = self._differing(manifest, tree)
        sources = self._sources(manifest, wanted)
        lost = [path for path in wanted if sources[path] is None]
        if lost:
            raise SnapshotRestoreError(
                f"Snapshot {snapshot.snapshot_id} refers to content the store no longer holds ({len(lost)} file(s), "
                f"e.g. {lost[0]!r}); nothing was changed"
            )

        def put_back(path: str) -> None:
            source = sources[path]
            assert source is not None
            try:
                fs._client.copy(source, fs._layout.key(path), content_id=manifest.files[path].content_id)
            except (FileNotFoundError, PreconditionFailed):  # the store's error names the kept content's key
                raise SnapshotRestoreError(
                    f"Snapshot {snapshot.snapshot_id} lost the content of {path!r} while it was being restored "
                    "(deleted or replaced meanwhile); the workspace is partly restored"
                ) from None

        markers = [fs._layout.dir_key(d) for d in sorted(manifest.directories) if d not in tree.markers]
        with self._recording("restore", self._restore_steps(manifest, tree, wanted) if fs._history_on else ()):
            fs._client.delete(doomed)
            fs._parallel(put_back, wanted)
            fs._parallel(lambda key: fs._client.put(key, b""), markers)

    def _restore_steps(self, manifest: Manifest, tree: Tree, wanted: Sequence[str]) -> list[Step]:
        """What a restore changes, the files it replaces or deletes kept for undo: removals first (children
        before their directory), then what it puts back (parents first)."""
        replaced = sorted(
            {*(p for p in tree.files if p not in manifest.files), *(p for p in wanted if p in tree.files)}
        )
        kept = dict(zip(replaced, self._kept_many([tree.files[p] for p in replaced], ROOT), strict=True))
        gone = [
            Step(Change(p, kept[p][0], None, kept[p][1], 0), kept[p][2]) for p in replaced if p not in manifest.files
        ]
        gone += [Step(Change(d, DIRECTORY, None)) for d in tree.directories if d not in manifest.directories]
        gone.sort(key=lambda step: step.change.path, reverse=True)
        made = [Step(Change(d, None, DIRECTORY)) for d in manifest.directories if d not in tree.directories]
        for path in wanted:
            entry = manifest.files[path]
            before = kept.get(path)
            made.append(
                Step(Change(path, None, entry.content_id, 0, entry.size))
                if before is None
                else Step(Change(path, before[0], entry.content_id, before[1], entry.size), before[2])
            )
        made.sort(key=lambda step: step.change.path)
        return gone + made

    def _sources(self, manifest: Manifest, paths: Sequence[str]) -> dict[str, ObjectInfo | None]:
        """Where each file's content is kept (its version, or its blob), ``None`` where the store lost it;
        asked in one concurrent batch per kind."""
        fs = self
        versioned = [path for path in paths if manifest.files[path].version is not None]
        there = fs._client.versions_exist([(fs._layout.key(p), str(manifest.files[p].version)) for p in versioned])
        sources: dict[str, ObjectInfo | None] = {}
        for path, kept in zip(versioned, there, strict=True):
            entry = manifest.files[path]
            modified = datetime.fromisoformat(entry.modified)
            version = ObjectInfo(fs._layout.key(path), entry.size, entry.etag, modified, version_id=entry.version)
            sources[path] = version if kept else None
        blobbed = [path for path in paths if manifest.files[path].version is None]
        content_ids = sorted({manifest.files[path].content_id for path in blobbed})
        found, _ = fs._client.probe([fs._store.blob_key(content_id) for content_id in content_ids], [])
        blobs = dict(zip(content_ids, found, strict=True))
        sources.update({path: blobs[manifest.files[path].content_id] for path in blobbed})
        return sources

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
        """Forget the snapshot and delete the content no other snapshot or entry holds, once older than the
        journal's ``tombstone_age`` (a snapshot being taken elsewhere may hold a younger blob; a later pass
        collects it)."""
        fs = self
        if not fs._store.exists(snapshot.snapshot_id):
            raise SnapshotNotFoundError(f"No snapshot {snapshot.snapshot_id} in this workspace's snapshot store")
        held = fs._store.drop(snapshot.snapshot_id)
        kept = fs._store.snapshot_ids()
        blobs, _ = fs._store.unheld(held.files, kept)
        journaled, entries = fs._changes.holding()  # whether or not this object journals: another one may
        blobs -= {ref[1] for ref in journaled if ref[0] == "blob"}
        blobs = self._old_blobs(blobs)
        if blobs:  # looked at again after the age check: a change that kept one since (copied it again, young)
            blobs -= {ref[1] for ref in self._named_since({("blob", b) for b in blobs}, entries, frozenset(kept))}
        with self._blobs_lock:
            for blob in blobs:
                self._blobs_seen.pop(blob, None)
            fs._store.collect(blobs)
        if blobs:
            self._copy_back_named(blobs, entries, kept)
        if any(entry.version is not None for entry in held.files.values()):
            self._prune_versions(kept, {(ref[1], ref[2]) for ref in journaled if ref[0] == "version"})
        fs._store.forget_ids(info.etag for info in fs._tree("").files.values())

    def _old_blobs(self, content_ids: Iterable[str]) -> set[str]:
        """Of these blobs, those older than the journal's ``tombstone_age`` (one concurrent batch of ``HEAD``s),
        as the journal's prune judges: a younger one may be held by a snapshot or an entry another process is
        writing (its blobs copied, its manifest not listed yet; a blob it reuses is copied again once half that
        age old), so it stays for a later pass. One gone already is not deleted again."""
        fs = self
        candidates = sorted(content_ids)
        if not candidates:
            return set()
        found, _ = fs._client.probe([fs._store.blob_key(content_id) for content_id in candidates], [])
        before = datetime.now(UTC) - fs._changes.tombstone_age
        return {c for c, info in zip(candidates, found, strict=True) if info is not None and info.modified < before}

    def _prune_versions(self, kept: Iterable[uuid.UUID], journaled: set[tuple[str, str]]) -> None:
        """Delete the superseded versions of the workspace's objects that no kept snapshot and no journal entry
        (``journaled``) names, once superseded longer than :data:`VERSION_GRACE`."""
        fs = self
        named: set[tuple[str, str]] = set(journaled)
        for snapshot_id in kept:
            try:
                files = fs._store.manifest(snapshot_id).files
            except SnapshotNotFoundError:
                continue  # dropped meanwhile
            named.update((fs._layout.key(p), e.version) for p, e in files.items() if e.version is not None)
        before = datetime.now(UTC) - self.version_grace
        fs._client.delete_versions(
            (info.key, info.version_id)
            for info, superseded in fs._client.superseded_versions(fs._layout.base)
            if info.version_id is not None and superseded < before and (info.key, info.version_id) not in named
        )
