"""A host ``move``/``copy(overwrite=True)`` of a directory over a directory, beyond crashes: what another process
swaps in at the target is refused by its type and never replaced, the journal's entry is what the two steps made
(undo puts the old tree back), and a watcher sees nothing of the hidden directories as outside changes."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from test_review_host import NOBODY, as_user

from workspacefs import HostFilesystem, _hostio
from workspacefs._hostio import TEMP_PREFIX
from workspacefs.errors import SpecialFileError, SymlinkRefusedError
from workspacefs.results import FileStat

_RENAME_EXCHANGE = 2


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Writer registries under this test's own cache."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(directory))
    return directory


def tree(root: Path, top: str) -> dict[str, str | None]:
    """Files' text and directories (``None``) below ``top``."""
    base = root / top
    return {
        str(Path(d, n).relative_to(base)): None if n in dirs else (Path(d) / n).read_text()
        for d, dirs, files in os.walk(base)
        for n in dirs + files
    }


def hidden(root: Path) -> list[str]:
    return [n for _, dirs, files in os.walk(root) for n in dirs + files if n.startswith(TEMP_PREFIX)]


def workspace(tmp_path: Path, *, history: bool) -> tuple[HostFilesystem, Path]:
    root = tmp_path / "root"
    root.mkdir()
    fs = HostFilesystem(root, snapshot_dir=tmp_path / "snapshots", history=history)
    for path, text in {"a/new.txt": "new", "a/sub/deep.txt": "deep", "b/old.txt": "old", "c/other.txt": "c"}.items():
        fs.write(path, text)
    return fs, root


SWAPS: dict[str, tuple[Callable[[Path, Path], None], type[OSError]]] = {
    "symlink": (lambda target, outside: target.symlink_to(outside), SymlinkRefusedError),
    "fifo": (lambda target, _: os.mkfifo(target), SpecialFileError),
}


@pytest.mark.parametrize("when", ["after the look", "before the exchange"])
@pytest.mark.parametrize("kind", list(SWAPS))
@pytest.mark.parametrize("operation", ["move", "copy"])
def test_what_another_process_swaps_in_at_the_target_is_refused_by_its_type_and_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str, kind: str, when: str
) -> None:
    """The target's tree was removed first: a symlink swapped in failed with an untyped ``EIO``, a FIFO blocked the
    removal's open for good."""
    fs, root = workspace(tmp_path, history=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("secret")
    make, refusal = SWAPS[kind]
    ran: list[int] = []

    def swap() -> None:
        ran.append(1)
        shutil.rmtree(root / "b")
        make(root / "b", outside)

    if when == "after the look":
        stat = fs._stat

        def stat_then_swap(path: str) -> FileStat:
            info = stat(path)
            if path == "b" and not ran:
                swap()
            return info

        monkeypatch.setattr(fs, "_stat", stat_then_swap)
    else:
        renameat2 = _hostio._renameat2
        assert renameat2 is not None

        def swap_then_exchange(src_fd: int, src: bytes, dst_fd: int, dst: bytes, flags: int) -> int:
            if flags == _RENAME_EXCHANGE and dst == b"b" and not ran:
                swap()
            return renameat2(src_fd, src, dst_fd, dst, flags)

        monkeypatch.setattr(_hostio, "_renameat2", swap_then_exchange)
    with pytest.raises(refusal) as raised:
        getattr(fs, operation)("a", "b", overwrite=True)
    assert ran
    assert raised.value.filename == "b"
    assert os.path.islink(root / "b") if kind == "symlink" else not os.path.isdir(root / "b")
    assert tree(root, "a") == {"new.txt": "new", "sub": None, "sub/deep.txt": "deep"}
    assert tree(tmp_path, "outside") == {"keep.txt": "secret"}
    assert hidden(root) == []


def test_undo_puts_back_the_tree_a_move_or_a_copy_over_a_directory_replaced_and_a_watcher_sees_no_outside_change(
    tmp_path: Path,
) -> None:
    """One entry each, as the two steps journaled it (the target tree's deletions, then the move or the copy)."""
    fs, root = workspace(tmp_path, history=True)
    with fs.watch() as watcher:
        fs.move("a", "b", overwrite=True)
        fs.copy("b", "c", overwrite=True)
        events = []
        while (event := watcher.next_event(1.5)) is not None:
            events.append(event)
    assert [e.path for e in events if e.entry_id is None] == []  # nothing seen below the hidden directories
    copied, moved = fs.history(limit=2)
    assert (copied.operation, moved.operation) == ("copy", "move")
    assert moved.changes[-1].from_path == "a"
    assert {c.path for c in moved.changes} == {"b", "b/old.txt"}
    assert {c.path for c in copied.changes} == {"c", "c/other.txt", "c/new.txt", "c/sub", "c/sub/deep.txt"}
    new = {"new.txt": "new", "sub": None, "sub/deep.txt": "deep"}
    assert (tree(root, "b"), tree(root, "c")) == (new, new)
    fs.undo(copied.entry_id)
    assert tree(root, "c") == {"other.txt": "c"}
    fs.undo(moved.entry_id)
    assert (tree(root, "a"), tree(root, "b")) == (new, {"old.txt": "old"})
    assert hidden(root) == []
    fs.close()


@pytest.mark.parametrize("operation", ["copy", "move"])
def test_a_directory_copied_or_moved_over_another_has_the_mode_a_plain_copy_or_move_gives_it(
    tmp_path: Path, operation: str
) -> None:
    """The hidden directory a copy is built in is private (0o700) while built; exchanged into place, the copy
    must still get the mode a new directory gets, as ``copy`` to a new name does (found by review6: 0o700)."""
    fs, root = workspace(tmp_path, history=False)
    getattr(fs, operation)("c", "plain")
    getattr(fs, operation)("a", "b", overwrite=True)
    assert oct((root / "b").stat().st_mode & 0o7777) == oct((root / "plain").stat().st_mode & 0o7777)
    assert hidden(root) == []


OTHER_USER = 100000
"""A rootless container's user as the host sees it (a subordinate uid): not the workspace's owner."""


@pytest.mark.parametrize(("others", "src"), [("source", "a"), ("source", "up/a")])
def test_a_directory_of_another_user_moves_over_a_directory_as_the_two_steps_moved_it(
    tmp_path: Path, others: str, src: str
) -> None:
    """Moving a directory to another parent needs write permission on it (its ``..``), which the owner of a root
    lacks on a directory a rootless container's user made: the exchange through a hidden directory re-parents
    the source, so it was refused where the two steps (same parent) worked (found by review6); in another parent
    the two steps removed the target, then failed: nothing is changed now. (A target of another user is refused
    untouched, as its recursive delete is.)"""
    tmp_path.chmod(0o755)
    root = tmp_path / "root"
    for name in ("up/a", "a", "b"):
        (root / name).mkdir(parents=True)
        (root / name / f"{name[-1]}.txt").write_text(name)
    for path in [root, *root.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    os.chown(root / (src if others == "source" else "b"), OTHER_USER, OTHER_USER)
    fs = HostFilesystem(root, snapshot_dir=tmp_path / "snapshots", history=False)

    def move() -> object:
        try:
            fs.move(src, "b", overwrite=True)
        except OSError as exc:
            return type(exc), exc.errno, exc.filename
        return None

    result = as_user(NOBODY, move)
    if src == "up/a":
        assert result == (PermissionError, errno.EACCES, "up/a")
        assert (tree(root, "up/a"), tree(root, "b")) == ({"a.txt": "up/a"}, {"b.txt": "b"})
    else:
        assert result is None
        assert not (root / "a").exists()
        assert tree(root, "b") == {"a.txt": "a"}
    assert hidden(root) == []


def test_a_fifo_left_at_the_hidden_name_by_a_failed_exchange_back_is_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO swapped in at a copy's target goes into hiding with the exchange; if another process takes the
    target's name before the exchange back, the FIFO stays at the hidden name, whose removal opened it for reading
    (``shutil.rmtree`` opens the name it is given without ``O_NONBLOCK``): the copy hung until a writer came
    (found by review6). A helper thread plays that writer and counts the opens it met."""
    fs, root = workspace(tmp_path, history=False)
    renameat2 = _hostio._renameat2
    assert renameat2 is not None
    aside: list[str] = []

    def swap_exchange_and_take(src_fd: int, src: bytes, dst_fd: int, dst: bytes, flags: int) -> int:
        first = flags == _RENAME_EXCHANGE and dst == b"b" and not aside
        if first:
            aside.append(src.decode())
            (root / "b").rename(tmp_path / "old")  # the other process: a FIFO at the target
            os.mkfifo(root / "b")
        result = renameat2(src_fd, src, dst_fd, dst, flags)
        if first:
            (root / "b").rename(tmp_path / "taken")  # and the target's name taken before the exchange back
        return result

    monkeypatch.setattr(_hostio, "_renameat2", swap_exchange_and_take)
    done = threading.Event()
    opened: list[int] = []

    def writer() -> None:  # meets a reader blocked opening the FIFO (unblocking it), else finds none
        while not done.is_set():
            for fifo in [*root.glob(f"{TEMP_PREFIX}*"), *root.glob(f"{TEMP_PREFIX}*/b")]:  # wherever it went
                with contextlib.suppress(OSError):
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                    opened.append(1)
            done.wait(0.01)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        with pytest.raises(SpecialFileError):
            fs.copy("a", "b", overwrite=True)
    finally:
        done.set()
        thread.join()
    assert opened == []
    assert tree(tmp_path, "taken") == {"new.txt": "new", "sub": None, "sub/deep.txt": "deep"}
