"""The object-store client tells its store's conditions apart by type, never by an error's text (moto's real S3 server
on loopback): a range past the end, a missing bucket and a missing object are each their own exception, so a file whose
name reads like one of S3's error codes is not taken for it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from workspacefs import ObjectStoreFilesystem
from workspacefs.testing._s3 import S3Server

BUCKET = "wsfs-typed-errors"
_roots = itertools.count()


@pytest.fixture(scope="module")
def bucket(s3_server: S3Server) -> S3Server:
    s3_server.make_bucket(BUCKET)
    return s3_server


def opened(server: S3Server) -> tuple[ObjectStoreFilesystem, Any]:
    """A fresh workspace and a raw client for the same bucket (another tool)."""
    return ObjectStoreFilesystem(server.filesystem(), f"{BUCKET}/t{next(_roots)}"), server.filesystem()


@pytest.mark.parametrize("name", ["InvalidRange.txt", "notes/InvalidRange"])
def test_a_file_named_like_an_error_code_deleted_before_its_read_is_missing(bucket: S3Server, name: str) -> None:
    """Another tool deletes the file just before it is read, and writes it again a moment later. The read's
    ``NoSuchKey`` named the key, which holds ``InvalidRange``: before, that text made it a read past the end, which
    looked the object up again and read on with the one written meanwhile (``written again``), as if found."""
    fs, raw = opened(bucket)
    fs.write(name, "as first written")
    key = fs._layout.key(name)
    raw.rm(key)
    head = fs._client.head
    looked: list[str] = []

    def written_again_then_looked_up(target: str) -> Any:
        looked.append(target)
        raw.pipe(target, b"written again")
        return head(target)

    fs._client.head = written_again_then_looked_up  # type: ignore[method-assign]
    with pytest.raises(FileNotFoundError) as caught:
        fs.read(name)
    assert caught.value.filename == name
    assert looked == []  # not looked up again: a missing object is not a range past the end

    # what the type is for still works: a ranged read at an object's end (S3 answers InvalidRange) gives no bytes
    del fs._client.head
    fs.write(name, "four")
    data, info = fs._client.get(key, 4, 10)
    assert (bytes(data), info.size) == (b"", 4)
    assert fs.read_bytes(name, offset=4).content == b""
    fs.write("empty.txt", "")
    assert fs.read("empty.txt").content == ""
