"""A file's read-only flag is part of history on SQL (migration ``0010``): setting it is an entry, a write that
sets it records it, and undo puts it back — with the content, although the file is read-only now."""

from __future__ import annotations

import uuid

import pytest

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql._schema import CHUNK_SIZE
from workspacefs.cli._history import entry_json
from workspacefs.errors import PreconditionFailedError, ReadOnlyFileError


@pytest.fixture
def fs(service_url: str) -> SqlFilesystem:
    """A fresh session on SQLite or the real PostgreSQL."""
    return SqlFilesystem(SqlStore(service_url), f"flags-{uuid.uuid4().hex}")


def _flags(fs: SqlFilesystem) -> list[tuple[str, bool | None, bool | None]]:
    newest = fs.history(limit=1)[0]
    return [(newest.operation, c.read_only_before, c.read_only_after) for c in newest.changes]


def test_setting_the_flag_is_an_entry_and_undo_clears_it(fs: SqlFilesystem) -> None:
    fs.write_bytes("a.txt", b"one")
    fs.set_read_only("a.txt")
    assert _flags(fs) == [("set_read_only", False, True)]
    entry = fs.history(limit=1)[0]
    assert entry.changes[0].before == entry.changes[0].after  # the content is untouched
    entries = len(fs.history())
    fs.set_read_only("a.txt")  # no change: no entry
    assert len(fs.history()) == entries

    [undone] = fs.undo(entry.entry_id)
    assert fs.stat("a.txt").read_only is False
    assert [(c.read_only_before, c.read_only_after) for c in undone.changes] == [(True, False)]
    fs.undo(undone.entry_id)  # the undo is undoable too
    assert fs.stat("a.txt").read_only is True


def test_a_conditional_flag_change_is_an_entry(fs: SqlFilesystem) -> None:
    fs.write_bytes("a.txt", b"one")
    fs.set_read_only_if("a.txt", True, expect="*")
    assert _flags(fs) == [("set_read_only", False, True)]


@pytest.mark.parametrize("size", [3, CHUNK_SIZE + 10], ids=["inline", "chunked"])
def test_undoing_a_write_that_made_the_file_read_only_puts_content_and_flag_back(fs: SqlFilesystem, size: int) -> None:
    old, new = b"o" * size, b"n" * size
    fs.write_bytes("a.txt", old)
    fs.write_bytes_if("a.txt", new, expect="*", read_only=True)
    assert _flags(fs) == [("write", False, True)]
    entry = fs.history(limit=1)[0]

    fs.undo(entry.entry_id)  # refused with ReadOnlyFileError before: the file the write left is read-only

    assert fs.read_bytes("a.txt").content == old
    assert fs.stat("a.txt").read_only is False


def test_undoing_a_write_that_unlocked_the_file_makes_it_read_only_again(fs: SqlFilesystem) -> None:
    fs.create_bytes("a.txt", b"one", read_only=True)
    fs.write_bytes_if("a.txt", b"two", expect="*", read_only=False)
    assert _flags(fs) == [("write", True, False)]

    fs.undo(fs.history(limit=1)[0].entry_id)

    assert fs.read_bytes("a.txt").content == b"one"
    assert fs.stat("a.txt").read_only is True


def test_a_streamed_write_that_sets_the_flag_records_it(fs: SqlFilesystem) -> None:
    fs.write_bytes("a.txt", b"one")
    with fs.open_write_if("a.txt", expect="*", read_only=True) as writer:
        writer.write(b"x" * (CHUNK_SIZE + 1))
    assert _flags(fs) == [("write", False, True)]
    fs.undo(fs.history(limit=1)[0].entry_id)
    assert (fs.read_bytes("a.txt").content, fs.stat("a.txt").read_only) == (b"one", False)


def test_restoring_a_snapshot_that_differs_only_in_a_flag_is_an_entry_that_undo_reverses(fs: SqlFilesystem) -> None:
    fs.write_bytes("a.txt", b"one")
    snapshot = fs.snapshot()
    fs.set_read_only("a.txt")

    fs.restore(snapshot)

    assert fs.stat("a.txt").read_only is False
    assert _flags(fs) == [("restore", True, False)]
    fs.undo(fs.history(limit=1)[0].entry_id)
    assert fs.stat("a.txt").read_only is True


def test_the_cli_json_names_the_flag(fs: SqlFilesystem) -> None:
    fs.write_bytes("a.txt", b"one")
    fs.set_read_only("a.txt")
    [change] = entry_json(fs.history(limit=1)[0])["changes"]
    assert (change["read_only_before"], change["read_only_after"]) == (False, True)


def test_undo_refuses_content_into_a_file_locked_since_and_changes_nothing(fs: SqlFilesystem) -> None:
    """A restore rewrote a file read-only on both sides; the file is locked now, so its undo cannot write: the check
    runs before anything changes (undoing two entries undid the first, then failed on the second)."""
    fs.create_bytes("a.txt", b"one", read_only=True)
    snapshot = fs.snapshot()
    fs.write_bytes_if("a.txt", b"two", expect="*", read_only=False)
    fs.set_read_only("a.txt", True)
    fs.restore(snapshot)
    restore_id = fs.history(limit=1)[0].entry_id
    fs.write_bytes("b.txt", b"b")
    b_id = fs.history(limit=1)[0].entry_id

    with pytest.raises(ReadOnlyFileError):
        fs.check_undo([b_id, restore_id])
    with pytest.raises(ReadOnlyFileError):
        fs.undo([b_id, restore_id], force=True)

    assert fs.read_bytes("b.txt").content == b"b"
    assert (fs.read_bytes("a.txt").content, fs.stat("a.txt").read_only) == (b"one", True)

    # the check follows the undo: a lock undone first (newest first) no longer stands in the way
    fs.write_bytes("c.txt", b"one")
    fs.write_bytes("c.txt", b"two")
    write_id = fs.history(limit=1)[0].entry_id
    fs.set_read_only("c.txt")
    lock_id = fs.history(limit=1)[0].entry_id
    with pytest.raises(ReadOnlyFileError):
        fs.undo(write_id)  # the lock came later: it is not this undo's to lift
    fs.undo([lock_id, write_id])
    assert (fs.read_bytes("c.txt").content, fs.stat("c.txt").read_only) == (b"one", False)


def test_a_version_no_content_can_have_is_a_failed_precondition(fs: SqlFilesystem) -> None:
    """The service turns a weak ETag into an id no content has (it holds a NUL); PostgreSQL's one-call small write
    sent it as text and failed with ``DataError`` (a 500) instead of a failed precondition (412)."""
    fs.write_bytes("a.txt", b"one")
    with pytest.raises(PreconditionFailedError):
        fs.write_bytes_if("a.txt", b"two", expect="\x00never")
    assert fs.read_bytes("a.txt").content == b"one"


def _files(fs: SqlFilesystem) -> dict[str, tuple[str, bool | None]]:
    return {e.path: (fs.read(e.path).content, fs.stat(e.path).read_only) for e in fs.walk(".") if e.is_file}


def test_undoing_a_move_over_a_tree_puts_back_both_read_only_files_of_one_name(fs: SqlFilesystem) -> None:
    """The undo moves ``dst`` back to ``src`` first: the read-only ``dst/r.txt`` it then writes back is not the one
    the move brought (which goes back to ``src`` with its flag). The check looked at ``dst/r.txt`` as it is now and
    refused the undo, with or without ``force``."""
    fs.write("src/r.txt", "new r")
    fs.write("dst/r.txt", "old r")
    fs.write("dst/k.txt", "old k")
    fs.set_read_only("src/r.txt")
    fs.set_read_only("dst/r.txt")
    before = _files(fs)
    fs.move("src", "dst", overwrite=True)
    assert _files(fs) == {"dst/r.txt": ("new r", True)}
    fs.undo(fs.history(limit=1)[0].entry_id)
    assert _files(fs) == before


def test_undo_refuses_content_into_a_file_locked_after_its_directory_moved_and_changes_nothing(
    fs: SqlFilesystem,
) -> None:
    """Undoing a write and a later move of its directory: the write's file is, when its turn comes, the one the move
    takes back, read-only since. The check looked for it where it was before the move back (nothing there), let the
    undo start, and the write back failed after the move was undone."""
    fs.write("a/r.txt", "one")
    fs.write("a/r.txt", "two")
    written = fs.history(limit=1)[0].entry_id
    fs.move("a", "b")
    moved = fs.history(limit=1)[0].entry_id
    fs.set_read_only("b/r.txt")
    with pytest.raises(ReadOnlyFileError, match="clear its flag"):
        fs.undo([moved, written])
    assert _files(fs) == {"b/r.txt": ("two", True)}
