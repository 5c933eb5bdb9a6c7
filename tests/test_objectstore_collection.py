"""Deleting a snapshot beside a snapshot being taken in another process (moto's real S3 server on loopback): the
blobs the new snapshot holds survive, whatever the order of the two processes' requests. Two filesystem objects
on one bucket stand for the two processes; their steps are interleaved by hooks, never by timing."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta
from typing import Any

import pytest

from workspacefs import ObjectStoreFilesystem
from workspacefs.backends.objectstore._snapshots import ObjectSnapshots
from workspacefs.history import DIRECTORY
from workspacefs.results import FilesystemSnapshot
from workspacefs.streams import content_id_of
from workspacefs.testing._s3 import S3Server

BUCKET = "wsfs-collection"
_roots = itertools.count()


VERSIONED = "wsfs-collection-versioned"


@pytest.fixture(scope="module")
def bucket(s3_server: S3Server) -> S3Server:
    s3_server.make_bucket(BUCKET)
    s3_server.make_bucket(VERSIONED, versioned=True)
    return s3_server


def two_processes(server: S3Server, bucket: str = BUCKET) -> tuple[ObjectStoreFilesystem, ObjectStoreFilesystem, str]:
    root = f"{bucket}/c{next(_roots)}"
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


def changes_of(entry: Any) -> list[tuple[str, Any, Any, Any]]:
    return [(c.path, c.before, c.after, c.from_path) for c in entry.changes]


def test_a_directory_move_settled_after_its_copies_records_only_the_deletes_anew(bucket: S3Server) -> None:
    """The same for a directory: the reader settled it after every copy, before the deletes (the directory made,
    each file copied); the writer recorded the whole move again, so the history named every destination twice and
    never said the source went. What is left is recorded: each source's delete, then the source directories."""
    writer, reader, _ = two_processes(bucket)
    reader.journal_grace = timedelta(0)
    writer.write("d/a.txt", "one")
    writer.write("d/sub/b.txt", "two")
    one, two = content_id_of(b"one"), content_id_of(b"two")
    put, dst_marker = writer._client.put, writer._layout.dir_key("e")

    def put_then_read(key: str, *args: Any, **options: Any) -> Any:
        stored = put(key, *args, **options)
        if key == dst_marker:  # every file copied, none deleted yet
            assert next(e.operation for e in reader.history(limit=None)) == "move"
        return stored

    writer._client.put = put_then_read  # type: ignore[method-assign]
    writer.move("d", "e")
    newest, settled, *_ = writer.history(limit=None)
    assert changes_of(settled) == [
        ("e", None, DIRECTORY, None),
        ("e/sub", None, DIRECTORY, None),
        ("e/a.txt", None, one, None),
        ("e/sub/b.txt", None, two, None),
    ]
    assert changes_of(newest) == [
        ("d/sub/b.txt", two, None, None),
        ("d/sub", DIRECTORY, None, None),
        ("d/a.txt", one, None, None),
        ("d", DIRECTORY, None, None),
    ]
    assert sorted(e.path for e in writer.walk() if e.is_file) == ["e/a.txt", "e/sub/b.txt"]


def tree_with_empty_directories(
    bucket: S3Server,
) -> tuple[ObjectStoreFilesystem, ObjectStoreFilesystem, list[tuple[str, bool]]]:
    """A writer and a reader (that settles at once) of ``d/a.txt``, ``d/empty`` and ``d/sub/deeper``, and the tree."""
    writer, reader, _ = two_processes(bucket)
    reader.journal_grace = timedelta(0)
    writer.write("d/a.txt", "one")
    writer.mkdir("d/empty")
    writer.mkdir("d/sub/deeper")
    return writer, reader, sorted((e.path, e.is_directory) for e in writer.walk())


def settle_after(writer: ObjectStoreFilesystem, reader: ObjectStoreFilesystem, first: str) -> None:
    """Make ``writer``'s next move copy ``first`` first, have ``reader`` settle the move (by reading the history)
    right after that copy, and hold every other copy until then (the copies run in threads)."""
    copy, read = writer._copy_object, threading.Event()

    def copy_in_order(info: Any, path: str) -> None:
        if path != first:
            assert read.wait(60)
            copy(info, path)
            return
        copy(info, path)
        reader.history(limit=None)
        read.set()

    writer._copy_object = copy_in_order  # type: ignore[method-assign]


def test_a_directory_move_settled_part_way_records_the_rest_of_it(bucket: S3Server) -> None:
    """Settled with one file copied and the other not yet: the rest is that file's move (and its directory),
    the copied file's delete and the source directories' removal; nothing is named twice."""
    writer, reader, _ = two_processes(bucket)
    reader.journal_grace = timedelta(0)
    writer.write("d/a.txt", "one")
    writer.write("d/sub/b.txt", "two")
    one, two = content_id_of(b"one"), content_id_of(b"two")
    settle_after(writer, reader, "e/a.txt")  # then e/sub/ (d/sub's marker) and e/sub/b.txt
    writer.move("d", "e")
    newest, settled, *_ = writer.history(limit=None)
    assert changes_of(settled) == [("e", None, DIRECTORY, None), ("e/a.txt", None, one, None)]
    assert changes_of(newest) == [
        ("e/sub", None, DIRECTORY, None),
        ("e/sub/b.txt", None, two, "d/sub/b.txt"),
        ("d/sub", DIRECTORY, None, None),
        ("d/a.txt", one, None, None),
        ("d", DIRECTORY, None, None),
    ]
    assert sorted(e.path for e in writer.walk() if e.is_file) == ["e/a.txt", "e/sub/b.txt"]


def test_a_directory_move_settled_part_way_records_its_empty_directories_too(bucket: S3Server) -> None:
    """An uninterrupted move is one step, and its undo makes the empty subdirectories again. Settled part way (one
    empty directory's copy made), the rest recorded only the directories above the files it moved: the empty
    source directories' removal and their copies' making were left out, so undoing the rest did not make them
    again (and undoing the settled part could not remove the copies)."""
    writer, reader, before = tree_with_empty_directories(bucket)
    settle_after(writer, reader, "e/empty/")  # then the file and the other markers
    writer.move("d", "e")
    newest, settled, *_ = writer.history(limit=None)
    assert changes_of(settled) == [("e", None, DIRECTORY, None), ("e/empty", None, DIRECTORY, None)]
    assert changes_of(newest) == [
        ("e/a.txt", None, content_id_of(b"one"), "d/a.txt"),
        ("e/sub", None, DIRECTORY, None),
        ("e/sub/deeper", None, DIRECTORY, None),
        ("d/sub/deeper", DIRECTORY, None, None),
        ("d/sub", DIRECTORY, None, None),
        ("d/empty", DIRECTORY, None, None),
        ("d", DIRECTORY, None, None),
    ]
    writer.undo(newest.entry_id)
    writer.undo(settled.entry_id)
    assert sorted((e.path, e.is_directory) for e in writer.walk()) == before


def test_the_deletes_a_slow_move_records_anew_can_be_undone(bucket: S3Server) -> None:
    """A reader settled a slow move as a copy; the writer recorded the source's delete anew, naming its content for
    undo, but nothing had kept that content (the move keeps none: it is at the copy), so undo refused. The writer
    keeps it from the copy now."""
    writer, reader, _ = two_processes(bucket)
    reader.journal_grace = timedelta(0)
    writer.write("a.txt", "one")

    def copy_then_read(*args: Any) -> None:
        del writer._copy_object  # once
        writer._copy_object(*args)
        reader.history(limit=None)  # settled, as a copy

    writer._copy_object = copy_then_read  # type: ignore[method-assign]
    writer.move("a.txt", "b.txt")
    newest, settled, *_ = writer.history(limit=None)
    assert changes_of(newest) == [("a.txt", content_id_of(b"one"), None, None)]
    writer.undo(newest.entry_id)
    writer.undo(settled.entry_id)
    assert sorted(e.path for e in writer.walk()) == ["a.txt"]
    assert writer.read_bytes("a.txt").content == b"one"


def test_a_directory_move_settled_after_a_file_s_copy_can_be_undone_whole(bucket: S3Server) -> None:
    """The same for a directory settled with a file copied and the empty directories not yet: undoing the rest and
    then the settled part gives back the tree, empty directories included."""
    writer, reader, before = tree_with_empty_directories(bucket)
    settle_after(writer, reader, "e/a.txt")  # then the markers
    writer.move("d", "e")
    newest, settled, *_ = writer.history(limit=None)
    assert changes_of(settled) == [("e", None, DIRECTORY, None), ("e/a.txt", None, content_id_of(b"one"), None)]
    writer.undo(newest.entry_id)
    writer.undo(settled.entry_id)
    assert sorted((e.path, e.is_directory) for e in writer.walk()) == before
    assert writer.read_bytes("d/a.txt").content == b"one"


# --- a change or a capture that keeps a blob between a collection's look and its delete -----------------------


def undoes_to_one(writer: ObjectStoreFilesystem) -> None:
    """The writer's newest entry replaced ``b"one"`` at a.txt: its undo puts it back (the blob is still kept)."""
    writer.undo(writer.history(limit=1)[0].entry_id)
    assert writer.read_bytes("a.txt").content == b"one"


def test_a_write_that_keeps_a_blob_after_the_deletion_s_age_check_keeps_it(bucket: S3Server) -> None:
    """The deletion listed the journal's entries, then judged the blob old; a write in another process then kept
    it for undo (copied it again, young) in an entry not listed, and the delete took it: undo refused. The
    entries are listed after the age check now, so that write's entry holds the blob."""
    deleter, writer, _ = two_processes(bucket)
    for fs in (deleter, writer):
        fs._changes.tombstone_age = timedelta(0)  # every blob is old
    deleter.write("a.txt", "one")
    first = deleter.snapshot()

    def age_then_write(content_ids: Any) -> Any:
        del deleter._old_blobs  # once
        old = deleter._old_blobs(content_ids)
        writer.write("a.txt", "two")  # keeps the blob of "one" for undo
        return old

    deleter._old_blobs = age_then_write  # type: ignore[method-assign]
    deleter.delete_snapshot(first)
    assert holds_one(bucket, deleter)
    undoes_to_one(writer)


def test_a_write_that_keeps_a_blob_after_a_prune_s_age_check_keeps_it(bucket: S3Server) -> None:
    """The same for the journal's prune: its listing and age check came before another process's write kept the
    blob again; it now looks at the entries stored since before it releases anything."""
    pruner, writer, _ = two_processes(bucket)
    for fs in (pruner, writer):
        fs._changes.tombstone_age = timedelta(0)
    pruner.write("a.txt", "one")
    pruner.write("a.txt", "x")  # its entry keeps the blob of "one"
    pruner.write("a.txt", "one")
    fresh = pruner._changes._fresh

    def age_then_write(refs: Any, since: Any) -> Any:
        young = fresh(refs, since)
        writer.write("a.txt", "two")  # keeps the blob of "one" again, for an entry the prune has not listed
        return young

    pruner._changes._fresh = age_then_write
    pruner.prune_history(keep=0)
    assert holds_one(bucket, pruner)
    undoes_to_one(writer)


def test_in_a_versioned_bucket_a_write_that_keeps_a_version_after_a_prune_s_second_look_keeps_it(
    bucket: S3Server,
) -> None:
    """The same in a bucket that keeps versions, where an entry names the version it replaced: a dropped entry (its
    write failed) names a.txt's current version, so the prune releases it. Another process's write kept that
    version and replaced it after the prune's second look: the prune found it no longer current and deleted it,
    and that write's undo had lost its content. Whether a version is current is asked before the second look now
    (a change keeps only a current version, and stores its entry before it replaces it)."""
    pruner, writer, _ = two_processes(bucket, VERSIONED)
    for fs in (pruner, writer):
        fs._changes.tombstone_age = timedelta(0)
    pruner.write("a.txt", "one")
    put, key = pruner._client.put, pruner._layout.key("a.txt")

    def failing(target: str, *args: Any, **options: Any) -> Any:
        if target == key:
            raise ConnectionError("the store went away")
        return put(target, *args, **options)

    pruner._client.put = failing  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        pruner.write("a.txt", "x")  # its entry names a.txt's version of "one", and is dropped
    del pruner._client.put
    delete_entries, wrote = pruner._changes._delete_entries, []

    def look_then_write(ids: Any) -> None:  # after the second look, before the versions are released
        delete_entries(ids)
        writer.write("a.txt", "two")  # keeps the version of "one", in an entry the prune did not look at
        wrote.append(True)

    pruner._changes._delete_entries = look_then_write  # type: ignore[method-assign]
    pruner.prune_history(keep=0)
    assert wrote
    undoes_to_one(writer)


def test_a_snapshot_taken_after_a_prune_s_age_check_keeps_its_blob(bucket: S3Server) -> None:
    """A snapshot captured in another process after the prune's look at the snapshots and at the blobs' age
    (it refreshed the old blob, so its check found it there) named a blob the prune then released: restoring it
    failed. The prune lists the snapshots again before it releases anything."""
    pruner, taker, root = two_processes(bucket)
    for fs in (pruner, taker):
        fs._changes.tombstone_age = timedelta(0)
    pruner.write("a.txt", "one")
    pruner.write("a.txt", "x")  # its entry keeps the blob of "one"
    pruner.write("a.txt", "one")
    fresh, taken = pruner._changes._fresh, []

    def age_then_snapshot(refs: Any, since: Any) -> Any:
        young = fresh(refs, since)
        taken.append(taker.snapshot())
        return young

    pruner._changes._fresh = age_then_snapshot
    pruner.prune_history(keep=0)
    assert taken and holds_one(bucket, pruner)
    restores_one(bucket, taker, root, taken[0])


def test_a_snapshot_listed_between_a_prune_s_last_look_and_its_delete_is_copied_back(bucket: S3Server) -> None:
    """The capture ran whole between the prune's last look and its delete (its own check found the blob there):
    the prune lists the snapshots again after the delete and copies back what a new one names."""
    pruner, taker, root = two_processes(bucket)
    for fs in (pruner, taker):
        fs._changes.tombstone_age = timedelta(0)
    pruner.write("a.txt", "one")
    pruner.write("a.txt", "x")
    pruner.write("a.txt", "one")
    collect, taken = pruner._store.collect, []

    def snapshot_then_collect(content_ids: Any) -> None:
        del pruner._store.collect  # once
        taken.append(taker.snapshot())
        collect(content_ids)

    pruner._store.collect = snapshot_then_collect  # type: ignore[method-assign]
    pruner.prune_history(keep=0)
    assert taken and holds_one(bucket, pruner)
    restores_one(bucket, taker, root, taken[0])


def test_a_write_kept_between_the_second_look_and_the_delete_is_copied_back_from_its_file(bucket: S3Server) -> None:
    """The write's entry and its copy of the blob land after the deletion's second look, its change not yet made:
    the delete takes the blob, and the deletion's listing after it finds the new entry and copies the blob back
    from the file, which still holds that content. (The writer runs in a thread, held at its change by events.)"""
    deleter, writer, _ = two_processes(bucket)
    for fs in (deleter, writer):
        fs._changes.tombstone_age = timedelta(0)
    deleter.write("a.txt", "one")
    first = deleter.snapshot()
    kept, deleted = threading.Event(), threading.Event()
    put, key = writer._client.put, writer._layout.key("a.txt")

    def held_at_the_change(target: str, *args: Any, **options: Any) -> Any:
        if target == key:  # the entry is stored and the blob copied: the change is next
            kept.set()
            assert deleted.wait(60)
        return put(target, *args, **options)

    writer._client.put = held_at_the_change  # type: ignore[method-assign]
    thread = threading.Thread(target=writer.write, args=("a.txt", "two"))
    collect = deleter._store.collect

    def write_then_collect(content_ids: Any) -> None:
        del deleter._store.collect  # once
        thread.start()
        assert kept.wait(60)
        collect(content_ids)

    deleter._store.collect = write_then_collect  # type: ignore[method-assign]
    try:
        deleter.delete_snapshot(first)
        assert holds_one(bucket, deleter)  # copied back from a.txt
    finally:
        deleted.set()
        thread.join(60)
    assert writer.read_bytes("a.txt").content == b"two"
    undoes_to_one(writer)


def test_a_copy_back_source_that_changes_while_it_is_hashed_is_passed_over(bucket: S3Server) -> None:
    """The deletion's copy-back looks at the file an entry stored since replaced; another tool rewrote it (no content
    id kept with the object, so it is read to learn its id) and rewrites it again while it is read. That source is
    passed over, as one that changed before its copy is: the deletion, which had done its work, used to fail with
    ``ConcurrentChangeError`` there, leaving the copy-backs after it undone."""
    deleter, writer, _ = two_processes(bucket)
    for fs in (deleter, writer):
        fs._changes.tombstone_age = timedelta(0)
    deleter.write("a.txt", "one")
    first = deleter.snapshot()
    key = writer._layout.key("a.txt")
    raw = bucket.filesystem()
    kept, deleted = threading.Event(), threading.Event()
    put = writer._client.put

    def held_at_the_change(target: str, *args: Any, **options: Any) -> Any:
        if target == key:
            kept.set()
            assert deleted.wait(60)
        return put(target, *args, **options)

    writer._client.put = held_at_the_change  # type: ignore[method-assign]
    thread = threading.Thread(target=writer.write, args=("a.txt", "two"))
    collect, probe, get = deleter._store.collect, deleter._client.probe, deleter._client.get

    def write_then_collect(content_ids: Any) -> None:
        del deleter._store.collect  # once
        thread.start()
        assert kept.wait(60)
        collect(content_ids)

    def rewritten_then_probed(keys: Any, *args: Any) -> Any:
        if key in keys:
            del deleter._client.probe  # once
            raw.pipe(key, b"as another tool wrote it")
        return probe(keys, *args)

    def rewritten_again_then_read(target: str, *args: Any, **options: Any) -> Any:
        if target == key:
            del deleter._client.get  # once
            raw.pipe(key, b"and again, while it was read")
        return get(target, *args, **options)

    deleter._store.collect = write_then_collect  # type: ignore[method-assign]
    deleter._client.probe = rewritten_then_probed  # type: ignore[method-assign]
    deleter._client.get = rewritten_again_then_read  # type: ignore[method-assign]
    try:
        deleter.delete_snapshot(first)  # raised ConcurrentChangeError from the copy-back
        assert "get" not in vars(deleter._client)  # the source was read, and changed while it was
    finally:
        deleted.set()
        thread.join(60)
