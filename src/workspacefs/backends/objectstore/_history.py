"""How ``ObjectStoreFilesystem`` journals its changes: each primitive says what it is about to change, first.

A primitive learns what it will change from the requests it makes anyway (the target check's listing, the
``HEAD`` of a file it replaces), keeps the content it replaces (a version id where the bucket keeps versions,
else a copy into the snapshot store's ``blobs/`` unless one is there), and wraps its requests in
:meth:`ObjectHistory._recording`: the entry is stored ``pending`` before them and settled after (see
``_journal.py``). An operation of several primitives (a move over a tree, a restore, an undo) is one entry,
stored again before each primitive adds to it. Settling judges a step by what its path holds now
(:meth:`ObjectHistory._resolve`).
"""

from __future__ import annotations

import contextlib
import math
import threading
import uuid
from abc import abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TypeVar

from workspacefs.backends._history import Scope
from workspacefs.backends._objects._client import ObjectClient, ObjectInfo, PreconditionFailed
from workspacefs.backends._snapshotting import SnapshotMixin
from workspacefs.backends.objectstore._journal import (
    CARRIED,
    NOTHING_LATER,
    Draft,
    ObjectJournal,
    Record,
    Ref,
    Step,
    _uptime,
)
from workspacefs.backends.objectstore._layout import Layout, Tree, vanished
from workspacefs.backends.objectstore._manifests import ManifestStore
from workspacefs.backends.objectstore._streams import FIRST_BLOCK_BYTES, AroundCommit, ObjectReader
from workspacefs.errors import ConcurrentChangeError, PreconditionFailedError, SnapshotNotFoundError
from workspacefs.history import DIRECTORY, Change, JournalEntry, current_actor
from workspacefs.protocol import ByteReader
from workspacefs.streams import StreamReader

__all__ = ["Kept", "ObjectHistory"]

T = TypeVar("T")
R = TypeVar("R")

Kept = tuple[str, int, str | None]
"""A file about to be replaced: its content id, size, and the version that keeps it (``None``: a blob)."""
Keep = Callable[[], None]


_REFUSED = (FileExistsError, PreconditionFailedError)
"""What a one-file write raises when the store refused its conditional request: it changed nothing."""


class _Changed(Exception):  # noqa: N818 - a signal to list again, never seen by callers
    """A file changed between the listing and the copy of its content."""


class ObjectHistory(SnapshotMixin):
    """The journaling half of ``ObjectStoreFilesystem`` (which sets the attributes below)."""

    _client: ObjectClient
    _layout: Layout
    _store: ManifestStore
    _blobs_seen: dict[str, float]
    """Content ids whose blob this process made fresh, and when (:func:`_uptime`)."""
    """Content ids this process knows the store holds (so a snapshot asks only about new content)."""
    _blobs_lock: threading.Lock
    _history_on: bool
    _changes: ObjectJournal
    _drafts: dict[str, Draft]
    _drafts_lock: threading.Lock
    _version_ids: dict[tuple[str, str], str]
    """Version ids of object versions this process wrote, by key and ``ETag``."""

    @abstractmethod
    def _tree(self, base: str) -> Tree:
        """The workspace below ``base`` from one recursive listing."""

    @abstractmethod
    def _versions_kept(self) -> bool:
        """True if the bucket keeps versions (snapshots then name versions instead of copying content)."""

    @abstractmethod
    def _ids_of(self, infos: Sequence[ObjectInfo]) -> list[str]:
        """Content ids of many objects."""

    @abstractmethod
    def _id_of(self, info: ObjectInfo) -> str:
        """The content id of one object version."""

    @abstractmethod
    def _known_id(self, info: ObjectInfo) -> str | None:
        """The content id of an object version where this process knows it without asking."""

    @abstractmethod
    def _parallel(self, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``work`` over every item, several requests in flight."""

    def _journal(self) -> ObjectJournal | None:
        return self._changes if self._history_on else None

    # --- recording ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _recording(self, operation: str, steps: Sequence[Step]) -> Iterator[None]:
        """Journal ``steps``, which the block makes: stored as pending before it, settled after it (at the end
        of the operation in progress, if one is)."""
        if not self._history_on or not steps:
            yield
            return
        scope = self._current_scope()
        draft = self._draft_of(scope) if scope is not None else Draft(operation, current_actor())
        draft.steps.extend(steps)
        draft.applied.extend([None] * len(steps))
        if scope is not None:  # the scope settles the draft when it ends, whatever happens from here
            scope.changes.extend(step.change for step in steps)
        keeps = [step.keep for step in steps if step.keep is not None]
        try:
            if keeps:  # the copies into the blobs beside the entry's PUT: one round trip, not two
                self._parallel(lambda work: work(), [lambda: self._changes.extend(draft), *keeps])
            else:
                self._changes.extend(draft)
        except BaseException:
            if scope is None and draft.entry_id is not None:
                self._settle_draft(draft)  # the entry went up, a copy failed: nothing changed
            raise
        try:
            yield
        except BaseException as exc:
            if isinstance(exc, _REFUSED) and len(steps) == 1 and steps[0].change.from_path is None:
                refused = steps[0]  # a one-file write the store refused (a condition failed): nothing changed
                draft.applied = [
                    False if step is refused else was for step, was in zip(draft.steps, draft.applied, strict=True)
                ]
            if scope is None:
                self._settle_draft(draft)  # what the failed primitive did, judged by the state
            raise
        made = set(steps)
        draft.applied = [True if step in made else was for step, was in zip(draft.steps, draft.applied, strict=True)]
        if scope is None:
            self._settle_draft(draft)

    def _draft_of(self, scope: Scope) -> Draft:
        with self._drafts_lock:
            draft = self._drafts.get(scope.key)
            if draft is None:
                draft = Draft(scope.operation, scope.actor, scope.undoes, scope.detail)
                self._drafts[scope.key] = draft
            return draft

    def _scope_finished(self, scope: Scope) -> None:
        with self._drafts_lock:
            draft = self._drafts.pop(scope.key, None)
        if draft is not None:
            draft.detail = scope.detail  # grown by the operations run in a group (Scope.absorb)
            record = self._settle_draft(draft)
            scope.entry_id = None if record is None else record.entry_id

    def _scope_entry(self, scope: Scope) -> JournalEntry | None:
        return None if scope.entry_id is None else self._changes.entry(scope.entry_id)

    def _settle_draft(self, draft: Draft) -> Record | None:
        """Store the draft as done with the steps that took effect (the unknown ones judged by the state)."""
        try:
            steps: list[Step] = []
            chain = None
            for index, (step, made) in enumerate(zip(draft.steps, draft.applied, strict=True)):
                if made:
                    steps.append(step)
                elif made is None and draft.entry_id is not None:
                    chain = chain or self._changes.next_before(draft.entry_id)
                    steps += self._resolve_step(step, _then_within(draft.steps, index, chain))
            return self._changes.finish(draft, steps)
        except BaseException:
            self._changes.abandon(draft)
            raise

    # --- what a path holds, and what a pending entry did ------------------------------------------------

    def _states(self, paths: Sequence[str]) -> list[str | None]:
        """What each path holds now, as a change records it (a content id, ``DIRECTORY`` or ``None``): one
        round trip of questions."""
        found, occupied = self._client.probe(
            [self._layout.key(p) for p in paths], [self._layout.dir_key(p) for p in paths]
        )
        return [
            self._id_of(info) if info is not None else DIRECTORY if there else None
            for info, there in zip(found, occupied, strict=True)
        ]

    def _version_now(self, path: str) -> str | None:
        return None if not path else self._states([path])[0]

    def _resolve(self, record: Record, next_before: Callable[[str], str | None]) -> list[Step]:
        """The steps of a pending record that took effect (see :meth:`_resolve_step`)."""
        steps = record.steps
        return [
            made
            for i, step in enumerate(steps)
            for made in self._resolve_step(step, _then_within(steps, i, next_before))
        ]

    def _resolve_step(self, step: Step, next_before: Callable[[str], str | None]) -> list[Step]:
        """Whether ``step`` took effect, judged by what its paths held just after it: what the next entry to
        touch each found there, else (no later entry touched it) what it holds now. The store now says nothing
        about a path a later entry changed: it may have put back what this step replaced."""
        change = step.change
        if change.from_path is None:
            return [step] if self._then(next_before, [change.path])[0] == change.after else []
        dst, src = self._then(next_before, [change.path, change.from_path])
        if change.after == DIRECTORY:  # a directory, moved file by file
            if dst != DIRECTORY:
                return []
            return [step] if src is None else self._half_moved(step, next_before)
        if dst != change.after:
            return []
        return [step] if src != change.after else [Step(replace(change, from_path=None), step.version)]

    def _then(self, next_before: Callable[[str], str | None], paths: Sequence[str]) -> list[str | None]:
        """What each path held just after the entry being settled (see :meth:`_resolve_step`): one round trip
        for the paths no later entry touched, one per path a later directory move carried."""
        held = [self._held_later(next_before, path) for path in paths]
        untouched = [path for path, later in zip(paths, held, strict=True) if later == NOTHING_LATER]
        now = iter(self._states(untouched) if untouched else [])
        return [next(now) if later == NOTHING_LATER else later for later in held]

    def _held_later(self, next_before: Callable[[str], str | None], path: str) -> str | None:
        """What ``path`` held when a later entry next touched it (a directory moved above it: what is now
        where it was carried), or :data:`NOTHING_LATER`."""
        later = next_before(path)
        if later is not None and later.startswith(CARRIED):
            return self._states([later[len(CARRIED) :]])[0]
        return later

    def _half_moved(self, step: Step, next_before: Callable[[str], str | None]) -> list[Step]:
        """A directory move that stopped part way: the directories made, and each file moved or copied. Whether
        a file arrived, and whether its source was deleted, is what the first later entry to touch each found
        there (a later change may have moved or deleted either since), else what the store holds now."""
        change = step.change
        assert change.from_path is not None
        there, here = self._tree(change.path), self._tree(change.from_path)
        steps = [Step(Change(change.path, change.before, DIRECTORY))]
        steps += [Step(Change(d, None, DIRECTORY)) for d in sorted(there.directories)]
        removed: list[Step] = []
        for relative, content_id, size in step.plan:
            target, source = f"{change.path}/{relative}", f"{change.from_path}/{relative}"
            if content_id == DIRECTORY:  # a source directory gone once its copy was made: removed by the move
                if target in there.directories and not self._dir_then(next_before, source, here.directories):
                    removed.append(Step(Change(source, DIRECTORY, None)))
            elif self._held_then(next_before, target, there.files) == content_id:
                left = self._held_then(next_before, source, here.files) == content_id
                steps.append(Step(Change(target, None, content_id, 0, size, None if left else source)))
        return steps + sorted(removed, key=lambda each: each.change.path, reverse=True)

    def _dir_then(self, next_before: Callable[[str], str | None], path: str, now: Collection[str]) -> bool:
        """Whether directory ``path`` was there just after the entry being settled: as the next entry to touch it
        found it, else as it is now (``now``: the directories of a listing that includes it)."""
        later = self._held_later(next_before, path)
        return path in now if later == NOTHING_LATER else later == DIRECTORY

    def _held_then(
        self, next_before: Callable[[str], str | None], path: str, now: Mapping[str, ObjectInfo]
    ) -> str | None:
        """What ``path`` held just after the entry being settled: what the next entry to touch it found, else
        what it holds now (``now``: the files of a listing that includes it)."""
        later = self._held_later(next_before, path)
        if later != NOTHING_LATER:
            return later
        info = now.get(path)
        return None if info is None else self._id_of(info)

    # --- keeping what a change replaces -----------------------------------------------------------------

    def _kept(self, info: ObjectInfo) -> tuple[str, int, str | None, Keep | None]:
        """How to keep the file version ``info`` (from a listing or a ``HEAD``) for undo: its content id, size,
        version, and the copy into ``blobs/`` still to make (``None``: nothing to do). A ``HEAD`` only where
        this process knows neither its content id nor (in a bucket that keeps versions) its version id. The copy
        is made even where this process saw that blob: another process's retention may have deleted it since."""
        versioned = self._versions_kept()
        version = info.version_id or self._version_ids.get((info.key, info.etag))
        if self._known_id(info) is None or (versioned and version is None):
            head = self._client.head(info.key)
            if head is None:
                raise ConcurrentChangeError(self._layout.named(info.key), "The file was deleted meanwhile")
            info, version = head, head.version_id
        content_id = self._id_of(info)
        if versioned and version is not None:
            return content_id, info.size, version, None
        source = info

        def keep() -> None:  # copied even where this process saw the blob: retention elsewhere may have gone
            path = self._layout.named(source.key)
            try:
                self._client.copy(source, self._store.blob_key(content_id), content_id=content_id)
            except PreconditionFailed:
                raise ConcurrentChangeError(path, "The file changed while it was being journaled; try again") from None
            except FileNotFoundError as exc:  # names the key
                raise vanished(exc, path, "The file was deleted while it was being journaled; try again") from None

        return content_id, info.size, None, keep

    def _kept_many(self, infos: Sequence[ObjectInfo], path: str) -> list[Kept]:
        """:meth:`_kept` for many files below ``path`` (what an error names), asked and copied concurrently
        (``infos`` from :meth:`_listing`)."""
        ids = self._ids_of(infos)
        if self._versions_kept() and all(info.version_id is not None for info in infos):
            return [(i, info.size, info.version_id) for i, info in zip(ids, infos, strict=True)]
        try:
            self._keep_content(infos, ids, trust_seen=False)  # another process's retention may have deleted one
        except _Changed:
            raise ConcurrentChangeError(path, "Files changed while they were being journaled; try again") from None
        return [(i, info.size, None) for i, info in zip(ids, infos, strict=True)]

    # --- the steps of each kind of change -------------------------------------------------------------

    def _journaled_commit(self, path: str, replaces: ObjectInfo | None, *, create: bool) -> AroundCommit:
        """What wraps a stream's commit: the file it replaces (``replaces``, or what a ``HEAD`` finds then) kept
        and the entry written before the request that makes the new content visible."""

        @contextlib.contextmanager
        def around(content_id: str, size: int) -> Iterator[None]:
            if not self._history_on:
                yield
                return
            current = replaces if replaces is not None or create else self._client.head(self._layout.key(path))
            with self._recording("write", self._written(path, current, content_id, size)):
                yield

        return around

    def _written(self, path: str, current: ObjectInfo | None, content_id: str, size: int) -> list[Step]:
        """The step of a write of ``content_id`` over ``current`` (kept for undo); none if it holds that already."""
        if current is None:
            return [Step(Change(path, None, content_id, 0, size))]
        before, size_before, version, keep = self._kept(current)
        if before == content_id:
            return []
        return [Step(Change(path, before, content_id, size_before, size), version, keep=keep)]

    def _tree_removed(self, path: str, found: Sequence[ObjectInfo]) -> list[Step]:
        """The steps of deleting a tree (children before their directory), its files kept for undo."""
        tree = Tree.from_listing(self._layout, path, found)
        files = sorted(tree.files)
        kept = self._kept_many([tree.files[p] for p in files], path)
        steps = [Step(Change(p, k[0], None, k[1], 0), k[2]) for p, k in zip(files, kept, strict=True)]
        steps += [Step(Change(d, DIRECTORY, None)) for d in [path, *tree.directories]]
        steps.sort(key=lambda step: step.change.path, reverse=True)
        return steps

    def _file_moved(self, src: str, dst: str, source: ObjectInfo, target: ObjectInfo | None) -> list[Step]:
        """The step of moving file ``source`` over ``target`` (kept for undo) or to a free path."""
        if target is None:
            return [Step(Change(dst, None, self._id_of(source), 0, source.size, src))]
        before, size, version, keep = self._kept(target)
        return [Step(Change(dst, before, self._id_of(source), size, source.size, src), version, keep=keep)]

    def _tree_moved(self, src: str, dst: str, listing: Sequence[ObjectInfo]) -> list[Step]:
        """One step, as on every backend, carrying the files it moves (their content ids also go with the copies
        as metadata) and the directories: what settles a move a crash stopped part way."""
        tree = Tree.from_listing(self._layout, src, listing)
        files = sorted(tree.files)
        ids = self._ids_of([tree.files[p] for p in files])
        plan = [(p[len(src) + 1 :], i, tree.files[p].size) for p, i in zip(files, ids, strict=True)]
        plan += [(d[len(src) + 1 :], DIRECTORY, 0) for d in sorted(tree.directories)]  # the empty ones too
        return [Step(Change(dst, None, DIRECTORY, 0, 0, src), plan=tuple(plan))]

    def _listing(self, base: str) -> list[ObjectInfo]:
        """Every object below directory ``base`` (with its version id where the bucket keeps versions and the
        journal will name them)."""
        prefix = self._layout.dir_key(base)
        if self._history_on and self._versions_kept():
            return list(self._client.latest_versions(prefix))
        return [item for item in self._client.list(prefix, recursive=True) if isinstance(item, ObjectInfo)]

    def _keep_content(
        self, infos: Sequence[ObjectInfo], ids: Sequence[str], *, trust_seen: bool = True
    ) -> dict[str, ObjectInfo]:
        """Make sure the store holds a fresh copy of every content id: copied where it lacks one or where its
        copy is older than half the journal's ``tombstone_age`` (a prune or a snapshot's deletion in another
        process spares only young blobs: one whose listing came before the entry or snapshot now naming it would
        release an old blob). With ``trust_seen``, a blob this process made fresh within that time is not asked
        about again. Returns the blobs that were there but old, refreshed (copied again) here, with their
        sources: a collection that judged them old just before may still delete them (see
        :meth:`~ObjectSnapshots._capture`)."""
        window = self._changes.tombstone_age / 2
        seen, lock = self._blobs_seen, self._blobs_lock
        sources: dict[str, ObjectInfo] = {}
        for info, content_id in zip(infos, ids, strict=True):
            sources.setdefault(content_id, info)
        now = _uptime()
        with lock:
            unknown = sorted(
                c for c in sources if not trust_seen or now - seen.get(c, -math.inf) >= window.total_seconds()
            )
        if not unknown:
            return {}
        found, _ = self._client.probe([self._store.blob_key(content_id) for content_id in unknown], [])
        clock = datetime.now(UTC)
        stale = clock - window
        copies = [c for c, info in zip(unknown, found, strict=True) if info is None or info.modified < stale]

        def keep(content_id: str) -> None:
            try:
                self._client.copy(sources[content_id], self._store.blob_key(content_id), content_id=content_id)
            except (PreconditionFailed, FileNotFoundError):  # changed or deleted since the listing
                raise _Changed from None

        self._parallel(keep, copies)
        copied = set(copies)
        # when each blob was made fresh: a blob found young was written before now, and is trusted only for what
        # is left of its window (not a whole window from now, which let a blob twice the window old be trusted)
        fresh = {
            c: now if c in copied or info is None else now - max(0.0, (clock - info.modified).total_seconds())
            for c, info in zip(unknown, found, strict=True)
        }
        with lock:
            seen.update(fresh)
        return {c: sources[c] for c, info in zip(unknown, found, strict=True) if info is not None and c in copied}

    def _history_content(self, entry: JournalEntry, index: int) -> ByteReader:
        step = self._changes.record_of(entry.entry_id).steps[index]
        change = step.change
        key = self._store.blob_key(str(change.before)) if step.version is None else self._layout.key(change.path)
        try:
            first, info = self._client.get(key, 0, FIRST_BLOCK_BYTES, version_id=step.version)
        except FileNotFoundError:
            raise FileNotFoundError(2, "The content this entry replaced is no longer kept", change.path) from None
        return StreamReader(change.path, ObjectReader(self._client, change.path, info, first), info.size)

    def _check_kept(self, entry: JournalEntry) -> None:
        """Every blob and version the entry names is still in the store (another process's retention may have
        released it): one concurrent round of ``HEAD`` requests."""
        steps = [s for s in self._changes.record_of(entry.entry_id).steps if s.change.before not in (None, DIRECTORY)]
        blobs = [s for s in steps if s.version is None]
        versions = [s for s in steps if s.version is not None]
        found, _ = (
            self._client.probe([self._store.blob_key(str(s.change.before)) for s in blobs], []) if blobs else ([], [])
        )
        kept = self._client.versions_exist([(self._layout.key(s.change.path), str(s.version)) for s in versions])
        for step, here in [
            *zip(blobs, [info is not None for info in found], strict=True),
            *zip(versions, kept, strict=True),
        ]:
            if not here:
                raise FileNotFoundError(2, "The content this entry replaced is no longer kept", step.change.path)

    # --- what snapshots and the journal hold, for each other -------------------------------------------

    def _snapshot_refs(self) -> tuple[set[Ref], frozenset[uuid.UUID]]:
        """Every blob and version a snapshot of this workspace names, and the snapshots listed."""
        held: set[Ref] = set()
        listed = frozenset(self._store.snapshot_ids())
        for snapshot_id in listed:
            try:
                files = self._store.manifest(snapshot_id).files
            except SnapshotNotFoundError:
                continue  # dropped meanwhile
            for path, entry in files.items():
                if entry.version is None:
                    held.add(("blob", entry.content_id))
                else:
                    held.add(("version", self._layout.key(path), entry.version))
        return held, listed

    def _fresh(self, refs: set[Ref], since: datetime) -> set[Ref]:
        """The refs among ``refs`` a change in another process may just have kept for an entry not listed yet: a
        blob written after ``since`` (the store's clock; a keep copies the blob, so its time is new), and a version
        still current (a change keeps only the current version, and stores its entry before it replaces it, so one
        not current now is named by no entry stored after this look but by one the second look finds). One
        concurrent round of ``HEAD``s."""
        blobs = sorted(ref for ref in refs if ref[0] == "blob")
        versions = sorted(ref for ref in refs if ref[0] == "version")
        keys = sorted({ref[1] for ref in versions})
        if not blobs and not keys:
            return set()
        found, _ = self._client.probe([self._store.blob_key(ref[1]) for ref in blobs] + keys, [])
        young = {ref for ref, info in zip(blobs, found, strict=False) if info is not None and info.modified > since}
        live = {key: info.version_id for key, info in zip(keys, found[len(blobs) :], strict=True) if info is not None}
        return young | {ref for ref in versions if live.get(ref[1]) == ref[2]}

    def _holders_since(
        self, refs: set[Ref], seen: Mapping[int, str], snapshots: Collection[uuid.UUID]
    ) -> dict[Ref, list[ObjectInfo | str]]:
        """Of ``refs``, those an entry stored since ``seen`` (id to ``ETag``) or a snapshot not in ``snapshots``
        names, each with where its content may still be: the file a new snapshot names (at the version named),
        or the path a new entry replaced (which may still hold it). One listing of each; only new ones read."""
        found: dict[Ref, list[ObjectInfo | str]] = {}
        for record in self._changes.stored_since(seen):
            for step in record.steps:
                if (ref := step.ref(self._layout.key)) in refs:
                    found.setdefault(ref, []).append(step.change.path)
        known = set(snapshots)
        for snapshot_id in self._store.snapshot_ids():
            if snapshot_id in known:
                continue
            try:
                files = self._store.manifest(snapshot_id).files
            except SnapshotNotFoundError:
                continue  # dropped meanwhile
            for path, entry in files.items():
                key = self._layout.key(path)
                ref = ("blob", entry.content_id) if entry.version is None else ("version", key, entry.version)
                if ref in refs:
                    modified = datetime.fromisoformat(entry.modified)
                    found.setdefault(ref, []).append(ObjectInfo(key, entry.size, entry.etag, modified))
        return found

    def _named_since(self, refs: set[Ref], seen: Mapping[int, str], snapshots: frozenset[uuid.UUID]) -> set[Ref]:
        """Of ``refs``, those an entry or a snapshot stored since ``seen`` and ``snapshots`` were listed names:
        asked after the age check, so a change that kept one of them since is never judged by the older look."""
        return set(self._holders_since(refs, seen, snapshots))

    def _copy_back_named(self, collected: set[str], seen: Mapping[int, str], snapshots: Collection[uuid.UUID]) -> None:
        """After collecting, copy back the blobs an entry or snapshot stored since the look (``seen``,
        ``snapshots``) names: a change or capture in another process that kept one between that look and the
        delete. Copied from the file a snapshot names, or the path an entry replaced, where it still holds that
        content (one ``HEAD`` per path)."""
        holders = self._holders_since({("blob", content_id) for content_id in collected}, seen, snapshots)
        if not holders:
            return
        paths = sorted({where for found in holders.values() for where in found if isinstance(where, str)})
        live, _ = self._client.probe([self._layout.key(path) for path in paths], []) if paths else ([], [])
        now = dict(zip(paths, live, strict=True))
        sources: dict[str, list[ObjectInfo]] = {}
        for ref, found in holders.items():
            for where in found:
                info = now.get(where) if isinstance(where, str) else where
                if info is not None and (not isinstance(where, str) or self._holds(info, ref[1])):
                    sources.setdefault(ref[1], []).append(info)
        if sources:
            self._copy_back(sources)

    def _keep_copied(self, copies: Sequence[tuple[str, str]]) -> None:
        """Keep in the blobs the content of sources a move deleted after a reader settled it as a copy (what the
        deletes recorded anew name for undo), from their copies (path, content id) where those still hold it: one
        round of ``HEAD``s, then the copies. Only a move slower than the journal's grace comes here."""
        found, _ = self._client.probe([self._layout.key(path) for path, _ in copies], [])
        sources: dict[str, list[ObjectInfo]] = {}
        for (_, content_id), info in zip(copies, found, strict=True):
            if info is not None and self._holds(info, content_id):
                sources.setdefault(content_id, []).append(info)
        if sources:
            self._copy_back(sources)

    def _holds(self, info: ObjectInfo, content_id: str) -> bool:
        """Whether the file version ``info`` holds ``content_id``: ``False`` too when it changed while it was read to
        learn its id (passed over, as a source that changed before its copy is; the other copy-backs go on)."""
        try:
            return self._id_of(info) == content_id
        except ConcurrentChangeError:
            return False

    def _copy_back(self, sources: Mapping[str, Sequence[ObjectInfo]]) -> set[str]:
        """Copy each content id's blob again from the first of its sources still at the version named (the copy
        is conditional on its ``ETag``); returns the content ids no source holds any more."""

        def copy(content_id: str) -> str | None:
            for source in sources[content_id]:
                try:
                    self._client.copy(source, self._store.blob_key(content_id), content_id=content_id)
                except (PreconditionFailed, FileNotFoundError):
                    continue  # changed or gone since: try the next file that held it
                return None
            return content_id

        return {content_id for content_id in self._parallel(copy, sorted(sources)) if content_id is not None}

    def _release(self, refs: set[Ref], seen: Mapping[int, str], snapshots: frozenset[uuid.UUID]) -> None:
        """Delete blobs and versions retention dropped (a current version never comes here: :meth:`_fresh` spares
        it before the second look), then copy back a blob an entry or snapshot stored since the look (``seen``,
        ``snapshots``) names."""
        blobs = {ref[1] for ref in refs if ref[0] == "blob"}
        with self._blobs_lock:
            for blob in blobs:
                self._blobs_seen.pop(blob, None)
            self._store.collect(blobs)
        versions = sorted((ref[1], ref[2]) for ref in refs if ref[0] == "version")
        if versions:
            self._client.delete_versions(versions)
        if blobs:
            self._copy_back_named(blobs, seen, snapshots)


def _then_within(
    steps: Sequence[Step], index: int, next_before: Callable[[str], str | None]
) -> Callable[[str], str | None]:
    """``next_before`` for step ``index`` of an entry: a later step of the same entry that touched the path
    comes first (an operation that wrote one path twice: the second write found what the first left)."""
    later = steps[index + 1 :]

    def found(path: str) -> str | None:
        for step in later:
            if step.change.path == path:
                return step.change.before
            if step.change.from_path == path:
                return step.change.after
        return next_before(path)

    return found
