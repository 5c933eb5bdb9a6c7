"""The factory hooks and helpers every part of the conformance suite shares."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from workspacefs.protocol import Filesystem, SnapshotableFilesystem

__all__ = ["HANG_BUDGET_SECONDS", "SuiteBase", "finishes"]

Content = bytes | str
T = TypeVar("T")

HANG_BUDGET_SECONDS = 60.0
"""Long enough that only a hang can use it up: the suite never times how fast anything is (bench/ does)."""


def finishes(work: Callable[[], T], budget: float = HANG_BUDGET_SECONDS) -> T:
    """Run ``work`` and return its result, failing the test if it hangs (a budget only a hang can reach).

    Under load a fast operation can take many times its usual time, so no assertion here measures speed.
    """
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # handed to the test's thread below
            failure.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(budget)
    if worker.is_alive():
        pytest.fail(f"did not finish within {budget:.0f} s: it hangs")
    if failure:
        raise failure[0]
    return outcome[0]


class SuiteBase:
    """Subclass a suite and implement :meth:`create_filesystem`; pytest does the rest.

    ``self.tmp_path`` is a fresh directory per test, for backends that need one.
    """

    stores_content_in_memory: ClassVar[bool] = False
    """True for backends whose storage *is* process memory: writing may grow the heap by the file."""
    large_file_mib: ClassVar[int] = 48
    """Size of the file the streaming-memory tests push through (more than the 32 MiB cap)."""

    tmp_path: Path

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        """Return a new, empty filesystem under test."""
        raise NotImplementedError("a FilesystemValidationSuite subclass must implement create_filesystem()")

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        """Return a read-only filesystem holding ``files``; override if the default cannot work."""
        raise NotImplementedError("a FilesystemValidationSuite subclass must implement create_read_only_filesystem()")

    @pytest.fixture(autouse=True)
    def _suite_setup(self, tmp_path: Path) -> Iterator[None]:
        self.tmp_path = tmp_path
        self._opened: list[Any] = []
        yield
        for fs in reversed(self._opened):
            close = getattr(fs, "close", None)
            if close is not None:
                close()

    def make(
        self,
        files: Mapping[str, Content] | None = None,
        *,
        dirs: tuple[str, ...] = (),
        mount_point: str | None = None,
    ) -> Filesystem:
        """A new filesystem holding ``files`` (str content is UTF-8) and empty ``dirs``."""
        fs = self.create_filesystem(mount_point=mount_point)
        self._opened.append(fs)
        for directory in dirs:
            fs.mkdir(directory)
        for path, content in (files or {}).items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            fs.write_bytes(path, data)
        return fs

    def make_snapshotable(self, files: Mapping[str, Content] | None = None) -> SnapshotableFilesystem:
        """Like :meth:`make`, asserting the backend is snapshotable."""
        fs = self.make(files)
        assert isinstance(fs, SnapshotableFilesystem)
        return fs

    def make_read_only(self, files: Mapping[str, Content], *, mount_point: str | None = None) -> Filesystem:
        """A read-only filesystem holding ``files``."""
        encoded = {p: c.encode("utf-8") if isinstance(c, str) else c for p, c in files.items()}
        fs = self.create_read_only_filesystem(encoded, mount_point=mount_point)
        self._opened.append(fs)
        return fs

    @staticmethod
    def tree(fs: Filesystem, path: str = "") -> dict[str, bytes | None]:
        """Every entry below ``path``: files map to their bytes, directories to ``None``."""
        return {
            entry.path: None if entry.is_directory else fs.read_bytes(entry.path).content
            for entry in fs.walk(path or ".")
        }
