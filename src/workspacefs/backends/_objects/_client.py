"""What ``ObjectStoreFilesystem`` needs of an object store: a dozen calls on whole keys, and their errors.

Keys are full ``bucket/key`` strings. A client maps its store's failures to built-in exceptions once, here
at the boundary: a missing key is ``FileNotFoundError``, a missing bucket :class:`BucketMissingError` (one too), a
refusal ``PermissionError``, an unreachable endpoint ``ConnectionError``, a failed ``If-Match``/``If-None-Match``
:class:`PreconditionFailed` (a signal the filesystem turns into the error that fits the operation), a range past the
end :class:`RangeNotSatisfiableError`. Nothing of the store's own exception types or tracebacks reaches a caller, and
callers tell these apart by type, never by message.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "MIN_PART_BYTES",
    "BucketMissingError",
    "ObjectClient",
    "ObjectInfo",
    "PreconditionFailed",
    "RangeNotSatisfiableError",
    "Upload",
]

MIN_PART_BYTES = 5 * 1024 * 1024
"""The smallest part S3 accepts in a multipart upload (except the last): the writer's fixed memory."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One stored object: its key, size, version tag and time, the content id written with it (if any), and
    the store's id of this version where the bucket keeps versions."""

    key: str
    size: int
    etag: str
    modified: datetime
    content_id: str | None = None
    version_id: str | None = None


class PreconditionFailed(Exception):  # noqa: N818 - a signal the filesystem maps, never seen by callers
    """A conditional request found another version (or none, or one already there)."""


class BucketMissingError(FileNotFoundError):
    """The bucket itself is gone (S3's ``NoSuchBucket``), not one object: told apart by type, never by message."""


class RangeNotSatisfiableError(OSError):
    """A ranged read began at or past the object's end (S3's ``InvalidRange``, HTTP 416); the caller asks again."""


class Upload(ABC):
    """A multipart upload in progress: parts go up as they fill, nothing is visible until :meth:`complete`."""

    @abstractmethod
    def upload_part(self, data: memoryview) -> None:
        """Send the next part (every part but the last at least :data:`MIN_PART_BYTES`)."""

    @abstractmethod
    def complete(self, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        """Make the object visible in one step and return its ETag (``PreconditionFailed`` if the condition
        does not hold)."""

    @abstractmethod
    def abort(self) -> None:
        """Drop the parts sent so far; never raises for an ordinary cleanup."""


class ObjectClient(ABC):
    """The calls the filesystem makes; one implementation per kind of store (S3 through ``s3fs``)."""

    conditional_writes: bool = False
    """True if the store enforces ``If-Match``/``If-None-Match`` on writes (compare-and-set across processes)."""
    endpoint: str = ""
    """Where the store is, for messages (an endpoint URL, or the store's name)."""

    @abstractmethod
    def head(self, key: str) -> ObjectInfo | None:
        """The object at ``key``, or ``None``."""

    @abstractmethod
    def probe(self, heads: Sequence[str], prefixes: Sequence[str]) -> tuple[list[ObjectInfo | None], list[bool]]:
        """Many questions in one round trip (concurrently where the store allows): the object at each of
        ``heads`` (or ``None``), and whether any object's key starts with each of ``prefixes``."""

    @abstractmethod
    def list(
        self, prefix: str, *, recursive: bool, limit: int | None = None, start_after: str | None = None
    ) -> Iterator[ObjectInfo | str]:
        """Objects whose key starts with ``prefix``, in key order; without ``recursive``, each deeper level is
        one ``str`` (the common prefix, ending in ``/``) instead of its objects. ``limit``: one page of at most
        that many; ``start_after``: only keys after this one."""

    @abstractmethod
    def get(
        self, key: str, start: int, length: int, *, if_match: str | None = None, version_id: str | None = None
    ) -> tuple[bytes | bytearray, ObjectInfo]:
        """Bytes ``[start, start + length)`` and the object they come from (``FileNotFoundError`` if missing);
        of the kept version ``version_id`` where one is named."""

    @abstractmethod
    def put(
        self,
        key: str,
        data: bytes | bytearray | memoryview,
        *,
        content_id: str | None = None,
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> ObjectInfo:
        """Store a whole object in one request (visible at once, atomically)."""

    @abstractmethod
    def start_upload(self, key: str) -> Upload:
        """Begin a multipart upload to ``key``."""

    @abstractmethod
    def copy(self, source: ObjectInfo, key: str, *, content_id: str | None) -> None:
        """Copy ``source`` (exactly that version: ``PreconditionFailed`` if it changed; the kept version
        ``source.version_id`` where it names one) to ``key``, in the store."""

    @abstractmethod
    def delete(self, keys: Iterable[str]) -> None:
        """Delete objects (missing ones are no error)."""

    @abstractmethod
    def bucket_exists(self, bucket: str) -> bool:
        """True if the bucket exists and can be reached."""

    # --- kept versions (buckets with versioning on) -----------------------------------------------------

    @abstractmethod
    def versioning(self, bucket: str) -> bool:
        """True if the bucket keeps every version of an object (S3 bucket versioning ``Enabled``)."""

    @abstractmethod
    def latest_versions(self, prefix: str) -> Iterator[ObjectInfo]:
        """The current version of every object under ``prefix`` (deleted ones left out), each with its
        ``version_id``, in key order: what :meth:`list` shows, plus the ids that keep it findable."""

    @abstractmethod
    def versions_exist(self, versions: Sequence[tuple[str, str]]) -> builtins.list[bool]:
        """For each ``(key, version_id)``: is that version still kept (asked concurrently)."""

    @abstractmethod
    def superseded_versions(self, prefix: str) -> Iterator[tuple[ObjectInfo, datetime]]:
        """Every version under ``prefix`` that is no longer current (delete markers included), with the time
        the next newer version of its key replaced it."""

    @abstractmethod
    def delete_versions(self, versions: Iterable[tuple[str, str]]) -> None:
        """Delete exactly these versions for good (missing ones are no error)."""
