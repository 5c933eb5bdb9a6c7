"""What an ``ObjectStoreFilesystem`` error names (moto's real S3 server on loopback): the path as the caller gave it,
never an object's key, the bucket, or the snapshot store (DESIGN §3). Each test provokes the error with a real change
on the bucket (another tool rewriting or deleting an object) at the moment a request of the operation is made."""

from __future__ import annotations

import errno
import itertools
from typing import Any

import pytest

from workspacefs import ObjectStoreFilesystem
from workspacefs.errors import ConcurrentChangeError, SnapshotNotFoundError, SnapshotRestoreError
from workspacefs.testing._s3 import S3Server, running_s3

BUCKET = "wsfs-messages"
_roots = itertools.count()


@pytest.fixture(scope="module")
def bucket(s3_server: S3Server) -> S3Server:
    s3_server.make_bucket(BUCKET)
    return s3_server


def opened(server: S3Server) -> tuple[ObjectStoreFilesystem, Any]:
    """A fresh workspace and a raw client for the same bucket (another tool)."""
    return ObjectStoreFilesystem(server.filesystem(), f"{BUCKET}/m{next(_roots)}"), server.filesystem()


def names_no_key(exc: BaseException) -> None:
    """Neither the message nor any argument names the bucket (so no key of the workspace or the snapshot store)."""
    assert BUCKET not in str(exc), str(exc)
    assert not any(BUCKET in str(arg) for arg in exc.args), exc.args


def deleted_before_copy(fs: ObjectStoreFilesystem, raw: Any, source_key: str) -> None:
    """Another tool deletes ``source_key`` just before this filesystem's first copy from it."""
    copy = fs._client.copy

    def gone_then_copied(source: Any, key: str, **options: Any) -> None:
        if source.key == source_key:
            del fs._client.copy  # once
            raw.rm(source_key)
        copy(source, key, **options)

    fs._client.copy = gone_then_copied  # type: ignore[method-assign]


def test_a_file_rewritten_while_it_is_hashed_is_named_by_the_caller_s_path(bucket: S3Server) -> None:
    """An object another tool wrote has no content id with it, so it is read to learn one; rewritten while it is
    read, the ``ConcurrentChangeError`` named its key (``bucket/prefix/a.txt``), not ``a.txt``."""
    fs, raw = opened(bucket)
    key = fs._layout.key("a.txt")
    raw.pipe(key, b"as another tool wrote it")
    get = fs._client.get

    def rewritten_then_read(target: str, *args: Any, **options: Any) -> Any:
        if target == key:
            del fs._client.get  # once
            raw.pipe(key, b"and again, while it was read")
        return get(target, *args, **options)

    fs._client.get = rewritten_then_read  # type: ignore[method-assign]
    with pytest.raises(ConcurrentChangeError) as caught:
        fs.content_id("d/../a.txt")
    assert "get" not in vars(fs._client)  # read, and rewritten while it was
    assert caught.value.filename == "d/../a.txt"
    names_no_key(caught.value)


def test_a_file_deleted_before_its_copy_is_named_by_its_path(bucket: S3Server) -> None:
    """A directory copy lists, then copies each object: one deleted in between failed with the store's
    ``FileNotFoundError`` naming its key."""
    fs, raw = opened(bucket)
    fs.write("d/a.txt", "one")
    deleted_before_copy(fs, raw, fs._layout.key("d/a.txt"))
    with pytest.raises(ConcurrentChangeError) as caught:
        fs.copy("d", "e")
    assert caught.value.filename == "e/a.txt"
    names_no_key(caught.value)


def test_a_file_deleted_before_a_tree_delete_keeps_it_is_named_by_the_tree(bucket: S3Server) -> None:
    """A recursive delete keeps each file for undo (a copy into the snapshot store's blobs) before it deletes: a file
    deleted in between failed with the store's ``FileNotFoundError`` naming its key."""
    fs, raw = opened(bucket)
    fs.write("d/a.txt", "one")
    raw.pipe(fs._layout.key("d/b.txt"), b"another tool's")  # no blob kept for it yet
    deleted_before_copy(fs, raw, fs._layout.key("d/b.txt"))
    with pytest.raises(ConcurrentChangeError) as caught:
        fs.delete("./d", recursive=True)
    assert caught.value.filename == "./d"
    names_no_key(caught.value)


def test_a_file_deleted_before_a_write_keeps_it_is_named_by_the_caller_s_path(bucket: S3Server) -> None:
    """An overwrite keeps the content it replaces (a copy into the blobs) beside its journal entry: the file deleted
    in between failed with the store's ``FileNotFoundError`` naming its key."""
    fs, raw = opened(bucket)
    raw.pipe(fs._layout.key("a.txt"), b"another tool's")
    deleted_before_copy(fs, raw, fs._layout.key("a.txt"))
    with pytest.raises(ConcurrentChangeError) as caught:
        fs.write("/a.txt", "mine")
    assert caught.value.filename == "/a.txt"
    names_no_key(caught.value)


def test_a_blob_deleted_during_a_restore_names_no_key(bucket: S3Server) -> None:
    """Restore checks that the snapshot store holds every blob, then copies them back: one deleted in between
    failed with the store's ``FileNotFoundError`` naming the blob's key in the snapshot store."""
    fs, raw = opened(bucket)
    fs.write("a.txt", "one")
    snapshot = fs.snapshot()
    fs.write("a.txt", "two")
    blob = next(key for key in raw.find(fs._store.prefix + "blobs/"))
    deleted_before_copy(fs, raw, blob)
    with pytest.raises(SnapshotRestoreError) as caught:
        fs.restore(snapshot)
    names_no_key(caught.value)


def test_a_snapshot_deleted_while_its_manifest_is_read_is_not_found(bucket: S3Server) -> None:
    """A manifest is read with a ``HEAD`` then a ``GET``: deleted by another process in between, the store's
    ``FileNotFoundError`` named the manifest's key instead of ``SnapshotNotFoundError``, which the callers that
    read every snapshot (a prune, a deletion) take as "dropped meanwhile"."""
    fs, raw = opened(bucket)
    fs.write("a.txt", "one")
    snapshot = fs.snapshot()
    key = f"{fs._store.prefix}manifests/{snapshot.snapshot_id}"
    get = fs._client.get

    def deleted_then_read(target: str, *args: Any, **options: Any) -> Any:
        if target == key:
            del fs._client.get  # once
            raw.rm(key)
        return get(target, *args, **options)

    fs._client.get = deleted_then_read  # type: ignore[method-assign]
    with pytest.raises(SnapshotNotFoundError) as caught:
        fs.restore(snapshot)
    assert "get" not in vars(fs._client)
    names_no_key(caught.value)


def test_a_deleted_bucket_is_not_named_as_if_it_were_the_caller_s_file(bucket: S3Server) -> None:
    """The workspace's bucket deleted under it (by its operator): every operation's ``FileNotFoundError`` named the
    bucket, as if it were the caller's file (``No such bucket: 'wsfs-messages-gone'``). It says the configured bucket
    is missing and names no file (whatever path the caller spelled, that path is not what is missing)."""
    gone = "wsfs-messages-gone"
    bucket.make_bucket(gone)
    fs = ObjectStoreFilesystem(bucket.filesystem(), f"{gone}/w")
    fs.write("d/a.txt", "one")
    raw: Any = bucket.filesystem()
    raw.rm(gone, recursive=True)
    assert not raw.exists(gone)
    calls: list[tuple[str, Any]] = [
        ("d/../d/a.txt", lambda: fs.read("d/../d/a.txt")),
        ("./b.txt", lambda: fs.write("./b.txt", "two")),
        ("d/", lambda: fs.list("d/")),
        ("d/a.txt", lambda: fs.stat("d/a.txt")),
        ("/d/a.txt", lambda: fs.delete("/d/a.txt")),
        ("e", lambda: fs.mkdir("e")),
        ("d/a.txt", lambda: fs.move("d/a.txt", "e.txt")),
        ("d", lambda: fs.glob("*.txt", path="d")),
    ]
    for path, call in calls:
        with pytest.raises(FileNotFoundError) as caught:
            call()
        assert caught.value.filename is None, (path, caught.value)  # not the caller's file that is missing
        assert "bucket configured for this store does not exist" in str(caught.value)
        assert gone not in str(caught.value), str(caught.value)
        assert not any(gone in str(arg) for arg in caught.value.args), caught.value.args


def test_an_unreachable_store_names_no_key() -> None:
    """The store stopped: botocore's error names the request's URL (``http://…/bucket/prefix/a.txt``), which the
    ``ConnectionError`` repeated. It names the endpoint only."""
    import s3fs

    with running_s3() as server:
        server.make_bucket(BUCKET)
        s3 = s3fs.S3FileSystem(  # a refused connection is not tried again and again
            key=server.key,
            secret=server.secret,
            endpoint_url=server.endpoint_url,
            client_kwargs={"region_name": server.region},
            config_kwargs={"retries": {"max_attempts": 1, "mode": "standard"}},
            skip_instance_cache=True,
        )
        s3.retries = 1
        fs = ObjectStoreFilesystem(s3, f"{BUCKET}/stopped")
        fs.write("a.txt", "one")
    for call in (lambda: fs.read("a.txt"), lambda: fs.write("b.txt", "two"), lambda: fs.list(".")):
        with pytest.raises(ConnectionError) as caught:
            call()
        assert server.endpoint_url in str(caught.value)
        names_no_key(caught.value)


@pytest.mark.parametrize(
    "config", [{"signature_version": "nope"}, {"retries": {"mode": "nonsense"}}, {"s3": {"addressing_style": 5}}]
)
def test_a_client_that_cannot_work_as_configured_is_not_an_unreachable_store(
    bucket: S3Server, config: dict[str, Any]
) -> None:
    """A configuration botocore refuses read as ``ConnectionError`` "Cannot reach the object store" (the service's
    503, "try again later"): no later attempt helps. It is an ``OSError`` (EIO) naming the client's error type."""
    import s3fs

    raw = s3fs.S3FileSystem(
        key=bucket.key,
        secret=bucket.secret,
        endpoint_url=bucket.endpoint_url,
        client_kwargs={"region_name": bucket.region},
        config_kwargs=config,
        skip_instance_cache=True,
    )
    with pytest.raises(OSError) as caught:
        ObjectStoreFilesystem(raw, f"{BUCKET}/configured-{next(_roots)}").write("a.txt", "one")
    assert not isinstance(caught.value, ConnectionError), caught.value
    assert caught.value.errno == errno.EIO and "Error" in str(caught.value), caught.value
    names_no_key(caught.value)
