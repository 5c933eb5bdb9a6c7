"""A directory tree taken out of the user's view in one step: ``delete(path, recursive=True)`` on a host.

The tree is renamed (``renameat2(RENAME_NOREPLACE)``), under its own name, into a fresh hidden ``.trash``
directory beside it (``_trash.py``), then removed there. A kill before the rename leaves it untouched; after it,
the tree is gone from view and the next open (the reaper) removes what is left. A tree with a directory this
process may not list or change is refused before the rename (``EACCES``), untouched; a removal that fails part way
all the same (an immutable file, a sticky directory, a race) puts back what is left and raises, as the removal in
place did.
"""

from __future__ import annotations

import contextlib
import errno
import os

from workspacefs._hostio import DIR_FLAGS, host_error, remove_tree_at, renameat_noreplace
from workspacefs.backends.host._replace import drop_empty, make_trash
from workspacefs.backends.host._temps import WriterRegistry, release_name
from workspacefs.backends.host._tree import fail
from workspacefs.errors import DirectoryNotEmptyError

__all__ = ["remove_tree"]

_GREW = (
    "Directory not empty: entries were added to it while it was being deleted; what is left is in place, delete again"
)
"""The reason a recursive delete gives when another process added entries meanwhile (see :func:`_removal_failed`)."""
_REMOVABLE = os.R_OK | os.W_OK | os.X_OK
"""What removing a directory's entries takes: listing it, and changing it."""
_DAC_OVERRIDE = 1 << 1
"""``CAP_DAC_OVERRIDE``'s bit in ``CapEff``: a process that has it may list and change any directory."""
_OVERRIDES: dict[int, bool] = {}
"""Per effective user id, whether this process had ``CAP_DAC_OVERRIDE`` (a ``setuid`` away from root drops it)."""


def remove_tree(dir_fd: int, name: str, path: str, writers: WriterRegistry) -> None:
    """Remove directory ``name`` of ``dir_fd`` (workspace path ``path``) and all below it, out of view in one
    rename (see the module docstring); removed in place where the system cannot rename without replacing."""
    refuse_unremovable(dir_fd, name, path)
    aside = make_trash(dir_fd, path, writers)
    try:
        aside_fd = os.open(aside, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        drop_empty(dir_fd, aside)
        raise fail(exc, path) from None
    try:
        try:
            moved = renameat_noreplace(dir_fd, name, aside_fd, name)
        except OSError as exc:
            drop_empty(dir_fd, aside)
            raise fail(exc, path) from None
        if not moved:
            drop_empty(dir_fd, aside)
            _remove_in_place(dir_fd, name, path)
            return
        try:
            remove_tree_at(aside_fd, name)
        except OSError as exc:
            _put_back(aside_fd, name, dir_fd, aside)
            raise _removal_failed(exc, path) from None
    finally:
        os.close(aside_fd)
    try:
        os.rmdir(aside, dir_fd=dir_fd)
    except OSError:
        return  # the tree is gone from view; its empty hidden directory stays reserved, for the reaper
    release_name()


def refuse_unremovable(dir_fd: int, name: str, path: str) -> None:
    """Raise ``EACCES`` naming the first directory of the tree ``name`` of ``dir_fd`` that this process may not
    list or change (``faccessat`` with the effective ids: a read-only filesystem is ``EROFS``); else nothing.
    Nothing to look at for a process that may change any directory (the rename reports a read-only filesystem)."""
    if _overrides_permissions():
        return
    try:
        fd = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        raise fail(exc, path) from None
    try:
        _refuse_below(fd, path)
    finally:
        os.close(fd)


def _overrides_permissions() -> bool:
    """Whether this process has ``CAP_DAC_OVERRIDE`` (read once per effective user id; ``False`` if unknown)."""
    euid = os.geteuid()
    known = _OVERRIDES.get(euid)
    if known is None:
        known = False
        with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    known = bool(int(line.split()[1], 16) & _DAC_OVERRIDE)
        _OVERRIDES[euid] = known
    return known


def _refuse_below(fd: int, path: str) -> None:
    """:func:`refuse_unremovable` for the open directory ``fd`` (workspace path ``path``, left open). Iterative, one
    descriptor a level, so a tree of any depth is looked at (recursion raised ``RecursionError`` past ~1000 levels)."""
    pending = [(fd, path, _subdirectories(fd, path))]  # (fd, its path, subdirectories left in listing order)
    try:
        while pending:
            at, where, left = pending[-1]
            if not left:
                pending.pop()
                if at != fd:
                    os.close(at)
                continue
            sub = f"{where}/{left[-1]}"
            try:
                child = os.open(left.pop(), DIR_FLAGS | os.O_NOFOLLOW, dir_fd=at)
            except FileNotFoundError:
                continue  # removed meanwhile
            except OSError as exc:
                raise fail(exc, sub) from None
            pending.append((child, sub, []))  # closed on error from here
            pending[-1] = (child, sub, _subdirectories(child, sub))
    finally:
        for at, _, _ in pending:
            if at != fd:
                os.close(at)


def _subdirectories(fd: int, path: str) -> list[str]:
    """The subdirectories of the open directory ``fd`` (workspace path ``path``), last listed first; ``EACCES`` if
    this process may not list or change it."""
    if not os.access(".", _REMOVABLE, dir_fd=fd, effective_ids=True):
        raise host_error(errno.EACCES, path)
    try:
        with os.scandir(fd) as listing:
            below = [entry.name for entry in listing if entry.is_dir(follow_symlinks=False)]
    except OSError as exc:
        raise fail(exc, path) from None
    below.reverse()  # popped from the end: looked at in listing order, as the recursion did
    return below


def _remove_in_place(dir_fd: int, name: str, path: str) -> None:
    """Where the system cannot rename without replacing: the tree removed where it is."""
    try:
        remove_tree_at(dir_fd, name)  # by descriptor, opening nothing but directories
    except OSError as exc:
        raise _removal_failed(exc, path) from None


def _removal_failed(exc: OSError, path: str) -> OSError:
    """The public error for a recursive removal of ``path`` that failed part way. ``ENOTEMPTY`` there means another
    process added entries meanwhile: the plain error's advice ("pass recursive=True") was what the caller did."""
    if exc.errno == errno.ENOTEMPTY:
        return DirectoryNotEmptyError(path, _GREW)
    return fail(exc, path)


def _put_back(aside_fd: int, name: str, dir_fd: int, aside: str) -> None:
    """A removal failed part way: what is left of the tree goes back to its name, and the hidden directory goes.
    If the name was taken meanwhile, it stays hidden, reserved, and the reaper removes it once we are gone."""
    with contextlib.suppress(OSError):
        if renameat_noreplace(aside_fd, name, dir_fd, name):
            drop_empty(dir_fd, aside)
