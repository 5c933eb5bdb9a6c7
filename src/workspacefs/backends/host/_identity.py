"""A host workspace's state outside its root belongs to the directory that made it, not to its path.

Snapshots, the journal and a restore's record are found by the root's path (by default under
``<cache>/workspacefs/snapshots/<root key>``). So a workspace deleted and another made at its path (a fresh
checkout, a temporary directory whose name comes round again, the next session's ``/srv/ws/1``) saw the first one's
history, undid into it, and listed and restored its snapshots: another workspace's files, in this one. Now each
root's identity (:func:`~workspacefs._hostio.directory_identity`: inode and birth time) is recorded beside its
state at the first open (``<snapshot_dir>/roots/<root key>``). An open that finds another identity there retires
the old state before anything reads it: the journal, the restore record and the snapshots' records move to
``<snapshot_dir>/retired/<id>/`` (kept, never shown to the new workspace) and the path leaves any fork family.
State from before identities were recorded is adopted: nothing tells whose it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from pathlib import Path

from workspacefs.snapshots import DirectorySnapshotStore

__all__ = ["claim_state"]


def claim_state(directory: Path, root: str, key: str, identity: str, snapshots: DirectorySnapshotStore) -> bool:
    """Make the state under ``directory`` of root ``root`` (real path; ``key`` its root key) that of the directory
    ``identity`` names, retiring what another directory at that path left; whether anything was retired."""
    roots = directory / "roots"
    record = roots / key
    with contextlib.suppress(FileNotFoundError):
        if _same(_read(record), identity, upgrade=False):  # the usual open: nothing to lock, write or retire
            return False
    roots.mkdir(exist_ok=True)
    lock = os.open(roots / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two opens of a new directory retire the old state once
        try:
            known: str | None = _read(record)
        except FileNotFoundError:
            known = None
        if known is not None and _same(known, identity, upgrade=False):
            return False
        retired = (
            known is not None and not _same(known, identity, upgrade=True) and _retire(directory, root, key, snapshots)
        )
        temp = roots / f".{key}.{uuid.uuid4().hex}"
        temp.write_text(identity, encoding="ascii")
        os.replace(temp, record)
        return retired
    finally:
        os.close(lock)


def _retire(directory: Path, root: str, key: str, snapshots: DirectorySnapshotStore) -> bool:
    """Move root ``root``'s journal, restore record and snapshot records aside; whether there were any."""
    aside = directory / "retired" / uuid.uuid4().hex
    moved = False
    for source, name in (
        (directory / "journals" / key, "journal"),
        (directory / "restoring" / f"{key}.json", "restore"),
    ):
        if os.path.lexists(source):
            aside.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                os.replace(source, aside / name)
                moved = True
    for snapshot in snapshots.list():
        if snapshot.root_path == root:
            moved = snapshots.set_aside(snapshot.snapshot_id, aside / "snapshots") or moved
    _leave_family(directory / "family", root)
    return moved


def _leave_family(family: Path, root: str) -> None:
    """Take ``root`` out of the fork family listed in ``family`` (the new directory forked from nothing)."""
    try:
        lines = family.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return
    if root not in lines:
        return
    temp = family.with_name(f".family.{uuid.uuid4().hex}")
    temp.write_text("".join(f"{line}\n" for line in lines if line != root), encoding="utf-8")
    os.replace(temp, family)


def _same(known: str, identity: str, *, upgrade: bool) -> bool:
    """Whether recorded ``known`` names the directory ``identity`` does. Where one side has no birth time (an open
    through a file system, kernel or libc that gives none) only inodes compare: a directory's own state is never
    retired for it. ``upgrade``: also when ``identity`` only adds the birth time (then worth recording)."""
    if known == identity:
        return True
    known_inode, known_born = known.partition(":")[::2]
    inode, born = identity.partition(":")[::2]
    return known_inode == inode and (not born or (upgrade and not known_born))


def _read(record: Path) -> str:
    """The identity a record holds (one small read; ``FileNotFoundError`` if there is none)."""
    fd = os.open(record, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        return os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
