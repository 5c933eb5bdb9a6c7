"""The object store's journal beyond the conformance suite (moto's real S3 server on loopback): a writer killed
between its entry and its change, or after the change, leaves a journal that settles to exactly the files
present; where the journal lives; retention and snapshots sharing what they keep; ids across processes."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from typing import Any

import pytest

from workspacefs import ObjectStoreFilesystem, open_filesystem
from workspacefs.errors import HistoryEntryNotFoundError
from workspacefs.history import DIRECTORY, JournalEntry, acting_as
from workspacefs.streams import content_id_of
from workspacefs.testing._s3 import S3Server

BUCKET = "wsfs-journal"
VERSIONED = "wsfs-journal-versioned"
_roots = itertools.count()


@pytest.fixture(scope="module")
def buckets(s3_server: S3Server) -> S3Server:
    s3_server.make_bucket(BUCKET)
    s3_server.make_bucket(VERSIONED, versioned=True)
    return s3_server


def fresh_root(bucket: str = BUCKET) -> str:
    return f"{bucket}/j{next(_roots)}"


# --- crash consistency --------------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time
    from workspacefs import ObjectStoreFilesystem
    from workspacefs.testing._s3 import S3Server

    endpoint, root, operation, stop = sys.argv[1:5]
    fs = ObjectStoreFilesystem(S3Server(endpoint).filesystem(), root)
    fs.write("keep.txt", "kept")
    fs.write("tree/a.txt", "a")
    fs.write("tree/b.txt", "b")
    fs.write("tree/deep/c.txt", "c")
    fs.write("old.txt", "before")
    client, armed, copies = fs._client, [False], [0]
    put, copy = client.put, client.copy

    def pause(label):
        print(label, flush=True)
        time.sleep(120)  # killed here

    def watched_put(key, data, **options):
        if armed[0] and "/journal/" in key and b'"state":"done"' in data and stop == "after-change":
            pause("stopped")  # the change is made, its entry still pending
        info = put(key, data, **options)
        if armed[0] and "/journal/" in key and b'"state":"pending"' in data and stop == "after-entry":
            pause("stopped")  # the entry is there, the change not made
        return info

    def watched_copy(source, key, **options):
        copy(source, key, **options)
        if armed[0] and "/journal/" not in key and "/blobs/" not in key and stop == "midway":
            copies[0] += 1
            if copies[0] == 2:
                pause("stopped")  # a tree moved or copied in part

    client.put, client.copy = watched_put, watched_copy
    print("ready", flush=True)
    armed[0] = True
    if operation == "write":
        fs.write("new.txt", "new")
    elif operation == "overwrite":
        fs.write("old.txt", "after")
    elif operation == "delete":
        fs.delete("old.txt")
    elif operation == "delete-tree":
        fs.delete("tree", recursive=True)
    elif operation == "move-tree":
        fs.move("tree", "moved")
    elif operation == "copy-tree":
        fs.copy("tree", "copied")
    print("finished", flush=True)
    """
)


def replayed(entries: list[JournalEntry]) -> dict[str, str]:
    """The journal replayed from empty, oldest first: path -> content id or ``directory``."""
    state: dict[str, str] = {}
    for entry in reversed(entries):
        for change in entry.changes:
            if change.from_path is not None:  # a move carries its subtree along
                moved = [p for p in state if p == change.from_path or p.startswith(change.from_path + "/")]
                for path in moved:
                    state[change.path + path[len(change.from_path) :]] = state.pop(path)
            if change.after is None:
                state.pop(change.path, None)
            else:
                state[change.path] = change.after
    return state


def present(fs: ObjectStoreFilesystem) -> dict[str, str]:
    """What the workspace holds: path -> content id or ``directory``."""
    return {e.path: DIRECTORY if e.is_directory else fs.content_id(e.path) for e in fs.walk()}


def pending(s3: Any, root: str) -> list[str]:
    """The stored entries still pending."""
    journal = f"{BUCKET}/.wsfs-store/{root.split('/', 1)[1]}/journal/"
    return [key for key in s3.find(journal) if json.loads(s3.cat_file(key))["state"] == "pending"]


CASES = [
    ("write", "after-entry"),
    ("write", "after-change"),
    ("overwrite", "after-entry"),
    ("overwrite", "after-change"),
    ("delete", "after-entry"),
    ("delete", "after-change"),
    ("delete-tree", "after-entry"),
    ("delete-tree", "after-change"),
    ("move-tree", "after-entry"),
    ("move-tree", "midway"),
    ("move-tree", "after-change"),
    ("copy-tree", "midway"),
    ("copy-tree", "after-change"),
]


@pytest.mark.parametrize(("operation", "stop"), CASES, ids=[f"{o}-{s}" for o, s in CASES])
def test_a_writer_killed_between_entry_and_change_leaves_a_journal_that_replays_to_the_files(
    buckets: S3Server, operation: str, stop: str
) -> None:
    """SIGKILL a writer with its entry stored and its change not made, part made, or made but not confirmed;
    a reader then settles the entry by what the paths hold, and the journal replays to exactly the files."""
    root = fresh_root()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, buckets.endpoint_url, root, operation, stop],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == b"ready", writer.stderr.read() if writer.stderr else ""
    assert writer.stdout.readline().strip() == b"stopped", writer.stderr.read() if writer.stderr else ""
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    s3: Any = buckets.filesystem()
    assert len(pending(s3, root)) == 1  # what the crash left: one entry, still pending
    reader = ObjectStoreFilesystem(s3, root)
    assert reader.history(limit=None)[0].operation == "write"  # younger than the grace: a change in progress
    reader.journal_grace = timedelta(0)  # the writer is known dead: settle at once
    entries = reader.history(limit=None)
    assert replayed(entries) == present(reader)
    assert pending(s3, root) == []  # settled in the store, for every later reader
    setup = 5  # the writes before the one interrupted
    if stop == "after-entry":
        assert len(entries) == setup  # the change never happened: neither did its entry
        return
    assert len(entries) == setup + 1
    assert entries[0].operation == ("write" if operation in {"write", "overwrite"} else operation.partition("-")[0])
    if (operation, stop) == ("move-tree", "midway"):
        kinds = {(c.path, c.kind) for c in entries[0].changes}
        assert ("moved/a.txt", "created") in kinds  # copied; its source was not deleted yet
        assert reader.exists("tree/a.txt")


LOOP = textwrap.dedent(
    """
    import os, sys
    from workspacefs import ObjectStoreFilesystem
    from workspacefs.testing._s3 import S3Server

    fs = ObjectStoreFilesystem(S3Server(sys.argv[1]).filesystem(), sys.argv[2])
    print("ready", flush=True)
    i = int(sys.argv[3]) * 1000
    while True:
        i += 1
        name = f"d{i % 3}/f{i % 7}.txt"
        fs.write_bytes(name, os.urandom(16 + i % 50))
        if i % 4 == 0 and fs.exists(name):
            fs.delete(name)
        if i % 9 == 0 and fs.exists(f"d{i % 3}"):
            fs.move(f"d{i % 3}", f"m{i % 5}", overwrite=True)
        if i % 13 == 0 and fs.exists(f"m{i % 5}"):
            fs.delete(f"m{i % 5}", recursive=True)
    """
)


def test_writers_killed_at_any_moment_leave_a_journal_that_replays_to_the_files(buckets: S3Server) -> None:
    """Like the SQL test: SIGKILL writers again and again, each round's writer going on over paths the killed
    one left pending (so later entries, not only the state, decide); then settle and replay."""
    root = fresh_root()
    for round_ in range(6):
        writer = subprocess.Popen(
            [sys.executable, "-c", LOOP, buckets.endpoint_url, root, str(round_)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert writer.stdout is not None and writer.stdout.readline().strip() == b"ready"
        time.sleep(0.5 + 0.3 * round_)  # a kill point somewhere inside the writes, not a measured duration
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    reader = ObjectStoreFilesystem(buckets.filesystem(), root)
    reader.journal_grace = timedelta(0)
    entries = reader.history(limit=None)
    assert len(entries) > 6, "the writers made no change before they were killed"
    assert replayed(entries) == present(reader)
    assert pending(buckets.filesystem(), root) == []


def test_a_directory_move_whose_deletes_failed_part_way_records_the_empty_directories_it_removed(
    buckets: S3Server,
) -> None:
    """The move's delete request removed an empty subdirectory's marker, then failed: settled by the state, the
    entry recorded the copies but not that removal, and replayed to a directory no longer there."""
    root = fresh_root()
    fs = ObjectStoreFilesystem(buckets.filesystem(), root)
    fs.write("d/a.txt", "one")
    fs.mkdir("d/empty")
    delete, marker = fs._client.delete, fs._layout.dir_key("d/empty")

    def fails_part_way(keys: Any) -> None:
        delete([key for key in keys if key == marker])
        raise ConnectionError("the store went away")

    fs._client.delete = fails_part_way  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        fs.move("d", "e")
    del fs._client.delete
    entries = fs.history(limit=None)
    assert entries[0].operation == "move"
    assert ("d/empty", DIRECTORY, None) in [(c.path, c.before, c.after) for c in entries[0].changes]
    assert replayed(entries) == present(fs)


def test_a_failed_change_leaves_no_entry(buckets: S3Server) -> None:
    """A change the store refuses after its entry is stored (a create that lost a race) is settled at once."""
    root = fresh_root()
    fs = ObjectStoreFilesystem(buckets.filesystem(), root)
    other = ObjectStoreFilesystem(buckets.filesystem(), root, history=False)
    fs.write("a.txt", "a")
    writer = fs.open_write("b.txt", mode="create")
    writer.write(b"mine")
    other.write("b.txt", "theirs")  # appears between the check at open and the commit
    with pytest.raises(FileExistsError):
        writer.close()
    assert [e.paths for e in fs.history()] == [("a.txt",)]
    assert pending(buckets.filesystem(), root) == []


# --- where it lives, who sees it --------------------------------------------------------------------------


def test_the_journal_lives_in_the_snapshot_store_and_other_processes_read_it(buckets: S3Server) -> None:
    root = fresh_root()
    s3: Any = buckets.filesystem()
    fs = ObjectStoreFilesystem(s3, root)
    fs.write("a.txt", "1")
    fs.write("a.txt", "2")
    assert sorted(s3.find(root)) == [f"{root}/a.txt"]  # nothing inside the root
    other = ObjectStoreFilesystem(buckets.filesystem(), root)
    assert [e.operation for e in other.history()] == ["write", "write"]
    assert other.read_version(other.history()[0].entry_id, "a.txt", side="before") == b"1"
    other.undo(other.history()[0].entry_id)
    assert fs.read("a.txt").content == "1"
    assert fs.history()[0].operation == "undo"  # an entry written by the other process
    frozen = ObjectStoreFilesystem(buckets.filesystem(), root, read_only=True)
    assert [e.operation for e in frozen.history()] == ["undo", "write", "write"]


def test_ids_increase_across_processes_and_never_repeat(buckets: S3Server) -> None:
    root = fresh_root()
    one = ObjectStoreFilesystem(buckets.filesystem(), root)
    two = ObjectStoreFilesystem(buckets.filesystem(), root)
    for index in range(3):
        one.write("a.txt", f"one {index}")
        two.write("b.txt", f"two {index}")
    ids = [e.entry_id for e in one.history()]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 6
    assert one.prune_history(keep=0) == 6
    assert one.history() == []
    fresh = ObjectStoreFilesystem(buckets.filesystem(), root)
    fresh.write("c.txt", "c")
    assert fresh.history()[0].entry_id > max(ids)  # the newest entry's object stays as the high-water mark


def test_without_conditional_writes_ids_are_ordered_by_time(buckets: S3Server) -> None:
    fs = ObjectStoreFilesystem(buckets.filesystem(), fresh_root())
    fs._client.conditional_writes = False  # a store that cannot arbitrate a claim
    fs.write("a.txt", "1")
    fs.write("a.txt", "2")
    first, second = reversed(fs.history())
    assert first.entry_id < second.entry_id < 2**53  # exact in a JSON reader
    assert first.entry_id >> 12 >= 1_700_000_000_000  # milliseconds since the epoch, 12 random bits below


def test_history_off_in_the_constructor_and_the_url(buckets: S3Server) -> None:
    root = fresh_root()
    fs = ObjectStoreFilesystem(buckets.filesystem(), root, history=False)
    fs.write("a.txt", "1")
    assert not fs.capabilities.history and not fs.capabilities.watch
    url: Any = open_filesystem(buckets.url(BUCKET, root.split("/", 1)[1], history="off"))
    url.write("a.txt", "2")
    assert not url.capabilities.history
    on: Any = open_filesystem(buckets.url(BUCKET, root.split("/", 1)[1], history_entries="5"))
    assert on.capabilities.history and on.history() == []  # neither wrote an entry
    with pytest.raises(ValueError, match="history_entries"):
        open_filesystem(buckets.url(BUCKET, "x", history_entries="many"))


# --- retention, and what snapshots and the journal keep for each other -------------------------------------


def blobs(s3: Any, root: str) -> set[str]:
    store = f"{BUCKET}/.wsfs-store/{root.split('/', 1)[1]}/blobs/"
    return {key.rsplit("/", 1)[1] for key in s3.find(store)}


def test_retention_keeps_the_newest_entries_and_what_they_replaced(buckets: S3Server) -> None:
    root = fresh_root()
    s3: Any = buckets.filesystem()
    fs = ObjectStoreFilesystem(s3, root, history_entries=4)
    fs._changes.retain_every = 1  # check after every entry (every 256 by default)
    fs._changes.tombstone_age = timedelta(0)  # content written in the last 5 minutes stays a while (finding 2)
    for index in range(6):
        fs.write("a.txt", f"v{index}")
    assert len(fs.history(limit=None)) == 4  # dropped in batches: at most an eighth more than kept
    oldest = fs.history(limit=None)[-1]
    assert fs.read_version(oldest.entry_id, "a.txt", side="before") == b"v1"
    assert blobs(s3, root) == {content_id_of(f"v{i}".encode()) for i in range(1, 5)}  # v0's went with its entry


def test_pruning_never_deletes_what_a_snapshot_names(buckets: S3Server) -> None:
    root = fresh_root()
    s3: Any = buckets.filesystem()
    fs = ObjectStoreFilesystem(s3, root)
    fs._changes.tombstone_age = timedelta(0)  # content written in the last 5 minutes stays a while (finding 2)
    fs.write("a.txt", "v1")
    snapshot = fs.snapshot()  # copies v1 into blobs
    fs.write("a.txt", "v2")  # the journal keeps v1 too: the same blob
    fs.write("a.txt", "v3")
    fs.prune_history(keep=0)
    assert blobs(s3, root) == {content_id_of(b"v1")}  # v2's is gone; the snapshot still names v1
    fs.write("b.txt", "x")
    fs.write("b.txt", "y")
    entry = fs.history()[0]
    fs.delete_snapshot(snapshot)
    assert blobs(s3, root) == {content_id_of(b"x")}  # v1 went with the snapshot; the journal still needs x
    fs.undo(entry.entry_id)
    assert fs.read("b.txt").content == "x"


def test_in_a_versioned_bucket_entries_name_versions_and_retention_deletes_them(buckets: S3Server) -> None:
    root = fresh_root(VERSIONED)
    s3: Any = buckets.filesystem()
    fs = ObjectStoreFilesystem(s3, root)
    fs.version_grace = timedelta(0)

    def versions() -> int:
        page = s3.call_s3("list_object_versions", Bucket=VERSIONED, Prefix=root.split("/", 1)[1] + "/")
        return len(page.get("Versions", ())) + len(page.get("DeleteMarkers", ()))

    fs.write("a.txt", "a1")
    snapshot = fs.snapshot()
    fs.write("a.txt", "a2")
    fs.write("a.txt", "a3")
    assert versions() == 3 and not blobs(s3, root.replace(VERSIONED, BUCKET))
    fs.delete_snapshot(snapshot)
    assert versions() == 3  # the journal still names a1 and a2 (what undo writes back)
    assert fs.read_version(fs.history()[1].entry_id, "a.txt", side="before") == b"a1"
    fs.prune_history(keep=1)
    assert versions() == 2  # a1 went with its entry; a2 is named by the one kept
    fs.prune_history(keep=0)
    assert versions() == 1  # the current version stays
    with pytest.raises(HistoryEntryNotFoundError):
        fs.history_entry(1)


# --- found by review: settling beside a change in progress, retention in another process ------------------


class _Died(BaseException):
    """Ends a writer between its change and its entry's confirmation, as a crash would."""


def _die_before_done(fs: ObjectStoreFilesystem) -> Any:
    put = fs._client.put

    def dying(key: str, data: bytes, **options: Any) -> Any:
        if "/journal/" in key and b'"state":"done"' in data:
            raise _Died
        return put(key, data, **options)

    fs._client.put = dying  # type: ignore[method-assign]
    return put


def _age_newest(fs: ObjectStoreFilesystem, put: Any) -> None:
    """Make the newest entry older than the grace (its writer is known dead)."""
    journal = fs._changes
    key = journal.key(journal._newest())
    body = json.loads(fs._client.get(key, 0, 1 << 20)[0])
    body["at"] -= 3600
    put(key, json.dumps(body).encode())


def test_a_pending_entry_is_not_settled_while_a_newer_change_is_in_progress(buckets: S3Server) -> None:
    """A dead writer's entry, read while a live writer's change to the same path is under way (its file
    already in the store, its entry still pending), waits: settled then, it would be judged by the live
    change's file and dropped for good."""
    root = fresh_root()
    dead, writer, reader = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(3))
    put = _die_before_done(dead)
    with pytest.raises(_Died):
        dead.write_bytes("x.txt", b"B")
    _age_newest(dead, put)
    wput = writer._client.put

    def read_midway(key: str, data: bytes, **options: Any) -> Any:
        if "/journal/" in key and b'"state":"done"' in data:
            reader.history(limit=None)
        return wput(key, data, **options)

    writer._client.put = read_midway  # type: ignore[method-assign]
    writer.write_bytes("x.txt", b"C")
    made = [c for e in reader.history(limit=None) for c in e.changes if c.path == "x.txt" and c.before is None]
    assert made, "the dead writer's change (x.txt created) was settled as dropped"


def test_retention_in_another_process_never_leaves_an_entry_without_its_content(buckets: S3Server) -> None:
    """A blob this process saw kept may be deleted by another process's retention since: a new entry keeps
    its content anew instead of trusting what it saw."""
    root = fresh_root()
    writer, pruner = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    writer.write_bytes("a.txt", b"old")
    writer.write_bytes("a.txt", b"v2")
    writer.write_bytes("a.txt", b"old")
    pruner.prune_history(keep=1)
    writer.write_bytes("a.txt", b"v3")
    writer.undo(writer.history(limit=1)[0].entry_id)
    assert writer.read_bytes("a.txt").content == b"old"


def test_a_create_the_store_refused_leaves_no_entry_though_the_same_bytes_are_there(buckets: S3Server) -> None:
    """Another process creates the same file with the same bytes between this create's entry and its
    conditional PUT: the store refuses ours, so our entry is dropped, not judged by the bytes (theirs)."""
    root = fresh_root()
    alice, bob = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    alice.write_bytes("seed", b"s")
    put = bob._client.put
    done = [False]

    def racing(key: str, data: bytes, **options: Any) -> Any:
        if "/journal/" in key and b"config.json" in data and b'"pending"' in data and not done[0]:
            done[0] = True
            with acting_as("alice"):
                alice.write_bytes("config.json", b"{}", mode="create")
        return put(key, data, **options)

    bob._client.put = racing  # type: ignore[method-assign]
    with acting_as("bob"), pytest.raises(FileExistsError):
        bob.write_bytes("config.json", b"{}", mode="create")
    assert [e.actor.name for e in alice.history(limit=None) if "config.json" in e.paths] == ["alice"]


def test_a_grouped_entry_that_wrote_one_path_twice_is_settled_whole(buckets: S3Server) -> None:
    """A writer dies after a group wrote ``a.txt`` twice: the second write found what the first left, so the
    settled entry creates the file (undo deletes it), not only rewrites it."""
    root = fresh_root()
    dead, reader = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    put = _die_before_done(dead)
    with pytest.raises(_Died), dead.grouped("edit"):
        dead.write_bytes("a.txt", b"1")
        dead.write_bytes("a.txt", b"2")
    _age_newest(dead, put)
    entry = reader.history(limit=1)[0]
    assert [(c.before, c.after) for c in entry.changes] == [
        (None, content_id_of(b"1")),
        (content_id_of(b"1"), content_id_of(b"2")),
    ]
    reader.undo(entry.entry_id)
    assert not reader.exists("a.txt")


def test_an_id_another_process_used_and_pruned_is_never_claimed_again(buckets: S3Server) -> None:
    """Review finding 14: a process numbering on from its cached next id found that id's key free after another
    process had used and pruned it, and so wrote an entry older-numbered than ones made before it."""
    root = fresh_root()
    late, busy = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    late.write("a0.txt", "a")  # id 1: `late` numbers on from 2
    for index in range(10):
        busy.write(f"b{index}.txt", "b")  # ids 2..11
    assert busy.prune_history(keep=2) == 9  # 1..9 leave history; their objects stay, as tombstones
    seen = busy.history(limit=1)[0].entry_id
    late.write("a-late.txt", "made after everything else")  # its claim of 2 finds the key taken: lists again
    assert [e.paths for e in busy.history(since=seen)] == [("a-late.txt",)]
    newest_first = [e.entry_id for e in busy.history(limit=None)]
    assert newest_first == sorted(newest_first, reverse=True) and len(newest_first) == 3
    assert [e.entry_id for e in late.history(limit=None)] == newest_first  # its cached entry 1 is a tombstone now


def test_tombstones_go_once_old_and_a_process_lists_again_once_its_newest_id_is_old(buckets: S3Server) -> None:
    root = fresh_root()
    s3: Any = buckets.filesystem()
    late, busy = (ObjectStoreFilesystem(s3, root) for _ in range(2))
    prefix = busy._changes._prefix

    def entry_objects() -> int:
        return len(s3.find(prefix))

    late.write("a0.txt", "a")
    for index in range(4):
        busy.write(f"b{index}.txt", "b")
    busy.prune_history(keep=1)
    assert entry_objects() == 5  # all younger than the tombstone age: kept, four as tombstones
    busy._changes.tombstone_age = timedelta(0)
    assert busy.prune_history() == 0 and entry_objects() == 1  # the tombstones went; the newest entry stays
    late._changes.id_trust = timedelta(0)  # its cached next id (2) is older than it trusts: it lists first
    late.write("a1.txt", "a")
    assert [e.paths for e in busy.history(limit=None)] == [("a1.txt",), ("b3.txt",)]
    assert busy.history()[0].entry_id == 6


def test_a_writer_slower_than_the_grace_whose_entry_was_settled_and_pruned_still_records_its_change(
    buckets: S3Server,
) -> None:
    """Review-2 finding 1: a reader settled a slow writer's pending entry (dropped: its change not made yet) and
    retention deleted it; the writer's conditional rewrite then met a missing key, and the write failed."""
    root = fresh_root()
    slow, other = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    other._changes.grace = timedelta(0)
    other._changes.tombstone_age = timedelta(0)
    put = slow._client.put
    stalled = [False]

    def stall(key: str, data: bytes, **options: Any) -> Any:
        info = put(key, data, **options)
        if "/journal/" in key and b'"state":"pending"' in data and not stalled[0]:
            stalled[0] = True  # the entry is stored, the change not made: others see it past the grace
            assert other.history(limit=None) == []  # settled as dropped
            other.write("later.txt", "l")
            other.prune_history()  # the dropped entry's object goes
        return info

    slow._client.put = stall  # type: ignore[method-assign]
    slow.write("slow.txt", "s")
    assert stalled[0]
    assert [e.paths for e in other.history(limit=None)] == [("slow.txt",), ("later.txt",)]


def test_an_entry_another_process_pruned_since_this_one_read_it_is_not_undone(buckets: S3Server) -> None:
    """Review-2 finding 3: ``undo`` trusted the record this process had settled; another process's retention had
    turned it into a tombstone and released the content it kept."""
    root = fresh_root()
    writer, pruner = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    writer.write("a.txt", "old")
    writer.write("a.txt", "new")
    target = writer.history(limit=1)[0].entry_id
    pruner.write("b.txt", "b")
    pruner.prune_history(keep=1)
    with pytest.raises(HistoryEntryNotFoundError):
        writer.undo(target)
    assert writer.read_bytes("a.txt").content == b"new"


def test_undo_checks_every_entry_s_kept_content_before_changing_anything(buckets: S3Server) -> None:
    """Review-2 finding 3: undoing two entries, the older one's kept content missing (released by a race or by
    hand), undid the newer one and then failed: not all or none."""
    root = fresh_root()
    s3: Any = buckets.filesystem()
    fs = ObjectStoreFilesystem(s3, root)
    fs.write("a.txt", "a1")
    fs.write("a.txt", "a2")
    older = fs.history(limit=1)[0].entry_id
    fs.write("b.txt", "b1")
    fs.write("b.txt", "b2")
    newer = fs.history(limit=1)[0].entry_id
    s3.rm(fs._store.blob_key(content_id_of(b"a1")))
    with pytest.raises(FileNotFoundError):
        fs.undo([newer, older])
    assert (fs.read_bytes("a.txt").content, fs.read_bytes("b.txt").content) == (b"a2", b"b2")
    assert [e.entry_id for e in fs.history(limit=1)] == [newer]


def test_another_process_s_settled_entries_are_read_once(buckets: S3Server) -> None:
    """Review-2 finding 5: every ``history`` call fetched each entry another process wrote, again."""
    root = fresh_root()
    writer, reader = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    for index in range(5):
        writer.write(f"f{index}.txt", "x")
    first = reader.history(limit=None)
    get, fetched = reader._client.get, []

    def counting(key: str, *args: Any, **options: Any) -> Any:
        fetched.append(key)
        return get(key, *args, **options)

    reader._client.get = counting  # type: ignore[method-assign]
    assert reader.history(limit=None) == first
    assert fetched == []


def test_tombstones_do_not_count_toward_retention_s_threshold(buckets: S3Server) -> None:
    """Review-2 finding 9: tombstones (kept a while after a prune) counted as entries, so every retention pass
    after one prune pruned again (a full listing and load each time)."""
    fs = ObjectStoreFilesystem(buckets.filesystem(), fresh_root())
    journal = fs._changes
    journal.max_entries, journal.retain_every = 16, 1  # prunes above 18 entries, down to 16
    prune, pruned = journal.prune, []

    def counting(**options: Any) -> int:
        pruned.append(len(fs.history(limit=None)))
        return prune(**options)

    journal.prune = counting  # type: ignore[method-assign]
    for index in range(22):
        fs.write(f"f{index}.txt", "x")
    assert pruned == [19, 19]  # at the 19th write, and at the 22nd (16 + 3 new), never for the tombstones


def test_retention_keeps_a_blob_another_process_kept_after_the_listing(buckets: S3Server) -> None:
    """Review-2 finding 2: a prune released the blobs of the entries it dropped, judged by a listing made before
    another process's new entry kept one of them again: that entry named content no longer there."""
    root = fresh_root()
    pruner, writer = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    pruner.write("a.txt", "old")
    pruner.write("a.txt", "x")  # keeps the blob of "old"
    pruner.write("a.txt", "old")
    snapshot_refs = pruner._changes._snapshot_refs

    def meanwhile() -> Any:
        writer.write("a.txt", "new")  # keeps the blob of "old" again, for an entry the prune has not listed
        return snapshot_refs()

    pruner._changes._snapshot_refs = meanwhile
    pruner.prune_history(keep=0)
    writer.undo(writer.history(limit=1)[0].entry_id)
    assert writer.read_bytes("a.txt").content == b"old"
    pruner._changes._snapshot_refs = snapshot_refs
    pruner._changes.tombstone_age = timedelta(0)
    pruner.prune_history(keep=0)  # once old, what only the dropped entries kept goes
    s3: Any = buckets.filesystem()
    assert not s3.exists(pruner._store.blob_key(content_id_of(b"x")))


def test_a_retention_pass_below_the_threshold_reads_no_entry_another_process_wrote(buckets: S3Server) -> None:
    """Review-3 finding 5: ``_retain`` fetched every entry body to leave tombstones out of its count, even when the listing
    alone shows the journal is below the threshold: a new process's first pass (after 256 changes by default)
    reads the whole journal, up to 11,250 ``GET`` requests, to prune nothing."""
    root = fresh_root()
    writer, other = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    for index in range(100):
        writer.write(f"f{index}.txt", "x")
    journal = other._changes
    journal.retain_every = 1  # the pass comes at this process's first change (else at its 256th)
    get, fetched = other._client.get, []

    def counting(key: str, *args: Any, **options: Any) -> Any:
        if "/journal/" in key:
            fetched.append(key)
        return get(key, *args, **options)

    other._client.get = counting  # type: ignore[method-assign]
    other.write("mine.txt", "y")
    assert len(list(journal._ids())) == 101  # far below max_entries (10,000): nothing to prune
    assert len(fetched) <= 1, len(fetched)


def test_retention_keeps_an_old_blob_a_tree_delete_in_another_process_kept_after_the_listing(
    buckets: S3Server,
) -> None:
    """Review-3 finding 2: ``prune`` spares a released blob only if its object is younger than ``tombstone_age`` (``_fresh``: "a keep
    copies the blob, so its time is new"). A recursive delete keeps its files by ``_keep_content``, which copies
    only the blobs the store lacks: a blob an old entry kept is left as it is, old, so a prune whose listing came
    before that delete's entry releases it, and the new entry's undo has lost its content."""
    root = fresh_root()
    pruner, writer = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    pruner.write("d/a.txt", "old")
    pruner.write("d/a.txt", "x")  # its entry keeps the blob of "old"
    time.sleep(2.2)  # the blob of "old" is older than the newest entry by more than the tombstone age below
    pruner.write("d/a.txt", "old")  # its entry keeps the blob of "x"; the newest entry the prune lists
    journal = pruner._changes
    journal.tombstone_age = writer._changes.tombstone_age = timedelta(seconds=1)  # one constant in every process
    snapshot_refs = journal._snapshot_refs

    def meanwhile() -> Any:
        writer.delete("d", recursive=True)  # keeps "old" again, for an entry the prune has not listed
        return snapshot_refs()

    journal._snapshot_refs = meanwhile  # type: ignore[method-assign]
    pruner.prune_history(keep=0)
    deleted = writer.history(limit=1)[0]
    assert deleted.operation == "delete"
    writer.undo(deleted.entry_id)
    assert writer.read_bytes("d/a.txt").content == b"old"


def test_retention_keeps_an_old_blob_a_snapshot_in_another_process_named_after_the_listing(
    buckets: S3Server,
) -> None:
    """Review-3 finding 1, the same for a snapshot: ``_capture`` keeps the files by ``_keep_content`` (no copy where the blob is
    there), so a snapshot taken in another process after the prune read the snapshots' refs, naming an old blob
    a dropped entry kept, loses that content to the prune: restoring the snapshot fails."""
    root = fresh_root()
    pruner, writer = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    pruner.write("a.txt", "old")
    pruner.write("a.txt", "x")  # its entry keeps the blob of "old"
    time.sleep(2.2)  # the blob of "old" is older than the newest entry by more than the tombstone age below
    pruner.write("a.txt", "old")  # the newest entry the prune lists
    journal = pruner._changes
    journal.tombstone_age = writer._changes.tombstone_age = timedelta(seconds=1)  # one constant in every process
    fresh, taken = journal._fresh, []

    def meanwhile(refs: Any, since: Any) -> Any:
        taken.append(writer.snapshot())  # names the blob of "old" (already there: not copied)
        return fresh(refs, since)

    journal._fresh = meanwhile  # type: ignore[method-assign]
    pruner.prune_history(keep=0)
    assert taken
    # changed where nothing keeps the old content again (a writer without history: an undo-keeping write would
    # copy the blob back and hide the loss)
    ObjectStoreFilesystem(buckets.filesystem(), root, history=False).write("a.txt", "changed")
    writer.restore(taken[0])
    assert writer.read_bytes("a.txt").content == b"old"


def test_a_reader_keeps_a_bounded_cache_of_settled_entries(buckets: S3Server) -> None:
    """Settled records are cached per process (read once); a long-lived reader must not keep every entry it
    ever saw: past twice ``max_entries`` (and 100) the oldest go, to be read again if asked for."""
    root = fresh_root()
    writer, reader = (ObjectStoreFilesystem(buckets.filesystem(), root) for _ in range(2))
    reader._changes.max_entries = 10  # a cache of at most 120 records
    for index in range(130):
        writer.write(f"f{index}.txt", "x")
    assert len(reader.history(limit=None)) == 130
    assert 0 < len(reader._changes._settled) <= 120
    oldest = writer.history(limit=None)[-1]
    assert reader.history_entry(oldest.entry_id) == oldest  # read again
