"""Adversarial review of the host write path and journal (linkat first, ``AT_EMPTY_PATH`` naming, kept content):
what an unprivileged process meets that a root test run never does. Each case runs in a forked child that has
dropped to an unprivileged user, on a real directory; the child reports back through a pipe."""

from __future__ import annotations

import codecs
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from workspacefs import HostFilesystem
from workspacefs.errors import UndoContentNotKeptError
from workspacefs.history import NOT_KEPT

NOBODY = 65534


def as_nobody(work: Callable[[], object]) -> object:
    """``work()``'s result (or the exception it raised), run in a forked child as an unprivileged user."""
    return as_user(NOBODY, work)


def as_user(uid: int, work: Callable[[], object]) -> object:
    """``work()``'s result (or the exception it raised), run in a forked child as the unprivileged ``uid``."""
    codecs.lookup("ascii")  # the child may not read the interpreter's files once it is another user: load them now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            result: object = work()
        except BaseException as exc:  # reported to the parent, which asserts on it
            result = exc
        try:
            data = pickle.dumps(result)
        except Exception:  # an exception that does not pickle: its text
            data = pickle.dumps(RuntimeError(repr(result)))
        with os.fdopen(write, "wb") as pipe:
            pipe.write(data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)  # our own child's report


def nobody_root(base: Path) -> Path:
    """A workspace root the unprivileged user owns (reached by the filesystem's descriptor, not by name)."""
    root = base / "root"
    root.mkdir()
    os.chown(root, NOBODY, NOBODY)
    return root


def test_a_stream_committed_after_the_credentials_changed_is_still_named(tmp_path: Path) -> None:
    """``linkat(AT_EMPTY_PATH)`` names a file only for the credentials that opened it (Linux 6.10+, without
    ``CAP_DAC_READ_SEARCH``): a stream opened before a ``setuid``/``setgid``/``setgroups`` (a new set of
    credentials, even for the same ids) and committed after must fall back to ``/proc``, not fail."""
    fs = HostFilesystem(nobody_root(tmp_path), snapshot_dir=tmp_path / "snapshots", history=False)

    def work() -> object:
        fs.write("first.txt", "names the first file: the process learns that AT_EMPTY_PATH works")
        with fs.open_write("second.txt") as writer:
            writer.write(b"opened before, committed after new credentials")
            os.setuid(NOBODY)  # the same user, a new set of credentials (as any set*id call makes)
        return fs.read("second.txt").content

    try:
        assert as_nobody(work) == "opened before, committed after new credentials"
    finally:
        fs.close()


@pytest.mark.parametrize("how", ["whole", "stream"])
def test_overwriting_a_file_the_writer_cannot_read_is_journaled_as_not_kept(how: str) -> None:
    """A write over a file it may replace but not read (mode 0200) keeps nothing for undo: the entry must say
    so (``NOT_KEPT``: undo refuses), not that the file was created (undo would delete what the write left)."""
    base = Path(tempfile.mkdtemp(prefix="wsfs-review-host-"))  # in the system's /tmp: every user may pass through
    try:
        os.chmod(base, 0o755)
        os.chown(base, NOBODY, NOBODY)
        root = nobody_root(base)
        secret = root / "secret.txt"
        secret.write_text("held before, unreadable to its writer")
        os.chown(secret, NOBODY, NOBODY)
        secret.chmod(0o200)

        def work() -> object:
            os.environ["XDG_CACHE_HOME"] = str(base / "cache")  # the caller's cache is not this user's
            fs = HostFilesystem(root, snapshot_dir=base / "snapshots")
            try:
                if how == "whole":
                    fs.write("secret.txt", "new")
                else:
                    with fs.open_write("secret.txt") as writer:
                        writer.write(b"new")
                (entry,) = fs.history(path="secret.txt")
                secret.chmod(0o600)  # readable now: an undo could delete the file if the entry said "created"
                try:
                    fs.undo(entry.entry_id)
                    undo = "undone"
                except UndoContentNotKeptError:
                    undo = "refused: not kept"
                return entry.changes[0].before, undo, secret.read_text() if secret.exists() else None
            finally:
                fs.close()

        assert as_nobody(work) == (NOT_KEPT, "refused: not kept", "new")
    finally:
        shutil.rmtree(base, ignore_errors=True)
