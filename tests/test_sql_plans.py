"""Every hot statement can be served by an index on both databases (a plan, not a time: bench/ has the speed).

PostgreSQL is asked with sequential scans disabled, so a plan that still scans a table has no index to use;
SQLite (no statistics, as a fresh database has) must search, never scan, the tables it touches.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql import _hot as hot

SESSION, PATH, PARENT, BLOB = "plans", "dir/a.txt", "dir", "b" * 64


def statements(dialect: str) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """The hot statements (PostgreSQL's small write is a function of key lookups, see migration 0011)."""
    found = {
        "ROW": (hot.ROW, (SESSION, PATH)),
        "CHILDREN": (hot.CHILDREN, (SESSION, PARENT, SESSION, PARENT)),
        "READ": (hot.READ, (1024, SESSION, PATH)),
        "READ_ROW": (hot.READ_ROW, (SESSION, PATH)),
        "READ_CONTENT": (hot.READ_CONTENT, (SESSION, PATH)),
        "CHUNK_LIST": (hot.CHUNK_LIST, (SESSION, PATH)),
        "CHUNK": (hot.CHUNK, (BLOB,)),
        "UPDATE_FILE": (hot.UPDATE_FILE, (BLOB, 1, None, None, SESSION, PATH)),
        "QUOTA_GUARD": (hot.QUOTA_GUARD[dialect], (100, None, SESSION)),
        "DELETE_BLOB": (hot.DELETE_BLOB, (BLOB, BLOB, BLOB, BLOB, BLOB)),
        "DELETE_BLOBS": (hot.release_statements([BLOB, BLOB + "2"], [])[0][0], (BLOB, BLOB + "2")),
        "DELETE_CHUNKS": (hot.release_statements([], [BLOB])[0][0], (BLOB,)),
    }
    if dialect == "sqlite":
        found["ROWS_FOR_WRITE"] = (hot.ROWS_FOR_WRITE, (SESSION, PARENT, SESSION, PATH))
    return found


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[SqlStore]:
    url = f"sqlite:///{fast_tmp / 'plans.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    opened = SqlStore(url)
    SqlFilesystem(opened, SESSION).write_bytes(PATH, b"content")
    yield opened
    opened.close()


def test_hot_statements_use_indexes(store: SqlStore) -> None:
    driver = store.driver
    scans: dict[str, str] = {}
    for name, (sql, params) in statements(store.dialect).items():
        with driver.transaction(write=False) as tx:
            if driver.postgres:
                tx.run("SET LOCAL enable_seqscan = off")
                cursor = tx.run("EXPLAIN " + driver.sql(sql), params)
                tx.sync()
                plan = "\n".join(r[0] for r in cursor.fetchall())
                scanned = [line for line in plan.splitlines() if "Seq Scan on wsfs_" in line]
            else:
                plan = "\n".join(r[3] for r in tx.run("EXPLAIN QUERY PLAN " + sql, params).fetchall())
                scanned = [line for line in plan.splitlines() if line.startswith("SCAN")]
        if scanned:
            scans[name] = plan
    assert scans == {}


def test_grep_candidates_start_from_the_index(store: SqlStore) -> None:
    """The candidate query walks from matched keys (or queued blobs) to their files, never over the session's
    files; SQLite's only scans are the FTS5 lookup itself, the queue, and the two materialized lists."""
    from workspacefs.backends.sql import _grep_index as grep_index

    allowed = (
        "SCAN wsfs_grep_text VIRTUAL TABLE",
        "SCAN wsfs_grep_queue",
        "SCAN m",
        "SCAN p",
    )
    for base in ("", "dir"):
        sql, params = grep_index.candidate_query(store.dialect, SESSION, base, "content")
        with store.engine.connect() as connection, connection.begin():
            if store.dialect == "postgresql":
                connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
                plan = "\n".join(r[0] for r in connection.execute(sa.text("EXPLAIN " + sql), params))
                scanned = [line for line in plan.splitlines() if "Seq Scan on wsfs_" in line]
            else:
                plan = "\n".join(r[3] for r in connection.execute(sa.text("EXPLAIN QUERY PLAN " + sql), params))
                scanned = [
                    line for line in plan.splitlines() if line.startswith("SCAN") and not line.startswith(allowed)
                ]
        assert scanned == [], plan
