"""The fsspec bridge: fsspec's own abstract test-suite over it on three backends, data tools through it,
its registration, and streaming, atomicity and errors as workspacefs promises them."""

from __future__ import annotations

import gc
import hashlib
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path

import fsspec
import pytest
from fsspec.tests.abstract import AbstractFixtures
from fsspec.tests.abstract.copy import AbstractCopyTests
from fsspec.tests.abstract.get import AbstractGetTests
from fsspec.tests.abstract.open import AbstractOpenTests
from fsspec.tests.abstract.pipe import AbstractPipeTests
from fsspec.tests.abstract.put import AbstractPutTests

from workspacefs import HostFilesystem, InMemoryFilesystem, open_filesystem
from workspacefs.fsspec import WorkspaceFile, WorkspaceFileSystem

MIB = 1024 * 1024


# --- fsspec's abstract suite, on memory, SQLite and a host directory ----------------------------------------


class _Fixtures(AbstractFixtures):  # type: ignore[misc]
    """What fsspec's abstract tests need from a backend: ``fs``, ``fs_path`` and how paths join."""

    @pytest.fixture
    def fs_join(self) -> Callable[..., str]:
        return lambda *parts: "/".join(parts)

    @pytest.fixture
    def fs_path(self) -> str:
        return ""


class MemoryFixtures(_Fixtures):
    @pytest.fixture
    def fs(self) -> WorkspaceFileSystem:
        return WorkspaceFileSystem(InMemoryFilesystem())


class SqliteFixtures(_Fixtures):
    """Opened from a URL, as ``fsspec.filesystem("workspace", url=…)`` does; under a nested base path."""

    @pytest.fixture
    def fs(self, fast_tmp: Path) -> Iterator[WorkspaceFileSystem]:
        database = Path(tempfile.mkdtemp(dir=fast_tmp)) / "ws.db"
        with WorkspaceFileSystem(url=f"sqlite:///{database}?session=abstract") as bridge:
            yield bridge

    @pytest.fixture
    def fs_path(self) -> str:
        return "/base/dir"


class HostFixtures(_Fixtures):
    @pytest.fixture
    def fs(self, fast_tmp: Path) -> WorkspaceFileSystem:
        return WorkspaceFileSystem(HostFilesystem(tempfile.mkdtemp(dir=fast_tmp)))


class TestMemoryCopy(AbstractCopyTests, MemoryFixtures):  # type: ignore[misc]
    pass


class TestMemoryGet(AbstractGetTests, MemoryFixtures):  # type: ignore[misc]
    pass


class TestMemoryPut(AbstractPutTests, MemoryFixtures):  # type: ignore[misc]
    pass


class TestMemoryOpen(AbstractOpenTests, MemoryFixtures):  # type: ignore[misc]
    pass


class TestMemoryPipe(AbstractPipeTests, MemoryFixtures):  # type: ignore[misc]
    pass


class TestSqliteCopy(AbstractCopyTests, SqliteFixtures):  # type: ignore[misc]
    pass


class TestSqliteGet(AbstractGetTests, SqliteFixtures):  # type: ignore[misc]
    pass


class TestSqlitePut(AbstractPutTests, SqliteFixtures):  # type: ignore[misc]
    pass


class TestSqliteOpen(AbstractOpenTests, SqliteFixtures):  # type: ignore[misc]
    pass


class TestSqlitePipe(AbstractPipeTests, SqliteFixtures):  # type: ignore[misc]
    pass


class TestHostCopy(AbstractCopyTests, HostFixtures):  # type: ignore[misc]
    pass


class TestHostGet(AbstractGetTests, HostFixtures):  # type: ignore[misc]
    pass


class TestHostPut(AbstractPutTests, HostFixtures):  # type: ignore[misc]
    pass


class TestHostOpen(AbstractOpenTests, HostFixtures):  # type: ignore[misc]
    pass


class TestHostPipe(AbstractPipeTests, HostFixtures):  # type: ignore[misc]
    pass


# --- the bridge on every backend ------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "host"])
def bridge(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[WorkspaceFileSystem]:
    scratch = Path(tempfile.mkdtemp(dir=fast_tmp))
    if request.param == "memory":
        opened = WorkspaceFileSystem(InMemoryFilesystem())
    elif request.param == "sqlite":
        opened = WorkspaceFileSystem(url=f"sqlite:///{scratch / 'ws.db'}?session=bridge")
    else:
        opened = WorkspaceFileSystem(HostFilesystem(scratch))
    with opened:
        yield opened


def test_the_bridge_is_registered_through_fsspecs_entry_point() -> None:
    """``pip install -e .`` declares the entry point; fsspec reads it at import and knows the protocol."""
    declared = {ep.name: ep.value for ep in entry_points(group="fsspec.specs")}
    assert declared.get("workspace") == "workspacefs.fsspec:WorkspaceFileSystem", (
        "reinstall the package (pip install -e '.[dev]') so the fsspec entry point exists"
    )
    from fsspec.registry import known_implementations

    assert known_implementations["workspace"]["class"] == "workspacefs.fsspec.WorkspaceFileSystem"
    assert fsspec.get_filesystem_class("workspace") is WorkspaceFileSystem


def test_fsspec_opens_the_bridge_by_protocol_over_a_given_workspace() -> None:
    ws = InMemoryFilesystem()
    bridge = fsspec.filesystem("workspace", fs=ws)
    assert isinstance(bridge, WorkspaceFileSystem) and bridge.workspace is ws
    with fsspec.open("workspace://notes/today.md", "wt", fs=ws) as handle:
        handle.write("# Today\n")
    assert ws.read("notes/today.md").content == "# Today\n"
    with fsspec.open("workspace:///notes/today.md", "rt", fs=ws) as handle:
        assert handle.read() == "# Today\n"


def test_fsspec_opens_the_bridge_by_protocol_from_a_workspace_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ws.db'}?session=analyst"
    with fsspec.filesystem("workspace", url=url) as bridge:
        bridge.pipe_file("/report.txt", b"ok\n")
        assert bridge.cat_file("workspace://report.txt") == b"ok\n"
    with open_filesystem(url) as ws:  # the bridge wrote to the workspace the URL names
        assert ws.read("report.txt").content == "ok\n"


def test_a_bridge_opened_from_a_url_pickles_to_the_same_workspace(tmp_path: Path) -> None:
    """Dask and multiprocessing pickle filesystems and open read files: the URL travels, not the database."""
    import pickle

    with WorkspaceFileSystem(url=f"sqlite:///{tmp_path / 'ws.db'}?session=p") as bridge:
        bridge.pipe_file("/a.txt", b"shared")
        with pickle.loads(pickle.dumps(bridge)) as again:
            assert again.cat_file("/a.txt") == b"shared"
        with bridge.open("/a.txt", "rb") as handle:
            handle.seek(2)
            reopened = pickle.loads(pickle.dumps(handle))
            assert reopened.read() == b"ared"
            reopened.close()


def test_a_bridge_needs_exactly_one_workspace() -> None:
    with pytest.raises(ValueError, match="fs="):
        WorkspaceFileSystem()
    with pytest.raises(ValueError, match="fs="):
        WorkspaceFileSystem(InMemoryFilesystem(), url="memory://")
    with pytest.raises(ValueError, match="fs="):
        WorkspaceFileSystem(fs="memory://", url="memory://")
    with pytest.raises(TypeError, match="Filesystem"):
        WorkspaceFileSystem(fs=b"memory://")  # type: ignore[arg-type]


def test_bridges_are_equal_only_over_the_same_workspace() -> None:
    """fsspec caches and compares instances by their arguments; two workspaces that print alike differ."""
    one, other = InMemoryFilesystem(), InMemoryFilesystem()
    assert WorkspaceFileSystem(one) == WorkspaceFileSystem(one)
    assert hash(WorkspaceFileSystem(one)) == hash(WorkspaceFileSystem(one))
    assert WorkspaceFileSystem(one) != WorkspaceFileSystem(other)
    WorkspaceFileSystem(one).pipe_file("a", b"1")
    assert not WorkspaceFileSystem(other).exists("a")


# --- pandas and pyarrow -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_pandas_round_trips_csv_and_parquet_through_the_bridge(kind: str, tmp_path: Path) -> None:
    import pandas

    ws = InMemoryFilesystem() if kind == "memory" else open_filesystem(f"sqlite:///{tmp_path / 'ws.db'}?session=p")
    options = {"fs": ws}
    frame = pandas.DataFrame({"item": ["apple", "pear", "fig"], "price": [3, 5, 8], "ripe": [True, False, True]})

    frame.to_csv("workspace://data/prices.csv", index=False, storage_options=options)
    assert ws.read("data/prices.csv").content.splitlines()[0] == "item,price,ripe"
    pandas.testing.assert_frame_equal(pandas.read_csv("workspace://data/prices.csv", storage_options=options), frame)

    frame.to_parquet("workspace://data/prices.parquet", storage_options=options)
    assert ws.read_bytes("data/prices.parquet", limit=4).content == b"PAR1"
    back = pandas.read_parquet("workspace://data/prices.parquet", storage_options=options)
    pandas.testing.assert_frame_equal(back, frame)


def test_pandas_opens_the_workspace_a_url_names(tmp_path: Path) -> None:
    """By URL: ``fs=`` takes one too, since pandas' parquet path passes its options to ``fsspec.url_to_fs``,
    whose own first parameter is named ``url``."""
    import pandas

    url = f"sqlite:///{tmp_path / 'ws.db'}?session=url"
    frame = pandas.DataFrame({"n": [1, 2, 3]})
    frame.to_parquet("workspace://n.parquet", storage_options={"fs": url})
    frame.to_csv("workspace://n.csv", index=False, storage_options={"url": url})
    pandas.testing.assert_frame_equal(pandas.read_parquet("workspace://n.parquet", storage_options={"fs": url}), frame)
    pandas.testing.assert_frame_equal(pandas.read_csv("workspace://n.csv", storage_options={"fs": url}), frame)
    with open_filesystem(url) as ws:
        assert [entry.name for entry in ws.list()] == ["n.csv", "n.parquet"]


def test_pyarrow_reads_a_dataset_of_several_files_through_the_bridge() -> None:
    import pyarrow.dataset
    import pyarrow.parquet

    ws = InMemoryFilesystem()
    bridge = WorkspaceFileSystem(ws)
    for part in range(3):
        table = pyarrow.table({"part": [part] * 4, "value": list(range(4))})
        pyarrow.parquet.write_table(table, f"/table/part-{part}.parquet", filesystem=bridge)
    assert sorted(entry.name for entry in ws.list("table")) == [f"part-{n}.parquet" for n in range(3)]
    dataset = pyarrow.dataset.dataset("/table", filesystem=bridge, format="parquet")
    assert dataset.to_table().num_rows == 12


def test_duckdb_queries_and_writes_the_workspace_through_the_bridge() -> None:
    import duckdb

    ws = InMemoryFilesystem()
    ws.write("data/prices.csv", "item,price\napple,3\npear,5\n")
    connection = duckdb.connect()
    connection.register_filesystem(WorkspaceFileSystem(ws))
    assert connection.sql("select sum(price) from read_csv('workspace://data/prices.csv')").fetchall() == [(8,)]
    connection.sql("copy (select 42 as answer) to 'workspace://out/answer.parquet' (format parquet)")
    assert ws.read_bytes("out/answer.parquet", limit=4).content == b"PAR1"
    assert connection.sql("select answer from 'workspace://out/*.parquet'").fetchall() == [(42,)]
    connection.close()


# --- streaming in fixed memory -----------------------------------------------------------------------------


def _peak(action: Callable[[], None]) -> int:
    """Most bytes Python held at once while ``action`` ran (allocations counted, not time)."""
    gc.collect()
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _pattern(index: int) -> bytes:
    return bytes([index % 251]) * MIB


@pytest.mark.parametrize("kind", ["sqlite", "host"])
def test_a_large_file_streams_through_the_bridge_in_fixed_memory(kind: str, fast_tmp: Path) -> None:
    """64 MiB in and out through ``open``, ``put`` and ``get``: never more than 16 MiB held at once."""
    size_mib, allowance = 64, 16 * MIB
    scratch = Path(tempfile.mkdtemp(dir=fast_tmp))
    (scratch / "root").mkdir()
    ws = (
        open_filesystem(f"sqlite:///{scratch / 'ws.db'}?session=big")
        if kind == "sqlite"
        else HostFilesystem(scratch / "root")
    )
    bridge = WorkspaceFileSystem(ws)
    digest = hashlib.sha256()
    for index in range(size_mib):
        digest.update(_pattern(index))
    whole = digest.hexdigest()

    def write() -> None:
        with bridge.open("/big.bin", "wb") as handle:
            for index in range(size_mib):
                handle.write(_pattern(index))

    def read() -> None:
        digest = hashlib.sha256()
        with bridge.open("/big.bin", "rb") as handle:
            while chunk := handle.read(MIB):
                digest.update(chunk)
        assert digest.hexdigest() == whole

    assert _peak(write) < allowance
    assert ws.stat("big.bin").size_bytes == size_mib * MIB
    assert _peak(read) < allowance

    local = scratch / "local.bin"
    assert _peak(lambda: bridge.get("/big.bin", str(local))) < allowance
    assert local.stat().st_size == size_mib * MIB
    assert _peak(lambda: bridge.put(str(local), "/copy.bin")) < allowance
    assert bridge.checksum("/copy.bin") == bridge.checksum("/big.bin")
    middle = bridge.cat_file("/big.bin", start=10 * MIB - 2, end=10 * MIB + 2)
    assert middle == bytes([9]) * 2 + bytes([10]) * 2


def test_reading_a_large_file_from_memory_holds_one_block() -> None:
    ws = InMemoryFilesystem()
    with ws.open_write("big.bin") as writer:
        for index in range(48):
            writer.write(_pattern(index))
    bridge = WorkspaceFileSystem(ws)

    def read() -> None:
        total = 0
        with bridge.open("/big.bin", "rb") as handle:
            while chunk := handle.read(256 * 1024):
                total += len(chunk)
        assert total == 48 * MIB

    assert _peak(read) < 8 * MIB


def test_files_stream_through_the_workspaces_own_streams() -> None:
    ws = InMemoryFilesystem()
    ws.write_bytes("f.bin", bytes(range(256)) * 10)
    bridge = WorkspaceFileSystem(ws)
    with bridge.open("/f.bin", "rb", block_size=100) as handle:
        assert isinstance(handle, WorkspaceFile)
        assert handle.size == 2560
        handle.seek(250)
        assert handle.read(10) == bytes([250, 251, 252, 253, 254, 255, 0, 1, 2, 3])
        handle.seek(-2, 2)
        assert handle.read() == bytes([254, 255])
    assert bridge.cat_file("/f.bin", start=-3) == bytes([253, 254, 255])
    assert bridge.cat_file("/f.bin", start=5, end=2) == b""
    assert bridge.cat_file("/f.bin", start=2550, end=9999) == bytes(range(246, 256))


# --- writes are atomic ----------------------------------------------------------------------------------------


def test_a_write_appears_on_close_and_an_error_discards_it(bridge: WorkspaceFileSystem) -> None:
    ws = bridge.workspace
    bridge.pipe_file("/f.txt", b"old\n")
    with bridge.open("/f.txt", "wb") as handle:
        handle.write(b"new\n" * 1000)
        assert ws.read("f.txt").content == "old\n"  # nothing shows before the close
    assert ws.read_bytes("f.txt").content == b"new\n" * 1000

    for mode in ("wb", "w", "ab", "a"):
        with pytest.raises(RuntimeError, match="midway"), bridge.open("/f.txt", mode) as handle:
            handle.write(b"partial" if "b" in mode else "partial")
            raise RuntimeError("midway")
        assert ws.read_bytes("f.txt").content == b"new\n" * 1000, mode

    with pytest.raises(RuntimeError), bridge.open("/fresh.txt", "wb") as handle:
        handle.write(b"never")
        raise RuntimeError
    assert not bridge.exists("/fresh.txt")


def test_a_writer_dropped_unclosed_writes_nothing(bridge: WorkspaceFileSystem) -> None:
    bridge.pipe_file("/f.txt", b"kept")
    handle = bridge.open("/f.txt", "wb")
    handle.write(b"lost")
    del handle
    gc.collect()
    assert bridge.cat_file("/f.txt") == b"kept"


def test_create_mode_fails_at_open_and_append_appends(bridge: WorkspaceFileSystem) -> None:
    bridge.pipe_file("/f.txt", b"one\n")
    with pytest.raises(FileExistsError):
        bridge.open("/f.txt", "xb")
    with pytest.raises(FileExistsError):
        bridge.pipe_file("/f.txt", b"x", mode="create")
    with bridge.open("/f.txt", "a") as handle:
        handle.write("two\n")
    assert bridge.cat_file("/f.txt") == b"one\ntwo\n"
    with pytest.raises(NotImplementedError, match="rb, wb, xb or ab"):
        bridge.open("/f.txt", "r+b")


def test_a_transaction_commits_at_its_end_and_discards_on_error(bridge: WorkspaceFileSystem) -> None:
    bridge.pipe_file("/a.txt", b"old")
    with bridge.transaction:
        with bridge.open("/a.txt", "wb") as handle:
            handle.write(b"new")
        with bridge.open("/b.txt", "wb") as handle:
            handle.write(b"fresh")
        assert bridge.cat_file("/a.txt") == b"old" and not bridge.exists("/b.txt")
    assert bridge.cat_file("/a.txt") == b"new" and bridge.cat_file("/b.txt") == b"fresh"

    with pytest.raises(RuntimeError), bridge.transaction:
        with bridge.open("/a.txt", "wb") as handle:
            handle.write(b"newer")
        raise RuntimeError
    assert bridge.cat_file("/a.txt") == b"new"


# --- directories, listings, metadata -------------------------------------------------------------------------


def test_directories_are_real_and_listed_as_fsspec_expects(bridge: WorkspaceFileSystem) -> None:
    bridge.makedirs("/data/empty")
    bridge.pipe_file("/data/a.csv", b"x,y\n")
    assert bridge.info("/data")["type"] == "directory"
    assert bridge.info("workspace://data/a.csv") == bridge.info("data/a.csv")
    assert {k: bridge.info("/data/a.csv")[k] for k in ("name", "size", "type")} == {
        "name": "/data/a.csv",
        "size": 4,
        "type": "file",
    }
    assert bridge.ls("/data", detail=False) == ["/data/a.csv", "/data/empty"]
    assert bridge.ls("/data/a.csv", detail=False) == ["/data/a.csv"]  # a file lists as itself
    assert bridge.ls("/data/empty") == []
    assert bridge.isdir("/data/empty") and bridge.isfile("/data/a.csv") and not bridge.exists("/nope")
    assert bridge.find("") == ["/data/a.csv"]
    assert bridge.find("/", withdirs=True) == ["/data", "/data/a.csv", "/data/empty"]
    assert bridge.find("/data/a.csv") == ["/data/a.csv"]
    assert bridge.find("/missing") == []
    assert bridge.glob("/**/*.csv") == ["/data/a.csv"]
    assert list(bridge.walk("/data")) == [("/data", ["empty"], ["a.csv"]), ("/data/empty", [], [])]
    assert bridge.du("/data") == 4

    with pytest.raises(FileExistsError):
        bridge.mkdir("/data/empty")
    bridge.makedirs("/data/empty", exist_ok=True)
    with pytest.raises(FileExistsError):
        bridge.makedirs("/data/empty")
    with pytest.raises(OSError, match="empty"):
        bridge.rmdir("/data")  # not empty
    with pytest.raises(NotADirectoryError):
        bridge.rmdir("/data/a.csv")
    bridge.rmdir("/data/empty")
    assert not bridge.exists("/data/empty")
    with pytest.raises(IsADirectoryError):
        bridge.rm_file("/data")
    bridge.rm("/data", recursive=True)
    assert bridge.ls("/") == []


def test_move_is_the_workspaces_rename_and_copy_copies(bridge: WorkspaceFileSystem) -> None:
    bridge.pipe_file("/src/a.txt", b"a")
    bridge.pipe_file("/src/deep/b.txt", b"b")
    bridge.mv("/src", "/moved")  # a whole directory, without recursive=True, as the local filesystem does
    assert bridge.find("/") == ["/moved/a.txt", "/moved/deep/b.txt"]
    bridge.makedirs("/into")
    bridge.mv("/moved/a.txt", "/into")  # into an existing directory
    assert bridge.cat_file("/into/a.txt") == b"a"
    bridge.pipe_file("/into/c.txt", b"c")
    bridge.mv("/into/c.txt", "/into/a.txt")  # over a file, as fsspec's mv does
    assert bridge.cat_file("/into/a.txt") == b"c" and not bridge.exists("/into/c.txt")
    bridge.cp("/moved", "/copied", recursive=True)
    assert bridge.find("/copied") == ["/copied/deep/b.txt"]
    bridge.mv(["/copied/deep/b.txt"], ["/listed.txt"])  # lists go through fsspec's copy and delete
    assert bridge.cat_file("/listed.txt") == b"b" and not bridge.exists("/copied/deep/b.txt")
    with pytest.raises(FileNotFoundError):
        bridge.mv("/missing", "/x")


def test_times_keys_and_checksums(bridge: WorkspaceFileSystem) -> None:
    bridge.pipe_file("/a.txt", b"same")
    bridge.pipe_file("/b.txt", b"same")
    assert bridge.modified("/a.txt").tzinfo is not None
    if bridge.workspace.stat("a.txt").created_at is None:  # a host directory: Linux keeps no creation time
        with pytest.raises(NotImplementedError, match="created_at"):
            bridge.created("/a.txt")
    else:
        assert bridge.created("/a.txt") <= bridge.modified("/a.txt")
    assert bridge.ukey("/a.txt") == bridge.ukey("/b.txt")  # a content id: equal bytes, equal key
    assert bridge.checksum("/a.txt") == bridge.checksum("/b.txt")
    before = bridge.ukey("/a.txt")
    bridge.pipe_file("/a.txt", b"changed")
    assert bridge.ukey("/a.txt") != before
    assert isinstance(bridge.checksum("/a.txt"), int)
    bridge.makedirs("/d")
    assert bridge.ukey("/d")  # a directory has fsspec's own key
    bridge.touch("/a.txt", truncate=False)
    assert bridge.cat_file("/a.txt") == b"changed"
    bridge.touch("/a.txt")
    assert bridge.cat_file("/a.txt") == b""


# --- errors ------------------------------------------------------------------------------------------------


def test_errors_are_the_typed_built_ins_fsspec_expects(bridge: WorkspaceFileSystem) -> None:
    bridge.pipe_file("/f.txt", b"x")
    bridge.makedirs("/d")
    for action in (
        lambda: bridge.open("/missing.txt", "rb"),
        lambda: bridge.info("/missing.txt"),
        lambda: bridge.cat_file("/missing.txt"),
        lambda: bridge.rm("/missing.txt"),
    ):
        with pytest.raises(FileNotFoundError):
            action()
    with pytest.raises(IsADirectoryError):
        bridge.open("/d", "rb")
    with pytest.raises(IsADirectoryError):
        bridge.cat_file("/d")
    with pytest.raises(IsADirectoryError):
        bridge.pipe_file("/d", b"x")
    with pytest.raises(NotADirectoryError):
        bridge.pipe_file("/f.txt/child", b"x")
    with pytest.raises(PermissionError):
        bridge.rm("/d/..", recursive=True)  # the root is never deleted


def test_paths_go_through_the_workspaces_validator(bridge: WorkspaceFileSystem) -> None:
    with pytest.raises(PermissionError):
        bridge.cat_file("workspace://../outside.txt")
    with pytest.raises(PermissionError):
        bridge.pipe_file("/a/../../outside.txt", b"x")
    with pytest.raises(ValueError):
        bridge.pipe_file("/bad\x00name", b"x")
    with pytest.raises(ValueError):
        bridge.exists("/" + "/".join(["d"] * 40))
    assert WorkspaceFileSystem._strip_protocol("workspace://a//b/./c/") == "/a/b/c"
    assert WorkspaceFileSystem._strip_protocol("workspace:///") == ""


def test_bridge_paths_are_root_relative_whatever_the_mount_point() -> None:
    """fsspec names every path from the root; a mount point is the agent's view, not the data tool's."""
    ws = InMemoryFilesystem(mount_point="/workspace")
    bridge = WorkspaceFileSystem(ws)
    bridge.pipe_file("workspace://notes.md", b"n")
    assert ws.read("/workspace/notes.md").content == "n" and bridge.ls("/", detail=False) == ["/notes.md"]


def test_a_read_only_workspace_refuses_every_write(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    bridge = WorkspaceFileSystem(HostFilesystem(tmp_path, read_only=True))
    assert bridge.cat_file("/a.txt") == b"a"
    for action in (
        lambda: bridge.pipe_file("/b.txt", b"b"),
        lambda: bridge.open("/a.txt", "wb"),
        lambda: bridge.rm("/a.txt"),
        lambda: bridge.makedirs("/d"),
        lambda: bridge.mv("/a.txt", "/c.txt"),
    ):
        with pytest.raises(PermissionError):
            action()
    assert (tmp_path / "a.txt").read_text() == "a"


# --- the extra ------------------------------------------------------------------------------------------------


def _without_fsspec(code: str) -> subprocess.CompletedProcess[str]:
    prelude = "import sys\nsys.modules['fsspec'] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_package_does_not_import_fsspec_and_the_bridge_names_its_extra() -> None:
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, workspacefs\nprint('fsspec' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert imported.returncode == 0 and imported.stdout.strip() == "False", imported.stderr
    missing = _without_fsspec("import workspacefs.fsspec")
    assert missing.returncode == 1
    assert "ImportError" in missing.stderr and "workspacefs[fsspec]" in missing.stderr, missing.stderr


def test_append_mode_tells_positions_from_the_end_of_the_file(bridge: WorkspaceFileSystem) -> None:
    bridge.pipe_file("/log.txt", b"12345")
    with bridge.open("/log.txt", "ab") as handle:
        assert handle.tell() == 5  # as open(path, "ab") on a local file
        handle.write(b"678")
        assert handle.tell() == 8
    with bridge.open("/new.txt", "ab") as handle:
        assert handle.tell() == 0
    assert bridge.cat_file("/log.txt") == b"12345678"


def test_storage_options_are_the_workspaces_never_silently_dropped() -> None:
    opened = fsspec.filesystem("workspace", url="memory://", read_only="true")
    assert opened.workspace.read_only
    with pytest.raises(PermissionError):
        opened.pipe_file("/a.txt", b"x")
    with pytest.raises(ValueError, match="bogus"):
        fsspec.filesystem("workspace", url="memory://", bogus="1")
    with pytest.raises(TypeError, match="read_only"):
        fsspec.filesystem("workspace", fs=InMemoryFilesystem(), read_only=True)
    assert fsspec.filesystem("workspace", fs=InMemoryFilesystem(), use_listings_cache=False).ls("/") == []
