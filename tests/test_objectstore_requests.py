"""How many requests ObjectStoreFilesystem sends to a real S3-compatible server (moto's, on loopback) for the
small operations an agent makes most: counted as botocore sends them (an observer on the s3fs client's
events, nothing replaced), never timed. A check that needs more requests than these is a regression of
the write path (every request is a round trip to the store). The write path's own counts are taken with the
journal off; what the journal adds to a small write is counted last, in both kinds of bucket."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from workspacefs import ObjectStoreFilesystem
from workspacefs.backends.objectstore._targets import PAGE_ENTRIES
from workspacefs.testing._s3 import S3Server

BUCKET = "wsfs-tests"
_roots = itertools.count()


class Requests:
    """The S3 operations one s3fs client sends, by name (one per HTTP request, retries included)."""

    def __init__(self, s3: Any) -> None:
        self.seen: Counter[str] = Counter()
        s3._s3.meta.events.register("before-send.s3", self._sent)

    def _sent(self, event_name: str, **_: Any) -> None:
        self.seen[event_name.rsplit(".", 1)[-1]] += 1

    def of(self, action: Callable[[], object]) -> dict[str, int]:
        """The requests ``action`` sends."""
        self.seen.clear()
        action()
        return dict(self.seen)


@pytest.fixture
def counted(s3_server: S3Server) -> Iterator[tuple[ObjectStoreFilesystem, Requests, Any]]:
    """A workspace on a fresh prefix over its own s3fs client, whose requests are counted (no journal)."""
    s3: Any = s3_server.filesystem()
    s3.ls(BUCKET)  # starts the client the counter observes
    root = f"{BUCKET}/requests{next(_roots)}"
    yield ObjectStoreFilesystem(s3, root, history=False), Requests(s3), s3


def test_a_small_write_is_one_list_and_one_put(counted: tuple[ObjectStoreFilesystem, Requests, Any]) -> None:
    fs, requests, _ = counted
    fs.mkdir("dir")
    one_list_one_put = {"ListObjectsV2": 1, "PutObject": 1}
    assert requests.of(lambda: fs.write("dir/new.txt", "x")) == one_list_one_put
    assert requests.of(lambda: fs.write("dir/new.txt", "y")) == one_list_one_put  # an overwrite
    assert requests.of(lambda: fs.write("top.txt", "x")) == one_list_one_put  # in the root
    assert requests.of(lambda: fs.write("dir/c.txt", "x", mode="create")) == one_list_one_put
    assert requests.of(lambda: fs.write("dir/d.txt", "x", create_parents=False)) == one_list_one_put

    def stream() -> None:
        with fs.open_write("dir/streamed.txt") as writer:
            writer.write(b"small enough for one PUT")

    assert requests.of(stream) == one_list_one_put


def test_a_write_that_makes_its_directories_asks_once(counted: tuple[ObjectStoreFilesystem, Requests, Any]) -> None:
    fs, requests, s3 = counted
    # the empty parent's listing, one question about the ancestor, its marker, the file
    assert requests.of(lambda: fs.write("new/a.txt", "x")) == {"ListObjectsV2": 1, "HeadObject": 1, "PutObject": 2}
    # three ancestors: each asked about at once (a file? anything below?), three markers, the file
    assert requests.of(lambda: fs.write("e/f/g/h.txt", "x")) == {"ListObjectsV2": 3, "HeadObject": 3, "PutObject": 4}
    assert fs.stat("e/f").is_directory
    assert s3.info(f"{fs.location}/e/f/")["size"] == 0  # markers, so the directories outlive their files


def test_a_write_under_a_file_is_refused_before_any_put(counted: tuple[ObjectStoreFilesystem, Requests, Any]) -> None:
    fs, requests, s3 = counted
    fs.write("file.txt", "data")
    with pytest.raises(NotADirectoryError):
        fs.write("file.txt/a/b.txt", "x")

    def refused() -> None:
        with pytest.raises(NotADirectoryError):
            fs.write("file.txt/c.txt", "x")

    assert requests.of(refused) == {"ListObjectsV2": 1, "HeadObject": 1}  # the empty parent, then: a file?
    assert sorted(s3.find(fs.location)) == [f"{fs.location}/file.txt"]


def test_a_directory_past_the_first_page_is_still_found(counted: tuple[ObjectStoreFilesystem, Requests, Any]) -> None:
    """A parent with more entries than the check's page: one more LIST, for the path's own prefix."""
    fs, requests, s3 = counted
    for i in range(PAGE_ENTRIES + 5):
        fs.write(f"big/a{i:03d}.txt", "x")
    fs.mkdir("big/zz")
    s3.pipe_file(f"{fs.location}/big/zy/inside.txt", b"another tool, no marker")
    for directory in ("big/zz", "big/zy"):
        with pytest.raises(IsADirectoryError):
            fs.write(directory, "x")
    assert requests.of(lambda: fs.write("big/zzz.txt", "x")) == {"ListObjectsV2": 2, "PutObject": 1}
    assert requests.of(lambda: fs.write("big/a000.txt", "y")) == {"ListObjectsV2": 1, "PutObject": 1}  # on the page
    assert fs.stat("big/zz").is_directory


def test_a_write_in_a_big_root_asks_only_about_its_path(counted: tuple[ObjectStoreFilesystem, Requests, Any]) -> None:
    """The root is always a directory: no page of it is read, one key below ``name/`` answers."""
    fs, requests, _ = counted
    for i in range(PAGE_ENTRIES + 5):
        fs.write(f"a{i:03d}.txt", "x")
    fs.mkdir("zz")
    with pytest.raises(IsADirectoryError):
        fs.write("zz", "x")
    assert requests.of(lambda: fs.write("zzz.txt", "x")) == {"ListObjectsV2": 1, "PutObject": 1}


def test_a_small_read_is_one_get_and_a_listing_one_list(counted: tuple[ObjectStoreFilesystem, Requests, Any]) -> None:
    fs, requests, _ = counted
    fs.write("dir/a.txt", "x")
    assert requests.of(lambda: fs.read_bytes("dir/a.txt")) == {"GetObject": 1}
    assert requests.of(lambda: fs.read("dir/a.txt")) == {"GetObject": 1}
    assert requests.of(lambda: fs.list("dir")) == {"ListObjectsV2": 1}


VERSIONED = "wsfs-requests-versioned"


@pytest.fixture(scope="module")
def versioned_bucket(s3_server: S3Server) -> str:
    s3_server.make_bucket(VERSIONED, versioned=True)
    return VERSIONED


@pytest.mark.parametrize("versioned", [False, True], ids=["unversioned", "versioned"])
def test_the_journal_adds_two_puts_to_a_small_write(
    s3_server: S3Server, versioned_bucket: str, versioned: bool
) -> None:
    """Journal on: the entry goes up pending before the write and done after it (two ``PUT``s). Replacing a
    file keeps its old content for undo: nothing to send where the bucket keeps versions (the entry names the
    version), one ``CopyObject`` into the snapshot store's blobs elsewhere. A process's first entry asks once
    for the newest entry id (one ``LIST``), its first replacement once whether the bucket keeps versions."""
    bucket = versioned_bucket if versioned else BUCKET
    s3: Any = s3_server.filesystem()
    s3.ls(bucket)
    fs = ObjectStoreFilesystem(s3, f"{bucket}/journaled{next(_roots)}")
    requests = Requests(s3)
    fs.mkdir("dir")
    assert requests.of(lambda: fs.write("dir/new.txt", "x")) == {"ListObjectsV2": 1, "PutObject": 3}
    first = requests.of(lambda: fs.write("dir/new.txt", "y"))
    assert first.pop("GetBucketVersioning") == 1  # once per filesystem object
    kept = {} if versioned else {"CopyObject": 1}
    assert first == {"ListObjectsV2": 1, "PutObject": 3, **kept}
    assert requests.of(lambda: fs.write("dir/new.txt", "z")) == {"ListObjectsV2": 1, "PutObject": 3, **kept}
    assert requests.of(lambda: fs.write("dir/other.txt", "x")) == {"ListObjectsV2": 1, "PutObject": 3}
    # in the root, where no page of the parent is read, the check asks about the file too (beside it: one round trip)
    assert requests.of(lambda: fs.write("top.txt", "x")) == {"ListObjectsV2": 1, "HeadObject": 1, "PutObject": 3}
    off = ObjectStoreFilesystem(s3, f"{bucket}/unjournaled{next(_roots)}", history=False)
    off.mkdir("dir")
    off.write("dir/new.txt", "x")
    assert requests.of(lambda: off.write("dir/new.txt", "y")) == {"ListObjectsV2": 1, "PutObject": 1}
    assert [e.operation for e in fs.history()] == ["write"] * 5 + ["mkdir"]
