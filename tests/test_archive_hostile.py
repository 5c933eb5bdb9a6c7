"""A tar handed over by an attacker: every trick is refused with ``UnsafeArchiveError`` naming the member, in
fixed memory, and the workspace is left as it was (memory, host and SQLite)."""

from __future__ import annotations

import bz2
import gzip
import io
import itertools
import lzma
import os
import tarfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem
from workspacefs.archive import UnsafeArchiveError, export_tar, import_tar
from workspacefs.cli import main
from workspacefs.protocol import Filesystem

_count = itertools.count()
Member = tuple[str, bytes | None]
"""A member's name and content (``None``: a directory)."""


@pytest.fixture(params=["memory", "host", "sqlite"])
def workspace(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Filesystem]:
    index = next(_count)
    fs: Filesystem
    if request.param == "memory":
        fs = InMemoryFilesystem()
    elif request.param == "host":
        (fast_tmp / f"hostile-{index}").mkdir()
        fs = HostFilesystem(fast_tmp / f"hostile-{index}", snapshot_dir=fast_tmp / f"hostile-snap-{index}")
    else:
        fs = SqlFilesystem(f"sqlite:///{fast_tmp / 'hostile.db'}", f"hostile-{index}")
    fs.write("src/keep.py", "keep\n")
    fs.write("a", "old a\n")
    yield fs
    getattr(fs, "close", lambda: None)()


def _state(fs: Filesystem) -> dict[str, bytes | None]:
    return {e.path: None if e.is_directory else fs.read_bytes(e.path).content for e in fs.walk(".")}


def _tar(members: list[Member]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _refused(fs: Filesystem, archive: bytes, member: str | None) -> UnsafeArchiveError:
    """Import ``archive``: refused, naming ``member`` (``None``: an archive-wide refusal), nothing changed."""
    before = _state(fs)
    with pytest.raises(UnsafeArchiveError) as caught:
        import_tar(fs, io.BytesIO(archive))
    assert member is None or repr(member) in str(caught.value)
    assert _state(fs) == before
    return caught.value


@pytest.mark.parametrize(
    ("members", "culprit"),
    [
        ([("new.txt", b"1"), ("a", b"first"), ("./a", b"second")], "./a"),
        ([("a", b"file"), ("a", None)], "a"),
        ([("d", None), ("d", b"file")], "d"),
        ([("d/inner.txt", b"x"), ("d", b"file")], "d"),
        ([("f", b"file"), ("f/below.txt", b"x")], "f/below.txt"),
        ([("new.txt", b"1"), (".", b"a file at the target itself")], "."),
    ],
)
def test_members_that_contradict_each_other_are_refused(
    workspace: Filesystem, members: list[Member], culprit: str
) -> None:
    _refused(workspace, _tar(members), culprit)


def test_a_truncated_or_corrupt_archive_is_refused_by_type(workspace: Filesystem) -> None:
    whole = _tar([("new.txt", b"1"), ("big.bin", b"x" * 100_000)])
    for compress in (bz2.compress, lzma.compress, gzip.compress):  # whole ones, each recognised, import
        import_tar(workspace, io.BytesIO(compress(whole)))
        assert workspace.read_bytes("big.bin").content == b"x" * 100_000
        workspace.delete("big.bin")
        workspace.delete("new.txt")
    assert "in member 'big.bin'" in str(_refused(workspace, whole[:5_000], "big.bin"))
    _refused(workspace, b"not a tar at all" * 100, None)
    damaged = bytearray(gzip.compress(whole))
    damaged[len(damaged) // 2] ^= 0xFF
    _refused(workspace, bytes(damaged), None)


def _header(kind: bytes, name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def _pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n".encode()
    length = len(body)
    while length != len(body) + len(str(length)):  # the length counts its own digits
        length = len(body) + len(str(length))
    return str(length).encode() + body


def _padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % tarfile.BLOCKSIZE)


def _gzip_bomb(kind: bytes, header_bytes: int) -> bytes:
    """A gzip of a few hundred KiB whose one PAX header or GNU long name claims ``header_bytes`` bytes."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb") as out:
        out.write(_header(kind, "././@LongHeader", header_bytes))
        record = str(header_bytes).encode() + b" comment=" if kind == tarfile.XHDTYPE else b""
        out.write(record)
        block = b"x" * (1 << 20)
        for start in range(len(record), header_bytes - 1, len(block)):
            out.write(block[: min(len(block), header_bytes - 1 - start)])
        out.write(b"\n" + _header(tarfile.REGTYPE, "f", 0) + b"\0" * 1024)
    return raw.getvalue()


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME])
def test_a_header_bomb_is_refused_in_fixed_memory(workspace: Filesystem, kind: bytes) -> None:
    bomb = _gzip_bomb(kind, 64 * 1024 * 1024)
    assert len(bomb) < 1024 * 1024
    tracemalloc.start()
    try:
        _refused(workspace, bomb, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.XGLTYPE])
def test_many_small_headers_add_up_to_the_same_limit(workspace: Filesystem, kind: bytes) -> None:
    comment = _pax_record("comment", "0123456789abcdef" * 3)  # one small one, as `git archive` writes, imports
    small = _header(kind, "pax_global_header", len(comment)) + _padded(comment)
    import_tar(workspace, io.BytesIO(small + _tar([("pkg/mod.py", b"m"), ("pkg", None), ("./src/new.py", b"n")])))
    assert workspace.read("pkg/mod.py").content == "m" and workspace.read("src/new.py").content == "n"
    piece = _padded(_pax_record("comment", "x" * 300_000))
    chain = b"".join(_header(kind, "././@PaxHeader", len(piece)) + piece for _ in range(4))
    first = _header(tarfile.REGTYPE, "new.txt", 1) + _padded(b"1")
    _refused(workspace, first + chain + _header(tarfile.REGTYPE, "f", 0) + b"\0" * 1024, None)


def test_sparse_members_are_refused(workspace: Filesystem) -> None:
    old_gnu = _header(tarfile.GNUTYPE_SPARSE, "holes.bin", 0)
    _refused(workspace, old_gnu + b"\0" * 1024, "holes.bin")
    records = b"".join(
        _pax_record(key, value)
        for key, value in [("GNU.sparse.major", "1"), ("GNU.sparse.minor", "0"), ("GNU.sparse.name", "holes.bin")]
    )
    pax = _header(tarfile.XHDTYPE, "././@PaxHeader", len(records)) + _padded(records)
    sparse_map = _padded(b"1000000000\n" + b"0\n0\n" * 100)
    archive = pax + _header(tarfile.REGTYPE, "GNUSparseFile.0/holes.bin", len(sparse_map)) + sparse_map
    _refused(workspace, archive + b"\0" * 1024, "holes.bin")


@pytest.mark.parametrize(("path", "error"), [("typo", FileNotFoundError), ("src/./keep.py", NotADirectoryError)])
def test_exporting_a_missing_path_or_a_file_is_refused_not_an_empty_archive(
    workspace: Filesystem, path: str, error: type[OSError]
) -> None:
    with pytest.raises(error) as caught:
        export_tar(workspace, io.BytesIO(), path=path)
    assert caught.value.filename == path


def test_a_member_longer_than_its_header_says_is_refused_not_the_end_of_the_archive(workspace: Filesystem) -> None:
    spilled = _header(tarfile.REGTYPE, "first.txt", 3) + _padded(b"A" * 700)  # 700 bytes under a 3-byte header
    later = _header(tarfile.REGTYPE, "second.txt", 2) + _padded(b"BB") + b"\0" * 1024
    assert "byte 1024" in str(_refused(workspace, spilled + later, None))  # tarfile stopped there, "imported"
    records = _pax_record("size", "-1")
    negative = _header(tarfile.XHDTYPE, "././@PaxHeader", len(records)) + _padded(records)
    negative += _header(tarfile.REGTYPE, "minus.txt", 0) + b"\0" * 1024
    _refused(workspace, negative, "minus.txt")


def test_an_import_into_a_read_only_workspace_names_the_member_not_the_undo(fast_tmp: Path) -> None:
    (fast_tmp / "read-only").mkdir(exist_ok=True)
    for fs in (InMemoryFilesystem(read_only=True), HostFilesystem(fast_tmp / "read-only", read_only=True)):
        with pytest.raises(PermissionError) as caught:
            import_tar(fs, io.BytesIO(_tar([("d/x.txt", b"x")])))
        assert caught.value.filename == "d/x.txt"  # was 'd': undoing what was never made failed, and won
        assert not getattr(caught.value, "__notes__", None)


def test_only_a_gzip_is_read_past_the_end_and_not_far(workspace: Filesystem) -> None:
    archive = _tar([("new.txt", b"1")])
    read_end, write_end = os.pipe()
    with open(read_end, "rb", buffering=0) as source, open(write_end, "wb") as sink:
        sink.write(archive)
        sink.flush()  # and the writer stays open: a plain tar ends at its end marker, not at the stream's end
        import_tar(workspace, source)
    assert workspace.read("new.txt").content == "1"
    workspace.delete("new.txt")
    padded = gzip.compress(archive + b"\0" * (17 * 1024 * 1024))  # 17 KiB of gzip, 17 MiB after the end
    assert "follow its end" in str(_refused(workspace, padded, None))


def test_the_import_command_reports_a_damaged_archive_instead_of_a_traceback(fast_tmp: Path) -> None:
    damaged = fast_tmp / "damaged.tar"
    damaged.write_bytes(_tar([("a.txt", b"x" * 5000)])[:2000])
    url = f"sqlite:///{fast_tmp / 'cli.db'}?session=imported"
    result = CliRunner().invoke(main, ["import", "-i", str(damaged), "--fs", url])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code not in (0, 1) and "not a readable tar in member 'a.txt'" in result.output
