"""Hidden directories of tree moves, copies and recursive deletes, and what the reaper does with a dead writer's.

A tree replacing a directory never leaves the target's name a mix: it is prepared, or the old tree put, under a
hidden directory beside the target, named like a writer's temporary file (``TEMP_PREFIX``, the writer's token,
a counter) plus a suffix saying what it holds:

- ``.trash``: garbage from the start (a copy being built, then the tree it replaced; a tree being deleted). A dead
  writer's is removed.
- ``.over.<inode>.<ctime>``: a move over the directory of that inode and change time. It holds one entry, named
  as the target: the moved source before the exchange, the target's old tree (that inode) after it. A dead
  writer's is finished: the old tree is removed; anything else is the source, whose move is completed: renamed to
  the target's name if the target went, exchanged with the target if that is still the old tree, untouched since
  (same inode and change time: an inode number alone is reused by the next directory made once the old one is
  removed). Else the source stays hidden, for good: a source must survive a crash, and what another process put
  at the target is never replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Final

from workspacefs._hostio import DIR_FLAGS, remove_tree_at, renameat_exchange, renameat_noreplace

__all__ = ["OVER", "TRASH", "over_name", "reap_directory"]

TRASH: Final = ".trash"
"""Suffix of a hidden directory that is garbage whatever it holds."""
OVER: Final = ".over."
"""Suffix (then the target's inode and change time, hex) of a hidden directory of a move over a directory."""


def over_name(stem: str, target: os.stat_result) -> str:
    """The hidden directory's name for a move over the directory ``target`` (its ``lstat``)."""
    return f"{stem}{OVER}{target.st_ino:x}.{target.st_ctime_ns:x}"


def reap_directory(dir_fd: int, name: str) -> tuple[int, int]:
    """Finish a dead writer's hidden directory ``name`` of ``dir_fd``: ``(trees removed, moves completed)``.
    Any other directory named as its temporary file is left alone; never raises."""
    try:
        if name.endswith(TRASH):
            remove_tree_at(dir_fd, name)
            return 1, 0
        _, over, tag = name.rpartition(OVER)
        inode, dot, changed = tag.partition(".")
        if over and dot and _is_hex(inode) and _is_hex(changed):
            return _finish_move(dir_fd, name, int(inode, 16), int(changed, 16))
    except OSError:
        pass  # vanished, or cannot be removed: left for the next open
    return 0, 0


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def _finish_move(dir_fd: int, name: str, old: int, changed: int) -> tuple[int, int]:
    """A move over the directory of inode ``old`` (change time ``changed``) killed part way (see the module
    docstring). Inside the hidden directory an inode tells the old tree from the source: both live until the end."""
    fd = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        held = os.listdir(fd)
        if len(held) > 1:
            return 0, 0  # not what a move leaves: nothing of it is touched
        moved = 0
        if held and not _is_old(fd, held[0], old):  # the source, not yet in place: complete its move
            if not stat.S_ISDIR(os.stat(held[0], dir_fd=fd, follow_symlinks=False).st_mode):
                return 0, 0  # what a source's name held when it was no directory (it could not go back): kept
            if not _put_in_place(fd, held[0], dir_fd, (old, changed)):
                return 0, 0
            moved = 1
        if held:
            with contextlib.suppress(FileNotFoundError):  # gone if the target had gone: renamed, nothing taken out
                remove_tree_at(fd, held[0])
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
    return 1, moved


def _put_in_place(fd: int, name: str, dir_fd: int, old: tuple[int, int]) -> bool:
    """Give the source (entry ``name`` of ``fd``) the target's name ``name`` in ``dir_fd``: renamed if the target
    went, else exchanged with it if it still is the old tree untouched (``old``: inode and change time); anything
    else stays where it is."""
    try:
        if renameat_noreplace(fd, name, dir_fd, name):
            return True
    except FileExistsError:
        pass
    target = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(target.st_mode) or (target.st_ino, target.st_ctime_ns) != old:
        return False  # changed since, or another entry: not ours to replace
    if renameat_exchange(fd, name, name, dir_fd):
        if _is_old(fd, name, old[0]):
            return True
        renameat_exchange(fd, name, name, dir_fd)  # another entry took the target's name since: it goes back
    return False


def _is_old(fd: int, name: str, old: int) -> bool:
    """Whether entry ``name`` of ``fd`` is the directory of inode ``old`` (the tree a move replaced)."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_ino == old
