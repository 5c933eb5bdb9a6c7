"""The snapshot store: content-addressed blobs and one manifest per snapshot, kept outside the workspace.

Layout under the store's prefix (never inside the root the agent writes): ``blobs/ab/<content id>`` holds one
immutable copy of each distinct content a snapshot of an unversioned bucket holds; ``manifests/<snapshot
id>`` every directory and every file with its content id, size and live version (and, in a bucket that
keeps versions, the store's id of that version); ``snapshots/<snapshot id>`` the small record
``snapshots()`` lists (tag, parent, counts, time, strategy); ``ids/<etag>`` the content id of an object
written in parts (S3 cannot attach metadata once an upload completes).

In a bucket with versioning on, a snapshot copies nothing: the versions it names are the content, kept by
the store until the last snapshot naming them is deleted. Elsewhere a snapshot copies into ``blobs/`` only
content no snapshot holds yet (a copy inside the store, no bytes through this process). The manifest is
written before the record: a snapshot that is listed is complete.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from workspacefs.backends._objects._client import ObjectClient, ObjectInfo
from workspacefs.errors import SnapshotNotFoundError
from workspacefs.results import FilesystemSnapshot

__all__ = ["Entry", "Manifest", "ManifestStore"]

_FORMAT = 1


@dataclass(frozen=True, slots=True)
class Entry:
    """One file of a manifest: its content id and size, and the live object's version when it was captured
    (``version`` is the store's id of that version where the bucket keeps versions: the content itself)."""

    content_id: str
    size: int
    etag: str
    modified: str
    version: str | None = None


@dataclass(frozen=True, slots=True)
class Manifest:
    """Every directory and file of one snapshot."""

    directories: frozenset[str]
    files: Mapping[str, Entry]


def _item(entry: Entry) -> list[str | int]:
    item: list[str | int] = [entry.content_id, entry.size, entry.etag, entry.modified]
    return item if entry.version is None else [*item, entry.version]


def _etag_name(etag: str) -> str:
    return "".join(c for c in etag if c.isalnum() or c == "-")


class ManifestStore:
    """Reads and writes the store's objects; the filesystem decides what goes in them."""

    def __init__(self, client: ObjectClient, prefix: str) -> None:
        self._client = client
        self._prefix = prefix.rstrip("/") + "/"

    @property
    def prefix(self) -> str:
        """``bucket/prefix/`` of the store."""
        return self._prefix

    def blob_key(self, content_id: str) -> str:
        """Where the one copy of ``content_id`` lives."""
        return f"{self._prefix}blobs/{content_id[:2]}/{content_id}"

    def _record_key(self, snapshot_id: uuid.UUID) -> str:
        return f"{self._prefix}snapshots/{snapshot_id}"

    def _manifest_key(self, snapshot_id: uuid.UUID) -> str:
        return f"{self._prefix}manifests/{snapshot_id}"

    # --- content ids of objects written in parts --------------------------------------------------------

    def recorded_id(self, etag: str, size: int) -> str | None:
        """The content id recorded for an object version, if one was."""
        try:
            data, _ = self._client.get(f"{self._prefix}ids/{_etag_name(etag)}", 0, 4096)
        except FileNotFoundError:
            return None
        record = json.loads(data)
        return str(record["id"]) if record.get("size") == size else None

    def forget_ids(self, live_etags: Iterable[str]) -> int:
        """Delete the content-id records of object versions no longer live (a record is only a shortcut: a
        version whose record is gone is read and hashed once more); return how many went."""
        live = {_etag_name(etag) for etag in live_etags}
        doomed = [
            item.key
            for item in self._client.list(f"{self._prefix}ids/", recursive=True)
            if isinstance(item, ObjectInfo) and item.key.rpartition("/")[2] not in live
        ]
        self._client.delete(doomed)
        return len(doomed)

    def record_id(self, etag: str, size: int, content_id: str) -> None:
        """Remember the content id of an object version (one small object, outside the workspace)."""
        body = json.dumps({"id": content_id, "size": size}).encode()
        self._client.put(f"{self._prefix}ids/{_etag_name(etag)}", body)

    # --- snapshots --------------------------------------------------------------------------------------

    def write(self, snapshot: FilesystemSnapshot, manifest: Manifest) -> None:
        """Store a manifest, then the record that lists it."""
        body = {
            "format": _FORMAT,
            "directories": sorted(manifest.directories),
            "files": {p: _item(e) for p, e in sorted(manifest.files.items())},
        }
        self._client.put(self._manifest_key(snapshot.snapshot_id), json.dumps(body, separators=(",", ":")).encode())
        record = {
            "format": _FORMAT,
            "id": str(snapshot.snapshot_id),
            "created_at": snapshot.created_at.isoformat(),
            "tag": snapshot.tag,
            "parent_id": None if snapshot.parent_id is None else str(snapshot.parent_id),
            "file_count": snapshot.file_count,
            "total_bytes": snapshot.total_bytes,
            "strategy": snapshot.strategy,
        }
        self._client.put(self._record_key(snapshot.snapshot_id), json.dumps(record).encode())

    def _read(self, key: str, what: str) -> Any:
        info = self._client.head(key)
        if info is None:
            raise SnapshotNotFoundError(f"No {what} in this workspace's snapshot store")
        try:
            data, _ = self._client.get(key, 0, max(info.size, 1), if_match=info.etag)
        except FileNotFoundError:  # deleted since the HEAD (the store's error names the key)
            raise SnapshotNotFoundError(f"No {what} in this workspace's snapshot store") from None
        return json.loads(data)

    def manifest(self, snapshot_id: uuid.UUID) -> Manifest:
        """The manifest of a snapshot this store keeps (``SnapshotNotFoundError`` otherwise)."""
        body = self._read(self._manifest_key(snapshot_id), f"snapshot {snapshot_id}")
        files = {
            path: Entry(item[0], int(item[1]), item[2], item[3], item[4] if len(item) > 4 else None)
            for path, item in body["files"].items()
        }
        return Manifest(frozenset(body["directories"]), files)

    def exists(self, snapshot_id: uuid.UUID) -> bool:
        """True if the snapshot is listed here."""
        return self._client.head(self._record_key(snapshot_id)) is not None

    def snapshot_ids(self) -> list[uuid.UUID]:
        """Every listed snapshot's id (any order)."""
        found: list[uuid.UUID] = []
        for item in self._client.list(f"{self._prefix}snapshots/", recursive=True):
            if isinstance(item, ObjectInfo):
                try:
                    found.append(uuid.UUID(item.key.rpartition("/")[2]))
                except ValueError:
                    continue  # not ours
        return found

    def record(self, snapshot_id: uuid.UUID, backend: str, root_path: str) -> FilesystemSnapshot:
        """The listed snapshot as a value."""
        body = self._read(self._record_key(snapshot_id), f"snapshot {snapshot_id}")
        created = datetime.fromisoformat(body["created_at"])
        return FilesystemSnapshot(
            snapshot_id=uuid.UUID(body["id"]),
            created_at=created if created.tzinfo else created.replace(tzinfo=UTC),
            backend=backend,
            root_path=root_path,
            tag=body.get("tag"),
            parent_id=uuid.UUID(body["parent_id"]) if body.get("parent_id") else None,
            file_count=int(body.get("file_count", 0)),
            total_bytes=int(body.get("total_bytes", 0)),
            commit_ref=body["id"],
            strategy=str(body.get("strategy") or "manifest"),
        )

    def drop(self, snapshot_id: uuid.UUID) -> Manifest:
        """Unlist a snapshot and delete its manifest; return what it held."""
        held = self.manifest(snapshot_id)
        self._client.delete([self._record_key(snapshot_id)])
        self._client.delete([self._manifest_key(snapshot_id)])
        return held

    def unheld(self, candidates: Mapping[str, Entry], kept: Iterable[uuid.UUID]) -> tuple[set[str], set[str]]:
        """Of the files of a dropped snapshot (path → entry), the blobs (content ids) and the kept versions
        (paths) that no snapshot in ``kept`` holds any more."""
        blobs = {entry.content_id for entry in candidates.values() if entry.version is None}
        versions = {path for path, entry in candidates.items() if entry.version is not None}
        for snapshot_id in kept:
            if not blobs and not versions:
                break
            try:
                held = self.manifest(snapshot_id).files
            except SnapshotNotFoundError:
                continue  # dropped meanwhile
            blobs -= {entry.content_id for entry in held.values() if entry.version is None}
            versions = {p for p in versions if p not in held or held[p].version != candidates[p].version}
        return blobs, versions

    def collect(self, content_ids: Iterable[str]) -> None:
        """Delete the blobs of these content ids."""
        self._client.delete([self.blob_key(content_id) for content_id in sorted(content_ids)])
