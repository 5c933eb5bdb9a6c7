"""SqlStore with a content store: large chunks in a real S3-compatible server (moto, on loopback), small
ones in the database; deduplicated, collected by ``gc`` without losing what a file, a snapshot or a
concurrent writer needs; the whole conformance suite with nearly every chunk in the object store; the
migration that adds ``wsfs_chunks.stored``. Counts objects and rows, never times anything."""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import pytest
import sqlalchemy as sa

from workspacefs import SqlFilesystem, SqlStore, open_filesystem
from workspacefs.backends._objects._s3 import S3Client as S3ClientBase
from workspacefs.backends.sql._content import STORED_OBJECT, STORED_SQL, ContentStore
from workspacefs.backends.sql._schema import CHUNK_SIZE
from workspacefs.backends.sql._store import engine_url, migration_config
from workspacefs.protocol import Filesystem
from workspacefs.quota import Quota
from workspacefs.testing import FilesystemValidationSuite
from workspacefs.testing._postgres import create_database
from workspacefs.testing._s3 import S3Server

BUCKET = "wsfs-tests"
_ids = itertools.count()


def content_url(server: S3Server, prefix: str) -> str:
    """The ``s3://`` URL of a content store under ``prefix`` of the test bucket."""
    return server.url(BUCKET, prefix)


def new_prefix(name: str) -> str:
    return f"content-{name}-{next(_ids)}"


def object_keys(store: SqlStore) -> set[str]:
    assert store.content is not None
    return {info.key for info in store.content.objects()}


def chunk_rows(store: SqlStore) -> dict[str, tuple[str, int]]:
    """Every chunk row: hash -> (stored, length of ``data``)."""
    with store.read() as connection:
        rows = connection.exec_driver_sql("SELECT hash, stored, length(data) FROM wsfs_chunks").all()
    return {row[0]: (row[1], int(row[2])) for row in rows}


def fresh_postgres(server_url: str) -> str:
    """A new, empty database on the test server. One database has one content store: sharing the session's
    database would let these chunks (kept in objects) meet stores opened without a content store."""
    return create_database(server_url, f"wsfs_content_{os.getpid()}_{next(_ids)}")


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{fast_tmp / f'content-{next(_ids)}.db'}"
    return fresh_postgres(request.getfixturevalue("postgres_url"))


@pytest.fixture
def server(s3_server: Any) -> S3Server:
    assert isinstance(s3_server, S3Server)
    return s3_server


def open_store(database: str, server: S3Server, *, min_bytes: int | None = None, prefix: str = "") -> SqlStore:
    url = content_url(server, prefix or new_prefix("t"))
    return SqlStore(database, content_store=url, content_store_min_bytes=min_bytes)


def session(store: SqlStore) -> SqlFilesystem:
    return SqlFilesystem(store, f"cs-{next(_ids)}")


def test_chunks_above_the_threshold_are_objects_and_below_stay_in_the_database(database: str, server: S3Server) -> None:
    store = open_store(database, server)  # the default threshold: one whole chunk (256 KiB)
    fs = session(store)
    big = bytes(range(256)) * (CHUNK_SIZE // 256) + b"tail" * 1000  # one full chunk and a 4,000-byte tail
    fs.write_bytes("big.bin", big)
    fs.write_bytes("small.txt", b"small content\n")
    full, tail = hashlib.sha256(big[:CHUNK_SIZE]).hexdigest(), hashlib.sha256(big[CHUNK_SIZE:]).hexdigest()
    rows = chunk_rows(store)
    assert rows[full] == (STORED_OBJECT, 0)  # not in wsfs_chunks.data ...
    assert object_keys(store) == {store.content.key(full)}  # type: ignore[union-attr]  # ... but in the bucket
    assert rows[tail] == (STORED_SQL, len(big) - CHUNK_SIZE)
    with store.read() as connection:  # the small file is inline in its blob row
        inline = connection.exec_driver_sql("SELECT count(*) FROM wsfs_blobs WHERE data IS NOT NULL").scalar()
    assert inline == 1
    assert fs.read_bytes("big.bin").content == big
    with fs.open_read("big.bin") as reader:
        assert reader.read() == big
    assert fs.read_bytes("big.bin", offset=CHUNK_SIZE - 2, limit=6).content == big[CHUNK_SIZE - 2 : CHUNK_SIZE + 4]
    store.close()


def test_a_low_threshold_sends_small_content_out_and_every_read_path_finds_it(database: str, server: S3Server) -> None:
    store = open_store(database, server, min_bytes=16)
    fs = session(store)
    fs.write_bytes("tiny.txt", b"tiny")  # below 16 bytes: inline in the database
    fs.write("notes.md", "needle in a haystack\nsecond line\n")
    with fs.open_write("streamed.txt") as writer:
        writer.write(b"streamed needle\n" * 3)
    fs.write("notes.md", "appended needle\n", mode="append")
    assert len(object_keys(store)) == 3  # notes.md before and after the append, streamed.txt
    rows = chunk_rows(store)
    for data in (b"needle in a haystack\nsecond line\nappended needle\n", b"streamed needle\n" * 3):
        assert rows[hashlib.sha256(data).hexdigest()] == (STORED_OBJECT, 0)
    assert hashlib.sha256(b"tiny").hexdigest() not in rows
    assert fs.read("notes.md").content == "needle in a haystack\nsecond line\nappended needle\n"
    assert fs.read_bytes("streamed.txt").content == b"streamed needle\n" * 3
    assert fs.read_bytes("tiny.txt").content == b"tiny"
    assert [(m.path, m.line_number) for m in fs.grep("needle")] == [
        ("notes.md", 1),
        ("notes.md", 3),
        ("streamed.txt", 1),
        ("streamed.txt", 2),
        ("streamed.txt", 3),
    ]
    store.close()


def test_identical_content_is_one_object(database: str, server: S3Server) -> None:
    store = open_store(database, server, min_bytes=1)
    first, second = session(store), session(store)
    content = b"the same bytes in two files of two sessions\n" * 100
    first.write_bytes("a.txt", content)
    second.write_bytes("copy/b.txt", content)
    first.copy("a.txt", "c.txt")
    assert len(object_keys(store)) == 1
    assert second.read_bytes("copy/b.txt").content == content
    store.close()


def test_gc_removes_what_nothing_refers_to_and_keeps_what_a_snapshot_does(database: str, server: S3Server) -> None:
    store = open_store(database, server, min_bytes=1)
    fs = session(store)
    fs.write_bytes("kept.txt", b"a file keeps this\n")
    fs.write_bytes("snap.txt", b"only a snapshot keeps this\n")
    snapshot = fs.snapshot(tag="before")
    fs.delete("snap.txt")
    fs.write_bytes("gone.txt", b"nothing keeps this\n")
    fs.delete("gone.txt")
    fs.prune_history(keep=0)  # the journal keeps replaced content for undo until retention drops its entries
    assert len(object_keys(store)) == 3
    dry = store.collect(grace=timedelta(0), dry_run=True)
    assert dry.dry_run and len(dry.objects) == 1
    assert len(object_keys(store)) == 3  # the dry run listed one and deleted nothing
    report = store.collect(grace=timedelta(0))
    assert report.objects == dry.objects
    assert object_keys(store) == {
        store.content.key(hashlib.sha256(data).hexdigest())  # type: ignore[union-attr]
        for data in (b"a file keeps this\n", b"only a snapshot keeps this\n")
    }
    fs.restore(snapshot)
    assert fs.read_bytes("snap.txt").content == b"only a snapshot keeps this\n"
    assert store.collect(grace=timedelta(0)).objects == []
    store.close()


def test_gc_keeps_a_fresh_object_a_writer_just_uploaded(database: str, server: S3Server) -> None:
    """A writer writes its object before its row commits: gc must not take that object in between."""
    store = open_store(database, server, min_bytes=1)
    assert store.content is not None
    data = b"uploaded, row not committed yet\n"
    digest = hashlib.sha256(data).hexdigest()
    store.content.put(digest, data)  # what a writer has done just before its row commits
    assert store.collect().objects == []  # younger than the grace period: kept
    assert store.content.key(digest) in object_keys(store)
    assert store.collect(grace=timedelta(0)).objects == [store.content.key(digest)]  # an orphan once it is old
    store.close()


def test_gc_waits_for_a_writer_holding_the_content_lock(database: str, server: S3Server) -> None:
    """A writer's transaction has written its object and its row, not committed; a gc with no grace at all
    runs meanwhile. The content lock makes it re-check after the commit: the object stays."""
    store = open_store(database, server, min_bytes=1)
    fs = session(store)
    data = b"written under the content lock\n"
    reports: list[Any] = []
    with store.write() as connection:
        digest = store.put_chunk(connection, data)
        collector = threading.Thread(target=lambda: reports.append(store.collect(grace=timedelta(0))))
        collector.start()
        blob = store.register_blob(connection, [digest], len(data))
        connection.execute(
            sa.text(
                "INSERT INTO wsfs_files (session_id, path, parent, name, is_directory, is_readonly, blob_id,"
                " size_bytes, created_at, updated_at) VALUES (:s, 'w.txt', '', 'w.txt', false, false, :b, :n,"
                " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            ),
            {"s": fs.session_id, "b": blob, "n": len(data)},
        )
    collector.join(timeout=60)
    assert not collector.is_alive() and reports
    assert store.content.key(digest) not in reports[0].objects  # type: ignore[union-attr]
    assert fs.read_bytes("w.txt").content == data
    store.close()


def test_a_crashed_writer_leaves_an_object_without_a_row_never_a_row_without_its_object(
    database: str, server: S3Server
) -> None:
    store = open_store(database, server, min_bytes=1)
    data = b"the transaction that wrote this rolled back\n"
    with pytest.raises(RuntimeError), store.write() as connection:
        digest = store.put_chunk(connection, data)
        raise RuntimeError("the writer dies before its commit")
    assert digest not in chunk_rows(store)
    assert store.content is not None and store.content.key(digest) in object_keys(store)
    assert store.collect(grace=timedelta(0)).objects == [store.content.key(digest)]
    store.close()


def test_an_abandoned_stream_keeps_the_old_content_and_gc_removes_its_objects(database: str, server: S3Server) -> None:
    store = open_store(database, server, min_bytes=1)
    fs = session(store)
    old = b"the old content\n" * 100
    fs.write_bytes("file.bin", old)
    before = object_keys(store)
    with pytest.raises(RuntimeError), fs.open_write("file.bin") as writer:
        for index in range(3):  # three whole chunks uploaded, then the writer dies
            writer.write(bytes([index + 1]) * CHUNK_SIZE)
        raise RuntimeError("the writer dies mid-stream")
    assert fs.read_bytes("file.bin").content == old
    assert len(object_keys(store) - before) == 3  # its objects were written, no file names them
    removed = store.collect(grace=timedelta(0)).objects
    assert len(removed) == 3 and object_keys(store) == before
    assert fs.read_bytes("file.bin").content == old
    store.close()


class CountingClient(S3ClientBase):
    """The real S3 client, counting the objects it writes."""

    def __init__(self, fs: Any) -> None:
        super().__init__(fs)
        self.puts = 0

    def put(self, key: str, data: Any, **options: Any) -> Any:
        self.puts += 1
        return super().put(key, data, **options)


def test_identical_content_is_written_to_the_object_store_once(database: str, server: S3Server) -> None:
    client = CountingClient(server.filesystem())
    root = f"{BUCKET}/{new_prefix('counted')}"
    store = SqlStore(database, content_store=ContentStore(client, root, 1))
    first, second = session(store), session(store)
    content = b"written by two sessions, stored once\n" * 50
    first.write_bytes("a.txt", content)
    second.write_bytes("b.txt", content)
    with second.open_write("c.txt") as writer:
        writer.write(content)
    assert client.puts == 1 and len(object_keys(store)) == 1
    assert second.read_bytes("c.txt").content == content
    store.close()


def test_a_store_opened_without_its_content_store_says_so_and_grep_still_works(
    fast_tmp: Path, server: S3Server
) -> None:
    url = f"sqlite:///{fast_tmp / f'mixed-{next(_ids)}.db'}"
    with_objects = open_store(url, server, min_bytes=1)
    outside = session(with_objects)
    outside.write("notes.txt", "a needle kept in an object\n")
    plain = SqlStore(url)  # a misconfigured process: the same database, no content store
    mine = session(plain)
    mine.write("mine.txt", "a needle of its own\n")
    assert [m.path for m in mine.grep("needle")] == ["mine.txt"]  # the other session's queued blob waits
    with pytest.raises(OSError, match="content store"):
        SqlFilesystem(plain, outside.session_id).read("notes.txt")
    assert [m.path for m in outside.grep("needle")] == ["notes.txt"]  # indexed by the store that can read it
    plain.close()
    with_objects.close()


def test_open_filesystem_takes_the_content_store_from_the_url(fast_tmp: Path, server: S3Server) -> None:
    prefix = new_prefix("url")
    encoded = quote(content_url(server, prefix), safe="")
    url = f"sqlite:///{fast_tmp / 'opened.db'}?session=s1&content_store={encoded}&content_store_min_bytes=1"
    fs = open_filesystem(url)
    assert isinstance(fs, SqlFilesystem)
    fs.write_bytes("a.txt", b"through the URL\n")
    assert fs.store.content is not None and len(object_keys(fs.store)) == 1
    assert fs.read_bytes("a.txt").content == b"through the URL\n"
    fs.close()
    with pytest.raises(ValueError, match="content_store_min_bytes needs a content_store"):
        SqlStore(f"sqlite:///{fast_tmp / 'opened.db'}?content_store_min_bytes=5")


def test_the_migration_adds_stored_and_downgrades_only_without_outside_chunks(database: str, server: S3Server) -> None:
    from alembic import command
    from alembic.script import ScriptDirectory

    url = database
    plain = SqlStore(url)
    fs = session(plain)
    fs.write_bytes("big.bin", b"b" * (CHUNK_SIZE + 10))
    plain.close()
    config = migration_config()
    engine = sa.create_engine(engine_url(url)[0])
    with engine.connect() as connection, connection.begin():
        config.attributes["connection"] = connection
        head = ScriptDirectory.from_config(config).get_current_head()  # at head, whichever migration is newest
        assert connection.exec_driver_sql("SELECT version_num FROM wsfs_alembic_version").scalar() == head
        command.downgrade(config, "0004")  # every chunk is in the database: the column goes
        assert "stored" not in [c["name"] for c in sa.inspect(connection).get_columns("wsfs_chunks")]
        command.upgrade(config, "head")
        stored = connection.exec_driver_sql("SELECT DISTINCT stored FROM wsfs_chunks").scalars().all()
        assert stored == [STORED_SQL]
    engine.dispose()
    SqlStore._migrated.discard(url)
    with_objects = SqlStore(url, content_store=content_url(server, new_prefix("migration")))
    reopened = SqlFilesystem(with_objects, fs.session_id)
    assert reopened.read_bytes("big.bin").content == b"b" * (CHUNK_SIZE + 10)
    reopened.write_bytes("out.bin", b"o" * CHUNK_SIZE)  # one chunk now lives outside
    with_objects.close()
    engine = sa.create_engine(engine_url(url)[0])
    with engine.connect() as connection:
        transaction = connection.begin()
        config.attributes["connection"] = connection
        with pytest.raises(RuntimeError, match="Cannot downgrade below 0005"):
            command.downgrade(config, "0004")
        transaction.rollback()
        version = connection.exec_driver_sql("SELECT version_num FROM wsfs_alembic_version").scalar()
        assert version == head  # the failed downgrade rolled back whole
    engine.dispose()


class ContentStoreFactory:
    """A filesystem per test on one store per class, with a content store taking every chunk of 64 bytes
    or more (so nearly every file's content goes through the object store)."""

    store: SqlStore
    stores: ClassVar[dict[str, SqlStore]] = {}
    url_fixture: ClassVar[str] = "suite_sqlite_url"

    @pytest.fixture(autouse=True)
    def _store(self, request: pytest.FixtureRequest, s3_server: Any) -> Iterator[None]:
        url = request.getfixturevalue(self.url_fixture)
        if url.startswith("postgresql") and url not in ContentStoreFactory.stores:
            ContentStoreFactory.stores[url] = SqlStore(
                fresh_postgres(url),
                content_store=content_url(s3_server, new_prefix("suite-pg")),
                content_store_min_bytes=64,
            )
        if url not in ContentStoreFactory.stores:
            where = content_url(s3_server, new_prefix(f"suite-{self.url_fixture}"))
            ContentStoreFactory.stores[url] = SqlStore(url, content_store=where, content_store_min_bytes=64)
        self.store = ContentStoreFactory.stores[url]
        yield

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        return SqlFilesystem(self.store, f"c{next(_ids)}", read_only=read_only, mount_point=mount_point)

    def create_filesystem_with_quota(self, quota: Quota) -> Filesystem:
        return SqlFilesystem(self.store, f"c{next(_ids)}", quota=quota)

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        name = f"c{next(_ids)}"
        writable = SqlFilesystem(self.store, name)
        for path, data in files.items():
            writable.write_bytes(path, data)
        return SqlFilesystem(self.store, name, read_only=True, mount_point=mount_point)


@pytest.fixture(scope="session")
def suite_sqlite_url(fast_tmp: Path) -> str:
    return f"sqlite:///{fast_tmp / 'content-suite.db'}"


class TestSqliteWithContentStore(ContentStoreFactory, FilesystemValidationSuite):
    model_examples = 20


def test_the_gc_command_dry_run_lists_then_gc_deletes(fast_tmp: Path, server: S3Server) -> None:
    from click.testing import CliRunner

    from workspacefs.cli._main import main

    db = f"sqlite:///{fast_tmp / f'gc-cli-{next(_ids)}.db'}"
    where = content_url(server, new_prefix("cli"))
    store = SqlStore(db, content_store=where, content_store_min_bytes=1)
    fs = session(store)
    fs.write_bytes("kept.txt", b"kept by a file\n")
    fs.write_bytes("gone.txt", b"kept by nothing\n")
    fs.delete("gone.txt")
    fs.prune_history(keep=0)  # nor by the journal
    gone = store.content.key(hashlib.sha256(b"kept by nothing\n").hexdigest())  # type: ignore[union-attr]
    runner = CliRunner()
    args = ["gc", "--db", db, "--content-store", where, "--grace", "0"]
    dry = runner.invoke(main, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.split() == [gone] and "would delete" in dry.stderr
    assert gone in object_keys(store)
    young = runner.invoke(main, ["gc", "--db", db, "--content-store", where])  # the default grace: an hour
    assert young.exit_code == 0 and young.stdout == "" and gone in object_keys(store)
    done = runner.invoke(main, args)
    assert done.exit_code == 0, done.output
    assert done.stdout.split() == [gone] and gone not in object_keys(store)
    assert fs.read_bytes("kept.txt").content == b"kept by a file\n"
    missing_bucket = runner.invoke(
        main, ["gc", "--db", db, "--content-store", content_url(server, "x").replace(BUCKET, "no-such-bucket", 1)]
    )
    assert missing_bucket.exit_code == 3 and "no-such-bucket" in missing_bucket.stderr
    store.close()


def test_serve_takes_a_content_store_and_refuses_a_missing_bucket(fast_tmp: Path, server: S3Server) -> None:
    from click.testing import CliRunner

    from workspacefs.cli._main import main

    db = f"sqlite:///{fast_tmp / f'serve-{next(_ids)}.db'}"
    wrong = content_url(server, "p").replace(BUCKET, "no-such-bucket", 1)
    refused = CliRunner().invoke(main, ["serve", "--db", db, "--port", "0", "--content-store", wrong])
    assert refused.exit_code == 3 and "no-such-bucket" in refused.stderr
    with_env = CliRunner().invoke(main, ["serve", "--db", db, "--port", "0"], env={"WORKSPACEFS_CONTENT_STORE": wrong})
    assert with_env.exit_code == 3 and "no-such-bucket" in with_env.stderr


def test_the_service_keeps_large_uploads_in_the_content_store(fast_tmp: Path, server: S3Server) -> None:
    from starlette.testclient import TestClient

    from workspacefs.server import create_app

    store = open_store(f"sqlite:///{fast_tmp / f'service-{next(_ids)}.db'}", server, min_bytes=1024)
    with TestClient(create_app(store, auth=False)) as api:
        assert api.post("/v1/agents/a/sessions", json={"id": "s"}).status_code in (200, 201)
        fs = "/v1/agents/a/sessions/s/fs"
        body = "x" * 5000
        assert api.post(f"{fs}/big.txt", json={"content": body}).status_code in (200, 201)
        assert api.get(f"{fs}/big.txt").json()["content"] == body
    assert len(object_keys(store)) == 1
    store.close()


class TestPostgresWithContentStore(ContentStoreFactory, FilesystemValidationSuite):
    url_fixture = "postgres_url"
    model_examples = 15
