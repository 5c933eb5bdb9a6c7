"""Journaling a command that ran over a host directory (a sandbox's ``exec``): what it changed, found by comparing
a stat manifest taken before it with one taken after it.

A command writes through no primitive of ours, so nothing observes each path as it changes. Instead the tree is
walked before and after (the resolver's walk: by descriptor, symlinks never followed; one ``fstatat`` per entry),
and each path whose ``(inode, size, mtime_ns, ctime_ns, kind)`` differs is read once more: a created, modified or
deleted file, a created or removed directory. Only a difference in content is a change (a ``touch`` is not).

What undo needs is the content each changed file held *before*, and by then the command has overwritten it; so it
must be kept before the command runs, without knowing which files it will touch. The cheapest correct way:

- Content kept by an earlier command is reused without a read: a cache, per filesystem, of path -> (stat
  fingerprint, content id) for content the journal's ``objects/`` holds. A file whose fingerprint is unchanged
  holds the same bytes (every write changes ``ctime``; an entry is cached only when its ``ctime`` is older than
  the racy window, so a write within the same timestamp tick cannot hide behind an equal fingerprint). The
  cache is dropped when the journal has collected kept files since (``prune_history``, retention); at the
  entry's use each object is touched, which also proves it is still there (another process may have pruned).
- Every other file is kept (``HostJournal.keep``: read and hashed, written into ``objects/`` only when new) while
  what that costs stays within a :class:`CommandBudget` (by default 64 MiB and 10,000 files per command). A file
  workspacefs wrote gets a new inode, so it is read at the next command: each command reads what changed since the
  last, not the workspace.
- Past the budget nothing more is kept: a changed file's ``before`` is :data:`~workspacefs.history.NOT_KEPT`, and
  an undo of that entry refuses with ``UndoContentNotKeptError`` instead of restoring part of it. Files inside
  the racy window are still hashed then (not kept), so an unchanged one is not reported as changed.

The workspace's own writes are never cached as kept: their content is not in ``objects/`` (only what a write
replaced is), and keeping it on every write would double the cost of each write for the sake of the next command.

Concurrency: a change made through workspacefs while the command runs (another thread) is its own entry, as ever.
The command's entry leaves out a path whose content is what that change left (no double record); if the path
holds something else too, both touched it, and the command's change records ``NOT_KEPT`` before (what it replaced
is the other change's result, which the journal does not hold), so its undo refuses rather than guess.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from workspacefs.backends.host._journal import HostJournal
from workspacefs.backends.host._snapshots import RACY_WINDOW_NS
from workspacefs.backends.host._tree import HostTree, content_id_of_fd
from workspacefs.history import DIRECTORY, NOT_KEPT, Change

__all__ = ["CommandBudget", "CommandRecorder", "Taken", "command_detail"]

Fingerprint = tuple[int, int, int, int, bool]
"""``(inode, size, mtime_ns, ctime_ns, is_directory)`` of one entry."""
Observe = Callable[[str], tuple[str | None, int]]
"""What a path holds now, as a change records it: ``(content id, DIRECTORY or None; size)``."""

_MAX_DETAIL = 1000
"""Characters of a command kept as its entry's ``detail``."""


@dataclass(frozen=True, slots=True)
class CommandBudget:
    """How much content a command's journaling may copy before the command runs (files not kept already): past
    it, files the command changes are journaled without their prior content, and their entry cannot be undone."""

    max_bytes: int = 64 * 1024 * 1024
    max_files: int = 10_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, not {value!r}")


@dataclass(frozen=True, slots=True)
class _Before:
    """One entry of the tree before the command."""

    fingerprint: Fingerprint
    content_id: str | None
    """The file's content id when known (kept, or hashed because it is racy); ``None`` for a directory."""
    kept: bool
    """Whether ``content_id`` is in the journal's ``objects/`` (undo can write it back)."""
    racy: bool
    """Changed so recently that an equal fingerprint after the command proves nothing: compare content."""


@dataclass(frozen=True, slots=True)
class Taken:
    """The tree before a command: every entry, and how many files were read to keep them."""

    entries: dict[str, _Before]
    read: int


def command_detail(command: str | Iterable[str]) -> str:
    """The command as an entry's ``detail``: a string as given, an argv shell-quoted; capped in length."""
    import shlex  # noqa: PLC0415 - only a command's entry needs it

    text = command if isinstance(command, str) else shlex.join(command)
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


def _fingerprint(info: os.stat_result) -> Fingerprint:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, stat.S_ISDIR(info.st_mode))


class CommandRecorder:
    """One filesystem's journaling of commands: the budget, and the cache of content kept by earlier ones."""

    def __init__(self, budget: CommandBudget) -> None:
        self.budget = budget
        self._cache: dict[str, tuple[Fingerprint, str]] = {}
        """path -> (fingerprint, content id in ``objects/``) from the last command's walk."""
        self._collected = 0
        """The journal's count of collected files when the cache was made (another collection may have taken a
        cached file: the cache is dropped rather than each file checked)."""

    def before(self, tree: HostTree, journal: HostJournal) -> Taken:
        """Walk the tree; keep each file's content not kept already, if the budget allows (see the module)."""
        racy_since = time.time_ns() - RACY_WINDOW_NS
        if journal.collected != self._collected:
            self._cache = {}
        entries: dict[str, _Before] = {}
        unknown: list[str] = []
        wanted = 0
        for path, info in tree.resolver.walk_stat(""):
            found = _fingerprint(info)
            cached = self._cache.get(path)
            if found[4]:
                entries[path] = _Before(found, None, False, False)
            elif cached is not None and cached[0] == found:
                entries[path] = _Before(found, cached[1], True, False)
            else:
                entries[path] = _Before(found, None, False, max(found[2], found[3]) >= racy_since)
                unknown.append(path)
                wanted += info.st_size
        keep = len(unknown) <= self.budget.max_files and wanted <= self.budget.max_bytes
        read = 0
        for path in unknown:
            if keep or entries[path].racy:
                read += 1
                known = _read(tree, journal, path, keep=keep, racy_since=racy_since)
                if known is None:
                    del entries[path]  # gone (or no longer a file) before the command started
                else:
                    entries[path] = known
        self._collected = journal.collected
        self._cache = {
            path: (entry.fingerprint, entry.content_id)
            for path, entry in entries.items()
            if entry.kept and entry.content_id is not None and not entry.racy
        }
        return Taken(entries, read)

    def changes(
        self,
        tree: HostTree,
        journal: HostJournal,
        taken: Taken,
        observe: Observe,
        concurrent: Mapping[str, str | None],
    ) -> list[Change]:
        """What the command changed, in an order an undo can put back in reverse (see :func:`_ordered`);
        ``concurrent`` is what workspacefs itself wrote meanwhile (path -> what it left)."""
        before = taken.entries
        after = {path: _fingerprint(info) for path, info in tree.resolver.walk_stat("")}
        changes: list[Change] = []
        for path, was in before.items():
            now = after.get(path)
            if now is not None and now[4] and was.fingerprint[4]:
                continue  # a directory stays one (its own times change with its entries)
            if now is not None and now == was.fingerprint and not was.racy:
                continue
            seen = observe(path) if now is not None else (None, 0)
            if seen[0] is not None and seen[0] == was.content_id:
                continue  # the same bytes (touched, or rewritten alike)
            if seen[0] is None and now is not None:
                continue  # replaced by a symlink or special file meanwhile: no file of the workspace either way
            prior = DIRECTORY if was.fingerprint[4] else self._prior(journal, was)
            changes.append(Change(path, prior, seen[0], was.fingerprint[1] if prior != DIRECTORY else 0, seen[1]))
        for path in after.keys() - before.keys():
            seen = observe(path)
            if seen[0] is not None:
                changes.append(Change(path, None, seen[0], 0, seen[1]))
        for path, entry in list(self._cache.items()):  # what the command changed is no longer what was kept
            if after.get(path) != entry[0]:
                del self._cache[path]
        return _ordered(_apart_from(changes, concurrent))

    @staticmethod
    def _prior(journal: HostJournal, was: _Before) -> str:
        """The ``before`` of a changed file: its kept content (touched, so a collection leaves it for the entry
        about to name it, and proved present), else ``NOT_KEPT``."""
        if was.kept and was.content_id is not None and journal.hold(was.content_id):
            return was.content_id
        return NOT_KEPT


def _read(tree: HostTree, journal: HostJournal, path: str, *, keep: bool, racy_since: int) -> _Before | None:
    """One file before the command: kept (or only hashed), with the fingerprint of what was read."""
    try:
        fd, info = tree.open_regular(path)
    except OSError:
        return None
    try:
        content_id = journal.keep(fd, info.st_size) if keep else content_id_of_fd(fd, info.st_size)
    finally:
        os.close(fd)
    found = _fingerprint(info)
    return _Before(found, content_id, keep, max(found[2], found[3]) >= racy_since)


def _apart_from(changes: list[Change], concurrent: Mapping[str, str | None]) -> list[Change]:
    """Leave out what workspacefs's own entries already tell; mark a path both changed as not kept."""
    if not concurrent:
        return changes
    kept: list[Change] = []
    for change in changes:
        if change.path not in concurrent:
            kept.append(change)
        elif concurrent[change.path] != change.after:  # what it replaced was the other change's result
            kept.append(Change(change.path, NOT_KEPT, change.after, change.size_before, change.size_after))
    return kept


def _ordered(changes: list[Change]) -> list[Change]:
    """What was there before, children before their directory, then what is new, parents first: an undo puts
    changes back last first, so it deletes new files before their new directories and remakes a removed
    directory before the files it held."""
    changes.sort(key=lambda change: (change.before is None, change.path.split("/")))
    replaced = [change for change in changes if change.before is not None]
    replaced.reverse()
    return replaced + [change for change in changes if change.before is None]
