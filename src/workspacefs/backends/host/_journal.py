"""``HostJournal``: a host directory's journal, in a SQLite file beside its snapshots (never inside the root).

One row per path an entry changed (the rows of an entry share its id), in ``journal.db`` (WAL, so several
processes serving one root share it); the content a change replaced is copied, content-addressed, into
``objects/``, so an undo can write it back even after the file changed on disk. The file is written
after the change itself: a crash between the two leaves a change without its entry (the change is still
seen by a watcher of the directory), never the reverse.

Entries are written in groups: an entry whose id nobody waits for (:meth:`HostJournal.note`, every plain
write) waits in memory for at most ``GROUP_SECONDS``; then all that waited is written in one short transaction
(one ``executemany``, one commit): by the writer itself at its first entry past ``WRITER_SHARE`` of that time,
or, if it wrote nothing more by then, by the journal's committer thread. (The thread wrote half the groups
while the writer went on, the two trading the interpreter lock at each system call of the writer's and each
row of the thread's; writes cost 4 to 8 µs less CPU with no thread at all. On a busy machine a writer that
is not scheduled in time still leaves some groups to the thread.) A statement
and a commit per row cost more than the write itself; a transaction held open across writes made the
writer wait for each commit. So a crash may lose the entries of the last few milliseconds (never a change),
and another process sees an entry at most that late; a read in this process writes what waits first. An
entry whose id is needed (:meth:`HostJournal.record`: an operation's scope, an undo, while someone watches)
is written at once, after what waited. A process that has to wait for the journal touches
``journal.busy``; the holder then writes each entry at once for a second, so two processes writing one
root take turns.
"""

from __future__ import annotations

import contextlib
import operator
import os
import sqlite3
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from multiprocessing import parent_process
from pathlib import Path
from typing import Any, Protocol

from workspacefs._hostio import link_descriptor
from workspacefs.backends.host._temps import PROC_LINKS, TMPFILE_UNSUPPORTED
from workspacefs.errors import HistoryEntryNotFoundError
from workspacefs.history import DIRECTORY, Actor, Change, Journal, JournalEntry
from workspacefs.paths import ROOT, ancestors
from workspacefs.protocol import ByteReader
from workspacefs.streams import ContentHasher, StreamReader, content_id_of

__all__ = ["HostJournal", "Stamp", "stamp_of"]

Stamp = tuple[int, int, int, int, int]
"""A file's inode, device, size, modification and change times (ns): what any change of it changes."""


def stamp_of(info: os.stat_result) -> Stamp:
    """The ``Stamp`` of a file's ``stat``."""
    return info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns, info.st_ctime_ns


_SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    entry INTEGER NOT NULL,
    at REAL NOT NULL,
    operation TEXT NOT NULL,
    actor_name TEXT, actor_session TEXT, actor_call TEXT, actor_via TEXT,
    path TEXT NOT NULL,
    from_path TEXT,
    before_id TEXT,
    after_id TEXT,
    size_before INTEGER NOT NULL,
    size_after INTEGER NOT NULL,
    undoes INTEGER,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS journal_entry ON journal (entry);
CREATE INDEX IF NOT EXISTS journal_before ON journal (before_id) WHERE before_id IS NOT NULL;
DROP INDEX IF EXISTS journal_path;
"""
"""No index on ``path`` (earlier journals had one; opening drops it): no query could use it, since a path's
entries are those naming it as ``path`` *or* ``from_path``, found through ``journal_entry`` newest first, and its
random insertion points cost each group commit a page per row (4.5 µs per entry of a realistic write)."""
_NEXT_ENTRY = "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'journal'), 0) + 1"
"""The id the entry's first row will get (AUTOINCREMENT never reuses one, even after pruning all)."""
_COLUMNS = (
    "seq, entry, at, operation, actor_name, actor_session, actor_call, actor_via, path, from_path, before_id,"
    " after_id, size_before, size_after, undoes, detail"
)
_NULLABLE = (4, 5, 6, 7, 9, 10, 11, 14, 15)
"""The columns a row often leaves empty (actor fields, from_path, content ids, undoes, detail)."""
_INSERTS: dict[tuple[bool, ...], tuple[str, Callable[[tuple[Any, ...]], tuple[Any, ...]]]] = {}
"""Per pattern of empty columns: the insert with ``NULL`` written in, and what picks the other values. Binding
``None`` costs the sqlite3 module an adapter lookup per value (inserting a typical row cost 4 µs, against 1.8
with its seven ``NULL`` written in)."""


def _insert_for(empty: tuple[bool, ...]) -> tuple[str, Callable[[tuple[Any, ...]], tuple[Any, ...]]]:
    """The insert for rows whose ``_NULLABLE`` columns are ``None`` where ``empty`` says; numbered by this process
    (it holds the write lock while it inserts them)."""
    found = _INSERTS.get(empty)
    if found is None:
        nulls = {column for column, none in zip(_NULLABLE, empty, strict=True) if none}
        kept = [column for column in range(16) if column not in nulls]
        values = ", ".join("NULL" if column in nulls else "?" for column in range(16))
        pick = operator.itemgetter(*kept)  # at least seq and entry: always a tuple
        found = _INSERTS[empty] = (f"INSERT INTO journal ({_COLUMNS}) VALUES ({values})", pick)  # noqa: S608 - no input
    return found


_OLDER_THAN_NEWEST = "SELECT DISTINCT entry FROM journal ORDER BY entry DESC LIMIT -1 OFFSET ?"
_OLDER_THAN_TIME = (
    "SELECT DISTINCT entry FROM journal NOT INDEXED WHERE seq < coalesce("
    "(SELECT seq FROM journal WHERE at >= ? ORDER BY seq LIMIT 1), (SELECT max(seq) + 1 FROM journal))"
)
"""The entries before the first row young enough to stay: read from the oldest up, so a pass costs what it drops
(a scan of ``at`` read every row of a full journal every 256 entries)."""
_OLDER_THAN_TIME_EXACT = "SELECT DISTINCT entry FROM journal WHERE at < ?"
"""Every entry with a row older than the time, wherever it lies: what an explicit prune drops (rows are not in
``at`` order when another process wrote a group late, or the clock stepped back)."""
_ENTRY_SPAN = "SELECT (SELECT max(entry) FROM journal) - (SELECT min(entry) FROM journal) + 1"
"""At least the number of entries (ids are never reused; an entry of several rows leaves gaps): two index reads."""
_KEPT_CONTENT = "SELECT DISTINCT before_id FROM journal WHERE before_id IS NOT NULL"
_CONTENT_OF = "SELECT DISTINCT before_id FROM journal WHERE before_id IS NOT NULL AND entry IN ({})"
_STILL_NAMED = "SELECT DISTINCT before_id FROM journal WHERE before_id IN ({})"
_ACTOR_COLUMNS = ("actor_name", "actor_session", "actor_call", "actor_via")
_COPY_BLOCK = 1024 * 1024
_SMALL = 64 * 1024
"""Content up to this size is hashed before it is copied, so content already kept costs no write."""
_DEFAULT_KEEP = 10_000
GROUP_SECONDS = 0.005
"""How long rows may wait in memory before they are committed."""
WRITER_SHARE = 0.8
"""A writer writes the group its entry joins once the group is this share of ``GROUP_SECONDS`` old: while writes
flow, groups are written inline, before the committer thread would wake for them."""
_IDLE_SECONDS = 1.0
"""How long the committer thread waits for another group before it ends."""
_GROUP_ENTRIES = 1024
_WAIT_SECONDS = 30.0
"""How long a process waits for another's journal transaction before the write's entry fails."""
_TAKE_TURNS_SECONDS = 1.0
"""After another process waited, rows are committed one by one this long."""
_PEERS: dict[str, weakref.WeakSet[HostJournal]] = {}
_PEERS_LOCK = threading.Lock()
_FORKED = False
"""Whether this process was forked from another (where ``os.register_at_fork`` runs)."""
_HELD_AT_FORK: list[HostJournal] = []
"""The journals whose locks are held while the process forks."""
"""The journals open in this process, by directory (a read commits its peers' open groups first)."""
_OBJECT_GRACE_SECONDS = 600
"""Kept content younger than this is never collected: its entry may still be on its way."""
_TOUCHED_SECONDS = 60.0
"""Content this journal kept or touched this recently is not touched again (a tenth of the grace above: no
collection, in any process, takes a file that young)."""
_TOUCHED_KEPT = 4096
"""How many such content ids a journal remembers (forgotten all at once past that)."""


class Follower(Protocol):
    """Something that follows the root while watchers are there (``OutsideWatcher``)."""

    def start(self) -> None: ...
    def stop(self) -> None: ...


class HostJournal(Journal):
    """Entries and replaced content of one host root, kept in ``directory``."""

    def __init__(self, directory: Path, *, max_entries: int = _DEFAULT_KEEP, max_age: timedelta | None = None) -> None:
        super().__init__()
        self.directory = directory
        self.objects = directory / "objects"
        self.objects.mkdir(parents=True, exist_ok=True)
        self._objects = str(self.objects)
        self._db = _connect(directory)
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        """Guards the database (taken before ``_waiting_lock`` when both are)."""
        self._waiting_lock = threading.Lock()
        self._waiting: list[_Rows] = []
        """Entries noted but not written yet, oldest first (guarded by ``_waiting_lock``; never rebound)."""
        self._waiting_since = 0.0
        self._closing = False
        self._busy = str(directory / "journal.busy")
        """Touched by a process that waits for the journal: whoever holds a group open then commits each row
        at once for a while, so two processes writing one root take turns (else one waits for seconds)."""
        self._busy_fd = os.open(self._busy, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        """Held open: ``fstat`` after each entry costs a third of a ``stat`` of the path."""
        self._busy_seen = os.fstat(self._busy_fd).st_mtime_ns
        self._touch_lock = threading.Lock()
        """Held from this process's touch of ``journal.busy`` until ``_busy_seen`` records it: another thread
        reading the file in between would take the touch for another process's (and commit row by row)."""
        self._alone_after = float("inf") if _FORKED or parent_process() is not None else 0.0
        """Before this moment (monotonic) entries are written at once. Always in a forked process or a
        ``multiprocessing`` child: it may end by ``os._exit``, and no exit hook would write what waits."""
        self._wake = threading.Condition(self._waiting_lock)
        """Wakes the committer thread (an entry waits, or the journal closed)."""
        self._committer = False
        """Whether this journal's committer thread is alive (read and set under ``_waiting_lock``)."""
        self._anonymous = PROC_LINKS
        self._objects_fd = os.open(self._objects, os.O_DIRECTORY | os.O_CLOEXEC)
        """``objects/``, for naming anonymous files (``linkat`` follows ``/proc/self/fd`` only with a dir fd)."""
        self._finalizer = self._finalize_later()
        with _PEERS_LOCK:
            self._peers = _PEERS.setdefault(os.path.realpath(directory), weakref.WeakSet())
            self._peers.add(self)
        self._recorded = 0
        self._touched: dict[str, float] = {}
        """Content ids this journal kept or touched lately, with when (wall clock): see ``_TOUCHED_SECONDS``."""
        self.collected = 0
        """How many kept files this journal has collected (a cache of kept content is stale once it grows)."""
        self.hashed = 0
        """How many files :meth:`keep` has read and hashed (a file this process wrote, unchanged since, is not)."""
        self.max_entries = max_entries
        self.max_age = max_age
        """Entries older than this go too (the snapshot retention policy's ``max_age_hours``)."""
        self.follow: Callable[[], Follower] | None = None
        """Set by the filesystem: makes the thread that reports changes made outside workspacefs."""
        self._follower: Follower | None = None

    def _forked(self) -> None:
        """In a forked child: locks of its own (the parent's were held across the fork), no committer thread
        yet, no watchers (their threads stayed in the parent). Nothing waits and no transaction is open: the
        parent wrote everything before forking, so the child never inherits a held write lock."""
        self._finalizer.detach()
        self._lock = threading.Lock()
        self._waiting_lock = threading.Lock()
        self._wake = threading.Condition(self._waiting_lock)
        self._touch_lock = threading.Lock()
        self._committer = False
        self._waiting.clear()  # the parent writes what waited (noted after it wrote, by another of its threads)
        self._watch_lock = threading.Lock()
        self._watchers = []
        self._follower = None
        self._finalizer = self._finalize_later()
        self._alone_after = float("inf")  # a child may end by os._exit (multiprocessing): no exit hook runs

    def _finalize_later(self) -> weakref.finalize[Any, Any]:
        """At exit, or when this journal is collected unclosed: write what waits, close its descriptors."""
        fds = (self._objects_fd, self._busy_fd)
        return weakref.finalize(self, _commit_open, self._db, self._lock, self._waiting, fds)

    def _watching_started(self) -> None:
        if self.follow is not None and self._follower is None:
            self._follower = self.follow()
            self._follower.start()

    def _watching_stopped(self) -> None:
        follower, self._follower = self._follower, None
        if follower is not None:
            follower.stop()

    def close(self) -> None:
        """Stop following the root, commit and close the database."""
        self._watching_stopped()
        self._finalizer.detach()
        with self._lock:
            if self._objects_fd < 0:  # closed already
                return
            with self._waiting_lock:
                self._closing = True  # a write finishing now fails loudly instead of leaving its entry waiting
            self._write_waiting(None)
            self._db.close()
            os.close(self._objects_fd)
            os.close(self._busy_fd)
            self._objects_fd = self._busy_fd = -1
        with self._wake:
            self._wake.notify()  # the committer thread ends

    # --- group commit -----------------------------------------------------------------------------------

    def _write_waiting(self, entry: _Rows | None) -> int:
        """Under ``_lock``: write what waits, then ``entry`` if given, in one transaction; returns the id of the
        last entry written (0: nothing was). What waited waits on if the journal stays busy (``entry``'s caller
        hears it); if the transaction itself fails, its entries are lost (never a change)."""
        with self._waiting_lock:
            batch = self._waiting[:]
            self._waiting.clear()
        if entry is None and not batch:
            return 0
        try:
            self._begin()
        except BaseException:
            with self._waiting_lock:
                self._waiting[:0] = batch
                self._waiting_since = time.monotonic()  # the committer tries again a group's time later, not at once
            raise
        if entry is not None:
            batch.append(entry)
        written = _insert_and_commit(self._db, batch)
        self._signal_writing()
        return written

    def _signal_writing(self) -> None:
        """Touch ``journal.busy`` (this process's own touch is not news to it): another process writing the root
        then writes each entry at once for a while, and so does this one when it sees that process's touches,
        so two processes' ids follow the order of their changes instead of their groups'."""
        with self._touch_lock, contextlib.suppress(OSError):
            os.utime(self._busy_fd)
            self._busy_seen = os.fstat(self._busy_fd).st_mtime_ns

    def _wait_for_group(self, entry: _Rows) -> None:
        """Add ``entry`` to what waits. A group waited long enough (or grew large) is written by the writer
        itself, at once; the first entry of a group wakes (or starts) the committer thread, which writes what
        a quiet spell leaves waiting."""
        with self._waiting_lock:
            if self._closing:
                raise ValueError("I/O operation on a closed journal")
            self._waiting.append(entry)
            now = time.monotonic()
            if len(self._waiting) > 1:
                if now - self._waiting_since < GROUP_SECONDS * WRITER_SHARE and len(self._waiting) < _GROUP_ENTRIES:
                    return
            else:
                self._waiting_since = now
                if self._committer:
                    self._wake.notify()
                    return
                self._committer = True
                try:
                    threading.Thread(
                        target=_commit_later, args=(weakref.ref(self), self._wake), name="wsfs-journal", daemon=True
                    ).start()
                    return
                except RuntimeError:  # no new threads (the interpreter is shutting down): written at once
                    self._committer = False
                    self._alone_after = float("inf")
        self.flush()

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``, waiting as long as SQLite would (30 s), but touching ``journal.busy`` while it
        waits so that the process holding the journal lets go after each row."""
        deadline = time.monotonic() + _WAIT_SECONDS
        pause = 0.0002
        self._db.execute("PRAGMA busy_timeout = 0")
        try:
            while True:
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                        raise
                with contextlib.suppress(OSError):
                    os.utime(self._busy)
                time.sleep(pause)
                pause = min(pause * 2, 0.005)
        finally:
            self._db.execute(f"PRAGMA busy_timeout = {int(_WAIT_SECONDS * 1000)}")

    def _wanted(self, now: float) -> bool:
        """Whether another process has waited for the journal lately (``journal.busy`` touched)."""
        if now < self._alone_after:
            return True
        try:
            touched = os.fstat(self._busy_fd).st_mtime_ns
        except OSError:
            return False
        if touched == self._busy_seen:  # the common case, without a lock
            return False
        with self._touch_lock:  # a touch of this process's may be under way: look again once it is recorded
            try:
                touched = os.fstat(self._busy_fd).st_mtime_ns
            except OSError:
                return False
            if touched == self._busy_seen:
                return False
            self._busy_seen = touched
        self._alone_after = now + _TAKE_TURNS_SECONDS
        return True

    def flush(self) -> None:
        """Write the entries that wait (other processes see them now)."""
        with self._lock, contextlib.suppress(sqlite3.ProgrammingError):  # closed: nothing waits
            self._write_waiting(None)

    # --- content --------------------------------------------------------------------------------------

    def keep(self, fd: int, size: int, known: tuple[Stamp, str] | None = None) -> str:
        """Copy the first ``size`` bytes of open file ``fd`` into ``objects/`` (once per content: content
        already kept is not written again); returns its content id. ``known``: the stamp and content id of what
        this process wrote there; if ``fd`` still shows that stamp once its bytes are read, they are not hashed."""
        if size <= _SMALL:
            data = os.pread(fd, size, 0)
            if known is not None and stamp_of(os.fstat(fd)) == known[0]:
                content_id = known[1]
            else:
                self.hashed += 1
                content_id = content_id_of(data)
            if not self.is_kept(content_id):
                target = os.path.join(self._objects, content_id)  # a str: pathlib's joins cost more than the write
                self._install(target, lambda handle: os.write(handle, data))
                self._touch(content_id, time.time())
            return content_id
        hasher = None if known is not None else ContentHasher()
        handle, temp = tempfile.mkstemp(dir=self.objects, prefix=".keep-")
        try:
            offset = 0
            while offset < size and (chunk := os.pread(fd, min(_COPY_BLOCK, size - offset), offset)):
                if hasher is not None:
                    hasher.update(chunk)
                os.write(handle, chunk)
                offset += len(chunk)
            os.close(handle)
            handle = -1
            if hasher is not None:
                self.hashed += 1
                content_id = hasher.content_id()
            elif known is not None and stamp_of(os.fstat(fd)) == known[0]:
                content_id = known[1]
            else:  # changed while it was copied: copied again, and hashed
                os.unlink(temp)
                return self.keep(fd, size)
            os.replace(temp, os.path.join(self._objects, content_id))
            return content_id
        except BaseException:
            if handle >= 0:
                os.close(handle)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise

    def is_kept(self, content_id: str) -> bool:
        """Whether content ``content_id`` is kept, its time made fresh so that no collection takes it before the
        entry naming it is written (a time refreshed lately is not refreshed again: see ``_TOUCHED_SECONDS``)."""
        now = time.time()  # the collector's clock (file times), not monotonic: a suspend must not keep it fresh
        if now - self._touched.get(content_id, -_TOUCHED_SECONDS) < _TOUCHED_SECONDS:
            return True
        try:
            os.utime(content_id, dir_fd=self._objects_fd)
        except FileNotFoundError:
            return False
        self._touch(content_id, now)
        return True

    def _touch(self, content_id: str, now: float) -> None:
        """Remember that ``content_id`` was kept or touched at ``now``."""
        touched = self._touched
        if len(touched) >= _TOUCHED_KEPT:
            touched.clear()
        touched[content_id] = now

    def _install(self, target: str, fill: Callable[[int], object]) -> None:
        """Write ``target`` atomically: an anonymous file linked to its name once full (where the system
        has them; half the cost of a temporary name), else a temporary name and a rename."""
        if self._anonymous:
            try:
                handle = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=self._objects_fd)
            except OSError as exc:
                if exc.errno not in TMPFILE_UNSUPPORTED:
                    raise
                self._anonymous = False
            else:
                try:
                    fill(handle)
                    link_descriptor(handle, self._objects_fd, os.path.basename(target))  # False: kept meanwhile
                finally:
                    os.close(handle)
                return
        handle, temp = tempfile.mkstemp(dir=self.objects, prefix=".keep-")
        try:
            fill(handle)
        finally:
            os.close(handle)
        os.replace(temp, target)

    def hold(self, content_id: str) -> bool:
        """Whether content ``content_id`` is kept, refreshing its time so a collection leaves it for the entry
        about to name it (a collection under way makes this ``False``: it is treated as not kept)."""
        try:
            os.utime(content_id, dir_fd=self._objects_fd)
        except (FileNotFoundError, ValueError):
            return False
        return True

    def content(self, content_id: str, path: str) -> ByteReader:
        """A reader of kept content ``content_id`` (``FileNotFoundError`` if it is not kept)."""
        if not content_id or "/" in content_id or content_id.startswith("."):
            raise FileNotFoundError(2, "No such kept content", path)
        try:
            handle = open(self.objects / content_id, "rb", buffering=0)  # noqa: SIM115 - the reader closes it
        except FileNotFoundError:
            raise FileNotFoundError(2, "The content this entry replaced is no longer kept", path) from None
        return StreamReader(path, handle, os.fstat(handle.fileno()).st_size)

    # --- entries ----------------------------------------------------------------------------------------

    def record(
        self,
        operation: str,
        changes: Sequence[Any],
        actor: Actor,
        *,
        undoes: int | None = None,
        detail: str | None = None,
    ) -> int:
        """Written at once (after what waits here and in this process's other journals of the root, so ids
        follow the order of the changes): the caller needs the entry's id."""
        entry = _rows(operation, changes, actor, undoes, detail)
        self._flush_peers()
        with self._lock:
            entry_id = self._write_waiting(entry)
        return self._recorded_one(entry_id)

    def note(self, operation: str, changes: Sequence[Any], actor: Actor) -> None:
        """Waits (at most ``GROUP_SECONDS``) to be written with others, unless someone watches or another
        process waits for the journal: then it is written at once. Whether another process waits is looked up
        when an entry starts a group (one ``fstat`` per group, not per entry): entries joining a group are
        written after any entry another process wrote meanwhile, which is their order anyway."""
        if self._at_once():
            self.record(operation, changes, actor)  # ids in the order of the changes, whoever else writes
            return
        self._wait_for_group(_rows(operation, changes, actor, None, None))
        self._recorded += 1
        if self._recorded % 256 == 0:
            self._retain()

    def note_write(self, path: str, before: tuple[str | None, int], after: str, size: int, actor: Actor) -> None:
        """As :meth:`note`, for a whole write outside any operation (most entries) that replaced ``before`` (content
        id, size) with ``after`` of ``size`` bytes: its row is built at once, with no ``Change`` first (the object
        and the generic row builder cost a microsecond of a 30 µs write)."""
        if self._at_once():
            self.record("write", [Change(path, before[0], after, before[1], size)], actor)
            return
        stamp = time.time_ns() // 1000 / 1e6  # as in _rows
        row = (stamp, "write", *actor.fields(), path, None, before[0], after, before[1], size, None, None)
        self._wait_for_group((row,))
        self._recorded += 1
        if self._recorded % 256 == 0:
            self._retain()

    def _at_once(self) -> bool:
        """Whether an entry nobody waits for is written at once: someone watches, another journal of the root is
        open here, or another process writes the root (see :meth:`note`)."""
        now = time.monotonic()
        if self.watched or len(self._peers) > 1 or now < self._alone_after:
            return True
        return not self._waiting and self._wanted(now)

    def _retain(self) -> None:
        """Keep the newest ``max_entries`` entries, none older than ``max_age``. The count is cut back only
        once it passes the limit by an eighth: finding the cut reads ``max_entries`` index entries, which cost
        more than the writes when it ran every 256 entries of a full journal."""
        before = None if self.max_age is None else datetime.now(UTC) - self.max_age
        keep = self.max_entries
        with self._lock:
            span = self._db.execute(_ENTRY_SPAN).fetchone()[0]
        over = span is not None and span > keep + keep // 8
        if over or before is not None:
            self._prune(before, keep if over else None, sweep=False)

    def _recorded_one(self, entry: int) -> int:
        """After an entry is written: now and then apply retention; tell the watchers."""
        self._recorded += 1
        if self._recorded % 256 == 0:
            self._retain()
        if self.watched:
            self.publish(self.entry(entry).events())
        return entry

    def _flush_peers(self) -> None:
        """Commit what other journals of this root in this process hold open, so a read here sees it."""
        if len(self._peers) == 1:  # only this one (a record runs this per entry: no lock, no list)
            return
        with _PEERS_LOCK:
            peers = list(self._peers)
        for peer in peers:
            if peer is not self:
                peer.flush()

    def _rows(self, where: str, params: Sequence[Any]) -> list[JournalEntry]:
        self._flush_peers()
        with self._lock:
            self._write_waiting(None)
            query = f"SELECT * FROM journal WHERE {where} ORDER BY seq"  # noqa: S608 - conditions of ours, values bound
            rows = self._db.execute(query, params).fetchall()
        grouped: dict[int, list[Any]] = {}
        for row in rows:
            grouped.setdefault(row[1], []).append(row)
        return [_entry(each) for each in grouped.values()]

    def entries(
        self,
        *,
        path: str | None = None,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> list[JournalEntry]:
        where: list[str] = ["1"]
        params: list[Any] = []
        if path is not None and path != ROOT:
            where.append(
                "(path = ? OR (path >= ? AND path < ?) OR from_path = ? OR (from_path >= ? AND from_path < ?))"
            )
            params += [path, path + "/", path + "0"] * 2
            holding = list(ancestors(path))
            if holding:  # a directory moved with ``path`` in it: one row, naming the directory
                marks = ", ".join("?" * len(holding))
                where[-1] = (
                    f"({where[-1]} OR (from_path IS NOT NULL AND after_id = ?"
                    f" AND (path IN ({marks}) OR from_path IN ({marks}))))"
                )
                params += [DIRECTORY, *holding, *holding]
        if isinstance(since, datetime):
            where.append("at > ?")
            params.append(since.timestamp())
        elif since is not None:
            where.append("entry > ?")
            params.append(since)
        if isinstance(actor, Actor):
            for column, wanted in zip(_ACTOR_COLUMNS, actor.fields(), strict=True):
                if wanted:
                    where.append(f"{column} = ?")
                    params.append(wanted)
        elif actor is not None:
            where.append("(actor_name = ? OR actor_session = ? OR actor_call = ?)")
            params += [actor] * 3
        conditions = " AND ".join(where)
        self._flush_peers()
        query = f"SELECT DISTINCT entry FROM journal WHERE {conditions} ORDER BY entry DESC"  # noqa: S608 - as above
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        with self._lock:
            self._write_waiting(None)
            ids = [r[0] for r in self._db.execute(query, params).fetchall()]
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        return list(reversed(self._rows(f"entry IN ({marks})", ids)))

    def entry(self, entry_id: int) -> JournalEntry:
        found = self._rows("entry = ?", [entry_id])
        if not found:
            raise HistoryEntryNotFoundError(f"No journal entry {entry_id}")
        return found[0]

    def prune(self, *, before: datetime | None = None, keep: int | None = None) -> int:
        """Drop entries older than ``before`` and all but the newest ``keep``, and every kept file no entry
        names any more (a sweep of ``objects/``)."""
        return self._prune(before, keep, sweep=True)

    def _prune(self, before: datetime | None, keep: int | None, *, sweep: bool) -> int:
        """As :meth:`prune`; without ``sweep`` only the files the dropped entries named are collected (what
        retention does every 256 entries: a listing of ``objects/`` each time cost more than the writes)."""
        with self._lock:
            self._write_waiting(None)
            doomed: set[int] = set()
            if keep is not None:
                rows = self._db.execute(_OLDER_THAN_NEWEST, [keep])
                doomed.update(r[0] for r in rows)
            if before is not None:
                older = _OLDER_THAN_TIME_EXACT if sweep else _OLDER_THAN_TIME  # retention may leave one for later
                doomed.update(r[0] for r in self._db.execute(older, [before.timestamp()]))
            if not doomed and not sweep:
                return 0
            ids = sorted(doomed)
            marks = ", ".join("?" * len(ids))
            named = [r[0] for r in self._db.execute(_CONTENT_OF.format(marks), ids)] if ids else []
            if ids:
                self._db.execute(f"DELETE FROM journal WHERE entry IN ({marks})", ids)  # noqa: S608 - only placeholders
            if self._db.in_transaction:  # the rows go before the content they name
                self._db.execute("COMMIT")
            if sweep:
                kept = {r[0] for r in self._db.execute(_KEPT_CONTENT)}
                candidates = [item.name for item in self.objects.iterdir() if not item.name.startswith(".")]
            else:
                kept = set()
                for start in range(0, len(named), 500):
                    some = named[start : start + 500]
                    kept.update(r[0] for r in self._db.execute(_STILL_NAMED.format(", ".join("?" * len(some))), some))
                candidates = named
        young = datetime.now(UTC).timestamp() - _OBJECT_GRACE_SECONDS
        for name in candidates:
            if name not in kept:
                self._collect_object(name, young)
        return len(ids)

    def _collect_object(self, name: str, young: float) -> None:
        """Delete kept file ``name`` unless it was kept again since ``young`` (its entry may be on its way).
        It is moved aside first and its time read there: a ``keep`` touching it between our look and the
        delete would otherwise lose it (now it finds nothing and writes the file anew, or it is put back)."""
        aside = f".collect-{name}"
        fd = self._objects_fd
        try:
            if os.stat(name, dir_fd=fd).st_mtime >= young:
                return
            os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
        except FileNotFoundError:
            return
        if os.stat(aside, dir_fd=fd).st_mtime >= young:  # touched just before the move: it stays
            with contextlib.suppress(FileExistsError):
                os.link(aside, name, src_dir_fd=fd, dst_dir_fd=fd)  # unless keep wrote it anew already
        self.collected += 1
        self._touched.clear()  # what this process collected is kept no more
        os.unlink(aside, dir_fd=fd)


def _connect(directory: Path) -> sqlite3.Connection:
    db = sqlite3.connect(directory / "journal.db", timeout=_WAIT_SECONDS, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def _before_fork() -> None:
    """Commit every open group and hold the journals still until the fork is done: a child must never start
    with its parent's transaction (SQLite's locks are per process; a child committing or closing it corrupts
    the journal), and a held lock would never be released in the child."""
    _PEERS_LOCK.acquire()
    for peers in _PEERS.values():
        for journal in list(peers):
            journal._lock.acquire()
            _HELD_AT_FORK.append(journal)
            with contextlib.suppress(sqlite3.Error):  # a closed journal has nothing waiting
                journal._write_waiting(None)
            journal._waiting_lock.acquire()


def _after_fork_in_parent() -> None:
    for journal in _HELD_AT_FORK:
        journal._waiting_lock.release()
        journal._lock.release()
    _HELD_AT_FORK.clear()
    _PEERS_LOCK.release()


def _after_fork_in_child() -> None:
    global _PEERS_LOCK, _FORKED  # noqa: PLW0603 - the parent's lock is held across the fork
    _PEERS_LOCK = threading.Lock()
    _FORKED = True
    for journal in _HELD_AT_FORK:
        journal._forked()
    _HELD_AT_FORK.clear()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


def _commit_open(db: sqlite3.Connection, lock: threading.Lock, waiting: list[_Rows], fds: tuple[int, ...]) -> None:
    """At exit (or when the journal is collected): write what waits, close ``objects/`` and ``journal.busy``."""
    with lock, contextlib.suppress(sqlite3.Error):
        if waiting:
            batch = waiting[:]
            waiting.clear()
            db.execute("BEGIN IMMEDIATE")
            _insert_and_commit(db, batch)
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _commit_later(ref: weakref.ref[HostJournal], wake: threading.Condition) -> None:
    """The thread that writes what waited ``GROUP_SECONDS``. It stays for ``_IDLE_SECONDS`` after the last
    group, waiting on ``wake``: a thread start per group cost more than the group (a start waits for the new
    thread to be scheduled; on a busy machine, 0.5 ms)."""
    idle_since = time.monotonic()
    while True:
        with wake:
            journal = ref()
            if journal is None or journal._objects_fd < 0:  # collected, or closed (closing wrote everything)
                if journal is not None:
                    journal._committer = False
                return
            now = time.monotonic()
            if journal._waiting:
                idle_since = now
                pause = journal._waiting_since + GROUP_SECONDS - now
            else:
                pause = idle_since + _IDLE_SECONDS - now
                if pause <= 0:
                    journal._committer = False
                    return
            if journal._waiting and pause <= 0:
                due = journal
            else:
                due = None
                del journal  # no strong reference while waiting: an abandoned journal can still be collected
                wake.wait(pause)
        if due is not None:  # written outside the waiting lock (the database lock is taken first)
            with contextlib.suppress(sqlite3.Error):  # closed meanwhile; or failed: those entries are lost
                due.flush()
            del due


def _insert_and_commit(db: sqlite3.Connection, batch: list[_Rows]) -> int:
    """In the transaction just begun: number and insert the entries of ``batch``, commit; returns the last
    entry's id. On failure the transaction is rolled back: an entry is never written in part."""
    try:
        seq = db.execute(_NEXT_ENTRY).fetchone()[0]
        shapes: dict[tuple[bool, ...], list[tuple[Any, ...]]] = {}
        entry = seq
        for each in batch:
            entry = seq
            for row in each:
                full = (seq, entry, *row)
                empty: tuple[bool, ...] = (
                    row[2] is None,  # the actor's fields
                    row[3] is None,
                    row[4] is None,
                    row[5] is None,
                    row[7] is None,
                    row[8] is None,
                    row[9] is None,
                    row[12] is None,
                    row[13] is None,
                )
                shapes.setdefault(empty, []).append(full)
                seq += 1
        for empty, rows in shapes.items():  # explicit seq: the order of the inserts does not matter
            sql, pick = _insert_for(empty)
            db.executemany(sql, map(pick, rows))
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise
    return int(entry)


_Rows = tuple[tuple[Any, ...], ...]
"""One entry's rows, without their ``seq`` and entry id (given when written)."""


def _rows(operation: str, changes: Sequence[Any], actor: Actor, undoes: int | None, detail: str | None) -> _Rows:
    # whole microseconds, as datetime.now(UTC).timestamp() gives them (a fifth of its cost): an entry's ``time``
    # is exactly its ``at``
    stamp = time.time_ns() // 1000 / 1e6
    fields = actor.fields()
    if len(changes) == 1:  # most entries: no generator
        c = changes[0]
        row = (stamp, operation, *fields, c.path, c.from_path, c.before, c.after, c.size_before, c.size_after)
        return ((*row, undoes, detail),)
    return tuple(
        (stamp, operation, *fields, c.path, c.from_path, c.before, c.after, c.size_before, c.size_after, undoes, detail)
        for c in changes
    )


def _entry(rows: Sequence[Any]) -> JournalEntry:
    first = rows[0]
    return JournalEntry(
        int(first[1]),
        datetime.fromtimestamp(first[2], UTC),
        Actor(first[4], first[5], first[6], first[7]),
        first[3],
        tuple(Change(r[8], r[10], r[11], int(r[12]), int(r[13]), r[9]) for r in rows),
        first[14],
        first[15],
    )
