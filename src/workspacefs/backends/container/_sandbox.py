"""``ContainerSandbox``: one long-lived, hardened container whose workdir is a host directory the workspace's
``HostFilesystem`` serves — files at host speed with every host sandbox guarantee, commands inside.

What is isolated: commands run in the container, with no network (``--network none``) unless asked, every
capability dropped (``--cap-drop ALL``), ``no-new-privileges``, a process limit, optional memory and CPU
limits, and one writable host path: the workspace directory, bind-mounted at ``workdir``. What is not: the
kernel is shared (a container is not a VM), the runtime runs as whoever starts it (rootful Podman here), and
anything the command writes into the workspace is the host's to read — which ``HostFilesystem`` does without
ever following a link the command made.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import stat
import subprocess
import tempfile
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Final, Self

from workspacefs.backends.base import Fingerprint
from workspacefs.backends.container._exec import run_in_container, shell_argv
from workspacefs.backends.container._overlay import OverlayWorkspace
from workspacefs.backends.container._runtime import (
    Runtime,
    owner_labels,
    reap_orphan_workspaces,
    workspace_prefix,
)
from workspacefs.backends.host import STRATEGIES, CommandBudget, HostFilesystem
from workspacefs.capabilities import Capabilities
from workspacefs.errors import (
    SandboxError,
    SnapshotCreationError,
    SnapshotRestoreError,
    UnsupportedOperationError,
)
from workspacefs.paths import normalize_mount_point
from workspacefs.protocol import DEFAULT_MAX_OUTPUT
from workspacefs.quota import Quota
from workspacefs.results import ExecResult, FilesystemSnapshot

__all__ = ["CONTAINER_STRATEGIES", "ContainerFilesystem", "ContainerSandbox"]

CONTAINER_STRATEGIES: Final = ("container_commit", "overlay", "checkpoint")
"""Snapshot strategies of a sandbox besides the host ones (``reflink``, ``git``, ``archive``, ``copy``)."""
_IDLE: Final = 'trap "exit 0" TERM; while :; do sleep 3600 & wait $!; done'
"""PID 1 of the container: waits, and leaves at once when stopped (needs ``sh`` and ``sleep``)."""
_SNAPSHOT_IMAGE: Final = "localhost/workspacefs-snapshot"
_MAX_NOFILE: Final = 65536


def _limits() -> list[str]:
    """``--ulimit`` for open files and processes within this process's own hard limits.

    Runtimes default to limits above an unprivileged hard limit, which a container without capabilities
    cannot set; these are the largest it can (processes also at most ``pid_max``).
    """
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    try:
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text(encoding="ascii"))
    except (OSError, ValueError):
        pid_max = 32768
    nofile = _MAX_NOFILE if nofile == resource.RLIM_INFINITY else min(nofile, _MAX_NOFILE)
    nproc = pid_max if nproc == resource.RLIM_INFINITY else min(nproc, pid_max)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def _mount(*argv: str) -> bool:
    return subprocess.run(["mount", *argv], capture_output=True, check=False).returncode == 0


@dataclass
class _Resources:
    """Everything a sandbox made on the machine, released together (by ``close`` or, after a forgotten
    ``close``, by the garbage collector) — in an order where each step can succeed."""

    runtime: Runtime
    name: str
    overlay: OverlayWorkspace | None = None
    nosuid_mount: str | None = None
    owned: list[str] = field(default_factory=list)
    images: set[str] = field(default_factory=set)
    """Snapshot images to remove once no container uses them."""

    def release_images(self) -> None:
        self.images = {image for image in self.images if not self.runtime.remove_image(image)}

    def release(self) -> None:
        self.runtime.remove(self.name)
        self.release_images()
        if self.overlay is not None:
            self.overlay.close()
        if self.nosuid_mount is not None and not _mount_undo(self.nosuid_mount):
            subprocess.run(["umount", "--lazy", self.nosuid_mount], capture_output=True, check=False)
        for directory in self.owned:
            shutil.rmtree(directory, ignore_errors=True)


def _mount_undo(path: str) -> bool:
    return subprocess.run(["umount", path], capture_output=True, check=False).returncode == 0


class ContainerSandbox:
    """A container to run an agent's commands in, around a workspace directory; see the module docstring.

    ``ContainerSandbox(image)`` starts the container (the image must be in local storage: nothing is
    pulled); ``.filesystem`` is the workspace, ``.exec(...)`` runs a command. Use it as a context manager or
    call :meth:`close`, which removes the container (and the temporary workspace, unless ``host_dir`` was
    given). Containers left behind by a crashed process are removed by the next sandbox's start.
    """

    def __init__(
        self,
        image: str,
        *,
        runtime: str = "podman",
        workdir: str = "/workspace",
        host_dir: str | os.PathLike[str] | None = None,
        network: bool = False,
        memory: str | None = None,
        cpus: float | None = None,
        pids_limit: int = 256,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        snapshot_strategy: str | None = None,
        snapshot_dir: str | os.PathLike[str] | None = None,
        cap_add: Sequence[str] = (),
        quota: Quota | None = None,
        exec_budget: CommandBudget | None = None,
    ) -> None:
        """``exec_budget`` bounds what journaling a command may copy before it runs (see ``CommandBudget``)."""
        mount = normalize_mount_point(workdir)
        if mount is None:
            raise ValueError(f"workdir must be an absolute directory other than '/', not {workdir!r}")
        if isinstance(pids_limit, bool) or not isinstance(pids_limit, int) or pids_limit < 1:
            raise ValueError(f"pids_limit must be a positive int, not {pids_limit!r}")
        self.image = image
        self.workdir = mount
        self.strategy = snapshot_strategy
        self._commits = snapshot_strategy == "container_commit"
        if snapshot_strategy == "checkpoint":
            raise UnsupportedOperationError(_checkpoint_refusal())
        if snapshot_strategy is not None and snapshot_strategy not in (*STRATEGIES, *CONTAINER_STRATEGIES):
            known = ", ".join((*STRATEGIES, *CONTAINER_STRATEGIES))
            raise ValueError(f"Unknown snapshot strategy {snapshot_strategy!r}; use one of {known}")
        self._runtime = Runtime.find(runtime)
        self._runtime.reap_orphans()
        reap_orphan_workspaces()
        if not self._runtime.has_image(image):
            raise SandboxError(
                f"image {image!r} is not in {self._runtime.name}'s local storage (a sandbox never pulls); "
                f"build it or load it first ({self._runtime.name} images lists what is there)"
            )
        self.name = f"wsfs-{uuid.uuid4().hex[:12]}"
        self._closed = False
        self._resources = _Resources(self._runtime, self.name)
        self._finalizer = weakref.finalize(self, self._resources.release)
        try:
            self._prepare(host_dir, snapshot_strategy, snapshot_dir, user)
            self._options = self._run_options(
                network=network,
                memory=memory,
                cpus=cpus,
                pids_limit=pids_limit,
                env=env or {},
                user=user,
                cap_add=tuple(cap_add or ()),
            )
            self._start(image)
            self.filesystem = ContainerFilesystem(
                self,
                self.host_dir,
                mount_point=mount,
                snapshot_strategy=None if snapshot_strategy in CONTAINER_STRATEGIES else snapshot_strategy,
                snapshot_dir=self._snapshot_home,
                quota=quota,
                exec_budget=exec_budget,
            )
        except BaseException:
            self._finalizer()
            raise

    def _prepare(
        self,
        host_dir: str | os.PathLike[str] | None,
        strategy: str | None,
        snapshot_dir: str | os.PathLike[str] | None,
        user: str | None,
    ) -> None:
        """The workspace directory (and where snapshots go), every piece recorded for release."""
        if host_dir is not None and not os.path.isdir(host_dir):
            raise NotADirectoryError(f"host_dir must be an existing directory: {host_dir!r}")
        self._given_dir = host_dir is not None
        self.overlay = None
        if strategy == "overlay":
            self.overlay = OverlayWorkspace(
                lower=None if host_dir is None else os.fspath(host_dir), snapshot_dir=snapshot_dir
            )
            self._resources.overlay = self.overlay
            self.host_dir = str(self.overlay.merged)  # what the container and the filesystem see
            self._snapshot_home: str | os.PathLike[str] | None = self.overlay.snapshots / "host"
            return
        if host_dir is None:
            made = tempfile.mkdtemp(prefix=workspace_prefix("sandbox"))
            self._resources.owned.append(made)
            if user is not None:
                os.chmod(made, 0o777)  # noqa: S103 - the container's user must be able to write its workspace
            host_dir = made
        self.host_dir = os.path.realpath(os.fspath(host_dir))
        self._snapshot_home = snapshot_dir
        if snapshot_dir is None and not self._given_dir:  # a throwaway workspace's snapshots go with it
            self._snapshot_home = tempfile.mkdtemp(prefix=workspace_prefix("sandbox-snapshots"))
            self._resources.owned.append(str(self._snapshot_home))
        if os.geteuid() == 0 and _mount("--bind", self.host_dir, self.host_dir):
            # nosuid, nodev over the workspace: container root is host root here, and a setuid file a command
            # makes must never run as root on the host while the sandbox lives (close() also clears the bits)
            self._resources.nosuid_mount = self.host_dir
            _mount("-o", "remount,bind,nosuid,nodev", self.host_dir)

    # --- lifecycle -----------------------------------------------------------------------------------

    @property
    def runtime(self) -> str:
        """``podman`` or ``docker``."""
        return self._runtime.name

    def _run_options(
        self,
        *,
        network: bool,
        memory: str | None,
        cpus: float | None,
        pids_limit: int,
        env: Mapping[str, str],
        user: str | None,
        cap_add: Sequence[str],
    ) -> list[str]:
        options = [*self._runtime.label_arguments(owner_labels())]
        options += ["--network", "bridge" if network else "none"]
        options += ["--cap-drop", "ALL", *[a for cap in cap_add for a in ("--cap-add", cap)]]
        options += ["--security-opt", "no-new-privileges", "--pids-limit", str(pids_limit), *_limits()]
        if memory is not None:
            options += ["--memory", str(memory)]
        if cpus is not None:
            options += ["--cpus", str(cpus)]
        if user is not None:
            options += ["--user", user]
        for key, value in env.items():
            options += ["--env", f"{key}={value}"]
        return [*options, "--volume", f"{self.host_dir}:{self.workdir}", "--workdir", self.workdir]

    def _start(self, image: str) -> None:
        """Start the container from ``image`` and check it runs (an image without ``sh`` cannot)."""
        self._runtime.run("run", "--detach", "--name", self.name, *self._options, image, "sh", "-c", _IDLE)
        probe = self._runtime.run("exec", self.name, "sh", "-c", ":", check=False, timeout=60)
        if probe.returncode != 0:
            self._runtime.remove(self.name)
            raise SandboxError(
                f"the container of image {image!r} does not stay up with a shell "
                f"({self._runtime.message(probe.stderr)}); the image needs sh and sleep"
            )

    def stop(self) -> None:
        """Remove the container (its processes end); :meth:`restart_from` starts the next one."""
        self._runtime.remove(self.name)

    def restart_from(self, image: str) -> None:
        """Replace the container by a new one from ``image`` (same name, options and workspace)."""
        self._runtime.remove(self.name)
        self._resources.release_images()  # images only the old container held can go now
        self._start(image)

    def close(self) -> None:
        """Remove the container (and what the sandbox made: a temporary workspace and its snapshots, the
        overlay, commit images of snapshots that go with it); clear setuid and setgid bits in a given
        workspace; idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            if self._commits and self._snapshot_home in self._resources.owned:
                for snapshot in self.filesystem.snapshots():
                    self._resources.images.add(self.snapshot_image(snapshot.snapshot_id))
            if self._given_dir and self.overlay is None:
                self.filesystem.clear_setuid()
            self.filesystem.release()
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running"
        return f"ContainerSandbox({self.image!r}, runtime={self.runtime!r}, {state})"

    # --- commands ------------------------------------------------------------------------------------

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float = 120,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | str | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> ExecResult:
        """Run a command in the container and wait for it.

        ``cmd`` as a list is the argv (no shell anywhere); a string runs as ``sh -c`` inside the container.
        ``cwd`` is a workspace path (``src`` or ``/workspace/src``). On timeout the command's whole process
        group is killed and the result says ``timed_out``; the sandbox stays usable. Each output stream keeps
        at most ``max_output`` bytes: its head and tail, with the cut said in place.

        Raises:
            SandboxError: the container is gone or the runtime failed (the workspace is untouched).
            FileNotFoundError, NotADirectoryError: ``cwd`` is not a directory of the workspace.
            ValueError: an empty command, a bad timeout or environment variable name.
        """
        return self.filesystem.exec(cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin, max_output=max_output)

    def _run(
        self,
        cmd: str | Sequence[str],
        *,
        workdir: str,
        timeout: float,
        env: Mapping[str, str] | None,
        stdin: bytes | str | None,
        max_output: int,
    ) -> ExecResult:
        """Run a command in directory ``workdir`` of the container (an absolute container path)."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        try:
            return run_in_container(
                self._runtime,
                self.name,
                cmd,
                timeout=timeout,
                workdir=workdir,
                env=env,
                stdin=stdin,
                max_output=max_output,
            )
        except SandboxError as exc:
            if not os.path.isdir(self.host_dir):  # the likeliest cause, said plainly (runc's words alarm)
                raise SandboxError(
                    "the workspace directory was removed from under the sandbox; close it and start a new one"
                ) from exc
            raise

    # --- container commits ---------------------------------------------------------------------------

    @property
    def commits(self) -> bool:
        """True when snapshots also commit the container (``snapshot_strategy="container_commit"``)."""
        return self._commits

    @staticmethod
    def snapshot_image(snapshot_id: uuid.UUID) -> str:
        """The image a ``container_commit`` snapshot keeps the container's own files in."""
        return f"{_SNAPSHOT_IMAGE}:{snapshot_id}"

    def commit(self, snapshot_id: uuid.UUID) -> None:
        """Keep the container's files (everything outside the workspace) as the snapshot's image."""
        self._runtime.run("commit", self.name, self.snapshot_image(snapshot_id))

    def restore_commit(self, snapshot_id: uuid.UUID) -> None:
        """Recreate the container from the snapshot's image (the workspace directory stays mounted)."""
        image = self.snapshot_image(snapshot_id)
        if not self._runtime.has_image(image):
            raise SnapshotRestoreError(f"Snapshot {snapshot_id} has no container image (it was deleted?)")
        self.restart_from(image)

    def drop_commit(self, snapshot_id: uuid.UUID) -> None:
        """Delete a snapshot's image — at once, or when the container running from it is replaced (never by
        force: that would remove the live container too)."""
        self._resources.images.add(self.snapshot_image(snapshot_id))
        self._resources.release_images()


def _checkpoint_refusal() -> str:
    """Why ``checkpoint`` snapshots (CRIU) are refused on this machine, as precisely as it can be said."""
    criu = shutil.which("criu")
    if criu is None:
        return "checkpoint snapshots need CRIU, which is not installed here; use container_commit instead"
    done = subprocess.run([criu, "check"], capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        return (
            f"checkpoint snapshots need CRIU, which cannot run on this machine ({Runtime.message(done.stderr)}); "
            "use container_commit instead"
        )
    return "checkpoint snapshots (CRIU) are not offered by workspacefs; use container_commit instead"


_READ_ONLY_CAPABILITIES: Final = Capabilities(host_directory=True)


class ContainerFilesystem(HostFilesystem):
    """The workspace of a :class:`ContainerSandbox`: a ``HostFilesystem`` on its directory that can also run
    commands in the container (``capabilities.exec``) and, with ``container_commit``, snapshots the container's
    own files along with the workspace."""

    backend_name: ClassVar[str] = "container"
    _finishes_restores_when_opened: ClassVar[bool] = False  # its restore needs the sandbox: see ``__init__``
    declared_capabilities: ClassVar[Capabilities] = Capabilities(
        host_directory=True, exec=True, history=True, watch=True
    )
    exec_budget: CommandBudget = CommandBudget()
    """What journaling a command may copy before it runs (64 MiB, 10,000 files not kept already): past it, the
    files the command changes are journaled without their prior content, and that entry cannot be undone."""

    def __init__(
        self,
        sandbox: ContainerSandbox,
        root: str,
        *,
        mount_point: str | None,
        snapshot_strategy: str | None = None,
        snapshot_dir: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        quota: Quota | None = None,
        exec_budget: CommandBudget | None = None,
    ) -> None:
        """The sandbox's workspace at ``root`` (its bind-mounted directory, or one below it); ``exec_budget``
        bounds what journaling a command may copy before it runs (default :attr:`exec_budget`)."""
        super().__init__(
            root,
            read_only=read_only,
            mount_point=mount_point,
            snapshot_strategy=snapshot_strategy,
            snapshot_dir=snapshot_dir,
            quota=quota,
        )
        if exec_budget is not None:
            self.exec_budget = exec_budget
        self._sandbox = sandbox
        self._owns_sandbox = False
        below = os.path.relpath(os.path.realpath(root), os.path.realpath(sandbox.host_dir))
        if below == ".." or below.startswith("../") or os.path.isabs(below):
            raise ValueError("a sandbox's filesystem must be its workspace directory or one below it")
        self._container_root = sandbox.workdir if below == "." else f"{sandbox.workdir}/{below}"
        if sandbox.commits:  # every way a snapshot goes (deleted, or pruned by retention) takes its image too
            self._snapshots.on_drop = sandbox.drop_commit
        if not read_only:  # a restore killed part way, finished now that the sandbox is known
            self._finish_restore()

    @property
    def sandbox(self) -> ContainerSandbox:
        """The sandbox whose workspace this is."""
        return self._sandbox

    @property
    def snapshot_strategy(self) -> str:
        """The strategy snapshots use (a host strategy, or ``container_commit`` over one)."""
        overlay = self._sandbox.overlay
        if overlay is not None:
            return "overlay_reflink" if overlay.reflink else "overlay_copy"
        host = super().snapshot_strategy
        return f"container_commit+{host}" if self._sandbox.commits else host

    @property
    def capabilities(self) -> Capabilities:
        """As declared, except that a read-only workspace does not offer commands (they could write)."""
        return _READ_ONLY_CAPABILITIES if self._read_only else super().capabilities

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float = 120,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | str | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> ExecResult:
        """Run a command in the sandbox, in this workspace's root or ``cwd`` below it (a workspace path; see
        :meth:`ContainerSandbox.exec` for the rest).

        What the command changes in the workspace is one journal entry, operation ``exec`` with the command as
        its ``detail``, under the caller's actor (also when it fails or times out; none when it changed nothing).
        Its undo puts every path back, unless the workspace was too large to keep its files first
        (:attr:`exec_budget`).

        Raises:
            ReadOnlyError: a read-only workspace runs no commands.
        """
        self._writable(cwd or ".")
        where = self._container_root
        if cwd is not None:
            norm = self._norm(cwd)
            if not self.stat(cwd).is_directory:
                raise NotADirectoryError(f"cwd is not a directory: {cwd!r}")
            where = f"{where}/{norm}" if norm else where
        shell_argv(cmd)  # an empty command is refused before the tree is walked
        try:
            with self._journaling_command(cmd, self.exec_budget):
                return self._sandbox._run(
                    cmd, workdir=where, timeout=timeout, env=env, stdin=stdin, max_output=max_output
                )
        finally:
            self._state_replaced()  # the command may have written anything: count usage again

    def clear_setuid(self) -> int:
        """Clear setuid and setgid bits of every file in the workspace (a command ran as root); how many. A file
        with other links is replaced by a copy without the bits: the shared inode (a name of it may live outside
        the root) is never changed, and every name of it inside the workspace ends up cleared."""
        cleared = 0
        for path in self._tree.resolver.walk_files(""):
            try:
                fd = self._tree.resolver.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError:
                continue
            try:
                info = os.fstat(fd)
                if stat.S_ISREG(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
                    mode = stat.S_IMODE(info.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)
                    if info.st_nlink > 1:  # another name shares the inode, maybe outside: this name gets a copy
                        self._tree.install_copy(path, fd, info.st_size, mode, info.st_mtime_ns)
                    else:
                        os.fchmod(fd, mode)
                    cleared += 1
            finally:
                os.close(fd)
        return cleared

    def owns_sandbox(self) -> None:
        """Close the sandbox with this filesystem (``open_filesystem("podman://…")`` hands out only this)."""
        self._owns_sandbox = True

    def release(self) -> None:
        """Release the directory handle without touching the sandbox."""
        super().close()

    def close(self) -> None:
        """Release the workspace, and the sandbox too if this filesystem owns it; idempotent."""
        self.release()
        if self._owns_sandbox:
            self._sandbox.close()

    # --- snapshots: an overlay's changes; or the workspace by its host strategy, the container by commit ----

    def _capture(self, draft: FilesystemSnapshot) -> FilesystemSnapshot:
        overlay = self._sandbox.overlay
        if overlay is not None:
            return overlay.capture(draft)
        taken = super()._capture(draft)
        if self._sandbox.commits:
            try:
                self._sandbox.commit(taken.snapshot_id)
            except SandboxError as exc:
                super()._drop_snapshot(taken)
                raise SnapshotCreationError(f"The container could not be committed: {exc}") from exc
        return taken

    def _restore_state(self, snapshot: FilesystemSnapshot) -> None:
        overlay = self._sandbox.overlay
        if overlay is not None:
            self._restore_overlay(overlay, snapshot)
            return
        if self._sandbox.commits:
            self._sandbox.restore_commit(snapshot.snapshot_id)  # first: if the image is gone, nothing changed
        super()._restore_state(snapshot)

    def _restore_overlay(self, overlay: OverlayWorkspace, snapshot: FilesystemSnapshot) -> None:
        """Remount the overlay with the snapshot's changes; the container restarts to see the new mount."""

        stopped: list[bool] = []

        def unmounted() -> None:
            self._sandbox.stop()
            self._release_root()
            stopped.append(True)

        try:
            overlay.restore(snapshot, unmounted=unmounted)  # a snapshot it cannot use: nothing stopped at all
        finally:
            if stopped and overlay.mounted:  # the new layer, or the old one put back: start again on it
                self._reopen_root()
                self._sandbox.restart_from(self._sandbox.image)

    def _manifest(self, snapshot: FilesystemSnapshot | None) -> Mapping[str, Fingerprint]:
        overlay = self._sandbox.overlay
        if overlay is not None and snapshot is not None:
            return overlay.manifest(snapshot)
        return super()._manifest(snapshot)

    def _kept_snapshots(self) -> Sequence[FilesystemSnapshot]:
        overlay = self._sandbox.overlay
        return overlay.list() if overlay is not None else super()._kept_snapshots()

    def _drop_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        overlay = self._sandbox.overlay
        if overlay is not None:
            overlay.delete(snapshot)
        else:
            super()._drop_snapshot(snapshot)
