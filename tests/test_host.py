"""HostFilesystem against the whole conformance suite, in each resolution mode and snapshot strategy."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from workspacefs import HostFilesystem
from workspacefs.protocol import Filesystem
from workspacefs.quota import Quota
from workspacefs.testing import FilesystemValidationSuite, MergeSuite, ModelSuite, SnapshotSuite

_counter = itertools.count()


class HostFactory:
    """Builds host filesystems in fresh directories on tmpfs (snapshots kept beside, never inside)."""

    options: ClassVar[dict[str, Any]] = {}
    fast_tmp: Path

    @pytest.fixture(autouse=True)
    def _host_dirs(self, fast_tmp: Path) -> Iterator[None]:
        self.fast_tmp = fast_tmp
        yield

    def _new_dirs(self) -> tuple[Path, Path]:
        index = next(_counter)
        root = self.fast_tmp / f"ws-{index}"
        root.mkdir()
        return root, self.fast_tmp / f"snap-{index}"

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        root, snapshots = self._new_dirs()
        return HostFilesystem(
            root, read_only=read_only, mount_point=mount_point, snapshot_dir=snapshots, **self.options
        )

    def create_filesystem_with_quota(self, quota: Quota) -> Filesystem:
        root, snapshots = self._new_dirs()
        return HostFilesystem(root, snapshot_dir=snapshots, quota=quota, **self.options)

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        root, snapshots = self._new_dirs()
        with HostFilesystem(root, snapshot_dir=snapshots, **self.options) as writable:
            for path, data in files.items():
                writable.write_bytes(path, data)
        return HostFilesystem(root, read_only=True, mount_point=mount_point, snapshot_dir=snapshots, **self.options)


class TestHostFilesystem(HostFactory, FilesystemValidationSuite):
    """The default: openat2 where the kernel has it, ripgrep where installed, the best snapshot strategy."""


class TestHostPortableResolution(HostFactory, FilesystemValidationSuite):
    """The per-component O_NOFOLLOW walk used where openat2 is missing, and the shared grep engine."""

    options: ClassVar[dict[str, Any]] = {"use_openat2": False, "use_ripgrep": False}
    model_examples = 25


class TestHostGitSnapshots(HostFactory, SnapshotSuite, MergeSuite, ModelSuite):
    options: ClassVar[dict[str, Any]] = {"snapshot_strategy": "git"}
    model_examples = 15


class TestHostArchiveSnapshots(HostFactory, SnapshotSuite, MergeSuite, ModelSuite):
    options: ClassVar[dict[str, Any]] = {"snapshot_strategy": "archive"}
    model_examples = 15


class TestHostCopySnapshots(HostFactory, SnapshotSuite, MergeSuite, ModelSuite):
    options: ClassVar[dict[str, Any]] = {"snapshot_strategy": "copy"}
    model_examples = 15


class TestHostOnDisk(FilesystemValidationSuite):
    """Once on the real disk (not tmpfs), with fsync doing real work."""

    model_examples = 10

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        index = next(_counter)
        root = self.tmp_path / f"ws-{index}"
        root.mkdir()
        return HostFilesystem(
            root, read_only=read_only, mount_point=mount_point, snapshot_dir=self.tmp_path / f"s{index}"
        )

    def create_filesystem_with_quota(self, quota: Quota) -> Filesystem:
        index = next(_counter)
        root = self.tmp_path / f"ws-{index}"
        root.mkdir()
        return HostFilesystem(root, snapshot_dir=self.tmp_path / f"s{index}", quota=quota)

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        index = next(_counter)
        root = self.tmp_path / f"ws-{index}"
        root.mkdir()
        for path, data in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
        return HostFilesystem(root, read_only=True, mount_point=mount_point, snapshot_dir=self.tmp_path / f"s{index}")


class TestHostReflinkMerge(MergeSuite):
    """Merges and forks with the reflink strategy, on a loop-mounted XFS (the result and the forks are clones)."""

    @pytest.fixture(autouse=True)
    def _xfs(self, xfs_mount: Path) -> Iterator[None]:
        self.xfs = xfs_mount
        yield

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        index = next(_counter)
        root = self.xfs / f"merge-ws-{index}"
        root.mkdir()
        fs = HostFilesystem(
            root,
            read_only=read_only,
            mount_point=mount_point,
            snapshot_dir=self.xfs / f"merge-snap-{index}",
            snapshot_strategy="reflink",
        )
        assert fs.snapshot_strategy == "reflink"
        return fs

    def fork_filesystem(self, fs: Any) -> Any:
        forked = fs.fork(root=self.xfs / f"merge-fork-{next(_counter)}")
        self._opened.append(forked)
        assert forked.snapshot_strategy == "reflink"
        return forked
