"""Opening a SQL session that other connections delete and make again while it is opened, every time: after its
last attempt the open raises ``ConcurrentChangeError``, not SQLAlchemy's ``IntegrityError``. A trigger (real
SQLite and PostgreSQL) deletes the session inside the opener's transaction when its root row goes in, so the
foreign key refuses the row and the rollback brings the session back: each attempt finds it made again."""

from __future__ import annotations

import errno
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.errors import ConcurrentChangeError
from workspacefs.testing._postgres import throwaway_database

_ids = itertools.count()

_SQLITE_TRIGGER = (
    "CREATE TRIGGER wsfs_test_remade BEFORE INSERT ON wsfs_files WHEN NEW.path = '{path}'"
    " BEGIN DELETE FROM wsfs_sessions WHERE id = NEW.session_id; END"
)
_POSTGRES_TRIGGER = (
    "CREATE FUNCTION wsfs_test_remade() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN DELETE FROM wsfs_sessions WHERE id = NEW.session_id; RETURN NEW; END $$;"
    " CREATE TRIGGER wsfs_test_remade BEFORE INSERT ON wsfs_files FOR EACH ROW WHEN (NEW.path = '{path}')"
    " EXECUTE FUNCTION wsfs_test_remade()"
)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[str]:
    """A fresh database, dropped after: the trigger is on its tables."""
    if request.param == "sqlite":
        yield f"sqlite:///{fast_tmp / f'remade-{next(_ids)}.db'}"
        return
    with throwaway_database(request.getfixturevalue("postgres_url"), "wsfs_remade") as url:
        yield url


def remade_on_insert(store: SqlStore, path: str) -> str:
    """The trigger that deletes the session when its row at ``path`` goes in (a plain path: no quoting)."""
    return (_SQLITE_TRIGGER if store.dialect == "sqlite" else _POSTGRES_TRIGGER).format(path=path)


def test_a_session_remade_at_every_attempt_raises_concurrent_change(database: str) -> None:
    store = SqlStore(database)
    SqlFilesystem(store, "remade")  # the session exists ...
    with store.write() as connection:
        connection.exec_driver_sql("DELETE FROM wsfs_files WHERE session_id = 'remade' AND path = ''")  # ... rootless
        connection.exec_driver_sql(remade_on_insert(store, ""))
    with pytest.raises(ConcurrentChangeError) as exc:
        SqlFilesystem(store, "remade")
    assert exc.value.errno == errno.EAGAIN
    assert "made again by other connections" in str(exc.value)
    assert isinstance(exc.value.__cause__, sa.exc.IntegrityError)  # the last foreign key refusal, kept as the cause
    assert store.session_exists("remade")  # every attempt rolled back: nothing was lost
    store.close()


def test_a_change_refused_by_a_session_made_again_meanwhile_raises_concurrent_change(database: str) -> None:
    """A write through ``session_write`` (here mkdir) whose session went and came back in between: the foreign key's
    refusal with the session there again raises ``ConcurrentChangeError`` naming the caller's path."""
    store = SqlStore(database)
    fs = SqlFilesystem(store, "remade-mkdir")
    with store.write() as connection:
        connection.exec_driver_sql(remade_on_insert(store, "x"))
    with pytest.raises(ConcurrentChangeError) as exc:
        fs.mkdir("./x")
    assert exc.value.errno == errno.EAGAIN and exc.value.filename == "./x"
    assert isinstance(exc.value.__cause__, sa.exc.IntegrityError)
    assert not fs.exists("x") and fs.exists("")  # nothing changed
    store.close()
