"""History of the read-only flag (SQL) and host retention: deleting, restoring and pruning keep the flag and the
entries right (found reviewing the commits that added them)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from workspacefs import HostFilesystem, SqlFilesystem, SqlStore
from workspacefs.backends.sql._schema import CHUNK_SIZE
from workspacefs.cli import main


def test_host_prune_before_drops_an_old_entry_written_after_a_younger_one(tmp_path: Path) -> None:
    """``prune_history(before=...)`` drops every entry older than ``before``, also one whose rows came after a
    younger entry's (another process's group written late, or a clock stepped back): the cut from the oldest
    row up stopped at the first young row and kept it."""
    (tmp_path / "root").mkdir()
    fs = HostFilesystem(tmp_path / "root", snapshot_dir=tmp_path / "snaps", durable=False)
    journal = fs._changes
    assert journal is not None
    for index in range(5):
        fs.write(f"f{index}.txt", "x")
    journal.flush()
    journal._db.execute("UPDATE journal SET at = 0 WHERE seq = (SELECT max(seq) FROM journal)")  # written late
    journal._db.commit()

    dropped = fs.prune_history(before=datetime.now(UTC) - timedelta(hours=1))

    assert dropped == 1
    assert [e.changes[0].path for e in fs.history(limit=None)] == [f"f{i}.txt" for i in reversed(range(4))]
    fs.close()


@pytest.fixture
def sql_fs(service_url: str) -> SqlFilesystem:
    """A fresh session on SQLite or the real PostgreSQL."""
    return SqlFilesystem(SqlStore(service_url), f"review-a-{uuid.uuid4().hex}")


@pytest.mark.parametrize("size", [3, CHUNK_SIZE + 10], ids=["inline", "chunked"])
def test_undoing_the_delete_of_a_read_only_file_brings_it_back_read_only(sql_fs: SqlFilesystem, size: int) -> None:
    """The delete recorded no flag, so undo wrote the content back into a writable file: it unlocked it."""
    sql_fs.create_bytes("a.txt", b"o" * size, read_only=True)
    sql_fs.delete("a.txt")
    [change] = sql_fs.history(limit=1)[0].changes
    assert (change.read_only_before, change.read_only_after) == (True, None)

    [undone] = sql_fs.undo(sql_fs.history(limit=1)[0].entry_id)

    assert (sql_fs.read_bytes("a.txt").content, sql_fs.stat("a.txt").read_only) == (b"o" * size, True)
    assert [(c.read_only_before, c.read_only_after) for c in undone.changes] == [(None, True)]
    sql_fs.undo(undone.entry_id)  # the undo's undo deletes it again
    assert not sql_fs.exists("a.txt")


def test_undoing_a_recursive_delete_brings_its_read_only_files_back_read_only(sql_fs: SqlFilesystem) -> None:
    sql_fs.write_bytes("d/open.txt", b"open")
    sql_fs.create_bytes("d/e/locked.txt", b"locked", read_only=True)
    sql_fs.delete("d", recursive=True)

    sql_fs.undo(sql_fs.history(limit=1)[0].entry_id)

    assert sql_fs.stat("d/e/locked.txt").read_only is True
    assert sql_fs.stat("d/open.txt").read_only is False
    assert sql_fs.read_bytes("d/e/locked.txt").content == b"locked"


def test_undoing_a_restore_that_dropped_a_read_only_file_brings_it_back_read_only(sql_fs: SqlFilesystem) -> None:
    snapshot = sql_fs.snapshot()
    sql_fs.create_bytes("a.txt", b"one", read_only=True)
    sql_fs.restore(snapshot)
    assert not sql_fs.exists("a.txt")

    sql_fs.undo(sql_fs.history(limit=1)[0].entry_id)

    assert (sql_fs.read_bytes("a.txt").content, sql_fs.stat("a.txt").read_only) == (b"one", True)


def test_restoring_a_family_snapshot_journals_the_flag_it_changes(sql_fs: SqlFilesystem) -> None:
    """A snapshot of a fork is restored set-based: that path changed the flag with no entry, so history did not
    show it and undo could not put it back."""
    sql_fs.write_bytes("a.txt", b"one")
    fork = sql_fs.fork()
    fork.set_read_only("a.txt")
    snapshot = fork.snapshot()

    sql_fs.restore(snapshot)

    assert sql_fs.stat("a.txt").read_only is True
    newest = sql_fs.history(limit=1)[0]
    assert [(newest.operation, c.read_only_before, c.read_only_after) for c in newest.changes] == [
        ("restore", False, True)
    ]
    sql_fs.undo(newest.entry_id)
    assert sql_fs.stat("a.txt").read_only is False


def test_undoing_a_restore_that_put_a_directory_over_a_read_only_file_brings_the_file_back_read_only(
    sql_fs: SqlFilesystem,
) -> None:
    sql_fs.write_bytes("a/inside.txt", b"in")
    snapshot = sql_fs.snapshot()
    sql_fs.delete("a", recursive=True)
    sql_fs.create_bytes("a", b"file", read_only=True)
    sql_fs.restore(snapshot)
    assert sql_fs.stat("a").is_directory

    sql_fs.undo(sql_fs.history(limit=1)[0].entry_id)

    assert (sql_fs.read_bytes("a").content, sql_fs.stat("a").read_only) == (b"file", True)


def test_the_cli_log_says_a_deleted_file_was_read_only(fast_tmp: Path) -> None:
    database = f"sqlite:///{fast_tmp}/cli-{uuid.uuid4().hex}.db"
    url = f"{database}?session=s"
    fs = SqlFilesystem(database, "s")
    fs.create_bytes("a.txt", b"one", read_only=True)
    fs.delete("a.txt")

    shown = CliRunner().invoke(main, ["log", "-n", "1", "--fs", url])

    assert shown.exit_code == 0, shown.output
    assert "deleted  a.txt (was read-only)" in shown.output
