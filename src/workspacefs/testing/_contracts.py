"""Conformance: declared capabilities, conditional writes, the typed errors, and the one tree walk."""

from __future__ import annotations

from typing import Any

import pytest

from workspacefs.capabilities import Capabilities
from workspacefs.errors import (
    ContentTooLargeError,
    DirectoryNotEmptyError,
    InvalidPathError,
    InvalidPatternError,
    MoveIntoSelfError,
    NameTooLongError,
    PathEscapeError,
    PathTooDeepError,
    PreconditionFailedError,
    ReadOnlyError,
    RootProtectedError,
)
from workspacefs.paths import MAX_CONVENIENCE_BYTES
from workspacefs.protocol import ConditionalWrites, Filesystem
from workspacefs.streams import content_id_of
from workspacefs.testing._base import SuiteBase

__all__ = ["CapabilitiesSuite", "ConditionalWritesSuite", "ErrorTypesSuite", "WalkSuite"]


class CapabilitiesSuite(SuiteBase):
    """``capabilities``: a frozen declaration that agrees with the protocols the backend speaks."""

    def test_capabilities_are_declared(self) -> None:
        fs = self.make()
        caps = fs.capabilities
        assert isinstance(caps, Capabilities)
        with pytest.raises(AttributeError):
            caps.snapshots = False  # type: ignore[misc]
        if caps.conditional_writes:
            assert isinstance(fs, ConditionalWrites)
        if caps.cheap_snapshots:
            assert caps.snapshots

    def test_file_flags_follow_the_declaration(self) -> None:
        fs: Any = self.make({"a.txt": "a"})
        if not fs.capabilities.file_read_only:
            with pytest.raises(NotImplementedError):
                fs.set_read_only("a.txt")
            return
        fs.set_read_only("a.txt")
        assert fs.stat("a.txt").read_only
        with pytest.raises(PermissionError):
            fs.write("a.txt", "b")
        fs.set_read_only("a.txt", False)
        fs.write("a.txt", "b")

    def test_a_copy_keeps_the_read_only_flag(self) -> None:
        """A single-file copy and a tree copy agree: the copy of a read-only file is read-only."""
        fs: Any = self.make({"a.txt": "a", "d/x.txt": "x", "c.txt": "old"})
        if not fs.capabilities.file_read_only:
            return
        fs.set_read_only("a.txt")
        fs.set_read_only("d/x.txt")
        fs.copy("a.txt", "b.txt")
        fs.copy("d", "e")
        fs.copy("a.txt", "c.txt", overwrite=True)
        assert [fs.stat(p).read_only for p in ("b.txt", "e/x.txt", "c.txt")] == [True, True, True]
        with pytest.raises(PermissionError):
            fs.write("b.txt", "b")
        if fs.capabilities.history:  # the flag is part of the copy's entry: undo puts the writable file back
            fs.undo(fs.history(limit=1)[0].entry_id)
            assert (fs.read("c.txt").content, fs.stat("c.txt").read_only) == ("old", False)


class ConditionalWritesSuite(SuiteBase):
    """``content_id``, ``open_versioned``, ``write_bytes_if`` and ``open_write_if`` (compare-and-set)."""

    def conditional(self, files: dict[str, str | bytes]) -> Any:
        """A filesystem holding ``files``; every backend of the suite offers conditional writes (DESIGN §8)."""
        fs = self.make(files)
        assert fs.capabilities.conditional_writes and isinstance(fs, ConditionalWrites)
        return fs

    def test_content_ids_name_content(self) -> None:
        fs = self.conditional({"a.txt": "same", "b.txt": "same", "c.txt": "other", "e.txt": ""})
        assert fs.content_id("a.txt") == fs.content_id("b.txt") == content_id_of(b"same")
        assert fs.content_id("c.txt") != fs.content_id("a.txt")
        assert fs.content_id("e.txt") == content_id_of(b"")
        with pytest.raises(FileNotFoundError):
            fs.content_id("missing.txt")
        fs.mkdir("d")
        with pytest.raises(IsADirectoryError):
            fs.content_id("d")

    def test_content_ids_of_large_files(self) -> None:
        data = bytes(range(256)) * 5000  # several fixed-size chunks and a partial one
        fs = self.conditional({"big.bin": data})
        assert fs.content_id("big.bin") == content_id_of(data)

    def test_write_only_over_the_expected_version(self) -> None:
        fs = self.conditional({"a.txt": "v1"})
        seen = fs.content_id("a.txt")
        fs.write_bytes_if("a.txt", b"v2", expect=seen)
        assert fs.read("a.txt").content == "v2"
        with pytest.raises(PreconditionFailedError):
            fs.write_bytes_if("a.txt", b"v3", expect=seen)  # stale: someone (we) changed it since
        assert fs.read("a.txt").content == "v2"
        fs.write_bytes_if("a.txt", b"v4", expect="*")
        assert fs.read("a.txt").content == "v4"
        with pytest.raises(PreconditionFailedError):
            fs.write_bytes_if("missing.txt", b"x", expect="*")
        assert not fs.exists("missing.txt")

    @pytest.mark.parametrize("target", ["nodir/x.txt", "x.txt", "d", "f.txt/x"])
    @pytest.mark.parametrize("expect", ["*", "0" * 64])
    def test_no_file_there_is_a_failed_precondition(self, target: str, expect: str) -> None:
        """A missing file, a missing parent, a directory or a file where a directory should be: one answer."""
        fs = self.conditional({"f.txt": "f"})
        fs.mkdir("d")
        with pytest.raises(PreconditionFailedError):
            fs.write_bytes_if(target, b"x", expect=expect)
        with pytest.raises(PreconditionFailedError):
            fs.open_write_if(target, expect=expect)
        assert self.tree(fs) == {"d": None, "f.txt": b"f"}

    def test_a_streamed_conditional_write_checks_again_at_commit(self) -> None:
        fs = self.conditional({"a.txt": "v1"})
        writer = fs.open_write_if("a.txt", expect=fs.content_id("a.txt"))
        writer.write(b"mine")
        fs.write("a.txt", "theirs")  # another writer wins the race
        with pytest.raises(PreconditionFailedError):
            writer.close()
        assert fs.read("a.txt").content == "theirs"
        with fs.open_write_if("a.txt", expect=content_id_of(b"theirs")) as ok:
            ok.write(b"mine now")
        assert fs.read("a.txt").content == "mine now"
        with pytest.raises(PreconditionFailedError):
            fs.open_write_if("a.txt", expect=content_id_of(b"nope"))

    def test_open_versioned_reads_the_version_it_names(self) -> None:
        fs = self.conditional({"d/a.txt": "version one\n"})
        version = fs.open_versioned("d/a.txt")
        with version.reader as reader:
            fs.write("d/a.txt", "version two, longer\n")  # an overwrite while the reader is open
            data = reader.read()
        assert data == b"version one\n"
        assert version.content_id == content_id_of(data)
        assert (version.stat.path, version.stat.is_file) == ("d/a.txt", True)
        with pytest.raises(IsADirectoryError):
            fs.open_versioned("d")
        with pytest.raises(FileNotFoundError):
            fs.open_versioned("d/missing")

    def test_read_only_filesystems_refuse_conditional_writes(self) -> None:
        fs: Any = self.make_read_only({"a.txt": "a"})
        current = fs.content_id("a.txt")
        with pytest.raises(ReadOnlyError):
            fs.write_bytes_if("a.txt", b"b", expect=current)
        with pytest.raises(ReadOnlyError):
            fs.open_write_if("a.txt", expect=current)


class ErrorTypesSuite(SuiteBase):
    """Each kind of failure raises its own typed error, a subclass of the built-in callers catch."""

    def test_path_errors(self) -> None:
        fs = self.make()
        with pytest.raises(PathEscapeError):
            fs.read("../outside.txt")
        with pytest.raises(InvalidPathError):
            fs.exists("a\nb")
        with pytest.raises(PathTooDeepError):
            fs.stat("/".join(["d"] * 17))
        with pytest.raises(NameTooLongError):
            fs.write("x" * 81, "")

    def test_operation_errors(self) -> None:
        fs = self.make({"dir/a.txt": "a"})
        with pytest.raises(DirectoryNotEmptyError):
            fs.delete("dir")
        with pytest.raises(RootProtectedError):
            fs.delete("/")
        with pytest.raises(MoveIntoSelfError):
            fs.move("dir", "dir/inside")
        with pytest.raises(MoveIntoSelfError):
            fs.copy("dir", "dir/inside")
        with pytest.raises(InvalidPatternError):
            fs.grep("(unclosed")
        with pytest.raises(InvalidPatternError):
            fs.glob("../*")
        with pytest.raises(ContentTooLargeError):
            fs.write_bytes("big.bin", bytes(MAX_CONVENIENCE_BYTES + 1))
        assert not fs.exists("big.bin")


class WalkSuite(SuiteBase):
    """``walk`` and ``list_stats`` agree with ``list`` and ``stat``."""

    def test_walk_visits_each_entry_once_parents_first(self) -> None:
        fs = self.make({"a.txt": "a", "d/b.txt": "b", "d/e/c.txt": "c"}, dirs=("empty",))
        entries = list(fs.walk())
        paths = [entry.path for entry in entries]
        assert sorted(paths) == ["a.txt", "d", "d/b.txt", "d/e", "d/e/c.txt", "empty"]
        for index, path in enumerate(paths):
            if "/" in path:
                assert path.rsplit("/", 1)[0] in paths[:index]
        assert sorted(e.path for e in fs.walk("d")) == ["d/b.txt", "d/e", "d/e/c.txt"]
        assert list(fs.walk("missing")) == []
        assert list(fs.walk("a.txt")) == []

    def test_list_stats_agrees_with_stat(self) -> None:
        fs: Filesystem = self.make({"d/a.txt": "aa", "d/b/c.txt": "c"})
        listed: Any = fs
        stats = listed.list_stats("d")
        assert [s.path for s in stats] == ["d/a.txt", "d/b"]
        assert [s.path for s in stats] == [e.path for e in fs.list("d")]
        for info in stats:
            alone = fs.stat(info.path)
            assert (info.is_file, info.is_directory, info.size_bytes) == (
                alone.is_file,
                alone.is_directory,
                alone.size_bytes,
            )
        with pytest.raises(NotADirectoryError):
            listed.list_stats("d/a.txt")
