"""The backend skeleton: the primitives a backend writes and the conveniences written once over them.

A backend subclasses :class:`BaseFilesystem` and implements the ``_``-prefixed primitives marked
abstract — stat one path, list one directory, open a reader or an atomic writer, make or remove one
entry, rename, and the snapshot hooks. Everything the protocol promises on top (validation, caps,
line pagination, text decoding, glob, grep, parents, recursive delete/copy/move, diff, error
messages that name the caller's path) lives here once. A backend overrides a default primitive
(``_iter_files``, ``_open_content``, ``_write_content``, ``_remove_tree``, ``_copy_file`` …) only to be
faster; the conformance suite proves it agrees.

Primitives receive normalised paths (``""`` is the root) and raise the built-in exceptions with
those paths; the public methods put the caller's spelling back into the message.
"""

from __future__ import annotations

import builtins
import codecs
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import ClassVar, Self
from uuid import UUID

from workspacefs import errors
from workspacefs.errors import SnapshotIncompatibleError, caller_paths, name_caller_path
from workspacefs.paths import (
    DEFAULT_MAX_GREP_MATCHES,
    DEFAULT_READ_LIMIT,
    MAX_CONVENIENCE_BYTES,
    ROOT,
    ancestors,
    check_non_negative,
    is_within,
    join,
    normalize_cached,
    normalize_mount_point,
    normalize_path,
    parent,
    relative_to,
)
from workspacefs.protocol import ByteReader, BytesLike, ByteWriter
from workspacefs.results import (
    FileEntry,
    FileStat,
    FilesystemDiff,
    GlobMatch,
    GrepMatch,
    ReadBytesResult,
    ReadResult,
    WriteMode,
    WriteResult,
)
from workspacefs.search import GlobMatcher, GrepPattern, PathFilter, search_content
from workspacefs.snapshots import FilesystemSnapshot
from workspacefs.streams import Utf8TextReader

__all__ = ["WRITE_MODES", "BaseFilesystem", "lines_window", "total_lines"]

WRITE_MODES: frozenset[str] = frozenset({"create", "overwrite", "append"})

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


def _check_mode(mode: str) -> None:
    if mode not in WRITE_MODES:
        raise ValueError(f"Unknown write mode {mode!r}; use 'create', 'overwrite' or 'append'")


def _check_encoding(encoding: str) -> None:
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError):
        name = ""
    if name != "utf-8":
        raise ValueError(f"Only UTF-8 text is supported, not {encoding!r}; use read_bytes() for other data")


def _decode_error(exc: UnicodeDecodeError, path: str) -> UnicodeDecodeError:
    """The same decoding error, with a reason that tells the caller to use ``read_bytes``."""
    return UnicodeDecodeError(
        exc.encoding,
        exc.object,
        exc.start,
        exc.end,
        f"{exc.reason}: {path!r} is not UTF-8 text; use read_bytes() to read it as bytes",
    )


def _too_big(what: str, path: str) -> ValueError:
    return ValueError(
        f"{what} of {path!r} would exceed the {MAX_CONVENIENCE_BYTES // (1024 * 1024)} MiB convenience "
        "limit; pass a smaller limit or use open_read()/open_write() to stream it"
    )


class BaseFilesystem(ABC):
    """The skeleton every workspacefs backend extends; see the module docstring."""

    backend_name: ClassVar[str] = "base"
    """Kind tag written into snapshots; restoring a snapshot of another kind is refused."""
    snapshots_are_cheap: ClassVar[bool] = False
    """True when ``snapshot()`` costs O(1): the tool dispatcher then wraps every mutating tool in one."""
    inline_content_bytes: ClassVar[int] = 8 * 1024 * 1024
    """Files up to this size are read whole by ``read`` and ``grep``; bigger ones are streamed."""

    def __init__(self, *, read_only: bool = False, mount_point: str | None = None) -> None:
        self._read_only = bool(read_only)
        self._mount_point = normalize_mount_point(mount_point)
        self._current_snapshot_id: UUID | None = None

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
        """Remove a directory; ``errors.directory_not_empty`` if it has entries."""

    @abstractmethod
    def _rename(self, src: str, dst: str, *, replace: bool) -> None:
        """Move ``src`` to ``dst`` (whose parent exists). ``replace`` lets a file replace a file."""

    @abstractmethod
    def _capture(self, tag: str | None) -> FilesystemSnapshot:
        """Take a snapshot of the current state."""

    @abstractmethod
    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        """Return to a snapshot taken by this kind of backend."""

    @abstractmethod
    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        """Every file of a snapshot (``None``: the current state) mapped to a content fingerprint."""

    # --- primitives with defaults a backend may override to be faster ------------------------------

    def _iter_files(self, base: str) -> Iterator[str]:
        """Every file below directory ``base``, in any order; nothing if it is missing."""
        try:
            entries = self._list_dir(base)
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            if entry.is_directory:
                yield from self._iter_files(entry.path)
            elif entry.is_file:
                yield entry.path

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

    def _line_window(self, path: str, offset: int, window: int) -> tuple[bytes | None, int]:
        """Bytes of lines ``[offset, offset + window)`` and the file's line count.

        ``None`` instead of the bytes means they would pass the 32 MiB convenience cap.
        """
        content = self._open_content(path, self.inline_content_bytes)
        if isinstance(content, bytes):
            lines = total_lines(content)
            return (content if offset == 0 and window >= lines else lines_window(content, offset, window)), lines
        return _stream_lines_window(content, offset, window)

    def _write_content(self, path: str, data: bytes, mode: WriteMode) -> None:
        """Write a whole file through the atomic writer (the parent exists)."""
        with self._open_writer(path, mode) as writer:
            writer.write(data)

    def _remove_tree(self, path: str) -> None:
        """Remove a directory and everything below it."""
        for entry in self._list_dir(path):
            if entry.is_directory:
                self._remove_tree(entry.path)
            else:
                self._remove_file(entry.path)
        self._remove_empty_dir(path)

    def _copy_file(self, src: str, dst: str) -> None:
        """Copy one file's bytes (``dst``'s parent exists; an existing ``dst`` file is replaced)."""
        with self._open_reader(src) as reader, self._open_writer(dst, "overwrite") as writer:
            writer.write_all(reader)

    def _copy_tree(self, src: str, dst: str) -> None:
        """Copy a directory recursively to ``dst``, which does not exist (its parent does)."""
        self._make_dir(dst)
        for entry in self._list_dir(src):
            target = join(dst, entry.name)
            if entry.is_directory:
                self._copy_tree(entry.path, target)
            else:
                self._copy_file(entry.path, target)

    # --- properties ---------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """Workspace root; ``"/"`` for virtual backends."""
        return "/"

    @property
    def read_only(self) -> bool:
        """True if every mutation raises ``PermissionError``."""
        return self._read_only

    @property
    def mount_point(self) -> str | None:
        """Prefix such as ``/workspace`` that paths may carry."""
        return self._mount_point

    @property
    def current_snapshot_id(self) -> UUID | None:
        """Id of the snapshot last restored; ``None`` before any restore."""
        return self._current_snapshot_id

    # --- helpers ------------------------------------------------------------------------------------

    def _norm(self, path: str) -> str:
        if type(path) is str:  # the hot path skips normalize_path's type handling
            return normalize_cached(path, self._mount_point)
        return normalize_path(path, mount_point=self._mount_point)

    def _writable(self, path: str) -> None:
        if self._read_only:
            raise errors.read_only_filesystem(path)

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

    # --- streaming ------------------------------------------------------------------------------------

    def open_read(self, path: str) -> ByteReader:
        """Open a file for streaming byte reads (memory O(chunk)).

        Raises:
            FileNotFoundError: nothing at ``path``.
            IsADirectoryError: ``path`` is a directory.
        """
        norm = self._norm(path)
        try:
            return self._open_reader(norm)
        except OSError as exc:
            name_caller_path(exc, norm, path)
            raise

    def open_write(self, path: str, *, mode: WriteMode = "overwrite", create_parents: bool = True) -> ByteWriter:
        """Open a streaming writer; the content appears atomically when it closes without error.

        Raises:
            FileExistsError: ``mode="create"`` and the file exists (now or at commit).
            IsADirectoryError: ``path`` is a directory or the root.
            NotADirectoryError: a parent is a file.
            FileNotFoundError: the parent is missing and ``create_parents`` is false.
            PermissionError: the filesystem is read-only.
        """
        _check_mode(mode)
        norm = self._norm(path)
        self._writable(path)
        if norm == ROOT:
            raise errors.is_a_directory(path)
        with caller_paths({norm: path}):
            if create_parents:
                self._ensure_parents(norm)
            return self._open_writer(norm, mode)

    def open_text(self, path: str, *, encoding: str = "utf-8") -> Utf8TextReader:
        """Open a file for lazy UTF-8 line reads (lines split on ``\\n`` only)."""
        _check_encoding(encoding)
        return Utf8TextReader(self.open_read(path))

    # --- convenience reads and writes --------------------------------------------------------------

    def read(self, path: str, *, offset: int = 0, limit: int | None = None, encoding: str = "utf-8") -> ReadResult:
        """Lines ``[offset, offset + limit)`` as text; ``limit=None`` means 2,000 lines.

        Raises:
            FileNotFoundError, IsADirectoryError: as for :meth:`open_read`.
            UnicodeDecodeError: the lines are not UTF-8 (the message points to ``read_bytes``).
            ValueError: negative offset/limit, or the result would pass 32 MiB.
        """
        if encoding != "utf-8":
            _check_encoding(encoding)
        if type(offset) is not int or offset < 0 or (limit is not None and (type(limit) is not int or limit < 0)):
            check_non_negative("offset", offset)
            check_non_negative("limit", limit)
        window = DEFAULT_READ_LIMIT if limit is None else limit
        norm = self._norm(path)
        try:
            chosen, lines = self._line_window(norm, offset, window)
        except OSError as exc:
            name_caller_path(exc, norm, path)
            raise
        if chosen is None or len(chosen) > MAX_CONVENIENCE_BYTES:
            raise _too_big("Reading", path)
        try:
            text = chosen.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _decode_error(exc, path) from None
        return ReadResult(text, norm, lines, offset, window, offset + window < lines)

    def read_bytes(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadBytesResult:
        """Bytes ``[offset, offset + limit)``; past the end gives ``b""``.

        Raises:
            ValueError: negative offset/limit, or the result would pass 32 MiB.
        """
        check_non_negative("offset", offset)
        check_non_negative("limit", limit)
        norm = self._norm(path)
        with caller_paths({norm: path}), self._open_reader(norm) as reader:
            size = reader.size
            available = max(size - offset, 0)
            count = available if limit is None else min(limit, available)
            if count > MAX_CONVENIENCE_BYTES:
                raise _too_big("Reading", path)
            data = b""
            if count:
                reader.seek(offset)
                data = reader.read(count)
        return ReadBytesResult(
            content=data,
            path=norm,
            size_bytes=size,
            offset=offset,
            limit=limit,
            truncated=offset + len(data) < size,
        )

    def write(
        self, path: str, content: str, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult:
        """Write UTF-8 text (at most 32 MiB once encoded); atomic in ``create``/``overwrite`` mode.

        Raises: as :meth:`write_bytes`.
        """
        if type(content) is not str and not isinstance(content, str):
            raise TypeError(f"content must be a str, not {type(content).__name__}; use write_bytes() for bytes")
        return self._write_whole(path, content.encode("utf-8"), mode, create_parents)

    def write_bytes(
        self, path: str, content: BytesLike, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult:
        """Write bytes (at most 32 MiB); atomic in ``create``/``overwrite`` mode.

        Raises:
            FileExistsError: ``mode="create"`` and the file exists.
            IsADirectoryError: ``path`` is a directory or the root.
            NotADirectoryError: a parent is a file.
            FileNotFoundError: the parent is missing and ``create_parents`` is false.
            PermissionError: the filesystem is read-only.
            ValueError: unknown mode, or more than 32 MiB.
        """
        if type(content) is not bytes:
            if not isinstance(content, bytes | bytearray | memoryview):
                raise TypeError(f"content must be bytes, not {type(content).__name__}")
            content = bytes(content)
        return self._write_whole(path, content, mode, create_parents)

    def _write_whole(self, path: str, data: bytes, mode: WriteMode, create_parents: bool) -> WriteResult:
        if mode not in WRITE_MODES:
            _check_mode(mode)
        norm = self._norm(path)
        if self._read_only:
            raise errors.read_only_filesystem(path)
        if norm == ROOT:
            raise errors.is_a_directory(path)
        if len(data) > MAX_CONVENIENCE_BYTES:
            raise _too_big("Writing", path)
        try:
            try:
                self._write_content(norm, data, mode)
            except FileNotFoundError:
                # optimistic: the parent usually exists, so make it only when the write says it is missing
                if not create_parents:
                    raise
                self._ensure_parents(norm)
                self._write_content(norm, data, mode)
        except OSError as exc:
            name_caller_path(exc, norm, path)
            raise
        return WriteResult(norm, len(data), mode)

    # --- metadata --------------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        """True if a file or directory is at ``path`` (invalid paths still raise)."""
        norm = self._norm(path)
        try:
            self._stat(norm)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def stat(self, path: str) -> FileStat:
        """Metadata of a file or directory; ``FileNotFoundError`` if missing."""
        norm = self._norm(path)
        try:
            return self._stat(norm)
        except OSError as exc:
            name_caller_path(exc, norm, path)
            raise

    def list(self, path: str = ".") -> Sequence[FileEntry]:
        """Entries of a directory, sorted by name.

        Raises:
            FileNotFoundError: nothing at ``path``.
            NotADirectoryError: ``path`` is a file.
        """
        norm = self._norm(path)
        try:
            return self._list_dir(norm)
        except OSError as exc:
            name_caller_path(exc, norm, path)
            raise

    def glob(self, pattern: str, *, path: str = ".") -> Sequence[GlobMatch]:
        """Files under ``path`` whose path relative to it matches ``pattern``; sorted, root-relative."""
        matcher = GlobMatcher(pattern)
        base = self._norm(path)
        found = [file for file in self._iter_files(base) if matcher.matches(relative_to(file, base))]
        found.sort()
        return tuple(GlobMatch(path=file) for file in found)

    def grep(
        self, pattern: str, *, path: str = ".", glob: str | None = None, max_matches: int | None = None
    ) -> Sequence[GrepMatch]:
        """One match per matching line, sorted by ``(path, line_number)``, at most ``max_matches``.

        ``path`` may name a directory (searched recursively) or a single file.

        Raises:
            ValueError: invalid regex, a negative ``max_matches``, or a pattern too slow to run.
        """
        compiled = GrepPattern(pattern)
        check_non_negative("max_matches", max_matches)
        limit = DEFAULT_MAX_GREP_MATCHES if max_matches is None else max_matches
        name_filter = None if glob is None else PathFilter(glob)
        base = self._norm(path)
        try:
            searching_one_file = self._stat(base).is_file
        except (FileNotFoundError, NotADirectoryError):
            return ()
        candidates = [base] if searching_one_file else self._grep_candidates(compiled, base)
        scope = parent(base) if searching_one_file else base
        files = sorted(file for file in candidates if name_filter is None or name_filter.accepts(file, scope))
        found: builtins.list[GrepMatch] = []
        budget = compiled.new_budget()
        for file in files:
            if len(found) >= limit:
                break
            try:
                content = self._open_content(file, self.inline_content_bytes)
            except (FileNotFoundError, IsADirectoryError, PermissionError):
                continue  # vanished or replaced since it was listed
            found += search_content(compiled, file, content, limit - len(found), budget)
        return tuple(found)

    # --- mutations ---------------------------------------------------------------------------------------

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """Delete a file, an empty directory, or (``recursive=True``) a whole tree.

        Raises:
            FileNotFoundError: nothing at ``path``.
            IsADirectoryError: a non-empty directory without ``recursive=True``.
            PermissionError: the root, or a read-only filesystem.
        """
        norm = self._norm(path)
        self._writable(path)
        if norm == ROOT:
            raise errors.permission_denied(path, "The workspace root cannot be deleted")
        with caller_paths({norm: path}):
            if not self._stat(norm).is_directory:
                self._remove_file(norm)
            elif recursive:
                self._remove_tree(norm)
            else:
                self._remove_empty_dir(norm)

    def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        """Create a directory.

        Raises:
            FileExistsError: a file is there, or a directory and ``exist_ok`` is false.
            FileNotFoundError: the parent is missing and ``parents`` is false.
            NotADirectoryError: a parent is a file.
        """
        norm = self._norm(path)
        self._writable(path)
        with caller_paths({norm: path}):
            try:
                info = self._stat(norm)
            except FileNotFoundError:
                pass
            else:
                if info.is_directory and exist_ok:
                    return
                raise errors.file_exists(norm)
            if parents:
                self._ensure_parents(norm)
            try:
                self._make_dir(norm)
            except FileExistsError:
                if not (exist_ok and self._stat(norm).is_directory):
                    raise

    def _prepare_transfer(self, src: str, dst: str, overwrite: bool, verb: str) -> tuple[str, str, FileStat]:
        """Shared checks of move/copy; returns the normalised paths and the source's metadata."""
        src_norm, dst_norm = self._norm(src), self._norm(dst)
        self._writable(dst)
        if ROOT in (src_norm, dst_norm):
            raise errors.permission_denied(src if src_norm == ROOT else dst, f"Cannot {verb} the workspace root")
        with caller_paths({src_norm: src, dst_norm: dst}):
            source = self._stat(src_norm)
            if is_within(dst_norm, src_norm):
                raise ValueError(f"Cannot {verb} {src!r} into itself ({dst!r})")
            try:
                target = self._stat(dst_norm)
            except FileNotFoundError:
                self._ensure_parents(dst_norm)
                return src_norm, dst_norm, source
            if not overwrite:
                raise errors.file_exists(dst_norm)
            if is_within(src_norm, dst_norm):
                raise ValueError(f"Cannot {verb} {src!r} over {dst!r}, which contains it")
            if source.is_directory and not target.is_directory:
                raise errors.not_a_directory(dst_norm)
            if target.is_directory and not source.is_directory:
                raise errors.is_a_directory(dst_norm)
            if target.is_directory:
                self._remove_tree(dst_norm)
        return src_norm, dst_norm, source

    def move(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Move a file or directory; missing parents of ``dst`` are created.

        Raises:
            FileNotFoundError: ``src`` is missing.
            FileExistsError: ``dst`` exists and ``overwrite`` is false.
            IsADirectoryError / NotADirectoryError: ``overwrite`` would replace a directory by a file or back.
            ValueError: ``dst`` is ``src`` or inside it.
        """
        src_norm, dst_norm, source = self._prepare_transfer(src, dst, overwrite, "move")
        with caller_paths({src_norm: src, dst_norm: dst}):
            self._rename(src_norm, dst_norm, replace=overwrite and source.is_file)

    def copy(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Copy a file, or a directory recursively; missing parents of ``dst`` are created.

        Raises: as :meth:`move`.
        """
        src_norm, dst_norm, source = self._prepare_transfer(src, dst, overwrite, "copy")
        with caller_paths({src_norm: src, dst_norm: dst}):
            if source.is_directory:
                self._copy_tree(src_norm, dst_norm)
            else:
                self._copy_file(src_norm, dst_norm)

    # --- snapshots -----------------------------------------------------------------------------------------

    def _check_compatible(self, snapshot: FilesystemSnapshot) -> None:
        if not isinstance(snapshot, FilesystemSnapshot):
            raise TypeError(f"expected a FilesystemSnapshot, not {type(snapshot).__name__}")
        if snapshot.backend != self.backend_name:
            raise SnapshotIncompatibleError(
                f"Snapshot {snapshot.snapshot_id} was taken by a {snapshot.backend!r} filesystem and "
                f"cannot be restored on a {self.backend_name!r} filesystem"
            )

    def snapshot(self, *, tag: str | None = None) -> FilesystemSnapshot:
        """Capture the current state (allowed on a read-only filesystem)."""
        if tag is not None and not isinstance(tag, str):
            raise TypeError(f"tag must be a str or None, not {type(tag).__name__}")
        return self._capture(tag)

    def restore(self, snapshot: FilesystemSnapshot) -> None:
        """Return to ``snapshot``: additions, modifications and deletions since are undone.

        Raises:
            SnapshotIncompatibleError: taken by another kind of filesystem.
            PermissionError: the filesystem is read-only.
        """
        self._check_compatible(snapshot)
        self._writable("/")
        self._restore_state(snapshot)
        self._current_snapshot_id = snapshot.snapshot_id

    def diff(self, base: FilesystemSnapshot, target: FilesystemSnapshot | None = None) -> FilesystemDiff:
        """Files added, modified (by content) and deleted from ``base`` to ``target`` (``None``: now)."""
        self._check_compatible(base)
        if target is not None:
            self._check_compatible(target)
        before = self._manifest(base)
        after = self._manifest(target)
        added = sorted(p for p in after if p not in before)
        deleted = sorted(p for p in before if p not in after)
        modified: builtins.list[str] = []
        unchanged = 0
        for file, fingerprint in after.items():
            old = before.get(file, _MISSING)
            if old is _MISSING:
                continue
            if old is fingerprint or old == fingerprint:
                unchanged += 1
            else:
                modified.append(file)
        modified.sort()
        return FilesystemDiff(tuple(added), tuple(modified), tuple(deleted), unchanged)

    # --- lifecycle -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Release resources held by the backend (none by default); idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()


_MISSING = object()


def _stream_lines_window(reader: ByteReader, offset: int, window: int) -> tuple[bytes | None, int]:
    """Lines ``[offset, offset + window)`` and the line count of a large file, in fixed memory.

    Stops early, returning ``None`` for the lines, once they pass the convenience cap.
    """
    kept: builtins.list[bytes] = []
    kept_bytes = 0
    line = 0  # index of the line the next byte belongs to
    stop = offset + window
    last = b"\n"
    with reader:
        for chunk in reader:
            last = chunk[-1:]
            position = 0
            while position < len(chunk) and line < stop:
                newline = chunk.find(b"\n", position)
                end = len(chunk) if newline < 0 else newline + 1
                if line >= offset:
                    kept.append(chunk[position:end])
                    kept_bytes += end - position
                    if kept_bytes > MAX_CONVENIENCE_BYTES:
                        return None, line
                if newline < 0:
                    break
                line += 1
                position = end
            if line >= stop:
                line += chunk.count(b"\n", position)
    lines = line + (1 if last != b"\n" else 0)
    return b"".join(kept), lines
