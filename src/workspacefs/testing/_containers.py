"""Real containers for tests and benchmarks, on a machine that reaches no image registry.

``busybox_image()`` builds a small image once from Debian's ``busybox-static`` (a root filesystem of one
static binary and its applet links, ``podman import``-ed); ``docker_via_podman()`` serves the Docker API
from Podman so the real ``docker`` client can be tested without a Docker engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["BUSYBOX_IMAGE", "busybox_image", "docker_via_podman", "podman_available"]

BUSYBOX_IMAGE = "localhost/workspacefs-test-busybox:1"
_APPLETS = (
    "sh",
    "ash",
    "cat",
    "ls",
    "tar",
    "echo",
    "printf",
    "sleep",
    "mkdir",
    "rm",
    "ln",
    "true",
    "false",
    "env",
    "id",
    "kill",
    "ps",
    "head",
    "tail",
    "wc",
    "sed",
    "grep",
    "touch",
    "mv",
    "cp",
    "chmod",
    "find",
    "base64",
    "pwd",
    "yes",
    "seq",
    "test",
    "expr",
    "sort",
    "uniq",
    "tr",
    "cut",
    "dd",
    "mktemp",
    "stat",
    "readlink",
    "which",
    "diff",
    "awk",
)


def podman_available() -> bool:
    """True if ``podman`` is installed and its engine answers."""
    podman = shutil.which("podman")
    return podman is not None and subprocess.run([podman, "version"], capture_output=True, check=False).returncode == 0


def busybox_image(busybox: str = "/bin/busybox") -> str:
    """The test image's name, building it first if it is not in Podman's storage.

    Raises:
        FileNotFoundError: no static busybox (``apt-get install busybox-static``).
    """
    if subprocess.run(["podman", "image", "exists", BUSYBOX_IMAGE], check=False).returncode == 0:
        return BUSYBOX_IMAGE
    if not os.path.isfile(busybox):
        raise FileNotFoundError(f"{busybox} is missing: apt-get install busybox-static")
    with tempfile.TemporaryDirectory(prefix="wsfs-image-") as root:
        binaries = Path(root, "bin")
        binaries.mkdir()
        shutil.copy2(busybox, binaries / "busybox")
        for applet in _APPLETS:
            (binaries / applet).symlink_to("busybox")
        for directory in ("tmp", "etc", "usr/local/bin", "opt", "workspace"):
            Path(root, directory).mkdir(parents=True, exist_ok=True)
        Path(root, "tmp").chmod(0o1777)
        Path(root, "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n")
        archive = subprocess.run(["tar", "-C", root, "-c", "."], capture_output=True, check=True).stdout
    subprocess.run(
        ["podman", "import", "--change", "ENV PATH=/bin:/usr/local/bin", "-", BUSYBOX_IMAGE],
        input=archive,
        capture_output=True,
        check=True,
    )
    return BUSYBOX_IMAGE


@contextmanager
def docker_via_podman() -> Iterator[str]:
    """A ``DOCKER_HOST`` URL served by ``podman system service`` for as long as the context lasts."""
    directory = tempfile.mkdtemp(prefix="wsfs-docker-")
    socket = Path(directory, "podman.sock")
    url = f"unix://{socket}"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while not socket.exists():
            if service.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("podman system service did not start")
            time.sleep(0.05)
        yield url
    finally:
        service.terminate()
        try:
            service.wait(30)
        except subprocess.TimeoutExpired:
            service.kill()
        shutil.rmtree(directory, ignore_errors=True)
