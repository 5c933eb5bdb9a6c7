"""``BaseFilesystem``: the skeleton every backend extends — a few primitives, everything else once.

A backend subclasses :class:`BaseFilesystem` and implements the ``_``-prefixed primitives of
``_core.FilesystemCore`` — stat one path, list one directory, open a reader or an atomic writer, make or
remove one entry, rename, and the snapshot hooks. Everything the protocol promises on top lives here
(validation, caps, line pagination, text decoding, glob, grep, parents, recursive delete/copy/move,
walks, error messages that name the caller's path), in ``_snapshotting.py`` (snapshot metadata,
lineage, diff), in ``_merging.py`` (three-way merge of snapshots) and in ``_conditional.py`` (content ids
and compare-and-set writes).
"""

from __future__ import annotations

import builtins
import codecs
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Self

from workspacefs import errors
from workspacefs.backends._conditional import ANY_VERSION, ConditionalWritesMixin
from workspacefs.backends._core import Fingerprint, lines_window, too_big, total_lines
from workspacefs.backends._merging import MergeMixin
from workspacefs.backends._quota import QuotaStep
from workspacefs.errors import (
    MoveIntoSelfError,
    PathTooDeepError,
    RootProtectedError,
    UnsupportedOperationError,
    caller_paths,
    name_caller_path,
)
from workspacefs.paths import (
    DEFAULT_MAX_GREP_MATCHES,
    DEFAULT_READ_LIMIT,
    MAX_CONVENIENCE_BYTES,
    MAX_PATH_DEPTH,
    ROOT,
    anchored_pattern,
    check_non_negative,
    encode_text,
    is_within,
    parent,
    relative_to,
)
from workspacefs.protocol import ByteReader, BytesLike, ByteWriter
from workspacefs.results import (
    FileEntry,
    FileStat,
    GlobMatch,
    GrepMatch,
    ReadBytesResult,
    ReadResult,
    WriteMode,
    WriteResult,
)
from workspacefs.search import GlobMatcher, GrepPattern, PathFilter, search_content
from workspacefs.streams import StreamReader, Utf8TextReader

__all__ = ["ANY_VERSION", "WRITE_MODES", "BaseFilesystem", "Fingerprint", "lines_window", "total_lines"]

WRITE_MODES: frozenset[str] = frozenset({"create", "overwrite", "append"})


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


def _depth(norm: str) -> int:
    return 0 if norm == ROOT else norm.count("/") + 1


class BaseFilesystem(ConditionalWritesMixin, MergeMixin):
    """The skeleton every workspacefs backend extends; see the module docstring."""

    # --- line windows (a backend overrides this to be faster) -----------------------------------------

    def _line_window(self, path: str, offset: int, window: int) -> tuple[bytes | None, int]:
        """Bytes of lines ``[offset, offset + window)`` and the file's line count.

        ``None`` instead of the bytes means they would pass the 32 MiB convenience cap.
        """
        content = self._open_content(path, self.inline_content_bytes)
        if isinstance(content, bytes):
            lines = total_lines(content)
            return (content if offset == 0 and window >= lines else lines_window(content, offset, window)), lines
        return _stream_lines_window(content, offset, window)

    # --- streaming ------------------------------------------------------------------------------------

    def open_read(self, path: str) -> ByteReader:
        """Open a file for streaming byte reads (memory O(chunk)).

        Raises:
            FileNotFoundError: nothing at ``path``.
            IsADirectoryError: ``path`` is a directory.
        """
        norm = self._norm(path)
        try:
            reader = self._open_reader(norm)
        except OSError as exc:
            name_caller_path(exc, norm, path)
            raise
        if path != norm and isinstance(reader, StreamReader):  # errors of later reads name the caller's path too
            reader.show_as(path)
        return reader

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
            return self._quota_writer(norm, mode, self._open_writer_with_parents(norm, mode, create_parents))

    def _open_writer_with_parents(self, path: str, mode: WriteMode, create_parents: bool) -> ByteWriter:
        """Open a writer at a normalised path, its missing parents made first if ``create_parents``; a backend
        whose target check already tells where the parents stand overrides this (see _write_with_parents)."""
        if create_parents:
            self._ensure_parents(path)
        return self._open_writer(path, mode)

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
            ContentTooLargeError: the result would pass 32 MiB; ValueError: a negative offset or limit.
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
            raise too_big("Reading", path)
        try:
            text = chosen.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _decode_error(exc, path) from None
        return ReadResult(text, norm, lines, offset, window, offset + window < lines)

    def read_bytes(self, path: str, *, offset: int = 0, limit: int | None = None) -> ReadBytesResult:
        """Bytes ``[offset, offset + limit)``; past the end gives ``b""``.

        Raises:
            ContentTooLargeError: the result would pass 32 MiB; ValueError: a negative offset or limit.
        """
        norm = self._norm(path)
        opened: ByteReader | None = None
        if limit is None and offset == 0 and type(offset) is int:  # the whole file (most reads): no reader
            try:
                content = self._open_content(norm, self.inline_content_bytes)
            except OSError as exc:
                name_caller_path(exc, norm, path)
                raise
            if isinstance(content, bytes):
                if len(content) > MAX_CONVENIENCE_BYTES:
                    raise too_big("Reading", path)
                return ReadBytesResult(content, norm, len(content), 0, None, False)
            opened = content
        else:
            check_non_negative("offset", offset)
            check_non_negative("limit", limit)
        with caller_paths({norm: path}):
            reader = opened if opened is not None else self._open_reader(norm)
            with reader:
                size = reader.size
                available = max(size - offset, 0)
                count = available if limit is None else min(limit, available)
                if count > MAX_CONVENIENCE_BYTES:
                    raise too_big("Reading", path)
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
        return self._write_whole(path, encode_text("content", content), mode, create_parents)

    def write_bytes(
        self, path: str, content: BytesLike, *, mode: WriteMode = "overwrite", create_parents: bool = True
    ) -> WriteResult:
        """Write bytes (at most 32 MiB); atomic in ``create``/``overwrite`` mode.

        Raises:
            FileExistsError: ``mode="create"`` and the file exists.
            IsADirectoryError: ``path`` is a directory or the root.
            NotADirectoryError: a parent is a file.
            FileNotFoundError: the parent is missing and ``create_parents`` is false.
            ReadOnlyError: the filesystem (or, where files carry the flag, the file) is read-only.
            ContentTooLargeError: more than 32 MiB; ValueError: an unknown mode.
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
            raise errors.ReadOnlyError(path)
        if norm == ROOT:
            raise errors.is_a_directory(path)
        if len(data) > MAX_CONVENIENCE_BYTES:
            raise too_big("Writing", path)
        try:
            if self._quota is None:
                self._write_with_parents(norm, data, mode, create_parents)
            else:
                with self._quota_step() as step:  # checked and written as one step (see _quota.py)
                    self._check_write(norm, len(data), mode, step)
                    self._write_with_parents(norm, data, mode, create_parents)
        except OSError as exc:
            name_caller_path(exc, norm, path)
            raise
        return WriteResult(norm, len(data), mode)

    def _write_with_parents(self, path: str, data: bytes, mode: WriteMode, create_parents: bool) -> None:
        """Write a whole file at a normalised path, making its missing parents first if ``create_parents``.

        Optimistic: the parent usually exists, so it is made only when the write says it is missing. A
        backend whose target check already tells where the parents stand (an object store) overrides this
        to make them without asking again.
        """
        try:
            self._write_content(path, data, mode)
        except FileNotFoundError:
            if not create_parents:
                raise
            self._ensure_parents(path)
            self._write_content(path, data, mode)

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

    def list_stats(self, path: str = ".") -> Sequence[FileStat]:
        """The metadata of a directory's entries, sorted by name (a listing with times and flags).

        Raises: as :meth:`list`.
        """
        norm = self._norm(path)
        with caller_paths({norm: path}):
            return self._list_stats(norm)

    def _list_stats(self, path: str) -> Sequence[FileStat]:
        """:meth:`list_stats` for a normalised path; a backend that can answer in one query overrides it."""
        found: builtins.list[FileStat] = []
        for entry in self._list_dir(path):
            try:
                found.append(self._stat(entry.path))
            except FileNotFoundError:
                continue  # removed since the directory was read
        return tuple(found)

    def walk(self, path: str = ".") -> Iterator[FileEntry]:
        """Every file and directory below ``path``, each directory before what it holds (order among
        siblings unspecified); nothing if ``path`` is missing or a file. The one tree walk: recursive
        delete, copy, glob, grep, export and the tools all go through it."""
        return self._walk(self._norm(path))

    def glob(self, pattern: str, *, path: str = ".") -> Sequence[GlobMatch]:
        """Files under ``path`` whose path relative to it matches ``pattern``; sorted, root-relative. A pattern
        written as an absolute path (``/workspace/src/*.py``) matches paths from the root instead."""
        anchored = anchored_pattern(pattern, self.mount_point)
        matcher = GlobMatcher(pattern if anchored is None else anchored)
        base = self._norm(path)
        found = [
            file
            for file in self._iter_files(base)
            if matcher.matches(relative_to(file, base) if anchored is None else file)
        ]
        found.sort()
        return tuple(GlobMatch(path=file) for file in found)

    def grep(
        self, pattern: str, *, path: str = ".", glob: str | None = None, max_matches: int | None = None
    ) -> Sequence[GrepMatch]:
        """One match per matching line, sorted by ``(path, line_number)``, at most ``max_matches``.

        ``path`` may name a directory (searched recursively) or a single file.

        Raises:
            InvalidPatternError: an invalid regex or glob (``PatternTooSlowError``: one too slow to run).
            ValueError: a negative ``max_matches``.
        """
        compiled = GrepPattern(pattern)
        check_non_negative("max_matches", max_matches)
        limit = DEFAULT_MAX_GREP_MATCHES if max_matches is None else max_matches
        anchored = None if glob is None else anchored_pattern(glob, self.mount_point)
        name_filter = None if glob is None else PathFilter(glob if anchored is None else anchored)
        base = self._norm(path)
        try:
            searching_one_file = self._stat(base).is_file
        except (FileNotFoundError, NotADirectoryError):
            return ()
        candidates = [base] if searching_one_file else self._grep_candidates(compiled, base)
        scope = ROOT if anchored is not None else parent(base) if searching_one_file else base
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
            RootProtectedError, ReadOnlyError: the root, or a read-only filesystem.
        """
        norm = self._norm(path)
        self._writable(path)
        if norm == ROOT:
            raise RootProtectedError(path, "The workspace root cannot be deleted")
        with caller_paths({norm: path}), self._journaled("delete"):
            info = self._stat(norm)
            released = self._released(norm, info)
            if not info.is_directory:
                self._remove_file(norm)
            elif recursive:
                self._remove_tree(norm)
            else:
                self._remove_empty_dir(norm)
        if released is not None:
            self._apply(*released)

    def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        """Create a directory.

        Raises:
            FileExistsError: a file is there, or a directory and ``exist_ok`` is false.
            FileNotFoundError: the parent is missing and ``parents`` is false.
            NotADirectoryError: a parent is a file.
        """
        norm = self._norm(path)
        self._writable(path)
        with caller_paths({norm: path}), self._journaled("mkdir"):
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

    def _prepare_transfer(
        self, src: str, dst: str, overwrite: bool, verb: str, step: QuotaStep | None = None
    ) -> tuple[str, str, FileStat, tuple[int, int] | None, bool]:
        """Shared checks of move/copy: the normalised paths, the source's metadata, what a move over an entry
        gives back (to count once it succeeds), and whether a directory's tree is to be replaced. A copy is
        admitted into ``step`` before anything is touched; nothing is removed here (the change does it)."""
        src_norm, dst_norm = self._norm(src), self._norm(dst)
        self._writable(dst)
        if ROOT in (src_norm, dst_norm):
            raise RootProtectedError(src if src_norm == ROOT else dst, f"Cannot {verb} the workspace root")
        with caller_paths({src_norm: src, dst_norm: dst}):
            source = self._stat(src_norm)
            if is_within(dst_norm, src_norm):
                raise MoveIntoSelfError(f"Cannot {verb} {src!r} into itself ({dst!r})")
            if source.is_directory:
                self._check_relocated_depth(src_norm, dst_norm, dst, verb)
            try:
                target = self._stat(dst_norm)
            except FileNotFoundError:
                if step is not None:
                    self._check_copy(src_norm, source, dst_norm, step)
                self._ensure_parents(dst_norm)
                return src_norm, dst_norm, source, None, False
            if not overwrite:
                raise errors.file_exists(dst_norm)
            if is_within(src_norm, dst_norm):
                raise MoveIntoSelfError(f"Cannot {verb} {src!r} over {dst!r}, which contains it")
            if source.is_directory and not target.is_directory:
                raise errors.not_a_directory(dst_norm)
            if target.is_directory and not source.is_directory:
                raise errors.is_a_directory(dst_norm)
            change = None
            if step is not None:
                self._check_copy(src_norm, source, dst_norm, step)
            else:
                change = self._released(dst_norm, target)
        return src_norm, dst_norm, source, change, target.is_directory

    def _check_relocated_depth(self, src_norm: str, dst_norm: str, dst: str, verb: str) -> None:
        """Refuse (``PathTooDeepError``) a tree whose deepest path would pass the depth limit at ``dst``, so
        nothing is made that its own path could not reach afterwards (only walked when ``dst`` is deeper)."""
        extra = _depth(dst_norm) - _depth(src_norm)
        if extra <= 0:
            return
        for entry in self._walk(src_norm):
            if _depth(entry.path) + extra > MAX_PATH_DEPTH:
                deepest = dst_norm + entry.path[len(src_norm) :]
                raise PathTooDeepError(
                    f"Cannot {verb} to {dst!r}: {deepest!r} would have more than {MAX_PATH_DEPTH} segments"
                )

    def move(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Move a file or directory; missing parents of ``dst`` are created.

        Raises:
            FileNotFoundError: ``src`` is missing.
            FileExistsError: ``dst`` exists and ``overwrite`` is false.
            IsADirectoryError / NotADirectoryError: ``overwrite`` would replace a directory by a file or back.
            MoveIntoSelfError: ``dst`` is ``src`` or inside it.
        """
        with self._journaled("move"):
            src_norm, dst_norm, source, change, over_tree = self._prepare_transfer(src, dst, overwrite, "move")
            with caller_paths({src_norm: src, dst_norm: dst}):
                if over_tree:
                    self._move_over_tree(src_norm, dst_norm)
                else:
                    self._rename(src_norm, dst_norm, replace=overwrite and source.is_file)
        if change is not None:
            self._apply(*change)

    def copy(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Copy a file, or a directory recursively; missing parents of ``dst`` are created.

        Raises: as :meth:`move`, and ``QuotaExceededError``/``FileTooLargeError`` (before anything is copied).
        """
        with self._journaled("copy"), self._quota_step() as step:
            src_norm, dst_norm, source, _, over_tree = self._prepare_transfer(src, dst, overwrite, "copy", step)
            with caller_paths({src_norm: src, dst_norm: dst}):
                if over_tree:
                    self._copy_over_tree(src_norm, dst_norm)
                elif source.is_directory:
                    self._copy_tree(src_norm, dst_norm)
                else:
                    self._copy_file(src_norm, dst_norm)

    # --- per-file flags --------------------------------------------------------------------------------

    def set_read_only(self, path: str, read_only: bool = True) -> None:
        """Mark a file read-only (its content cannot change; it can still be deleted), or writable again.

        Only where ``capabilities.file_read_only`` says so.

        Raises:
            UnsupportedOperationError: this backend has no per-file flags.
            FileNotFoundError, IsADirectoryError: no file at ``path``.
        """
        raise UnsupportedOperationError(f"{type(self).__name__} cannot mark single files read-only")

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
