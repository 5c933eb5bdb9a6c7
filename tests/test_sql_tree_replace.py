"""A move or copy over a directory on SQL is one transaction: the old tree's deletion and the new tree's rows commit
together, so a refusal (or a crash) part way leaves both trees as they were, and the journal holds nothing of it.

The refusal is the database's own: a trigger (SQLite) or a ``CHECK`` (PostgreSQL) added after the trees were
written refuses the row of a file named ``refused`` that the move or copy would insert below the target.
"""

from __future__ import annotations

import errno
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql import engine_url
from workspacefs.testing._postgres import create_database

SQLITE_REFUSAL = (
    "CREATE TRIGGER wsfs_test_refuse BEFORE INSERT ON wsfs_files WHEN NEW.name = 'refused'"
    " BEGIN SELECT RAISE(ABORT, 'refused by the test''s trigger'); END"
)
POSTGRES_REFUSAL = "ALTER TABLE wsfs_files ADD CONSTRAINT wsfs_test_refuse CHECK (name <> 'refused') NOT VALID"
TREES = {
    "src/x.txt": "new x",
    "src/sub/refused": "new r",
    "dst/x.txt": "old x",
    "dst/keep/k.txt": "old k",
}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[SqlStore]:
    """A store on a database of its own (the test changes its schema)."""
    if request.param == "sqlite":
        opened = SqlStore(f"sqlite:///{fast_tmp / f'tree-replace-{uuid.uuid4().hex}.db'}")
        yield opened
        opened.close()
        return
    server_url = request.getfixturevalue("postgres_url")
    name = f"wsfs_tree_replace_{uuid.uuid4().hex[:12]}"
    opened = SqlStore(create_database(server_url, name))
    yield opened
    opened.close()
    server = sa.create_engine(engine_url(server_url)[0], isolation_level="AUTOCOMMIT")
    with server.connect() as connection:
        connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    server.dispose()


def refusing(store: SqlStore) -> SqlFilesystem:
    """A session holding :data:`TREES`, whose database then refuses any new row named ``refused``."""
    fs = SqlFilesystem(store, "s")
    for path, content in TREES.items():
        fs.write(path, content)
    with store.engine.begin() as connection:
        connection.exec_driver_sql(SQLITE_REFUSAL if store.dialect == "sqlite" else POSTGRES_REFUSAL)
    return fs


def files(fs: SqlFilesystem) -> dict[str, str]:
    return {e.path: fs.read(e.path).content for e in fs.walk(".") if e.is_file}


@pytest.mark.parametrize("operation", ["move", "copy"])
def test_a_refusal_part_way_leaves_both_trees_and_the_journal_as_they_were(store: SqlStore, operation: str) -> None:
    fs = refusing(store)
    newest = fs.history(limit=1)[0].entry_id
    with pytest.raises(OSError) as raised:
        getattr(fs, operation)("src", "dst", overwrite=True)
    assert raised.value.errno == errno.EIO
    assert files(fs) == TREES  # the old code had deleted dst's tree in a transaction of its own
    assert fs.exists("dst/keep") and fs.history(limit=1)[0].entry_id == newest
