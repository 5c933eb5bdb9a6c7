"""The ``SnapshotStore`` protocol with an in-process and a directory store, and retention.

``FilesystemSnapshot`` (the value) lives in ``results.py`` with the other values, so the protocols can
name it; it is re-exported here.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol, runtime_checkable
from uuid import UUID

from workspacefs.errors import AmbiguousSnapshotError, SnapshotNotFoundError
from workspacefs.results import FilesystemSnapshot

__all__ = [
    "DirectorySnapshotStore",
    "FilesystemSnapshot",
    "InMemorySnapshotStore",
    "SnapshotRetentionPolicy",
    "SnapshotStore",
    "find_snapshot",
    "select_prunable",
]

MIN_ID_PREFIX = 4
"""The shortest id prefix :func:`find_snapshot` accepts (shorter ones match too much by chance)."""


@dataclass(frozen=True, slots=True)
class SnapshotRetentionPolicy:
    """Which snapshots a store keeps.

    The newest ``max_count`` prunable snapshots survive; with ``max_age_hours`` older ones go too.
    With ``keep_tagged`` a tagged snapshot is never pruned and does not count toward ``max_count``.
    """

    max_count: int = 10
    max_age_hours: float | None = None
    keep_tagged: bool = True

    def __post_init__(self) -> None:
        if self.max_count < 0:
            raise ValueError("max_count must not be negative")
        if self.max_age_hours is not None and self.max_age_hours < 0:
            raise ValueError("max_age_hours must not be negative")


def select_prunable(
    snapshots: Sequence[FilesystemSnapshot],
    policy: SnapshotRetentionPolicy,
    *,
    now: datetime | None = None,
) -> list[FilesystemSnapshot]:
    """The snapshots ``policy`` would remove, oldest first. Shared by every store."""
    now = now or datetime.now(UTC)
    candidates = [s for s in snapshots if not (policy.keep_tagged and s.tag is not None)]
    candidates.sort(key=lambda s: s.created_at, reverse=True)
    doomed = candidates[policy.max_count :]
    if policy.max_age_hours is not None:
        cutoff = now - timedelta(hours=policy.max_age_hours)
        doomed += [s for s in candidates[: policy.max_count] if s.created_at < cutoff]
    doomed.sort(key=lambda s: s.created_at)
    return doomed


def find_snapshot(
    snapshots: Iterable[FilesystemSnapshot], wanted: str, *, min_prefix: int = MIN_ID_PREFIX
) -> FilesystemSnapshot:
    """The snapshot ``wanted`` names: its id, else its tag (the newest with that tag), else a unique id
    prefix of at least ``min_prefix`` characters. One rule for the CLI, the REST API and the model's tools.

    Raises:
        SnapshotNotFoundError: nothing matches.
        AmbiguousSnapshotError: the prefix matches several ids (the message lists them).
    """
    found = list(snapshots)
    wanted = wanted.strip()
    for snapshot in found:
        if str(snapshot.snapshot_id) == wanted.lower():
            return snapshot
    tagged = sorted((s for s in found if s.tag == wanted), key=lambda s: s.created_at)
    if tagged:
        return tagged[-1]
    prefix = wanted.lower()
    prefixed = [s for s in found if str(s.snapshot_id).startswith(prefix)] if len(prefix) >= min_prefix else []
    if len(prefixed) == 1:
        return prefixed[0]
    if prefixed:
        names = ", ".join(str(s.snapshot_id) for s in prefixed[:5])
        raise AmbiguousSnapshotError(f"{wanted!r} starts {len(prefixed)} snapshot ids ({names}); give more of it")
    raise SnapshotNotFoundError(f"No snapshot {wanted!r} (by id, tag or id prefix of {min_prefix}+ characters)")


@runtime_checkable
class SnapshotStore(Protocol):
    """Where a filesystem keeps its snapshots."""

    def save(self, snapshot: FilesystemSnapshot) -> None:
        """Persist a snapshot."""
        ...

    def load(self, snapshot_id: UUID) -> FilesystemSnapshot:
        """Retrieve a snapshot; ``SnapshotNotFoundError`` if unknown."""
        ...

    def list(self) -> Sequence[FilesystemSnapshot]:
        """All stored snapshots, oldest first."""
        ...

    def delete(self, snapshot_id: UUID) -> None:
        """Remove a snapshot; ``SnapshotNotFoundError`` if unknown."""
        ...

    def prune(self, policy: SnapshotRetentionPolicy) -> int:
        """Apply the policy; return how many snapshots were removed."""
        ...


class InMemorySnapshotStore:
    """A thread-safe store that lives as long as the process."""

    def __init__(self) -> None:
        self._snapshots: dict[UUID, FilesystemSnapshot] = {}
        self._lock = threading.Lock()

    def save(self, snapshot: FilesystemSnapshot) -> None:
        """Persist a snapshot (replacing one with the same id)."""
        with self._lock:
            self._snapshots[snapshot.snapshot_id] = snapshot

    def load(self, snapshot_id: UUID) -> FilesystemSnapshot:
        """Retrieve a snapshot by id."""
        with self._lock:
            try:
                return self._snapshots[snapshot_id]
            except KeyError:
                raise SnapshotNotFoundError(f"No snapshot with id {snapshot_id}") from None

    def list(self) -> Sequence[FilesystemSnapshot]:
        """All snapshots, oldest first."""
        with self._lock:
            return sorted(self._snapshots.values(), key=lambda s: s.created_at)

    def delete(self, snapshot_id: UUID) -> None:
        """Remove a snapshot."""
        with self._lock:
            if self._snapshots.pop(snapshot_id, None) is None:
                raise SnapshotNotFoundError(f"No snapshot with id {snapshot_id}")

    def prune(self, policy: SnapshotRetentionPolicy) -> int:
        """Apply the retention policy."""
        with self._lock:
            doomed = select_prunable(list(self._snapshots.values()), policy)
            for snapshot in doomed:
                del self._snapshots[snapshot.snapshot_id]
            return len(doomed)


class DirectorySnapshotStore:
    """Snapshots kept as one JSON file each in a directory, so another process can find them.

    ``on_delete`` is told about every snapshot that goes (by :meth:`delete` or :meth:`prune`), for
    a backend to drop the data behind it.
    """

    def __init__(self, directory: str | os.PathLike[str], *, on_delete: Callable[[UUID], None] | None = None) -> None:
        self._directory = Path(directory)
        self._directory.mkdir(parents=True, exist_ok=True)
        self._on_delete = on_delete
        self._lock = threading.Lock()

    def _file(self, snapshot_id: UUID) -> Path:
        return self._directory / f"{snapshot_id}.json"

    def save(self, snapshot: FilesystemSnapshot) -> None:
        """Persist a snapshot's metadata atomically."""
        target = self._file(snapshot.snapshot_id)
        temp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        temp.write_text(json.dumps(snapshot.to_dict(), indent=1), encoding="utf-8")
        os.replace(temp, target)

    def load(self, snapshot_id: UUID) -> FilesystemSnapshot:
        """A snapshot by id; ``SnapshotNotFoundError`` if unknown."""
        try:
            text = self._file(snapshot_id).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"No snapshot with id {snapshot_id}") from None
        return FilesystemSnapshot.from_dict(json.loads(text))

    def list(self) -> Sequence[FilesystemSnapshot]:
        """Every snapshot, oldest first (unreadable files are skipped)."""
        found = []
        for file in self._directory.glob("*.json"):
            try:
                found.append(FilesystemSnapshot.from_dict(json.loads(file.read_text(encoding="utf-8"))))
            except (OSError, ValueError, KeyError):
                continue
        return sorted(found, key=lambda s: s.created_at)

    def set_aside(self, snapshot_id: UUID, directory: Path) -> bool:
        """Move a snapshot's record into ``directory``: no longer listed or loaded, its data kept (``on_delete`` is
        not told); whether it was here."""
        directory.mkdir(parents=True, exist_ok=True)
        source = self._file(snapshot_id)
        try:
            os.replace(source, directory / source.name)
        except FileNotFoundError:
            return False
        return True

    def delete(self, snapshot_id: UUID) -> None:
        """Remove a snapshot; ``SnapshotNotFoundError`` if unknown."""
        try:
            self._file(snapshot_id).unlink()
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"No snapshot with id {snapshot_id}") from None
        if self._on_delete is not None:
            self._on_delete(snapshot_id)

    def prune(self, policy: SnapshotRetentionPolicy) -> int:
        """Apply the retention policy; return how many snapshots went."""
        with self._lock:
            doomed = select_prunable(self.list(), policy)
            for snapshot in doomed:
                try:
                    self.delete(snapshot.snapshot_id)
                except SnapshotNotFoundError:
                    continue  # another process pruned it first
            return len(doomed)
