"""Container workspaces on real Podman: the conformance suite on the sandbox's filesystem — with files
written through the API, and with files written by commands inside the container and read back."""

from __future__ import annotations

import io
import itertools
import tarfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from workspacefs.backends.container import ContainerFilesystem, ContainerSandbox
from workspacefs.protocol import Filesystem
from workspacefs.quota import Quota
from workspacefs.testing import FilesystemValidationSuite

_ids = itertools.count()


@pytest.fixture(scope="module")
def shared_sandbox(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContainerSandbox]:
    """One running container for the whole suite; each test gets its own directory inside its workspace."""
    with ContainerSandbox(image, snapshot_dir=tmp_path_factory.mktemp("sandbox-snapshots")) as sandbox:
        yield sandbox


class TestContainerFilesystem(FilesystemValidationSuite):
    """The suite on a sandbox's workspace (its filesystem is a ``HostFilesystem`` on the bind mount)."""

    sandbox: ContainerSandbox

    @pytest.fixture(autouse=True)
    def _in_sandbox(self, shared_sandbox: ContainerSandbox) -> None:
        self.sandbox = shared_sandbox

    def _fresh(self) -> str:
        name = f"t{next(_ids)}"
        Path(self.sandbox.host_dir, name).mkdir()
        return name

    def _workspace(
        self, name: str, *, read_only: bool = False, mount_point: str | None = None, quota: Quota | None = None
    ) -> Filesystem:
        return ContainerFilesystem(
            self.sandbox,
            str(Path(self.sandbox.host_dir, name)),
            mount_point=mount_point,
            snapshot_dir=self.tmp_path / f"snapshots-{name}",
            read_only=read_only,
            quota=quota,
        )

    def create_filesystem_with_quota(self, quota: Quota) -> Filesystem:
        return self._workspace(self._fresh(), quota=quota)

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        return self._workspace(self._fresh(), read_only=read_only, mount_point=mount_point)

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        name = self._fresh()
        writable = self._workspace(name)
        for path, content in files.items():
            writable.write_bytes(path, content)
        writable.close()
        return self._workspace(name, read_only=True, mount_point=mount_point)


def _tar(files: Mapping[str, bytes], dirs: tuple[str, ...]) -> bytes:
    """A tar stream of ``files`` and ``dirs`` for ``tar -x`` inside the container."""
    buffer = io.BytesIO()
    now = int(time.time()) - 1  # whole seconds, never ahead of the clock the host's later writes read
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for directory in dirs:
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
            archive.addfile(info)
        for path, content in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), 0o644, now
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


class TestFilesWrittenByCommands(TestContainerFilesystem):
    """The suite again, but every file a test starts from is written by ``tar`` running in the container."""

    def make(
        self,
        files: Mapping[str, str | bytes] | None = None,
        *,
        dirs: tuple[str, ...] = (),
        mount_point: str | None = None,
    ) -> Filesystem:
        name = self._fresh()
        encoded = {p: c.encode("utf-8") if isinstance(c, str) else c for p, c in (files or {}).items()}
        if encoded or dirs:
            result = self.sandbox.exec(
                ["tar", "-x", "-f", "-", "-C", f"{self.sandbox.workdir}/{name}"], stdin=_tar(encoded, dirs)
            )
            assert result.exit_code == 0, result.stderr
        fs = self._workspace(name, mount_point=mount_point)
        self._opened.append(fs)
        return fs
