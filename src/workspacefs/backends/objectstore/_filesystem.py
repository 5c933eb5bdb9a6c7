"""``ObjectStoreFilesystem``: a workspace under one prefix of a bucket, through any fsspec filesystem.

Files are plain objects and directories zero-byte markers (see ``_layout.py``). Object stores have no
rename: a move copies inside the store, then deletes the source, file by file, so a reader of either path
sees a whole object (old or new), never part of one. Whole writes are one ``PUT`` carrying the content id as
metadata; streams go up in 5 MiB parts and appear when the upload completes. Where the store enforces
``If-Match``/``If-None-Match`` (S3), create mode and compare-and-set are decided by the store itself, so
they hold across processes; elsewhere ``write_bytes_if`` refuses instead of pretending. Every change is
journaled (``history=True``) ahead of itself, in the snapshot store (``_journal.py``, ``_history.py``).
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from typing import Any, ClassVar, TypeVar

from workspacefs import errors
from workspacefs.backends._conditional import ANY_VERSION, hash_reader
from workspacefs.backends._core import too_big
from workspacefs.backends._objects._client import ObjectClient, ObjectInfo, PreconditionFailed
from workspacefs.backends.base import BaseFilesystem
from workspacefs.backends.objectstore._journal import DEFAULT_MAX_ENTRIES, ObjectJournal, Step
from workspacefs.backends.objectstore._layout import Layout, Tree, split_root, usable_name, vanished
from workspacefs.backends.objectstore._manifests import ManifestStore
from workspacefs.backends.objectstore._naming import name_callers_paths
from workspacefs.backends.objectstore._snapshots import ObjectSnapshots
from workspacefs.backends.objectstore._streams import FIRST_BLOCK_BYTES, ObjectReader, ObjectWriter
from workspacefs.backends.objectstore._targets import Targets
from workspacefs.capabilities import Capabilities
from workspacefs.errors import (
    ConcurrentChangeError,
    PreconditionFailedError,
    UnsupportedOperationError,
)
from workspacefs.history import DIRECTORY, Change
from workspacefs.paths import MAX_CONVENIENCE_BYTES, ROOT, is_within, parent
from workspacefs.protocol import ByteReader, BytesLike, ByteWriter, VersionedContent
from workspacefs.quota import Quota
from workspacefs.results import FileEntry, FileStat, WriteMode, WriteResult
from workspacefs.streams import ContentHasher, StreamReader, content_id_of

__all__ = ["ObjectStoreFilesystem", "client_for"]

T = TypeVar("T")
R = TypeVar("R")

_PARALLEL = 16
"""Requests in flight for bulk work (tree copies and deletes, snapshots, restores)."""


def client_for(fsspec_fs: Any) -> ObjectClient:
    """The client that speaks to the store behind an fsspec filesystem (S3 through s3fs).

    Raises:
        TypeError: a store no client speaks yet (one subclass of ``ObjectClient`` each: GCS, Azure …).
    """
    protocols = getattr(fsspec_fs, "protocol", ())
    protocols = (protocols,) if isinstance(protocols, str) else tuple(protocols)
    if "s3" in protocols and hasattr(fsspec_fs, "_call_s3"):
        from workspacefs.backends._objects._s3 import S3Client  # noqa: PLC0415 - needs the s3 extra

        return S3Client(fsspec_fs)
    raise TypeError(
        f"ObjectStoreFilesystem has no client for {type(fsspec_fs).__name__} (protocol {protocols!r}) yet; "
        "S3 and S3-compatible stores work through s3fs.S3FileSystem"
    )


class ObjectStoreFilesystem(ObjectSnapshots, BaseFilesystem):
    """A workspace under ``root`` (``bucket/prefix``) of an object store reached through ``fsspec_fs``.

    ``snapshot_dir`` (``bucket/prefix``, default ``<bucket>/.wsfs-store/<prefix>``) holds snapshots and must
    lie outside the root; a root that is a whole bucket needs one in another bucket. ``versioned`` says
    whether the root's bucket keeps versions (then snapshots copy nothing: they name versions); ``None``
    asks the bucket once, when first needed. Construction makes no request: ``open_filesystem("s3://…")``
    checks the bucket and, with ``create=false``, the root.

    ``history`` journals every change (``history()``, ``undo()``, and ``watch()`` in this process) as objects
    under ``<snapshot_dir>/journal/``, written before the change and settled after it, keeping the newest
    ``history_entries`` entries and the content they replaced (versions, or blobs shared with snapshots).
    """

    backend_name: ClassVar[str] = "objectstore"
    declared_capabilities: ClassVar[Capabilities] = Capabilities(
        cheap_snapshots=False, fork=False, history=True, watch=True
    )

    def __init__(
        self,
        fsspec_fs: Any,
        root: str,
        *,
        read_only: bool = False,
        mount_point: str | None = None,
        quota: Quota | None = None,
        snapshot_dir: str | None = None,
        versioned: bool | None = None,
        history: bool = True,
        history_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        super().__init__(read_only=read_only, mount_point=mount_point, quota=quota)
        self._fsspec = fsspec_fs
        self._client = client_for(fsspec_fs)
        self._layout = Layout(*split_root(root))
        if snapshot_dir is None:
            if not self._layout.prefix:
                raise ValueError(
                    f"The root {root!r} is a whole bucket: pass snapshot_dir='other-bucket/prefix', since snapshots "
                    "never live inside the workspace"
                )
            snapshot_dir = f"{self._layout.bucket}/.wsfs-store/{self._layout.prefix}"
        store = Layout(*split_root(snapshot_dir))
        if _overlaps(store, self._layout):
            raise ValueError(f"snapshot_dir {snapshot_dir!r} overlaps the workspace root {root!r}; choose one outside")
        self._store = ManifestStore(self._client, store.base)
        self._targets = Targets(self._client, self._layout, self._parallel)
        self._ids: dict[tuple[str, str], str] = {}
        self._ids_lock = threading.Lock()
        self._blobs_seen = {}
        self._blobs_lock = threading.Lock()
        self._versioned = versioned
        if history_entries < 0:
            raise ValueError("history_entries must not be negative")
        self._history_on = history
        self._drafts = {}
        self._drafts_lock = threading.Lock()
        self._version_ids = {}
        self._changes = ObjectJournal(
            self._client,
            self._store.prefix + "journal/",
            key_of=self._layout.key,
            resolve=self._resolve,
            parallel=self._parallel,
            read_only=read_only,
            snapshot_refs=self._snapshot_refs,
            release=self._release,
            fresh=self._fresh,
            named_since=self._named_since,
            keep_copied=self._keep_copied,
            max_entries=history_entries,
        )

    # --- properties ----------------------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        """As declared, with compare-and-set only where the store enforces conditional writes, and cheap
        snapshots where the bucket keeps versions (so a snapshot copies nothing)."""
        try:
            cheap = self._versions_kept()
        except OSError:
            cheap = False  # the store cannot be asked now: claim nothing (and ask again next time)
        return replace(
            self.declared_capabilities,
            conditional_writes=self._client.conditional_writes,
            cheap_snapshots=cheap,
            history=self._history_on,
            watch=self._history_on,
        )

    @property
    def journal_grace(self) -> timedelta:
        """How old another process's pending journal entry must be before a reader here settles it by the
        state (a younger one is taken for a change in progress); 10 minutes unless set."""
        return self._changes.grace

    @journal_grace.setter
    def journal_grace(self, value: timedelta) -> None:
        self._changes.grace = value

    def _versions_kept(self) -> bool:
        if self._versioned is None:
            self._versioned = self._client.versioning(self._layout.bucket)
        return self._versioned

    @property
    def location(self) -> str:
        """``bucket/prefix`` of the workspace root in the store."""
        return self._layout.base.rstrip("/")

    @property
    def fsspec_filesystem(self) -> Any:
        """The fsspec filesystem this workspace goes through."""
        return self._fsspec

    def _snapshot_root(self) -> str:
        return f"objectstore:{self.location}"

    # --- helpers -------------------------------------------------------------------------------------

    def _parallel(self, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``work`` over every item, several requests in flight (the store's latency, not its bandwidth, is
        what bulk operations wait on)."""
        todo = list(items)
        if len(todo) <= 1:
            return [work(item) for item in todo]
        with ThreadPoolExecutor(max_workers=min(_PARALLEL, len(todo))) as pool:
            return list(pool.map(work, todo))

    def _check_target(self, path: str) -> None:
        """Refuse to write a file at ``path`` when a directory is there, or when its parent is not a directory
        (``NotADirectoryError`` for a file on the way, else ``FileNotFoundError``)."""
        if not self._targets.check(path):
            self._targets.missing_parent(path, create=False)

    def _ensure_parents(self, path: str) -> None:
        """Make the missing directories above ``path`` (one ``LIST`` when the parent is there)."""
        if not self._targets.parent_exists(path):
            self._make_parents(path, create=True)

    def _make_parents(self, path: str, *, create: bool) -> None:
        """Called when nothing is under ``path``'s parent: make the missing directories (journaled), or refuse
        as :meth:`Targets.missing_parent` does."""
        made = self._targets.missing_dirs(path, create=create)
        with self._recording("mkdir", [Step(Change(d, None, DIRECTORY)) for d in made]):
            self._targets.put_markers(made)

    def _directory_or_missing(self, path: str) -> OSError:
        """The error for a file operation on ``path`` where no file is: a directory, or nothing."""
        _, occupied = self._client.probe([], [self._layout.dir_key(path)])
        return errors.is_a_directory(path) if occupied[0] or path == ROOT else errors.file_not_found(path)

    def _head_file(self, path: str) -> ObjectInfo:
        """The file object at ``path`` (``IsADirectoryError``/``FileNotFoundError`` where none is)."""
        info = None if path == ROOT else self._client.head(self._layout.key(path))
        if info is None:
            raise self._directory_or_missing(path)
        return info

    def _tree(self, base: str) -> Tree:
        return Tree.from_listing(self._layout, base, self._client.list(self._layout.dir_key(base), recursive=True))

    # --- content ids ---------------------------------------------------------------------------------

    def _known_id(self, info: ObjectInfo) -> str | None:
        if info.content_id is not None:
            return info.content_id
        with self._ids_lock:
            return self._ids.get((info.key, info.etag))

    def _remember_id(self, info: ObjectInfo, content_id: str) -> None:
        with self._ids_lock:
            if len(self._ids) > 100_000:
                self._ids.clear()  # a cache: losing it costs requests, never correctness
                self._version_ids.clear()
            self._ids[(info.key, info.etag)] = content_id
            if info.version_id is not None:
                self._version_ids[(info.key, info.etag)] = info.version_id

    def _id_of(self, info: ObjectInfo) -> str:
        """The content id of one object version: from its metadata, this process's memory, the store's
        record of multipart uploads, or (an object another tool wrote) by reading it once."""
        known = self._known_id(info)
        if known is not None:
            return known
        content_id = self._store.recorded_id(info.etag, info.size)
        if content_id is None:
            content_id = self._hash_object(info)
            self._store.record_id(info.etag, info.size, content_id)
        self._remember_id(info, content_id)
        return content_id

    def _hash_object(self, info: ObjectInfo) -> str:
        hasher = ContentHasher()
        for start in range(0, info.size, 4 * 1024 * 1024):
            try:
                data, _ = self._client.get(info.key, start, 4 * 1024 * 1024, if_match=info.etag)
            except (PreconditionFailed, FileNotFoundError):
                path = self._layout.named(info.key)  # the path, never the key (DESIGN §3)
                raise ConcurrentChangeError(path, "The file changed while its content id was computed") from None
            hasher.update(data)
        return hasher.content_id()

    def _ids_of(self, infos: Sequence[ObjectInfo]) -> list[str]:
        """Content ids of many objects: metadata fetched in one concurrent batch where not known already."""
        unknown = [info for info in infos if self._known_id(info) is None]
        if unknown:
            heads, _ = self._client.probe([info.key for info in unknown], [])
            for listed, head in zip(unknown, heads, strict=True):
                if head is not None and head.etag == listed.etag and head.content_id is not None:
                    self._remember_id(listed, head.content_id)
        return self._parallel(self._id_of, infos)

    def _recorded_multipart(self, key: str) -> Callable[[str, str, int], None]:
        def record(etag: str, content_id: str, size: int) -> None:
            self._store.record_id(etag, size, content_id)
            with self._ids_lock:
                self._ids[(key, etag)] = content_id

        return record

    # --- primitives ----------------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStat:
        if path == ROOT:
            return FileStat(ROOT, False, True, 0)
        found, occupied = self._client.probe([self._layout.key(path)], [self._layout.dir_key(path)])
        info = found[0]
        if info is not None:
            return FileStat(path, True, False, info.size, info.modified, info.modified)
        if occupied[0]:
            return FileStat(path, False, True, 0)
        raise errors.file_not_found(path)

    def _list_dir(self, path: str) -> Sequence[FileEntry]:
        prefix = self._layout.dir_key(path)
        files: dict[str, FileEntry] = {}
        directories: dict[str, FileEntry] = {}
        seen = False
        for item in self._client.list(prefix, recursive=False):
            seen = True
            if isinstance(item, str):
                name = item[len(prefix) : -1]
                if usable_name(name):
                    directories[name] = FileEntry(name, f"{path}/{name}" if path else name, False, True, None)
                continue
            name = item.key[len(prefix) :]
            if name and usable_name(name):
                files[name] = FileEntry(name, f"{path}/{name}" if path else name, True, False, item.size)
        if not seen and path != ROOT:
            if self._client.head(self._layout.key(path)) is not None:
                raise errors.not_a_directory(path)
            raise errors.file_not_found(path)
        entries = {**directories, **files}  # a file shadows a directory of the same name
        return tuple(entries[name] for name in sorted(entries))

    def _walk(self, base: str) -> Iterator[FileEntry]:
        """Every entry below ``base`` from one recursive listing (not one request per directory)."""
        tree = self._tree(base)
        entries = [FileEntry(_name(d), d, False, True, None) for d in tree.directories]
        entries += [FileEntry(_name(p), p, True, False, info.size) for p, info in tree.files.items()]
        entries.sort(key=lambda entry: entry.path)  # a parent's path is a prefix of its children's: first
        return iter(entries)

    def _open_reader(self, path: str) -> ByteReader:
        if path == ROOT:
            raise errors.is_a_directory(path)
        info = self._open_first(path)
        return StreamReader(path, ObjectReader(self._client, path, info[1], info[0]), info[1].size)

    def _open_first(self, path: str) -> tuple[bytes | bytearray, ObjectInfo]:
        """The first block of the file at ``path`` and the version it belongs to."""
        try:
            return self._client.get(self._layout.key(path), 0, FIRST_BLOCK_BYTES)
        except FileNotFoundError:
            raise self._directory_or_missing(path) from None

    def _writer(
        self,
        path: str,
        *,
        if_match: str | None,
        if_none_match: bool,
        conflict: Callable[[], Exception],
        replaces: ObjectInfo | None = None,
    ) -> ObjectWriter:
        key = self._layout.key(path)
        return ObjectWriter(
            self._client,
            path,
            key,
            if_match=if_match,
            if_none_match=if_none_match,
            conflict=conflict,
            on_multipart=self._recorded_multipart(key),
            around_commit=self._journaled_commit(path, replaces, create=if_none_match),
        )

    def _open_writer_with_parents(self, path: str, mode: WriteMode, create_parents: bool) -> ByteWriter:
        """As :meth:`_write_with_parents`: the parents made (or refused) from the target check's answer."""
        if not self._targets.check(path):
            self._make_parents(path, create=create_parents)
        return self._writer_at(path, mode)

    def _open_writer(self, path: str, mode: WriteMode) -> ByteWriter:
        self._check_target(path)
        return self._writer_at(path, mode)

    def _writer_at(self, path: str, mode: WriteMode) -> ByteWriter:
        """A writer for ``path``, whose target is checked: append starts from the current content, create and
        append on a missing file commit only if none has appeared meanwhile."""
        existing = self._client.head(self._layout.key(path)) if mode != "overwrite" else None
        if existing is not None and mode == "create":
            raise errors.file_exists(path)
        if mode == "create" or (mode == "append" and existing is None):
            return self._writer(path, if_match=None, if_none_match=True, conflict=lambda: errors.file_exists(path))
        if mode == "overwrite" or existing is None:
            return self._writer(path, if_match=None, if_none_match=False, conflict=lambda: errors.file_exists(path))
        writer = self._writer(
            path,
            if_match=existing.etag,
            if_none_match=False,
            conflict=lambda: ConcurrentChangeError(path, "The file changed while it was being appended to"),
            replaces=existing,
        )
        try:
            for start in range(0, existing.size, 4 * 1024 * 1024):
                data, _ = self._client.get(existing.key, start, 4 * 1024 * 1024, if_match=existing.etag)
                writer.prefill(data)
        except (PreconditionFailed, FileNotFoundError):
            writer.abort()
            raise ConcurrentChangeError(path, "The file changed while it was being appended to") from None
        return writer

    def _write_with_parents(self, path: str, data: bytes, mode: WriteMode, create_parents: bool) -> None:
        """The target check tells where the parent stands, so a missing one is made (or refused) from that
        answer: one ``LIST`` and the ``PUT`` where the parent exists, nothing asked twice where it does not."""
        if mode == "append":  # the old content and the new, through one writer
            with self._open_writer_with_parents(path, mode, create_parents) as writer:
                writer.write(data)
            return
        if not self._history_on:
            if not self._targets.check(path):
                self._targets.missing_parent(path, create=create_parents)
            self._put_whole(path, data, mode)
            return
        parent_there, current = self._targets.inspect(path)
        if current is not None and mode == "create":
            raise errors.file_exists(path)
        made = [] if parent_there else self._targets.missing_dirs(path, create=create_parents)
        content_id = content_id_of(data)
        steps = [Step(Change(d, None, DIRECTORY)) for d in made] + self._written(path, current, content_id, len(data))
        with self._recording("write", steps):
            self._targets.put_markers(made)
            self._put_whole(path, data, mode, content_id)

    def _put_whole(self, path: str, data: bytes, mode: WriteMode, content_id: str | None = None) -> None:
        """One ``PUT`` of a whole file (``If-None-Match`` in create mode: the store refuses an existing one)."""
        content_id = content_id or content_id_of(data)
        try:
            info = self._client.put(self._layout.key(path), data, content_id=content_id, if_none_match=mode == "create")
        except PreconditionFailed:
            raise errors.file_exists(path) from None
        self._remember_id(info, content_id)  # a snapshot or diff by this process need not ask the store

    def _make_dir(self, path: str) -> None:
        above = parent(path)
        heads = [self._layout.key(path)]
        prefixes = [self._layout.dir_key(path)] + ([self._layout.dir_key(above)] if above else [])
        found, occupied = self._client.probe(heads, prefixes)
        if found[0] is not None or occupied[0]:
            raise errors.file_exists(path)
        if above and not occupied[1]:
            self._targets.missing_parent(path, create=False)
        with self._recording("mkdir", [Step(Change(path, None, DIRECTORY))]):
            try:
                self._client.put(self._layout.dir_key(path), b"", if_none_match=True)
            except PreconditionFailed:
                raise errors.file_exists(path) from None

    def _remove_file(self, path: str) -> None:
        info = self._head_file(path)
        steps: list[Step] = []
        if self._history_on:
            before, size, version, keep = self._kept(info)
            steps.append(Step(Change(path, before, None, size, 0), version, keep=keep))
        with self._recording("delete", steps):
            self._client.delete([info.key])

    def _remove_empty_dir(self, path: str) -> None:
        marker = self._layout.dir_key(path)
        inside = [item for item in self._client.list(marker, recursive=False, limit=2)]
        if not inside:
            if self._client.head(self._layout.key(path)) is not None:
                raise errors.not_a_directory(path)
            raise errors.file_not_found(path)
        if any(isinstance(item, str) or item.key != marker for item in inside):
            raise errors.DirectoryNotEmptyError(path)
        with self._recording("delete", [Step(Change(path, DIRECTORY, None))]):
            self._client.delete([marker])

    def _remove_tree(self, path: str) -> None:
        found = self._listing(path)
        if not found:
            raise errors.file_not_found(path)
        with self._recording("delete", self._tree_removed(path, found) if self._history_on else ()):
            self._client.delete([info.key for info in found])

    def _copy_object(self, info: ObjectInfo, path: str) -> None:
        try:
            self._client.copy(info, self._layout.key(path), content_id=self._known_id(info))
        except PreconditionFailed:
            raise ConcurrentChangeError(path, "The source changed while it was being copied; copy it again") from None
        except FileNotFoundError as exc:  # names the key
            reason = "The source was deleted while it was being copied; copy it again"
            raise vanished(exc, path.rstrip("/"), reason) from None

    def _copy_file(self, src: str, dst: str) -> None:
        if not self._history_on:
            self._copy_object(self._head_file(src), dst)
            return
        (source, target), _ = self._client.probe([self._layout.key(src), self._layout.key(dst)], [])
        if source is None:
            raise self._directory_or_missing(src)
        with self._recording("copy", self._written(dst, target, self._id_of(source), source.size)):
            self._copy_object(source, dst)

    def _copy_tree(self, src: str, dst: str) -> None:
        """Copy every object below ``src`` inside the store (markers included), then make ``dst``'s marker."""
        listing = [i for i in self._client.list(self._layout.dir_key(src), recursive=True) if isinstance(i, ObjectInfo)]
        moved = self._relocated(src, dst, listing)
        steps: list[Step] = []
        if self._history_on:
            tree = Tree.from_listing(self._layout, src, listing)
            files = sorted(tree.files)
            ids = self._ids_of([tree.files[p] for p in files])
            steps = [Step(Change(dst + d[len(src) :], None, DIRECTORY)) for d in [src, *tree.directories]]
            steps += [
                Step(Change(dst + p[len(src) :], None, i, 0, tree.files[p].size))
                for p, i in zip(files, ids, strict=True)
            ]
            steps.sort(key=lambda step: step.change.path)
        with self._recording("copy", steps):
            self._parallel(lambda pair: self._copy_object(*pair), moved)
            self._client.put(self._layout.dir_key(dst), b"")

    def _relocated(
        self, src: str, dst: str, listing: Iterable[ObjectInfo | str] | None = None
    ) -> list[tuple[ObjectInfo, str]]:
        """Every object below directory ``src`` with the path it gets below ``dst``."""
        found: list[tuple[ObjectInfo, str]] = []
        items = self._client.list(self._layout.dir_key(src), recursive=True) if listing is None else listing
        for item in items:
            if isinstance(item, str):
                continue
            relative = self._layout.path_of(item.key)
            if relative is not None and relative != src + "/":
                found.append((item, dst + relative[len(src) :]))
        return found

    def _rename(self, src: str, dst: str, *, replace: bool) -> None:
        """Copy inside the store, then delete the source: each file appears whole at ``dst`` before it goes from
        ``src`` (object stores have no rename, so a directory moves file by file)."""
        found, occupied = self._client.probe(
            [self._layout.key(src), self._layout.key(dst)], [self._layout.dir_key(dst)]
        )
        source, target = found
        if occupied[0] or (target is not None and not (replace and source is not None)):
            raise errors.file_exists(dst)
        if source is not None:
            with self._recording("move", self._file_moved(src, dst, source, target) if self._history_on else ()):
                self._copy_object(source, dst)
                self._client.delete([source.key])
            return
        listing = [i for i in self._client.list(self._layout.dir_key(src), recursive=True) if isinstance(i, ObjectInfo)]
        moved = self._relocated(src, dst, listing)
        if not moved and not self._client.probe([], [self._layout.dir_key(src)])[1][0]:
            raise errors.file_not_found(src)
        with self._recording("move", self._tree_moved(src, dst, listing) if self._history_on else ()):
            self._parallel(lambda pair: self._copy_object(*pair), moved)
            self._client.put(self._layout.dir_key(dst), b"")
            self._client.delete([info.key for info, _ in moved] + [self._layout.dir_key(src)])

    # --- conditional writes: the store compares, so the check holds across processes -------------------

    def _content_id(self, path: str) -> str:
        return self._id_of(self._head_file(path))

    def _open_versioned(self, path: str) -> VersionedContent:
        first, info = self._open_first(path)
        reader = StreamReader(path, ObjectReader(self._client, path, info, first), info.size)
        try:
            content_id = self._known_id(info) or hash_reader(reader)
        except BaseException:
            reader.close()
            raise
        self._remember_id(info, content_id)
        stat = FileStat(path, True, False, info.size, info.modified, info.modified)
        return VersionedContent(stat, content_id, reader)

    def _expected_version(self, path: str, expect: str) -> ObjectInfo:
        """The file's current version if its content id is ``expect`` (``"*"``: any file); else refuse."""
        if not self._client.conditional_writes:
            raise UnsupportedOperationError(
                f"{type(self._fsspec).__name__} does not enforce If-Match, so a compare-and-set write could "
                "silently lose an update; see capabilities.conditional_writes"
            )
        info = self._client.head(self._layout.key(path))
        if info is None:
            raise PreconditionFailedError(path, "The file no longer exists")
        if expect != ANY_VERSION and self._id_of(info) != expect:
            raise PreconditionFailedError(path)
        return info

    def write_bytes_if(
        self, path: str, content: BytesLike, *, expect: str, read_only: bool | None = None
    ) -> WriteResult:
        """As :meth:`BaseFilesystem.write_bytes_if`; the store applies the write only over the version checked
        (``If-Match``), so a writer in another process cannot slip in between."""
        self._no_flags(read_only)
        data = bytes(content)
        with self._conditional_target(path) as norm:
            if len(data) > MAX_CONVENIENCE_BYTES:
                raise too_big("Writing", path)
            current = self._expected_version(norm, expect)
            with self._quota_step() as step:
                self._check_write(norm, len(data), "overwrite", step)
                content_id = content_id_of(data)
                steps = self._written(norm, current, content_id, len(data)) if self._history_on else []
                with self._recording("write", steps):
                    try:
                        self._client.put(current.key, data, content_id=content_id, if_match=current.etag)
                    except PreconditionFailed:
                        raise PreconditionFailedError(norm) from None
        return WriteResult(norm, len(data), "overwrite")

    def open_write_if(self, path: str, *, expect: str, read_only: bool | None = None) -> ByteWriter:
        """As :meth:`BaseFilesystem.open_write_if`: checked when it opens, and at the commit by the store."""
        self._no_flags(read_only)
        with self._conditional_target(path) as norm:
            current = self._expected_version(norm, expect)
            writer = _CheckedWriter(self, norm, current)
            return self._quota_writer(norm, "overwrite", writer)

    def check_root(self, *, create: bool) -> None:
        """Check that the bucket exists; then make the root's marker (``create``) or insist that something is at
        the root. Never creates a bucket.

        Raises:
            FileNotFoundError: no such bucket, or (without ``create``) nothing at the root.
        """
        bucket = self._layout.bucket
        if not self._client.bucket_exists(bucket):
            raise FileNotFoundError(errno.ENOENT, "No such bucket", bucket)
        if not self._layout.prefix:
            return
        if create:
            if not self._read_only:
                self._client.put(self._layout.base, b"")
            return
        if not self._client.probe([], [self._layout.base])[1][0]:
            raise FileNotFoundError(errno.ENOENT, "No such workspace in the bucket", self.location)

    def close(self) -> None:
        """Nothing to release: the fsspec filesystem belongs to the caller."""

    def __repr__(self) -> str:
        flags = ", read_only=True" if self._read_only else ""
        return f"ObjectStoreFilesystem({self.location!r}{flags})"


class _CheckedWriter(ObjectWriter):
    """A compare-and-set stream: ``If-Match`` on the version checked, and the version checked again just
    before the commit (for stores that enforce ``If-Match`` only on single-request writes)."""

    __slots__ = ("_expected", "_fs")

    def __init__(self, fs: ObjectStoreFilesystem, path: str, current: ObjectInfo) -> None:
        super().__init__(
            fs._client,
            path,
            current.key,
            if_match=current.etag,
            if_none_match=False,
            conflict=lambda: PreconditionFailedError(path),
            on_multipart=fs._recorded_multipart(current.key),
            around_commit=fs._journaled_commit(path, current, create=False),
        )
        self._fs = fs
        self._expected = current

    def check_before_commit(self) -> None:
        now = self._fs._client.head(self._expected.key)
        if now is None or now.etag != self._expected.etag:
            raise PreconditionFailedError(self.path)


name_callers_paths(ObjectStoreFilesystem)


def _overlaps(one: Layout, other: Layout) -> bool:
    if one.bucket != other.bucket:
        return False
    return is_within(one.prefix, other.prefix) or is_within(other.prefix, one.prefix)


def _name(path: str) -> str:
    return path[path.rfind("/") + 1 :]
