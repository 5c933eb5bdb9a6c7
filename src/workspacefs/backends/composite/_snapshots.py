"""Snapshots of a ``CompositeFilesystem``: one id for a snapshot of every writable mount, restored together.

Each writable mount takes its own snapshot, tagged ``composite/<id>/<parent id>/<tag>``: the tag is the
record, so the composite keeps no state of its own and another process that mounts the same filesystems
lists, diffs and restores the same snapshots. The composite snapshot also carries its parts (its payload),
so a mount that keeps a snapshot only while someone holds it (memory) keeps it as long as the composite
snapshot is held. Read-only mounts cannot change through the composite and are
left out. A writable mount that cannot snapshot makes ``snapshot()`` fail, naming it, before any is taken.
Restore first finds every mount's part (naming any mount that lacks one, before anything changes), then
restores the mounts one by one; mounts are separate stores, so this is not one transaction.
"""

from __future__ import annotations

import json
import uuid
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

from workspacefs.backends._core import Fingerprint
from workspacefs.backends._snapshotting import SnapshotMixin
from workspacefs.backends.composite._mounts import Mounted
from workspacefs.errors import (
    SnapshotCreationError,
    SnapshotNotFoundError,
    SnapshotRestoreError,
    UnsupportedOperationError,
)
from workspacefs.protocol import SnapshotableFilesystem
from workspacefs.results import FilesystemDiff, FilesystemSnapshot

__all__ = ["TAG_PREFIX", "CompositeSnapshots"]

TAG_PREFIX = "composite/"
"""How the snapshots a mount takes for a composite are tagged: ``composite/<id>/<parent id or ->/<tag>``."""


@dataclass(frozen=True, slots=True)
class _Part:
    """One mount's snapshot within a composite snapshot, and what its tag records."""

    mounted: Mounted
    snapshot: FilesystemSnapshot
    parent_id: uuid.UUID | None
    tag: str | None


def _tag(snapshot_id: uuid.UUID, parent_id: uuid.UUID | None, tag: str | None) -> str:
    return f"{TAG_PREFIX}{snapshot_id}/{parent_id or '-'}/{tag or ''}"


def _parse(tag: str | None) -> tuple[uuid.UUID, uuid.UUID | None, str | None] | None:
    """``(composite id, parent id, user tag)`` from a mount snapshot's tag, ``None`` if not a composite's."""
    if not tag or not tag.startswith(TAG_PREFIX):
        return None
    fields = tag[len(TAG_PREFIX) :].split("/", 2)
    if len(fields) != 3:
        return None
    try:
        return uuid.UUID(fields[0]), None if fields[1] == "-" else uuid.UUID(fields[1]), fields[2] or None
    except ValueError:
        return None


class CompositeSnapshots(SnapshotMixin):
    """The snapshot hooks over the mounts' own snapshots."""

    @abstractmethod
    def _mounted_for_snapshots(self) -> Sequence[Mounted]:
        """Every mount."""

    def _snapshotting(self) -> list[tuple[Mounted, SnapshotableFilesystem]]:
        """The writable mounts, each able to snapshot (``UnsupportedOperationError`` naming one that is not)."""
        found: list[tuple[Mounted, SnapshotableFilesystem]] = []
        for mounted in self._mounted_for_snapshots():
            if mounted.fs.read_only:
                continue
            if not mounted.fs.capabilities.snapshots:
                raise UnsupportedOperationError(
                    f"The filesystem mounted at {mounted.spelled} cannot take snapshots; mount it read-only "
                    "or leave it out to snapshot the composite"
                )
            found.append((mounted, cast(SnapshotableFilesystem, mounted.fs)))
        return found

    def _parts(self, snapshot: FilesystemSnapshot) -> dict[str, _Part]:
        """Each writable mount's part of one composite snapshot, by mount point: those it carries, else
        those the mounts list."""
        carried = snapshot.payload if isinstance(snapshot.payload, dict) else {}
        parts: dict[str, _Part] = {}
        for mounted, fs in self._snapshotting():
            candidates = [carried[mounted.spelled]] if mounted.spelled in carried else fs.snapshots()
            for kept in candidates:
                parsed = _parse(kept.tag)
                if parsed is not None and parsed[0] == snapshot.snapshot_id:
                    parts[mounted.point] = _Part(mounted, kept, parsed[1], parsed[2])
        return parts

    def _complete_parts(self, snapshot: FilesystemSnapshot, doing: str) -> dict[str, _Part]:
        parts = self._parts(snapshot)
        if not parts:
            raise SnapshotNotFoundError(f"No snapshot {snapshot.snapshot_id} in any mount of this composite")
        lacking = [mounted.spelled for mounted, _ in self._snapshotting() if mounted.point not in parts]
        if lacking:
            raise SnapshotRestoreError(
                f"Snapshot {snapshot.snapshot_id} has no part for the mount(s) {', '.join(lacking)} (mounted "
                f"after it was taken, or their snapshot was deleted), so it cannot be {doing}; nothing was changed"
            )
        return parts

    # --- the hooks -----------------------------------------------------------------------------------

    def _capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        try:
            mounts = self._snapshotting()
        except UnsupportedOperationError as exc:
            raise SnapshotCreationError(str(exc)) from None
        taken: list[tuple[Mounted, SnapshotableFilesystem, FilesystemSnapshot]] = []
        try:
            for mounted, fs in mounts:
                taken.append((mounted, fs, fs.snapshot(tag=_tag(draft.snapshot_id, draft.parent_id, draft.tag))))
        except Exception as exc:
            for _, fs, part in taken:
                fs.delete_snapshot(part)
            failed = mounts[len(taken)][0].spelled
            raise SnapshotCreationError(f"The mount {failed} could not take its snapshot: {exc}") from exc
        first = min((part.created_at for _, _, part in taken), default=draft.created_at)
        completed = self._completed(
            draft,
            file_count=sum(part.file_count for _, _, part in taken),
            total_bytes=sum(part.total_bytes for _, _, part in taken),
            strategy="composite",
            commit_ref=json.dumps({m.spelled: str(part.snapshot_id) for m, _, part in taken}, sort_keys=True),
            payload={m.spelled: part for m, _, part in taken},
        )
        return replace(completed, created_at=first)  # the time the listing shows later (its first part's)

    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        parts = self._complete_parts(snapshot, "restored")
        done: list[str] = []
        for part in parts.values():
            fs = cast(SnapshotableFilesystem, part.mounted.fs)
            try:
                fs.restore(part.snapshot)
            except Exception as exc:
                restored = f"; already restored: {', '.join(done)}" if done else ""
                raise SnapshotRestoreError(
                    f"Restoring {part.mounted.spelled} failed ({exc}){restored}. Restore again to finish"
                ) from exc
            done.append(part.mounted.spelled)

    def _diff(self, base: FilesystemSnapshot, target: FilesystemSnapshot | None) -> FilesystemDiff:
        """Each mount's own diff between its parts (or its current files), under its mount point."""
        befores = self._complete_parts(base, "compared")
        afters = None if target is None else self._complete_parts(target, "compared")
        added: list[str] = []
        modified: list[str] = []
        deleted: list[str] = []
        unchanged = 0
        for point, part in befores.items():
            fs = cast(SnapshotableFilesystem, part.mounted.fs)
            change = fs.diff(part.snapshot, None if afters is None else afters[point].snapshot)
            added += [part.mounted.outer(p) for p in change.added]
            modified += [part.mounted.outer(p) for p in change.modified]
            deleted += [part.mounted.outer(p) for p in change.deleted]
            unchanged += change.unchanged_count
        return FilesystemDiff(tuple(sorted(added)), tuple(sorted(modified)), tuple(sorted(deleted)), unchanged)

    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        """Not used: :meth:`_diff` asks each mount for its own diff (a mount's manifest is its own)."""
        raise UnsupportedOperationError("A composite compares snapshots mount by mount (see _diff)")

    def _kept_snapshots(self) -> Sequence[FilesystemSnapshot]:
        grouped: dict[uuid.UUID, list[_Part]] = {}
        for mounted, fs in self._snapshotting():
            for kept in fs.snapshots():
                parsed = _parse(kept.tag)
                if parsed is not None:
                    grouped.setdefault(parsed[0], []).append(_Part(mounted, kept, parsed[1], parsed[2]))
        found = [self._record(snapshot_id, parts) for snapshot_id, parts in grouped.items()]
        return sorted(found, key=lambda snapshot: snapshot.created_at)

    def _record(self, snapshot_id: uuid.UUID, parts: Sequence[_Part]) -> FilesystemSnapshot:
        first = min(parts, key=lambda part: part.snapshot.created_at)
        return FilesystemSnapshot(
            snapshot_id=snapshot_id,
            created_at=first.snapshot.created_at,
            backend=self.backend_name,
            root_path=self._snapshot_root(),
            tag=first.tag,
            parent_id=first.parent_id,
            file_count=sum(part.snapshot.file_count for part in parts),
            total_bytes=sum(part.snapshot.total_bytes for part in parts),
            commit_ref=json.dumps({p.mounted.spelled: str(p.snapshot.snapshot_id) for p in parts}, sort_keys=True),
            strategy="composite",
            payload={p.mounted.spelled: p.snapshot for p in parts},
        )

    def _drop_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        parts = self._parts(snapshot)
        if not parts:
            raise SnapshotNotFoundError(f"No snapshot {snapshot.snapshot_id} in any mount of this composite")
        for part in parts.values():
            fs = cast(SnapshotableFilesystem, part.mounted.fs)
            fs.delete_snapshot(part.snapshot)
