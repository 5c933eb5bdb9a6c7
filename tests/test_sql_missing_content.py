"""SQL content that is gone (a chunk row deleted from a damaged database, a chunk object deleted from the content
store's bucket): every read of the file raises EIO naming the path as the caller wrote it (DESIGN §3), never a
chunk's hash, and never returns the file with a chunk left out. Real SQLite, PostgreSQL and S3 (moto) servers."""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from workspacefs import FilesystemSnapshot, SqlFilesystem, SqlStore
from workspacefs.backends.sql._schema import CHUNK_SIZE
from workspacefs.backends.sql._store import engine_url
from workspacefs.testing._postgres import create_database
from workspacefs.testing._s3 import S3Server

_ids = itertools.count()
BIG = b"".join(bytes([n]) * CHUNK_SIZE for n in range(6))  # six distinct chunks: past 1 MiB, so open_read streams
SMALL = b"streamed, so kept in one chunk row\n"
LOST = hashlib.sha256(BIG[2 * CHUNK_SIZE : 3 * CHUNK_SIZE]).hexdigest()  # the third chunk of BIG
SMALL_HASH = hashlib.sha256(SMALL).hexdigest()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    """A fresh database: these tests damage it."""
    if request.param == "sqlite":
        return f"sqlite:///{fast_tmp / f'missing-{next(_ids)}.db'}"
    return create_database(request.getfixturevalue("postgres_url"), f"wsfs_missing_{os.getpid()}_{next(_ids)}")


def written(store: SqlStore) -> SqlFilesystem:
    """A session with BIG at ``d/a.txt`` (written whole) and SMALL at ``d/s.txt`` (streamed: a chunk row)."""
    fs = SqlFilesystem(store, f"missing-{next(_ids)}")
    fs.write_bytes("d/a.txt", BIG)
    with fs.open_write("d/s.txt") as writer:
        writer.write(SMALL)
    return fs


def delete_chunk_rows(database: str, digests: list[str]) -> None:
    """Delete chunk rows as damage would: past the foreign keys that list them (dropped on PostgreSQL; a plain
    SQLite connection does not enforce them)."""
    engine = sa.create_engine(engine_url(database)[0])
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            found = connection.exec_driver_sql(
                "SELECT conrelid::regclass::text, conname FROM pg_constraint WHERE confrelid = 'wsfs_chunks'::regclass"
            ).all()
            for table, name in found:
                connection.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        for digest in digests:
            assert connection.execute(sa.text("DELETE FROM wsfs_chunks WHERE hash = :h"), {"h": digest}).rowcount == 1
    engine.dispose()


def assert_names(exc: pytest.ExceptionInfo[OSError], given: str, digest: str) -> None:
    """EIO whose ``filename`` (and so its message) is the caller's spelling; the hash only in the text."""
    assert exc.value.errno == errno.EIO
    assert exc.value.filename == given
    assert given in str(exc.value) and digest in exc.value.strerror


def assert_every_read_names_the_caller_path(fs: SqlFilesystem, small_digest: str) -> None:
    with pytest.raises(OSError) as exc:
        fs.read("d/../d/s.txt")
    assert_names(exc, "d/../d/s.txt", small_digest)
    with pytest.raises(OSError) as exc:
        fs.read_bytes("./d/s.txt")
    assert_names(exc, "./d/s.txt", small_digest)
    with pytest.raises(OSError) as exc:
        fs.read_bytes("d/../d/a.txt")  # whole: one statement with its chunks
    assert_names(exc, "d/../d/a.txt", LOST)
    with pytest.raises(OSError) as exc:
        fs.read_bytes("/d/a.txt", offset=CHUNK_SIZE, limit=3 * CHUNK_SIZE)  # a window: a streaming reader
    assert_names(exc, "/d/a.txt", LOST)
    assert fs.read_bytes("d/a.txt", limit=2 * CHUNK_SIZE).content == BIG[: 2 * CHUNK_SIZE]  # what is kept reads
    with fs.open_read("d/../d/a.txt") as reader, pytest.raises(OSError) as exc:
        while reader.read(CHUNK_SIZE):
            pass
    assert_names(exc, "d/../d/a.txt", LOST)
    fs.copy("d/../d/a.txt", "e/../b.txt")  # a copy shares the content (nothing is read) ...
    with pytest.raises(OSError) as exc:
        fs.read_bytes("e/../b.txt")  # ... and its reads name the copy
    assert_names(exc, "e/../b.txt", LOST)
    with pytest.raises(OSError) as exc:
        fs.write("d/../d/s.txt", "more\n", mode="append")  # an append reads the last partial chunk
    assert_names(exc, "d/../d/s.txt", small_digest)


def test_a_chunk_row_gone_fails_every_read_naming_the_caller_path(database: str) -> None:
    store = SqlStore(database)
    fs = written(store)
    delete_chunk_rows(database, [LOST, SMALL_HASH])
    assert_every_read_names_the_caller_path(fs, SMALL_HASH)
    store.close()


def test_a_chunk_object_gone_fails_every_read_naming_the_caller_path(database: str, s3_server: S3Server) -> None:
    prefix = f"missing-{next(_ids)}"
    store = SqlStore(database, content_store=s3_server.url("wsfs-tests", prefix), content_store_min_bytes=1)
    assert store.content is not None
    fs = written(store)
    keys = [store.content.key(LOST), store.content.key(SMALL_HASH)]
    assert {info.key for info in store.content.objects()} >= set(keys)
    store.content.client.delete(keys)  # the raw client: the bucket loses them under the database
    assert_every_read_names_the_caller_path(fs, SMALL_HASH)
    store.close()


def damage(database: str, statement: str, **values: object) -> None:
    """Run one damaging statement on the raw database (no foreign key stands in the way of these)."""
    engine = sa.create_engine(engine_url(database)[0])
    with engine.begin() as connection:
        assert connection.execute(sa.text(statement), values).rowcount == 1
    engine.dispose()


def assert_damaged(exc: pytest.ExceptionInfo[OSError], given: str) -> None:
    """EIO naming the caller's spelling, saying the content is damaged (never a shorter or shifted file)."""
    assert exc.value.errno == errno.EIO
    assert exc.value.filename == given
    assert "damaged" in exc.value.strerror


def assert_every_read_fails(fs: SqlFilesystem, snapshot: FilesystemSnapshot, window: int) -> None:
    """Every way of reading BIG at ``d/a.txt`` (a window at offset ``window`` too), now, from a snapshot and through
    an append, fails with EIO."""
    with pytest.raises(OSError) as exc:
        fs.read_bytes("d/../d/a.txt")  # whole: one statement with its chunks
    assert_damaged(exc, "d/../d/a.txt")
    with pytest.raises(OSError) as exc:
        fs.read("./d/a.txt", offset=0, limit=1)
    assert_damaged(exc, "./d/a.txt")
    with pytest.raises(OSError) as exc:  # never the bytes of another chunk, or fewer
        fs.read_bytes("/d/a.txt", offset=window, limit=CHUNK_SIZE)
    assert_damaged(exc, "/d/a.txt")
    with pytest.raises(OSError) as exc, fs.open_read("d/../d/a.txt") as reader:
        while reader.read(CHUNK_SIZE):
            pass
    assert_damaged(exc, "d/../d/a.txt")
    with pytest.raises(OSError) as exc:
        fs.write_bytes("d/./a.txt", b"more", mode="append")  # an append would keep the loss for good
    assert_damaged(exc, "d/./a.txt")
    with pytest.raises(OSError) as exc:
        fs._snapshot_content(snapshot, "d/a.txt")  # what a merge reads of a snapshot
    assert_damaged(exc, "d/a.txt")


def test_a_lost_row_of_a_chunk_list_fails_every_read_instead_of_shortening_it(database: str) -> None:
    store = SqlStore(database)
    fs = written(store)
    fs.write_bytes("d/a.txt", BIG[:-7])  # a partial last chunk, so an append reads it
    snapshot = fs.snapshot()
    blob = fs.stat("d/a.txt")
    damage(
        database,
        "DELETE FROM wsfs_blob_chunks WHERE seq = 2 AND blob_id = "
        "(SELECT blob_id FROM wsfs_files WHERE session_id = :s AND path = 'd/a.txt')",
        s=fs.session_id,
    )
    assert fs.stat("d/a.txt") == blob
    assert_every_read_fails(fs, snapshot, 4 * CHUNK_SIZE)  # past the hole: the old code read chunk 5 there
    store.close()


def test_a_chunk_of_the_wrong_length_fails_every_read(database: str) -> None:
    store = SqlStore(database)
    fs = written(store)
    fs.write_bytes("d/a.txt", BIG[:-7])
    snapshot = fs.snapshot()
    last = hashlib.sha256(BIG[5 * CHUNK_SIZE : -7]).hexdigest()  # the partial last chunk, which an append reads
    damage(database, "UPDATE wsfs_chunks SET data = :d WHERE hash = :h", d=BIG[:10], h=last)
    assert_every_read_fails(fs, snapshot, 5 * CHUNK_SIZE + 5)
    store.close()


def test_healthy_empty_content_written_by_a_stream_is_undone_not_reported_lost(database: str) -> None:
    """An empty file written through a stream is a blob of no chunks and no inline bytes: undoing the write that
    replaced it failed with EIO "no longer kept" (the content lost, for healthy content)."""
    store = SqlStore(database)
    fs = SqlFilesystem(store, f"empty-{next(_ids)}")
    with fs.open_write("e.txt"):
        pass
    fs.write("e.txt", "replaced\n")
    [entry] = [e for e in fs.history() if e.changes[0].before is not None]
    fs.undo(entry.entry_id)
    assert fs.read_bytes("e.txt").content == b""
    store.close()
