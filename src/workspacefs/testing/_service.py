"""The workspace service as a real process (``python -m workspacefs serve``), for tests and benchmarks.

It runs exactly what a user runs, on a free loopback port, and reports its URL, the admin token a
first start prints, and its process id (so callers can read its memory from ``/proc``).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["ServiceProcess", "free_port", "peak_rss_bytes", "running_service"]

_TOKEN_LINE = re.compile(r"^\s+(wsfs_[A-Za-z0-9_-]+)\s*$")
_SIGNIN_LINE = re.compile(r"^workspacefs: sign in at (\S+)\s*$")


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def peak_rss_bytes(pid: int) -> int:
    """The most resident memory process ``pid`` has used so far (Linux ``VmHWM``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


@dataclass
class ServiceProcess:
    """A running service: its base URL, the admin token it created (if it did), the one-time browser sign-in
    link it printed (with auth), its process."""

    url: str
    process: subprocess.Popen[str]
    token: str | None = None
    output: list[str] = field(default_factory=list)
    signin_link: str | None = None

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    def headers(self) -> dict[str, str]:
        """Authorization headers for the admin token (none when auth is off)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


@contextmanager
def running_service(
    db_url: str, *, auth: bool = True, extra_args: tuple[str, ...] = (), timeout: float = 30.0
) -> Iterator[ServiceProcess]:
    """Start ``workspacefs serve`` on ``db_url``; wait until it answers; stop it (SIGINT) afterwards."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "workspacefs",
        "serve",
        "--db",
        db_url,
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    if not auth:
        command.append("--no-auth")
    command.extend(extra_args)
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    service = ServiceProcess(f"http://127.0.0.1:{port}", process)

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            service.output.append(line)
            found = _TOKEN_LINE.match(line)
            if found:
                service.token = found.group(1)
            link = _SIGNIN_LINE.match(line)
            if link:
                service.signin_link = link.group(1)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        _wait_until_up(service, timeout)
        yield service
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        reader.join(timeout=5)


def _wait_until_up(service: ServiceProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            time.sleep(0.1)  # let the reader collect the last lines
            raise RuntimeError(f"workspacefs serve exited early:\n{''.join(service.output)}")
        try:
            with urllib.request.urlopen(service.url + "/openapi.json", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    raise RuntimeError(f"workspacefs serve did not answer within {timeout} s:\n{''.join(service.output)}")
