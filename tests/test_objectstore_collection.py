"""Deleting a snapshot beside a snapshot being taken in another process (moto's real S3 server on loopback): the
blobs the new snapshot holds survive, whatever the order of the two processes' requests. Two filesystem objects
on one bucket stand for the two processes; their steps are interleaved by hooks, never by timing."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

from workspacefs import ObjectStoreFilesystem
from workspacefs.backends.objectstore._snapshots import ObjectSnapshots
from workspacefs.results import FilesystemSnapshot
from workspacefs.streams import content_id_of
from workspacefs.testing._s3 import S3Server

BUCKET = "wsfs-collection"
_roots = itertools.count()


@pytest.fixture(scope="module")
def bucket(s3_server: S3Server) -> S3Server:
    s3_server.make_bucket(BUCKET)
    return s3_server


def two_processes(server: S3Server) -> tuple[ObjectStoreFilesystem, ObjectStoreFilesystem, str]:
    root = f"{BUCKET}/c{next(_roots)}"
    return (*(ObjectStoreFilesystem(server.filesystem(), root) for _ in range(2)), root)  # type: ignore[return-value]


def blob_count(server: S3Server, fs: ObjectStoreFilesystem) -> int:
    return len(server.filesystem().find(fs._store.prefix + "blobs/"))


def holds_one(server: S3Server, fs: ObjectStoreFilesystem) -> bool:
    """True if the store keeps the blob of ``b"one"``."""
    return bool(server.filesystem().exists(fs._store.blob_key(content_id_of(b"one"))))


def changed_unkept(server: S3Server, root: str) -> None:
    """Change a.txt where nothing keeps its old content again (no journal: its keep would copy the blob back)."""
    ObjectStoreFilesystem(server.filesystem(), root, history=False).write("a.txt", "changed")


def restores_one(server: S3Server, fs: ObjectStoreFilesystem, root: str, snapshot: FilesystemSnapshot) -> None:
    changed_unkept(server, root)
    fs.restore(snapshot)
    assert fs.read_bytes("a.txt").content == b"one"


def test_a_snapshot_being_taken_keeps_a_young_blob_another_process_s_deletion_would_collect(bucket: S3Server) -> None:
    """The deletion lists the snapshots before the new one's manifest is listed: its blob (copied by the first
    snapshot a moment ago, reused as it is) is held by nothing listed, and was collected: data loss."""
    deleter, taker, root = two_processes(bucket)
    deleter.write("a.txt", "one")
    first = deleter.snapshot()
    assert blob_count(bucket, deleter) == 1

    def keep_then_delete(*args: Any, **options: Any) -> Any:
        del taker._keep_content  # once
        kept = taker._keep_content(*args, **options)
        deleter.delete_snapshot(first)  # between the taker's blobs and its manifest
        return kept

    taker._keep_content = keep_then_delete  # type: ignore[method-assign]
    second = taker.snapshot()
    assert blob_count(bucket, deleter) == 1  # young: spared by this pass
    restores_one(bucket, taker, root, second)
    deleter.delete_snapshot(second)
    assert holds_one(bucket, deleter)  # still young: a later pass collects it
    deleter._changes.tombstone_age = timedelta(0)
    snapshot = deleter.snapshot()  # names what a.txt holds now, not "one"
    deleter.delete_snapshot(snapshot)
    assert not holds_one(bucket, deleter)  # once old, what nothing holds goes


def test_a_blob_refreshed_between_the_age_check_and_the_delete_is_copied_back_by_the_deletion(
    bucket: S3Server,
) -> None:
    """The deletion judged the blob old, then another process's snapshot copied it again (reused, old) and was
    listed, then the delete landed: the deletion lists the snapshots again and copies back what a new one names."""
    deleter, taker, root = two_processes(bucket)
    for fs in (deleter, taker):
        fs._changes.tombstone_age = timedelta(0)  # every blob is old: reused ones are copied again
    deleter.write("a.txt", "one")
    first = deleter.snapshot()
    collect, taken = deleter._store.collect, []

    def snapshot_then_collect(content_ids: Any) -> None:
        del deleter._store.collect  # once
        taken.append(taker.snapshot())  # refreshes the blob, its manifest listed, checked: still there
        collect(content_ids)

    deleter._store.collect = snapshot_then_collect  # type: ignore[method-assign]
    deleter.delete_snapshot(first)
    assert taken
    assert blob_count(bucket, deleter) == 1
    restores_one(bucket, taker, root, taken[0])


def test_a_blob_collected_after_the_refresh_is_copied_back_by_the_snapshot(bucket: S3Server) -> None:
    """The whole deletion ran between the taker's refresh of an old blob and its manifest: the deletion's second
    listing does not show the new snapshot yet, so the capture checks what it refreshed and copies it back."""
    deleter, taker, root = two_processes(bucket)
    for fs in (deleter, taker):
        fs._changes.tombstone_age = timedelta(0)
    deleter.write("a.txt", "one")
    first = deleter.snapshot()

    def keep_then_delete(*args: Any, **options: Any) -> Any:
        del taker._keep_content  # once
        kept = taker._keep_content(*args, **options)
        deleter.delete_snapshot(first)
        return kept

    taker._keep_content = keep_then_delete  # type: ignore[method-assign]
    second = taker.snapshot()
    assert blob_count(bucket, deleter) == 1
    assert [s.snapshot_id for s in taker.snapshots()] == [second.snapshot_id]
    restores_one(bucket, taker, root, second)


def test_a_capture_whose_collected_blob_cannot_be_copied_back_is_taken_again(bucket: S3Server) -> None:
    """The blob went and the file it came from is gone since the listing: the snapshot is unlisted and taken
    again from a new listing, never left naming content the store lacks."""
    deleter, taker, root = two_processes(bucket)
    for fs in (deleter, taker):
        fs._changes.tombstone_age = timedelta(0)
    deleter.write("a.txt", "one")
    first = deleter.snapshot()
    rounds = [0]

    def keep_then_delete(*args: Any, **options: Any) -> Any:
        kept = ObjectSnapshots._keep_content(taker, *args, **options)
        rounds[0] += 1
        if rounds[0] == 1:
            deleter.delete_snapshot(first)
            ObjectStoreFilesystem(bucket.filesystem(), root, history=False).delete("a.txt")
        else:
            del taker._keep_content  # the second capture round: unhooked from here on
        return kept

    taker._keep_content = keep_then_delete  # type: ignore[method-assign]
    second = taker.snapshot()
    assert rounds[0] == 2
    assert [(s.snapshot_id, s.file_count) for s in taker.snapshots()] == [(second.snapshot_id, 0)]
    assert not holds_one(bucket, deleter)


# --- a reader settling a slow writer's entry ----------------------------------------------------------------


def test_a_move_settled_between_its_copy_and_its_delete_records_only_the_delete_anew(bucket: S3Server) -> None:
    """A reader settled a slow move's pending entry after the copy, before the delete: a copy, rightly. The
    writer's confirmation then lost to it and recorded what was left anew, but as the whole move: the history
    claimed b.txt changed twice and never that a.txt went; replaying it gave a.txt back."""
    writer, reader, _ = two_processes(bucket)
    reader.journal_grace = timedelta(0)  # the writer's entry is due at once: as if it had stalled for 10 minutes
    writer.write("a.txt", "one")
    cid = content_id_of(b"one")

    def copy_then_read(*args: Any) -> None:
        del writer._copy_object  # once
        writer._copy_object(*args)
        assert [e.operation for e in reader.history(limit=None)] == ["move", "write"]  # settled, as a copy

    writer._copy_object = copy_then_read  # type: ignore[method-assign]
    writer.move("a.txt", "b.txt")
    newest, settled = writer.history(limit=2)
    assert [(c.path, c.before, c.after, c.from_path) for c in settled.changes] == [("b.txt", None, cid, None)]
    assert [(c.path, c.before, c.after, c.from_path) for c in newest.changes] == [("a.txt", cid, None, None)]
    assert sorted(e.path for e in writer.walk() if e.is_file) == ["b.txt"]
