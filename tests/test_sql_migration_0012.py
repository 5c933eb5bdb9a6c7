"""Migration 0012 on a database in use: down to 0011 and up again, every row kept, every trigger still exact.

0012 drops ``wsfs_journal_path``; on SQLite it rebuilds ``wsfs_files`` without rowid (its indexes and triggers made
again), on PostgreSQL it replaces ``wsfs_write_small`` and lets the triggers skip the statements of its call.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import migrate_to

from workspacefs import Quota, SqlFilesystem, SqlStore, Usage
from workspacefs.backends.sql._store import inline_blob_id
from workspacefs.testing._postgres import create_database

_ids = itertools.count()

OLD_JOURNAL_ROW = (
    "INSERT INTO wsfs_journal (session_id, at, operation, path, before_id, after_id, size_before, size_after)"
    " VALUES (?, '2026-01-01 00:00:00.000000', ?, ?, ?, ?, ?, ?)"
)
"""A journal row as the code of 0011 wrote it on SQLite (numbered by ``AUTOINCREMENT``)."""

FILES = "SELECT session_id, path, parent, name, is_directory, is_readonly, blob_id, size_bytes FROM wsfs_files"


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    """A database of its own."""
    if request.param == "sqlite":
        return f"sqlite:///{fast_tmp / f'migration-0012-{next(_ids)}.db'}"
    return create_database(request.getfixturevalue("postgres_url"), f"wsfs_m12_{os.getpid()}_{next(_ids)}")


def shape(connection: Any) -> dict[str, Any]:
    """What 0012 changes, as the database describes itself."""
    if connection.dialect.name == "sqlite":
        table = connection.exec_driver_sql("SELECT sql FROM sqlite_schema WHERE name = 'wsfs_files'").scalar()
        listed = "SELECT name FROM sqlite_schema WHERE type = ? AND tbl_name = ? AND sql IS NOT NULL ORDER BY name"
        return {
            "without rowid": table.rstrip().upper().endswith("WITHOUT ROWID"),
            "parent refers to": {r[2] for r in connection.exec_driver_sql("PRAGMA foreign_key_list(wsfs_files)")},
            "indexes": [r[0] for r in connection.exec_driver_sql(listed, ("index", "wsfs_files"))],
            "triggers": [r[0] for r in connection.exec_driver_sql(listed, ("trigger", "wsfs_files"))],
            "journal path index": "wsfs_journal_path"
            in [r[0] for r in connection.exec_driver_sql(listed, ("index", "wsfs_journal"))],
        }
    triggers = connection.exec_driver_sql(
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname"
    ).all()
    indexes = connection.exec_driver_sql("SELECT indexname FROM pg_indexes WHERE tablename = 'wsfs_journal'")
    return {
        "skipping": sorted(name for name, definition in triggers if "wsfs.accounted" in definition),
        "triggers": [name for name, _ in triggers],
        "journal path index": "wsfs_journal_path" in [r[0] for r in indexes],
    }


def rows(store: SqlStore) -> list[Any]:
    with store.read() as connection:
        return [tuple(r) for r in connection.exec_driver_sql(FILES + " ORDER BY session_id, path")]


def test_a_database_at_0011_upgrades_with_its_rows_and_triggers(url: str) -> None:
    store = SqlStore(url)
    fs = SqlFilesystem(store, "kept", quota=Quota(max_bytes=10**9))
    fs.write_bytes("dir/a.txt", b"alpha needle\n")
    fs.write_bytes("dir/sub/b.txt", b"beta\n")
    fs.write_bytes("big.bin", b"x" * 300_000)
    assert fs.usage() == Usage(13 + 5 + 300_000, 3)
    snapshot = fs.snapshot()
    fs.write_bytes("dir/a.txt", b"alpha needle, changed\n")
    with store.read() as connection:
        upgraded = shape(connection)
    before = rows(store)

    migrate_to(store, "0011")
    with store.read() as connection:
        old = shape(connection)
    assert rows(store) == before
    assert old["journal path index"] and not upgraded["journal path index"]
    if store.dialect == "sqlite":
        assert (old["without rowid"], upgraded["without rowid"]) == (False, True)
        assert old["parent refers to"] == upgraded["parent refers to"] == {"wsfs_sessions", "wsfs_files", "wsfs_blobs"}
        assert (
            old["indexes"] == upgraded["indexes"] == ["ix_wsfs_files_blob_id", "wsfs_files_large", "wsfs_files_parent"]
        )
        assert old["triggers"] == upgraded["triggers"] and len(old["triggers"]) == 6  # versions, usage
    else:
        assert old["skipping"] == [] and old["triggers"] == upgraded["triggers"]
        assert upgraded["skipping"] == [
            "wsfs_blobs_grep",
            "wsfs_files_usage_insert",
            "wsfs_files_usage_update",
            "wsfs_files_version_insert",
            "wsfs_files_version_update",
            "wsfs_journal_notify",
        ]
    # at 0011, a change (through the code of then, same statements as now) is kept by the triggers of then; SQLite's
    # journal rows are numbered by the code since 0013, so there they are written as the code of then wrote them
    if store.dialect == "sqlite":
        unjournaled = SqlStore(url, history=False)  # the same database (migrated once per process: left at 0011)
        off = SqlFilesystem(unjournaled, "kept", quota=Quota(max_bytes=10**9))
        off.write_bytes("dir/sub/c.txt", b"gamma needle\n")
        off.delete("dir/sub/b.txt")
        unjournaled.close()
        with store.write() as connection:
            for operation, path, before, after, sizes in (
                ("write", "dir/sub/c.txt", None, inline_blob_id(b"gamma needle\n"), (0, 13)),
                ("delete", "dir/sub/b.txt", inline_blob_id(b"beta\n"), None, (5, 0)),
            ):
                connection.exec_driver_sql(OLD_JOURNAL_ROW, ("kept", operation, path, before, after, *sizes))
    else:
        fs.write_bytes("dir/sub/c.txt", b"gamma needle\n")
        fs.delete("dir/sub/b.txt")

    migrate_to(store, "head")
    with store.read() as connection:
        assert shape(connection) == upgraded
    fs.write_bytes("dir/d.txt", b"delta\n")  # at 0012 again
    fs.delete("dir/sub", recursive=True)  # the parent key cascades in the rebuilt table
    assert [entry.path for entry in fs.list("dir")] == ["dir/a.txt", "dir/d.txt"]
    with store.read() as connection:
        counted = connection.exec_driver_sql(
            "SELECT coalesce(sum(size_bytes), 0), count(*) FROM wsfs_files WHERE session_id = 'kept'"
            " AND NOT is_directory"
        ).one()
    assert fs.usage() == Usage(int(counted[0]), int(counted[1])) == Usage(22 + 6 + 300_000, 3)
    assert [m.path for m in fs.grep("needle")] == ["dir/a.txt"]
    assert [e.operation for e in fs.history(limit=4)] == ["delete", "write", "delete", "write"]
    fs.restore(snapshot)  # the versions kept across both migrations
    assert fs.read_bytes("dir/a.txt").content == b"alpha needle\n"
    assert fs.read_bytes("dir/sub/b.txt").content == b"beta\n"
    assert not fs.exists("dir/d.txt")
    assert fs.usage() == Usage(13 + 5 + 300_000, 3)
    store.close()
