"""InMemoryFilesystem against the whole conformance suite, plus what is its own."""

from __future__ import annotations

import gc
import threading
from collections.abc import Mapping

import pytest

from workspacefs import BaseFilesystem, FilesystemSnapshot, InMemoryFilesystem, SnapshotRestoreError
from workspacefs.protocol import Filesystem
from workspacefs.quota import Quota
from workspacefs.testing import FilesystemValidationSuite


class TestInMemoryFilesystem(FilesystemValidationSuite):
    stores_content_in_memory = True

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        return InMemoryFilesystem(read_only=read_only, mount_point=mount_point)

    def create_filesystem_with_quota(self, quota: Quota) -> Filesystem:
        return InMemoryFilesystem(quota=quota)

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        writable = InMemoryFilesystem(mount_point=mount_point)
        for path, data in files.items():
            writable.write_bytes(path, data)
        return writable.fork(read_only=True)


class TestPersistentState:
    """What only the in-memory backend promises: O(1) snapshots, shared content, forks."""

    def test_snapshot_references_the_state_without_copying(self) -> None:
        fs = InMemoryFilesystem()
        for i in range(1000):
            fs.write(f"d{i % 10}/f{i}.txt", "x" * 100)
        first = fs.snapshot()
        second = fs.snapshot()
        assert first.payload.nodes is second.payload.nodes  # the same immutable map: nothing was copied
        assert (first.file_count, first.total_bytes) == (1000, 100_000)

    def test_write_after_snapshot_shares_untouched_content(self) -> None:
        fs = InMemoryFilesystem()
        fs.write("big.txt", "b" * 1_000_000)
        fs.write("small.txt", "s")
        snapshot = fs.snapshot()
        fs.write("small.txt", "changed")
        before = snapshot.payload.nodes["big.txt"].data
        after = fs._nodes["big.txt"].data
        assert before is after

    def test_copy_shares_content(self) -> None:
        fs = InMemoryFilesystem()
        fs.write("a.bin", "a" * 100_000)
        fs.copy("a.bin", "b.bin")
        assert fs._nodes["a.bin"].data is fs._nodes["b.bin"].data

    def test_fork_is_independent(self) -> None:
        fs = InMemoryFilesystem()
        fs.write("a.txt", "base")
        branch = fs.fork()
        branch.write("a.txt", "branch")
        branch.write("new.txt", "n")
        fs.write("other.txt", "o")
        assert fs.read("a.txt").content == "base" and not fs.exists("new.txt")
        assert branch.read("a.txt").content == "branch" and not branch.exists("other.txt")

    def test_fork_from_snapshot(self) -> None:
        fs = InMemoryFilesystem()
        fs.write("a.txt", "v1")
        snapshot = fs.snapshot()
        fs.write("a.txt", "v2")
        branch = fs.fork(snapshot)
        assert branch.read("a.txt").content == "v1"
        assert fs.read("a.txt").content == "v2"

    def test_fork_keeps_options(self) -> None:
        fs = InMemoryFilesystem(mount_point="/workspace")
        branch = fs.fork(read_only=True)
        assert branch.mount_point == "/workspace" and branch.read_only

    def test_snapshot_of_one_instance_restores_on_another(self) -> None:
        source = InMemoryFilesystem()
        source.write("a.txt", "from source")
        target = InMemoryFilesystem()
        target.restore(source.snapshot())
        assert target.read("a.txt").content == "from source"

    def test_serialised_snapshot_cannot_be_restored(self) -> None:
        fs = InMemoryFilesystem()
        snapshot = FilesystemSnapshot.from_dict(fs.snapshot().to_dict())
        with pytest.raises(SnapshotRestoreError):
            fs.restore(snapshot)

    def test_snapshot_parent_ids_chain(self) -> None:
        fs = InMemoryFilesystem()
        first = fs.snapshot()
        second = fs.snapshot()
        assert first.parent_id is None and second.parent_id == first.snapshot_id

    def test_concurrent_appends_lose_nothing(self) -> None:
        fs = InMemoryFilesystem()

        def append(worker: int) -> None:
            for i in range(200):
                fs.write("log.txt", f"{worker}:{i}\n", mode="append")

        threads = [threading.Thread(target=append, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert fs.read("log.txt").total_lines == 800


class _SharedDefaults(InMemoryFilesystem):
    """The in-memory primitives with every overridable convenience put back to the shared default,
    and large files streamed: this runs the code later backends inherit through the whole suite."""

    inline_content_bytes = 64

    _iter_files = BaseFilesystem._iter_files
    _open_content = BaseFilesystem._open_content
    _ensure_parents = BaseFilesystem._ensure_parents
    _remove_tree = BaseFilesystem._remove_tree
    _copy_tree = BaseFilesystem._copy_tree

    _copy_file = BaseFilesystem._copy_file
    _write_content = BaseFilesystem._write_content


class TestSharedDefaults(FilesystemValidationSuite):
    """The conveniences later backends inherit, exercised on the in-memory primitives."""

    stores_content_in_memory = True
    model_examples = 25

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        return _SharedDefaults(read_only=read_only, mount_point=mount_point)

    def create_filesystem_with_quota(self, quota: Quota) -> Filesystem:
        return _SharedDefaults(quota=quota)

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        writable = _SharedDefaults(mount_point=mount_point)
        for path, data in files.items():
            writable.write_bytes(path, data)
        fork = _SharedDefaults(read_only=True, mount_point=mount_point)
        fork._set_state(writable._capture_state())
        return fork


def test_the_snapshot_catalogue_never_keeps_a_state_alive() -> None:
    """Snapshots carry their state: the catalogue lists those a caller still holds, and lets the rest go."""
    fs = InMemoryFilesystem()
    fs.write("a.txt", "a")
    kept = fs.snapshot(tag="kept")
    fs.snapshot(tag="dropped at once")
    gc.collect()
    assert [s.tag for s in fs.snapshots()] == ["kept"]
    fs.write("a.txt", "b")
    fs.restore(kept)
    assert fs.read("a.txt").content == "a"


def test_diff_compares_only_what_changed_since_the_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The states' shared history names the changed paths: no whole-workspace manifest is built."""
    fs = InMemoryFilesystem()
    for i in range(2000):
        fs.write(f"d{i % 20}/f{i}.txt", f"file {i}\n")
    base = fs.snapshot()
    fs.write("d1/f1.txt", "changed\n")
    fs.write("d2/f2.txt", "file 2\n")  # the same bytes again: not modified
    fs.write("new/n.txt", "n\n")
    fs.delete("d3", recursive=True)
    fs.move("d4/f4.txt", "moved/f4.txt")
    fs.write("tmp.txt", "gone again\n")
    fs.delete("tmp.txt")
    later = fs.snapshot()
    built: list[object] = []
    monkeypatch.setattr(fs, "_manifest", lambda snapshot: built.append(snapshot) or {})
    changes = fs.diff(base)
    assert changes.added == ("moved/f4.txt", "new/n.txt")
    assert changes.modified == ("d1/f1.txt",)
    assert changes.deleted == tuple(sorted([f"d3/f{i}.txt" for i in range(3, 2000, 20)] + ["d4/f4.txt"]))
    assert changes.unchanged_count == 2000 - 100 - 1 - 1
    assert fs.diff(later, base) == type(changes)(changes.deleted, changes.modified, changes.added, 1898)
    fs.restore(base)
    assert fs.diff(base) == type(changes)((), (), (), 2000)
    assert fs.diff(later).added == changes.deleted  # current is an ancestor of ``later``
    assert built == []
    monkeypatch.undo()
    assert super(InMemoryFilesystem, fs)._diff(base, later) == changes  # the whole comparison agrees


def test_diff_across_a_new_history_chain_compares_whole_states(monkeypatch: pytest.MonkeyPatch) -> None:
    from workspacefs.backends import memory

    monkeypatch.setattr(memory, "_LOG_STEPS", 8)  # the history restarts every 8 steps: memory stays bounded
    fs = InMemoryFilesystem()
    base = fs.snapshot()
    for i in range(20):
        fs.write(f"f{i}.txt", "x")
    built: list[object] = []
    whole = fs._manifest
    monkeypatch.setattr(fs, "_manifest", lambda snapshot: built.append(snapshot) or whole(snapshot))
    assert fs.diff(base).added == tuple(sorted(f"f{i}.txt" for i in range(20)))
    assert len(built) == 2  # both states, compared whole
    unrelated = InMemoryFilesystem()
    unrelated.write("a.txt", "a")
    assert fs.diff(unrelated.snapshot()).deleted == ("a.txt",)  # another history: compared whole too


class _Published(InMemoryFilesystem):
    """Keeps every version it makes current, as a reader in another thread could have seen it."""

    def __init__(self) -> None:
        self.published: list[set[str]] = []
        super().__init__()

    def _set_state(self, state: object) -> None:
        super()._set_state(state)  # type: ignore[arg-type]
        self.published.append({path for path in self._nodes if path.startswith("dst")})


@pytest.mark.parametrize("operation", ["move", "copy"])
def test_a_move_or_copy_over_a_directory_is_one_version(operation: str) -> None:
    """No version between the old tree and the new one: a reader never sees ``dst`` missing or part removed."""
    fs = _Published()
    fs.write("src/x.txt", "new")
    fs.write("dst/x.txt", "old")
    fs.write("dst/keep/k.txt", "old")
    fs.published.clear()
    getattr(fs, operation)("src", "dst", overwrite=True)
    assert fs.published == [{"dst", "dst/x.txt"}]  # the old code published {} (the tree removed) first
    assert fs.read("dst/x.txt").content == "new"
