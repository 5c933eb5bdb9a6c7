"""A hostile process swaps the target of a host write for a FIFO or a symlink between the backend's look at it
and the rename that puts the new content in place (interleaved by a hook on the look, not by timing): the
write refuses, and what the other process put there stays as it was."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from workspacefs import HostFilesystem
from workspacefs.backends.host import _temps, _tree
from workspacefs.errors import SpecialFileError


def swapping_after_the_look(fs: HostFilesystem, swap: Any) -> list[int]:
    """Make ``swap`` run once, right after the write's look at its target (``check_target``)."""
    tree, ran = fs._tree, []
    look = tree.check_target

    def look_then_swap(*args: Any, **options: Any) -> Any:
        found = look(*args, **options)
        if not ran:
            ran.append(1)
            swap()
        return found

    tree.check_target = look_then_swap  # type: ignore[method-assign]
    return ran


@pytest.mark.parametrize("use_tmpfile", [True, False])
def test_a_fifo_swapped_in_after_the_look_is_never_replaced(tmp_path: Path, use_tmpfile: bool) -> None:
    fs = HostFilesystem(tmp_path, history=False, use_tmpfile=use_tmpfile)
    fs.write("a.txt", "one")
    target = tmp_path / "a.txt"

    def to_fifo() -> None:
        target.unlink()
        os.mkfifo(target)

    ran = swapping_after_the_look(fs, to_fifo)
    with pytest.raises(SpecialFileError):
        fs.write("a.txt", "two")
    assert ran
    assert stat.S_ISFIFO(os.lstat(target).st_mode)  # still the FIFO
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]  # no temporary file left beside it


def test_a_symlink_swapped_in_after_the_look_is_left_as_it_is(tmp_path: Path) -> None:
    inside = tmp_path / "root"
    inside.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    fs = HostFilesystem(inside, history=False)
    fs.write("a.txt", "one")
    target = inside / "a.txt"

    def to_link() -> None:
        target.unlink()
        target.symlink_to(outside)

    swapping_after_the_look(fs, to_link)
    with pytest.raises(OSError) as raised:
        fs.write("a.txt", "two")
    assert raised.value.filename == "a.txt"
    assert os.readlink(target) == str(outside)  # the link is left, as a write refuses a link it sees
    assert outside.read_text() == "secret"
    assert sorted(os.listdir(inside)) == ["a.txt"]


def test_a_regular_file_swapped_in_after_the_look_is_replaced(tmp_path: Path) -> None:
    """What a write may replace it still replaces, and the exchanged-out file goes."""
    fs = HostFilesystem(tmp_path, history=False)
    fs.write("a.txt", "one")
    target = tmp_path / "a.txt"

    def to_other_file() -> None:
        target.unlink()
        target.write_text("theirs")

    swapping_after_the_look(fs, to_other_file)
    fs.write("a.txt", "two")
    assert target.read_text() == "two"
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]


def test_a_name_removed_after_the_look_is_taken_without_replacing(tmp_path: Path) -> None:
    fs = HostFilesystem(tmp_path, history=False)
    fs.write("a.txt", "one")
    swapping_after_the_look(fs, (tmp_path / "a.txt").unlink)
    fs.write("a.txt", "two")
    assert (tmp_path / "a.txt").read_text() == "two"
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]


def test_with_history_a_fifo_swapped_in_before_the_rename_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal's look (which keeps the file for undo) stands in for ``check_target``: the swap comes after
    it, at the rename itself."""
    fs = HostFilesystem(tmp_path)
    fs.write("a.txt", "one")
    target, ran = tmp_path / "a.txt", []
    publish = _temps.TempFile.publish

    def swap_then_publish(self: _temps.TempFile, *args: Any, **options: Any) -> None:
        if not ran:
            ran.append(1)
            target.unlink()
            os.mkfifo(target)
        publish(self, *args, **options)

    monkeypatch.setattr(_temps.TempFile, "publish", swap_then_publish)
    with pytest.raises(SpecialFileError):
        fs.write("a.txt", "two")
    assert ran
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    assert [e.operation for e in fs.history(limit=None)] == ["write"]  # the refused write left no entry


# --- move(overwrite=True): the same exchange at the rename ---------------------------------------------------


def swapping_before_the_rename(fs: HostFilesystem, swap: Any) -> list[int]:
    """Make ``swap`` run once, after the move's look at its target and before its rename."""
    rename, ran = fs._rename_entry, []

    def swap_then_rename(*args: Any, **options: Any) -> None:
        if not ran:
            ran.append(1)
            swap()
        rename(*args, **options)

    fs._rename_entry = swap_then_rename  # type: ignore[method-assign]
    return ran


def to_fifo(target: Path) -> None:
    target.unlink()
    os.mkfifo(target)


def to_link(target: Path) -> None:
    target.unlink()
    target.symlink_to(target.parent.parent / "outside.txt")


def to_directory(target: Path) -> None:
    target.unlink()
    target.mkdir()


@pytest.mark.parametrize("history", [False, True])
@pytest.mark.parametrize(
    ("swap", "kind", "refusal"),
    [
        (to_fifo, stat.S_ISFIFO, SpecialFileError),
        (to_link, stat.S_ISLNK, OSError),
        (to_directory, stat.S_ISDIR, IsADirectoryError),
    ],
)
def test_a_move_over_a_file_never_replaces_what_was_swapped_in_after_its_look(
    tmp_path: Path, history: bool, swap: Any, kind: Any, refusal: type[Exception]
) -> None:
    """The move looked at b.txt (a file: overwrite allowed), then a FIFO or a link took its name, and the plain
    rename replaced it. The exchange puts it back and refuses, as a write does; the source stays."""
    inside = tmp_path / "root"
    inside.mkdir()
    (tmp_path / "outside.txt").write_text("secret")
    fs = HostFilesystem(inside, history=history)
    fs.write("a.txt", "mine")
    fs.write("b.txt", "theirs")
    target = inside / "b.txt"
    ran = swapping_before_the_rename(fs, lambda: swap(target))
    with pytest.raises(refusal) as raised:
        fs.move("a.txt", "b.txt", overwrite=True)
    assert ran
    assert getattr(raised.value, "filename", None) == "b.txt"
    assert kind(os.lstat(target).st_mode)  # still what the other process put there
    assert (inside / "a.txt").read_text() == "mine"
    assert os.lstat(inside / "a.txt").st_nlink == 1  # no second name of the source left anywhere
    assert sorted(os.listdir(inside)) == ["a.txt", "b.txt"]
    assert (tmp_path / "outside.txt").read_text() == "secret"
    if history:
        assert [e.operation for e in fs.history(limit=None)] == ["write", "write"]  # the refused move: no entry


def test_a_move_over_a_file_replaced_by_another_file_after_its_look_replaces_it(tmp_path: Path) -> None:
    """What a move may replace it still replaces; the exchanged-out file goes."""
    fs = HostFilesystem(tmp_path, history=False)
    fs.write("a.txt", "mine")
    fs.write("b.txt", "theirs")
    target = tmp_path / "b.txt"

    def to_other_file() -> None:
        target.unlink()
        target.write_text("other")

    assert swapping_before_the_rename(fs, to_other_file) is not None
    fs.move("a.txt", "b.txt", overwrite=True)
    assert target.read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["b.txt"]


def test_a_move_over_a_file_removed_after_its_look_takes_the_name(tmp_path: Path) -> None:
    fs = HostFilesystem(tmp_path, history=False)
    fs.write("a.txt", "mine")
    fs.write("b.txt", "theirs")
    swapping_before_the_rename(fs, (tmp_path / "b.txt").unlink)
    fs.move("a.txt", "b.txt", overwrite=True)
    assert (tmp_path / "b.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["b.txt"]


def after_the_exchange(monkeypatch: pytest.MonkeyPatch, then: Any, *, before_next: bool = False) -> list[int]:
    """Make ``then`` run once, right after the move's first exchange took effect (``before_next``: only as the
    next exchange, the exchange back, begins)."""
    exchange, ran = _tree.renameat_exchange, []

    def exchange_then(*args: Any) -> bool | None:
        if before_next and ran == [1]:
            ran.append(2)
            then()
        done = exchange(*args)
        if done and not ran:
            ran.append(1)
            if not before_next:
                then()
        return done

    monkeypatch.setattr(_tree, "renameat_exchange", exchange_then)
    return ran


@pytest.mark.parametrize("history", [False, True])
def test_a_file_written_at_the_source_right_after_the_exchange_is_never_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: bool
) -> None:
    """The exchange leaves the target's old file at the source's name until it is removed; another writer (here
    another process's filesystem) that writes the source's path in that instant had its file removed by name."""
    fs = HostFilesystem(tmp_path, history=history)
    other = HostFilesystem(tmp_path, history=False)
    fs.write("a.txt", "mine")
    fs.write("b.txt", "theirs")
    ran = after_the_exchange(monkeypatch, lambda: other.write("a.txt", "new"))
    fs.move("a.txt", "b.txt", overwrite=True)
    assert ran
    assert (tmp_path / "b.txt").read_text() == "mine"
    assert (tmp_path / "a.txt").read_text() == "new"  # the other writer's file, not removed
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]  # and no temporary name left


@pytest.mark.parametrize("history", [False, True])
def test_a_move_whose_exchange_back_finds_a_name_gone_stands_instead_of_refusing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: bool
) -> None:
    """A directory took the target's name after the look; the exchange took it out (to the source's name, or to a
    temporary name of the move's), and another process removed it from there before the exchange back. The move
    had happened (the source at the target, nothing of theirs replaced), yet it was refused: the caller told a.txt
    stayed, the history without it."""
    fs = HostFilesystem(tmp_path, history=history)
    fs.write("a.txt", "mine")
    fs.write("b.txt", "theirs")
    target = tmp_path / "b.txt"

    def remove_what_was_taken_out() -> None:
        [taken] = [entry for entry in tmp_path.iterdir() if entry.is_dir()]
        taken.rmdir()

    swapping_before_the_rename(fs, lambda: to_directory(target))
    ran = after_the_exchange(monkeypatch, remove_what_was_taken_out, before_next=True)
    fs.move("a.txt", "b.txt", overwrite=True)
    assert ran == [1, 2]
    assert target.read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["b.txt"]
    if history:
        assert [e.operation for e in fs.history(limit=None)] == ["move", "write", "write"]
