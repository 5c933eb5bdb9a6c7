"""SQL: what a path index on the journal would cost every write, against what it would save ``history(path=…)``.

A path's entries match ``path`` or ``from_path`` (a move), so with no index on either (migration ``0012`` dropped
``wsfs_journal_path``) the query walks the session's journal. This measures, on a session of 10,000 entries (the
default retention), one path's ``history`` as the library runs it and the database's own time for the query,
without and with an index on ``(session_id, path, seq)`` plus a partial one on ``(session_id, from_path, seq)
WHERE from_path IS NOT NULL`` (SQLite uses them only when each ``OR`` term names the session: that form is timed
too); then the write side: SQLite WAL pages per journaled small write (new file, overwrite; a journal of 3,000
entries over scattered paths) and PostgreSQL WAL bytes per write, without and with the two indexes.

Run: ``python bench/bench_sql_history_path.py [--postgres URL]`` (default: a server started here).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import sqlite3
import struct
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.history import acting_as
from workspacefs.testing._postgres import create_database, running_postgres

INDEXES = (
    "CREATE INDEX wsfs_journal_path ON wsfs_journal (session_id, path, seq)",
    "CREATE INDEX wsfs_journal_from ON wsfs_journal (session_id, from_path, seq) WHERE from_path IS NOT NULL",
)
PATHS = {"one file (10 entries)": "q7/f7.txt", "a moved file (1 entry)": "m/f3.txt", "a directory": "q7"}
_ids = itertools.count()


def fresh(kind: str, server: str | None) -> str:
    """A new, empty database's URL."""
    if kind == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp(dir='/dev/shm' if os.path.isdir('/dev/shm') else None)}/h.db"
    assert server is not None
    return create_database(server, f"bench_history_path_{os.getpid()}_{next(_ids)}")


def best_us(work: Callable[[], object], reps: int = 7) -> float:
    """The fastest of ``reps`` runs, in µs."""
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def index(store: SqlStore) -> None:
    """Make the two indexes."""
    with store.engine.begin() as connection:
        for ddl in INDEXES:
            connection.exec_driver_sql(ddl)


def raw_query(store: SqlStore, path: str) -> tuple[str, tuple[Any, ...]]:
    """The query of one path's entries, each ``OR`` term naming the session (the form SQLite can use indexes for)."""
    low, high = path + "/", path + "0"
    terms = " OR ".join(
        f"(session_id = 'h' AND {c})"
        for c in ("path = {p}", "path >= {p} AND path < {p}", "from_path = {p}", "from_path >= {p} AND from_path < {p}")
    )
    mark = "?" if store.dialect == "sqlite" else "%s"
    sql = f"SELECT * FROM wsfs_journal WHERE {terms.format(p=mark)} ORDER BY seq DESC LIMIT 200"
    return sql, (path, low, high, path, low, high)


def run_raw(store: SqlStore, sql: str, params: tuple[Any, ...]) -> None:
    """Run ``sql`` through the driver, on a connection of the pool (checked out and back: tiny next to a scan)."""
    raw = store.engine.raw_connection()
    try:
        cursor: Any = raw.cursor()
        cursor.execute(sql, params)
        cursor.fetchall()
    finally:
        raw.close()


def queries(kind: str, server: str | None) -> None:
    """``history(path=…)`` and the database's own query, without and with the indexes."""
    store = SqlStore(fresh(kind, server))
    fs = SqlFilesystem(store, "h")
    for i in range(10_000):
        with acting_as(f"agent-{i % 3}"):
            fs.write_bytes(f"q{i % 50}/f{i % 1000}.txt", str(i).encode())
    for i in range(20):
        fs.move(f"q1/f{i * 50 + 1}.txt", f"m/f{i}.txt")
    for label in ("no index", "indexed"):
        if label == "indexed":
            index(store)
        if kind == "postgresql":
            with store.engine.begin() as connection:
                connection.exec_driver_sql("ANALYZE wsfs_journal")
        for name, path in PATHS.items():
            sql, params = raw_query(store, path)
            database = best_us(functools.partial(run_raw, store, sql, params))
            library = best_us(lambda path=path: fs.history(path, limit=100))
            print(f"{kind:<11}{label:<10}{name:<24}{library:>12.0f}{database:>12.0f}")
    store.close()


def sqlite_wal_frames(database: Path, operation: Callable[[], object]) -> int:
    """Pages ``operation``'s commit appended to the WAL (emptied first)."""
    with sqlite3.connect(database) as checkpoint:
        checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    operation()
    wal = Path(f"{database}-wal").read_bytes()
    return len(range(32, len(wal), 24 + struct.unpack(">I", wal[8:12])[0]))


def writes(kind: str, server: str | None, indexed: bool) -> tuple[float, float]:
    """Per journaled small write (new file, overwrite): SQLite WAL pages, PostgreSQL WAL bytes."""
    url = fresh(kind, server)
    store = SqlStore(url)
    fs = SqlFilesystem(store, "p")
    if indexed:
        index(store)
    for i in range(3000):
        fs.write_bytes(f"d{i % 37}/f{(i * 7919) % 3000}.txt", b"%d" % i)
    new = [lambda i=i: fs.write_bytes(f"x{(i * 7919) % 997}/new-{i}.txt", b"new %d" % i) for i in range(500)]
    over = [lambda i=i: fs.write_bytes(f"d{i % 37}/f{(i * 7919) % 3000}.txt", b"again %d" % i) for i in range(500)]
    if kind == "sqlite":
        database = Path(url.removeprefix("sqlite:///"))
        found = tuple(sum(sqlite_wal_frames(database, w) for w in ws) / len(ws) for ws in (new, over))
    else:

        def lsn() -> int:
            with store.engine.connect() as connection:
                return int(connection.exec_driver_sql("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").scalar_one())

        amounts = []
        for ws in (new, over):
            start = lsn()
            for w in ws:
                w()
            amounts.append((lsn() - start) / len(ws))
        found = tuple(amounts)
    store.close()
    return found[0], found[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="a server's URL (default: one started here)")
    args = parser.parse_args()
    with ExitStack() as stack:
        server = args.postgres or stack.enter_context(running_postgres())
        print("history(path=…) on 10,000 entries, µs (best of 7): the library's call, the database's query alone")
        print(f"{'database':<11}{'indexes':<10}{'path':<24}{'history()':>12}{'query':>12}")
        for kind in ("sqlite", "postgresql"):
            queries(kind, server)
        print()
        print("Per journaled small write: SQLite WAL pages, PostgreSQL WAL bytes (mean of 500)")
        print(f"{'database':<11}{'indexes':<10}{'new file':>10}{'overwrite':>11}")
        for kind in ("sqlite", "postgresql"):
            for indexed in (False, True):
                new, over = writes(kind, server, indexed)
                print(f"{kind:<11}{'indexed' if indexed else 'no index':<10}{new:>10.2f}{over:>11.2f}")


if __name__ == "__main__":
    main()
