"""``ObjectJournal``: an object store's journal, one object per entry under the snapshot store's ``journal/``.

An object store has no transaction, so the entry is written *ahead* of the change and settled after it:

1. ``PUT journal/<key>`` (``If-None-Match: *`` where the store enforces it: this claims the entry id) with
   state ``pending``: the actor, the operation and, per path, the content id before and after, and where the
   content before is kept for undo (a version id in a bucket that keeps versions, else the snapshot store's
   content-addressed ``blobs/``, copied there beside this ``PUT`` where the store lacks it);
2. the change itself (once both requests of step 1 succeeded);
3. ``PUT journal/<key>`` again (``If-Match`` on the pending version's ``ETag``) with state ``done``, or
   ``dropped`` when the change failed and changed nothing.

Readers show ``done`` entries only. What a crash (a killed writer, a lost connection) can leave:

- an entry still ``pending`` whose change was not made (killed before step 2), was made (killed before step
  3), or was made in part (a tree copied, moved or deleted in several requests, an operation of several
  primitives, killed in the middle). Never a change without its entry: the entry is stored first; never a
  ``done`` entry without its change: only a change that happened is confirmed;
- a copy in ``blobs/`` that no entry names (killed while step 1's ``PUT`` was refused or in flight): an extra
  copy of some content, which the next write that replaces that content reuses; nothing collects it.

A pending entry is *settled* by the first reader that meets it once it is older than ``grace`` (younger, it is
taken for a change in progress and not shown), or at once by the process that wrote it when its change failed:
each path is compared with its before and after. One that holds its after took effect; one that holds its
before did not; one that holds neither (changed again since) is decided by the next entry that touched it (its
before is this entry's after: it took effect, else not). The entry is rewritten ``done`` with the changes that
took effect (a move of a directory stopped part way becomes the files it did move or copy), or ``dropped``
when none did. The rewrite is conditional on the pending version, so a writer slower than ``grace`` and a
reader settling its entry cannot both win: the writer that loses records what its change did anew (the one
way to leave a change without its entry is a crash in that moment, after a stall longer than ``grace``
between steps 1 and 2 that let a reader drop the entry as never made). (Where the
store enforces no ``If-Match`` that race is not arbitrated; ``grace`` is then what keeps readers off entries
in progress.) A read-only filesystem settles in memory and stores nothing. Replaying the ``done`` entries from
empty so arrives at exactly the files present.

Why the entry is confirmed in place rather than beside a ``pending/`` marker: a marker costs one more request
per write (its ``PUT`` must precede the entry's, its ``DELETE`` follow the change), and a reader learns an
entry's state from the body it reads anyway. Where the snapshot store's bucket keeps versions, the pending
version an entry leaves behind is deleted with the entry by retention.

Entry ids: where the store enforces ``If-None-Match``, ids are dense and claimed by the entry's own ``PUT``
(the next id after the newest this process saw; on a conflict one ``LIST`` learns the newest), so they
increase across processes in the order the changes were begun and cost no extra request. They never repeat:
retention keeps the newest entry's object (as a tombstone, state ``dropped``, when it drops the entry itself),
and every entry's object until the store's newest is :data:`TOMBSTONE_AGE` newer than it (the store's own
clock), while a process numbers on from a newest id it listed for :data:`ID_TRUST` only. So a process whose
next id another process has meanwhile used and pruned finds the key still taken, and lists again. Elsewhere nothing
can arbitrate a claim, so an id is the time in milliseconds times 4,096 plus 12 random bits (kept below 2⁵³
for JSON readers): ordered by the writers' clocks, unique but for two writers in the same millisecond
drawing the same bits. Keys are ``10¹⁶ - 1 - id`` in 16 digits, so a ``LIST`` returns the newest first.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from workspacefs.backends._objects._client import ObjectClient, ObjectInfo, PreconditionFailed
from workspacefs.errors import ConcurrentChangeError, HistoryEntryNotFoundError, ReadOnlyError
from workspacefs.history import DIRECTORY, Actor, Change, Journal, JournalEntry, entry_matches

__all__ = [
    "CARRIED",
    "DEFAULT_MAX_ENTRIES",
    "NOTHING_LATER",
    "Draft",
    "ObjectJournal",
    "Record",
    "Ref",
    "Step",
]

DEFAULT_MAX_ENTRIES = 10_000
"""Entries a journal keeps by default (an eighth more between two drops)."""


def _uptime() -> float:
    """Seconds on a clock that never goes back and, unlike ``time.monotonic`` on Linux, counts time suspended
    (a laptop asleep for an hour must not trust an id it listed before)."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)

JOURNAL_GRACE = timedelta(minutes=10)
"""A pending entry younger than this is taken to be a change in progress in another process, not settled."""
_DIGITS = 16
_TOP = 10**_DIGITS - 1
_MAX_BODY = 256 * 1024 * 1024
_BATCH = 64
"""Entry bodies fetched at once (concurrently) while reading."""
TOMBSTONE_AGE = timedelta(minutes=5)
"""How long retention keeps a dropped entry's object (a tombstone, by the store's clock): far longer than
:data:`ID_TRUST`, so no process can still be numbering on from before that entry was written."""
ID_TRUST = timedelta(seconds=30)
"""How long a process numbers entries on from the newest id it listed before it lists again (one ``LIST``)."""
_ATTEMPTS = 100
_RETAIN_EVERY = 256

State = Literal["pending", "done", "dropped"]
Ref = tuple[str, ...]
"""What an entry keeps for undo: ``("blob", content id)`` or ``("version", key, version id)``."""
NOTHING_LATER = "\0nothing later"
"""What :meth:`ObjectJournal.next_before` says when no later entry touched the path."""
CARRIED = "\0carried to "
"""What :meth:`ObjectJournal.next_before` says, followed by the path's new name, when a later entry moved a
directory above the path and none touched it after: what is there now is what the path held then."""


@dataclass(frozen=True, slots=True)
class Step:
    """One change of an entry, with where its content before is kept (``version``: the id of that version of
    the path's object; ``None``: the blob of ``change.before``) and, for a directory moved file by file, the
    files moved (``plan``: relative path, content id, size) and its subdirectories (content id ``DIRECTORY``,
    size 0: an empty one is named by no file) so a half-made move can be settled exactly."""

    change: Change
    version: str | None = None
    plan: tuple[tuple[str, str, int], ...] = ()
    keep: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    """What keeps the content before, where that is still to do (a copy into the blobs): done by the writer
    beside the entry's first ``PUT``, before the change. Never stored."""

    def ref(self, key_of: Callable[[str], str]) -> Ref | None:
        """The blob or version this step keeps for undo (``None``: nothing, the path held no file)."""
        before = self.change.before
        if before is None or before == DIRECTORY:
            return None
        return ("blob", before) if self.version is None else ("version", key_of(self.change.path), self.version)


@dataclass(frozen=True, slots=True)
class Record:
    """An entry as stored: its steps and state, and the ``ETag`` of the stored version."""

    entry_id: int
    at: float
    actor: Actor
    operation: str
    steps: tuple[Step, ...]
    undoes: int | None
    detail: str | None
    state: State
    etag: str = ""

    def entry(self) -> JournalEntry:
        return JournalEntry(
            self.entry_id,
            datetime.fromtimestamp(self.at, UTC),
            self.actor,
            self.operation,
            tuple(step.change for step in self.steps),
            self.undoes,
            self.detail,
        )

    def refs(self, key_of: Callable[[str], str]) -> set[Ref]:
        """The blobs and versions this entry keeps for undo."""
        return {ref for step in self.steps if (ref := step.ref(key_of)) is not None}


@dataclass(slots=True)
class Draft:
    """An entry being written by this process: what it will say, and how far its changes got."""

    operation: str
    actor: Actor
    undoes: int | None = None
    detail: str | None = None
    steps: list[Step] = field(default_factory=list)
    applied: list[bool | None] = field(default_factory=list)
    """Per step: made (``True``), or unknown (``None``: its primitive failed; settled by the state)."""
    at: float = field(default_factory=time.time)
    entry_id: int | None = None
    etag: str = ""

    def record(self, state: State, steps: Sequence[Step] | None = None) -> Record:
        assert self.entry_id is not None
        chosen = tuple(replace(step, keep=None) for step in (self.steps if steps is None else steps))
        return Record(self.entry_id, self.at, self.actor, self.operation, chosen, self.undoes, self.detail, state)


Resolve = Callable[[Record, Callable[[str], str | None]], list[Step]]
"""The filesystem's judgement of a pending record: the steps that took effect (given, per path, the ``before``
of the next entry that touched it, or :data:`NOTHING_LATER`)."""
Parallel = Callable[[Callable[[Any], Any], Iterable[Any]], list[Any]]
NamedSince = Callable[[set[Ref], Mapping[int, str], frozenset[uuid.UUID]], set[Ref]]
"""Of these refs, those an entry stored since the entries seen (id to ``ETag``) or a snapshot not among those
listed names (looked at after the age check, before the delete)."""
Release = Callable[[set[Ref], Mapping[int, str], frozenset[uuid.UUID]], None]
"""Delete these refs, then copy back a blob that an entry or snapshot stored since those seen names."""


def _key_part(entry_id: int) -> str:
    return f"{_TOP - entry_id:0{_DIGITS}d}"


def _encode(record: Record) -> bytes:
    changes = [
        [c.path, c.before, c.after, c.size_before, c.size_after, c.from_path] for c in (s.change for s in record.steps)
    ]
    body: dict[str, Any] = {
        "format": 1,
        "state": record.state,
        "id": record.entry_id,
        "at": record.at,
        "operation": record.operation,
        "actor": json.loads(record.actor.to_json()),
        "undoes": record.undoes,
        "detail": record.detail,
        "changes": changes,
    }
    versions = {str(i): s.version for i, s in enumerate(record.steps) if s.version is not None}
    plans = {str(i): [list(item) for item in s.plan] for i, s in enumerate(record.steps) if s.plan}
    if versions:
        body["versions"] = versions
    if plans:
        body["plans"] = plans
    return json.dumps(body, separators=(",", ":")).encode()


def _decode(data: bytes | bytearray, etag: str) -> Record:
    body = json.loads(data)
    versions = body.get("versions") or {}
    plans = body.get("plans") or {}
    steps = tuple(
        Step(
            Change(str(c[0]), c[1], c[2], int(c[3]), int(c[4]), c[5]),
            versions.get(str(i)),
            tuple((str(p[0]), str(p[1]), int(p[2])) for p in plans.get(str(i), ())),
        )
        for i, c in enumerate(body["changes"])
    )
    return Record(
        int(body["id"]),
        float(body["at"]),
        Actor.from_json(json.dumps(body.get("actor") or {})),
        str(body["operation"]),
        steps,
        None if body.get("undoes") is None else int(body["undoes"]),
        body.get("detail"),
        body["state"],
        etag,
    )


def _left_over(step: Step, held: set[Step]) -> list[Step]:
    """What of a draft's ``step`` a reader's settled entry (``held``) does not record: nothing, the step, or for
    a move settled between its copy and its delete the rest of it (see :func:`_moved_rest`). Recording the whole
    move again claimed the destination changed twice and never said the source went."""
    if step in held:
        return []
    change = step.change
    if change.from_path is None:
        return [step]
    if change.after == DIRECTORY:
        return _moved_rest(step, held)
    copied = Step(replace(change, from_path=None), step.version)
    if copied in held:  # a file move settled as a copy: its source's delete is what is left
        return [Step(Change(change.from_path, change.after, None, change.size_after, 0))]
    return [step]


def _moved_rest(step: Step, held: set[Step]) -> list[Step]:
    """What a reader's settled entry (``held``) lacks of a directory move it settled half way (as the directory
    made, the files it found copied or moved): the directories and files moved since, the deletes of the sources
    it saw copied, and the source directories' removal (children first), empty ones included (the plan names
    them), as a move nobody interrupted carries them. ``[step]`` if it was not settled so."""
    change = step.change
    src, dst = change.from_path, change.path
    assert src is not None
    if Step(Change(dst, change.before, DIRECTORY)) not in held:
        return [step]
    made: list[Step] = []
    removed: list[Step] = []
    sources = {src}
    for relative, content_id, size in step.plan:
        target, source = f"{dst}/{relative}", f"{src}/{relative}"
        directory = content_id == DIRECTORY
        parents = relative.split("/") if directory else relative.split("/")[:-1]
        for depth in range(1, len(parents) + 1):
            sources.add(f"{src}/{'/'.join(parents[:depth])}")
            made_dir = Step(Change(f"{dst}/{'/'.join(parents[:depth])}", None, DIRECTORY))
            if made_dir not in held and made_dir not in made:
                made.append(made_dir)
        if directory:
            continue
        if Step(Change(target, None, content_id, 0, size, source)) in held:
            continue  # settled as moved
        if Step(Change(target, None, content_id, 0, size)) in held:
            removed.append(Step(Change(source, content_id, None, size, 0)))  # settled as copied: its delete is left
        else:
            made.append(Step(Change(target, None, content_id, 0, size, source)))  # moved after the reader looked
    removed += [gone for d in sources if (gone := Step(Change(d, DIRECTORY, None))) not in held]
    made.sort(key=lambda each: each.change.path)
    removed.sort(key=lambda each: each.change.path, reverse=True)
    return made + removed


class ObjectJournal(Journal):
    """The entries of one workspace, kept under ``prefix`` (``bucket/.../journal/``) of the snapshot store."""

    def __init__(
        self,
        client: ObjectClient,
        prefix: str,
        *,
        key_of: Callable[[str], str],
        resolve: Resolve,
        parallel: Parallel,
        read_only: bool,
        snapshot_refs: Callable[[], tuple[set[Ref], frozenset[uuid.UUID]]],
        release: Release,
        fresh: Callable[[set[Ref], datetime], set[Ref]],
        named_since: NamedSince,
        keep_copied: Callable[[Sequence[tuple[str, str]]], None],
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        super().__init__()
        self._client = client
        self._prefix = prefix
        self._key_of = key_of
        self._resolve = resolve
        self._parallel = parallel
        self._read_only = read_only
        self._snapshot_refs = snapshot_refs
        self._release = release
        self._fresh = fresh
        self._named_since = named_since
        self._keep_copied = keep_copied
        self.max_entries = max_entries
        self.grace = JOURNAL_GRACE
        self.retain_every = _RETAIN_EVERY
        self._lock = threading.Lock()
        self.tombstone_age = TOMBSTONE_AGE
        self.id_trust = ID_TRUST
        self._next_id: int | None = None
        self._listed_at = 0.0
        """When (:func:`_uptime`) this process last listed the newest id."""
        self._last_id = 0
        self._settled: dict[int, Record] = {}
        """Done and dropped records (they never change again), by id: read once per process."""
        self._writing: set[int] = set()
        """Entries this process is writing now (never settled by its own readers)."""
        self._failed: set[int] = set()
        """Entries of this process whose change failed: settled at once, no grace."""
        self._recorded = 0
        self._store_versioned: bool | None = None

    def _remember(self, entry_id: int, record: Record) -> None:
        """Cache a settled record (the caller holds ``_lock``): past twice ``max_entries`` (and 100), the
        oldest quarter goes, so a long-lived process never keeps every entry it ever saw (they are read again
        if asked for)."""
        self._settled[entry_id] = record
        limit = 2 * self.max_entries + 100
        if len(self._settled) > limit:
            for old in sorted(self._settled)[: len(self._settled) - limit * 3 // 4]:
                del self._settled[old]

    def key(self, entry_id: int) -> str:
        return self._prefix + _key_part(entry_id)

    # --- writing --------------------------------------------------------------------------------------

    def _allocate(self) -> int:
        with self._lock:
            if not self._client.conditional_writes:  # nothing can arbitrate a claim: a time-ordered id
                stamp = (int(time.time() * 1000) << 12) | int.from_bytes(os.urandom(2), "big") & 0xFFF
                self._last_id = max(self._last_id + 1, stamp)
                return self._last_id
            now = _uptime()
            if self._next_id is None or now - self._listed_at >= self.id_trust.total_seconds():
                self._listed_at = now  # taken before the LIST: its answer is at least this fresh
                self._next_id = self._newest() + 1
            entry_id = self._next_id
            self._next_id += 1
            return entry_id

    def _newest(self) -> int:
        """The newest id in the store (one ``LIST`` of one key)."""
        for item in self._client.list(self._prefix, recursive=True, limit=1):
            if isinstance(item, ObjectInfo):
                found = self._id_of_key(item.key)
                if found is not None:
                    return found
        return 0

    def _id_of_key(self, key: str) -> int | None:
        name = key[len(self._prefix) :]
        return _TOP - int(name) if len(name) == _DIGITS and name.isdigit() else None

    def begin(self, draft: Draft) -> None:
        """Claim an id and store the draft as ``pending`` (before its first change is made)."""
        for _ in range(_ATTEMPTS):
            draft.entry_id = self._allocate()
            body = _encode(draft.record("pending"))
            try:
                info = self._client.put(self.key(draft.entry_id), body, if_none_match=self._client.conditional_writes)
            except PreconditionFailed:
                with self._lock:
                    self._next_id = None  # another process took it: learn the newest again
                continue
            draft.etag = info.etag
            with self._lock:
                self._writing.add(draft.entry_id)
            return
        raise ConcurrentChangeError("", "Could not claim a journal entry id; try again")

    def extend(self, draft: Draft) -> None:
        """Store the draft again, still ``pending``, with the steps added since (before they are made)."""
        if draft.entry_id is None:
            self.begin(draft)
            return
        if not self._rewrite(draft, draft.record("pending")):
            self._taken_over(draft)
            self.begin(draft)

    def _rewrite(self, draft: Draft, record: Record) -> bool:
        """Replace the stored pending version with ``record``; ``False`` if someone settled it meanwhile."""
        assert draft.entry_id is not None
        try:
            info = self._client.put(
                self.key(draft.entry_id),
                _encode(record),
                if_match=draft.etag if self._client.conditional_writes else None,
            )
        except (PreconditionFailed, FileNotFoundError):  # settled by a reader, or settled and pruned since
            return False
        draft.etag = info.etag
        return True

    def _taken_over(self, draft: Draft) -> None:
        """A reader settled this draft's entry while the change was slower than ``grace``: keep only the steps
        that entry does not hold, to be recorded anew."""
        assert draft.entry_id is not None
        with self._lock:
            self._writing.discard(draft.entry_id)
        stored = self._fetch(draft.entry_id)
        held = set(stored.steps) if stored is not None and stored.state == "done" else set()
        kept: list[tuple[Step, bool | None]] = []
        copied: list[tuple[str, str]] = []
        for step, made in zip(draft.steps, draft.applied, strict=True):
            for left in _left_over(step, held):
                kept.append((left, made))
                source, before = step.change.from_path, left.change.before
                if source is not None and left.change.after is None and before not in (None, DIRECTORY):
                    copied.append((step.change.path + left.change.path[len(source) :], str(before)))
        if copied:  # a source settled as copied: its delete's undo needs its content, which its copy holds
            self._keep_copied(copied)
        draft.steps = [step for step, _ in kept]
        draft.applied = [made for _, made in kept]
        draft.entry_id = None

    def abandon(self, draft: Draft) -> None:
        """The draft could not be settled (the store failed us): any reader of this process settles it by the
        state at once, not after the grace period."""
        if draft.entry_id is not None:
            with self._lock:
                self._writing.discard(draft.entry_id)
                self._failed.add(draft.entry_id)

    def finish(self, draft: Draft, steps: Sequence[Step]) -> Record | None:
        """Settle a draft whose changes are over: ``done`` with ``steps`` (those that took effect), or
        ``dropped`` when none did. Returns the done record (published to watchers)."""
        if draft.entry_id is None:
            if not steps:
                return None
            draft.steps, draft.applied = list(steps), [True] * len(steps)
            self.begin(draft)
        assert draft.entry_id is not None
        record = draft.record("done", steps) if steps else draft.record("dropped")
        if not self._rewrite(draft, record):
            applied = set(steps)
            draft.applied = [step in applied for step in draft.steps]
            self._taken_over(draft)
            remaining = [step for step, made in zip(draft.steps, draft.applied, strict=True) if made]
            return self.finish(draft, remaining) if remaining else None
        record = replace(record, etag=draft.etag)
        with self._lock:
            self._writing.discard(record.entry_id)
            self._failed.discard(record.entry_id)
            self._remember(record.entry_id, record)
            self._recorded += 1
            retain = self._recorded % self.retain_every == 0
        if record.state != "done":
            return None
        if self.watched:
            self.publish(record.entry().events())
        if retain:
            self._retain()
        return record

    def _retain(self) -> None:
        """Retention's periodic pass: when the journal holds an eighth more than ``max_entries`` (tombstones not
        counted: they stay a while whatever is pruned), prune."""
        threshold = self.max_entries + self.max_entries // 8
        listed = dict(self._listing())
        if len(listed) <= threshold:  # under it with the tombstones counted: no entry needs reading
            return
        records = self._load(list(listed), {entry_id: info.etag for entry_id, info in listed.items()})
        if sum(1 for r in records if r is None or r.state != "dropped") > threshold:
            self.prune(keep=self.max_entries)

    # --- reading --------------------------------------------------------------------------------------

    def _ids(self, *, after: int | None = None, page: int = 1000) -> Iterator[int]:
        """Every entry id in the store, newest first (down to, not including, ``after``)."""
        return (entry_id for entry_id, _ in self._listing(after=after, page=page))

    def _listing(self, *, after: int | None = None, page: int = 1000) -> Iterator[tuple[int, ObjectInfo]]:
        """Every entry object in the store with its id, newest first (down to, not including, ``after``):
        listed a page at a time, the first of ``page`` keys (a store renders every key it lists: the newest
        hundred entries should not cost a listing of ten thousand), each next one four times larger, up to
        1,000."""
        last: str | None = None
        while True:
            listed = 0
            for item in self._client.list(self._prefix, recursive=True, limit=page, start_after=last):
                listed += 1
                if not isinstance(item, ObjectInfo):
                    continue
                last = item.key
                entry_id = self._id_of_key(item.key)
                if entry_id is None:
                    continue
                if after is not None and entry_id <= after:
                    return
                yield entry_id, item
            if listed < page:
                return
            page = min(4 * page, 1000)

    def _fetch(self, entry_id: int) -> Record | None:
        """The stored record (``None``: no such object)."""
        try:
            data, info = self._client.get(self.key(entry_id), 0, _MAX_BODY)
        except FileNotFoundError:
            return None
        return _decode(data, info.etag)

    def _load(self, ids: Sequence[int], etags: Mapping[int, str] | None = None) -> list[Record | None]:
        """Records by id: settled ones from memory (where ``etags``, as listed, still name that version: retention
        turns a pruned entry into a tombstone in place), the others fetched concurrently."""
        with self._lock:
            known = {entry_id: self._settled.get(entry_id) for entry_id in ids}
        if etags is not None:
            for entry_id, record in known.items():
                if record is not None and record.etag != etags.get(entry_id, record.etag):
                    known[entry_id] = None
        missing = [entry_id for entry_id, record in known.items() if record is None]
        fetched = self._parallel(self._fetch, missing)
        with self._lock:  # settled ones are read once: a later tombstone shows by its listed ETag
            for entry_id, record in zip(missing, fetched, strict=True):
                known[entry_id] = record
                if record is not None and record.state != "pending":
                    self._remember(entry_id, record)
        return [known[entry_id] for entry_id in ids]

    def _records(
        self, *, after: int | None = None, batch: int = _BATCH, held: list[bool] | None = None
    ) -> Iterator[Record]:
        """Every record newest first, pending ones settled where they are due (and shown only if done). Once a
        change still in progress is met, older pending entries wait too: what it found at their paths is not
        known yet, and the store may already show its change (``held[0]`` then says so)."""
        newer: list[Record] = []
        waiting = False
        listing = self._listing(after=after, page=batch)
        while True:
            chunk = dict(item for _, item in zip(range(batch), listing, strict=False))
            if not chunk:
                return
            batch = _BATCH
            for stored in self._load(list(chunk), {entry_id: info.etag for entry_id, info in chunk.items()}):
                if stored is not None and stored.state == "pending" and (waiting or not self._due(stored)):
                    waiting = True
                    if held is not None:
                        held[0] = True
                    continue
                record = self._settle(stored, newer) if stored is not None and stored.state == "pending" else stored
                if record is None:
                    continue  # pruned meanwhile, or a change still in progress
                if record.state == "done":
                    newer.append(record)
                yield record

    def _due(self, record: Record) -> bool:
        with self._lock:
            if record.entry_id in self._writing:
                return False
            if record.entry_id in self._failed:
                return True
        return time.time() - record.at >= self.grace.total_seconds()

    def _settle(self, record: Record, newer: Sequence[Record] | None) -> Record | None:
        """A pending record as it now stands: settled if it is due (stored so, where this process may write),
        else ``None`` (a change still in progress; shown once it is confirmed)."""
        if not self._due(record):
            return None
        steps = self._resolve(record, self.next_before(record.entry_id, newer))
        settled = replace(record, steps=tuple(steps), state="done") if steps else replace(record, state="dropped")
        if not self._read_only:
            try:
                info = self._client.put(
                    self.key(record.entry_id),
                    _encode(settled),
                    if_match=record.etag if self._client.conditional_writes else None,
                )
            except FileNotFoundError:  # settled and pruned by another process meanwhile
                return None
            except PreconditionFailed:  # its writer (or another reader) settled it first
                stored = self._fetch(record.entry_id)
                if stored is None or stored.state == "pending":
                    return None
                settled = stored
            else:
                settled = replace(settled, etag=info.etag)
            with self._lock:
                self._remember(record.entry_id, settled)
                self._failed.discard(record.entry_id)
        return settled if settled.state == "done" else None

    def next_before(self, entry_id: int, newer: Sequence[Record] | None = None) -> Callable[[str], str | None]:
        """Per path, what the first done entry after ``entry_id`` that touched it found there (its ``before``;
        for a move away from it, what it moved), or :data:`NOTHING_LATER`. ``newer``: those entries, newest
        first, where the caller has read them already (else they are read on first use)."""
        loaded: list[Sequence[Record]] = [] if newer is None else [newer]

        def found(path: str) -> str | None:
            if not loaded:
                loaded.append([r for r in self._records(after=entry_id) if r.state == "done"])
            current = path
            for each in reversed(loaded[0]):  # oldest first
                if each.entry_id <= entry_id:
                    continue
                for step in each.steps:
                    change = step.change
                    if change.path == current:
                        return change.before
                    if change.from_path == current:
                        return change.after
                    if change.from_path is not None and current.startswith(change.from_path + "/"):
                        current = change.path + current[len(change.from_path) :]  # carried by a directory move
            return NOTHING_LATER if current == path else CARRIED + current

        return found

    def entries(
        self,
        *,
        path: str | None = None,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> list[JournalEntry]:
        after = since if isinstance(since, int) else None
        found: list[JournalEntry] = []
        if limit == 0:
            return found
        first = _BATCH if limit is None or path is not None or actor is not None else min(_BATCH, limit + 2)
        for record in self._records(after=after, batch=first):
            if record.state != "done":
                continue
            entry = record.entry()
            if entry_matches(entry, path=path, since=since, actor=actor):
                found.append(entry)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def record_of(self, entry_id: int, *, checked: bool = False) -> Record:
        """The done record of an entry (``HistoryEntryNotFoundError`` if none). ``checked``: a record this
        process settled is first checked against the store (one ``HEAD``): another process's retention may
        have pruned it since, and released what it kept."""
        with self._lock:
            record = self._settled.get(entry_id)
        if record is not None and checked:
            info = self._client.head(self.key(entry_id))
            if info is None or info.etag != record.etag:
                with self._lock:
                    self._settled.pop(entry_id, None)
                record = None
        if record is None:
            record = self._fetch(entry_id)
            if record is not None and record.state == "pending":
                held = [False]
                newer = [r for r in self._records(after=entry_id, held=held) if r.state == "done"]
                record = None if held[0] else self._settle(record, newer)
            elif record is not None:
                with self._lock:
                    self._remember(entry_id, record)
        if record is None or record.state != "done":
            raise HistoryEntryNotFoundError(f"No journal entry {entry_id}")
        return record

    def entry(self, entry_id: int) -> JournalEntry:
        return self.record_of(entry_id, checked=True).entry()

    def holding(self) -> tuple[set[Ref], dict[int, str]]:
        """Every blob and version an entry keeps (pending ones too: their change may be on its way), and the
        entries judged, by id with the ``ETag`` read (for :meth:`stored_since`)."""
        held: set[Ref] = set()
        seen: dict[int, str] = {}
        for record in self._load(list(self._ids())):
            if record is not None:
                seen[record.entry_id] = record.etag
                if record.state != "dropped":
                    held |= record.refs(self._key_of)
        return held, seen

    def stored_since(self, seen: Mapping[int, str]) -> list[Record]:
        """The entries stored or stored again (a pending one extended) since ``seen`` (id to ``ETag``) was read,
        but not dropped ones: what a change begun meanwhile keeps. One listing; only those entries are read."""
        listed = {entry_id: info.etag for entry_id, info in self._listing()}
        changed = [entry_id for entry_id, etag in listed.items() if seen.get(entry_id) != etag]
        return [r for r in self._load(changed, listed) if r is not None and r.state != "dropped"]

    # --- retention ------------------------------------------------------------------------------------

    def prune(self, *, before: datetime | None = None, keep: int | None = None) -> int:
        """Drop the done entries older than ``before`` and all but the newest ``keep`` (and the dropped ones),
        and release the blobs and versions only they kept: not one a kept entry or a snapshot still names, nor a
        young blob or a current version, nor one an entry or snapshot stored after those were read names (looked
        at again after the age check; after the delete, such a blob is copied back, as a snapshot's deletion
        does). Returns how many entries went."""
        if self._read_only:
            raise ReadOnlyError("/")
        listed = dict(self._listing())
        ids = list(listed)
        etags = {entry_id: info.etag for entry_id, info in listed.items()}
        for record in self._load(ids, etags):  # settle what is due first: a pending entry is never dropped unseen
            if record is not None and record.state == "pending":
                self._settle(record, None)
        records = [r for r in self._load(ids, etags) if r is not None]
        seen = {r.entry_id: r.etag for r in records}  # as judged: an entry stored since is looked at again
        visible = [r for r in records if r.state == "done"]
        doomed = {r.entry_id for r in visible[keep:]} if keep is not None else set()
        if before is not None:
            doomed |= {r.entry_id for r in visible if r.at < before.timestamp()}
        newest = max(ids, default=0)
        now = max((info.modified for info in listed.values()), default=None)  # the store's clock, not ours
        young = {i for i, info in listed.items() if now is not None and now - info.modified < self.tombstone_age}
        young.add(newest)  # the ids' high-water mark: a new process numbers on from it
        dropped = {r.entry_id for r in records if r.state == "dropped"}
        deletable = (doomed | dropped) - young
        if not doomed and not deletable:
            return 0
        gone = doomed | dropped
        held = {ref for r in records if r.entry_id in gone for ref in r.refs(self._key_of)}
        kept = {ref for r in records if r.entry_id not in gone for ref in r.refs(self._key_of)}
        released = held - kept
        snapshots: frozenset[uuid.UUID] = frozenset()
        if released:
            named, snapshots = self._snapshot_refs()
            released -= named
        if released and now is not None:  # a change in another process, not listed here, may just have kept one
            recent = self._fresh(released, now - self.tombstone_age)
            released -= recent
            holding = {r.entry_id for r in records if r.entry_id in gone and r.refs(self._key_of) & recent}
            young |= holding  # stays (as a tombstone): its refs are judged again by a later prune
            deletable -= holding
        if released:  # looked at again after the age check: an entry or a snapshot stored since may name one
            released -= self._named_since(released, seen, snapshots)
        tombstones = [replace(r, state="dropped") for r in records if r.entry_id in doomed & young]
        for record, info in zip(tombstones, self._parallel(self._bury, tombstones), strict=True):
            with self._lock:  # this process reads it as a tombstone from now on; the others by its new ETag
                self._remember(record.entry_id, replace(record, etag=info.etag))
        self._delete_entries(sorted(deletable))
        with self._lock:
            for entry_id in deletable:
                self._settled.pop(entry_id, None)
        if released:
            self._release(released, seen, snapshots)
        return len(doomed)

    def _bury(self, record: Record) -> ObjectInfo:
        """Store a dropped entry as its tombstone: the entry leaves history, its id stays taken."""
        return self._client.put(self.key(record.entry_id), _encode(record))

    def _delete_entries(self, ids: Sequence[int]) -> None:
        """Delete entry objects; where the store's bucket keeps versions, every version of them and the
        superseded (pending) versions of the entries kept."""
        if not ids:
            return
        keys = {self.key(entry_id) for entry_id in ids}
        if self._store_versioned is None:
            self._store_versioned = self._client.versioning(self._prefix.partition("/")[0])
        if not self._store_versioned:
            self._client.delete(sorted(keys))
            return
        doomed = [
            (info.key, info.version_id) for info in self._client.latest_versions(self._prefix) if info.key in keys
        ]
        doomed += [(info.key, info.version_id) for info, _ in self._client.superseded_versions(self._prefix)]
        self._client.delete_versions((key, version) for key, version in doomed if version is not None)
