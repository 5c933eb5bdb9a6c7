"""Conformance: streaming readers, writers and text readers."""

from __future__ import annotations

import gc
import hashlib
import tracemalloc
from collections.abc import Iterator

import pytest

from workspacefs.paths import DEFAULT_CHUNK_SIZE
from workspacefs.protocol import ByteReader, ByteWriter, TextReader
from workspacefs.testing._base import SuiteBase

__all__ = ["StreamingSuite", "TextStreamSuite"]

MIB = 1024 * 1024
STREAM_SLACK = 16 * MIB


def _pattern_chunks(count: int, size: int = MIB) -> Iterator[bytes]:
    for index in range(count):
        yield bytes([index % 251]) * size


class StreamingSuite(SuiteBase):
    """``open_read``/``open_write``: positions, seeking, chunking, atomic commit, closed streams, memory."""

    def test_reader_satisfies_protocol(self) -> None:
        fs = self.make({"f.bin": b"abc"})
        with fs.open_read("f.bin") as reader:
            assert isinstance(reader, ByteReader)
            assert (reader.path, reader.size, reader.position) == ("f.bin", 3, 0)

    def test_read_advances_position(self) -> None:
        fs = self.make({"f.bin": b"0123456789"})
        with fs.open_read("f.bin") as reader:
            assert reader.read(3) == b"012"
            assert reader.position == 3
            assert reader.read() == b"3456789"
            assert reader.position == 10
            assert reader.read() == b""
            assert reader.read(5) == b""

    def test_seek_whence(self) -> None:
        fs = self.make({"f.bin": b"0123456789"})
        with fs.open_read("f.bin") as reader:
            assert reader.seek(4) == 4 and reader.read(2) == b"45"
            assert reader.seek(-3, 1) == 3 and reader.read(1) == b"3"
            assert reader.seek(-2, 2) == 8 and reader.read() == b"89"
            assert reader.seek(100) == 100 and reader.read() == b""

    def test_bad_seeks_raise_value_error(self) -> None:
        fs = self.make({"f.bin": b"0123"})
        with fs.open_read("f.bin") as reader:
            with pytest.raises(ValueError):
                reader.seek(-1)
            with pytest.raises(ValueError):
                reader.seek(0, 3)

    def test_iteration_yields_64_kib_chunks(self) -> None:
        data = bytes(range(256)) * 800  # 204,800 bytes
        fs = self.make({"f.bin": data})
        with fs.open_read("f.bin") as reader:
            chunks = list(reader)
        assert [len(c) for c in chunks] == [DEFAULT_CHUNK_SIZE] * 3 + [len(data) - 3 * DEFAULT_CHUNK_SIZE]
        assert b"".join(chunks) == data

    def test_chunks_of_chosen_size_from_current_position(self) -> None:
        fs = self.make({"f.bin": b"0123456789"})
        with fs.open_read("f.bin") as reader:
            reader.seek(1)
            assert list(reader.chunks(4)) == [b"1234", b"5678", b"9"]
            with pytest.raises(ValueError):
                list(reader.chunks(0))

    def test_each_reader_has_its_own_position(self) -> None:
        fs = self.make({"f.bin": b"abcdef"})
        with fs.open_read("f.bin") as first, fs.open_read("f.bin") as second:
            assert first.read(2) == b"ab"
            assert second.read(3) == b"abc"
            assert first.read(2) == b"cd"

    def test_reader_keeps_the_content_it_opened(self) -> None:
        fs = self.make({"f.txt": "old content"})
        with fs.open_read("f.txt") as reader:
            fs.write("f.txt", "new content!")
            assert reader.read() == b"old content"
        assert fs.read("f.txt").content == "new content!"

    def test_reader_cannot_write(self) -> None:
        fs = self.make({"f.bin": b"abc"})
        with fs.open_read("f.bin") as reader:
            assert not hasattr(reader, "write")
            reader.read()
        assert fs.read_bytes("f.bin").content == b"abc"

    def test_reader_closed_raises_value_error(self) -> None:
        fs = self.make({"f.bin": b"abc"})
        reader = fs.open_read("f.bin")
        with reader:
            pass
        assert reader.closed
        with pytest.raises(ValueError, match="closed"):
            reader.read()
        with pytest.raises(ValueError):
            reader.seek(0)
        reader.close()  # idempotent

    def test_open_read_errors(self) -> None:
        fs = self.make(dirs=("d",))
        with pytest.raises(FileNotFoundError):
            fs.open_read("missing")
        with pytest.raises(IsADirectoryError):
            fs.open_read("d")

    def test_writer_satisfies_protocol_and_commits_on_close(self) -> None:
        fs = self.make()
        with fs.open_write("out.bin") as writer:
            assert isinstance(writer, ByteWriter)
            assert writer.path == "out.bin"
            assert writer.write(b"abc") == 3
            assert writer.write(bytearray(b"de")) == 2
            assert writer.bytes_written == 5
        assert fs.read_bytes("out.bin").content == b"abcde"

    def test_write_is_invisible_until_close(self) -> None:
        fs = self.make({"old.txt": "old"})
        writer = fs.open_write("old.txt")
        writer.write(b"new")
        assert fs.read("old.txt").content == "old"
        fresh = fs.open_write("fresh.txt")
        fresh.write(b"x")
        assert not fs.exists("fresh.txt") or fs.read_bytes("fresh.txt").content == b""
        writer.close()
        fresh.close()
        assert fs.read("old.txt").content == "new"
        assert fs.read("fresh.txt").content == "x"

    def test_exception_in_with_block_keeps_old_content(self) -> None:
        fs = self.make({"f.txt": "old"})
        with pytest.raises(RuntimeError), fs.open_write("f.txt") as writer:
            writer.write(b"partial new content")
            raise RuntimeError("boom")
        assert fs.read("f.txt").content == "old"
        assert [e.name for e in fs.list()] == ["f.txt"]

    def test_exception_in_create_mode_leaves_no_file(self) -> None:
        fs = self.make()
        with pytest.raises(RuntimeError), fs.open_write("new.txt", mode="create") as writer:
            writer.write(b"partial")
            raise RuntimeError("boom")
        assert not fs.exists("new.txt")
        assert list(fs.list()) == []

    def test_abort_discards(self) -> None:
        fs = self.make({"f.txt": "old"})
        writer = fs.open_write("f.txt")
        writer.write(b"new")
        writer.abort()
        assert writer.closed
        assert fs.read("f.txt").content == "old"

    def test_write_all_and_streaming_copy(self) -> None:
        data = bytes(range(256)) * 1000
        fs = self.make({"src.bin": data})
        with fs.open_read("src.bin") as src, fs.open_write("dst.bin") as dst:
            assert dst.write_all(src) == len(data)
        assert fs.read_bytes("dst.bin").content == data
        with fs.open_write("gen.bin") as writer:
            assert writer.write_all(iter([b"a", b"", b"bc"])) == 3
        assert fs.read_bytes("gen.bin").content == b"abc"

    def test_writer_closed_raises_value_error(self) -> None:
        fs = self.make()
        writer = fs.open_write("f.bin")
        writer.close()
        with pytest.raises(ValueError, match="closed"):
            writer.write(b"late")
        writer.close()  # idempotent

    def test_writer_refuses_text(self) -> None:
        fs = self.make()
        with fs.open_write("f.bin") as writer, pytest.raises(TypeError):
            writer.write("text")  # type: ignore[arg-type]

    def test_writer_seek_is_illegal(self) -> None:
        fs = self.make()
        with fs.open_write("f.bin") as writer:
            with pytest.raises(OSError, match="Illegal seek"):
                writer.seek(0)  # type: ignore[attr-defined]
            writer.write(b"x")

    def test_empty_stream_creates_empty_file(self) -> None:
        fs = self.make()
        with fs.open_write("empty.bin"):
            pass
        assert fs.stat("empty.bin").size_bytes == 0

    def test_create_mode_refuses_existing_at_open(self) -> None:
        fs = self.make({"f.txt": "keep"})
        with pytest.raises(FileExistsError):
            fs.open_write("f.txt", mode="create")
        assert fs.read("f.txt").content == "keep"

    def test_create_mode_refuses_file_that_appears_before_commit(self) -> None:
        fs = self.make()
        writer = fs.open_write("race.txt", mode="create")
        writer.write(b"mine")
        fs.write("race.txt", "theirs")
        with pytest.raises(FileExistsError):
            writer.close()
        assert fs.read("race.txt").content == "theirs"
        assert [e.name for e in fs.list()] == ["race.txt"]

    def test_append_stream(self) -> None:
        fs = self.make({"log.txt": "one\n"})
        with fs.open_write("log.txt", mode="append") as writer:
            writer.write(b"two\n")
        assert fs.read("log.txt").content == "one\ntwo\n"

    def test_open_write_errors(self) -> None:
        fs = self.make({"f.txt": "x"}, dirs=("d",))
        with pytest.raises(IsADirectoryError):
            fs.open_write("d")
        with pytest.raises(IsADirectoryError):
            fs.open_write("/")
        with pytest.raises(NotADirectoryError):
            fs.open_write("f.txt/child")
        with pytest.raises(FileNotFoundError):
            fs.open_write("missing/child", create_parents=False)
        assert not fs.exists("missing")

    def test_streams_have_no_size_cap(self) -> None:
        fs = self.make()
        digest = hashlib.sha256()
        with fs.open_write("big.bin") as writer:
            for chunk in _pattern_chunks(self.large_file_mib):
                digest.update(chunk)
                writer.write(chunk)
        assert fs.stat("big.bin").size_bytes == self.large_file_mib * MIB
        check = hashlib.sha256()
        with fs.open_read("big.bin") as reader:
            for chunk in reader:
                check.update(chunk)
        assert check.hexdigest() == digest.hexdigest()

    def _peak_while(self, action: object) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            assert callable(action)
            action()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def test_streaming_runs_in_fixed_memory(self) -> None:
        fs = self.make()
        size = self.large_file_mib * MIB

        def write() -> None:
            with fs.open_write("big.bin") as writer:
                for chunk in _pattern_chunks(size // (4 * DEFAULT_CHUNK_SIZE), 4 * DEFAULT_CHUNK_SIZE):
                    writer.write(chunk)
                    del chunk

        def read() -> None:
            total = 0
            with fs.open_read("big.bin") as reader:
                for chunk in reader:
                    total += len(chunk)
            assert total == size

        write_peak = self._peak_while(write)
        allowance = STREAM_SLACK + (2 * size if self.stores_content_in_memory else 0)
        assert write_peak < allowance, f"writing {self.large_file_mib} MiB peaked at {write_peak / MIB:.1f} MiB"
        read_peak = self._peak_while(read)
        assert read_peak < STREAM_SLACK, f"reading {self.large_file_mib} MiB peaked at {read_peak / MIB:.1f} MiB"


class TextStreamSuite(SuiteBase):
    """``open_text``: lazy UTF-8, lines split on ``\\n`` only, ``line_number`` counts lines returned."""

    def test_text_reader_protocol_and_lines(self) -> None:
        fs = self.make({"f.txt": "one\ntwo\r\nthree"})
        with fs.open_text("f.txt") as reader:
            assert isinstance(reader, TextReader)
            assert reader.encoding == "utf-8" and reader.path == "f.txt"
            assert reader.line_number == 0
            assert reader.readline() == "one\n"
            assert reader.line_number == 1
            assert list(reader) == ["two\r\n", "three"]
            assert reader.line_number == 3
            assert reader.readline() == ""
            assert reader.line_number == 3

    def test_lone_carriage_return_is_not_a_line_break(self) -> None:
        fs = self.make({"f.txt": "a\rb\nc"})
        with fs.open_text("f.txt") as reader:
            assert list(reader) == ["a\rb\n", "c"]

    def test_lines_strip_removes_line_endings_only(self) -> None:
        fs = self.make({"f.txt": "  a  \nb\r\n\nc"})
        with fs.open_text("f.txt") as reader:
            assert list(reader.lines(strip=True)) == ["  a  ", "b", "", "c"]

    def test_read_characters(self) -> None:
        fs = self.make({"f.txt": "héllo\nwörld\n"})
        with fs.open_text("f.txt") as reader:
            assert reader.read(3) == "hél"
            assert reader.readline() == "lo\n"
            assert reader.read() == "wörld\n"
            assert reader.read() == ""

    def test_multibyte_characters_across_chunk_boundaries(self) -> None:
        text = "é€😀\n" * 40_000  # well over one 64 KiB chunk, sequences straddle boundaries
        fs = self.make({"u.txt": text})
        with fs.open_text("u.txt") as reader:
            lines = list(reader)
        assert len(lines) == 40_000 and "".join(lines) == text

    def test_invalid_utf8_raises_when_reached(self) -> None:
        fs = self.make({"bad.txt": b"fine\n\xff\xfe\n"})
        with fs.open_text("bad.txt") as reader, pytest.raises(UnicodeDecodeError):
            list(reader)

    def test_only_utf8(self) -> None:
        fs = self.make({"f.txt": "x"})
        with pytest.raises(ValueError):
            fs.open_text("f.txt", encoding="latin-1")

    def test_closed_text_reader_raises(self) -> None:
        fs = self.make({"f.txt": "x\n"})
        reader = fs.open_text("f.txt")
        reader.close()
        with pytest.raises(ValueError):
            reader.readline()

    def test_empty_file(self) -> None:
        fs = self.make({"e.txt": ""})
        with fs.open_text("e.txt") as reader:
            assert reader.readline() == "" and list(reader) == []

    def test_open_text_errors(self) -> None:
        fs = self.make(dirs=("d",))
        with pytest.raises(FileNotFoundError):
            fs.open_text("missing.txt")
        with pytest.raises(IsADirectoryError):
            fs.open_text("d")
