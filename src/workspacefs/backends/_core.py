"""The primitives a backend writes, the faster-primitive defaults, and the helpers every layer above shares.

Primitives receive normalised paths (``""`` is the root) and raise the typed errors of ``errors.py``
with those paths; the public methods (in ``base.py`` and its mixins) put the caller's spelling back
into the message. A backend overrides a default primitive (``_iter_files``, ``_open_content``,
``_write_content``, ``_remove_tree``, ``_copy_file`` …) only to be faster; the conformance suite proves
it agrees with the default.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import ClassVar
from uuid import UUID

from workspacefs import errors
from workspacefs.capabilities import Capabilities
from workspacefs.errors import ContentTooLargeError, ReadOnlyError
from workspacefs.paths import (
    MAX_CONVENIENCE_BYTES,
    ancestors,
    normalize_cached,
    normalize_mount_point,
    normalize_path,
    parent,
)
from workspacefs.protocol import ByteReader, ByteWriter
from workspacefs.results import FileEntry, FileStat, FilesystemSnapshot, WriteMode
from workspacefs.search import GrepPattern

__all__ = ["FilesystemCore", "Fingerprint", "lines_window", "too_big", "total_lines"]

Fingerprint = object
"""What a manifest maps each file to; equal fingerprints mean equal content."""


def total_lines(data: bytes) -> int:
    """``\\n``-terminated lines plus a final unterminated one (``b""`` 0, ``b"a"`` 1, ``b"a\\n"`` 1)."""
    count = data.count(b"\n")
    return count + 1 if data and data[-1] != 0x0A else count


def lines_window(data: bytes, offset: int, limit: int) -> bytes:
    """Bytes of lines ``[offset, offset + limit)`` of ``data``, newlines kept."""
    start = 0
    for _ in range(offset):
        start = data.find(b"\n", start) + 1
        if start == 0:
            return b""
    stop = start
    for _ in range(limit):
        stop = data.find(b"\n", stop) + 1
        if stop == 0:
            return data[start:]
    return data[start:stop]


def too_big(what: str, path: str) -> ContentTooLargeError:
    """A convenience read or write past the cap: stream it instead."""
    return ContentTooLargeError(
        f"{what} of {path!r} would exceed the {MAX_CONVENIENCE_BYTES // (1024 * 1024)} MiB convenience "
        "limit; pass a smaller limit or use open_read()/open_write() to stream it"
    )


class FilesystemCore(ABC):
    """State, primitives and shared helpers; :class:`~workspacefs.backends.base.BaseFilesystem` builds on it."""

    backend_name: ClassVar[str] = "base"
    """Kind tag written into snapshots; restoring a snapshot of another kind is refused."""
    declared_capabilities: ClassVar[Capabilities] = Capabilities()
    """What the backend can do; read it through :attr:`capabilities`."""
    inline_content_bytes: ClassVar[int] = 8 * 1024 * 1024
    """Files up to this size are read whole by ``read`` and ``grep``; bigger ones are streamed."""

    def __init__(self, *, read_only: bool = False, mount_point: str | None = None) -> None:
        self._read_only = bool(read_only)
        self._mount_point = normalize_mount_point(mount_point)
        self._current_snapshot_id: UUID | None = None
        self._head: UUID | None = None

    # --- primitives every backend writes ---------------------------------------------------------

    @abstractmethod
    def _stat(self, path: str) -> FileStat:
        """Metadata; ``FileNotFoundError`` if missing (also when an ancestor is a file)."""

    @abstractmethod
    def _list_dir(self, path: str) -> Sequence[FileEntry]:
        """Entries of a directory sorted by name; ``FileNotFoundError``/``NotADirectoryError``."""

    @abstractmethod
    def _open_reader(self, path: str) -> ByteReader:
        """Open a file; ``FileNotFoundError``/``IsADirectoryError``."""

    @abstractmethod
    def _open_writer(self, path: str, mode: WriteMode) -> ByteWriter:
        """Open an atomic writer; the parent must exist.

        Raises ``FileNotFoundError`` (no parent), ``NotADirectoryError`` (parent is a file),
        ``IsADirectoryError`` (path is a directory), ``FileExistsError`` (``create`` mode), both when
        opening and, for ``create``, again when committing.
        """

    @abstractmethod
    def _make_dir(self, path: str) -> None:
        """Create one directory whose parent exists; ``FileExistsError`` if anything is there."""

    @abstractmethod
    def _remove_file(self, path: str) -> None:
        """Remove a file; ``IsADirectoryError`` for a directory."""

    @abstractmethod
    def _remove_empty_dir(self, path: str) -> None:
        """Remove a directory; ``DirectoryNotEmptyError`` if it has entries."""

    @abstractmethod
    def _rename(self, src: str, dst: str, *, replace: bool) -> None:
        """Move ``src`` to ``dst`` (whose parent exists). ``replace`` lets a file replace a file."""

    @abstractmethod
    def _capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        """Keep the current state under ``draft``'s id; return ``draft`` completed with what was captured
        (``file_count``, ``total_bytes``, ``strategy``, ``commit_ref``, ``payload`` …) via ``replace``."""

    @abstractmethod
    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        """Return to a snapshot taken by this kind of backend."""

    @abstractmethod
    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        """Every file of a snapshot (``None``: the current state) mapped to a content fingerprint."""

    @abstractmethod
    def _kept_snapshots(self) -> Sequence[FilesystemSnapshot]:
        """The snapshots this filesystem keeps, oldest first."""

    @abstractmethod
    def _drop_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        """Forget a kept snapshot and the data only it held; ``SnapshotNotFoundError`` if unknown."""

    # --- primitives with defaults a backend may override to be faster ------------------------------

    def _walk(self, base: str) -> Iterator[FileEntry]:
        """Every entry below directory ``base``, parents before children; nothing if it is missing."""
        try:
            pending: builtins.list[Sequence[FileEntry]] = [self._list_dir(base)]
        except (FileNotFoundError, NotADirectoryError):
            return
        while pending:
            for entry in pending.pop():
                yield entry
                if entry.is_directory:
                    try:
                        pending.append(self._list_dir(entry.path))
                    except (FileNotFoundError, NotADirectoryError):
                        continue  # removed since its parent was listed

    def _iter_files(self, base: str) -> Iterator[str]:
        """Every file below directory ``base``, in any order; nothing if it is missing."""
        return (entry.path for entry in self._walk(base) if entry.is_file)

    def _grep_candidates(self, pattern: GrepPattern, base: str) -> Iterable[str]:
        """Files below directory ``base`` that may hold a match. A backend may narrow this set with a
        faster search (ripgrep, a database prefilter) but never drop a file that matches."""
        return self._iter_files(base)

    def _open_content(self, path: str, inline_limit: int) -> bytes | ByteReader:
        """A file's whole content if it is at most ``inline_limit`` bytes, else an open reader."""
        reader = self._open_reader(path)
        if reader.size > inline_limit:
            return reader
        with reader:
            return reader.read()

    def _write_content(self, path: str, data: bytes, mode: WriteMode) -> None:
        """Write a whole file through the atomic writer (the parent exists)."""
        with self._open_writer(path, mode) as writer:
            writer.write(data)

    def _remove_tree(self, path: str) -> None:
        """Remove a directory and everything below it (children first)."""
        entries = builtins.list(self._walk(path))
        for entry in reversed(entries):
            if entry.is_directory:
                self._remove_empty_dir(entry.path)
            else:
                self._remove_file(entry.path)
        self._remove_empty_dir(path)

    def _move_over_tree(self, src: str, dst: str) -> None:
        """Move directory ``src`` over directory ``dst``, whose tree it replaces. The default is two steps (the
        tree's removal, then the rename); a backend that can do both as one change overrides it, so a crash or
        a refusal between them cannot leave ``dst`` gone or part removed."""
        self._remove_tree(dst)
        self._rename(src, dst, replace=False)

    def _copy_over_tree(self, src: str, dst: str) -> None:
        """Copy directory ``src`` over directory ``dst``, whose tree it replaces (two steps by default, as
        :meth:`_move_over_tree`)."""
        self._remove_tree(dst)
        self._copy_tree(src, dst)

    def _copy_file(self, src: str, dst: str) -> None:
        """Copy one file's bytes (``dst``'s parent exists; an existing ``dst`` file is replaced)."""
        with self._open_reader(src) as reader, self._open_writer(dst, "overwrite") as writer:
            writer.write_all(reader)

    def _copy_tree(self, src: str, dst: str) -> None:
        """Copy a directory recursively to ``dst``, which does not exist (its parent does)."""
        self._make_dir(dst)
        for entry in self._walk(src):  # parents first, so each target's parent exists
            target = dst + entry.path[len(src) :]
            if entry.is_directory:
                self._make_dir(target)
            else:
                self._copy_file(entry.path, target)

    # --- properties ---------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """Workspace root; ``"/"`` for virtual backends."""
        return "/"

    @property
    def read_only(self) -> bool:
        """True if every mutation raises ``ReadOnlyError`` (a ``PermissionError``)."""
        return self._read_only

    @property
    def mount_point(self) -> str | None:
        """Prefix such as ``/workspace`` that paths may carry."""
        return self._mount_point

    @property
    def capabilities(self) -> Capabilities:
        """What this backend can do: read these flags rather than probing for attributes."""
        return self.declared_capabilities

    @property
    def current_snapshot_id(self) -> UUID | None:
        """Id of the snapshot last restored; ``None`` before any restore."""
        return self._current_snapshot_id

    # --- helpers ------------------------------------------------------------------------------------

    def _state_replaced(self) -> None:
        """Called after something replaced the files wholesale (a restore, a command): forget what was
        counted about them."""

    def _restore_guard(self, snapshot: FilesystemSnapshot) -> AbstractContextManager[object]:
        """Held around a restore of ``snapshot``: raise on entry to refuse it before anything changes (the quota
        does, and keeps what the restore may add admitted until it ends)."""
        return nullcontext()

    def _norm(self, path: str) -> str:
        if type(path) is str:  # the hot path skips normalize_path's type handling
            return normalize_cached(path, self._mount_point)
        return normalize_path(path, mount_point=self._mount_point)

    def _writable(self, path: str) -> None:
        if self._read_only:
            raise ReadOnlyError(path)

    def _ensure_parents(self, path: str) -> None:
        """Create the missing directories above ``path``; ``NotADirectoryError`` if one is a file."""
        above = parent(path)
        if not above:
            return
        try:
            if self._stat(above).is_directory:
                return
            raise errors.not_a_directory(path)
        except FileNotFoundError:
            pass
        for directory in [*ancestors(path)]:
            try:
                info = self._stat(directory)
            except FileNotFoundError:
                try:
                    self._make_dir(directory)
                except FileExistsError:
                    if not self._stat(directory).is_directory:
                        raise errors.not_a_directory(path) from None
                continue
            if not info.is_directory:
                raise errors.not_a_directory(path)
