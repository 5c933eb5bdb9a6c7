"""The trigram index behind SQL grep: it narrows the files read and never hides a match (migration 0004).

Results are compared with the memory backend on content built to trip an index (binary and invalid
UTF-8, streamed small files, a literal across a chunk boundary, LIKE/FTS syntax in the literal); the
narrowing is checked by counting candidate files, not by timing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from workspacefs import InMemoryFilesystem, SqlFilesystem, SqlStore
from workspacefs.backends.sql import _grep_index as grep_index
from workspacefs.backends.sql._schema import CHUNK_SIZE
from workspacefs.backends.sql._store import migration_config
from workspacefs.search import GrepPattern

_ids = itertools.count()

TRICKY: dict[str, bytes] = {
    "plain.txt": b"alpha needle-7 omega\nsecond line\n",
    "deep/a/b/nested.txt": b"x needle-7\n",
    "binary-head.bin": b"\x00needle-7\n",
    "nul-later.txt": b"a" * 9000 + b"\x00 needle-7\n",
    "latin1.txt": "caf\u00e9 needle-7 na\u00efve\n".encode("latin-1"),
    "stray-continuation.txt": "needle-\u00e9".encode() + b"\x80\x80 tail\n",
    "lead-before.txt": b"\xe2" + "\u00e9t\u00e9 needle-7\n".encode(),
    "syntax.txt": b'quote "needle" 100% a_b back\\slash\n',
    "unicode.txt": "\u65e5\u672c\u8a9e\u30c6\u30ad\u30b9\u30c8 needle-7\n".encode(),
    "long.txt": ("0123456789abcdefghij" * 10 + "\n").encode(),
    "sentence.txt": b"The quick brown fox jumps over the lazy dog; 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ!\n",
    "tiny.txt": b"ne",
    "empty.txt": b"",
}
PATTERNS = [
    "needle-7",
    r"needle-\d",
    "needle-\u00e9",
    "\u00e9t\u00e9 needle",
    '"needle"',
    "100%",
    "a_b",
    r"back\\slash",
    "\u8a9e\u30c6\u30ad",
    "0123456789abcdefghij" * 8,
    "quick brown fox jumps over the lazy dog; 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ",  # over 64 trigrams
    "omega",
    "caf",
    "nee",
    "absent-literal",
    r"(?i)NEEDLE",
    "needle-7|omega",
]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[SqlStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{fast_tmp / f'grep-index-{next(_ids)}.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    opened = SqlStore(url)
    yield opened
    opened.close()


def new_session(store: SqlStore) -> SqlFilesystem:
    return SqlFilesystem(store, f"grep-{next(_ids)}")


def fill_both(sql: SqlFilesystem, files: dict[str, bytes]) -> InMemoryFilesystem:
    memory = InMemoryFilesystem()
    for path, data in files.items():
        memory.write_bytes(path, data)
        sql.write_bytes(path, data)
    return memory


def assert_same_grep(sql: SqlFilesystem, memory: InMemoryFilesystem, path: str = ".") -> None:
    for pattern in PATTERNS:
        assert sql.grep(pattern, path=path) == memory.grep(pattern, path=path), pattern


def test_results_agree_with_the_memory_backend(store: SqlStore) -> None:
    sql = new_session(store)
    memory = fill_both(sql, TRICKY)
    # streamed small content is a one-chunk blob, not inline; a literal across the chunk boundary
    for fs in (sql, memory):
        with fs.open_write("streamed.txt") as writer:
            writer.write(b"streamed needle-7 omega\n")
        with fs.open_write("straddle.txt") as writer:
            writer.write(b"y" * (CHUNK_SIZE - 4) + b"needle-7 straddles\n")
    other = new_session(store)  # the same content in another session must not leak into this one
    other.write_bytes("plain.txt", TRICKY["plain.txt"])
    other.write_bytes("only-there.txt", b"omega needle-7\n")
    assert_same_grep(sql, memory)
    assert_same_grep(sql, memory, path="deep")
    assert_same_grep(sql, memory, path="deep/a/b/nested.txt")


def test_changes_after_indexing_are_found(store: SqlStore) -> None:
    sql = new_session(store)
    memory = fill_both(sql, TRICKY)
    assert_same_grep(sql, memory)  # indexes everything so far
    for fs in (sql, memory):
        fs.write_bytes("plain.txt", b"rewritten, no needle any more\n")
        fs.write_bytes("fresh.txt", b"fresh needle-7 omega\n")
        fs.copy("fresh.txt", "copied.txt")
        fs.move("deep", "moved")
        fs.delete("latin1.txt")
    assert_same_grep(sql, memory)
    snapshot = sql.snapshot()
    sql.write_bytes("after-snapshot.txt", b"needle-7\n")
    sql.restore(snapshot)
    assert_same_grep(sql, memory)


def test_only_files_that_can_match_are_read(store: SqlStore) -> None:
    sql = new_session(store)
    for i in range(300):
        sql.write_bytes(f"d{i % 7}/f{i:03d}.txt", f"file {i:03d} {'needle-x' if i % 100 == 0 else 'hay'}\n".encode())
    sql.write_bytes("big.txt", b"z" * (CHUNK_SIZE + 10))  # a chunk or more: always searched
    pattern = GrepPattern(r"needle-x\b")
    assert sorted(sql._grep_candidates(pattern, "")) == ["big.txt", "d0/f000.txt", "d2/f100.txt", "d4/f200.txt"]
    assert sorted(sql._grep_candidates(pattern, "d2")) == ["d2/f100.txt"]
    assert [m.path for m in sql.grep(r"needle-x\b")] == ["d0/f000.txt", "d2/f100.txt", "d4/f200.txt"]


def test_queued_content_is_a_candidate_until_indexed(store: SqlStore) -> None:
    sql = new_session(store)
    store.index_for_grep()
    sql.write_bytes("new.txt", b"unindexed needle-7\n")
    sql.write_bytes("other.txt", b"unindexed hay\n")
    with store.read() as connection:  # before any grep indexes them, both are candidates
        pending = grep_index.candidates(connection, store.dialect, sql.session_id, "", "needle-7")
    assert sorted(pending) == ["new.txt", "other.txt"]
    assert store.index_for_grep() == 2
    with store.read() as connection:
        indexed = grep_index.candidates(connection, store.dialect, sql.session_id, "", "needle-7")
    assert indexed == ["new.txt"]


def test_gc_starts_a_mostly_stale_sqlite_index_afresh(fast_tmp: Path) -> None:
    store = SqlStore(f"sqlite:///{fast_tmp / f'stale-{next(_ids)}.db'}")
    sql = new_session(store)
    for i in range(1200):
        sql.write_bytes(f"f{i:04d}.txt", f"content {i} needle\n".encode())
    assert len(sql.grep("needle", max_matches=5000)) == 1200
    for i in range(1200):
        sql.delete(f"f{i:04d}.txt")
    sql.prune_history(keep=0)  # the journal no longer keeps the deleted content for undo
    sql.write_bytes("kept.txt", b"kept needle\n")

    def index_rows() -> int:
        with store.read() as connection:
            return int(connection.execute(sa.text("SELECT count(*) FROM wsfs_grep_text_docsize")).scalar_one())

    assert index_rows() == 1200  # contentless FTS5 keeps rows whose text is gone
    store.gc()
    assert index_rows() == 0
    assert [m.path for m in sql.grep("needle")] == ["kept.txt"]
    assert index_rows() == 1
    store.close()


def test_the_index_survives_a_downgrade_and_upgrade(fast_tmp: Path) -> None:
    from alembic import command

    url = f"sqlite:///{fast_tmp / f'cycle-{next(_ids)}.db'}"
    store = SqlStore(url)
    sql = new_session(store)
    sql.write_bytes("a.txt", b"before needle-7\n")
    assert [m.path for m in sql.grep("needle-7")] == ["a.txt"]
    config = migration_config()
    with store.engine.connect() as connection, connection.begin():
        config.attributes["connection"] = connection
        command.downgrade(config, "0003")
        connection.exec_driver_sql(
            "INSERT INTO wsfs_blobs (id, size, chunk_count, data) VALUES ('x', 5, 0, x'6162636465')"
        )
        command.upgrade(config, "head")
        pending = connection.exec_driver_sql("SELECT count(*) FROM wsfs_grep_queue").scalar()
    assert pending == 2  # existing content is queued for the next grep
    assert [m.path for m in sql.grep("needle-7")] == ["a.txt"]
    store.close()


def test_the_statements_follow_the_chunk_size() -> None:
    """The index's SQL spells the chunk size out (migrations cannot import it): keep them in step."""
    from importlib import resources

    migration = (resources.files("workspacefs.backends.sql") / "migrations/versions/0004_grep_index.py").read_text()
    assert CHUNK_SIZE == 262144
    assert "size_bytes >= 262144" in grep_index._CANDIDATES
    assert migration.count("< 262144") == 4  # the comment, both triggers and the backfill
    one_call = (resources.files("workspacefs.backends.sql") / "migrations/versions/0012_fewer_writes.py").read_text()
    assert one_call.count("< 262144") == 2  # PostgreSQL's trigger again, and wsfs_write_small queueing itself
    assert migration.count(">= 262144") == 2  # the partial index of large files
