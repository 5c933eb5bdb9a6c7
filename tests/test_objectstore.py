"""ObjectStoreFilesystem on a real S3-compatible server (moto's, over HTTP on loopback): the whole conformance
suite, plus what only an object store has to get right (markers, copies inside the store, snapshots outside
the root, compare-and-set decided by the store, errors of an unreachable or refusing endpoint)."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

import pytest

from workspacefs import ObjectStoreFilesystem, PreconditionFailedError, SnapshotNotFoundError
from workspacefs.backends.objectstore import open_s3
from workspacefs.protocol import Filesystem
from workspacefs.quota import Quota
from workspacefs.streams import content_id_of
from workspacefs.testing import FilesystemValidationSuite
from workspacefs.testing._s3 import S3Server

BUCKET = "wsfs-tests"
_prefixes = itertools.count()


def fresh_root() -> str:
    return f"{BUCKET}/t{next(_prefixes)}"


@pytest.fixture(scope="module")
def s3_client(s3_server: S3Server) -> Any:
    """One s3fs client for the module, its session started (botocore loads its models once, not in a test
    that counts the memory a stream takes)."""
    s3 = s3_server.filesystem()
    s3.ls(BUCKET)
    return s3


class ObjectStoreFactory:
    """A fresh prefix of the session's bucket per filesystem, over one s3fs client per server."""

    server: S3Server
    s3: Any

    @pytest.fixture(autouse=True)
    def _server(self, s3_server: S3Server, s3_client: Any) -> Iterator[None]:
        self.server = s3_server
        self.s3 = s3_client
        yield

    def fresh_root(self) -> str:
        """A new prefix for one filesystem."""
        return fresh_root()

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        return ObjectStoreFilesystem(self.s3, self.fresh_root(), read_only=read_only, mount_point=mount_point)

    def create_filesystem_with_quota(self, quota: Quota) -> Filesystem:
        return ObjectStoreFilesystem(self.s3, self.fresh_root(), quota=quota)

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        root = self.fresh_root()
        writable = ObjectStoreFilesystem(self.s3, root)
        for path, data in files.items():
            writable.write_bytes(path, data)
        return ObjectStoreFilesystem(self.s3, root, read_only=True, mount_point=mount_point)


class TestObjectStore(ObjectStoreFactory, FilesystemValidationSuite):
    model_examples = 15


class TestObjectStoreBehaviour(ObjectStoreFactory):
    """What the suite cannot see from the protocol: what lands in the bucket, and how the store decides."""

    def raw(self, key: str) -> bytes:
        data: bytes = self.s3.cat_file(key)
        return data

    def keys(self, prefix: str) -> list[str]:
        return sorted(self.s3.find(prefix, withdirs=False))

    def test_files_are_plain_objects_and_directories_markers(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        fs.write("src/app.py", "print('hi')\n")
        fs.mkdir("empty")
        assert self.raw(f"{root}/src/app.py") == b"print('hi')\n"  # any S3 tool reads the workspace
        assert self.s3.info(f"{root}/empty/")["size"] == 0
        fs.delete("src/app.py")
        assert [e.name for e in fs.list()] == ["empty", "src"]  # a directory outlives its last file

    def test_snapshots_live_outside_the_root_and_share_content(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        fs.write("a.txt", "same")
        fs.write("b.txt", "same")
        fs.write("c.txt", "other")
        first = fs.snapshot()
        second = fs.snapshot()
        store = f"{BUCKET}/.wsfs-store/{root.split('/', 1)[1]}"
        blobs = [k for k in self.keys(store) if "/blobs/" in k]
        assert len(blobs) == 2  # one copy per distinct content, shared by both snapshots
        assert not any(".wsfs" in e.path for e in fs.walk())
        fs.delete_snapshot(first)
        assert len([k for k in self.keys(store) if "/blobs/" in k]) == 2  # still held by the second
        fs._changes.tombstone_age = timedelta(0)  # a blob younger than this stays for a later pass
        fs.delete_snapshot(second)
        assert [k for k in self.keys(store) if "/blobs/" in k] == []

    def test_another_process_sees_and_restores_the_snapshots(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        fs.write("f.txt", "v1")
        taken = fs.snapshot(tag="v1")
        fs.write("f.txt", "v2")
        other = ObjectStoreFilesystem(self.server.filesystem(), root)
        listed = other.snapshots()
        assert [(s.snapshot_id, s.tag) for s in listed] == [(taken.snapshot_id, "v1")]
        other.restore(listed[0])
        assert fs.read("f.txt").content == "v1"

    def test_a_snapshot_of_another_workspace_is_not_found(self) -> None:
        one = ObjectStoreFilesystem(self.s3, fresh_root())
        two = ObjectStoreFilesystem(self.s3, fresh_root())
        snapshot = one.snapshot()
        with pytest.raises(SnapshotNotFoundError):
            two.restore(snapshot)

    def test_snapshot_dir_must_be_outside_the_root(self) -> None:
        root = fresh_root()
        with pytest.raises(ValueError, match="overlaps"):
            ObjectStoreFilesystem(self.s3, root, snapshot_dir=f"{root}/snaps")
        with pytest.raises(ValueError, match="whole bucket"):
            ObjectStoreFilesystem(self.s3, BUCKET)

    def test_compare_and_set_is_decided_by_the_store(self) -> None:
        """Two filesystems (no lock in common) race: the store's If-Match lets exactly one write win."""
        root = fresh_root()
        first = ObjectStoreFilesystem(self.s3, root)
        second = ObjectStoreFilesystem(self.server.filesystem(), root)
        first.write("counter.txt", "0")
        seen = first.content_id("counter.txt")
        racer = _Interleaved(self.s3, root, lambda: second.write_bytes_if("counter.txt", b"second", expect=seen))
        with pytest.raises(PreconditionFailedError):
            racer.write_bytes_if("counter.txt", b"first", expect=seen)
        assert first.read("counter.txt").content == "second"

    def test_racing_writers_exactly_one_wins(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        fs.write("n.txt", "start")
        seen = fs.content_id("n.txt")
        writers = [ObjectStoreFilesystem(self.server.filesystem(), root) for _ in range(6)]
        outcomes: list[str] = []
        barrier = threading.Barrier(len(writers))

        def write(index: int) -> None:
            barrier.wait()
            try:
                writers[index].write_bytes_if("n.txt", f"w{index}".encode(), expect=seen)
                outcomes.append(f"w{index}")
            except PreconditionFailedError:
                outcomes.append("refused")

        threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        winners = [o for o in outcomes if o != "refused"]
        assert len(outcomes) == len(writers) and len(winners) == 1
        assert fs.read("n.txt").content == winners[0]

    def test_a_multipart_write_is_invisible_until_it_completes(self) -> None:
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        fs.write("big.bin", "old")
        part = bytes(range(256)) * 4096 * 6  # 6 MiB: more than one part
        writer = fs.open_write("big.bin")
        writer.write(part)
        writer.write(part)
        assert fs.read("big.bin").content == "old"
        writer.close()
        assert fs.stat("big.bin").size_bytes == 2 * len(part)
        assert fs.content_id("big.bin") == content_id_of(part + part)  # recorded at the commit, not re-read
        with pytest.raises(RuntimeError), fs.open_write("big.bin") as failing:
            failing.write(part)
            failing.write(part)
            raise RuntimeError("boom")
        assert fs.stat("big.bin").size_bytes == 2 * len(part)
        uploads = self.s3.call_s3("list_multipart_uploads", Bucket=BUCKET, Prefix=root.split("/", 1)[1])
        assert not uploads.get("Uploads")  # the failed one was aborted, not left to cost storage

    def test_content_id_records_of_replaced_uploads_are_collected(self) -> None:
        """An object written in parts has its content id recorded beside the snapshots (``ids/<etag>``);
        deleting a snapshot also deletes the records of versions no longer live."""
        root = fresh_root()
        fs = ObjectStoreFilesystem(self.s3, root)
        part = bytes(range(256)) * 4096 * 6  # 6 MiB: a stream of two goes up in parts
        with fs.open_write("big.bin") as writer:
            writer.write(part)
            writer.write(part)
        snapshot = fs.snapshot()
        with fs.open_write("big.bin") as writer:
            writer.write(part)
            writer.write(part + b"more")
        store = f"{BUCKET}/.wsfs-store/{root.split('/', 1)[1]}/ids/"
        assert len(self.keys(store)) == 2
        fs.delete_snapshot(snapshot)
        assert len(self.keys(store)) == 1  # the live version's record stays
        again = ObjectStoreFilesystem(self.server.filesystem(), root)  # no memory of the ids
        assert again.content_id("big.bin") == content_id_of(part + part + b"more")

    def test_a_reader_of_a_replaced_large_file_fails_rather_than_mix_versions(self) -> None:
        from workspacefs import ConcurrentChangeError

        fs = ObjectStoreFilesystem(self.s3, fresh_root())
        fs.write_bytes("big.bin", b"a" * (3 * 1024 * 1024))
        with fs.open_read("big.bin") as reader:
            assert reader.read(1024 * 1024) == b"a" * (1024 * 1024)
            fs.write_bytes("big.bin", b"b" * (3 * 1024 * 1024))
            with pytest.raises(ConcurrentChangeError):
                reader.read()

    def test_objects_written_by_other_tools_are_visible(self) -> None:
        root = fresh_root()
        self.s3.pipe_file(f"{root}/implicit/dir/x.txt", b"x")  # no markers, no content id
        self.s3.pipe_file(f"{root}/bad\x01name", b"?")  # a name no workspace path can have
        fs = ObjectStoreFilesystem(self.s3, root)
        assert [e.name for e in fs.list()] == ["implicit"]
        assert fs.stat("implicit/dir").is_directory
        assert fs.read("implicit/dir/x.txt").content == "x"
        assert fs.content_id("implicit/dir/x.txt") == content_id_of(b"x")
        snapshot = fs.snapshot()
        fs.write("implicit/dir/x.txt", "changed")
        fs.restore(snapshot)
        assert fs.read("implicit/dir/x.txt").content == "x"


class _Interleaved(ObjectStoreFilesystem):
    """Runs another writer's write between this one's version check and its write: the window a process-local
    lock cannot close, which only the store's If-Match can."""

    def __init__(self, fsspec_fs: Any, root: str, between: Any) -> None:
        super().__init__(fsspec_fs, root)
        self._between = between

    def _expected_version(self, path: str, expect: str) -> Any:
        current = super()._expected_version(path, expect)
        self._between()
        return current


class TestOpenS3:
    """``open_s3`` (what an ``s3://`` URL opens): ``create``, the bucket check, and errors that say what is wrong."""

    def options(self, server: S3Server, **extra: Any) -> dict[str, Any]:
        return {
            "endpoint_url": server.endpoint_url,
            "key": server.key,
            "secret": server.secret,
            "region": server.region,
            **extra,
        }

    def test_open_and_create(self, s3_server: S3Server) -> None:
        fs = open_s3(f"{BUCKET}/opened/one", **self.options(s3_server))
        fs.write("a.txt", "a")
        again = open_s3(f"{BUCKET}/opened/one", **self.options(s3_server, create=False, read_only=True))
        assert again.read("a.txt").content == "a" and again.read_only
        assert again.location == f"{BUCKET}/opened/one"
        empty = open_s3(f"{BUCKET}/opened/empty", **self.options(s3_server))
        assert list(empty.list()) == []
        assert open_s3(f"{BUCKET}/opened/empty", **self.options(s3_server, create=False)).exists("/")

    def test_create_false_refuses_what_is_missing(self, s3_server: S3Server) -> None:
        s3 = s3_server.filesystem()
        with pytest.raises(FileNotFoundError):
            open_s3(f"{BUCKET}/never/made", **self.options(s3_server, create=False))
        assert not s3.find(f"{BUCKET}/never")
        with pytest.raises(FileNotFoundError, match="No such bucket"):
            open_s3("no-such-bucket/x", **self.options(s3_server))
        with pytest.raises(FileNotFoundError, match="No such bucket"):
            open_s3("no-such-bucket/x", **self.options(s3_server, create=False))
        assert not s3.exists("no-such-bucket")  # never created

    def test_options(self, s3_server: S3Server) -> None:
        fs = open_s3(
            f"{BUCKET}/opened/two", **self.options(s3_server, mount_point="/workspace", quota=Quota(max_files=1))
        )
        fs.write("/workspace/a.txt", "a")
        assert fs.read("a.txt").content == "a" and fs.quota == Quota(max_files=1)

    def test_unreachable_endpoint_is_a_connection_error(self, s3_server: S3Server) -> None:
        from workspacefs.testing._s3 import _free_port

        options = self.options(s3_server, endpoint_url=f"http://127.0.0.1:{_free_port()}")
        with pytest.raises(ConnectionError, match="Cannot reach the object store") as caught:
            open_s3(f"{BUCKET}/x", **options)
        assert "botocore" not in type(caught.value).__module__
        assert caught.value.__cause__ is None and caught.value.__suppress_context__

    def test_access_denied_is_a_permission_error(self, s3_server: S3Server) -> None:
        s3 = s3_server.filesystem()
        s3.call_s3(
            "put_bucket_policy",
            Bucket=BUCKET,
            Policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Deny",
                            "Principal": "*",
                            "Action": "s3:GetObject",
                            "Resource": f"arn:aws:s3:::{BUCKET}/denied/*",
                        }
                    ],
                }
            ),
        )
        fs = ObjectStoreFilesystem(s3, f"{BUCKET}/denied")
        fs.write("secret.txt", "s")
        try:
            with pytest.raises(PermissionError):
                fs.read("secret.txt")
        finally:
            s3.call_s3("delete_bucket_policy", Bucket=BUCKET)
        assert fs.read("secret.txt").content == "s"


class TestS3Url:
    """``open_filesystem("s3://bucket/prefix?…")``: the URL's options reach ``open_s3``."""

    def test_open_with_options(self, s3_server: S3Server) -> None:
        from workspacefs import open_filesystem

        url = s3_server.url(BUCKET, "url/one", mount_point="/workspace", quota_files="2")
        fs: Any = open_filesystem(url)
        fs.write("/workspace/a.txt", "a")
        assert isinstance(fs, ObjectStoreFilesystem) and fs.location == f"{BUCKET}/url/one"
        assert fs.read("a.txt").content == "a" and fs.quota == Quota(max_files=2)
        again: Any = open_filesystem(s3_server.url(BUCKET, "url/one", create="false", read_only="true"))
        assert again.read_only and again.read("a.txt").content == "a"
        with pytest.raises(FileNotFoundError):
            open_filesystem(s3_server.url(BUCKET, "url/never", create="false"))
        with pytest.raises(ValueError, match="Unknown option"):
            open_filesystem(s3_server.url(BUCKET, "url/two", colour="blue"))
