"""snapshots.py: snapshot values, the in-process store and the retention policy."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from workspacefs import (
    FilesystemSnapshot,
    InMemorySnapshotStore,
    SnapshotNotFoundError,
    SnapshotRetentionPolicy,
    SnapshotStore,
)
from workspacefs.snapshots import select_prunable

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def _snapshot(age_hours: float, tag: str | None = None) -> FilesystemSnapshot:
    return FilesystemSnapshot(
        snapshot_id=uuid.uuid4(), created_at=NOW - timedelta(hours=age_hours), backend="memory", tag=tag
    )


def test_policy_defaults() -> None:
    policy = SnapshotRetentionPolicy()
    assert (policy.max_count, policy.max_age_hours, policy.keep_tagged) == (10, None, True)


def test_policy_rejects_negative_values() -> None:
    with pytest.raises(ValueError):
        SnapshotRetentionPolicy(max_count=-1)
    with pytest.raises(ValueError):
        SnapshotRetentionPolicy(max_age_hours=-1)


def test_max_count_keeps_the_newest() -> None:
    snapshots = [_snapshot(age) for age in range(5)]
    doomed = select_prunable(snapshots, SnapshotRetentionPolicy(max_count=2), now=NOW)
    assert doomed == sorted(snapshots[2:], key=lambda s: s.created_at)


def test_tagged_snapshots_are_kept_and_do_not_count() -> None:
    tagged = _snapshot(100, tag="release")
    plain = [_snapshot(age) for age in range(3)]
    doomed = select_prunable([tagged, *plain], SnapshotRetentionPolicy(max_count=2), now=NOW)
    assert doomed == [plain[2]]
    everything = select_prunable([tagged, *plain], SnapshotRetentionPolicy(max_count=0, keep_tagged=False), now=NOW)
    assert tagged in everything and len(everything) == 4


def test_max_age_prunes_old_ones_even_under_the_count() -> None:
    young, old = _snapshot(1), _snapshot(48)
    doomed = select_prunable([young, old], SnapshotRetentionPolicy(max_count=10, max_age_hours=24), now=NOW)
    assert doomed == [old]


def test_store_round_trip() -> None:
    store = InMemorySnapshotStore()
    assert isinstance(store, SnapshotStore)
    first, second = _snapshot(2), _snapshot(1)
    store.save(second)
    store.save(first)
    assert [s.snapshot_id for s in store.list()] == [first.snapshot_id, second.snapshot_id]
    assert store.load(first.snapshot_id) == first
    store.delete(first.snapshot_id)
    with pytest.raises(SnapshotNotFoundError):
        store.load(first.snapshot_id)
    with pytest.raises(SnapshotNotFoundError):
        store.delete(first.snapshot_id)


def test_store_prune() -> None:
    store = InMemorySnapshotStore()
    for age in range(12):
        store.save(_snapshot(age))
    store.save(_snapshot(50, tag="keep"))
    assert store.prune(SnapshotRetentionPolicy()) == 2
    assert len(store.list()) == 11
    assert any(s.tag == "keep" for s in store.list())


def test_snapshot_serialises_without_its_payload() -> None:
    snapshot = FilesystemSnapshot(
        snapshot_id=uuid.uuid4(),
        created_at=NOW,
        backend="host",
        tag="t",
        parent_id=uuid.uuid4(),
        file_count=3,
        total_bytes=42,
        commit_ref="abc",
        git_dir="/tmp/g",
        strategy="git",
        payload=object(),
    )
    again = FilesystemSnapshot.from_dict(snapshot.to_dict())
    assert again == snapshot
    assert again.payload is None
