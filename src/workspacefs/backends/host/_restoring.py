"""A host restore that a crash cut short is finished by the next open of the workspace.

A restore changes many names, each atomically, so a process killed part way left some files as the snapshot holds
them and the rest as they were, for good. Now, before it changes anything, a restore writes a record beside the
snapshots (``<snapshot_dir>/restoring/<root key>.json``: the snapshot, and what each path it will change held, for
the journal) and keeps an exclusive lock on it while it runs; it removes the record when it returns, also with an
error (the caller was told). A record that nobody holds belongs to a restorer that died: the next open that may
write restores that snapshot again, which changes only what still differs, and journals it as one entry whose
"before" is the record's (what the paths held before the first attempt, kept for undo then).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RestoreRecord", "Unfinished"]

Seen = tuple[str | None, int]
"""What a path held before the restore (as ``_history.Seen``: content id, ``"directory"`` or ``None``; size)."""


@dataclass(frozen=True, slots=True)
class Unfinished:
    """A restore whose process died, claimed by this one (its record locked until :meth:`RestoreRecord.done`)."""

    fd: int
    snapshot_id: uuid.UUID
    before: dict[str, Seen]


class RestoreRecord:
    """The record of one root's restore in progress (see the module docstring)."""

    def __init__(self, directory: Path, root_key: str, *, durable: bool) -> None:
        self.path = directory / "restoring" / f"{root_key}.json"
        self._turn = directory / "roots" / f"{root_key}.restoring.lock"
        self._durable = durable

    @contextlib.contextmanager
    def held(self, snapshot_id: uuid.UUID, before: Mapping[str, Seen]) -> Iterator[None]:
        """Keep the record, locked, while the block restores ``snapshot_id``; remove it when the block ends. One
        restore of a root at a time (another process's waits): a second one replaced the first's record, so the
        first, killed, was never finished, and the second, killed, was finished by an open while the first ran."""
        self._turn.parent.mkdir(parents=True, exist_ok=True)
        turn = os.open(self._turn, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(turn, fcntl.LOCK_EX)
            with self._recorded(snapshot_id, before):
                yield
        finally:
            os.close(turn)

    @contextlib.contextmanager
    def _recorded(self, snapshot_id: uuid.UUID, before: Mapping[str, Seen]) -> Iterator[None]:
        """The record of the block's restore, written (locked before its name is visible) and removed after."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # before the name is visible: no open finds it unheld
            body = {"snapshot": str(snapshot_id), "before": {path: list(seen) for path, seen in before.items()}}
            data = memoryview(json.dumps(body).encode())
            while data:  # a short write (a full disk raises; a signal may cut one) must not leave half a record
                data = data[os.write(fd, data) :]
            if self._durable:
                os.fsync(fd)
            os.replace(temp, self.path)
            if self._durable:
                _sync_directory(self.path.parent)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        try:
            yield
        finally:
            self.done(fd)

    def unfinished(self) -> Unfinished | None:
        """The record of a restore whose process died, claimed; ``None`` if there is none, its restorer still runs,
        or another open claimed it. A record that cannot be read is removed (nothing could finish it)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO: no wait
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            info = os.fstat(fd)
            if not info.st_nlink or not stat.S_ISREG(info.st_mode):  # removed meanwhile, or no record at all
                os.close(fd)
                return None
            with os.fdopen(os.dup(fd), "rb") as handle:
                body = json.loads(handle.read())
            before = {str(path): (seen[0], int(seen[1])) for path, seen in body["before"].items()}
            return Unfinished(fd, uuid.UUID(body["snapshot"]), before)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            return None  # its restorer runs (or another open finishes it)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            self.done(fd)
            return None

    def done(self, fd: int) -> None:
        """Remove the record held through ``fd``, then let it go."""
        try:
            with contextlib.suppress(FileNotFoundError):
                if os.fstat(fd).st_ino == os.stat(self.path, follow_symlinks=False).st_ino:
                    os.unlink(self.path)  # only our own record (restores of a root take turns: none replaced it)
        finally:
            os.close(fd)


def _sync_directory(directory: Path) -> None:
    """Make a rename into ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
