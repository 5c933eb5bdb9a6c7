"""``merge(base, ours, theirs)``, written once over two snapshot hooks a backend writes.

The merge decides file by file over the three snapshots' manifests (content fingerprints, so no content is
read for a file only one side changed): a side that left a file as the base had it takes the other side's;
both sides changing it alike is no conflict. Only a file both sides changed differently is read, from its
snapshots (``_snapshot_content``), and merged by line when it is text (:func:`workspacefs.merge.merge_lines`).

The result is a new snapshot, made by the backend from ``ours`` plus the merge's writes and deletions
(``_capture_merged``) without touching the live files: the caller looks at the conflicts and applies it with
``restore``. Where files carry a read-only flag (``capabilities.file_read_only``), the flag merges three-way on
its own, beside the content (:func:`merged_flag`). Snapshots of a fork are snapshots of the same family (memory:
any fork; SQL: sessions forked from one another; host: roots sharing a ``snapshot_dir``), so an agent's work on a
fork merges back into its parent.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from workspacefs.backends._core import Fingerprint
from workspacefs.backends._snapshotting import SnapshotMixin
from workspacefs.errors import UnsupportedOperationError
from workspacefs.merge import ConflictKind, MergeConflict, MergeResult, is_text, merge_lines
from workspacefs.paths import MAX_CONVENIENCE_BYTES, ancestors
from workspacefs.protocol import ByteReader
from workspacefs.results import FilesystemSnapshot

__all__ = ["MergeMixin", "SnapshotFile", "merged_flag"]

_MISSING: object = object()


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    """A file as one snapshot holds it: what the merge result takes unchanged from ``theirs`` (a backend
    points at the content it already keeps instead of copying bytes)."""

    snapshot: FilesystemSnapshot
    path: str


Written = bytes | SnapshotFile
"""What a merged path holds: new bytes (a line merge), or a file of another snapshot."""


def _same(a: object, b: object) -> bool:
    return a is b or (a is not _MISSING and b is not _MISSING and a == b)


@dataclass(frozen=True, slots=True)
class _Sides:
    """The three snapshots of a merge and their manifests."""

    base: FilesystemSnapshot
    ours: FilesystemSnapshot
    theirs: FilesystemSnapshot
    before: Mapping[str, Fingerprint]
    mine: Mapping[str, Fingerprint]
    yours: Mapping[str, Fingerprint]


class _Plan:
    """The merge decided path by path: what the result writes and deletes relative to ``ours``."""

    def __init__(self) -> None:
        self.writes: dict[str, Written] = {}
        self.deletes: set[str] = set()
        self.conflicts: builtins.list[MergeConflict] = []
        self.merged: builtins.list[str] = []

    def conflict(self, path: str, kind: ConflictKind, message: str) -> None:
        self.conflicts.append(MergeConflict(path, kind, message))


class MergeMixin(SnapshotMixin):
    """``merge`` for every backend whose ``capabilities.merge`` is set."""

    # --- hooks a backend writes ---------------------------------------------------------------------------

    def _snapshot_content(self, snapshot: FilesystemSnapshot, path: str) -> bytes | ByteReader:
        """The bytes of file ``path`` as ``snapshot`` holds it (a reader for a large file)."""
        raise UnsupportedOperationError(f"{type(self).__name__} cannot read files of a snapshot")

    def _capture_merged(
        self,
        draft: FilesystemSnapshot,
        start: FilesystemSnapshot,
        writes: Mapping[str, Written],
        deletes: Collection[str],
        *,
        read_only: Mapping[str, bool],
    ) -> FilesystemSnapshot:
        """Keep, under ``draft``'s id, the state of ``start`` with ``deletes`` removed (files, and directories
        left for a file to take their place) and ``writes`` written (missing parent directories made), then the
        read-only flag of each file in ``read_only`` set (only where ``capabilities.file_read_only``; it names
        every written file), without touching the live files; ``draft`` completed, as ``_capture`` returns it."""
        raise UnsupportedOperationError(f"{type(self).__name__} cannot make a snapshot from other snapshots")

    def _read_only_files(self, snapshot: FilesystemSnapshot) -> Collection[str]:
        """The files ``snapshot`` holds read-only (a backend with ``capabilities.file_read_only`` writes this)."""
        return frozenset()

    def mergeable_snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots :meth:`merge` and ``restore`` accept by name here, oldest first: this filesystem's, and
        where a backend keeps them together (SQL sessions, host roots sharing a snapshot directory) its forks'."""
        return self.snapshots()

    # --- the merge ------------------------------------------------------------------------------------------

    def merge(
        self,
        base: FilesystemSnapshot,
        ours: FilesystemSnapshot,
        theirs: FilesystemSnapshot,
        *,
        markers: bool = False,
        tag: str | None = None,
    ) -> MergeResult:
        """Three-way merge of snapshots of this filesystem or of its forks, into a new snapshot.

        File by file: a file one side left as ``base`` had it takes the other side's version; a text file
        both changed is merged by line (diff3); what cannot be merged is listed in ``conflicts`` and keeps
        ``ours`` (``markers=True``: a text file in conflict holds git-style conflict markers instead). The live
        files are not touched: ``fs.restore(result.snapshot)`` applies the result. Empty directories come from
        ``ours``.

        Raises:
            UnsupportedOperationError: this backend cannot merge (``capabilities.merge`` is false).
            SnapshotIncompatibleError: a snapshot of another kind of filesystem.
            SnapshotNotFoundError: a snapshot that is not kept here (or in this filesystem's family).
        """
        if not self.capabilities.merge:
            raise UnsupportedOperationError(f"{type(self).__name__} cannot merge snapshots")
        for snapshot in (base, ours, theirs):
            self._check_compatible(snapshot)
        if tag is not None and not isinstance(tag, str):
            raise TypeError(f"tag must be a str or None, not {type(tag).__name__}")
        sides = _Sides(base, ours, theirs, self._manifest(base), self._manifest(ours), self._manifest(theirs))
        mine = sides.mine
        plan = _Plan()
        for path in sorted(set(sides.before) | set(mine) | set(sides.yours)):
            self._merge_path(plan, path, sides, markers=markers)
        _settle_file_directory(plan, mine)
        draft = FilesystemSnapshot(
            snapshot_id=uuid.uuid4(),
            created_at=datetime.now(UTC),
            backend=self.backend_name,
            root_path=self._snapshot_root(),
            tag=tag,
            parent_id=ours.snapshot_id,
        )
        flags = self._merged_flags(sides, plan) if self.capabilities.file_read_only else {}
        taken = self._capture_merged(draft, ours, plan.writes, plan.deletes, read_only=flags)
        written = sorted(plan.writes)
        return MergeResult(
            snapshot=taken,
            conflicts=tuple(sorted(plan.conflicts, key=lambda c: c.path)),
            added=tuple(p for p in written if p not in mine),
            modified=tuple(p for p in written if p in mine),
            deleted=tuple(sorted(p for p in plan.deletes if p in mine)),
            merged=tuple(sorted(plan.merged)),
        )

    def _merge_path(
        self,
        plan: _Plan,
        path: str,
        sides: _Sides,
        *,
        markers: bool,
    ) -> None:
        """Decide one file (see :meth:`merge`)."""
        b, o, t = sides.before.get(path, _MISSING), sides.mine.get(path, _MISSING), sides.yours.get(path, _MISSING)
        if _same(o, t) or _same(b, t):
            return  # ours already holds the answer
        theirs = sides.theirs
        if _same(b, o):
            if t is _MISSING:
                plan.deletes.add(path)
            else:
                plan.writes[path] = SnapshotFile(theirs, path)
            return
        if o is _MISSING or t is _MISSING:
            gone = "ours" if o is _MISSING else "theirs"
            plan.conflict(path, "modify/delete", f"{path!r} was deleted by {gone} and changed by the other side")
            return
        base_data = b"" if b is _MISSING else self._merge_input(sides.base, path)
        ours_data, theirs_data = self._merge_input(sides.ours, path), self._merge_input(theirs, path)
        kind: ConflictKind = "add/add" if b is _MISSING else "content"
        if (
            base_data is None
            or ours_data is None
            or theirs_data is None
            or not (is_text(base_data) and is_text(ours_data) and is_text(theirs_data))
        ):
            plan.conflict(path, "binary", f"{path!r} is not text both sides can merge by line, and both changed it")
            return
        outcome = merge_lines(base_data, ours_data, theirs_data)
        if outcome.conflicts:
            count = len(outcome.conflicts)
            what = "added with different content" if kind == "add/add" else f"changed on the same lines ({count})"
            plan.conflicts.append(MergeConflict(path, kind, f"{path!r} was {what} by both sides", outcome.conflicts))
            if markers:
                plan.writes[path] = outcome.content
            return
        plan.writes[path] = outcome.content
        plan.merged.append(path)

    def _merged_flags(self, sides: _Sides, plan: _Plan) -> dict[str, bool]:
        """The read-only flag of every file the result writes, and of every other file of the result whose flag
        is not ours' (:func:`merged_flag`, path by path)."""
        before, mine, yours = (self._read_only_files(s) for s in (sides.base, sides.ours, sides.theirs))

        def flag(held: Mapping[str, Fingerprint], flagged: Collection[str], path: str) -> bool | None:
            return None if path not in held else path in flagged

        flags: dict[str, bool] = {}
        for path in (set(sides.mine) - plan.deletes) | set(plan.writes):
            ours = flag(sides.mine, mine, path)
            wanted = merged_flag(flag(sides.before, before, path), ours, flag(sides.yours, yours, path))
            if path in plan.writes or wanted != bool(ours):
                flags[path] = wanted
        return flags

    def _merge_input(self, snapshot: FilesystemSnapshot, path: str) -> bytes | None:
        """A file's whole content in a snapshot; ``None`` past the convenience cap (merged as binary)."""
        content = self._snapshot_content(snapshot, path)
        if isinstance(content, bytes):
            return content if len(content) <= MAX_CONVENIENCE_BYTES else None
        with content:
            if content.size > MAX_CONVENIENCE_BYTES:
                return None
            return content.read()


def merged_flag(base: bool | None, ours: bool | None, theirs: bool | None) -> bool:
    """A file's read-only flag in the merge result, three-way like content (``None``: no file on that side).

    A side that left the flag as the base had it takes the other side's; a side without the file has no say.
    Two sides that set it differently (only possible for a file both added) never conflict: the file is
    read-only, the safer of the two (a writable file wrongly locked costs one ``set_read_only``; a lock
    wrongly dropped lets the next write through).
    """
    if ours is None or theirs is None:
        return bool(theirs if ours is None else ours)
    if theirs in (ours, base):
        return ours
    if base == ours:
        return theirs
    return True


def _settle_file_directory(plan: _Plan, mine: Mapping[str, Fingerprint]) -> None:
    """Where the result would hold a file below another file (one side made a directory where the other has a
    file), keep ours: the file and what lies below it are reported as one ``file/directory`` conflict."""
    result = (set(mine) - plan.deletes) | set(plan.writes)
    for path in sorted(result):
        above = next((a for a in ancestors(path) if a in result), None)
        if above is None:
            continue
        if above in mine and path not in mine:  # ours has the file: drop theirs' below it
            plan.writes.pop(path, None)
            result.discard(path)
        elif above not in mine:  # ours has the directory: drop theirs' file
            plan.writes.pop(above, None)
            result.discard(above)
        else:
            continue
        if not any(c.path == above and c.kind == "file/directory" for c in plan.conflicts):
            plan.conflict(above, "file/directory", f"{above!r} is a file on one side and a directory on the other")
