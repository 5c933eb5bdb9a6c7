"""Conformance: convenience reads and writes, lines, modes, caps and metadata (DESIGN §3)."""

from __future__ import annotations

from datetime import datetime

import pytest

from workspacefs.paths import DEFAULT_READ_LIMIT, MAX_CONVENIENCE_BYTES
from workspacefs.testing._base import SuiteBase

__all__ = ["MetadataSuite", "ReadWriteSuite"]

MIB = 1024 * 1024


class ReadWriteSuite(SuiteBase):
    """``read``/``read_bytes``/``write``/``write_bytes``: modes, lines, pagination, caps, errors."""

    def test_write_then_read(self) -> None:
        fs = self.make()
        result = fs.write("hello.txt", "hello world")
        assert (result.path, result.bytes_written, result.mode) == ("hello.txt", 11, "overwrite")
        assert fs.read("hello.txt").content == "hello world"

    def test_bytes_written_counts_utf8_bytes(self) -> None:
        fs = self.make()
        assert fs.write("u.txt", "é€😀").bytes_written == 2 + 3 + 4

    def test_empty_file(self) -> None:
        fs = self.make()
        fs.write("empty.txt", "")
        result = fs.read("empty.txt")
        assert (result.content, result.total_lines, result.truncated) == ("", 0, False)
        assert fs.read_bytes("empty.txt").content == b""
        assert fs.stat("empty.txt").size_bytes == 0

    def test_overwrite_replaces(self) -> None:
        fs = self.make({"f.txt": "old content that is longer"})
        fs.write("f.txt", "new")
        assert fs.read("f.txt").content == "new"

    def test_create_mode_makes_new_file(self) -> None:
        fs = self.make()
        assert fs.write("new.txt", "x", mode="create").mode == "create"
        assert fs.read("new.txt").content == "x"

    def test_create_mode_refuses_existing_file(self) -> None:
        fs = self.make({"f.txt": "keep"})
        with pytest.raises(FileExistsError):
            fs.write("f.txt", "clobber", mode="create")
        with pytest.raises(FileExistsError):
            fs.write_bytes("f.txt", b"clobber", mode="create")
        assert fs.read("f.txt").content == "keep"

    def test_append_adds_to_end(self) -> None:
        fs = self.make({"log.txt": "one\n"})
        result = fs.write("log.txt", "two\n", mode="append")
        assert (result.bytes_written, result.mode) == (4, "append")
        assert fs.read("log.txt").content == "one\ntwo\n"

    def test_append_creates_missing_file(self) -> None:
        fs = self.make()
        fs.write("new.log", "first\n", mode="append")
        assert fs.read("new.log").content == "first\n"

    @pytest.mark.parametrize("mode", ["w", "a", "x", "", "OVERWRITE"])
    def test_unknown_mode_raises_value_error(self, mode: str) -> None:
        fs = self.make({"f.txt": "keep"})
        with pytest.raises(ValueError):
            fs.write("f.txt", "x", mode=mode)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            fs.write_bytes("f.txt", b"x", mode=mode)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            fs.open_write("f.txt", mode=mode)  # type: ignore[arg-type]
        assert fs.read("f.txt").content == "keep"

    def test_write_creates_parents_by_default(self) -> None:
        fs = self.make()
        fs.write("a/b/c/d.txt", "deep")
        assert fs.stat("a/b/c").is_directory
        assert fs.read("a/b/c/d.txt").content == "deep"

    def test_write_without_create_parents_needs_parent(self) -> None:
        fs = self.make(dirs=("present",))
        with pytest.raises(FileNotFoundError):
            fs.write("missing/f.txt", "x", create_parents=False)
        assert not fs.exists("missing")
        fs.write("present/f.txt", "x", create_parents=False)
        assert fs.read("present/f.txt").content == "x"

    @pytest.mark.parametrize("path", ["file.txt/child.txt", "file.txt/a/b.txt"])
    def test_write_under_a_file_raises_not_a_directory(self, path: str) -> None:
        fs = self.make({"file.txt": "data"})
        with pytest.raises(NotADirectoryError):
            fs.write(path, "x")
        assert fs.read("file.txt").content == "data"

    def test_write_to_directory_raises_is_a_directory(self) -> None:
        fs = self.make(dirs=("dir",))
        with pytest.raises(IsADirectoryError):
            fs.write("dir", "x")
        with pytest.raises(IsADirectoryError):
            fs.write_bytes("dir", b"x", mode="append")
        assert fs.stat("dir").is_directory

    @pytest.mark.parametrize("root", ["", ".", "/"])
    def test_write_to_root_raises_is_a_directory(self, root: str) -> None:
        fs = self.make()
        with pytest.raises(IsADirectoryError):
            fs.write(root, "x")

    def test_write_requires_str_and_write_bytes_requires_bytes(self) -> None:
        fs = self.make()
        with pytest.raises(TypeError):
            fs.write("f.txt", b"bytes")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            fs.write_bytes("f.txt", "text")  # type: ignore[arg-type]
        assert not fs.exists("f.txt")

    def test_write_bytes_accepts_bytearray_and_memoryview(self) -> None:
        fs = self.make()
        fs.write_bytes("a.bin", bytearray(b"\x00\x01"))
        fs.write_bytes("b.bin", memoryview(b"\x02\x03"))
        assert fs.read_bytes("a.bin").content == b"\x00\x01"
        assert fs.read_bytes("b.bin").content == b"\x02\x03"

    def test_read_missing_raises_file_not_found(self) -> None:
        fs = self.make()
        with pytest.raises(FileNotFoundError):
            fs.read("missing.txt")
        with pytest.raises(FileNotFoundError):
            fs.read_bytes("missing.txt")

    def test_read_directory_raises_is_a_directory(self) -> None:
        fs = self.make(dirs=("dir",))
        with pytest.raises(IsADirectoryError):
            fs.read("dir")
        with pytest.raises(IsADirectoryError):
            fs.read_bytes("dir")
        with pytest.raises(IsADirectoryError):
            fs.read("/")

    def test_read_under_a_file_raises_file_not_found(self) -> None:
        fs = self.make({"file.txt": "x"})
        with pytest.raises(FileNotFoundError):
            fs.read("file.txt/child")
        with pytest.raises(FileNotFoundError):
            fs.open_read("file.txt/child")

    @pytest.mark.parametrize(
        ("text", "lines"), [("", 0), ("a", 1), ("a\n", 1), ("\n\n\n", 3), ("a\nb", 2), ("a\nb\n", 2), ("\n", 1)]
    )
    def test_total_lines(self, text: str, lines: int) -> None:
        fs = self.make({"f.txt": text})
        assert fs.read("f.txt").total_lines == lines

    def test_read_keeps_newlines(self) -> None:
        fs = self.make({"f.txt": "a\nb\nc"})
        assert fs.read("f.txt").content == "a\nb\nc"

    def test_crlf_stays_intact(self) -> None:
        fs = self.make({"win.txt": "one\r\ntwo\r\n"})
        result = fs.read("win.txt")
        assert result.content == "one\r\ntwo\r\n"
        assert result.total_lines == 2
        assert fs.read("win.txt", offset=1).content == "two\r\n"

    def test_lone_carriage_return_does_not_split_lines(self) -> None:
        fs = self.make({"mac.txt": "a\rb\rc\n"})
        assert fs.read("mac.txt").total_lines == 1

    def test_offset_and_limit_page_through_lines(self) -> None:
        fs = self.make({"f.txt": "".join(f"line {i}\n" for i in range(10))})
        page = fs.read("f.txt", offset=3, limit=2)
        assert page.content == "line 3\nline 4\n"
        assert (page.offset, page.limit, page.total_lines, page.truncated) == (3, 2, 10, True)
        last = fs.read("f.txt", offset=8, limit=5)
        assert last.content == "line 8\nline 9\n"
        assert last.truncated is False

    def test_truncated_is_false_when_page_reaches_end_exactly(self) -> None:
        fs = self.make({"f.txt": "a\nb\nc\n"})
        assert fs.read("f.txt", offset=1, limit=2).truncated is False
        assert fs.read("f.txt", offset=0, limit=2).truncated is True

    def test_default_limit_is_2000_lines(self) -> None:
        fs = self.make({"big.txt": "".join(f"{i}\n" for i in range(2500))})
        result = fs.read("big.txt")
        assert result.limit == DEFAULT_READ_LIMIT == 2000
        assert result.content.count("\n") == 2000
        assert result.truncated is True
        assert result.total_lines == 2500
        rest = fs.read("big.txt", offset=2000)
        assert rest.content.startswith("2000\n") and rest.truncated is False

    def test_limit_zero_returns_nothing(self) -> None:
        fs = self.make({"f.txt": "a\nb\n"})
        result = fs.read("f.txt", limit=0)
        assert (result.content, result.truncated) == ("", True)

    def test_offset_past_end_returns_empty(self) -> None:
        fs = self.make({"f.txt": "a\nb\n"})
        result = fs.read("f.txt", offset=10)
        assert (result.content, result.truncated, result.total_lines) == ("", False, 2)

    def test_final_unterminated_line_is_read(self) -> None:
        fs = self.make({"f.txt": "a\nb"})
        assert fs.read("f.txt", offset=1).content == "b"

    @pytest.mark.parametrize(("offset", "limit"), [(-1, None), (0, -1), (-5, -5)])
    def test_negative_offset_or_limit_raises_value_error(self, offset: int, limit: int | None) -> None:
        fs = self.make({"f.txt": "a\n"})
        with pytest.raises(ValueError):
            fs.read("f.txt", offset=offset, limit=limit)
        with pytest.raises(ValueError):
            fs.read_bytes("f.txt", offset=offset, limit=limit)

    def test_invalid_utf8_raises_unicode_decode_error_pointing_to_read_bytes(self) -> None:
        fs = self.make({"bin.dat": b"ok\n\xff\xfe\n"})
        with pytest.raises(UnicodeDecodeError) as caught:
            fs.read("bin.dat")
        assert isinstance(caught.value, ValueError)
        assert "read_bytes" in str(caught.value)
        assert fs.read_bytes("bin.dat").content == b"ok\n\xff\xfe\n"

    @pytest.mark.parametrize("encoding", ["latin-1", "utf-16", "ascii", "no-such-codec"])
    def test_only_utf8_is_supported(self, encoding: str) -> None:
        fs = self.make({"f.txt": "x"})
        with pytest.raises(ValueError):
            fs.read("f.txt", encoding=encoding)

    def test_utf8_spellings_accepted(self) -> None:
        fs = self.make({"f.txt": "é"})
        assert fs.read("f.txt", encoding="UTF-8").content == "é"
        assert fs.read("f.txt", encoding="utf8").content == "é"

    def test_binary_round_trip(self) -> None:
        data = bytes(range(256)) * 4
        fs = self.make()
        assert fs.write_bytes("all.bin", data).bytes_written == 1024
        assert fs.read_bytes("all.bin").content == data

    def test_read_bytes_pagination(self) -> None:
        fs = self.make({"f.bin": b"0123456789"})
        result = fs.read_bytes("f.bin", offset=2, limit=3)
        assert (result.content, result.size_bytes, result.offset, result.limit, result.truncated) == (
            b"234",
            10,
            2,
            3,
            True,
        )
        tail = fs.read_bytes("f.bin", offset=7)
        assert (tail.content, tail.truncated) == (b"789", False)

    def test_read_bytes_past_end_is_empty(self) -> None:
        fs = self.make({"f.bin": b"abc"})
        result = fs.read_bytes("f.bin", offset=100, limit=5)
        assert (result.content, result.size_bytes, result.truncated) == (b"", 3, False)

    def test_write_cap_admits_exactly_32_mib(self) -> None:
        fs = self.make()
        assert fs.write_bytes("cap.bin", b"\0" * MAX_CONVENIENCE_BYTES).bytes_written == 32 * MIB
        assert fs.stat("cap.bin").size_bytes == 32 * MIB
        assert len(fs.read_bytes("cap.bin").content) == 32 * MIB

    def test_write_over_cap_raises_and_leaves_nothing(self) -> None:
        fs = self.make({"keep.txt": "keep"})
        with pytest.raises(ValueError):
            fs.write_bytes("big.bin", b"\0" * (MAX_CONVENIENCE_BYTES + 1))
        with pytest.raises(ValueError):
            fs.write("keep.txt", "x" * (MAX_CONVENIENCE_BYTES + 1))
        assert not fs.exists("big.bin")
        assert fs.read("keep.txt").content == "keep"

    def test_text_cap_counts_encoded_bytes(self) -> None:
        fs = self.make()
        with pytest.raises(ValueError):
            fs.write("wide.txt", "é" * (MAX_CONVENIENCE_BYTES // 2 + 1))

    def test_read_bytes_over_cap_raises_but_limit_works(self) -> None:
        fs = self.make()
        with fs.open_write("huge.bin") as writer:
            for _ in range(33):
                writer.write(b"\1" * MIB)
        with pytest.raises(ValueError):
            fs.read_bytes("huge.bin")
        assert len(fs.read_bytes("huge.bin", limit=MIB).content) == MIB
        assert fs.read_bytes("huge.bin", offset=32 * MIB).content == b"\1" * MIB

    def test_read_over_cap_raises_but_limit_works(self) -> None:
        fs = self.make()
        line = b"x" * 1023 + b"\n"
        with fs.open_write("huge.txt") as writer:
            for _ in range(33):
                writer.write(line * 1024)
        with pytest.raises(ValueError):
            fs.read("huge.txt", limit=40_000)
        page = fs.read("huge.txt", offset=30_000, limit=10)
        assert page.content == (line * 10).decode()
        assert page.total_lines == 33 * 1024
        assert page.truncated is True


class MetadataSuite(SuiteBase):
    """``exists`` and ``stat``."""

    def test_exists(self) -> None:
        fs = self.make({"a/f.txt": "x"})
        assert fs.exists("a/f.txt")
        assert fs.exists("a")
        assert fs.exists("")
        assert not fs.exists("missing")
        assert not fs.exists("a/missing.txt")

    def test_exists_below_a_file_is_false(self) -> None:
        fs = self.make({"file.txt": "x"})
        assert fs.exists("file.txt/child") is False

    def test_stat_file(self) -> None:
        fs = self.make({"d/f.txt": "hello"})
        info = fs.stat("d/f.txt")
        assert (info.path, info.is_file, info.is_directory, info.size_bytes) == ("d/f.txt", True, False, 5)
        for stamp in (info.created_at, info.modified_at):
            assert stamp is None or (isinstance(stamp, datetime) and stamp.tzinfo is not None)

    def test_stat_directory(self) -> None:
        fs = self.make(dirs=("d",))
        info = fs.stat("d")
        assert (info.is_file, info.is_directory, info.size_bytes) == (False, True, 0)

    def test_stat_root(self) -> None:
        fs = self.make()
        assert fs.stat("/").is_directory
        assert fs.stat("").path == ""

    def test_stat_missing_raises(self) -> None:
        fs = self.make({"file.txt": "x"})
        with pytest.raises(FileNotFoundError):
            fs.stat("missing")
        with pytest.raises(FileNotFoundError):
            fs.stat("file.txt/child")

    def test_modified_at_advances_on_write(self) -> None:
        fs = self.make({"f.txt": "one"})
        before = fs.stat("f.txt").modified_at
        fs.write("f.txt", "two")
        after = fs.stat("f.txt").modified_at
        if before is not None and after is not None:
            assert after >= before
        assert fs.stat("f.txt").size_bytes == 3
