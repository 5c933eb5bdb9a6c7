"""The work a small host write does, counted (never timed): the file system calls of the plain path, and what
the journal adds per entry (issue 15's host write target, issue 20's journal overhead).

Counting wraps the real ``os`` functions (and the ``linkat`` the resolver calls through ctypes) with counters
that pass every call through: the files are written for real."""

from __future__ import annotations

import collections
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from workspacefs import HostFilesystem, _hostio
from workspacefs.backends.host import _journal as host_journal
from workspacefs.history import Actor, Change

CALLS = ("open", "close", "stat", "fstat", "link", "rename", "unlink", "utime", "fchmod", "fsync", "write", "pread")
CONTENT = b"x" * 1023 + b"\n"


@contextmanager
def counted_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[str]]:
    """Count every call of the ``os`` functions in ``CALLS`` (and ctypes ``linkat``) made inside the block."""
    counts: collections.Counter[str] = collections.Counter()

    def counting(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)

        return call

    with monkeypatch.context() as patch:
        for name in CALLS:
            patch.setattr(os, name, counting(name, getattr(os, name)))
        linkat = getattr(_hostio, "_linkat", None)  # the resolver's linkat(AT_EMPTY_PATH), where it has one
        if linkat is not None:
            patch.setattr(_hostio, "_linkat", counting("link", linkat))
        renameat2 = getattr(_hostio, "_renameat2", None)  # an overwrite's exchange (RENAME_EXCHANGE)
        if renameat2 is not None:
            patch.setattr(_hostio, "_renameat2", counting("rename", renameat2))
        yield counts


def per_write(counts: collections.Counter[str], writes: int) -> dict[str, float]:
    return {name: round(count / writes, 2) for name, count in sorted(counts.items())}


@pytest.fixture
def make_fs(fast_tmp: Path, tmp_path: Path) -> Iterator[Callable[..., HostFilesystem]]:
    made: list[HostFilesystem] = []

    def make(**options: Any) -> HostFilesystem:
        root = Path(os.path.join(fast_tmp, f"{tmp_path.name}-{len(made)}"))
        root.mkdir()
        fs = HostFilesystem(root, snapshot_dir=Path(f"{root}-snapshots"), **options)
        fs.mkdir("d")
        made.append(fs)
        return fs

    yield make
    for fs in made:
        fs.close()


def test_a_new_file_costs_seven_calls_and_no_stat_and_an_overwrite_looks_first(
    make_fs: Callable[..., HostFilesystem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new file: open the parent, an anonymous file, write, fsync, link it to its name, close both; no look at
    the name first (a ``stat`` that finds nothing raised and caught ``FileNotFoundError``, a seventh of the write).
    A path this object wrote (or read) is probably a file: that write looks first (one ``stat``), keeps the
    file's permissions and renames a temporary name over it, without a link tried and refused first."""
    fs = make_fs(history=False)
    with counted_calls(monkeypatch) as counts:
        for n in range(50):
            fs.write_bytes(f"d/f{n}.txt", CONTENT)
    assert per_write(counts, 50) == {"close": 2, "fsync": 1, "link": 1, "open": 2, "write": 1}
    fs.write_bytes("d/f0.txt", CONTENT)  # the first temporary name registers this process (once)
    with counted_calls(monkeypatch) as counts:
        for n in range(50):
            fs.write_bytes(f"d/f{n}.txt", CONTENT[::-1])
    assert per_write(counts, 50) == {
        "close": 2,
        "fchmod": 1,
        "fsync": 1,
        "link": 1,
        "open": 2,
        "rename": 1,  # an exchange: the entry it took out is looked at (a FIFO swapped in is put back) and removed
        "stat": 2,
        "unlink": 1,
        "write": 1,
    }
    assert [fs.read_bytes(f"d/f{n}.txt").content for n in range(50)] == [CONTENT[::-1]] * 50


def test_a_file_made_elsewhere_is_still_replaced_safely_when_the_link_finds_it(
    make_fs: Callable[..., HostFilesystem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown path is linked first; a file there refuses the link, and the write then replaces it as any
    overwrite does (its mode kept); a symlink or a directory there is refused, never replaced or followed."""
    fs = make_fs(history=False)
    root = Path(fs.root)
    (root / "d" / "made-elsewhere.txt").write_bytes(b"old")
    os.chmod(root / "d" / "made-elsewhere.txt", 0o640)
    os.symlink("/etc/passwd", root / "d" / "link")
    os.mkdir(root / "d" / "dir")
    with counted_calls(monkeypatch) as counts:
        fs.write_bytes("d/made-elsewhere.txt", b"new")
    assert counts["link"] == 2 and counts["stat"] == 2  # the refused link, then the temporary name's; the
    # look before, and the look at what the exchange took out
    assert (root / "d" / "made-elsewhere.txt").read_bytes() == b"new"
    assert os.stat(root / "d" / "made-elsewhere.txt").st_mode & 0o777 == 0o640
    with pytest.raises(PermissionError):
        fs.write_bytes("d/link", b"x")
    with pytest.raises(IsADirectoryError):
        fs.write_bytes("d/dir", b"x")
    assert os.readlink(root / "d" / "link") == "/etc/passwd"
    assert sorted(os.listdir(root / "d")) == ["dir", "link", "made-elsewhere.txt"]


def test_names_are_given_through_proc_where_the_kernel_refuses_empty_path_links(
    make_fs: Callable[..., HostFilesystem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before Linux 6.10 an unprivileged ``linkat(AT_EMPTY_PATH)`` fails: ``/proc/self/fd/N`` names the file."""
    monkeypatch.setattr(_hostio, "_empty_path_links", False)
    fs = make_fs()
    fs.write_bytes("d/a.txt", b"1")
    fs.write_bytes("d/a.txt", b"2")
    fs.write_bytes("d/b.txt", b"3", mode="create")
    assert fs.read_bytes("d/a.txt").content == b"2"
    assert [c.before is None for e in reversed(fs.history()) for c in e.changes] == [
        True,
        True,
        False,
        True,
    ]  # d, a, a, b
    fs.undo(fs.history(path="d/a.txt")[0].entry_id)
    assert fs.read_bytes("d/a.txt").content == b"1"


def test_the_journal_looks_for_a_waiting_process_once_per_group(
    make_fs: Callable[..., HostFilesystem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry joining a group costs no ``fstat`` of ``journal.busy`` (it was one per entry), and no statement:
    one transaction writes the group."""
    monkeypatch.setattr(host_journal, "GROUP_SECONDS", 600.0)
    fs = make_fs()
    plain = make_fs(history=False)
    assert fs._changes is not None
    statements: list[str] = []
    fs._changes._db.set_trace_callback(statements.append)
    with counted_calls(monkeypatch) as journaled:
        for n in range(100):
            fs.write_bytes(f"d/f{n}.txt", CONTENT)
    with counted_calls(monkeypatch) as alone:
        for n in range(100):
            plain.write_bytes(f"d/f{n}.txt", CONTENT)
    journaled.subtract(alone)
    assert +journaled == collections.Counter({"fstat": 1})  # a new file's entry: nothing else on disk
    assert statements == []
    assert len(fs.history(limit=None)) == 101  # and the directory's
    assert statements.count("COMMIT") == 1 and sum(s.startswith("INSERT") for s in statements) == 100


def test_content_kept_a_moment_ago_is_not_touched_again(
    make_fs: Callable[..., HostFilesystem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overwriting files whose content the journal kept a moment ago: what they held is read and hashed, but
    the kept copy is neither written nor touched again (no ``utime``: its time is young enough)."""
    monkeypatch.setattr(host_journal, "GROUP_SECONDS", 600.0)  # no commit (which touches journal.busy) meanwhile
    fs = make_fs()
    for n in range(20):
        fs.write_bytes(f"d/f{n}.txt", CONTENT)
    fs.write_bytes("d/f0.txt", CONTENT[::-1])  # keeps CONTENT once
    with counted_calls(monkeypatch) as counts:
        for n in range(1, 20):
            fs.write_bytes(f"d/f{n}.txt", CONTENT[::-1])
    assert counts["utime"] == 0
    assert counts["pread"] == 19
    # the open that reads the old content checks what the write replaces; the one stat per write is the look at
    # what the exchange took out of the name (a FIFO or link swapped in since that open is put back)
    assert counts["stat"] == 19
    entry = fs.history(path="d/f5.txt")[0]
    fs.undo(entry.entry_id)
    assert fs.read_bytes("d/f5.txt").content == CONTENT


def test_a_group_commit_writes_no_page_of_a_path_index(fast_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group of 64 entries at scattered paths, committed into a journal of 3,000, appends 11 pages to the WAL:
    the table's, its entry index's and the id sequence's. An index on ``path``, which no query used (a path's
    entries are found through ``journal_entry``), added a page per scattered row: 37."""
    monkeypatch.setattr(host_journal, "GROUP_SECONDS", 600.0)
    directory = Path(os.path.join(fast_tmp, "scattered-journal"))
    journal = host_journal.HostJournal(directory)
    paths = [f"src/pkg{k % 50}/module_{k}.py" for k in range(3000)]
    for path in paths:
        journal.note("write", [Change(path, None, "a" * 64, 0, 1)], Actor())
    journal.flush()
    journal._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = directory / "journal.db-wal"
    start = wal.stat().st_size
    random.Random(7).shuffle(paths)
    for path in paths[:64]:
        journal.note("write", [Change(path, None, "b" * 64, 1, 1)], Actor())
    journal.flush()
    page = journal._db.execute("PRAGMA page_size").fetchone()[0]
    frames = (wal.stat().st_size - start - 32) / (page + 24)  # a WAL emptied by TRUNCATE starts with its header
    assert frames <= 12
    assert [index[1] for index in journal._db.execute("PRAGMA index_list(journal)")] == [
        "journal_before",
        "journal_entry",
    ]
    assert len(journal.entries(path=paths[0])) == 2  # found by path all the same
    journal.close()


def test_opening_a_journal_drops_the_path_index_an_earlier_version_made(fast_tmp: Path) -> None:
    directory = Path(os.path.join(fast_tmp, "earlier-journal"))
    journal = host_journal.HostJournal(directory)
    journal.note("write", [Change("a.txt", None, "a" * 64, 0, 1)], Actor())
    journal._db.execute("CREATE INDEX journal_path ON journal (path)")  # what earlier versions made
    journal.close()
    journal = host_journal.HostJournal(directory)
    assert "journal_path" not in [index[1] for index in journal._db.execute("PRAGMA index_list(journal)")]
    assert [c.path for e in journal.entries(path="a.txt") for c in e.changes] == ["a.txt"]
    journal.close()
