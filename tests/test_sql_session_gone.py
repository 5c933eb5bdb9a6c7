"""A change whose session was deleted meanwhile: a foreign key refuses its row, and it reads as every other change
of a deleted session does (``FileNotFoundError``), not as a race it lost ("too many concurrent writers") or as a
file that exists."""

from __future__ import annotations

import uuid

import pytest

from workspacefs import ConcurrentChangeError, SqlFilesystem, SqlStore


@pytest.fixture
def fs(service_url: str) -> SqlFilesystem:
    """A fresh session on SQLite or the real PostgreSQL."""
    return SqlFilesystem(SqlStore(service_url), f"gone-{uuid.uuid4().hex}")


def drop_session_row(fs: SqlFilesystem) -> None:
    """Delete the session's own row without its cascade: the moment a concurrent delete of the session has taken
    the row and not yet its files (the database's foreign keys off for this one statement)."""
    store, session = fs._store, fs._session  # under the filesystem, on purpose
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if store.dialect == "sqlite":
            cursor.execute("PRAGMA foreign_keys=OFF")
            cursor.execute("DELETE FROM wsfs_sessions WHERE id = ?", (session,))
            raw.commit()
            cursor.execute("PRAGMA foreign_keys=ON")
        else:
            cursor.execute("SET session_replication_role = replica")  # no triggers: no cascade
            cursor.execute("DELETE FROM wsfs_sessions WHERE id = %s", (session,))
            cursor.execute("RESET session_replication_role")
            raw.commit()
    finally:
        raw.close()


@pytest.mark.parametrize("mode", ["overwrite", "create"])
def test_a_small_write_into_a_deleted_session_is_not_found(fs: SqlFilesystem, mode: str) -> None:
    fs.mkdir("d")
    drop_session_row(fs)
    with pytest.raises(FileNotFoundError) as raised:
        fs.write("d/new.txt", "x", mode=mode)  # type: ignore[arg-type]
    assert not isinstance(raised.value, ConcurrentChangeError)


def test_a_mkdir_into_a_deleted_session_is_not_found(fs: SqlFilesystem) -> None:
    fs.mkdir("d")
    drop_session_row(fs)
    with pytest.raises(FileNotFoundError):
        fs.mkdir("d/e", exist_ok=False)  # (with exist_ok, the FileExistsError it raised was looked at again)


def _streamed(fs: SqlFilesystem) -> None:
    with fs.open_write("d/streamed.txt") as writer:
        writer.write(b"x")


CHANGES = {
    "large write": lambda fs: fs.write("d/big.txt", "x" * 400_000),
    "append": lambda fs: fs.write("d/old.txt", "x", mode="append"),
    "stream": _streamed,
    "copy": lambda fs: fs.copy("d/old.txt", "d/copy.txt"),
    "tree copy": lambda fs: fs.copy("d", "e"),
    "move": lambda fs: fs.move("d/old.txt", "d/moved.txt"),
    "flag": lambda fs: fs.set_read_only("d/old.txt"),
    "delete": lambda fs: fs.delete("d/old.txt"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_change_of_a_deleted_session_is_not_found(fs: SqlFilesystem, change: str) -> None:
    fs.write("d/old.txt", "old")
    drop_session_row(fs)
    with pytest.raises(FileNotFoundError):
        CHANGES[change](fs)
