"""What only the SQL backend promises: isolation, concurrency, deduplicated content, collection,
read-only files, the grep prefilter, migrations; on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import gc
import hashlib
import itertools
import multiprocessing
import os
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workspacefs import SqlFilesystem, SqlStore, open_filesystem
from workspacefs.backends.sql import migrate
from workspacefs.backends.sql._schema import session_files
from workspacefs.backends.sql._store import migration_config
from workspacefs.errors import UnsupportedOperationError
from workspacefs.search import GrepPattern, required_literal
from workspacefs.server import SessionCatalog, TokenStore

MIB = 1024 * 1024
_ids = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[SqlStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{fast_tmp / f'behaviour-{next(_ids)}.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    opened = SqlStore(url)
    yield opened
    opened.close()


def new_session(store: SqlStore, **options: object) -> SqlFilesystem:
    return SqlFilesystem(store, f"b{os.getpid()}-{next(_ids)}", **options)  # type: ignore[arg-type]


def everything(fs: SqlFilesystem) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    pending = ["."]
    while pending:
        for entry in fs.list(pending.pop()):
            found[entry.path] = None if entry.is_directory else fs.read_bytes(entry.path).content
            if entry.is_directory:
                pending.append(entry.path)
    return found


def test_sessions_are_isolated_in_every_operation(store: SqlStore) -> None:
    a, b = new_session(store), new_session(store)
    b.write("secret/plan.txt", "session b only\n")
    b.write("shared-name.txt", "b's version\n")
    before_b = everything(b)
    a.write("shared-name.txt", "a's version\n")
    a.write("dir/x.txt", "needle in a\n")
    snapshot = a.snapshot()
    a.copy("dir", "dir-copy")
    a.move("dir-copy", "moved")
    a.delete("moved", recursive=True)
    a.write("shared-name.txt", "changed", mode="append")
    a.restore(snapshot)
    assert [m.path for m in a.grep("needle|session b")] == ["dir/x.txt"]
    assert [m.path for m in a.glob("**")] == ["dir/x.txt", "shared-name.txt"]
    assert not a.exists("secret")
    assert everything(b) == before_b
    assert [s.snapshot_id for s in b.snapshots()] == []
    with pytest.raises(Exception, match="no snapshot"):
        b.restore(snapshot)


def test_deleting_a_session_removes_its_files_and_content(store: SqlStore) -> None:
    fs = new_session(store)
    fs.write_bytes("big.bin", os.urandom(3 * MIB))
    fs.snapshot()
    before = store.content_stats()
    fs.delete_session()
    assert store.session(fs.session_id) is None
    with store.read() as connection:
        rows = connection.execute(
            sa.select(sa.func.count()).where(session_files.c.session_id == fs.session_id)
        ).scalar()
    assert rows == 0
    after = store.content_stats()
    assert before["chunk_bytes"] - after["chunk_bytes"] >= 3 * MIB


def test_content_is_deduplicated_and_copies_are_metadata(store: SqlStore) -> None:
    fs = new_session(store)
    data = os.urandom(5 * MIB)
    fs.write_bytes("a.bin", data)
    stored = store.content_stats()
    fs.copy("a.bin", "b.bin")
    fs.write_bytes("c.bin", data)  # the same bytes written again
    new_session(store).write_bytes("other-session.bin", data)
    fs.snapshot()
    assert store.content_stats() == stored  # no chunk, no blob, no byte more
    assert fs.read_bytes("b.bin").content == data


def test_overwrites_and_deletes_collect_content_once_nothing_needs_it(store: SqlStore) -> None:
    fs = new_session(store)
    before = store.content_stats()
    fs.write_bytes("a.bin", os.urandom(MIB))
    fs.write_bytes("a.bin", os.urandom(MIB))  # the first content is now held only by the journal (for undo)
    assert store.content_stats()["chunk_bytes"] - before["chunk_bytes"] == 2 * MIB
    fs.prune_history(keep=0)  # retention drops the entries: what only they held is collected at once
    assert store.content_stats()["chunk_bytes"] - before["chunk_bytes"] == MIB
    snapshot = fs.snapshot()
    fs.delete("a.bin")
    assert store.content_stats()["chunk_bytes"] - before["chunk_bytes"] == MIB  # the snapshot and journal hold it
    fs.delete_snapshot(snapshot)
    assert store.content_stats()["chunk_bytes"] - before["chunk_bytes"] == MIB  # the journal still does
    fs.prune_history(keep=0)
    assert store.content_stats()["chunk_bytes"] == before["chunk_bytes"]


def test_without_history_replaced_content_is_collected_at_once(fast_tmp: Path) -> None:
    store = SqlStore(f"sqlite:///{fast_tmp / 'no-history.db'}?history=off")
    fs = SqlFilesystem(store, "plain")
    assert not fs.capabilities.history and not fs.capabilities.watch
    fs.write_bytes("a.bin", os.urandom(MIB))
    fs.write_bytes("a.bin", os.urandom(MIB))
    assert store.content_stats()["chunk_bytes"] == MIB
    fs.delete("a.bin")
    assert store.content_stats()["chunk_bytes"] == 0
    with pytest.raises(UnsupportedOperationError):
        fs.history()
    store.close()


def test_aborted_streams_leave_nothing_behind(store: SqlStore) -> None:
    fs = new_session(store)
    store.gc()  # the database is shared by the test session: collect what earlier tests' races left for gc
    before = store.content_stats()
    with pytest.raises(RuntimeError), fs.open_write("big.bin") as writer:
        writer.write(os.urandom(2 * MIB))
        raise RuntimeError("boom")
    assert store.content_stats() == before
    assert store.gc() == 0


def test_read_only_files(store: SqlStore) -> None:
    fs = new_session(store)
    fs.write("locked.txt", "original")
    fs.set_read_only("locked.txt")
    assert fs.stat("locked.txt").read_only
    for change in (
        lambda: fs.write("locked.txt", "x"),
        lambda: fs.write("locked.txt", "x", mode="append"),
        lambda: fs.open_write("locked.txt"),
        lambda: fs.copy("other.txt", "locked.txt", overwrite=True),
    ):
        fs.write("other.txt", "other")
        with pytest.raises(PermissionError):
            change()
    assert fs.read("locked.txt").content == "original"
    fs.move("locked.txt", "renamed.txt")  # the content does not change, so it may move
    assert fs.stat("renamed.txt").read_only
    fs.delete("renamed.txt")  # and it can always be deleted
    assert not fs.exists("renamed.txt")


def test_timestamps(store: SqlStore) -> None:
    fs = new_session(store)
    fs.write("a.txt", "1")
    first = fs.stat("a.txt")
    time.sleep(0.01)
    fs.write("a.txt", "2")
    second = fs.stat("a.txt")
    assert second.created_at == first.created_at
    assert second.modified_at is not None and first.modified_at is not None
    assert second.modified_at > first.modified_at


def test_like_wildcards_are_plain_characters(store: SqlStore) -> None:
    fs = new_session(store)
    for path in ("a_b/x.txt", "aXb/y.txt", "100%/z.txt", "1000/w.txt", "a%b/v.txt"):
        fs.write(path, "hit\n")
    fs.delete("a_b", recursive=True)
    fs.copy("100%", "copy%")
    assert [m.path for m in fs.glob("**")] == sorted(
        ["1000/w.txt", "100%/z.txt", "a%b/v.txt", "aXb/y.txt", "copy%/z.txt"]
    )
    assert [m.path for m in fs.grep("hit", path="100%")] == ["100%/z.txt"]


def _append_many(url: str, session: str, worker: int) -> None:
    fs = SqlFilesystem(url, session)
    for index in range(50):
        fs.write("log.txt", f"{worker}:{index}\n", mode="append")
        fs.write(f"w{worker}/{index}.txt", str(index))
    fs.close()


def test_two_processes_lose_no_update(store: SqlStore) -> None:
    fs = new_session(store)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(store.url, fs.session_id, w)) for w in range(2)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    lines = fs.read("log.txt").content.splitlines()
    assert sorted(lines) == sorted(f"{w}:{i}" for w in range(2) for i in range(50))
    assert len(fs.glob("w*/*.txt")) == 100


def test_writers_on_different_sessions_do_not_block_each_other_on_postgresql(postgres_url: str) -> None:
    store = SqlStore(postgres_url)
    a, b = new_session(store), new_session(store)
    a.write("held.txt", "a")
    with store.write() as connection:  # a transaction holding session a's row
        connection.execute(
            sa.select(session_files).where(session_files.c.session_id == a.session_id).with_for_update()
        ).all()
        done = threading.Event()

        def write_b() -> None:
            b.write("free.txt", "b")
            done.set()

        thread = threading.Thread(target=write_b)
        thread.start()
        assert done.wait(10), "a write to another session waited for session a's lock"
        thread.join()
    store.close()


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(fast_tmp: Path) -> None:
    store = SqlStore(f"sqlite:///{fast_tmp / 'wal.db'}")
    with store.read() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    store.close()


def test_migrations_are_applied_and_idempotent(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / 'migrated.db'}"
    migrate(url)
    migrate(url)
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT version_num FROM wsfs_alembic_version").scalar() == "0014"
    engine.dispose()


def test_a_database_at_an_older_revision_upgrades_with_its_data(fast_tmp: Path) -> None:
    from alembic import command

    url = f"sqlite:///{fast_tmp / f'old-{next(_ids)}.db'}"
    engine = sa.create_engine(url)
    config = migration_config()
    with engine.connect() as connection, connection.begin():
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        now = "2026-01-01 00:00:00"
        connection.exec_driver_sql(f"INSERT INTO wsfs_sessions VALUES ('old', NULL, '{now}', '{now}')")
        connection.exec_driver_sql(f"INSERT INTO wsfs_sessions VALUES ('owned', 'bot-7', '{now}', '{now}')")
        # what revision 0002 used to do before the service took its tables: a token table, already in use
        connection.exec_driver_sql(
            "CREATE TABLE wsfs_tokens (id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, agent_id TEXT, "
            "label TEXT, created_at TIMESTAMP NOT NULL)"
        )
        connection.exec_driver_sql(f"INSERT INTO wsfs_tokens VALUES ('t1', 'h', 'bot-7', 'kept', '{now}')")
    engine.dispose()
    store = SqlStore(url)  # opening migrates storage to the newest revision
    assert store.session("old") is not None
    catalog = SessionCatalog(store)  # the service's own migration adopts tokens and reads the old owners once
    old, owned = catalog.get("default", "old"), catalog.get("bot-7", "owned")
    assert old is not None and old.storage_id == "old"
    assert owned is not None and owned.storage_id == "owned"  # made before ids were scoped: its storage id stays
    assert catalog.get("default", "owned") is None and catalog.get("bot-7", "old") is None
    assert [(info.label, info.scope) for info in TokenStore(store).list()] == [("kept", "write")]
    assert catalog.delete("bot-7", "owned") and catalog.get("bot-7", "owned") is None
    store.close()


def test_inline_content_survives_a_downgrade_and_an_upgrade(fast_tmp: Path) -> None:
    from alembic import command

    url = f"sqlite:///{fast_tmp / f'inline-{next(_ids)}.db'}"
    store = SqlStore(url)
    fs = new_session(store)
    fs.write_bytes("small.txt", b"small content")
    fs.write_bytes("empty.txt", b"")
    fs.write_bytes("big.bin", b"b" * (300 * 1024))
    session = fs.session_id
    store.close()
    config = migration_config()
    engine = sa.create_engine(url)
    with engine.connect() as connection, connection.begin():
        config.attributes["connection"] = connection
        command.downgrade(config, "0002")  # inline content moves into chunk rows, the column goes
        columns = [c["name"] for c in sa.inspect(connection).get_columns("wsfs_blobs")]
        assert "data" not in columns
        listed = connection.exec_driver_sql("SELECT count(*) FROM wsfs_blob_chunks").scalar()
        assert listed == 1 + 2  # small.txt's one chunk and big.bin's two; empty content has none
        command.upgrade(config, "head")
    engine.dispose()
    SqlStore._migrated.discard(url)
    reopened = SqlFilesystem(SqlStore(url), session)
    assert reopened.read_bytes("small.txt").content == b"small content"
    assert reopened.read_bytes("empty.txt").content == b""
    assert reopened.read_bytes("big.bin").content == b"b" * (300 * 1024)
    reopened.write_bytes("small.txt", b"small content, appended", mode="overwrite")
    reopened.write_bytes("small.txt", b"!", mode="append")
    assert reopened.read_bytes("small.txt").content == b"small content, appended!"
    reopened.store.close()


def test_a_new_database_keeps_service_tables_out_of_storage(fast_tmp: Path) -> None:
    store = SqlStore(f"sqlite:///{fast_tmp / f'new-{next(_ids)}.db'}")
    with store.read() as connection:
        tables = set(sa.inspect(connection).get_table_names())
    assert "wsfs_tokens" not in tables and "wsfs_session_owners" not in tables
    TokenStore(store)
    with store.read() as connection:
        tables = set(sa.inspect(connection).get_table_names())
    assert {"wsfs_tokens", "wsfs_session_owners", "wsfs_service_version"} <= tables
    store.close()


def test_open_filesystem_urls(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / 'opened.db'}?session=alpha"
    fs = open_filesystem(url)
    assert isinstance(fs, SqlFilesystem) and fs.session_id == "alpha"
    fs.write("x.txt", "x")
    again = open_filesystem(url + "&read_only=true")
    assert again.read("x.txt").content == "x" and again.read_only
    with pytest.raises(ValueError, match="session"):
        open_filesystem(f"sqlite:///{fast_tmp / 'opened.db'}")


def test_streaming_256_mib_in_fixed_memory(store: SqlStore) -> None:
    fs = new_session(store)
    chunk = bytes(range(256)) * (MIB // 256)
    expected = hashlib.sha256()
    gc.collect()
    tracemalloc.start()
    try:
        with fs.open_write("big.bin") as writer:
            for _ in range(256):
                writer.write(chunk)
                expected.update(chunk)
        write_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        actual = hashlib.sha256()
        with fs.open_read("big.bin") as reader:
            for part in reader:
                actual.update(part)
        read_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert actual.hexdigest() == expected.hexdigest()
    assert write_peak < 32 * MIB, f"write peaked at {write_peak / MIB:.1f} MiB"
    assert read_peak < 32 * MIB, f"read peaked at {read_peak / MIB:.1f} MiB"
    fs.delete("big.bin")


def test_a_streaming_append_keeps_chunks_aligned(store: SqlStore) -> None:
    fs = new_session(store)
    first = os.urandom(300 * 1024)
    second = os.urandom(400 * 1024)
    fs.write_bytes("a.bin", first)
    with fs.open_write("a.bin", mode="append") as writer:
        writer.write(second)
    fs.write_bytes("b.bin", first + second)
    assert fs.read_bytes("a.bin").content == first + second
    assert fs.diff(fs.snapshot()).is_empty
    base = fs.snapshot()
    assert fs._manifest(base)["a.bin"] == fs._manifest(base)["b.bin"]  # same content, same blob


GREP_TREE = {
    "small/a.py": "def needle():\n    return 'needle-123'\n",
    "small/b.txt": "nothing here\n",
    "small/c.txt": "Needle in caps\n",
    "binary.bin": b"needle\x00binary",
    "big.txt": "filler line\n" * 30_000 + "needle at the end\n",
    "straddle.txt": "x" * (256 * 1024 - 3) + "needle across the chunk edge\n",
    "latin1.txt": "café needle".encode("latin-1"),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pattern=st.sampled_from(
        [
            "needle",
            "needle-\\d+",
            "(?i)needle",
            "need|edge",
            "x{3}needle",
            "ne+dle",
            "caps$",
            "^def needle",
            "nothing",
            "é",
        ]
    )
)
def test_the_grep_prefilter_changes_no_result(store: SqlStore, pattern: str) -> None:
    fs = getattr(store, "_grep_fs", None)
    if fs is None:
        fs = new_session(store)
        for path, content in GREP_TREE.items():
            fs.write_bytes(path, content.encode() if isinstance(content, str) else content)
        store._grep_fs = fs  # type: ignore[attr-defined]
    narrowed = fs.grep(pattern)
    everything_searched = SqlFilesystem.__mro__[1].grep(_Unfiltered(fs), pattern)
    assert narrowed == everything_searched


class _Unfiltered:
    """The same filesystem with the database prefilter switched off (every file searched)."""

    def __init__(self, fs: SqlFilesystem) -> None:
        self._fs = fs

    def __getattr__(self, name: str) -> object:
        return getattr(self._fs, name)

    def _grep_candidates(self, pattern: GrepPattern, base: str) -> Iterator[str]:
        return self._fs._iter_files(base)


@settings(max_examples=400)
@given(
    st.lists(
        st.sampled_from(["a", "b", "c", ".", "*", "+", "?", "|", "(", ")", "[ab]", "\\d", "{2}", "x"]),
        min_size=1,
        max_size=8,
    ).map("".join),
    st.text(alphabet="abcx1 ", max_size=20),
)
def test_required_literal_is_sound(pattern: str, line: str) -> None:
    try:
        compiled = GrepPattern(pattern)
    except ValueError:
        return
    literal = required_literal(pattern)
    if literal is None:
        return
    matches = compiled.scan("f", line.encode(), 1, 1, compiled.new_budget())
    if matches:
        assert literal in line.encode(), (pattern, line, literal)


def test_a_watcher_puts_no_autocommit_connection_back_into_the_pool(postgres_url: str) -> None:
    """The PostgreSQL watcher's LISTEN connection ran in autocommit and went back into the pool when the watch
    ended: every other write transaction then committed statement by statement (a savepoint in it failed)."""
    store = SqlStore(postgres_url)
    fs = SqlFilesystem(store, f"watched-{os.getpid()}")
    with fs.watch("/") as events:
        fs.write("a.txt", "a")
        assert events.next_event(10) is not None
    seen = []
    for _ in range(6):  # enough to take every connection the pool has handed out
        with store.write() as connection:
            seen.append(connection.connection.driver_connection.autocommit)
            connection.exec_driver_sql("SAVEPOINT checked")
    assert seen == [False] * 6
    store.close()


def test_a_watcher_listens_again_after_its_connection_is_lost(postgres_url: str) -> None:
    """Review-3: the PostgreSQL ``LISTEN`` thread died with its connection (a server restart, a terminated
    backend) and was never made again: the watchers stayed open and heard nothing more, silently."""
    session = f"relisten-{os.getpid()}"
    watching, writing = SqlStore(postgres_url), SqlStore(postgres_url)  # two stores: only LISTEN links them
    fs, other = SqlFilesystem(watching, session), SqlFilesystem(writing, session)
    with fs.watch("/") as events:
        other.write("before.txt", "b")
        assert [e.path for e in [events.next_event(10)] if e is not None] == ["before.txt"]
        with writing.engine.connect() as connection:
            ended = connection.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE query = 'LISTEN wsfs_journal' AND pid <> pg_backend_pid()"
            ).all()
        assert ended and all(row[0] for row in ended)
        other.write("after.txt", "a")  # committed while the watcher may have no connection: caught up later
        other.write("later.txt", "l")
        heard = [events.next_event(15), events.next_event(15)]
        assert [e.path if e is not None else None for e in heard] == ["after.txt", "later.txt"]
    watching.close()
    writing.close()
