"""``ConditionalWrites`` written once over the primitives: content ids, versioned reads, compare-and-set.

A content id is a function of the bytes alone (``streams.content_id_of``), so every backend names the
same content the same way. The check and the commit of a conditional write happen under
``_compare_lock``: the in-memory backend's state lock, a directory lock on a host, a transaction in
SQL (which overrides these methods with its own single-transaction versions).

Where files carry a read-only flag (``capabilities.file_read_only``), a conditional write can change the
flag together with the content (``read_only=``), and ``set_read_only_if``/``create_bytes`` change or set
it under the same precondition: content and flag change together or not at all. A backend without the
flag refuses ``read_only=`` with ``UnsupportedOperationError`` before it changes anything.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from workspacefs.backends._core import too_big
from workspacefs.backends._quota import QuotaMixin
from workspacefs.errors import PreconditionFailedError, UnsupportedOperationError, caller_paths, is_a_directory
from workspacefs.paths import MAX_CONVENIENCE_BYTES, ROOT
from workspacefs.protocol import ByteReader, BytesLike, ByteWriter, VersionedContent
from workspacefs.quota import Quota
from workspacefs.results import WriteMode, WriteResult
from workspacefs.streams import ContentHasher, StreamWriter

__all__ = ["ANY_VERSION", "ConditionalWritesMixin"]

ANY_VERSION = "*"
"""``expect`` value that accepts any existing file (HTTP's ``If-Match: *``)."""


class _WholeWrites(Protocol):
    """What the generic flag-carrying writes need of the filesystem they are mixed into (``BaseFilesystem``)."""

    def _compare_lock(self, path: str) -> AbstractContextManager[object]: ...
    def _check_expected(self, path: str, expect: str) -> None: ...
    def _no_flags(self, read_only: bool | None) -> None: ...
    def _conditional_target(self, path: str) -> AbstractContextManager[str]: ...
    def write_bytes(
        self, path: str, content: BytesLike, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult: ...
    def set_read_only(self, path: str, read_only: bool = True) -> None: ...


def hash_reader(reader: ByteReader) -> str:
    """The content id of everything ``reader`` holds, read from its start (the reader stays open)."""
    hasher = ContentHasher()
    reader.seek(0)
    for chunk in reader:
        hasher.update(chunk)
    reader.seek(0)
    return hasher.content_id()


class _ConditionalWriter(StreamWriter):
    """Streams into an ordinary atomic writer; its commit first checks, under the lock, that the file
    still has the expected content id."""

    __slots__ = ("_expect", "_fs", "_inner")

    def __init__(self, fs: ConditionalWritesMixin, path: str, expect: str, inner: ByteWriter) -> None:
        super().__init__(path)
        self._fs = fs
        self._expect = expect
        self._inner = inner

    def _write_chunk(self, data: bytes) -> None:
        self._inner.write(data)

    def _commit(self) -> None:  # on failure StreamWriter.close() calls _discard: the old content stays
        with self._fs._compare_lock(self.path):
            self._fs._check_expected(self.path, self._expect)
            self._inner.close()

    def _discard(self) -> None:
        self._inner.abort()


class ConditionalWritesMixin(QuotaMixin):
    """The ``ConditionalWrites`` protocol for every backend built on the primitives."""

    def __init__(self, *, read_only: bool = False, mount_point: str | None = None, quota: Quota | None = None) -> None:
        super().__init__(read_only=read_only, mount_point=mount_point, quota=quota)
        self._conditional = threading.RLock()

    # --- hooks a backend may override ------------------------------------------------------------

    def _compare_lock(self, path: str) -> AbstractContextManager[object]:
        """Held while a conditional write checks the current version and commits the new one."""
        return self._conditional

    def _content_id(self, path: str) -> str:
        """The content id of the file at normalised ``path`` (streamed: any size)."""
        with self._open_reader(path) as reader:
            return hash_reader(reader)

    def _open_versioned(self, path: str) -> VersionedContent:
        """Metadata, id and a reader of one version: the reader is hashed, then rewound for the caller."""
        reader = self._open_reader(path)
        try:
            content_id = hash_reader(reader)
            info = self._stat(path)
        except BaseException:
            reader.close()
            raise
        return VersionedContent(info, content_id, reader)

    def _check_expected(self, path: str, expect: str) -> None:
        """Raise ``PreconditionFailedError`` unless the file at ``path`` still has content id ``expect``."""
        try:
            if expect == ANY_VERSION:
                if self._stat(path).is_file:
                    return
                raise PreconditionFailedError(path, "The file no longer exists")
            current = self._content_id(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise PreconditionFailedError(path, "The file no longer exists") from None
        if current != expect:
            raise PreconditionFailedError(path)

    # --- the protocol ----------------------------------------------------------------------------------

    def content_id(self, path: str) -> str:
        """The id of a file's current content: equal content, equal id, on every backend. Use it as an
        ETag and pass it back as ``expect`` to write only over that exact version.

        Raises:
            FileNotFoundError: nothing at ``path``.
            IsADirectoryError: ``path`` is a directory.
        """
        norm = self._norm(path)
        with caller_paths({norm: path}):
            if norm == ROOT:
                raise is_a_directory(norm)
            return self._content_id(norm)

    def open_versioned(self, path: str) -> VersionedContent:
        """A file's metadata, its content id and a reader of exactly that content (close the reader)."""
        norm = self._norm(path)
        with caller_paths({norm: path}):
            if norm == ROOT:
                raise is_a_directory(norm)
            return self._open_versioned(norm)

    @contextmanager
    def _conditional_target(self, path: str) -> Iterator[str]:
        """The normalised target of a conditional write. Whatever says the file is not there — a missing
        parent, a file where a directory should be, a directory where the file should be — is the one
        failure a compare-and-set promises: ``PreconditionFailedError``."""
        norm = self._norm(path)
        self._writable(path)
        with caller_paths({norm: path}):
            if norm == ROOT:
                raise is_a_directory(norm)
            try:
                yield norm
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                raise PreconditionFailedError(norm, "The file no longer exists") from None

    def _no_flags(self, read_only: bool | None) -> None:
        """Refuse ``read_only=`` before anything changes: these generic writes carry no flag (a backend with
        ``capabilities.file_read_only`` overrides them with versions that do)."""
        if read_only is not None:
            raise UnsupportedOperationError(f"{type(self).__name__} cannot mark single files read-only")

    def write_bytes_if(
        self, path: str, content: BytesLike, *, expect: str, read_only: bool | None = None
    ) -> WriteResult:
        """Overwrite ``path`` only if its content id is still ``expect`` (``"*"``: any existing file).

        ``read_only`` (where ``capabilities.file_read_only``) sets the file's flag in the same step; ``False``
        also lets the write replace a read-only file. ``None`` leaves the flag as it is.

        Raises:
            PreconditionFailedError: the file is missing or holds other content now.
            ContentTooLargeError: more than 32 MiB (use :meth:`open_write_if`).
            ReadOnlyError: the filesystem, or the file, is read-only.
            UnsupportedOperationError: ``read_only`` given to a backend without per-file flags.
        """
        self._no_flags(read_only)
        data = bytes(content)
        with self._conditional_target(path) as norm:
            if len(data) > MAX_CONVENIENCE_BYTES:
                raise too_big("Writing", path)
            with self._compare_lock(norm), self._quota_step() as step:
                self._check_expected(norm, expect)
                self._check_write(norm, len(data), "overwrite", step)
                self._write_content(norm, data, "overwrite")
        return WriteResult(norm, len(data), "overwrite")

    def open_write_if(self, path: str, *, expect: str, read_only: bool | None = None) -> ByteWriter:
        """A streaming writer whose commit succeeds only over content id ``expect`` (``"*"``: any file);
        a failed check at commit leaves the old content and raises ``PreconditionFailedError``.
        ``read_only``: as :meth:`write_bytes_if`, set at the commit."""
        self._no_flags(read_only)
        with self._conditional_target(path) as norm:
            self._check_expected(norm, expect)  # fail before the upload, and again at commit
            writer = self._quota_writer(norm, "overwrite", self._open_writer(norm, "overwrite"))
            return _ConditionalWriter(self, norm, expect, writer)

    def set_read_only_if(self: _WholeWrites, path: str, read_only: bool, *, expect: str) -> None:
        """Set a file's read-only flag only if its content id is still ``expect`` (``"*"``: any existing file),
        checked and set under the compare-and-set lock (where ``capabilities.file_read_only``).

        Raises:
            PreconditionFailedError: the file is missing or holds other content now.
            UnsupportedOperationError: this backend has no per-file flags.
        """
        with self._conditional_target(path) as norm, self._compare_lock(norm):
            self._check_expected(norm, expect)
            self.set_read_only(norm, read_only)

    def create_bytes(self: _WholeWrites, path: str, content: BytesLike, *, read_only: bool = False) -> WriteResult:
        """Create a file (parents too) that must not exist yet; with ``read_only`` it is read-only from its
        first moment: file and flag appear together or not at all (where ``capabilities.file_read_only``).

        Raises: as ``write_bytes(mode="create")``, and ``UnsupportedOperationError`` for ``read_only`` on a
        backend without per-file flags (before anything is written).
        """
        self._no_flags(True if read_only else None)
        return self.write_bytes(path, content, mode="create")
