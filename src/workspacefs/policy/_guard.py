"""``GuardedFilesystem``: a filesystem seen through a :class:`Policy` — every read, write, delete and command is
checked against the rules before it reaches the filesystem beneath.

Checks run on canonical paths (after the one validator) and cover what an operation really touches: a
recursive delete or a move of a directory checks every entry below it (so renaming ``.git`` away, or a
directory holding ``hooks/`` onto ``.git``, is caught), a restore checks every file it would change, a grep
over a directory skips files the policy keeps from reading. Names stay visible (``list``, ``glob``,
``stat``); contents and changes are what the policy governs.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, cast
from uuid import UUID

from workspacefs.capabilities import Capabilities
from workspacefs.errors import caller_paths
from workspacefs.history import Actor, ChangeWatcher, JournalEntry
from workspacefs.merge import MergeResult
from workspacefs.paths import DEFAULT_MAX_GREP_MATCHES, ROOT, check_non_negative, is_within, normalize_path
from workspacefs.policy._rules import Checks, Operation
from workspacefs.protocol import (
    ByteReader,
    BytesLike,
    ByteWriter,
    CommandRunner,
    ConditionalWrites,
    Filesystem,
    MergeableFilesystem,
    SnapshotableFilesystem,
    TextReader,
    VersionedContent,
)
from workspacefs.quota import Quota, Usage
from workspacefs.results import (
    ExecResult,
    FileEntry,
    FileStat,
    FilesystemDiff,
    FilesystemSnapshot,
    GlobMatch,
    GrepMatch,
    ReadBytesResult,
    ReadResult,
    WriteMode,
    WriteResult,
)

__all__ = ["GuardedFilesystem"]


class GuardedFilesystem:
    """``inner`` through ``policy``. Offers exactly what ``inner`` offers (its ``capabilities``); never closes it.

    Code that holds :attr:`unguarded` can bypass the policy: hand a model (or its tools) only the guarded view.
    """

    def __init__(self, inner: Filesystem, policy: Checks) -> None:
        self._inner = inner
        self.policy = policy

    @property
    def unguarded(self) -> Filesystem:
        """The filesystem beneath the policy."""
        return self._inner

    # --- properties --------------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The filesystem's root."""
        return self._inner.root

    @property
    def read_only(self) -> bool:
        """True if the filesystem refuses every mutation."""
        return self._inner.read_only

    @property
    def mount_point(self) -> str | None:
        """The prefix paths may carry."""
        return self._inner.mount_point

    @property
    def capabilities(self) -> Capabilities:
        """What the filesystem beneath can do; the view offers the same."""
        return self._inner.capabilities

    @property
    def quota(self) -> Quota | None:
        """The quota the filesystem beneath enforces."""
        limits: Quota | None = cast(Any, self._inner).quota  # every BaseFilesystem has one (maybe None)
        return limits

    def usage(self) -> Usage:
        """What the filesystem beneath holds (bytes, files)."""
        held: Usage = cast(Any, self._inner).usage()
        return held

    # --- checks ------------------------------------------------------------------------------------------

    def _canonical(self, path: str) -> str:
        return normalize_path(path, mount_point=self._inner.mount_point)

    def _below(self, norm: str, operation: Operation) -> builtins.list[str]:
        """Every entry below ``norm`` (nothing when no rule could object to ``operation``, or it is a file)."""
        if not self.policy.restricts(operation):
            return []
        return [entry.path for entry in self._inner.walk(norm or ".")]

    def _check(self, operation: Operation, path: str, *, tree: bool = False, detail: str | None = None) -> str:
        """Check ``operation`` on ``path`` (and with ``tree`` on everything below it); the canonical path."""
        norm = self._canonical(path)
        if self.policy.restricts(operation):
            if not tree and self.policy.decide(operation, norm).rule is None:
                return norm  # no rule speaks about this path (what almost every path is): nothing to ask
            with caller_paths({norm: path}):
                self.policy.check(operation, [norm, *(self._below(norm, operation) if tree else ())], detail=detail)
        return norm

    def _check_transfer(self, src: str, dst: str, *, move: bool, overwrite: bool) -> None:
        """A move deletes the source tree and writes it at the destination; a copy reads it and writes it;
        either removes what it overwrites."""
        src_norm, dst_norm = self._canonical(src), self._canonical(dst)
        below = [entry.path for entry in self._inner.walk(src_norm)] if src_norm and self._restricts_any() else []
        landed = [dst_norm + path[len(src_norm) :] for path in below if is_within(path, src_norm)]
        with caller_paths({src_norm: src, dst_norm: dst}):
            self.policy.check("delete" if move else "read", [src_norm, *below], target=src_norm)
            if overwrite and self._inner.exists(dst_norm):
                self.policy.check("delete", [dst_norm, *self._below(dst_norm, "delete")], target=dst_norm)
            self.policy.check("write", [dst_norm, *landed], target=dst_norm)

    def _restricts_any(self) -> bool:
        return any(self.policy.restricts(op) for op in ("read", "write", "delete"))

    # --- reading -----------------------------------------------------------------------------------------

    def open_read(self, path: str) -> ByteReader:
        """As ``Filesystem.open_read``, if the policy allows reading ``path``."""
        self._check("read", path)
        return self._inner.open_read(path)

    def open_text(self, path: str, *, encoding: str = "utf-8") -> TextReader:
        """As ``Filesystem.open_text``, if the policy allows reading ``path``."""
        self._check("read", path)
        return self._inner.open_text(path, encoding=encoding)

    def read(self, path: str, *, offset: int = 0, limit: int | None = None, encoding: str = "utf-8") -> ReadResult:
        """As ``Filesystem.read``, if the policy allows reading ``path``."""
        self._check("read", path)
        return self._inner.read(path, offset=offset, limit=limit, encoding=encoding)

    def read_bytes(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadBytesResult:
        """As ``Filesystem.read_bytes``, if the policy allows reading ``path``."""
        self._check("read", path)
        return self._inner.read_bytes(path, offset=offset, limit=limit)

    def exists(self, path: str) -> bool:
        """As ``Filesystem.exists`` (names are not governed)."""
        return self._inner.exists(path)

    def stat(self, path: str) -> FileStat:
        """As ``Filesystem.stat`` (metadata is not governed)."""
        return self._inner.stat(path)

    def list(self, path: str = ".") -> Sequence[FileEntry]:
        """As ``Filesystem.list``."""
        return self._inner.list(path)

    def list_stats(self, path: str = ".") -> Sequence[FileStat]:
        """The metadata of a directory's entries (as ``BaseFilesystem.list_stats``)."""
        stats: Sequence[FileStat] = cast(Any, self._inner).list_stats(path)
        return stats

    def walk(self, path: str = ".") -> Iterator[FileEntry]:
        """As ``Filesystem.walk``."""
        return self._inner.walk(path)

    def glob(self, pattern: str, *, path: str = ".") -> Sequence[GlobMatch]:
        """As ``Filesystem.glob``."""
        return self._inner.glob(pattern, path=path)

    def grep(
        self, pattern: str, *, path: str = ".", glob: str | None = None, max_matches: int | None = None
    ) -> Sequence[GrepMatch]:
        """As ``Filesystem.grep``, without the files the policy keeps from reading (naming one such file as
        ``path`` is refused, or asked about, as a read of it is)."""
        if not self.policy.restricts("read"):
            return self._inner.grep(pattern, path=path, glob=glob, max_matches=max_matches)
        check_non_negative("max_matches", max_matches)
        limit = DEFAULT_MAX_GREP_MATCHES if max_matches is None else max_matches
        norm = self._canonical(path)
        if norm and self._inner.exists(norm) and self._inner.stat(norm).is_file:
            self._check("read", path)
        asked = limit
        while True:
            found = self._inner.grep(pattern, path=path, glob=glob, max_matches=asked)
            kept = [m for m in found if self.policy.decide("read", m.path).action == "allow"]
            if len(found) < asked or len(kept) >= limit:
                return tuple(kept[:limit])
            asked = max(asked * 2, limit + len(found) - len(kept))  # protected files took places: ask for more

    # --- writing -----------------------------------------------------------------------------------------

    def open_write(self, path: str, *, mode: WriteMode = "overwrite", create_parents: bool = True) -> ByteWriter:
        """As ``Filesystem.open_write``, if the policy allows writing ``path``."""
        self._check("write", path)
        return self._inner.open_write(path, mode=mode, create_parents=create_parents)

    def write(
        self, path: str, content: str, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult:
        """As ``Filesystem.write``, if the policy allows writing ``path``."""
        self._check("write", path)
        return self._inner.write(path, content, mode=mode, create_parents=create_parents)

    def write_bytes(
        self, path: str, content: BytesLike, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult:
        """As ``Filesystem.write_bytes``, if the policy allows writing ``path``."""
        self._check("write", path)
        return self._inner.write_bytes(path, content, mode=mode, create_parents=create_parents)

    def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        """As ``Filesystem.mkdir``, if the policy allows writing ``path``."""
        self._check("write", path)
        self._inner.mkdir(path, parents=parents, exist_ok=exist_ok)

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """As ``Filesystem.delete``, if the policy allows deleting ``path`` and (recursively) all below it."""
        self._check("delete", path, tree=recursive)
        self._inner.delete(path, recursive=recursive)

    def move(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """As ``Filesystem.move``: deleting every entry of ``src`` and writing each at ``dst`` must be allowed."""
        self._check_transfer(src, dst, move=True, overwrite=overwrite)
        self._inner.move(src, dst, overwrite=overwrite)

    def copy(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """As ``Filesystem.copy``: reading every entry of ``src`` and writing each at ``dst`` must be allowed."""
        self._check_transfer(src, dst, move=False, overwrite=overwrite)
        self._inner.copy(src, dst, overwrite=overwrite)

    def set_read_only(self, path: str, read_only: bool = True) -> None:
        """Change a file's read-only flag (where ``capabilities.file_read_only``), if writing it is allowed."""
        self._check("write", path)
        cast(Any, self._inner).set_read_only(path, read_only)  # only offered where the capability says

    # --- conditional writes --------------------------------------------------------------------------------

    def _conditional(self) -> ConditionalWrites:
        return cast(ConditionalWrites, self._inner)  # offered where capabilities.conditional_writes says

    def content_id(self, path: str) -> str:
        """As ``ConditionalWrites.content_id``, if reading ``path`` is allowed."""
        self._check("read", path)
        return self._conditional().content_id(path)

    def open_versioned(self, path: str) -> VersionedContent:
        """As ``ConditionalWrites.open_versioned``, if reading ``path`` is allowed."""
        self._check("read", path)
        return self._conditional().open_versioned(path)

    def write_bytes_if(
        self, path: str, content: BytesLike, *, expect: str, read_only: bool | None = None
    ) -> WriteResult:
        """As ``ConditionalWrites.write_bytes_if``, if writing ``path`` is allowed."""
        self._check("write", path)
        return self._conditional().write_bytes_if(path, content, expect=expect, read_only=read_only)

    def open_write_if(self, path: str, *, expect: str, read_only: bool | None = None) -> ByteWriter:
        """As ``ConditionalWrites.open_write_if``, if writing ``path`` is allowed."""
        self._check("write", path)
        return self._conditional().open_write_if(path, expect=expect, read_only=read_only)

    def set_read_only_if(self, path: str, read_only: bool, *, expect: str) -> None:
        """Change a file's read-only flag over content id ``expect`` (where ``capabilities.file_read_only``),
        if writing it is allowed."""
        self._check("write", path)
        cast(Any, self._inner).set_read_only_if(path, read_only, expect=expect)

    def create_bytes(self, path: str, content: BytesLike, *, read_only: bool = False) -> WriteResult:
        """Create a new file (read-only from the start if asked), if writing ``path`` is allowed."""
        self._check("write", path)
        created: WriteResult = cast(Any, self._inner).create_bytes(path, content, read_only=read_only)
        return created

    # --- snapshots -------------------------------------------------------------------------------------------

    def _snapshots(self) -> SnapshotableFilesystem:
        return cast(SnapshotableFilesystem, self._inner)  # offered where capabilities.snapshots says

    @property
    def current_snapshot_id(self) -> UUID | None:
        """As ``SnapshotableFilesystem.current_snapshot_id``."""
        return self._snapshots().current_snapshot_id

    def snapshot(self, *, tag: str | None = None) -> FilesystemSnapshot:
        """As ``SnapshotableFilesystem.snapshot`` (taking one changes no file)."""
        return self._snapshots().snapshot(tag=tag)

    def restore(self, snapshot: FilesystemSnapshot) -> None:
        """As ``SnapshotableFilesystem.restore``, if the policy allows every change it makes: deleting what was
        added since, writing what was changed or deleted since."""
        changes = self._snapshots().diff(snapshot)
        detail = f"restore snapshot {snapshot.tag or snapshot.snapshot_id}"
        if changes.added:
            self.policy.check("delete", changes.added, target=ROOT, detail=detail)
        if changes.modified or changes.deleted:
            self.policy.check("write", [*changes.modified, *changes.deleted], target=ROOT, detail=detail)
        self._snapshots().restore(snapshot)

    def diff(self, base: FilesystemSnapshot, target: FilesystemSnapshot | None = None) -> FilesystemDiff:
        """As ``SnapshotableFilesystem.diff`` (paths only)."""
        return self._snapshots().diff(base, target)

    def snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots the filesystem keeps."""
        kept: Sequence[FilesystemSnapshot] = cast(Any, self._inner).snapshots()  # where capabilities.snapshots
        return kept

    def delete_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        """Forget a kept snapshot (no file changes)."""
        cast(Any, self._inner).delete_snapshot(snapshot)

    def merge(
        self,
        base: FilesystemSnapshot,
        ours: FilesystemSnapshot,
        theirs: FilesystemSnapshot,
        *,
        markers: bool = False,
        tag: str | None = None,
    ) -> MergeResult:
        """As ``MergeableFilesystem.merge`` (where ``capabilities.merge``): it changes no file, so the policy is
        asked when the result is restored. A conflict's hunks are the file's lines, so (as ``grep`` leaves out
        such files) they are withheld where the policy does not simply allow reading the path: the conflict is
        named, its content is not (two snapshots of a rotated ``.env`` showed both secrets)."""
        merging = cast(MergeableFilesystem, self._inner)
        result = merging.merge(base, ours, theirs, markers=markers, tag=tag)
        if not self.policy.restricts("read") or not any(conflict.hunks for conflict in result.conflicts):
            return result
        withheld = " (its lines are not shown: the path policy does not let this caller read it)"
        conflicts = tuple(
            conflict
            if not conflict.hunks or self.policy.decide("read", self._canonical(conflict.path)).action == "allow"
            else dataclasses.replace(conflict, message=conflict.message + withheld, hunks=())
            for conflict in result.conflicts
        )
        return dataclasses.replace(result, conflicts=conflicts)

    def mergeable_snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots ``merge`` accepts (where ``capabilities.merge``)."""
        return cast(MergeableFilesystem, self._inner).mergeable_snapshots()

    def fork(self, snapshot: FilesystemSnapshot | None = None, **options: Any) -> GuardedFilesystem:
        """A fork of the filesystem beneath (where ``capabilities.fork``), under the same policy."""
        forked: Filesystem = cast(Any, self._inner).fork(snapshot, **options)
        view: GuardedFilesystem = self.policy.guard(forked)
        return view

    # --- history -------------------------------------------------------------------------------------------

    def _journaled(self) -> Any:
        return cast(Any, self._inner)  # offered where capabilities.history (and .watch) say

    def history(
        self,
        path: str | None = None,
        *,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> builtins.list[JournalEntry]:
        """As ``fs.history`` (entries name paths, as listings do; contents are what the policy governs)."""
        found: builtins.list[JournalEntry] = self._journaled().history(path, since=since, actor=actor, limit=limit)
        return found

    def history_entry(self, entry_id: int) -> JournalEntry:
        """As ``fs.history_entry``."""
        found: JournalEntry = self._journaled().history_entry(entry_id)
        return found

    def read_version(self, entry_id: int, path: str, *, side: str = "after") -> bytes:
        """As ``fs.read_version``, if the policy allows reading ``path``."""
        self._check("read", path)
        content: bytes = self._journaled().read_version(entry_id, path, side=side)
        return content

    def watch(self, path: str = "/", *, recursive: bool = True) -> ChangeWatcher:
        """As ``fs.watch`` (events name paths and content ids, never contents)."""
        watcher: ChangeWatcher = self._journaled().watch(path, recursive=recursive)
        return watcher

    def prune_history(self, *, before: datetime | None = None, keep: int | None = None) -> int:
        """As ``fs.prune_history`` (no file changes)."""
        dropped: int = self._journaled().prune_history(before=before, keep=keep)
        return dropped

    def grouped(self, operation: str) -> contextlib.AbstractContextManager[None]:
        """As ``fs.grouped`` (grouping changes nothing; each change inside is checked as it is made)."""
        opened: contextlib.AbstractContextManager[None] = self._journaled().grouped(operation)
        return opened

    def check_undo(
        self,
        entry_id: int | Sequence[int] | None = None,
        *,
        actor: str | Actor | None = None,
        last: int | None = None,
        force: bool = False,
    ) -> builtins.list[JournalEntry]:
        """As ``fs.check_undo``, refusing too where the policy would refuse the undo (see :meth:`undo`)."""
        ids = self._allowed_undo(entry_id, actor, last)
        if ids is None:  # the arguments are wrong, or name nothing: the filesystem says which
            found: builtins.list[JournalEntry] = self._journaled().check_undo(
                entry_id, actor=actor, last=last, force=force
            )
            return found
        checked: builtins.list[JournalEntry] = self._journaled().check_undo(ids, force=force)
        return checked

    def undo(
        self,
        entry_id: int | Sequence[int] | None = None,
        *,
        actor: str | Actor | None = None,
        last: int | None = None,
        force: bool = False,
    ) -> builtins.list[JournalEntry]:
        """As ``fs.undo``, if the policy allows every change putting the entries back makes: deleting what they
        created, writing what they changed or deleted, moving back what they moved. Each entry is checked and
        then undone by its id, newest first (so the entries checked are the entries undone), all or none."""
        ids = self._allowed_undo(entry_id, actor, last)
        if ids is None:
            undone: builtins.list[JournalEntry] = self._journaled().undo(entry_id, actor=actor, last=last, force=force)
            return undone
        made: builtins.list[JournalEntry] = self._journaled().undo(ids, force=force)
        return made

    def _allowed_undo(
        self, entry_id: int | Sequence[int] | None, actor: str | Actor | None, last: int | None
    ) -> builtins.list[int] | None:
        """The ids an undo with these arguments names, each checked against the policy (``None``: the
        arguments are wrong or name nothing, which the filesystem reports)."""
        inner = self._journaled()
        if entry_id is not None and actor is None and last is None:
            ids = [entry_id] if isinstance(entry_id, int) else list(entry_id)
            targets = [inner.history_entry(each) for each in ids]
        elif entry_id is None and actor is not None and (last is None or (isinstance(last, int) and last > 0)):
            targets = inner.history(actor=actor, limit=1 if last is None else last)
        else:
            targets = []
        if not targets:
            return None
        for target in targets:
            self._check_undo(target)
        return [target.entry_id for target in targets]

    def _check_undo(self, entry: JournalEntry) -> None:
        detail = f"undo journal entry {entry.entry_id} ({entry.operation})"
        for change in entry.changes:
            if change.from_path is not None:  # moved here: it goes back to where it came from
                self.policy.check("delete", [change.path], target=change.path, detail=detail)
                self.policy.check("write", [change.from_path], target=change.from_path, detail=detail)
                if change.before is not None:  # and what it replaced comes back
                    self.policy.check("write", [change.path], target=change.path, detail=detail)
            elif change.before is None:  # created: putting back deletes it
                self.policy.check("delete", [change.path], target=change.path, detail=detail)
            else:
                self.policy.check("write", [change.path], target=change.path, detail=detail)

    # --- commands ------------------------------------------------------------------------------------------

    def exec(self, cmd: str | Sequence[str], *, cwd: str | None = None, **options: Any) -> ExecResult:
        """As ``CommandRunner.exec`` (where ``capabilities.exec``), if the policy allows running it in ``cwd``."""
        shown = cmd if isinstance(cmd, str) else " ".join(cmd)
        self._check("exec", cwd or ".", detail=f"command: {shown}")
        return cast(CommandRunner, self._inner).exec(cmd, cwd=cwd, **options)

    # --- lifecycle -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Nothing to release: the view never owns the filesystem beneath (close that yourself)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GuardedFilesystem({self._inner!r}, {self.policy!r})"
