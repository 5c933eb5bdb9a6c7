"""The container runtime's command line (Podman, or Docker), run as argv — never through a shell.

Everything the sandbox asks of a runtime goes through :class:`Runtime`: start a hardened container, run
``exec``, commit, remove, and find the containers a crashed process left behind (every container carries
labels naming the process that started it, so the next start can tell which are orphans and remove them).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from workspacefs.errors import SandboxError

__all__ = ["LABEL", "RUNTIMES", "Runtime", "owner_labels", "owner_tag", "reap_orphan_workspaces", "workspace_prefix"]

RuntimeName = Literal["podman", "docker"]
RUNTIMES: Final = ("podman", "docker")
LABEL: Final = "workspacefs.sandbox"
"""Every container workspacefs starts carries this label (and the owner labels below)."""
_INSTALL: Final = {
    "podman": "install Podman: apt-get install -y podman runc (Debian/Ubuntu), dnf install podman (Fedora)",
    "docker": "install the Docker engine and client (https://docs.docker.com/engine/install/), or point "
    "DOCKER_HOST at a Podman service: podman system service --time=0 unix:///run/podman/podman.sock",
}
_COMMAND_TIMEOUT: Final = 300.0
"""Longest a runtime command (start, commit, remove) may take before the sandbox gives up on it."""


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return "unknown"


def _start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (with the pid, it names one process for good)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 else None


def owner_labels() -> dict[str, str]:
    """Labels naming this process (host, boot, pid and its start time)."""
    return {
        LABEL: "1",
        "workspacefs.host": socket.gethostname(),
        "workspacefs.boot": _boot_id(),
        "workspacefs.pid": str(os.getpid()),
        "workspacefs.start": _start_time(os.getpid()) or "",
    }


def owner_tag() -> str:
    """This process as ``PID.STARTTIME``: the prefix of every directory a sandbox makes, so a later process can
    tell the ones a crashed process left behind."""
    return f"{os.getpid()}.{_start_time(os.getpid()) or 0}"


def workspace_prefix(kind: str) -> str:
    """``wsfs-KIND-PID.START-``: the prefix of a directory of ``kind`` this process makes."""
    return f"wsfs-{kind}-{owner_tag()}-"


_OWNED_NAME: Final = re.compile(r"^wsfs-(?:sandbox|sandbox-snapshots|overlay)-(\d+)\.(\d+)-")


def _process_gone(pid: int, start: str) -> bool:
    """True only if process ``pid`` that started at ``start`` surely exists no more."""
    started = _start_time(pid)
    if started is None:  # /proc hides it (hidepid) or it is gone: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    return started != start


def _mount_points() -> list[str]:
    """Mount points of this mount namespace (``/proc/self/mountinfo``, octal escapes undone)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def reap_orphan_workspaces() -> int:
    """Unmount and remove the workspace directories, nosuid binds and overlay mounts of sandboxes whose
    process died (their names carry its pid and start time); how many went."""
    dead: set[str] = set()
    for point in sorted(_mount_points(), key=len, reverse=True):  # the deepest (an overlay's merged) first
        for part in Path(point).parts:
            owner = _OWNED_NAME.match(part)
            if owner and _process_gone(int(owner.group(1)), owner.group(2)):
                subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
                dead.add(point)
                break
    removed = 0
    for directory in Path(tempfile.gettempdir()).glob("wsfs-*"):
        owner = _OWNED_NAME.match(directory.name)
        if owner and directory.is_dir() and _process_gone(int(owner.group(1)), owner.group(2)):
            shutil.rmtree(directory, ignore_errors=True)
            removed += 1
    return removed + len(dead)


def _orphaned(labels: dict[str, str]) -> bool:
    """True if the process that started a container on this host is gone (a crash, a kill -9, a reboot)."""
    if labels.get("workspacefs.host") != socket.gethostname():
        return False  # another machine's container (a shared Docker host): not ours to judge
    if labels.get("workspacefs.boot") != _boot_id():
        return True
    pid = labels.get("workspacefs.pid", "")
    if not pid.isdigit():
        return True
    return _process_gone(int(pid), labels.get("workspacefs.start", ""))


@dataclass(frozen=True, slots=True)
class Runtime:
    """One container runtime's command line."""

    name: RuntimeName
    executable: str

    @classmethod
    def find(cls, name: str) -> Runtime:
        """The runtime ``name`` on ``PATH``; ``SandboxError`` naming what to install if it is missing."""
        if name not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, not {name!r}")
        executable = shutil.which(name)
        if executable is None:
            raise SandboxError(f"{name} is not installed; {_INSTALL[name]}")
        runtime = cls(name, executable)  # type: ignore[arg-type]
        answer = runtime.run("version", check=False, timeout=60)
        if answer.returncode != 0:
            where = " (DOCKER_HOST={})".format(os.environ["DOCKER_HOST"]) if "DOCKER_HOST" in os.environ else ""
            raise SandboxError(
                f"{name} is installed but its engine does not answer{where}: {cls.message(answer.stderr)}; "
                f"{_INSTALL[name]}"
            )
        return runtime

    def run(
        self, *arguments: str, stdin: bytes | None = None, timeout: float = _COMMAND_TIMEOUT, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``runtime arguments…`` (argv, no shell); ``SandboxError`` with the runtime's own words on failure."""
        try:
            done = subprocess.run(
                [self.executable, *arguments], input=stdin, capture_output=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise SandboxError(f"{self.name} {arguments[0]} did not finish within {timeout:.0f} s") from None
        except OSError as exc:
            raise SandboxError(f"{self.name} could not be run: {exc.strerror}") from None
        if check and done.returncode != 0:
            raise SandboxError(f"{self.name} {arguments[0]} failed: {self.message(done.stderr)}")
        return done

    @staticmethod
    def message(stderr: bytes) -> str:
        """The runtime's error, in one line."""
        text = stderr.decode("utf-8", "replace").strip().splitlines()
        meaningful = [line.removeprefix("Error: ").strip() for line in text if line.strip()]
        return meaningful[-1] if meaningful else "no message"

    def has_image(self, image: str) -> bool:
        """True if ``image`` is in local storage (a sandbox never pulls: no registry may be reachable)."""
        return self.run("image", "inspect", image, check=False).returncode == 0

    def remove(self, name: str) -> None:
        """Remove a container, killing it if it runs (no grace period: its state is not wanted); a runtime that
        does not answer leaves it to the next start's clean-up instead of failing the caller."""
        force = ("rm", "-f", "-t", "0") if self.name == "podman" else ("rm", "-f")
        with contextlib.suppress(SandboxError):
            self.run(*force, name, check=False)

    def remove_image(self, image: str) -> bool:
        """Remove an image unless a container still uses it; whether it went."""
        with contextlib.suppress(SandboxError):
            return self.run("rmi", image, check=False).returncode == 0 or not self.has_image(image)
        return False

    def labelled(self) -> list[tuple[str, dict[str, str]]]:
        """``(id, labels)`` of every container workspacefs started, running or not."""
        keys = ("workspacefs.host", "workspacefs.boot", "workspacefs.pid", "workspacefs.start")
        cell = '{{index .Labels "%s"}}' if self.name == "podman" else '{{.Label "%s"}}'
        template = "\t".join(["{{.ID}}", *(cell % key for key in keys)])
        done = self.run("ps", "-a", "--filter", f"label={LABEL}=1", "--format", template, check=False)
        found = []
        for line in done.stdout.decode("utf-8", "replace").splitlines():
            cells = line.split("\t")
            if len(cells) == len(keys) + 1:
                found.append((cells[0], dict(zip(keys, cells[1:], strict=True))))
        return found

    def reap_orphans(self) -> int:
        """Remove the containers whose starting process is gone; how many went."""
        orphans = [container for container, labels in self.labelled() if _orphaned(labels)]
        for container in orphans:
            self.remove(container)
        return len(orphans)

    def label_arguments(self, labels: dict[str, str]) -> Sequence[str]:
        """``--label k=v`` for each label."""
        return [argument for key, value in labels.items() for argument in ("--label", f"{key}={value}")]
