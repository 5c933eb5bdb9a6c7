"""Host snapshot strategies: what each must preserve, and what none may ever do."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from workspacefs import HostFilesystem, SnapshotRestoreError, SnapshotRetentionPolicy
from workspacefs.backends.host import ReflinkStrategy
from workspacefs.testing import SnapshotSuite

STRATEGIES = ["git", "archive", "copy"]


def tree(root: Path) -> dict[str, str]:
    """Every entry below ``root``: content hashes, link targets, 'dir', with permission bits."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = "link:" + os.readlink(path)
        elif path.is_dir():
            found[key] = f"dir {stat.S_IMODE(path.stat().st_mode):o}"
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            found[key] = f"{digest} {stat.S_IMODE(path.stat().st_mode):o}"
    return found


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "ws"
    root.mkdir()
    return root, tmp_path / "snapshots"


def open_fs(dirs: tuple[Path, Path], strategy: str | None = None, **options: object) -> HostFilesystem:
    root, snapshots = dirs
    return HostFilesystem(root, snapshot_dir=snapshots, snapshot_strategy=strategy, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_nothing_is_written_inside_the_root(dirs: tuple[Path, Path], strategy: str) -> None:
    root, _ = dirs
    with open_fs(dirs, strategy) as fs:
        fs.write("a.txt", "a")
        before = tree(root)
        snapshot = fs.snapshot()
        assert tree(root) == before
        fs.write("a.txt", "changed")
        fs.restore(snapshot)
        assert tree(root) == before


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_ignored_files_are_captured_and_restored(dirs: tuple[Path, Path], strategy: str) -> None:
    root, _ = dirs
    with open_fs(dirs, strategy) as fs:
        fs.write(".gitignore", "*.log\nbuild/\n.env\n")
        fs.write("debug.log", "log line\n")
        fs.write("build/out.bin", "artifact")
        fs.write(".env", "SECRET=1")
        fs.write("src/main.py", "print(1)\n")
        expected = tree(root)
        snapshot = fs.snapshot()
        for path in ("debug.log", ".env"):
            fs.delete(path)
        fs.delete("build", recursive=True)
        fs.write("debug.log.new", "x")
        fs.restore(snapshot)
        assert tree(root) == expected


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_workspace_that_is_a_git_repository_round_trips(dirs: tuple[Path, Path], strategy: str) -> None:
    root, _ = dirs
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True, env=env)
    (root / "file.txt").write_text("v1\n")
    (root / ".gitignore").write_text("ignored.txt\n")
    (root / "ignored.txt").write_text("ignored but captured\n")
    subprocess.run([*git, "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "first"], cwd=root, check=True, env=env)
    expected = tree(root)
    with open_fs(dirs, strategy) as fs:
        snapshot = fs.snapshot(tag="repo")
        (root / "file.txt").write_text("v2\n")
        subprocess.run([*git, "commit", "-qam", "second"], cwd=root, check=True, env=env)
        fs.delete(".git/index")
        fs.write(".git/HEAD", "garbage")
        fs.restore(snapshot)
    assert tree(root) == expected
    log = subprocess.run([*git, "log", "--format=%s"], cwd=root, check=True, env=env, capture_output=True, text=True)
    assert log.stdout.split() == ["first"]
    status = subprocess.run([*git, "status", "--porcelain"], cwd=root, check=True, env=env, capture_output=True)
    assert status.stdout == b""


def test_git_environment_variables_are_ignored(
    dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoy = tmp_path / "decoy"
    for name, value in {
        "GIT_DIR": decoy / "gitdir",
        "GIT_WORK_TREE": decoy / "worktree",
        "GIT_INDEX_FILE": decoy / "index",
        "GIT_OBJECT_DIRECTORY": decoy / "objects",
        "GIT_CONFIG_PARAMETERS": "'core.bare'='true'",
    }.items():
        monkeypatch.setenv(name, str(value))
    _root, _ = dirs
    with open_fs(dirs, "git") as fs:
        fs.write("a.txt", "a")
        snapshot = fs.snapshot()
        fs.write("a.txt", "b")
        fs.restore(snapshot)
        assert fs.read("a.txt").content == "a"
    assert not decoy.exists()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_permissions_and_times_are_restored(dirs: tuple[Path, Path], strategy: str) -> None:
    root, _ = dirs
    with open_fs(dirs, strategy) as fs:
        fs.write("run.sh", "#!/bin/sh\necho hi\n")
        os.chmod(root / "run.sh", 0o750)
        os.utime(root / "run.sh", ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
        snapshot = fs.snapshot()
        os.chmod(root / "run.sh", 0o600)
        fs.write("run.sh", "rm -rf /\n")
        fs.restore(snapshot)
        info = (root / "run.sh").stat()
        assert stat.S_IMODE(info.st_mode) == 0o750
        assert info.st_mtime_ns == 1_600_000_000_000_000_000
        assert fs.diff(snapshot).is_empty


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_restore_removes_links_and_special_files_made_since(dirs: tuple[Path, Path], strategy: str) -> None:
    root, _ = dirs
    with open_fs(dirs, strategy) as fs:
        fs.write("keep.txt", "keep")
        snapshot = fs.snapshot()
        os.symlink("/etc", root / "link")
        os.mkfifo(root / "fifo")
        (root / ("z" * 100)).write_text("a name the protocol cannot show")
        fs.restore(snapshot)
        assert sorted(p.name for p in root.iterdir()) == ["keep.txt"]


def test_restore_skips_unchanged_files(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    with open_fs(dirs, "git") as fs:
        fs.write("same.txt", "same")
        os.utime(root / "same.txt", ns=(1_600_000_000_000_000_000,) * 2)
        fs.write("changed.txt", "old")
        snapshot = fs.snapshot()
        inode = (root / "same.txt").stat().st_ino
        fs.write("changed.txt", "new")
        fs.restore(snapshot)
        assert (root / "same.txt").stat().st_ino == inode  # not rewritten
        assert (root / "changed.txt").read_text() == "old"


OLD_NS = 1_600_000_000_000_000_000
NEW_NS = 1_700_000_000_000_000_000


def check_shared_inodes_are_left_alone(fs: HostFilesystem, outside: Path) -> None:
    """Workspace files hard-linked to files outside the root: a restore gives the workspace names their
    snapshotted mode, time and content, and never changes the inode they share with the outside."""
    root = Path(fs.root)
    outside.mkdir()
    for name in ("mode.txt", "time.txt", "content.txt"):
        (outside / name).write_text(f"{name} as snapshotted\n")
        os.chmod(outside / name, 0o640)
        os.utime(outside / name, ns=(OLD_NS, OLD_NS))
        os.link(outside / name, root / name)
    snapshot = fs.snapshot()
    os.chmod(outside / "mode.txt", 0o600)  # the time stays: restore trusts it and fixes the mode only
    os.chmod(outside / "time.txt", 0o600)
    os.utime(outside / "time.txt", ns=(NEW_NS, NEW_NS))  # same content, other time: content decides
    (outside / "content.txt").write_text("changed outside, through the shared inode\n")
    before = {name: (outside / name).stat() for name in ("mode.txt", "time.txt", "content.txt")}
    contents = {name: (outside / name).read_bytes() for name in before}
    fs.restore(snapshot)
    for name, info in before.items():
        after = (outside / name).stat()
        assert (after.st_ino, stat.S_IMODE(after.st_mode), after.st_mtime_ns) == (
            info.st_ino,
            stat.S_IMODE(info.st_mode),
            info.st_mtime_ns,
        ), name
        assert (outside / name).read_bytes() == contents[name]
        inside = (root / name).stat()
        assert inside.st_ino != info.st_ino and inside.st_nlink == 1
        assert (stat.S_IMODE(inside.st_mode), inside.st_mtime_ns) == (0o640, OLD_NS)
        assert (root / name).read_text() == f"{name} as snapshotted\n"
    assert fs.diff(snapshot).is_empty


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_restore_never_changes_an_inode_shared_with_the_outside(
    dirs: tuple[Path, Path], strategy: str, tmp_path: Path
) -> None:
    with open_fs(dirs, strategy) as fs:
        check_shared_inodes_are_left_alone(fs, tmp_path / "outside")


def test_snapshots_persist_across_processes(dirs: tuple[Path, Path]) -> None:
    root, snapshots = dirs
    script = textwrap.dedent(
        f"""
        from workspacefs import HostFilesystem
        fs = HostFilesystem({str(root)!r}, snapshot_dir={str(snapshots)!r})
        fs.write("a.txt", "from the first process")
        print(fs.snapshot(tag="first-process").snapshot_id)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    snapshot_id = result.stdout.strip()
    with open_fs(dirs) as fs:
        [snapshot] = fs.snapshots()
        assert str(snapshot.snapshot_id) == snapshot_id
        assert snapshot.tag == "first-process"
        fs.write("a.txt", "changed later")
        fs.write("b.txt", "added later")
        assert fs.diff(snapshot).added == ("b.txt",)
        fs.restore(snapshot)
        assert fs.read("a.txt").content == "from the first process"
        assert not fs.exists("b.txt")


def test_processes_opening_a_new_root_at_once_share_one_git_repository(tmp_path: Path) -> None:
    root, snapshots, go = tmp_path / "root", tmp_path / "snapshots", tmp_path / "go"
    root.mkdir()
    opener = textwrap.dedent(
        f"""
        import os, sys, time
        from workspacefs import HostFilesystem
        while not os.path.exists({str(go)!r}):
            time.sleep(0.001)
        fs = HostFilesystem({str(root)!r}, snapshot_dir={str(snapshots)!r}, snapshot_strategy="git")
        fs.write(sys.argv[1] + ".txt", sys.argv[1])
        fs.snapshot(tag=sys.argv[1])
        """
    )
    started = [subprocess.Popen([sys.executable, "-c", opener, f"p{n}"], stderr=subprocess.PIPE) for n in range(4)]
    go.touch()  # all at once: each finds no repository yet and makes one
    for process in started:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
    fs = HostFilesystem(root, snapshot_dir=snapshots, snapshot_strategy="git")
    assert sorted(s.tag for s in fs.snapshots() if s.tag) == ["p0", "p1", "p2", "p3"]
    assert not list(snapshots.glob(".git-init-*"))
    fs.close()


def test_retention_prunes_snapshots_and_their_data(dirs: tuple[Path, Path]) -> None:
    _, snapshots = dirs
    policy = SnapshotRetentionPolicy(max_count=2)
    with open_fs(dirs, "copy", retention=policy) as fs:
        tagged = fs.snapshot(tag="keep me")
        taken = []
        for index in range(4):
            fs.write("counter.txt", str(index))
            taken.append(fs.snapshot())
        kept = fs.snapshots()
        assert [s.snapshot_id for s in kept] == [tagged.snapshot_id, *[s.snapshot_id for s in taken[-2:]]]
        assert sorted(p.name for p in (snapshots / "data").iterdir()) == sorted(str(s.snapshot_id) for s in kept)
        with pytest.raises(Exception, match="No snapshot"):
            fs.restore(taken[0])


def test_snapshot_dir_inside_the_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside"):
        HostFilesystem(tmp_path, snapshot_dir=tmp_path / "snaps")


def test_unavailable_strategy_is_refused_and_auto_falls_back(dirs: tuple[Path, Path]) -> None:
    root, snapshots = dirs
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        reflinks = ReflinkStrategy.available(root_fd, snapshots)  # the backend's own detection
    finally:
        os.close(root_fd)
    if reflinks:  # this temporary directory clones: then auto must choose reflinks
        with open_fs(dirs) as fs:
            assert fs.snapshot_strategy == "reflink"
        return
    with pytest.raises(ValueError, match="reflink"):
        open_fs(dirs, "reflink")
    with open_fs(dirs) as fs:
        assert fs.snapshot_strategy == "git"


@pytest.mark.parametrize(
    ("first", "second"), [("archive", "git"), ("git", "archive"), ("copy", "git"), ("git", "copy"), ("archive", "copy")]
)
def test_snapshots_of_different_strategies_compare_by_content(dirs: tuple[Path, Path], first: str, second: str) -> None:
    """Same size, other times, digests of different kinds: content decides (every strategy can be read)."""
    root, _ = dirs
    with open_fs(dirs, first) as fs:
        fs.write("changed.txt", "aaaa")
        fs.write("same.txt", "ssss")
        for name in ("changed.txt", "same.txt"):
            os.utime(root / name, ns=(1_000_000_000, 1_000_000_000))
        before = fs.snapshot()
    with open_fs(dirs, second) as fs:
        fs.write("changed.txt", "bbbb")
        os.utime(root / "changed.txt", ns=(2_000_000_000, 2_000_000_000))
        os.utime(root / "same.txt", ns=(3_000_000_000, 3_000_000_000))
        after = fs.snapshot()
        changes = fs.diff(before, after)
    assert changes.modified == ("changed.txt",) and changes.unchanged_count == 1


@pytest.mark.parametrize(
    "member",
    [
        ("../escape.txt", tarfile.REGTYPE),
        ("/abs/escape.txt", tarfile.REGTYPE),
        ("link", tarfile.SYMTYPE),
        ("hard", tarfile.LNKTYPE),
        ("a/../../escape.txt", tarfile.REGTYPE),
    ],
)
def test_archive_extraction_refuses_unsafe_members(
    dirs: tuple[Path, Path], tmp_path: Path, member: tuple[str, bytes]
) -> None:
    root, snapshots = dirs
    with open_fs(dirs, "archive") as fs:
        fs.write("a.txt", "a")
        snapshot = fs.snapshot()
        fs.write("a.txt", "changed")
        archive = snapshots / "data" / f"{snapshot.snapshot_id}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            info = tarfile.TarInfo(member[0])
            info.type = member[1]
            info.linkname = "/etc/passwd"
            data = b"evil"
            info.size = len(data) if member[1] == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if member[1] == tarfile.REGTYPE else None)
            good = tarfile.TarInfo("a.txt")
            good.size = 1
            tar.addfile(good, io.BytesIO(b"a"))
        with pytest.raises(SnapshotRestoreError):
            fs.restore(snapshot)
    assert not (tmp_path / "escape.txt").exists()
    assert not (root.parent / "escape.txt").exists()
    assert not os.path.lexists(root / "link")


class TestReflinkSnapshots(SnapshotSuite):
    """The reflink strategy on a real XFS filesystem, through the snapshot part of the suite."""

    model_examples = 10

    @pytest.fixture(autouse=True)
    def _xfs(self, xfs_mount: Path) -> None:
        self.xfs = xfs_mount

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> HostFilesystem:
        index = len(list(self.xfs.iterdir()))
        root = self.xfs / f"ws-{index}"
        root.mkdir()
        fs = HostFilesystem(root, read_only=read_only, mount_point=mount_point, snapshot_dir=self.xfs / f"snap-{index}")
        assert fs.snapshot_strategy == "reflink"  # detected, never assumed
        return fs

    def test_restore_never_changes_an_inode_shared_with_the_outside(self) -> None:
        with self.create_filesystem() as fs:
            check_shared_inodes_are_left_alone(fs, self.xfs / f"outside-{len(list(self.xfs.iterdir()))}")

    def test_clones_share_extents(self) -> None:
        fs = self.make_snapshotable()
        fs.write_bytes("big.bin", os.urandom(4 * 1024 * 1024))
        before = _used_bytes(self.xfs)
        snapshot = fs.snapshot()
        assert _used_bytes(self.xfs) - before < 1024 * 1024  # a clone, not a 4 MiB copy
        fs.write_bytes("big.bin", b"different")
        fs.restore(snapshot)
        assert fs.stat("big.bin").size_bytes == 4 * 1024 * 1024
        assert fs.diff(snapshot).is_empty


def _used_bytes(mount: Path) -> int:
    info = os.statvfs(mount)
    return (info.f_blocks - info.f_bfree) * info.f_frsize
