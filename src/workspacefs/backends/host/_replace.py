"""A directory replaced by another tree in one exchange: ``move``/``copy`` over a directory on a host.

The new tree waits under a hidden directory beside the target (``_trash.py``), then ``renameat2(RENAME_EXCHANGE)``
swaps it with the target, which so goes straight into hiding, and is removed there. At every instant the target's
name holds its whole old tree or the whole new one; a killed writer's hidden directory is finished by the next open
(the reaper: a copy's removed, a move's completed). What an exchange takes out of the target is looked at: a file,
link, FIFO or device swapped in since the caller's look is exchanged back and refused, never replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from workspacefs import errors
from workspacefs._hostio import DIR_FLAGS, host_error, remove_tree_at, renameat_exchange, renameat_noreplace
from workspacefs.backends.host._temps import _EXCHANGES, WriterRegistry, release_name
from workspacefs.backends.host._trash import TRASH, over_name
from workspacefs.backends.host._tree import fail
from workspacefs.errors import ConcurrentChangeError, SpecialFileError

__all__ = ["drop_empty", "exchange_over", "make_trash", "move_tree_over", "refuse_unless_directory", "remove_hidden"]


def refuse_unless_directory(info: os.stat_result, path: str) -> None:
    """Refuse to replace a tree at what is not a directory: a file, a symlink, a FIFO, socket or device."""
    if stat.S_ISDIR(info.st_mode):
        return
    if stat.S_ISREG(info.st_mode):
        raise errors.not_a_directory(path)
    if stat.S_ISLNK(info.st_mode):
        raise host_error(errno.ELOOP, path)
    raise SpecialFileError(path)


def make_trash(dir_fd: int, path: str, writers: WriterRegistry) -> str:
    """A new hidden ``.trash`` directory in ``dir_fd`` (beside ``path``), reserved until :func:`remove_hidden`."""

    def make(stem: str) -> str:
        os.mkdir(stem + TRASH, 0o700, dir_fd=dir_fd)
        return stem + TRASH

    try:
        return writers.reserve(make)[1]
    except OSError as exc:
        raise fail(exc, path) from None


def remove_hidden(dir_fd: int, name: str) -> None:
    """Remove hidden directory ``name`` and what it holds, and release its reservation. If it cannot be removed,
    it stays reserved, so this process stays registered and the reaper removes it once the process is gone."""
    try:
        if not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            return  # what an exchange back could not return (a FIFO: rmtree would open it and wait): kept hidden
        remove_tree_at(dir_fd, name)
    except FileNotFoundError:
        pass
    except OSError:
        return  # hidden: the move or copy stands; left for the reaper
    release_name()


def exchange_over(fd: int, name: str, dst_fd: int, dst: str, path: str) -> bool | None:
    """Exchange the new tree (entry ``name`` of ``fd``) with the directory ``dst`` of ``dst_fd``: ``True`` done, the
    old tree now at ``name``; ``False`` done, the target had gone (renamed, nothing taken out); ``None`` where the
    system cannot exchange (nothing changed). A non-directory found at the target is exchanged back and refused;
    a system call's failure is the public error for ``path`` (``EBUSY``: a mount point, …)."""
    try:
        return _exchange_over(fd, name, dst_fd, dst, path)
    except OSError as exc:
        if exc.filename is None:
            raise fail(exc, path) from None
        raise


def _exchange_over(fd: int, name: str, dst_fd: int, dst: str, path: str) -> bool | None:
    """:func:`exchange_over`, its system calls' errors as raised."""
    for _ in range(_EXCHANGES):
        exchanged = renameat_exchange(fd, name, dst, dst_fd)
        if exchanged is None:
            return None
        if exchanged:
            break
        try:  # the target went: take its name without replacing
            if renameat_noreplace(fd, name, dst_fd, dst):
                return False
        except FileExistsError:
            continue  # something came back at the target meanwhile: exchange again
        return None
    else:
        raise ConcurrentChangeError(path, "The target kept being replaced and removed while it was replaced")
    try:
        taken = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False  # removed by someone else meanwhile: nothing left to remove
    if not stat.S_ISDIR(taken.st_mode):
        renameat_exchange(fd, name, dst, dst_fd)  # put it back where it was
        refuse_unless_directory(taken, path)
    return True


def move_tree_over(
    src_fd: int, src: str, dst_fd: int, dst: str, *, src_path: str, path: str, writers: WriterRegistry
) -> bool:
    """Move directory ``src`` of ``src_fd`` over directory ``dst`` of ``dst_fd`` (``src_path``, ``path``: their
    workspace paths). The source goes first into a hidden ``.over.<inode>.<ctime>`` directory beside the target,
    under the target's name, which is then exchanged with the target. ``False`` where the system cannot rename
    without replacing or exchange: nothing was changed (the caller falls back to removing, then renaming).

    A kill leaves: before the source is taken aside, nothing changed; after, the source hidden and the target
    whole (the next open completes the move); after the exchange, the move done and the old tree hidden (removed
    by the next open)."""
    try:
        target = os.stat(dst, dir_fd=dst_fd, follow_symlinks=False)
    except OSError as exc:
        raise fail(exc, path) from None
    refuse_unless_directory(target, path)

    def make(stem: str) -> str:
        os.mkdir(over_name(stem, target), 0o700, dir_fd=dst_fd)
        return over_name(stem, target)

    try:
        aside = writers.reserve(make)[1]
    except OSError as exc:
        raise fail(exc, path) from None
    try:
        aside_fd = os.open(aside, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dst_fd)
    except OSError as exc:
        drop_empty(dst_fd, aside)
        raise fail(exc, path) from None
    try:
        return _move_through(aside_fd, aside, src_fd, src, dst_fd=dst_fd, dst=dst, src_path=src_path, path=path)
    finally:
        os.close(aside_fd)


def _move_through(
    aside_fd: int, aside: str, src_fd: int, src: str, *, dst_fd: int, dst: str, src_path: str, path: str
) -> bool:
    """:func:`move_tree_over` once its hidden directory ``aside`` is made and open: take the source aside, then
    exchange it with the target; ``False`` where it cannot (nothing changed: the caller takes the two steps)."""
    try:
        taken = _take_source(src_fd, src, aside_fd, dst, src_path)
    except PermissionError as exc:
        drop_empty(dst_fd, aside)
        if _not_ours(exc) and os.path.samestat(os.fstat(src_fd), os.fstat(dst_fd)):
            return False  # the two steps rename it in its own directory, which needs no write on it
        raise
    except BaseException:
        drop_empty(dst_fd, aside)
        raise
    if not taken:
        drop_empty(dst_fd, aside)
        return False
    try:
        exchanged = exchange_over(aside_fd, dst, dst_fd, dst, path)
    except BaseException:
        _give_back(aside_fd, dst, src_fd, src, dst_fd=dst_fd, aside=aside)
        raise
    if exchanged is None:
        if not _give_back(aside_fd, dst, src_fd, src, dst_fd=dst_fd, aside=aside):
            raise ConcurrentChangeError(src_path, "The source's name was taken while it was moved")
        return False
    _remove_old(aside_fd, dst, dst_fd, aside)
    return True


def drop_empty(dst_fd: int, aside: str) -> None:
    """Remove the hidden directory if it is empty, and release it; else (what the source's name held, which could
    not go back) it stays, reserved, and never removed: the reaper completes only a directory's move."""
    try:
        os.rmdir(aside, dir_fd=dst_fd)
    except OSError:
        return
    release_name()


def _remove_old(aside_fd: int, name: str, dst_fd: int, aside: str) -> None:
    """Remove the old tree (entry ``name`` of the hidden directory, if the target had not gone), then the hidden
    directory, by the descriptor already open (a walk of one directory less than :func:`remove_hidden`)."""
    try:
        with contextlib.suppress(FileNotFoundError):
            remove_tree_at(aside_fd, name)
        os.rmdir(aside, dir_fd=dst_fd)
    except OSError:
        return  # hidden: the move stands; left reserved for the reaper
    release_name()


def _take_source(src_fd: int, src: str, aside_fd: int, name: str, src_path: str) -> bool:
    """Rename the source to ``name`` in the hidden directory; ``False`` where the system cannot rename without
    replacing. A source that is no directory now (swapped since the caller's look) goes back, refused."""
    try:
        if not renameat_noreplace(src_fd, src, aside_fd, name):
            return False
    except OSError as exc:
        raise fail(exc, src_path) from None
    moved = os.stat(name, dir_fd=aside_fd, follow_symlinks=False)
    if not stat.S_ISDIR(moved.st_mode):
        with contextlib.suppress(OSError):  # if the name was taken again since, it stays hidden: never removed
            renameat_noreplace(aside_fd, name, src_fd, src)
        raise ConcurrentChangeError(src_path, "The source was replaced while it was moved")
    return True


def _give_back(aside_fd: int, name: str, src_fd: int, src: str, *, dst_fd: int, aside: str) -> bool:
    """The move did not happen: the source goes back to its name, and the hidden directory goes (``True``). If the
    source's name was taken meanwhile, both stay hidden, reserved, for the reaper to complete the move."""
    try:
        if not stat.S_ISDIR(os.stat(name, dir_fd=aside_fd, follow_symlinks=False).st_mode):
            return False  # an exchange back that failed left another entry here: nothing of it is touched
        if not renameat_noreplace(aside_fd, name, src_fd, src):
            return False
        os.rmdir(aside, dir_fd=dst_fd)
    except OSError:
        return False
    release_name()
    return True


def _not_ours(exc: PermissionError) -> bool:
    """Whether the refusal is the system's (``EACCES``/``EPERM``: a directory that cannot be given another parent
    without write permission on it, as one of a rootless container's user), not one of ours by type."""
    return type(exc) is PermissionError and exc.errno in (errno.EACCES, errno.EPERM)
