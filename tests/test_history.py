"""The journal beyond the conformance suite: crash consistency on SQL, where a host keeps it, the actor's
scope, events across processes on PostgreSQL, and the CLI's ``log`` and ``undo``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from conftest import missing

import workspacefs
from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem, SqlStore
from workspacefs.backends.container import ContainerSandbox
from workspacefs.backends.host import _journal as host_journal
from workspacefs.backends.sql._schema import journal, session_files
from workspacefs.cli import main
from workspacefs.errors import UndoConflictError
from workspacefs.history import Actor, Change, acting_as, current_actor
from workspacefs.snapshots import SnapshotRetentionPolicy
from workspacefs.testing._containers import busybox_image, podman_available

WRITER = textwrap.dedent(
    """
    import os, sys
    from workspacefs import SqlFilesystem
    fs = SqlFilesystem(sys.argv[1], sys.argv[2])
    print("ready", flush=True)
    i = 0
    while True:
        i += 1
        name = f"d{i % 7}/f{i % 40}.txt"
        fs.write_bytes(name, os.urandom(64 + i % 300))
        if i % 5 == 0:
            fs.delete(name)
        if i % 11 == 0 and fs.exists(f"d{i % 7}"):
            fs.move(f"d{i % 7}", f"moved{i}")
        if i % 13 == 0 and fs.exists(f"moved{i - 2}"):
            fs.delete(f"moved{i - 2}", recursive=True)
    """
)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_writer_killed_at_any_moment_leaves_no_change_without_its_entry(
    kind: str, fast_tmp: Path, request: pytest.FixtureRequest
) -> None:
    """SIGKILL a writer again and again; afterwards each path's newest journal row says exactly what the path
    holds (a change and its row commit together, so there is no window between them)."""
    url = (
        f"sqlite:///{fast_tmp}/crash-{uuid.uuid4().hex}.db"
        if kind == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    session = f"crash-{uuid.uuid4().hex[:8]}"
    SqlStore(url).close()  # migrated once, before the writers race
    for round_ in range(6):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, url, session], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert writer.stdout is not None and writer.stdout.readline().strip() == b"ready", writer.stderr
        time.sleep(0.2 + 0.15 * round_)  # a kill point somewhere inside the writes, not a measured duration
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    store = SqlStore(url)
    with store.read() as connection:
        files = {
            r.path: (r.blob_id if not r.is_directory else "directory")
            for r in connection.execute(
                sa.select(session_files).where(session_files.c.session_id == session, session_files.c.path != "")
            )
        }
        rows = connection.execute(
            sa.select(journal).where(journal.c.session_id == session).order_by(journal.c.seq)
        ).all()
    store.close()
    assert rows, "the writer made no change before it was killed"
    replayed: dict[str, str] = {}  # the journal replayed from empty: it must arrive where the files are
    for row in rows:
        if row.from_path is not None:  # a move carries its subtree along
            for path in [p for p in replayed if p == row.from_path or p.startswith(row.from_path + "/")]:
                replayed[row.path + path[len(row.from_path) :]] = replayed.pop(path)
        if row.after_id is None:
            replayed.pop(row.path, None)
        else:
            replayed[row.path] = row.after_id
    assert replayed == files


def test_the_host_journal_lives_outside_the_root(tmp_path: Path) -> None:
    root, snapshots = tmp_path / "root", tmp_path / "snapshots"
    root.mkdir()
    fs = HostFilesystem(root, snapshot_dir=snapshots)
    fs.write("a.txt", "1")
    fs.write("a.txt", "2")
    assert sorted(p.name for p in root.iterdir()) == ["a.txt"]
    assert len(list(snapshots.glob("journals/*/journal.db"))) == 1
    fs.close()
    again = HostFilesystem(root, snapshot_dir=snapshots)  # another process: the journal persists
    assert [e.operation for e in again.history()] == ["write", "write"]
    again.undo(again.history()[0].entry_id)
    assert (root / "a.txt").read_text() == "1"
    again.close()


HOST_WRITER = textwrap.dedent(
    """
    import sys
    from workspacefs import HostFilesystem
    fs = HostFilesystem(sys.argv[1], snapshot_dir=sys.argv[2])
    fs.write("first.txt", "1")
    print("wrote", flush=True)
    sys.stdin.readline()  # stays alive, never closing the journal: its group must still be committed
    fs.write("second.txt", "2")
    """
)


def test_host_entries_committed_in_groups_reach_other_readers(tmp_path: Path) -> None:
    root, snapshots = tmp_path / "root", tmp_path / "snapshots"
    root.mkdir()
    one = HostFilesystem(root, snapshot_dir=snapshots)
    two = HostFilesystem(root, snapshot_dir=snapshots)  # its own connection to the same journal
    one.write("a.txt", "1")
    assert [c.path for e in two.history() for c in e.changes] == ["a.txt"]  # a read commits its peers
    writer = subprocess.Popen(
        [sys.executable, "-c", HOST_WRITER, str(root), str(snapshots)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdin is not None
    assert writer.stdout.readline() == "wrote\n"
    seen: list[str] = []
    for _ in range(2000):  # the writer idles with its group open: its thread commits it
        seen = [c.path for e in one.history() for c in e.changes]
        if "first.txt" in seen:
            break
        time.sleep(0.005)
    assert seen == ["first.txt", "a.txt"]
    writer.communicate("go\n", timeout=60)  # writes once more, then exits without closing anything
    assert writer.returncode == 0
    assert [c.path for e in one.history() for c in e.changes] == ["second.txt", "first.txt", "a.txt"]
    one.close()
    one.close()  # closing twice is harmless
    two.close()


def test_a_host_journal_lets_a_waiting_process_in_after_each_row(tmp_path: Path) -> None:
    root, snapshots = tmp_path / "root", tmp_path / "snapshots"
    root.mkdir()
    fs = HostFilesystem(root, snapshot_dir=snapshots)
    fs.write("first.txt", "0")
    [journal] = snapshots.glob("journals/*/journal.db")
    other = sqlite3.connect(journal, timeout=0, isolation_level=None)  # another process's connection
    for n in range(20):
        os.utime(journal.parent / "journal.busy")  # what a process waiting for the journal does
        fs.write(f"f{n}.txt", str(n))
        other.execute("BEGIN IMMEDIATE")  # free at once: the row was committed, no group held open
        other.execute("ROLLBACK")
    other.close()
    fs.close()


def test_host_plain_writes_wait_in_memory_and_are_written_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer never waits on SQLite for a plain write's entry: entries wait, then one transaction writes
    them all (here when the history is read; no group falls due during the test)."""
    monkeypatch.setattr(host_journal, "GROUP_SECONDS", 600.0)
    root = tmp_path / "root"
    root.mkdir()
    fs = HostFilesystem(root, snapshot_dir=tmp_path / "snapshots")
    assert fs._changes is not None
    statements: list[str] = []
    fs._changes._db.set_trace_callback(statements.append)
    for n in range(50):
        fs.write(f"f{n}.txt", str(n))
    assert statements == []
    assert [c.path for e in fs.history(limit=None) for c in e.changes] == [f"f{n}.txt" for n in reversed(range(50))]
    assert sum(s.startswith("INSERT") for s in statements) == 50
    assert statements.count("BEGIN IMMEDIATE") == statements.count("COMMIT") == 1
    fs.close()


def test_a_lone_process_never_takes_its_own_journal_touches_for_another_process(fast_tmp: Path) -> None:
    """Two threads of one process note entries while groups are committed (by the committer thread and by the
    writers): no commit's touch of ``journal.busy`` is mistaken for another process waiting, so entries stay
    grouped instead of being committed one by one (a touch seen between ``utime`` and its record did that)."""
    journal = host_journal.HostJournal(fast_tmp / "journal")
    statements: list[str] = []
    journal._db.set_trace_callback(statements.append)
    taken: list[int] = []

    def write(name: str) -> None:
        changes, actor = (Change(name, None, "x", 0, 1),), Actor()
        for n in range(20_000):
            journal.note("write", changes, actor)
            if journal._alone_after:  # taking turns with a process that is not there
                taken.append(n)
                return

    threads = [threading.Thread(target=write, args=(f"{k}.txt",)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    journal.close()
    assert taken == []
    assert 0 < statements.count("COMMIT") <= 40_000 // 32  # in groups


def test_a_forked_child_never_inherits_an_open_journal_group(tmp_path: Path) -> None:
    root, snapshots = tmp_path / "root", tmp_path / "snapshots"
    root.mkdir()
    fs = HostFilesystem(root, snapshot_dir=snapshots)
    expected = []
    for n in range(10):
        fs.write(f"parent-{n}.txt", "p")  # its group is still open when the process forks
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports by its exit status
            status = 1
            try:
                fs.write(f"child-{n}.txt", "c")
                fs.close()  # commits the child's own rows, and nothing of its parent's
                status = 0
            finally:
                os._exit(status)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        expected += [f"parent-{n}.txt", f"child-{n}.txt"]
    fs.write("last.txt", "l")
    assert sorted(c.path for e in fs.history(limit=None) for c in e.changes) == sorted([*expected, "last.txt"])
    fs.close()
    [journal] = snapshots.glob("journals/*/journal.db")
    assert sqlite3.connect(journal).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_change_made_outside_workspacefs_makes_undo_refuse(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    fs = HostFilesystem(root, snapshot_dir=tmp_path / "snapshots")
    fs.write("notes.md", "by the agent\n")
    entry = fs.history()[0]
    (root / "notes.md").write_text("edited in an editor\n")  # not through workspacefs: no entry
    with pytest.raises(UndoConflictError) as refused:
        fs.undo(entry.entry_id)
    assert refused.value.later == ()  # no later entry: the change came from outside
    assert (root / "notes.md").read_text() == "edited in an editor\n"
    fs.close()


def test_the_actor_is_scoped_to_its_block_and_task() -> None:
    assert current_actor() == Actor()
    with acting_as(Actor(name="agent-1", session="s")) as outer:
        with acting_as(tool_call="call-9") as inner:
            assert inner == Actor("agent-1", "s", "call-9", None)
        assert current_actor() == outer
    assert current_actor() == Actor()
    fs = InMemoryFilesystem()
    with acting_as("agent-2"):
        fs.write("a", "1")
    assert fs.history()[0].actor.name == "agent-2"
    off = InMemoryFilesystem(history=False)
    off.write("a", "1")
    assert not off.capabilities.history and not off.capabilities.watch


def test_postgres_watchers_hear_changes_made_through_another_store(postgres_url: str) -> None:
    """Two stores (as two `serve` processes would have) on one PostgreSQL: LISTEN/NOTIFY carries the change."""
    session = f"watch-{uuid.uuid4().hex[:8]}"
    here, there = SqlStore(postgres_url), SqlStore(postgres_url)
    watching, writing = SqlFilesystem(here, session), SqlFilesystem(there, session)
    with watching.watch("/") as watcher:
        with acting_as("other-process"):
            writing.write("from-there.txt", "hello")
        event = watcher.next_event(30)
        assert event is not None and (event.kind, event.path, event.actor.name) == (
            "created",
            "from-there.txt",
            "other-process",
        )
        assert event.entry_id == writing.history()[0].entry_id
    here.close()
    there.close()


def test_the_cli_logs_and_undoes_with_the_declared_actor(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp}/cli-{uuid.uuid4().hex}.db?session=s"
    runner = CliRunner()
    assert runner.invoke(main, ["--as", "alice", "write", "a.txt", "--fs", url], input="one\n").exit_code == 0
    assert (
        runner.invoke(main, ["write", "a.txt", "--fs", url], input="two\n", env={"WORKSPACEFS_ACTOR": "bob"}).exit_code
        == 0
    )
    shown = runner.invoke(main, ["log", "--fs", url])
    assert shown.exit_code == 0, shown.output
    assert "bob via cli" in shown.output and "alice via cli" in shown.output and "modified a.txt" in shown.output
    entries = json.loads(runner.invoke(main, ["log", "--json", "--actor", "alice", "--fs", url]).output)
    assert [(e["operation"], e["actor"]["name"]) for e in entries] == [("write", "alice")]
    conflict = runner.invoke(main, ["undo", str(entries[0]["entry_id"]), "--fs", url])  # bob changed it since
    assert conflict.exit_code == 4 and "undo the later changes first" in conflict.output
    newest = json.loads(runner.invoke(main, ["log", "--json", "-n", "1", "--fs", url]).output)[0]
    undone = runner.invoke(main, ["undo", str(newest["entry_id"]), "--fs", url])
    assert undone.exit_code == 0, undone.output
    assert runner.invoke(main, ["cat", "a.txt", "--fs", url]).output == "one\n"
    assert runner.invoke(main, ["undo", "--actor", "alice", "--fs", url]).exit_code == 0  # no conflict now
    assert runner.invoke(main, ["cat", "a.txt", "--fs", url]).exit_code == 3


def test_a_host_watcher_sees_changes_made_outside_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    fs = HostFilesystem(root, snapshot_dir=tmp_path / "snapshots")
    with fs.watch() as watcher:
        fs.write("mine.txt", "through workspacefs")
        subprocess.run(["sh", "-c", f"echo outside > {root}/theirs.txt"], check=True)
        events = [watcher.next_event(30) for _ in range(2)]
        assert [(e.kind, e.path, e.actor.via, e.entry_id is None) for e in events if e] == [
            ("created", "mine.txt", None, False),
            ("created", "theirs.txt", "outside", True),
        ]
        assert watcher.next_event(0.5) is None  # the journal's own change is not reported again from inotify
    fs.close()


def test_a_container_watcher_sees_what_a_command_inside_changed(tmp_path: Path) -> None:
    if not podman_available():
        missing("Podman is not installed or does not answer (apt-get install podman runc)")
    with ContainerSandbox(busybox_image(), snapshot_dir=tmp_path / "snapshots") as sandbox:
        fs = sandbox.filesystem
        with fs.watch() as watcher:
            with acting_as("builder"):
                assert sandbox.exec("echo built > /workspace/out.txt").exit_code == 0
            event = watcher.next_event(30)
            entry = fs.history(limit=1)[0]
            assert event is not None and (event.kind, event.path, event.actor.name) == ("created", "out.txt", "builder")
            assert (entry.operation, event.entry_id) == ("exec", entry.entry_id)  # the command's entry explains it
            Path(sandbox.host_dir, "direct.txt").write_text("not through workspacefs\n")
            later = watcher.next_event(30)  # no second, "outside" event for out.txt comes before this one
            assert later is not None and (later.path, later.actor.via, later.entry_id) == (
                "direct.txt",
                "outside",
                None,
            )


def test_sqlite_watchers_hear_every_filesystem_object_of_their_session(fast_tmp: Path) -> None:
    store = SqlStore(f"sqlite:///{fast_tmp}/peers-{uuid.uuid4().hex}.db")
    watched, writer, stranger = SqlFilesystem(store, "s"), SqlFilesystem(store, "s"), SqlFilesystem(store, "t")
    with watched.watch() as watcher:
        writer.write("x.txt", "through another object of the session")
        stranger.write("y.txt", "another session")
        event = watcher.next_event(30)
        assert event is not None and event.path == "x.txt"
        assert watcher.next_event(0.5) is None  # nothing of the other session
    store.close()


def test_a_host_journal_is_bounded_by_the_snapshot_retention_policys_age_too(tmp_path: Path) -> None:
    """``SnapshotRetentionPolicy(max_age_hours=…)`` bounds the journal as it bounds the snapshots: retention,
    applied every 256 entries, drops the entries older than that (here: all but the newest few)."""
    (tmp_path / "aged").mkdir()
    (tmp_path / "kept").mkdir()
    aged = HostFilesystem(
        tmp_path / "aged",
        snapshot_dir=tmp_path / "s1",
        retention=SnapshotRetentionPolicy(max_age_hours=1e-9),  # 3.6 µs: every entry but the newest is older
        durable=False,
    )
    kept = HostFilesystem(tmp_path / "kept", snapshot_dir=tmp_path / "s2", durable=False)
    for fs in (aged, kept):
        for index in range(300):
            fs.write(f"f{index % 7}.txt", str(index))
    assert len(kept.history(limit=None)) == 300  # no age: the newest 10,000 stay
    assert len(aged.history(limit=None)) < 300 - 200  # retention at entry 256 dropped what came before
    aged.close()
    kept.close()


def test_host_retention_collects_only_what_the_dropped_entries_kept(tmp_path: Path) -> None:
    """Retention (every 256 entries) collects the kept files of the entries it drops, without listing
    ``objects/`` (which cost more than the writes once a journal was full); ``prune_history`` sweeps it all."""
    (tmp_path / "root").mkdir()
    fs = HostFilesystem(tmp_path / "root", snapshot_dir=tmp_path / "snaps", durable=False)
    for version in range(6):
        fs.write("a.txt", f"version {version}")  # each overwrite keeps the version before
    journal = fs._changes
    assert journal is not None
    objects = journal.objects
    (objects / "orphan").write_bytes(b"kept by a process that died before its entry")
    past = time.time() - 3600  # older than the grace that protects content whose entry is on its way
    for item in objects.iterdir():
        os.utime(item, (past, past))
    kept = {item.name for item in objects.iterdir()}
    assert journal._prune(None, 3, sweep=False) == 3  # retention's pass: the oldest three entries go
    named = {c.before for e in fs.history(limit=None) for c in e.changes if c.before is not None}
    assert {item.name for item in objects.iterdir()} == (kept & named) | {"orphan"}
    fs.prune_history(keep=3)  # an explicit prune sweeps: the orphan goes too
    assert {item.name for item in objects.iterdir()} == named
    fs.close()


def _vm_steps(db: sqlite3.Connection, work: Callable[[], object]) -> int:
    """SQLite virtual-machine steps ``work`` ran on ``db`` (a count of work, not a time)."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    db.set_progress_handler(count, 1)
    try:
        work()
    finally:
        db.set_progress_handler(None, 1)
    return steps[0]


def test_host_retention_reads_what_it_drops_not_the_whole_journal(tmp_path: Path) -> None:
    """A retention pass over a journal of 3,000 entries (every one an overwrite) of which the oldest 10 are past
    the age limit reads about those 10 rows: it scanned every row for their age, and every row again for the
    content they named (no index on ``before_id``)."""
    (tmp_path / "root").mkdir()
    fs = HostFilesystem(tmp_path / "root", snapshot_dir=tmp_path / "snaps", durable=False)
    journal = fs._changes
    assert journal is not None
    for version in range(3000):
        fs.write("a.txt", f"version {version}")
    journal.flush()
    journal._db.execute("UPDATE journal SET at = 0 WHERE seq <= 10")  # the oldest ten are very old
    journal.max_age = timedelta(hours=1)

    steps = _vm_steps(journal._db, journal._retain)

    assert len(fs.history(limit=None)) == 3000 - 10
    assert steps < 3000  # 721 here (54,409 before): the scans cost 10 or more per row of the journal
    fs.close()


def test_host_retention_cuts_back_a_full_journal_in_batches(tmp_path: Path) -> None:
    """The newest ``max_entries`` stay; the cut runs once the journal passes the limit by an eighth, so finding it
    (which reads ``max_entries`` index entries) is paid once per eighth of the limit, not every 256 entries."""
    (tmp_path / "root").mkdir()
    fs = HostFilesystem(tmp_path / "root", snapshot_dir=tmp_path / "snaps", durable=False)
    journal = fs._changes
    assert journal is not None
    journal.max_entries = 240
    for index in range(256):  # retention's first look: 256 entries, within 240 and an eighth
        fs.write(f"f{index}.txt", "x")
    assert len(fs.history(limit=None)) == 256
    for index in range(256):  # its second look: 512 entries, past it: cut back to 240
        fs.write(f"g{index}.txt", "x")
    assert len(fs.history(limit=None)) == 240
    fs.close()


def test_a_journaled_write_of_a_new_file_opens_nothing_to_keep(tmp_path: Path) -> None:
    """What a whole write replaces is looked at (and kept) only when a file is there: a new file's write makes no
    open of its name beside the write's own (it cost a failed ``openat`` per new file)."""
    (tmp_path / "root").mkdir()
    fs = HostFilesystem(tmp_path / "root", snapshot_dir=tmp_path / "snaps", durable=False)
    looked: list[str] = []
    observe = fs._replaced_at

    def counted(dir_fd: int, name: str, path: str) -> tuple[os.stat_result | None, tuple[str | None, int]]:
        looked.append(name)
        return observe(dir_fd, name, path)

    fs._replaced_at = counted  # type: ignore[method-assign]
    fs.write("new.txt", "one")
    assert looked == []
    fs.write("new.txt", "two")
    assert looked == ["new.txt"]
    [newest, first] = fs.history(limit=None)
    assert (first.changes[0].before, newest.changes[0].before) == (None, first.changes[0].after)
    fs.undo(newest.entry_id)
    assert fs.read_bytes("new.txt").content == b"one"
    fs.close()


def test_a_host_undo_whose_kept_content_is_gone_changes_nothing(tmp_path: Path) -> None:
    """Undo checks that every file its entries replaced is still kept before it changes anything: with one of
    two kept files removed from ``objects/``, undoing both entries fails whole (it put the first back, then
    failed on the second)."""
    (tmp_path / "root").mkdir()
    fs = HostFilesystem(tmp_path / "root", snapshot_dir=tmp_path / "snaps", durable=False)
    fs.write("a.txt", "a1")
    fs.write("b.txt", "b1")
    fs.write("a.txt", "a2")
    fs.write("b.txt", "b2")
    newest_two = fs.history(limit=2)
    journal = fs._changes
    assert journal is not None
    gone = newest_two[1].changes[0].before  # what a.txt held: undone second, after b.txt
    assert gone is not None
    (journal.objects / gone).unlink()

    with pytest.raises(FileNotFoundError):
        fs.undo([e.entry_id for e in newest_two])

    assert (fs.read_bytes("a.txt").content, fs.read_bytes("b.txt").content) == (b"a2", b"b2")
    fs.close()


def test_a_memory_journal_entry_keeps_next_to_nothing_for_the_garbage_collector() -> None:
    """Every object a journal entry keeps alive is walked again by each full collection of Python's cyclic
    garbage collector, which cost a journaled write more than recording it; a new file's entry keeps no object
    of its own (its path and the file's objects sit in columns), where a tuple per entry kept four and a
    tuple per change one. Counted in a fresh interpreter: in a test worker, other tests' objects come and go."""
    script = textwrap.dedent(
        """
        import gc, json
        from workspacefs import InMemoryFilesystem
        kept = {}
        for history in (False, True):
            fs = InMemoryFilesystem(history=history)
            fs.mkdir("d")
            gc.collect()
            before = len(gc.get_objects())
            for i in range(500):
                fs.write_bytes(f"d/f{i}", b"x")
            gc.collect()
            kept[history] = len(gc.get_objects()) - before
        print(json.dumps([kept[False], kept[True]]))
        """
    )
    source = str(Path(workspacefs.__file__).parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    off, on = json.loads(run.stdout)
    kept = {False: off, True: on}
    assert kept[True] - kept[False] <= 50, kept  # the journal's own few objects, not one per entry
