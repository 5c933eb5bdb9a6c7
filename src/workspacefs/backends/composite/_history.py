"""History of a ``CompositeFilesystem``: its mounts' journals read as one, and its changes grouped per mount.

The composite keeps no journal of its own: each mount journals the changes made in it, and ``history``
merges the mounts' entries newest first (by time; each mount's own order is kept), with every path spelled
as the composite names it (mount point + the mount's path).

**Entry ids.** One id space over the mounts, computed, so it needs no storage and is the same in every
process that mounts the same filesystems at the same points: a mount's entry ``inner`` is the composite's
entry ``inner * n + index``, where ``n`` is the number of mounts and ``index`` the mount's position in the
mount table sorted by mount point (a composite of one mount uses its mount's own ids). Mounting another
filesystem, or unmounting one, renumbers the space. Ids are unique and grow within a mount, not across mounts,
so entries are ordered by time; ``since=<id>`` means the entries after that one in its own mount and, in the
other mounts, those from its time on (every entry of the other mounts when it is gone).

**Grouping.** One operation of the composite (a move, a copy, a recursive delete, a ``grouped`` block) becomes
one entry in each mount it changed, as it would in that mount alone: the composite opens the mount's own group
(``grouped``) and keeps it open until the operation ends, however its changes alternate between mounts. A
``grouped`` block opens every writable mount's group at its start, so a worker thread that copied the block's
context (``asyncio.to_thread``, ``copy_context().run``) holds them all and joins them; a change a worker makes
after the block ended is an entry of its own. ``undo`` inside the block is refused for every mount.

A move or copy *between* two mounts is a copy into one journal and, for a move, a delete from the other: two
entries, each named ``move`` (one creating the files in the target mount, one deleting them in the source
mount), undone one by one; a copy is one ``copy`` entry in the target mount.

``undo``, ``read_version`` and ``history_entry`` go to the mount the id names; an undo's conflict comes back
with the composite's paths and ids. ``watch`` is one watcher fed by a watcher of each mount it can hear.
A writable mount without history (or without watching) makes the composite refuse, naming it; a read-only
mount makes no changes through the composite, and one without a journal is left out.
"""

from __future__ import annotations

import builtins
import contextlib
import heapq
import itertools
import re
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import replace
from datetime import datetime, timedelta
from typing import cast

from workspacefs.backends._history import HistoryMixin, Scope, operation_key, undo_in_group, undo_request, without
from workspacefs.backends.composite._mounts import Mounted, MountTable
from workspacefs.errors import HistoryEntryNotFoundError, UndoConflictError, UnsupportedOperationError, caller_paths
from workspacefs.history import Actor, Change, ChangeWatcher, HistoryFilesystem, JournalEntry, current_actor
from workspacefs.paths import is_within

__all__ = ["CompositeHistory"]


class _Operation:
    """One operation of a composite in progress, and the group it opened in each mount it changes, open until the
    operation ends: one entry per mount, however the changes alternate between mounts.

    A grouped block (``composite.grouped``) opens every writable mount's group at its start, so that a worker
    thread carrying the block's context (``asyncio.to_thread``, an executor run in ``copy_context()``) carries
    them all and joins them. The composite's own operations (a move, a recursive delete) run in one thread and
    open a mount's group when they first change it (opening every mount's costs about 6 µs a mount)."""

    def __init__(self, owner: object, operation: str) -> None:
        self.owner = owner
        self.operation = operation
        self.ended = False
        self._every_mount = False
        self._open: dict[str, contextlib.AbstractContextManager[None]] = {}
        self._changed: dict[str, None] = {}
        """The mounts changed so far, in the order first changed: their entries are made in that order."""

    def open(self, table: MountTable) -> None:
        """Open the group of every writable mount with a journal, before any change (on a failure, close those
        already open)."""
        self._every_mount = True
        try:
            for mounted in table:
                self._enter(mounted)
        except BaseException:
            self.close()
            raise

    def changing(self, mounted: Mounted) -> None:
        """Before a change in ``mounted``: its group is open (opened here, in this thread, on the first change of
        an operation that did not open every mount's at its start)."""
        if mounted.point not in self._changed:
            self._changed[mounted.point] = None
            if not self._every_mount:  # never after the start: a worker thread would open one nobody closes
                self._enter(mounted)

    def _enter(self, mounted: Mounted) -> None:
        if mounted.fs.capabilities.history and not mounted.fs.read_only:
            opened = cast(HistoryFilesystem, mounted.fs).grouped(self.operation)
            opened.__enter__()
            self._open[mounted.point] = opened

    def close(self) -> None:
        """End every mount's group, the mounts changed first first (each group's changes become its entry)."""
        self.ended = True
        opened, self._open = self._open, {}
        changed = tuple(self._changed)  # one step: a worker thread may still note a change
        order = [point for point in changed if point in opened] + [p for p in opened if p not in changed]
        failed: BaseException | None = None
        for point in order:
            try:
                opened[point].__exit__(None, None, None)
            except BaseException as exc:  # the other mounts' groups still end
                failed = failed or exc
        if failed is not None:
            raise failed


_OPERATIONS: ContextVar[tuple[_Operation, ...]] = ContextVar("workspacefs_composite_operations", default=())
"""The composite operations in progress in this thread or task, innermost first (one per composite)."""


class CompositeHistory(HistoryMixin):
    """``history``, ``history_entry``, ``read_version``, ``undo``, ``prune_history`` and ``watch`` over the
    mounts' journals, with ids and paths the composite's own (see the module docstring)."""

    _table: MountTable
    """The mounts; their order (by mount point) numbers the ids."""

    # --- grouping one operation's changes per mount -------------------------------------------------

    def _operation(self) -> _Operation | None:
        """This composite's operation in progress in this thread or task (a worker thread that copied its
        context included; once the operation's block has ended, none)."""
        for running in _OPERATIONS.get():
            if running.owner is self:
                return None if running.ended else running
        return None

    def _group(self, operation: str) -> contextlib.AbstractContextManager[Scope]:
        return self._journaled(operation, every_mount=True)

    @contextlib.contextmanager
    def _journaled(
        self, operation: str, *, undoes: int | None = None, detail: str | None = None, every_mount: bool = False
    ) -> Iterator[Scope]:
        """The composite's operation: every mount it changes groups those changes into one entry (see
        :class:`_Operation`; ``every_mount``: a grouped block, open in every mount from the start); an operation
        already in progress absorbs this one."""
        scope = Scope(self, operation, operation_key(), current_actor(), undoes, detail)
        if self._operation() is not None:
            yield scope
            return
        mine = _Operation(self, operation)
        if every_mount:
            mine.open(self._table)
        _OPERATIONS.set((mine, *_OPERATIONS.get()))
        try:
            yield scope
        finally:
            _OPERATIONS.set(without(_OPERATIONS.get(), mine))  # not a token's reset: it may end in another context
            mine.close()

    @contextlib.contextmanager
    def _changing(self, mounted: Mounted) -> Iterator[None]:
        """Around a change the composite makes in ``mounted``: part of the operation in progress, with the
        mount's error paths renamed into the composite's."""
        running = self._operation()
        if running is not None:
            running.changing(mounted)
        with mounted.speaking_outside():
            yield

    # --- ids and paths ------------------------------------------------------------------------------

    def _journaling(self, feature: str = "history") -> list[tuple[int, Mounted]]:
        """The mounts with a journal, each with its index; ``UnsupportedOperationError`` naming a writable
        mount that keeps none (``feature="watch"``: that can be watched)."""
        found: list[tuple[int, Mounted]] = []
        for index, mounted in enumerate(self._table):
            capabilities = mounted.fs.capabilities
            if capabilities.history if feature == "history" else capabilities.watch:
                found.append((index, mounted))
            elif not mounted.fs.read_only:
                what = "keeps no history of changes" if feature == "history" else "cannot be watched"
                raise UnsupportedOperationError(
                    f"The filesystem mounted at {mounted.spelled} {what}; mount it read-only or leave it out "
                    f"to have the composite's {feature}"
                )
        if not found:
            what = "keeps history of changes" if feature == "history" else "can be watched"
            raise UnsupportedOperationError(f"No filesystem mounted in this composite {what}")
        return found

    def _outer_id(self, index: int, inner: int) -> int:
        return inner * len(self._table) + index

    def _locate(self, entry_id: object) -> tuple[int, Mounted, int]:
        """``(index, mount, the mount's id)`` of a composite entry id; ``HistoryEntryNotFoundError`` if it
        names no mount with a journal."""
        if isinstance(entry_id, bool) or not isinstance(entry_id, int):
            raise TypeError(f"a journal entry id is an int, not {type(entry_id).__name__}")
        count = len(self._table)
        for index, mounted in self._journaling():
            if entry_id >= 0 and entry_id % count == index:
                return index, mounted, entry_id // count
        raise HistoryEntryNotFoundError(f"No journal entry {entry_id}")

    def _outer_entry(self, index: int, mounted: Mounted, entry: JournalEntry) -> JournalEntry:
        """A mount's entry as the composite names it."""
        return replace(
            entry,
            entry_id=self._outer_id(index, entry.entry_id),
            undoes=None if entry.undoes is None else self._outer_id(index, entry.undoes),
            changes=tuple(_outer_change(mounted, change) for change in entry.changes),
        )

    # --- reading ------------------------------------------------------------------------------------

    def history(
        self,
        path: str | None = None,
        *,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> builtins.list[JournalEntry]:
        """Every mount's entries, newest first, as the composite names them: those touching ``path`` (asked
        of the mount holding it, or of each mount below it), after entry ``since`` (an id of this composite,
        or a time), by ``actor``; at most ``limit``.

        Raises:
            UnsupportedOperationError: a writable mount keeps no history (the error names it).
        """
        journaling = self._journaling()
        if limit is not None and limit < 0:
            raise ValueError("limit must not be negative")
        asked = self._asked(None if path is None else self._norm(path), journaling)
        after = self._since_per_mount(since, journaling)
        streams = []
        for index, mounted, inner in asked:
            with mounted.speaking_outside():
                found = cast(HistoryFilesystem, mounted.fs).history(
                    inner, since=after.get(index), actor=actor, limit=limit
                )
            streams.append([self._outer_entry(index, mounted, entry) for entry in found])
        merged = heapq.merge(*streams, key=lambda entry: entry.time, reverse=True)
        return builtins.list(itertools.islice(merged, limit))

    def _asked(
        self, norm: str | None, journaling: Sequence[tuple[int, Mounted]]
    ) -> builtins.list[tuple[int, Mounted, str | None]]:
        """The mounts that can hold ``norm`` (its own, and each mounted below it), with the path each is
        asked for (``None``: all of it)."""
        if norm is None:
            return [(index, mounted, None) for index, mounted in journaling]
        serving = self._table.route(norm)
        below = {m.point for m in self._table.below(norm)}
        asked: builtins.list[tuple[int, Mounted, str | None]] = []
        for index, mounted in journaling:
            if mounted is serving:
                inner = mounted.inner(norm)
                asked.append((index, mounted, None if inner == "." else inner))
            elif mounted.point in below:
                asked.append((index, mounted, None))
        return asked

    def _since_per_mount(
        self, since: int | datetime | None, journaling: Sequence[tuple[int, Mounted]]
    ) -> dict[int, int | datetime | None]:
        """What ``since`` means to each mount: a time as it is; an entry id, in its own mount that mount's
        id, and in the others its entry's time (entries at that very time included: rather twice than lost)."""
        if since is None or isinstance(since, datetime):
            return {index: since for index, _ in journaling}
        if isinstance(since, bool) or not isinstance(since, int):
            raise TypeError(f"since is an entry id or a time, not {type(since).__name__}")
        count = len(self._table)
        own, inner = since % count, since // count
        moment: datetime | None = None
        for index, mounted in journaling:
            if index == own and since >= 0 and len(journaling) > 1:  # the others need its time
                with contextlib.suppress(HistoryEntryNotFoundError):
                    moment = cast(HistoryFilesystem, mounted.fs).history_entry(inner).time - timedelta(microseconds=1)
        return {index: (inner if index == own else moment) for index, _ in journaling}

    def history_entry(self, entry_id: int) -> JournalEntry:
        """One entry, by the composite's id.

        Raises:
            HistoryEntryNotFoundError: no mount has it (or retention dropped it).
        """
        index, mounted, inner = self._locate(entry_id)
        try:
            entry = cast(HistoryFilesystem, mounted.fs).history_entry(inner)
        except HistoryEntryNotFoundError:
            raise HistoryEntryNotFoundError(f"No journal entry {entry_id}") from None
        return self._outer_entry(index, mounted, entry)

    def read_version(self, entry_id: int, path: str, *, side: str = "after") -> bytes:
        """The bytes ``path`` held just ``before`` or ``after`` entry ``entry_id``, read from its mount.

        Raises:
            HistoryEntryNotFoundError: no such entry.
            FileNotFoundError: the entry did not change ``path``, left no file there, or that content is gone.
        """
        if side not in {"before", "after"}:
            raise ValueError("side must be 'before' or 'after'")
        norm = self._norm(path)
        _, mounted, inner = self._locate(entry_id)
        if self._table.route(norm) is not mounted:
            raise FileNotFoundError(2, f"Entry {entry_id} did not change this path", path)
        try:
            with caller_paths({norm: path}), mounted.speaking_outside():
                return cast(HistoryFilesystem, mounted.fs).read_version(inner, mounted.inner(norm), side=side)
        except HistoryEntryNotFoundError:
            raise HistoryEntryNotFoundError(f"No journal entry {entry_id}") from None
        except FileNotFoundError as exc:
            if isinstance(exc.strerror, str):  # the mount's message names its own id
                exc.strerror = re.sub(rf"\b([Ee]ntry) {inner}\b", rf"\g<1> {entry_id}", exc.strerror)
            raise

    def prune_history(self, *, before: datetime | None = None, keep: int | None = None) -> int:
        """Drop entries older than ``before`` and all but the composite's newest ``keep`` (each mount keeps
        its share of those); returns how many went."""
        if keep is not None and keep < 0:
            raise ValueError("keep must not be negative")
        journaling = self._journaling()
        kept: Counter[int] = Counter()
        if keep:
            count = len(self._table)
            kept.update(entry.entry_id % count for entry in self.history(limit=keep))
        return sum(
            cast(HistoryFilesystem, mounted.fs).prune_history(before=before, keep=None if keep is None else kept[index])
            for index, mounted in journaling
        )

    # --- undo ---------------------------------------------------------------------------------------

    def check_undo(
        self,
        entry_id: int | Sequence[int] | None = None,
        *,
        actor: str | Actor | None = None,
        last: int | None = None,
        force: bool = False,
    ) -> builtins.list[JournalEntry]:
        """The entries ``undo`` with the same arguments would put back, newest first, or the error it would
        raise, from every mount's own check; changes nothing."""
        checked: builtins.list[JournalEntry] = []
        for index, (mounted, inners) in self._undo_shares(entry_id, actor, last).items():
            checked += [self._outer_entry(index, mounted, e) for e in self._check_share(index, mounted, inners, force)]
        checked.sort(key=lambda entry: entry.time, reverse=True)
        return checked

    def undo(
        self,
        entry_id: int | Sequence[int] | None = None,
        *,
        actor: str | Actor | None = None,
        last: int | None = None,
        force: bool = False,
    ) -> builtins.list[JournalEntry]:
        """Undo entry ``entry_id`` (or several ids, or the ``last`` n entries of ``actor`` over every mount) in
        the mounts that made them, newest first, as new ``undo`` entries there. Returns the new entries.

        Every id is found and every mount's share checked (its own ``check_undo``) before any mount changes
        anything, so a missing entry or a conflict leaves all as it was (a mount's paths are its own: shares
        never overlap).

        Raises:
            HistoryEntryNotFoundError: no such entry.
            UndoConflictError: a path changed again since (``.later`` and the path the composite's).
        """
        shares = self._undo_shares(entry_id, actor, last)
        for index, (mounted, inners) in shares.items():  # every id exists and every share can go: then undo
            self._check_share(index, mounted, inners, force)
        undone: builtins.list[JournalEntry] = []
        for index, (mounted, inners) in shares.items():
            try:
                with mounted.speaking_outside():
                    made = cast(HistoryFilesystem, mounted.fs).undo(inners, force=force)
            except UndoConflictError as exc:  # changed since the check
                exc.later = tuple(self._outer_id(index, later) for later in exc.later)
                raise
            undone += [self._outer_entry(index, mounted, entry) for entry in made]
        return undone

    def _undo_shares(
        self, entry_id: int | Sequence[int] | None, actor: str | Actor | None, last: int | None
    ) -> dict[int, tuple[Mounted, builtins.list[int]]]:
        """The mounts' ids an undo with these arguments names, by mount index."""
        self._journaling()
        self._writable("/")
        if self._operation() is not None:
            raise undo_in_group()
        ids, count = undo_request(entry_id, actor, last)
        targets = ids if ids is not None else [entry.entry_id for entry in self.history(actor=actor, limit=count)]
        if not targets:
            raise HistoryEntryNotFoundError(f"No journal entries by {actor!r}")
        shares: dict[int, tuple[Mounted, builtins.list[int]]] = {}
        for target in targets:
            index, mounted, inner = self._locate(target)
            shares.setdefault(index, (mounted, []))[1].append(inner)
        return shares

    def _check_share(
        self, index: int, mounted: Mounted, inners: Sequence[int], force: bool
    ) -> builtins.list[JournalEntry]:
        """The mount's own ``check_undo`` of ``inners``, its errors in the composite's ids and paths."""
        try:
            with mounted.speaking_outside():
                return cast(HistoryFilesystem, mounted.fs).check_undo(builtins.list(inners), force=force)
        except HistoryEntryNotFoundError:
            asked = [str(self._outer_id(index, inner)) for inner in inners]
            named = asked[0] if len(asked) == 1 else "among " + ", ".join(asked)
            raise HistoryEntryNotFoundError(f"No journal entry {named}") from None
        except UndoConflictError as exc:
            exc.later = tuple(self._outer_id(index, later) for later in exc.later)
            raise

    # --- watching -----------------------------------------------------------------------------------

    def watch(self, path: str = "/", *, recursive: bool = True) -> ChangeWatcher:
        """One watcher of the changes at ``path`` (and below it when ``recursive``), fed by a watcher of each
        mount that can hold them; closing it closes them all.

        Raises:
            UnsupportedOperationError: a writable mount cannot be watched (the error names it).
        """
        journaling = self._journaling("watch")
        norm = self._norm(path)
        feeding: builtins.list[tuple[int, Mounted, ChangeWatcher]] = []

        def close_all(_: ChangeWatcher) -> None:
            for _index, _mounted, each in feeding:
                each.close()

        watcher = ChangeWatcher(norm, recursive, close_all)
        try:
            for index, mounted in journaling:
                if is_within(norm, mounted.point):
                    where, deep = mounted.inner(norm), recursive
                elif recursive and is_within(mounted.point, norm):
                    where, deep = ".", True
                else:
                    continue
                with mounted.speaking_outside():
                    feeding.append((index, mounted, cast(HistoryFilesystem, mounted.fs).watch(where, recursive=deep)))
        except BaseException:
            watcher.close()
            raise
        for index, mounted, each in feeding:
            threading.Thread(
                target=self._feed, args=(index, mounted, each, watcher), name="wsfs-composite-watch", daemon=True
            ).start()
        return watcher

    def _feed(self, index: int, mounted: Mounted, source: ChangeWatcher, watcher: ChangeWatcher) -> None:
        """Pass a mount watcher's events on, as the composite names them, until it is closed."""
        for event in source:
            path = mounted.outer(event.path)
            if self._table.shadowed(mounted, path):
                continue  # hidden by a filesystem mounted there: not a path of the composite
            moved, entry_id = event.from_path, event.entry_id
            watcher.deliver(
                replace(
                    event,
                    path=path,
                    from_path=None if moved is None else mounted.outer(moved),
                    entry_id=None if entry_id is None else self._outer_id(index, entry_id),
                )
            )


def _outer_change(mounted: Mounted, change: Change) -> Change:
    moved = change.from_path
    return replace(change, path=mounted.outer(change.path), from_path=None if moved is None else mounted.outer(moved))
