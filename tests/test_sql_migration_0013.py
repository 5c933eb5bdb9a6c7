"""Migration 0013 on a journal in use: down to 0012 and up again, every entry kept with its id.

On SQLite 0013 rebuilds ``wsfs_journal`` keyed by ``(session_id, seq)`` without rowid (no session index) and keeps a
floor per session; going down numbers the rows of all sessions again in one sequence (numbers two sessions shared
are given again, an ``undoes`` follows its entry). On PostgreSQL it changes nothing.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import migrate_to

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.testing._postgres import create_database

_ids = itertools.count()

OLD_INSERT = (  # what the code of 0012 ran for a small write's row (SQLite numbered it, the triggers kept the floor)
    "INSERT INTO wsfs_journal (session_id, op_key, at, operation, actor_name, actor_session, actor_call, actor_via,"
    " path, from_path, before_id, after_id, size_before, size_after, undoes, detail)"
    " VALUES (?, NULL, '2026-01-01 00:00:00.000000', 'write', NULL, NULL, NULL, NULL, ?, NULL, NULL, ?, 0, 1, NULL,"
    " NULL)"
)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    """A database of its own."""
    if request.param == "sqlite":
        return f"sqlite:///{fast_tmp / f'migration-0013-{next(_ids)}.db'}"
    return create_database(request.getfixturevalue("postgres_url"), f"wsfs_m13_{os.getpid()}_{next(_ids)}")


def shape(store: SqlStore) -> dict[str, Any]:
    """What 0013 changes on SQLite, as the database describes itself."""
    with store.read() as connection:
        table = connection.exec_driver_sql("SELECT sql FROM sqlite_schema WHERE name = 'wsfs_journal'").scalar()
        listed = "SELECT name FROM sqlite_schema WHERE type = ? AND tbl_name = ? AND sql IS NOT NULL ORDER BY name"
        return {
            "without rowid": table.rstrip().upper().endswith("WITHOUT ROWID"),
            "indexes": [r[0] for r in connection.exec_driver_sql(listed, ("index", "wsfs_journal"))],
            "triggers": [r[0] for r in connection.exec_driver_sql(listed, ("trigger", "wsfs_journal"))],
            "floor columns": [r[1] for r in connection.exec_driver_sql("PRAGMA table_info(wsfs_journal_floor)")],
        }


def entries(fs: SqlFilesystem) -> list[tuple[Any, ...]]:
    """The session's entries, oldest first: id, operation, what it undid, paths."""
    return [
        (e.entry_id, e.operation, e.undoes, tuple(c.path for c in e.changes)) for e in reversed(fs.history(limit=None))
    ]


def without_ids(listed: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Entries as their position: an ``undoes`` as the position of the entry it names."""
    where = {entry[0]: n for n, entry in enumerate(listed)}
    return [(operation, where.get(undoes), paths) for _, operation, undoes, paths in listed]


def test_a_journal_at_0012_upgrades_with_its_entries_and_ids(url: str) -> None:
    store = SqlStore(url)
    try:
        a, b = SqlFilesystem(store, "a"), SqlFilesystem(store, "b")
        for i in range(3):
            a.write_bytes("f.txt", b"a%d" % i)
            b.write_bytes("f.txt", b"b%d" % i)
        a.write_bytes("d/x.txt", b"x")
        a.delete("d", recursive=True)  # an entry of several rows (one key)
        b.undo(entries(b)[-1][0])
        made = {fs.session_id: entries(fs) for fs in (a, b)}
        if store.dialect == "sqlite":
            upgraded = shape(store)
            assert upgraded == {
                "without rowid": True,
                "indexes": ["wsfs_journal_before", "wsfs_journal_op"],
                "triggers": ["wsfs_journal_floor_raise"],
                "floor columns": ["session_id", "seq"],
            }
            assert {entry[0] for entry in made["a"]} & {entry[0] for entry in made["b"]}  # numbers shared

        migrate_to(store, "0012")
        down = {fs.session_id: entries(fs) for fs in (a, b)}
        assert {s: without_ids(e) for s, e in down.items()} == {s: without_ids(e) for s, e in made.items()}
        ids = [entry[0] for listed in down.values() for entry in listed]
        assert len(ids) == len(set(ids))  # one numbering again
        if store.dialect == "sqlite":
            assert shape(store) == {
                "without rowid": False,
                "indexes": ["wsfs_journal_before", "wsfs_journal_op", "wsfs_journal_session"],
                "triggers": ["wsfs_journal_above_floor", "wsfs_journal_floor_raise"],
                "floor columns": ["seq"],
            }
            with store.write() as connection:  # rows written at 0012 as its code wrote them
                connection.exec_driver_sql(OLD_INSERT, ("a", "raw-a.txt", "x"))
                connection.exec_driver_sql(OLD_INSERT, ("b", "raw-b.txt", "y"))
        else:
            a.write_bytes("raw-a.txt", b"x")
            b.write_bytes("raw-b.txt", b"y")
        at_0012 = {fs.session_id: entries(fs) for fs in (a, b)}
        issued = max(entry[0] for listed in at_0012.values() for entry in listed)

        migrate_to(store, "head")
        assert {fs.session_id: entries(fs) for fs in (a, b)} == at_0012  # every entry kept, with its id
        if store.dialect == "sqlite":
            assert shape(store) == upgraded
        a.write_bytes("after.txt", b"after")
        b.write_bytes("after.txt", b"after")
        assert entries(a)[-1][0] > issued and entries(b)[-1][0] > issued  # above every number given before
        deleted = next(entry[0] for entry in at_0012["a"] if entry[1] == "delete")
        a.undo(deleted)  # an id given before the upgrade still names its entry
        assert entries(a)[-1][2] == deleted and a.read_bytes("d/x.txt").content == b"x"
        newest = entries(a)[-1][0]
        assert a.prune_history(keep=0) > 0
        a.write_bytes("after-prune.txt", b"a")
        assert entries(a)[-1][0] > newest
        assert [entry[0] for entry in entries(b)] == [entry[0] for entry in at_0012["b"]] + [entries(b)[-1][0]]
    finally:
        store.close()
