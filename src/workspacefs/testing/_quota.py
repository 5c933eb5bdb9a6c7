"""Quotas: every path that adds content is held to the limits, and a refusal leaves nothing half-written."""

from __future__ import annotations

import contextlib
import linecache
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import Any, cast

import pytest

from workspacefs.backends._quota import QuotaMixin
from workspacefs.errors import FileTooLargeError, QuotaExceededError
from workspacefs.protocol import ConditionalWrites, Filesystem, SnapshotableFilesystem
from workspacefs.quota import Quota, Usage
from workspacefs.testing._base import SuiteBase, finishes

__all__ = ["QuotaSuite"]

_WRITERS = 10
_ROUNDS = 40
_SIZE = 30
_LIMIT = 100  # room for three writers of _SIZE bytes, never four


@contextmanager
def _switching_often() -> Iterator[None]:
    """Threads switch every microsecond, so a check and its change are interleaved with other writers'."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@contextmanager
def _interrupting(codes: tuple[CodeType, ...], at: int) -> Iterator[list[bool]]:
    """Raise ``KeyboardInterrupt`` (as Ctrl-C would, between two statements) at the ``at``-th line run, in this
    thread, of the functions whose code is ``codes``; yields ``[fired]``. A ``with`` line is passed over: an
    exception raised there as the block exits skips the context manager's own ``__exit__`` (a lock stays held),
    which no code can guard against."""
    fired = [False]
    seen = 0

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal seen
        if event == "line" and not fired[0]:
            if linecache.getline(frame.f_code.co_filename, frame.f_lineno).lstrip().startswith("with "):
                return local
            seen += 1
            if seen == at:
                fired[0] = True
                raise KeyboardInterrupt
        return local

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        return local if frame.f_code in codes else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        yield fired
    finally:
        sys.settrace(before)


def _race(writers: list[Callable[[], object]]) -> list[BaseException | None]:
    """Run every writer at once (lined up by a barrier); what each raised (``None``: it succeeded)."""
    barrier = threading.Barrier(len(writers))
    outcome: list[BaseException | None] = [None] * len(writers)

    def run(index: int) -> None:
        barrier.wait()
        try:
            writers[index]()
        except (QuotaExceededError, FileTooLargeError) as exc:
            outcome[index] = exc

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


class QuotaSuite(SuiteBase):
    """Implement :meth:`create_filesystem_with_quota` (the backend's ``quota=`` argument)."""

    def create_filesystem_with_quota(self, quota: Quota) -> Filesystem:
        """Return a new, empty filesystem that enforces ``quota``."""
        raise NotImplementedError("a QuotaSuite subclass must implement create_filesystem_with_quota()")

    def limited(self, **limits: int) -> Filesystem:
        fs = self.create_filesystem_with_quota(Quota(**limits))
        self._opened.append(fs)
        return fs

    @staticmethod
    def usage(fs: Filesystem) -> Usage:
        result: Usage = cast(Any, fs).usage()  # every backend built on BaseFilesystem reports it
        return result

    def test_a_file_past_the_largest_allowed_is_refused_and_the_old_content_stays(self) -> None:
        fs = self.limited(max_file_bytes=10)
        fs.write_bytes("a.bin", b"0123456789")  # exactly the limit is allowed
        with pytest.raises(FileTooLargeError):
            fs.write_bytes("a.bin", b"0123456789x")
        with pytest.raises(FileTooLargeError):
            fs.write_bytes("a.bin", b"x", mode="append")
        with pytest.raises(FileTooLargeError):
            fs.write_bytes("new.bin", b"x" * 11)
        assert fs.read_bytes("a.bin").content == b"0123456789" and not fs.exists("new.bin")

    def test_the_workspace_total_is_held_and_shrinking_is_always_allowed(self) -> None:
        fs = self.limited(max_bytes=100)
        fs.write_bytes("a.bin", b"a" * 60)
        fs.write_bytes("b.bin", b"b" * 40)  # exactly full
        with pytest.raises(QuotaExceededError) as raised:
            fs.write_bytes("c.bin", b"c")
        assert not isinstance(raised.value, FileTooLargeError) and not fs.exists("c.bin")
        with pytest.raises(QuotaExceededError):
            fs.write_bytes("a.bin", b"a" * 61)
        fs.write_bytes("a.bin", b"a" * 10)  # shrinking frees room
        fs.write_bytes("c.bin", b"c" * 50)
        fs.delete("b.bin")
        fs.write_bytes("d.bin", b"d" * 40)
        assert self.usage(fs) == Usage(100, 3)

    def test_a_stream_past_the_quota_fails_mid_stream_and_leaves_the_old_content(self) -> None:
        fs = self.limited(max_bytes=1000, max_file_bytes=600)
        fs.write_bytes("kept.bin", b"k" * 300)
        with pytest.raises(FileTooLargeError), fs.open_write("kept.bin") as writer:
            for _ in range(10):
                writer.write(b"x" * 100)
        assert fs.read_bytes("kept.bin").content == b"k" * 300
        fs.write_bytes("other.bin", b"o" * 500)
        with pytest.raises(QuotaExceededError), fs.open_write("fresh.bin", mode="create") as writer:
            writer.write(b"y" * 150)
            writer.write(b"y" * 150)
        assert not fs.exists("fresh.bin") and self.usage(fs) == Usage(800, 2)
        with pytest.raises(QuotaExceededError), fs.open_write("kept.bin", mode="append") as writer:
            writer.write(b"z" * 250)
        assert fs.read_bytes("kept.bin").content == b"k" * 300

    def test_the_file_count_is_held_and_overwriting_is_not_a_new_file(self) -> None:
        fs = self.limited(max_files=2)
        fs.write("a.txt", "a")
        fs.write("dir/b.txt", "b")
        fs.write("a.txt", "again")
        with pytest.raises(QuotaExceededError):
            fs.write("c.txt", "c")
        with pytest.raises(QuotaExceededError), fs.open_write("d.txt") as writer:
            writer.write(b"d")
        fs.mkdir("empty/dirs/are/free")
        assert not fs.exists("c.txt") and not fs.exists("d.txt") and self.usage(fs).files == 2

    def test_a_copy_that_would_pass_the_quota_copies_nothing(self) -> None:
        fs = self.limited(max_bytes=100, max_files=10)
        fs.write_bytes("src/a.bin", b"a" * 30)
        fs.write_bytes("src/sub/b.bin", b"b" * 30)
        with pytest.raises(QuotaExceededError):
            fs.copy("src", "copy")
        assert not fs.exists("copy")
        fs.copy("src/a.bin", "one.bin")
        fs.write_bytes("small.bin", b"s" * 5)
        fs.copy("small.bin", "one.bin", overwrite=True)  # replacing frees what it replaces
        fs.move("src", "moved")  # a move adds nothing
        assert self.usage(fs) == Usage(70, 4)

    def test_conditional_writes_are_held_too(self) -> None:
        fs = self.limited(max_file_bytes=8)
        if not fs.capabilities.conditional_writes:
            pytest.fail("every backend offers conditional writes")
        fs.write_bytes("a.bin", b"1234")
        editor = cast(ConditionalWrites, fs)
        version = editor.content_id("a.bin")
        with pytest.raises(FileTooLargeError):
            editor.write_bytes_if("a.bin", b"123456789", expect=version)
        with pytest.raises(FileTooLargeError), editor.open_write_if("a.bin", expect=version) as writer:
            writer.write(b"123456789")
        assert fs.read_bytes("a.bin").content == b"1234"

    def test_usage_is_counted_again_after_a_restore(self) -> None:
        fs = self.limited(max_bytes=100)
        if not fs.capabilities.snapshots:
            pytest.fail("every backend can snapshot")
        snapshots = cast(SnapshotableFilesystem, fs)
        fs.write_bytes("a.bin", b"a" * 80)
        taken = snapshots.snapshot()
        fs.delete("a.bin")
        fs.write_bytes("b.bin", b"b" * 90)
        snapshots.restore(taken)
        assert self.usage(fs) == Usage(80, 1)
        with pytest.raises(QuotaExceededError):
            fs.write_bytes("c.bin", b"c" * 21)

    def test_a_restore_that_would_pass_the_quota_changes_nothing(self) -> None:
        """A merge's result can hold more than either side: restoring it is held to the quota like a write."""
        fs = self.limited(max_bytes=100)
        if not fs.capabilities.merge:
            return
        merging: Any = fs
        base = merging.snapshot()
        fs.write_bytes("a.bin", b"a" * 80)
        ours = merging.snapshot()
        fs.delete("a.bin")
        fs.write_bytes("b.bin", b"b" * 90)
        theirs = merging.snapshot()
        result = merging.merge(base, ours, theirs)
        assert not result.conflicts
        with pytest.raises(QuotaExceededError):
            merging.restore(result.snapshot)
        assert not fs.exists("a.bin") and fs.read_bytes("b.bin").content == b"b" * 90
        assert self.usage(fs) == Usage(90, 1)
        merging.restore(ours)  # within the quota: allowed
        assert self.usage(fs) == Usage(80, 1)

    def test_concurrent_writers_never_pass_the_quota_together(self) -> None:
        """A model issuing parallel tool calls: writers checked at once must not all be admitted. Each round
        ten writers (whole writes and streams) race for room for three; the files that landed, and usage, stay
        within the limit, and every refused writer left nothing."""
        fs = self.limited(max_bytes=_LIMIT)

        def whole(path: str) -> Callable[[], object]:
            return lambda: fs.write_bytes(path, b"w" * _SIZE)

        def streamed(path: str) -> Callable[[], object]:
            def write() -> None:
                with fs.open_write(path) as writer:
                    writer.write(b"s" * _SIZE)

            return write

        def round_of_writers(number: int) -> None:
            paths = [f"r{number}/f{index}.bin" for index in range(_WRITERS)]
            fs.mkdir(f"r{number}")
            outcome = _race([(whole if index % 2 else streamed)(path) for index, path in enumerate(paths)])
            landed = {path for path in paths if fs.exists(path)}
            assert landed == {path for path, failed in zip(paths, outcome, strict=True) if failed is None}
            assert 1 <= len(landed) <= _LIMIT // _SIZE, f"round {number}: {len(landed)} writers of {_SIZE} bytes"
            assert sum(fs.stat(path).size_bytes for path in landed) <= _LIMIT
            assert self.usage(fs).bytes <= _LIMIT
            fs.delete(f"r{number}", recursive=True)

        with _switching_often():
            for number in range(_ROUNDS):
                finishes(lambda number=number: round_of_writers(number))  # type: ignore[misc]
        assert self.usage(fs) == Usage(0, 0)

    def test_an_interrupt_anywhere_in_a_quota_step_leaks_no_reservation(self) -> None:
        """A ``KeyboardInterrupt`` landing at any line of a change's admission (its check and reservation) or of
        its counting at the end leaves nothing reserved and usage right: the workspace can still be filled
        exactly to its limit, never past it."""
        codes = (QuotaMixin._admit.__code__, QuotaMixin._count.__code__)
        at = 1
        while True:
            fs = self.limited(max_bytes=100)
            with _interrupting(codes, at) as fired, contextlib.suppress(KeyboardInterrupt):
                fs.write_bytes("a.bin", b"a" * 60)
            if not fired[0]:
                break  # every line has had its interrupt
            written = 60 if fs.exists("a.bin") else 0
            assert self.usage(fs) == Usage(written, 1 if written else 0), f"interrupted at line {at}"
            fs.write_bytes("b.bin", b"b" * (100 - written))  # exactly full: refused if a reservation leaked
            at += 1
        assert at > 3  # the step's lines were reached

    def test_usage_without_a_quota_follows_every_change(self) -> None:
        """Without a quota nothing keeps a count current, so ``usage()`` is counted when asked (a host, object
        store or composite once kept its first answer for good)."""
        fs = self.make({"a.bin": b"a" * 10})
        assert self.usage(fs) == Usage(10, 1)
        fs.write_bytes("b.bin", b"b" * 5)
        assert self.usage(fs) == Usage(15, 2)
        fs.delete("a.bin")
        assert self.usage(fs) == Usage(5, 1)
