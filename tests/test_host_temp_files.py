"""A host writer killed mid-stream strands nothing in the workspace, and the next open reaps what a named
temporary file of a dead writer left; a live writer's file is never touched (issue 14, faults)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import missing

from workspacefs import HostFilesystem
from workspacefs.backends.host._temps import TMPFILE_UNSUPPORTED, current_writer, registry_dir

MIB = 1024 * 1024
OLD = b"the old content\n"

WRITER = textwrap.dedent(
    """
    import sys
    from workspacefs import HostFilesystem
    root, snapshots, path, temps = sys.argv[1:5]
    fs = HostFilesystem(root, snapshot_dir=snapshots, use_tmpfile=None if temps == "auto" else False)
    with fs.open_write(path) as writer:
        for _ in range(9):
            writer.write(b"n" * (1 << 20))
        print("streaming", flush=True)
        sys.stdin.readline()  # the parent kills it here, or lets it go on
        writer.write(b"end")
    print("committed", flush=True)
    """
)


class Writer:
    """A real child process streaming 9 MiB into ``path`` through ``open_write``, stopped mid-stream."""

    def __init__(self, root: Path, snapshots: Path, path: str, temps: str) -> None:
        command = [sys.executable, "-c", WRITER, str(root), str(snapshots), path, temps]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # synchronised by the pipe, never by time
        if line != "streaming\n":
            _, errors = self.process.communicate()
            pytest.fail(f"the writer did not start: {errors}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        self.process.kill()  # SIGKILL: no clean-up of any kind runs
        self.process.wait()

    def finish(self) -> None:
        out, errors = self.process.communicate("go on\n")
        assert out == "committed\n", errors


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Registries under this test's own cache (children inherit the variable)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(directory))
    return directory


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "ws"
    root.mkdir()
    return root, tmp_path / "snapshots"


@pytest.fixture
def writers() -> Iterator[list[Writer]]:
    """Children still running when a test fails are killed."""
    started: list[Writer] = []
    yield started
    for writer in started:
        if writer.process.poll() is None:
            writer.kill()


def temp_files(root: Path) -> list[Path]:
    """Every temporary file of a writer anywhere below ``root`` (what git, a container or a quota sees)."""
    return [Path(d, f) for d, _, files in os.walk(root) for f in files if f.startswith(".wsfs-tmp-")]


def registry(dirs: tuple[Path, Path]) -> Path:
    root, snapshots = dirs
    return registry_dir(os.path.realpath(root), Path(os.path.realpath(snapshots)))


def open_fs(dirs: tuple[Path, Path], **options: object) -> HostFilesystem:
    root, snapshots = dirs
    return HostFilesystem(root, snapshot_dir=snapshots, **options)  # type: ignore[arg-type]


def start(writers: list[Writer], dirs: tuple[Path, Path], path: str, temps: str) -> Writer:
    root, snapshots = dirs
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(OLD)
    writer = Writer(root, snapshots, path, temps)
    writers.append(writer)
    return writer


def fake_writer(
    dirs: tuple[Path, Path], *, boot: str | None = None, pidns: int = 0, pid: int = 0, start: int = 0
) -> str:
    """Register a writer that this process did not start (its token), the way a real one registers."""
    me = current_writer()
    assert me is not None, "these tests need /proc"
    token = f"{boot or me.boot}-{pidns or me.pidns:x}-{pid or 1:x}-{start:x}"
    registry(dirs).mkdir(parents=True, exist_ok=True)
    (registry(dirs) / token).touch()
    return token


def test_a_killed_writer_leaves_the_old_content_and_nothing_in_the_workspace(
    dirs: tuple[Path, Path], writers: list[Writer]
) -> None:
    root, _ = dirs
    try:
        os.close(os.open(root, os.O_TMPFILE | os.O_WRONLY, 0o600))
    except OSError as exc:
        if exc.errno not in TMPFILE_UNSUPPORTED:
            raise
        missing("this filesystem has no O_TMPFILE")
    writer = start(writers, dirs, "big.bin", "auto")
    assert temp_files(root) == []  # 9 MiB written, and no name for it anywhere
    writer.kill()
    assert (root / "big.bin").read_bytes() == OLD
    assert temp_files(root) == []
    with open_fs(dirs) as fs:
        assert fs.reaped.writers_listed == 0 and fs.reaped.directories_scanned == 0  # nothing was registered


def test_a_killed_named_writer_is_reaped_by_the_next_open(dirs: tuple[Path, Path], writers: list[Writer]) -> None:
    root, _ = dirs
    writer = start(writers, dirs, "deep/er/big.bin", "named")
    writer.kill()
    assert (root / "deep/er/big.bin").read_bytes() == OLD
    [stranded] = temp_files(root)  # what the fallback leaves when killed
    assert stranded.stat().st_size == 9 * MIB
    with open_fs(dirs) as fs:
        assert (fs.reaped.writers_reaped, fs.reaped.files_removed) == (1, 1)
        assert fs.read_bytes("deep/er/big.bin").content == OLD
    assert temp_files(root) == []
    with open_fs(dirs) as fs:  # the dead writer was dropped: the next open walks nothing
        assert (fs.reaped.writers_listed, fs.reaped.directories_scanned) == (0, 0)


def test_a_live_writers_temporary_file_is_never_reaped(dirs: tuple[Path, Path], writers: list[Writer]) -> None:
    root, _ = dirs
    live = start(writers, dirs, "live.bin", "named")
    start(writers, dirs, "dead.bin", "named").kill()  # so that the open below does walk the tree
    [dead_temp] = [p for p in temp_files(root) if f"-{live.pid:x}-" not in p.name]
    with open_fs(dirs) as fs:
        assert fs.reaped.writers_listed == 2 and fs.reaped.files_removed == 1
        assert fs.reaped.directories_scanned >= 1
    assert not dead_temp.exists()
    [live_temp] = temp_files(root)
    assert live_temp.stat().st_size == 9 * MIB
    live.finish()  # and the live writer commits as if nothing happened
    assert (root / "live.bin").read_bytes() == b"n" * 9 * MIB + b"end"
    assert temp_files(root) == []
    assert not registry(dirs).exists()  # a clean exit unregisters (and the emptied registry goes)


def test_a_reused_pid_is_not_mistaken_for_its_writer(dirs: tuple[Path, Path], writers: list[Writer]) -> None:
    """A registered writer whose pid now belongs to another process (another start time) is dead."""
    root, _ = dirs
    live = start(writers, dirs, "live.bin", "named")
    stat_fields = Path(f"/proc/{live.pid}/stat").read_bytes().rpartition(b")")[2].split()
    token = fake_writer(dirs, pid=live.pid, start=int(stat_fields[19]) + 1)
    (root / f".wsfs-tmp-{token}-0").write_bytes(b"left by the pid's former owner")
    with open_fs(dirs) as fs:
        assert fs.reaped.writers_reaped == 1 and fs.reaped.files_removed == 1
    [kept] = temp_files(root)
    assert f"-{live.pid:x}-" in kept.name
    live.finish()
    assert (root / "live.bin").stat().st_size == 9 * MIB + 3


def test_a_writer_of_another_pid_namespace_is_never_judged(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    me = current_writer()
    assert me is not None
    token = fake_writer(dirs, pidns=me.pidns + 1, pid=0x7FFFFFFF)
    (root / f".wsfs-tmp-{token}-0").write_bytes(b"maybe still being written")
    with open_fs(dirs) as fs:
        assert (fs.reaped.writers_listed, fs.reaped.directories_scanned) == (1, 0)
    assert len(temp_files(root)) == 1


def test_concurrent_opens_reap_a_dead_writer_once(dirs: tuple[Path, Path]) -> None:
    """Whoever holds a dead writer's entry reaps it; another open leaves it to them."""
    root, _ = dirs
    token = fake_writer(dirs, boot="000000000000")  # a writer of an earlier boot: certainly dead
    (root / f".wsfs-tmp-{token}-0").write_bytes(b"stale")
    held = os.open(registry(dirs) / token, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # as another process reaping it right now would
        with open_fs(dirs) as fs:
            assert (fs.reaped.writers_reaped, fs.reaped.directories_scanned) == (0, 0)
        assert len(temp_files(root)) == 1
    finally:
        os.close(held)
    with open_fs(dirs) as fs:
        assert fs.reaped.files_removed == 1
    assert temp_files(root) == []


def test_the_reaper_never_leaves_the_root(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = dirs
    token = fake_writer(dirs, boot="000000000000")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f".wsfs-tmp-{token}-0").write_bytes(b"not ours to remove")
    os.symlink(outside, root / "link")
    (root / "sub").mkdir()
    (root / "sub" / f".wsfs-tmp-{token}-1").write_bytes(b"stale")
    with open_fs(dirs) as fs:
        assert fs.reaped.files_removed == 1
    assert (outside / f".wsfs-tmp-{token}-0").exists()
    assert temp_files(root) == []


def test_a_read_only_open_removes_nothing(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    token = fake_writer(dirs, boot="000000000000")
    (root / f".wsfs-tmp-{token}-0").write_bytes(b"stale")
    with open_fs(dirs, read_only=True) as fs:
        assert fs.reaped.directories_scanned == 0
    assert len(temp_files(root)) == 1


@pytest.mark.parametrize("temps", [None, False])
def test_every_write_path_leaves_no_temporary_name(dirs: tuple[Path, Path], temps: bool | None) -> None:
    """Create, overwrite, stream, copy, a failed stream and a restore, anonymous or named: nothing stays,
    and a process registers once however often it writes."""
    root, _ = dirs
    with open_fs(dirs, use_tmpfile=temps, snapshot_strategy="copy") as fs:
        fs.write("a.txt", "one", mode="create")
        with pytest.raises(FileExistsError):
            fs.write("a.txt", "two", mode="create")
        with pytest.raises(FileExistsError), fs.open_write("a.txt", mode="create") as writer:
            writer.write(b"never seen")
        os.chmod(root / "a.txt", 0o640)
        snapshot = fs.snapshot()
        for index in range(5):
            fs.write("a.txt", f"overwrite {index}")
        assert (root / "a.txt").stat().st_mode & 0o777 == 0o640  # an overwrite keeps the permissions
        with fs.open_write("b.txt") as writer:
            writer.write(b"streamed")
        with pytest.raises(RuntimeError), fs.open_write("b.txt") as writer:
            writer.write(b"abandoned")
            raise RuntimeError("the caller gives up")
        fs.copy("b.txt", "c.txt")
        fs.restore(snapshot)
        assert fs.read("a.txt").content == "one" and not fs.exists("b.txt")
        assert temp_files(root) == []
        me = current_writer()
        assert me is not None
        assert sorted(p.name for p in registry(dirs).iterdir()) == [me.token]
