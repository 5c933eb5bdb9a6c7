"""InMemoryFilesystem against the whole conformance suite, plus what is its own."""

from __future__ import annotations

from collections.abc import Mapping

from workspacefs import InMemoryFilesystem
from workspacefs.protocol import Filesystem
from workspacefs.testing import FilesystemValidationSuite


class TestInMemoryFilesystem(FilesystemValidationSuite):
    stores_content_in_memory = True

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        return InMemoryFilesystem(read_only=read_only, mount_point=mount_point)

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        writable = InMemoryFilesystem(mount_point=mount_point)
        for path, data in files.items():
            writable.write_bytes(path, data)
        return writable.fork(read_only=True)
