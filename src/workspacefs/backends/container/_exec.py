"""Running one command in a container: argv or ``sh -c``, output capped head-and-tail, a timeout that kills
the command's whole process group inside the container and leaves the container usable.

``runtime exec`` starts the command as a session leader (runc calls ``setsid``), so its process group holds
everything it starts unless a child leaves on purpose. A tiny ``sh`` prologue reports that group's id on
stderr before it ``exec``s the command; on timeout ``kill -KILL -- -PGID`` runs inside the container.
"""

from __future__ import annotations

import collections
import contextlib
import math
import re
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Final

from workspacefs.backends.container._runtime import Runtime
from workspacefs.errors import SandboxError
from workspacefs.results import ExecResult

__all__ = ["OutputCapture", "run_in_container", "shell_argv"]

_MARKER: Final = b"wsfs-exec-pid:"
_PROLOGUE: Final = 'printf "wsfs-exec-pid:%s\\n" "$$" >&2; exec "$@"'
"""Reports the command's process group (its own pid: a session leader) then becomes the command."""
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_READ: Final = 64 * 1024
_KILL_GRACE: Final = 10.0
"""After the kill, how long the runtime's client may take to notice the command is gone."""


def shell_argv(command: str | Sequence[str]) -> list[str]:
    """The argv a command runs as: a list as given (never a shell on the host), a string under ``sh -c``."""
    if isinstance(command, str):
        if not command.strip():
            raise ValueError("command is empty")
        return ["sh", "-c", command]
    argv = list(command)
    if not argv or not all(isinstance(part, str) for part in argv):
        raise ValueError("command must be a non-empty string or list of strings")
    return argv


class OutputCapture:
    """Keeps at most ``limit`` bytes of a stream: its head and its tail, counting what fell in between."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail.append(data)
        self.tail_size += len(data)
        while self.tail and self.tail_size - len(self.tail[0]) >= self.tail_limit:
            self.tail_size -= len(self.tail.popleft())

    @property
    def cut(self) -> int:
        """Bytes dropped from the middle."""
        kept_tail = min(self.tail_size, self.tail_limit)
        return self.total - len(self.head) - kept_tail

    def text(self) -> str:
        """What was kept, as text; the cut is said in place (``… [N bytes cut] …``)."""
        tail = b"".join(self.tail)[-self.tail_limit :] if self.tail_limit else b""
        if not self.cut:
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        middle = f"\n… [{self.cut} bytes cut] …\n"
        return bytes(self.head).decode("utf-8", "replace") + middle + tail.decode("utf-8", "replace")


class _GroupReport:
    """The prologue's report of the command's process group, read off the start of stderr.

    Whatever the runtime itself prints first (a warning line) stays in stderr; the report line is taken
    out wherever it comes. ``ready`` is set once the report arrived or cannot any more.
    """

    _SEARCH_LIMIT: Final = 64 * 1024

    def __init__(self) -> None:
        self.pgid: int | None = None
        self.ready = threading.Event()
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The part of ``chunk`` that is the command's (or the runtime's) own stderr."""
        if self.ready.is_set():
            return chunk
        self._pending += chunk
        start = self._pending.find(_MARKER)
        end = self._pending.find(b"\n", start) if start >= 0 else -1
        if start >= 0 and end >= 0 and (start == 0 or self._pending[start - 1 : start] == b"\n"):
            number = self._pending[start + len(_MARKER) : end]
            if number.isdigit():
                self.pgid = int(number)
            before, after = self._pending[:start], self._pending[end + 1 :]
            self._pending = b""
            self.ready.set()
            return before + after
        if len(self._pending) > self._SEARCH_LIMIT:
            return self.finish()
        return b""

    def finish(self) -> bytes:
        """No report is coming (the stream ended, or too much came first): what was held back."""
        held, self._pending = self._pending, b""
        self.ready.set()
        return held


def _pump(stream: IO[bytes], capture: OutputCapture, report: _GroupReport | None) -> None:
    """Copy a stream into its capture (stderr through the group report first)."""
    while chunk := stream.read1(_READ):  # type: ignore[attr-defined]
        if report is not None:
            chunk = report.feed(chunk)
        if chunk:
            capture.add(chunk)
    if report is not None:
        capture.add(report.finish())
    stream.close()


def _check(timeout: float, env: Mapping[str, str] | None, max_output: int) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 2:
        raise ValueError(f"max_output must be an int of at least 2 bytes, not {max_output!r}")
    for name, value in (env or {}).items():
        if not _ENV_NAME.match(name) or "\x00" in value:
            raise ValueError(f"invalid environment variable {name!r}")


def run_in_container(
    runtime: Runtime,
    container: str,
    command: str | Sequence[str],
    *,
    timeout: float,
    workdir: str,
    env: Mapping[str, str] | None,
    stdin: bytes | str | None,
    max_output: int,
) -> ExecResult:
    """Run ``command`` in ``container`` (see the module docstring); ``SandboxError`` if the runtime cannot."""
    _check(timeout, env, max_output)
    argv = shell_argv(command)
    options = ["exec", "-i"] if stdin is not None else ["exec"]
    options += ["-w", workdir]
    for name, value in (env or {}).items():
        options += ["-e", f"{name}={value}"]
    full = [runtime.executable, *options, container, "sh", "-c", _PROLOGUE, "sh", *argv]
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    started = time.monotonic()
    process = subprocess.Popen(  # argv, never a shell: the command's text reaches only the container's sh
        full,
        stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = OutputCapture(max_output), OutputCapture(max_output)
    report = _GroupReport()
    assert process.stdout is not None
    assert process.stderr is not None
    pumps = [
        threading.Thread(target=_pump, args=(process.stdout, out, None), daemon=True),
        threading.Thread(target=_pump, args=(process.stderr, err, report), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    if data is not None:
        threading.Thread(target=_feed, args=(process, data), daemon=True).start()
    timed_out = False
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        report.ready.wait(_KILL_GRACE)  # a command killed while it starts still reports its group first
        _kill_group(runtime, container, report.pgid)
        try:
            process.wait(_KILL_GRACE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for pump in pumps:
        pump.join(_KILL_GRACE)
    code = process.returncode
    if code != 0 and not timed_out and report.pgid is None:  # no report: the runtime failed before the command
        raise SandboxError(f"{runtime.name} exec failed: {err.text().strip() or 'no message'}")
    return ExecResult(
        exit_code=code,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        truncated=bool(out.cut or err.cut),
        duration_s=time.monotonic() - started,
    )


def _feed(process: subprocess.Popen[bytes], data: bytes) -> None:
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # the command did not read all of it: its choice
        process.stdin.write(data)
    with contextlib.suppress(BrokenPipeError):
        process.stdin.close()


def _kill_group(runtime: Runtime, container: str, pgid: int | None) -> None:
    """Kill the command's whole process group inside the container (the shell's ``kill`` needs no binary)."""
    if pgid is not None and pgid > 1:
        with contextlib.suppress(SandboxError):  # a runtime that cannot even do this: the client is killed next
            runtime.run("exec", container, "sh", "-c", 'kill -KILL -- "-$1"', "sh", str(pgid), check=False, timeout=30)
