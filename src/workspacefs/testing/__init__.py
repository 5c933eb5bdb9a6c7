"""``FilesystemValidationSuite``: every rule of the filesystem protocol as a test, for any backend.

A backend's whole conformance test is a subclass with three factories, in a module pytest collects
(here the in-memory backend stands in for yours; the README runs this very suite on it):

>>> from workspacefs import InMemoryFilesystem
>>> from workspacefs.testing import FilesystemValidationSuite
>>> class TestMyBackend(FilesystemValidationSuite):
...     stores_content_in_memory = True  # only for a backend whose storage is the process's memory
...
...     def create_filesystem(self, *, read_only=False, mount_point=None):
...         return InMemoryFilesystem(read_only=read_only, mount_point=mount_point)
...
...     def create_read_only_filesystem(self, files, *, mount_point=None):
...         writable = self.create_filesystem(mount_point=mount_point)
...         for path, content in files.items():
...             writable.write_bytes(path, content)
...         return writable.fork(read_only=True)  # your backend's own way to a read-only view
...
...     def create_filesystem_with_quota(self, quota):
...         return InMemoryFilesystem(quota=quota)
>>> frozen = TestMyBackend().create_read_only_filesystem({"a.txt": b"hi"})
>>> frozen.read_only, frozen.read("a.txt").content
(True, 'hi')

The parts (``PathSuite``, ``StreamingSuite``, ``SnapshotSuite`` …) can also be subclassed alone.
Requires the ``testing`` extra (pytest, hypothesis).
"""

from workspacefs.testing._base import SuiteBase
from workspacefs.testing._contracts import CapabilitiesSuite, ConditionalWritesSuite, ErrorTypesSuite, WalkSuite
from workspacefs.testing._history import HistorySuite
from workspacefs.testing._merge import MergeSuite
from workspacefs.testing._model import ModelSuite, TreeModel
from workspacefs.testing._mutations import CopySuite, DeleteSuite, MkdirSuite, MoveSuite
from workspacefs.testing._paths import MountPointSuite, PathSuite
from workspacefs.testing._quota import QuotaSuite
from workspacefs.testing._readwrite import MetadataSuite, ReadWriteSuite
from workspacefs.testing._search import GlobSuite, GrepSuite, ListingSuite
from workspacefs.testing._snapshots import ReadOnlySuite, SnapshotSuite
from workspacefs.testing._streaming import StreamingSuite, TextStreamSuite

__all__ = [
    "CapabilitiesSuite",
    "ConditionalWritesSuite",
    "CopySuite",
    "DeleteSuite",
    "ErrorTypesSuite",
    "FilesystemValidationSuite",
    "GlobSuite",
    "GrepSuite",
    "HistorySuite",
    "ListingSuite",
    "MergeSuite",
    "MetadataSuite",
    "MkdirSuite",
    "ModelSuite",
    "MountPointSuite",
    "MoveSuite",
    "PathSuite",
    "QuotaSuite",
    "ReadOnlySuite",
    "ReadWriteSuite",
    "SnapshotSuite",
    "StreamingSuite",
    "SuiteBase",
    "TextStreamSuite",
    "TreeModel",
    "WalkSuite",
]


class FilesystemValidationSuite(
    PathSuite,
    MountPointSuite,
    ReadWriteSuite,
    MetadataSuite,
    ListingSuite,
    GlobSuite,
    GrepSuite,
    DeleteSuite,
    MkdirSuite,
    MoveSuite,
    CopySuite,
    StreamingSuite,
    TextStreamSuite,
    ReadOnlySuite,
    SnapshotSuite,
    MergeSuite,
    ModelSuite,
    CapabilitiesSuite,
    ConditionalWritesSuite,
    ErrorTypesSuite,
    WalkSuite,
    QuotaSuite,
    HistorySuite,
):
    """Every part of the conformance suite; subclass it and implement the factory methods."""
