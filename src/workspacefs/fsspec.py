"""fsspec over any workspacefs filesystem: pandas, pyarrow, DuckDB and other data tools read a workspace.

:class:`WorkspaceFileSystem` is registered with fsspec under the protocol ``workspace`` (an entry point
of this package), so a data tool opens ``workspace://…`` paths given the workspace in its storage options:

>>> import fsspec
>>> from workspacefs import InMemoryFilesystem
>>> ws = InMemoryFilesystem()
>>> bridge = fsspec.filesystem("workspace", fs=ws)
>>> bridge.pipe_file("data/hello.txt", b"hi\\n")
>>> ws.read("data/hello.txt").content
'hi\\n'
>>> bridge.ls("data", detail=False)
['/data/hello.txt']

Paths are relative to the workspace root, named as fsspec's memory filesystem names them (``/data/a.csv``;
``data/a.csv`` means the same, and a mount point such as ``/workspace`` is not applied). Every one goes
through the workspace's own validator: ``workspace://../x`` raises ``PermissionError`` here just as
``ws.read("../x")`` does. Files stream in fixed memory through ``open_read``/``open_write``; a file
written through the bridge appears atomically when it is closed, and is discarded when the ``with`` block
writing it raises. fsspec is an extra: ``pip install 'workspacefs[fsspec]'``.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from datetime import datetime
from types import TracebackType
from typing import Any, ClassVar, cast

try:
    from fsspec.callbacks import DEFAULT_CALLBACK
    from fsspec.spec import AbstractBufferedFile, AbstractFileSystem
    from fsspec.utils import stringify_path
except ImportError as exc:  # the module is the extra's whole point; `import workspacefs` never comes here
    raise ImportError(
        "workspacefs.fsspec needs fsspec, which is not installed; pip install 'workspacefs[fsspec]'"
    ) from exc

from workspacefs.open import open_filesystem
from workspacefs.paths import DEFAULT_CHUNK_SIZE, basename, join, normalize_path
from workspacefs.protocol import ByteReader, ByteWriter, ConditionalWrites, Filesystem
from workspacefs.results import FileEntry, FileStat, WriteMode

__all__ = ["WorkspaceFile", "WorkspaceFileSystem"]

_PREFIX = "workspace://"
_WRITE_MODES: dict[str, WriteMode] = {"wb": "overwrite", "xb": "create", "ab": "append"}
_BLOCK_SIZE = 16 * DEFAULT_CHUNK_SIZE
"""Bytes a bridge file buffers: the read-ahead of a reader, the batch a writer hands its stream (1 MiB)."""
_MAGIC = frozenset("*?[")
_FSSPEC_OPTIONS = frozenset(
    {"use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache", "asynchronous", "loop"}
)
"""Storage options fsspec's own ``AbstractFileSystem`` takes; any other is the workspace's (``url=`` only)."""


def _timestamp(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def _name(path: str) -> str:
    """fsspec's name of a normalised workspace path: ``a/b`` → ``/a/b``, the root ``""``.

    fsspec's tree operations find the common prefix of a set of names and cut at its last ``/``; a name
    at the top of the tree needs that leading ``/``, as in fsspec's memory filesystem.
    """
    return "/" + path if path else ""


def _stat_info(stat: FileStat) -> dict[str, Any]:
    """fsspec's info dict (``name``, ``size``, ``type``) of a workspace stat, times as POSIX seconds."""
    return {
        "name": _name(stat.path),
        "size": stat.size_bytes if stat.is_file else 0,
        "type": "directory" if stat.is_directory else "file",
        "created": _timestamp(stat.created_at),
        "mtime": _timestamp(stat.modified_at),
        "read_only": stat.read_only,
    }


def _entry_info(entry: FileEntry) -> dict[str, Any]:
    return {
        "name": _name(entry.path),
        "size": entry.size_bytes or 0,
        "type": "directory" if entry.is_directory else "file",
    }


def _depth(path: str) -> int:
    return path.count("/") + 1 if path else 0


class WorkspaceFileSystem(AbstractFileSystem):  # type: ignore[misc]  # fsspec ships no type information
    """An fsspec filesystem over a workspacefs :class:`~workspacefs.protocol.Filesystem` (any backend).

    Pass the workspace (``fs=``) or a URL for :func:`~workspacefs.open_filesystem` (``url=``, or ``fs=`` given
    a string: pandas hands storage options to ``fsspec.url_to_fs``, whose own first parameter is ``url``); a
    workspace opened from a URL belongs to the bridge and :meth:`close` releases it. Errors are the workspace's own
    typed built-ins (``FileNotFoundError``, ``IsADirectoryError``, ``FileExistsError``, ``PermissionError``,
    …), which is what fsspec and its callers catch.
    """

    protocol: ClassVar[str] = "workspace"
    root_marker: ClassVar[str] = "/"
    # fsspec would otherwise hand out one cached instance per equal-looking set of arguments: two
    # workspaces with the same repr would share a bridge. Each bridge wraps exactly the workspace it is given.
    cachable: ClassVar[bool] = False
    blocksize: ClassVar[int] = _BLOCK_SIZE

    def __init__(self, fs: Filesystem | str | None = None, *, url: str | None = None, **storage_options: Any) -> None:
        if isinstance(fs, str) and url is None:
            fs, url = None, fs
        if (fs is None) == (url is None):
            raise ValueError("WorkspaceFileSystem needs a workspace: fs=<a workspacefs filesystem> or url=<…>")
        if fs is not None and not isinstance(fs, Filesystem):
            raise TypeError(f"fs must be a workspacefs Filesystem, got {type(fs).__name__}")
        options = {key: storage_options.pop(key) for key in list(storage_options) if key not in _FSSPEC_OPTIONS}
        if options and url is None:  # read_only=True silently ignored would leave the workspace writable
            raise TypeError(
                f"Options {', '.join(sorted(options))} apply to a workspace opened from url=; the workspace given as "
                "fs= is used as it is"
            )
        super().__init__(**storage_options)
        self._workspace: Filesystem = (
            open_filesystem(url, **options) if url is not None else cast(Filesystem, fs)
        )  # open_filesystem refuses an option it does not know
        self._owned = fs is None

    @property
    def workspace(self) -> Filesystem:
        """The workspacefs filesystem this bridge reads and writes."""
        return self._workspace

    def close(self) -> None:
        """Release the workspace if the bridge opened it from a URL (one passed as ``fs=`` stays open)."""
        closer = getattr(self._workspace, "close", None) if self._owned else None
        if callable(closer):
            closer()

    def __enter__(self) -> WorkspaceFileSystem:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WorkspaceFileSystem) and other._workspace is self._workspace

    def __hash__(self) -> int:
        return hash((WorkspaceFileSystem, id(self._workspace)))

    # --- paths ----------------------------------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        """``workspace://a/b`` → ``/a/b``, normalised by the workspace's validator (escapes raise here)."""
        if isinstance(path, list):
            return [cls._strip_protocol(each) for each in path]
        text: str = stringify_path(path)
        if text.startswith(_PREFIX):
            text = text[len(_PREFIX) :]
        return _name(normalize_path(text))

    def _path(self, path: Any) -> str:
        """The workspace's own (relative) form of a path: never one a mount point could reinterpret."""
        stripped: str = self._strip_protocol(path)
        return stripped.lstrip("/")

    # --- metadata -------------------------------------------------------------------------------------------

    def info(self, path: Any, **kwargs: Any) -> dict[str, Any]:
        return _stat_info(self._workspace.stat(self._path(path)))

    def exists(self, path: Any, **kwargs: Any) -> bool:
        return self._workspace.exists(self._path(path))

    def ls(self, path: Any, detail: bool = True, **kwargs: Any) -> list[Any]:
        name = self._path(path)
        try:
            entries = self._workspace.list(name)
        except NotADirectoryError:  # fsspec lists a file as itself
            stat = self._workspace.stat(name)
            return [_stat_info(stat)] if detail else [_name(stat.path)]
        if detail:
            return [_entry_info(entry) for entry in entries]
        return [_name(entry.path) for entry in entries]

    def find(
        self, path: Any, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False, **kwargs: Any
    ) -> Any:
        """Everything below ``path`` in one walk of the workspace (fsspec's default lists one directory at a
        time, a round trip each on a database)."""
        if maxdepth is not None and maxdepth < 1:
            raise ValueError("maxdepth must be at least 1")
        root = self._path(path)
        found: dict[str, dict[str, Any]] = {}
        try:
            stat = self._workspace.stat(root)
        except (FileNotFoundError, NotADirectoryError):
            stat = None
        if stat is not None and stat.is_file:
            found[_name(root)] = _stat_info(stat)
        elif stat is not None:
            if withdirs and root:
                found[_name(root)] = _stat_info(stat)
            top = _depth(root)
            for entry in self._workspace.walk(root):
                if maxdepth is not None and _depth(entry.path) - top > maxdepth:
                    continue
                if withdirs or entry.is_file:
                    found[_name(entry.path)] = _entry_info(entry)
        names = sorted(found)
        return {name: found[name] for name in names} if detail else names

    def created(self, path: Any) -> datetime:
        return self._time(path, "created_at")

    def modified(self, path: Any) -> datetime:
        return self._time(path, "modified_at")

    def _time(self, path: Any, field: str) -> datetime:
        moment: datetime | None = getattr(self._workspace.stat(self._path(path)), field)
        if moment is None:
            raise NotImplementedError(f"{type(self._workspace).__name__} records no {field} for {path!r}")
        return moment

    def ukey(self, path: Any) -> str:
        """The file's content id where the workspace has one (equal bytes, equal key), else fsspec's key."""
        name = self._path(path)
        if self._workspace.capabilities.conditional_writes:
            try:
                return cast(ConditionalWrites, self._workspace).content_id(name)
            except IsADirectoryError:
                pass
        key: str = super().ukey(name)
        return key

    def checksum(self, path: Any) -> int:
        return int(hashlib.sha256(self.ukey(path).encode()).hexdigest()[:32], 16)

    # --- mutations ------------------------------------------------------------------------------------------

    def mkdir(self, path: Any, create_parents: bool = True, **kwargs: Any) -> None:
        self._workspace.mkdir(self._path(path), parents=create_parents, exist_ok=False)

    def makedirs(self, path: Any, exist_ok: bool = False) -> None:
        self._workspace.mkdir(self._path(path), parents=True, exist_ok=exist_ok)

    def rmdir(self, path: Any) -> None:
        """Remove an empty directory (``OSError`` if it holds anything, ``NotADirectoryError`` on a file)."""
        name = self._path(path)
        if not self._workspace.stat(name).is_directory:
            raise NotADirectoryError(f"Not a directory: {path!r}")
        self._workspace.delete(name)

    def rm_file(self, path: Any) -> None:
        name = self._path(path)
        if self._workspace.stat(name).is_directory:
            raise IsADirectoryError(f"Is a directory: {path!r}")
        self._workspace.delete(name)

    _rm = rm_file

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        if isinstance(path, str) and not _MAGIC.intersection(path) and maxdepth is None:
            self._workspace.delete(self._path(path), recursive=recursive)  # one call, however large the tree
            return
        for name in reversed(self.expand_path(path, recursive=recursive, maxdepth=maxdepth)):
            relative = self._path(name)
            if self._workspace.exists(relative):  # a glob may name a file and the directory holding it
                self._workspace.delete(relative)

    def cp_file(self, path1: Any, path2: Any, **kwargs: Any) -> None:
        src, dst = self._path(path1), self._path(path2)
        if self._workspace.stat(src).is_directory:  # fsspec copies a tree entry by entry
            self._workspace.mkdir(dst, parents=True, exist_ok=True)
        else:
            self._workspace.copy(src, dst, overwrite=True)

    def mv(self, path1: Any, path2: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any) -> None:
        """Move one file or directory with the workspace's own ``move`` (a rename, not a copy), into
        ``path2`` when it is a directory; lists and globs go through fsspec's copy-then-delete."""
        if not (isinstance(path1, str) and isinstance(path2, str)) or _MAGIC.intersection(path1) or maxdepth:
            super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
            return
        src, dst = self._path(path1), self._path(path2)
        if src == dst:
            return
        self._workspace.stat(src)  # FileNotFoundError before anything else
        if path2.endswith("/") or self.isdir(dst):
            dst = join(dst, basename(src))
        self._workspace.move(src, dst, overwrite=True)

    def cat_file(self, path: Any, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        with self._workspace.open_read(self._path(path)) as reader:
            size = reader.size
            first = _bound(start, size, 0)
            stop = _bound(end, size, size)
            if stop <= first:
                return b""
            reader.seek(first)
            return _read_exactly(reader, stop - first)

    def pipe_file(self, path: Any, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        with self._workspace.open_write(self._path(path), mode="create" if mode == "create" else "overwrite") as out:
            out.write(value)

    def touch(self, path: Any, truncate: bool = True, **kwargs: Any) -> None:
        name = self._path(path)
        with self._workspace.open_write(name, mode="overwrite" if truncate else "append"):
            pass

    def put_file(
        self, lpath: Any, rpath: Any, callback: Any = DEFAULT_CALLBACK, mode: str = "overwrite", **kwargs: Any
    ) -> None:
        """Copy a local file in, chunk by chunk (a local directory becomes a workspace directory)."""
        name = self._path(rpath)
        if os.path.isdir(lpath):
            self._workspace.mkdir(name, parents=True, exist_ok=True)
            return
        with open(lpath, "rb") as source:
            callback.set_size(os.fstat(source.fileno()).st_size)
            with self._workspace.open_write(name, mode="create" if mode == "create" else "overwrite") as out:
                for chunk in iter(lambda: source.read(DEFAULT_CHUNK_SIZE), b""):
                    callback.relative_update(out.write(chunk))

    def get_file(
        self, rpath: Any, lpath: Any, callback: Any = DEFAULT_CALLBACK, outfile: Any = None, **kwargs: Any
    ) -> None:
        """Copy a workspace file out, chunk by chunk (a workspace directory becomes a local directory)."""
        name = self._path(rpath)
        if outfile is None and not hasattr(lpath, "write") and self._workspace.stat(name).is_directory:
            os.makedirs(lpath, exist_ok=True)
            return
        with self._workspace.open_read(name) as reader:
            callback.set_size(reader.size)
            if outfile is not None or hasattr(lpath, "write"):
                _copy_out(reader, outfile if outfile is not None else lpath, callback)
                return
            os.makedirs(os.path.dirname(os.path.abspath(lpath)), exist_ok=True)
            with open(lpath, "wb") as target:
                _copy_out(reader, target, callback)

    # --- files ----------------------------------------------------------------------------------------------

    def open(
        self,
        path: Any,
        mode: str = "rb",
        block_size: int | None = None,
        cache_options: dict[str, Any] | None = None,
        compression: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """As fsspec's ``open``; a text file being written is discarded, like a binary one, when its ``with``
        block raises."""
        if "b" in mode:
            return super().open(path, mode, block_size, cache_options, compression, **kwargs)
        text = {key: kwargs.pop(key) for key in ("encoding", "errors", "newline") if key in kwargs}
        binary = self.open(path, mode.replace("t", "") + "b", block_size, cache_options, compression, **kwargs)
        return _AtomicText(binary, **text)

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> WorkspaceFile:
        return WorkspaceFile(
            self,
            self._path(path),
            mode,
            block_size=block_size or self.blocksize,
            autocommit=autocommit,
            cache_options=cache_options,
            **kwargs,
        )


class WorkspaceFile(AbstractBufferedFile):  # type: ignore[misc]  # fsspec ships no type information
    """A file of a :class:`WorkspaceFileSystem`: reads a range at a time from one ``open_read`` stream,
    writes through one ``open_write`` stream, so memory stays at one block (``block_size``) either way.

    Writing commits atomically on :meth:`close` (with ``autocommit``) or on :meth:`commit` (inside an fsspec
    transaction); an error in the ``with`` block, :meth:`discard`, or dropping the file unclosed leaves
    the old content. ``xb`` fails at once with ``FileExistsError`` when the file exists.
    """

    def __init__(self, fs: WorkspaceFileSystem, path: str, mode: str = "rb", **kwargs: Any) -> None:
        if mode != "rb" and mode not in _WRITE_MODES:
            raise NotImplementedError(f"File mode {mode!r} is not supported: use rb, wb, xb or ab")
        self._reader: ByteReader | None = None
        self._writer: ByteWriter | None = None
        if mode == "rb":
            self._reader = fs.workspace.open_read(path)
            kwargs["size"] = self._reader.size
        else:
            self._writer = fs.workspace.open_write(path, mode=_WRITE_MODES[mode])
        try:  # fsspec's own buffering sees "xb" as "wb" (older releases know no "xb"): the writer checked already
            super().__init__(fs, path, "wb" if mode == "xb" else mode, **kwargs)
            if mode == "ab":  # as a local file: tell() counts from the end of what is there
                self.loc = _size_or_zero(fs.workspace, path)
        except BaseException:
            self._abandon()
            raise

    def _fetch_range(self, start: int, end: int) -> bytes:
        reader = cast(ByteReader, self._reader)
        if reader.position != start:
            reader.seek(start)
        return _read_exactly(reader, end - start)

    def _upload_chunk(self, final: bool = False) -> bool:
        writer = cast(ByteWriter, self._writer)
        with self.buffer.getbuffer() as pending:
            writer.write(pending)
        if final and self.autocommit:
            self.commit()
        return True

    def commit(self) -> None:
        """Make what was written visible, in one step."""
        if self._writer is not None:
            self._writer.close()

    def discard(self) -> None:
        """Throw away what was written; the old content (or no file) remains."""
        if self._writer is not None:
            self._writer.abort()

    def close(self) -> None:
        if self.closed:
            return
        try:
            super().close()
        except BaseException:
            self._abandon()
            raise
        if self._reader is not None:
            self._reader.close()

    def _abandon(self) -> None:
        """Close without committing anything."""
        self.closed = True
        if self._reader is not None:
            self._reader.close()
        if self._writer is not None:
            self._writer.abort()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self._abandon()
        else:
            self.close()

    def __del__(self) -> None:
        # fsspec's own files close (and so commit) when collected; a write nobody closed is not a write.
        if not self.closed:
            self._abandon()


class _AtomicText(io.TextIOWrapper):
    """A text wrapper whose ``with`` block discards the file it writes when the block raises."""

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None and isinstance(self.buffer, WorkspaceFile) and self.buffer.writable():
            self.buffer._abandon()
        else:
            self.close()


def _size_or_zero(workspace: Filesystem, path: str) -> int:
    """The size of the file at ``path``, 0 if there is none yet."""
    try:
        return workspace.stat(path).size_bytes
    except FileNotFoundError:
        return 0


def _bound(value: int | None, size: int, default: int) -> int:
    """An fsspec range bound: ``None`` is the default, a negative one counts from the end; clamped."""
    if value is None:
        return default
    if value < 0:
        value += size
    return min(max(value, 0), size)


def _read_exactly(reader: ByteReader, count: int) -> bytes:
    """``count`` bytes (fewer only at the end): a stream may return less than asked in one read."""
    parts: list[bytes] = []
    while count > 0:
        chunk = reader.read(count)
        if not chunk:
            break
        parts.append(chunk)
        count -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _copy_out(reader: ByteReader, target: Any, callback: Any) -> None:
    for chunk in _chunks(reader):
        target.write(chunk)
        callback.relative_update(len(chunk))


def _chunks(reader: ByteReader) -> Iterator[bytes]:
    return reader.chunks(DEFAULT_CHUNK_SIZE)
