"""``ContainerSandbox`` on real Podman: commands, timeouts, output caps, hardening, links made inside the
container, bad input, lifecycle and crash clean-up, snapshots of every strategy, Docker through Podman."""

from __future__ import annotations

import gc
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import missing

from workspacefs import (
    PathEscapeError,
    ReadOnlyError,
    SandboxError,
    SnapshotNotFoundError,
    SnapshotRestoreError,
    SymlinkRefusedError,
    UnsupportedOperationError,
    open_filesystem,
    tools_for,
)
from workspacefs.backends.container import ContainerFilesystem, ContainerSandbox
from workspacefs.backends.container._runtime import LABEL, Runtime, owner_tag
from workspacefs.testing._containers import docker_via_podman


@pytest.fixture
def sandbox(image: str, tmp_path: Path) -> Iterator[ContainerSandbox]:
    with ContainerSandbox(image, snapshot_dir=tmp_path / "snapshots") as opened:
        yield opened


def _containers(*, every: bool = False) -> set[str]:
    """The sandbox containers of this process (of every process with ``every``: tests run in parallel)."""
    mine = [] if every else ["--filter", f"label=workspacefs.pid={os.getpid()}"]
    done = subprocess.run(
        ["podman", "ps", "-a", "--filter", f"label={LABEL}=1", *mine, "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(done.stdout.split())


# --- commands -----------------------------------------------------------------------------------------


def test_a_list_is_argv_and_a_string_is_sh_inside(sandbox: ContainerSandbox) -> None:
    literal = sandbox.exec(["echo", "a; rm -rf /workspace; $(id)"])
    assert (literal.exit_code, literal.stdout) == (0, "a; rm -rf /workspace; $(id)\n")
    shell = sandbox.exec("echo $((6 * 7)) && pwd")
    assert shell.stdout == "42\n/workspace\n" and shell.stderr == "" and not shell.timed_out
    assert sandbox.exec("exit 3").exit_code == 3
    missing_command = sandbox.exec("no-such-command --flag")
    assert missing_command.exit_code == 127 and "not found" in missing_command.stderr


def test_files_cross_between_the_api_and_the_container(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    fs.write("/workspace/src/main.sh", "echo built > out/result.txt\n")
    fs.mkdir("out")
    assert sandbox.exec("sh src/main.sh").exit_code == 0
    assert fs.read("/workspace/out/result.txt").content == "built\n"
    assert sandbox.exec(["cat", "src/main.sh"]).stdout == "echo built > out/result.txt\n"


def test_cwd_env_and_stdin(sandbox: ContainerSandbox) -> None:
    sandbox.filesystem.mkdir("a/b")
    assert sandbox.exec("pwd", cwd="a/b").stdout == "/workspace/a/b\n"
    assert sandbox.exec("pwd", cwd="/workspace/a").stdout == "/workspace/a\n"
    assert sandbox.exec("echo $GREETING", env={"GREETING": "hello there"}).stdout == "hello there\n"
    assert sandbox.exec(["wc", "-c"], stdin=b"12345").stdout.strip() == "5"
    with pytest.raises(FileNotFoundError):
        sandbox.exec("pwd", cwd="nowhere")
    with pytest.raises(NotADirectoryError):
        sandbox.filesystem.write("f.txt", "x")
        sandbox.exec("pwd", cwd="f.txt")
    with pytest.raises(PathEscapeError):
        sandbox.exec("pwd", cwd="../..")
    with pytest.raises(ValueError):
        sandbox.exec("true", env={"BAD NAME": "x"})
    with pytest.raises(ValueError):
        sandbox.exec("")
    with pytest.raises(ValueError):
        sandbox.exec("true", timeout=0)


def test_a_timeout_kills_the_whole_process_group_and_the_sandbox_stays_usable(sandbox: ContainerSandbox) -> None:
    result = sandbox.exec("sleep 300 & sleep 301 & echo started; wait", timeout=1)
    assert result.timed_out and result.stdout == "started\n"
    processes = sandbox.exec("ps -o args").stdout
    assert "sleep 300" not in processes and "sleep 301" not in processes
    assert sandbox.exec("echo still here").stdout == "still here\n"


def test_output_keeps_head_and_tail_and_says_what_was_cut(sandbox: ContainerSandbox) -> None:
    result = sandbox.exec("echo FIRST; yes middle | head -c 3000000; echo; echo LAST", max_output=4096)
    assert result.truncated and result.exit_code == 0
    assert result.stdout.startswith("FIRST\n") and result.stdout.endswith("LAST\n")
    assert "bytes cut]" in result.stdout and len(result.stdout) < 4096 + 100
    quiet = sandbox.exec("echo small", max_output=4096)
    assert not quiet.truncated and quiet.stdout == "small\n"


def test_the_container_is_hardened(sandbox: ContainerSandbox) -> None:
    status = sandbox.exec("cat /proc/self/status").stdout
    assert "CapEff:\t0000000000000000" in status and "NoNewPrivs:\t1" in status
    interfaces = sandbox.exec("cat /proc/net/dev").stdout
    assert [line.split(":")[0].strip() for line in interfaces.splitlines()[2:]] == ["lo"]  # no network
    inspected = subprocess.run(
        ["podman", "inspect", "--format", "{{.HostConfig.PidsLimit}} {{.HostConfig.NetworkMode}}", sandbox.name],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert inspected == ["256", "none"]
    mounts = subprocess.run(
        ["podman", "inspect", "--format", "{{range .Mounts}}{{.Source}}>{{.Destination}};{{end}}", sandbox.name],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert mounts == f"{sandbox.host_dir}>/workspace;"  # the only host path the container can write


def test_links_made_inside_the_container_never_lead_out(sandbox: ContainerSandbox) -> None:
    made = sandbox.exec("ln -s /etc/passwd passwd; ln -s / root; ln -s /etc etc; mkdir d; ln -s /etc d/inner")
    assert made.exit_code == 0
    fs = sandbox.filesystem
    assert [entry.name for entry in fs.list()] == ["d"]  # links are not listed
    for path in ("passwd", "root/etc/passwd", "etc/passwd", "d/inner/passwd"):
        with pytest.raises(PermissionError):
            fs.read(path)
    with pytest.raises(SymlinkRefusedError):
        fs.write("etc/evil", "x")
    assert not Path("/etc/evil").exists()
    assert fs.grep("root:") == () and [m.path for m in fs.glob("**/*")] == []
    fs.delete("etc")  # the link goes, never its target
    assert Path("/etc/passwd").exists()


# --- bad input and lifecycle ----------------------------------------------------------------------------


def test_a_missing_runtime_names_what_to_install(image: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without podman
    with pytest.raises(SandboxError, match="apt-get install -y podman"):
        ContainerSandbox(image)


def test_an_image_that_does_not_exist_is_a_clear_error(image: str) -> None:
    before = _containers()
    with pytest.raises(SandboxError, match="not in podman's local storage"):
        ContainerSandbox("localhost/no-such-image:404")
    assert _containers() == before


def test_a_container_that_died_is_an_error_and_the_files_stay(sandbox: ContainerSandbox) -> None:
    sandbox.filesystem.write("kept.txt", "kept")
    subprocess.run(["podman", "kill", sandbox.name], capture_output=True, check=True)
    with pytest.raises(SandboxError):
        sandbox.exec("true")
    assert sandbox.filesystem.read("kept.txt").content == "kept"


def test_a_workspace_directory_that_vanished_is_said_plainly(image: str, tmp_path: Path) -> None:
    workspace = tmp_path / "vanishing"
    workspace.mkdir()
    with ContainerSandbox(image, host_dir=workspace, snapshot_dir=tmp_path / "s") as sandbox:
        sandbox.filesystem.write("a.txt", "a")
        # the sandbox's own nosuid bind mount over it (as root) goes first, as any rm -rf of a mount would
        subprocess.run(["umount", "--lazy", str(workspace)], capture_output=True, check=False)
        shutil.rmtree(workspace)
        with pytest.raises(SandboxError, match="workspace directory was removed"):
            sandbox.exec("ls")
        with pytest.raises(FileNotFoundError):
            sandbox.filesystem.read("a.txt")


def test_the_command_line_works_on_a_podman_workspace(image: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from workspacefs.cli import main

    url = f"podman://{image}?host_dir={tmp_path}"
    before = _containers()
    written = CliRunner().invoke(main, ["write", "notes.txt", "--fs", url], input=b"kept\n", catch_exceptions=False)
    assert written.exit_code == 0, written.stderr
    shown = CliRunner().invoke(main, ["cat", "notes.txt", "--fs", url], catch_exceptions=False)
    assert shown.exit_code == 0 and shown.stdout == "kept\n"
    assert (tmp_path / "notes.txt").read_text() == "kept\n"
    gc.collect()  # the filesystems the commands opened are gone: so are their containers
    assert _containers() == before


def test_close_removes_the_container_and_is_idempotent(image: str, tmp_path: Path) -> None:
    given = tmp_path / "mine"
    given.mkdir()
    sandbox = ContainerSandbox(image, host_dir=given)
    sandbox.filesystem.write("stays.txt", "mine")
    assert sandbox.name in _containers()
    sandbox.close()
    sandbox.close()
    assert sandbox.name not in _containers()
    assert (given / "stays.txt").read_text() == "mine"  # a given directory is never removed
    temporary = ContainerSandbox(image)
    made = Path(temporary.host_dir)
    temporary.close()
    assert not made.exists()  # the sandbox's own temporary workspace goes with it
    with pytest.raises(SandboxError):
        temporary.exec("true")


def test_a_crashed_process_leaves_no_container_after_the_next_start(image: str) -> None:
    crash = textwrap.dedent(
        f"""
        import os
        from workspacefs.backends.container import ContainerSandbox
        from workspacefs.backends.container._runtime import owner_tag
        sandbox = ContainerSandbox({image!r})
        print(sandbox.name, owner_tag(), flush=True)
        os._exit(9)  # no close, no finalizer: a crash
        """
    )
    done = subprocess.run([sys.executable, "-c", crash], capture_output=True, text=True, check=False, timeout=300)
    orphan, tag = done.stdout.split()
    assert orphan in _containers(every=True)
    mark = f"wsfs-sandbox-{tag}-"  # the crashed process's own (another test process may have some too)
    left = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines() if mark in line]
    assert left  # its workspace (a nosuid bind mount of a temporary directory) was left behind too
    with ContainerSandbox(image):
        assert orphan not in _containers(every=True)
        mounts = Path("/proc/self/mountinfo").read_text()
        assert not any(point in mounts for point in left) and not any(Path(point).exists() for point in left)


def test_open_filesystem_gives_a_sandbox_that_closes_with_it(image: str) -> None:
    fs = open_filesystem(f"podman://{image}?pids_limit=64")
    assert fs.capabilities.exec and fs.mount_point == "/workspace"
    name = fs.sandbox.name  # type: ignore[attr-defined]
    fs.write("/workspace/a.txt", "a")
    assert fs.exec(["cat", "a.txt"]).stdout == "a"  # type: ignore[attr-defined]
    fs.close()  # type: ignore[attr-defined]
    assert name not in _containers()
    with pytest.raises(ValueError, match="Unknown option"):
        open_filesystem(f"podman://{image}?netwrok=true")


# --- snapshots ------------------------------------------------------------------------------------------


def test_host_strategies_snapshot_what_commands_changed(image: str, tmp_path: Path) -> None:
    with ContainerSandbox(image, snapshot_strategy="copy", snapshot_dir=tmp_path / "s") as sandbox:
        fs = sandbox.filesystem
        assert fs.snapshot_strategy == "copy"
        fs.write("app.sh", "echo v1\n")
        before = fs.snapshot(tag="v1")
        sandbox.exec("echo 'echo v2' > app.sh; echo junk > junk.txt")
        assert fs.diff(before).modified == ("app.sh",) and fs.diff(before).added == ("junk.txt",)
        fs.restore(before)
        assert sandbox.exec("sh app.sh").stdout == "v1\n" and not fs.exists("junk.txt")


def test_container_commit_keeps_what_is_installed_outside_the_workspace(image: str, tmp_path: Path) -> None:
    with ContainerSandbox(image, snapshot_strategy="container_commit", snapshot_dir=tmp_path / "s") as sandbox:
        fs = sandbox.filesystem
        assert fs.snapshot_strategy.startswith("container_commit+")
        sandbox.exec("printf '#!/bin/sh\\necho tool v1\\n' > /usr/local/bin/tool && chmod +x /usr/local/bin/tool")
        fs.write("notes.txt", "one")
        taken = fs.snapshot(tag="installed")
        sandbox.exec("rm /usr/local/bin/tool")
        fs.write("notes.txt", "two")
        assert sandbox.exec("tool").exit_code == 127
        fs.restore(taken)
        assert sandbox.exec("tool").stdout == "tool v1\n"
        assert fs.read("notes.txt").content == "one"
        image_name = ContainerSandbox.snapshot_image(taken.snapshot_id)
        assert subprocess.run(["podman", "image", "exists", image_name], check=False).returncode == 0
        fs.delete_snapshot(taken)  # the container runs from its image: that must not kill the container
        assert sandbox.exec("tool").stdout == "tool v1\n"
    assert subprocess.run(["podman", "image", "exists", image_name], check=False).returncode != 0  # gone with it


def test_overlay_snapshots_copy_only_changes_and_never_touch_the_base(image: str, tmp_path: Path) -> None:
    base = tmp_path / "repository"
    base.mkdir()
    (base / "README").write_text("base\n")
    (base / "big.bin").write_bytes(os.urandom(1 << 20))
    with ContainerSandbox(image, host_dir=base, snapshot_strategy="overlay", snapshot_dir=tmp_path / "s") as sandbox:
        fs = sandbox.filesystem
        assert fs.snapshot_strategy in ("overlay_reflink", "overlay_copy")
        first = fs.snapshot(tag="clean")
        sandbox.exec("echo changed > README; rm big.bin; mkdir new; echo n > new/file")
        assert sorted(e.path for e in fs.walk()) == ["README", "new", "new/file"]
        second = fs.snapshot(tag="changed")
        kept = (tmp_path / "s" / "overlay" / str(second.snapshot_id)).rglob("*")
        copied = sum(f.stat().st_size for f in kept if f.is_file() and not f.is_symlink())
        assert copied < 1024  # the 1 MiB file is in the base layer: a snapshot holds only what changed
        assert fs.diff(first, second).deleted == ("big.bin",)
        fs.restore(first)
        assert fs.read("README").content == "base\n" and fs.exists("big.bin")
        assert sandbox.exec("cat README").stdout == "base\n"  # the restarted container sees the restored files
        fs.restore(second)
        assert sandbox.exec("cat new/file").stdout == "n\n"
    assert (base / "README").read_text() == "base\n" and (base / "big.bin").exists()  # the base is untouched


def test_reflink_snapshots_on_xfs(image: str, xfs_mount: Path) -> None:
    workspace = xfs_mount / "container-workspace"
    workspace.mkdir()
    with ContainerSandbox(
        image, host_dir=workspace, snapshot_strategy="reflink", snapshot_dir=xfs_mount / "container-snaps"
    ) as sandbox:
        fs = sandbox.filesystem
        assert fs.snapshot_strategy == "reflink"
        sandbox.exec("seq 1 100000 > numbers.txt")
        taken = fs.snapshot()
        sandbox.exec("echo gone > numbers.txt")
        fs.restore(taken)
        assert sandbox.exec("tail -n 1 numbers.txt").stdout == "100000\n"


def test_overlay_snapshots_reflink_on_xfs(image: str, xfs_mount: Path) -> None:
    with ContainerSandbox(image, snapshot_strategy="overlay", snapshot_dir=xfs_mount / "overlay-snaps") as sandbox:
        fs = sandbox.filesystem
        assert fs.snapshot_strategy == "overlay_reflink"
        sandbox.exec("seq 1 1000 > numbers.txt")
        taken = fs.snapshot()
        sandbox.exec("rm numbers.txt")
        fs.restore(taken)
        assert fs.read("numbers.txt").total_lines == 1000


def test_checkpoint_says_why_it_cannot_run(image: str) -> None:
    with pytest.raises(UnsupportedOperationError, match="CRIU"):
        ContainerSandbox(image, snapshot_strategy="checkpoint")


# --- Docker, through Podman's Docker API ------------------------------------------------------------------


def test_docker_runtime_through_podmans_service(image: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        missing("the docker client is not installed (apt-get install docker.io)")
    with docker_via_podman() as url:
        monkeypatch.setenv("DOCKER_HOST", url)
        assert Runtime.find("docker").name == "docker"
        with ContainerSandbox(image, runtime="docker", snapshot_dir=tmp_path / "s") as sandbox:
            assert sandbox.runtime == "docker"
            sandbox.filesystem.write("hello.sh", "echo hello from docker\n")
            assert sandbox.exec("sh hello.sh").stdout == "hello from docker\n"
            timed = sandbox.exec("sleep 200", timeout=1)
            assert timed.timed_out and "sleep 200" not in sandbox.exec("ps -o args").stdout
            name = sandbox.name
        assert name not in _containers()


# --- regressions from review -------------------------------------------------------------------------------


def test_a_runtime_that_warns_on_stderr_still_reports_and_kills(
    image: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Podman and Docker may print a warning line before the command's own stderr."""
    real = shutil.which("podman")
    assert real is not None
    wrapper = tmp_path / "bin" / "podman"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "level=warning msg=\\"a runtime warning\\"" >&2\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    with ContainerSandbox(image, snapshot_dir=tmp_path / "s") as sandbox:
        failed = sandbox.exec("echo out; echo err >&2; exit 4")
        assert failed.exit_code == 4 and failed.stdout == "out\n"
        assert "wsfs-exec-pid" not in failed.stderr and failed.stderr.endswith("err\n")
        timed = sandbox.exec("sleep 303", timeout=1)
        assert timed.timed_out and "sleep 303" not in sandbox.exec("ps -o args").stdout


def test_a_timeout_before_the_command_reported_in_still_kills_it(sandbox: ContainerSandbox) -> None:
    result = sandbox.exec("sleep 304", timeout=0.01)
    assert result.timed_out
    assert "sleep 304" not in sandbox.exec("ps -o args").stdout


def test_a_failed_overlay_restore_changes_nothing(image: str, tmp_path: Path) -> None:
    with ContainerSandbox(image, snapshot_strategy="overlay", snapshot_dir=tmp_path / "s") as sandbox:
        fs = sandbox.filesystem
        fs.write("a.txt", "first")
        taken = fs.snapshot()
        fs.write("a.txt", "second")
        sandbox.exec("sleep 1000 > /dev/null 2>&1 &")
        shutil.rmtree(tmp_path / "s" / "overlay" / str(taken.snapshot_id))  # its copy is gone: it cannot stage
        with pytest.raises(SnapshotRestoreError):
            fs.restore(taken)
        assert fs.read("a.txt").content == "second"
        assert "sleep 1000" in sandbox.exec("ps -o args").stdout  # not even restarted
        fs.delete_snapshot(taken)
        with pytest.raises(SnapshotNotFoundError):
            fs.restore(taken)
        assert "sleep 1000" in sandbox.exec("ps -o args").stdout


def test_setuid_files_made_by_commands_never_run_as_root_and_lose_the_bit(image: str, tmp_path: Path) -> None:
    workspace = tmp_path / "given"
    workspace.mkdir()
    with ContainerSandbox(image, host_dir=workspace, snapshot_dir=tmp_path / "s") as sandbox:
        assert sandbox.exec("cp /bin/busybox escalate && chmod 4755 escalate").exit_code == 0
        findmnt = ["findmnt", "-n", "-o", "OPTIONS", str(workspace)]
        mounted = subprocess.run(findmnt, capture_output=True, text=True, check=False)
        assert "nosuid" in mounted.stdout.split(",")  # while it lives, the host runs nothing setuid from here
    assert not (workspace / "escalate").stat().st_mode & 0o6000  # and after close the bit is gone


def test_clearing_setuid_never_changes_an_inode_shared_with_the_outside(image: str, tmp_path: Path) -> None:
    workspace = tmp_path / "given"
    workspace.mkdir()
    outside = tmp_path / "outside-tool"
    outside.write_bytes(b"#!/bin/sh\n")
    os.chmod(outside, 0o4755)
    os.link(outside, workspace / "linked-tool")  # a name inside for a setuid file outside the root
    with ContainerSandbox(image, host_dir=workspace, snapshot_dir=tmp_path / "s") as sandbox:
        assert sandbox.exec("cp /bin/busybox a && chmod 4755 a && ln a b").exit_code == 0  # two names inside
    assert stat.S_IMODE(outside.stat().st_mode) == 0o4755  # the outside file is not the workspace's to change
    for name in ("linked-tool", "a", "b"):
        assert stat.S_IMODE((workspace / name).stat().st_mode) == 0o755, name
    assert (workspace / "linked-tool").read_bytes() == b"#!/bin/sh\n"
    assert (workspace / "linked-tool").stat().st_ino != outside.stat().st_ino


def test_a_failed_start_leaves_nothing_behind(image: str) -> None:
    def made() -> set[str]:
        return {p.name for p in Path(tempfile.gettempdir()).glob(f"wsfs-sandbox-{owner_tag()}-*")}

    before, containers = made(), _containers()
    with pytest.raises(SandboxError):
        ContainerSandbox(image, memory="not-a-size")
    assert made() == before and _containers() == containers
    mounts = Path("/proc/self/mountinfo").read_text()
    assert f"wsfs-sandbox-{owner_tag()}-" not in mounts


def test_a_filesystem_below_the_workspace_runs_commands_there(sandbox: ContainerSandbox) -> None:
    sandbox.filesystem.mkdir("project/src")
    below = ContainerFilesystem(sandbox, f"{sandbox.host_dir}/project", mount_point="/workspace/project")
    assert below.exec("pwd").stdout == "/workspace/project\n"
    assert below.exec("pwd", cwd="src").stdout == "/workspace/project/src\n"
    read_only = ContainerFilesystem(sandbox, sandbox.host_dir, mount_point="/workspace", read_only=True)
    assert not read_only.capabilities.exec and "run_command" not in {t.name for t in tools_for(read_only)}
    with pytest.raises(ReadOnlyError):
        read_only.exec("touch x")
    with pytest.raises(ValueError):
        ContainerFilesystem(sandbox, "/tmp", mount_point="/workspace")
