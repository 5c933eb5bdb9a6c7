"""Snapshots of an ``ObjectStoreFilesystem`` in a bucket with versioning on (moto's real server on loopback):
they name the versions the store keeps instead of copying content, restore copies those versions back inside
the store, and deleting snapshots deletes the superseded versions no snapshot names any more."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from test_objectstore import ObjectStoreFactory

from workspacefs import ObjectStoreFilesystem, SnapshotRestoreError
from workspacefs.testing import CapabilitiesSuite, HistorySuite, SnapshotSuite
from workspacefs.testing._s3 import S3Server

BUCKET = "wsfs-versioned"
_prefixes = itertools.count()


def fresh_root() -> str:
    return f"{BUCKET}/v{next(_prefixes)}"


@pytest.fixture(scope="module")
def versioned_s3(s3_server: S3Server) -> Any:
    """An s3fs client for a bucket with versioning on, made once for the module."""
    s3_server.make_bucket(BUCKET, versioned=True)
    s3 = s3_server.filesystem()
    s3.ls(BUCKET)
    return s3


class VersionedFactory(ObjectStoreFactory):
    """A fresh prefix of the versioned bucket per filesystem."""

    @pytest.fixture(autouse=True)
    def _server(self, s3_server: S3Server, versioned_s3: Any) -> Iterator[None]:
        self.server = s3_server
        self.s3 = versioned_s3
        yield

    def fresh_root(self) -> str:
        return fresh_root()


class TestVersionedSnapshots(VersionedFactory, SnapshotSuite, CapabilitiesSuite, HistorySuite):
    """The suite's snapshot, capability and history parts, with snapshots and journal entries that name
    versions. Not its random model:
    moto lists a directory whose objects are all deleted (delete markers) in a delimited listing, so
    ``list`` and an emptied directory's ``delete`` disagree with the model on sequences that delete and
    write again (AWS S3, MinIO and Ceph do not do this; see the xfail below)."""

    @pytest.mark.xfail(
        strict=True,
        reason="moto 5.2 lists a prefix whose objects are all delete-marked as a directory (AWS S3, MinIO and "
        "Ceph do not); test_restoring_an_empty_state_leaves_no_current_version checks the bucket instead",
    )
    def test_empty_state_round_trip(self) -> None:
        super().test_empty_state_round_trip()


class TestVersionedBehaviour(VersionedFactory):
    """What lands in the bucket: no copies, versions kept while named, collected when no longer named."""

    def store_keys(self, root: str) -> list[str]:
        return sorted(self.s3.find(f"{BUCKET}/.wsfs-store/{root.split('/', 1)[1]}", withdirs=False))

    def versions(self, root: str) -> list[tuple[str, str]]:
        """Every version (delete markers too) under the root, as ``(key, version id)``."""
        bucket, prefix = root.split("/", 1)
        page = self.s3.call_s3("list_object_versions", Bucket=bucket, Prefix=prefix + "/")
        found = [*page.get("Versions", ()), *page.get("DeleteMarkers", ())]
        return sorted((item["Key"], item["VersionId"]) for item in found)

    def test_a_snapshot_copies_nothing(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        for index in range(20):
            fs.write(f"d/f{index}.txt", f"content {index}")
        assert fs.capabilities.cheap_snapshots
        before, stored = self.versions(root), self.store_keys(root)
        snapshot = fs.snapshot()
        assert snapshot.strategy == "versions"
        assert self.versions(root) == before  # not one object written inside the workspace
        assert not [key for key in self.store_keys(root) if "/blobs/" in key]  # nor a blob outside it
        added = sorted(set(self.store_keys(root)) - set(stored))
        assert [key.rsplit("/", 2)[-2] for key in added] == ["manifests", "snapshots"]

    def test_restore_brings_back_overwritten_and_deleted_files_from_their_versions(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        fs.write("keep.txt", "kept")
        fs.write("edit.txt", "v1")
        fs.write("gone/deep.txt", "deep")
        snapshot = fs.snapshot(tag="start")
        fs.write("edit.txt", "v2")
        fs.delete("gone", recursive=True)
        fs.write("new.txt", "new")
        other = ObjectStoreFilesystem(self.server.filesystem(), root)  # another process, no shared memory
        [listed] = other.snapshots()
        assert (listed.tag, listed.strategy) == ("start", "versions")
        assert [str(p) for p in other.diff(listed).modified] == ["edit.txt"]
        other.restore(listed)
        assert {e.path: fs.read(e.path).content for e in fs.walk() if e.is_file} == {
            "keep.txt": "kept",
            "edit.txt": "v1",
            "gone/deep.txt": "deep",
        }
        assert fs.diff(snapshot).unchanged_count == 3

    def test_deleting_snapshots_deletes_the_versions_only_they_named(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root, history=False)  # a journal names versions too: see below
        fs.version_grace = timedelta(0)
        fs.write("a.txt", "a1")
        first = fs.snapshot()
        fs.write("a.txt", "a2")
        fs.write("a.txt", "a3")  # a2 is superseded and never named by a snapshot
        second = fs.snapshot()
        fs.write("a.txt", "a4")
        assert len(self.versions(root)) == 4
        fs.delete_snapshot(first)  # a1 and a2 go; a3 is named by the second; a4 is current
        assert len(self.versions(root)) == 2
        fs.restore(second)
        assert fs.read("a.txt").content == "a3"
        assert len(self.versions(root)) == 3  # restore wrote a3 again, as a new current version
        fs.delete_snapshot(second)  # the old a3 and a4 go; the current one stays
        assert len(self.versions(root)) == 1
        assert fs.read("a.txt").content == "a3"

    def test_restoring_an_empty_state_leaves_no_current_version(self) -> None:
        """What the suite's empty round trip checks, asked of the bucket the way AWS S3 lists it: no current
        version below the root (moto alone still shows the emptied directory in a delimited listing)."""
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        snapshot = fs.snapshot()
        fs.write("a/b.txt", "x")
        fs.restore(snapshot)
        assert list(fs._client.latest_versions(fs._layout.base)) == []
        assert [e.path for e in fs.walk()] == []  # the recursive listing agrees

    def test_a_write_where_a_deleted_directory_was_is_a_file(self) -> None:
        """Where every object below a name is deleted (delete markers), a delimited listing on some stores
        still shows the name as a directory; the write's target check asks again before refusing."""
        fs = ObjectStoreFilesystem(self.s3, fresh_root())
        fs.write("p/d/x.txt", "x")
        fs.delete("p/d", recursive=True)
        fs.write("p/d", "now a file")
        assert fs.read("p/d").content == "now a file" and fs.stat("p/d").is_file

    def test_a_grace_period_keeps_recently_superseded_versions(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)  # the default grace: ten minutes
        fs.write("a.txt", "a1")
        snapshot = fs.snapshot()
        fs.write("a.txt", "a2")
        fs.delete_snapshot(snapshot)
        assert len(self.versions(root)) == 2  # a1 was superseded a moment ago: a capture may be naming it

    def test_a_lost_version_fails_the_restore_before_anything_changes(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        fs.write("a.txt", "a1")
        fs.write("b.txt", "b1")
        snapshot = fs.snapshot()
        fs.write("a.txt", "a2")
        fs.write("c.txt", "c")
        bucket, prefix = root.split("/", 1)
        versions = self.s3.call_s3("list_object_versions", Bucket=bucket, Prefix=f"{prefix}/a.txt")["Versions"]
        [old] = [v for v in versions if not v["IsLatest"]]
        self.s3.call_s3("delete_object", Bucket=bucket, Key=old["Key"], VersionId=old["VersionId"])  # by hand
        with pytest.raises(SnapshotRestoreError, match="no longer holds"):
            fs.restore(snapshot)
        assert fs.read("a.txt").content == "a2" and fs.exists("c.txt")  # nothing was changed

    def test_snapshots_taken_before_versioning_was_used_still_restore(self) -> None:
        """A manifest with blobs (taken by a filesystem told the bucket keeps no versions) restores in a
        versioned one, and the two kinds of snapshot live side by side."""
        root = fresh_root()
        copying = ObjectStoreFilesystem(self.s3, root, versioned=False)
        copying.write("a.txt", "a1")
        old = copying.snapshot()
        assert old.strategy == "manifest"
        assert [key for key in self.store_keys(root) if "/blobs/" in key]
        fs = ObjectStoreFilesystem(self.s3, root)
        fs.write("a.txt", "a2")
        new = fs.snapshot()
        fs.write("a.txt", "a3")
        fs.restore(old)
        assert fs.read("a.txt").content == "a1"
        fs.restore(new)
        assert fs.read("a.txt").content == "a2"
        fs._changes.tombstone_age = timedelta(0)  # a blob younger than this stays for a later pass
        fs.delete_snapshot(old)
        assert not [key for key in self.store_keys(root) if "/blobs/" in key]
