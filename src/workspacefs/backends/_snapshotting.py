"""Snapshots, written once over a backend's snapshot hooks: metadata, lineage, the catalogue, diff.

Every snapshot's metadata is built here, in one place: its id, time, tag, kind, and ``parent_id``
— the snapshot the captured state descends from, which is the newest snapshot this filesystem object
took or restored (``None`` before either; the same rule on every backend). A backend only keeps the
state (``_capture``), brings it back (``_restore_state``), lists and drops what it keeps, and maps a
state to content fingerprints (``_manifest``); ``diff`` compares two such maps.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from workspacefs.backends._history import HistoryMixin
from workspacefs.errors import SnapshotIncompatibleError
from workspacefs.paths import check_text
from workspacefs.results import FilesystemDiff, FilesystemSnapshot

__all__ = ["SnapshotMixin"]

_MISSING = object()


class SnapshotMixin(HistoryMixin):
    """``snapshot``, ``restore``, ``diff``, ``snapshots`` and ``delete_snapshot`` for every backend."""

    def _snapshot_root(self) -> str:
        """What ``FilesystemSnapshot.root_path`` records (the host directory, a session …)."""
        return "/"

    def _check_compatible(self, snapshot: FilesystemSnapshot) -> None:
        if not isinstance(snapshot, FilesystemSnapshot):
            raise TypeError(f"expected a FilesystemSnapshot, not {type(snapshot).__name__}")
        if snapshot.backend != self.backend_name:
            raise SnapshotIncompatibleError(
                f"Snapshot {snapshot.snapshot_id} was taken by a {snapshot.backend!r} filesystem and "
                f"cannot be restored on a {self.backend_name!r} filesystem"
            )

    def snapshot(self, *, tag: str | None = None) -> FilesystemSnapshot:
        """Capture the current state (allowed on a read-only filesystem).

        Raises:
            SnapshotCreationError: the state could not be captured.
        """
        if tag is not None and not isinstance(tag, str):
            raise TypeError(f"tag must be a str or None, not {type(tag).__name__}")
        if tag is not None:
            check_text("tag", tag)
        draft = FilesystemSnapshot(
            snapshot_id=uuid.uuid4(),
            created_at=datetime.now(UTC),
            backend=self.backend_name,
            root_path=self._snapshot_root(),
            tag=tag,
            parent_id=self._head,
        )
        taken = self._capture(draft)
        if (taken.snapshot_id, taken.parent_id, taken.tag) != (draft.snapshot_id, draft.parent_id, draft.tag):
            raise AssertionError(f"{type(self).__name__}._capture changed the snapshot's identity")
        self._head = taken.snapshot_id
        return taken

    def restore(self, snapshot: FilesystemSnapshot) -> None:
        """Return to ``snapshot``: additions, modifications and deletions since are undone.

        Raises:
            SnapshotIncompatibleError: taken by another kind of filesystem.
            SnapshotNotFoundError: the snapshot was deleted (or belongs to another workspace).
            ReadOnlyError: the filesystem is read-only.
            QuotaExceededError: the snapshot holds more than the quota allows (and more than now).
        """
        self._check_compatible(snapshot)
        self._writable("/")
        with self._restore_guard(snapshot):
            try:
                with self._journaled("restore", detail=str(snapshot.snapshot_id)):
                    self._restore_state(snapshot)
            finally:
                self._state_replaced()
        self._current_snapshot_id = self._head = snapshot.snapshot_id

    def diff(self, base: FilesystemSnapshot, target: FilesystemSnapshot | None = None) -> FilesystemDiff:
        """Files added, modified (by content) and deleted from ``base`` to ``target`` (``None``: now)."""
        self._check_compatible(base)
        if target is not None:
            self._check_compatible(target)
        return self._diff(base, target)

    def _diff(self, base: FilesystemSnapshot, target: FilesystemSnapshot | None) -> FilesystemDiff:
        """Compare two manifests (a backend that can compare in its store overrides this)."""
        before = self._manifest(base)
        after = self._manifest(target)
        added = sorted(p for p in after if p not in before)
        deleted = sorted(p for p in before if p not in after)
        modified: builtins.list[str] = []
        unchanged = 0
        for file, fingerprint in after.items():
            old = before.get(file, _MISSING)
            if old is _MISSING:
                continue
            if old is fingerprint or old == fingerprint:
                unchanged += 1
            else:
                modified.append(file)
        modified.sort()
        return FilesystemDiff(tuple(added), tuple(modified), tuple(deleted), unchanged)

    def snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots this filesystem keeps, oldest first (for a host directory or a database, also
        those other processes took)."""
        return list(self._kept_snapshots())

    def delete_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        """Forget a snapshot; content only it held is released.

        Raises:
            SnapshotNotFoundError: it is not (or no longer) kept here.
            SnapshotIncompatibleError: taken by another kind of filesystem.
        """
        self._check_compatible(snapshot)
        self._drop_snapshot(snapshot)
        if self._head == snapshot.snapshot_id:  # the lineage continues from what it descended from
            self._head = snapshot.parent_id

    @staticmethod
    def _completed(
        draft: FilesystemSnapshot,
        *,
        file_count: int,
        total_bytes: int,
        strategy: str,
        commit_ref: str | None = None,
        git_dir: str | None = None,
        payload: object = None,
    ) -> FilesystemSnapshot:
        """``draft`` with what a backend captured (counts, strategy, references, payload)."""
        return FilesystemSnapshot(
            draft.snapshot_id,
            draft.created_at,
            draft.backend,
            draft.root_path,
            draft.tag,
            draft.parent_id,
            file_count,
            total_bytes,
            commit_ref,
            git_dir,
            strategy,
            payload,
        )
