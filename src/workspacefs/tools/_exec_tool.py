"""``run_command``: run a shell command in the workspace's sandbox (offered where ``capabilities.exec``).

The command runs by ``sh -c`` *inside* the container, never on the machine the agent's host runs on. The
model reads the exit code and the output — head and tail of long output, with what was cut said — and a
plain statement when the command was killed for running too long.
"""

from __future__ import annotations

import errno
from typing import Any, cast

from pydantic import Field

from workspacefs.errors import SandboxError
from workspacefs.protocol import CommandRunner
from workspacefs.results import ExecResult
from workspacefs.tools._core import Tool, ToolContext, ToolResult
from workspacefs.tools._file_tools import _Params
from workspacefs.tools._messages import failure, failure_from

__all__ = ["DEFAULT_TIMEOUT", "MAX_SHOWN_CHARS", "MAX_TIMEOUT", "RUN_COMMAND"]

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600
MAX_SHOWN_CHARS = 30_000
"""What the model reads of a command's output, stdout and stderr together (head and tail)."""


MAX_ECHOED_COMMAND = 2_000
"""A result repeats the command it ran up to this many characters (a model that sent more need not read it again)."""


class RunCommandParams(_Params):
    command: str = Field(min_length=1, description="Shell command, run with sh -c inside the workspace's sandbox.")
    timeout: int | None = Field(
        None,
        ge=1,
        le=MAX_TIMEOUT,
        description=f"Seconds before it is killed (default {DEFAULT_TIMEOUT}, at most {MAX_TIMEOUT}).",
    )
    cwd: str | None = Field(None, description="Directory to run in, a workspace path (default: the workspace root).")


def describe(result: ExecResult, command: str, timeout: int) -> str:
    """The model's view of a finished command."""
    if result.timed_out:
        head = (
            f"The command was killed after {timeout} s (its time limit). Files it changed before then stay "
            "changed (the history tools, where offered, can undo the command as one entry). Output up to then:"
        )
    else:
        head = f"Exit code {result.exit_code}" + (" (success)." if result.exit_code == 0 else ".")
        if result.exit_code == 127:
            head += " (127: the command was not found in the sandbox.)"
    shown = (
        command
        if len(command) <= MAX_ECHOED_COMMAND
        else f"{command[:MAX_ECHOED_COMMAND]}… ({len(command):,} characters)"
    )
    parts = [f"$ {shown}", head]
    if result.stdout:
        parts.append("stdout:\n" + result.stdout)
    if result.stderr:
        parts.append("stderr:\n" + result.stderr)
    if not result.stdout and not result.stderr:
        parts.append("(no output)")
    if result.truncated:
        parts.append("[The output was longer than the sandbox keeps: the middle was cut, as marked.]")
    return "\n".join(parts)


def run_command(params: RunCommandParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Run the command; a non-zero exit is a result to read, a timeout or an unusable sandbox a failure."""
    fs = context.filesystem
    if fs is None or not fs.capabilities.exec:
        return failure("This workspace cannot run commands (it has no sandbox).", "unsupported")
    runner = cast(CommandRunner, fs)  # the exec capability promises the protocol
    timeout = params.timeout or DEFAULT_TIMEOUT
    try:
        # each stream keeps no more than the model will read (half the budget each): one cut, made where the
        # output is captured, which says exactly how much went
        result = runner.exec(params.command, timeout=timeout, cwd=params.cwd, max_output=MAX_SHOWN_CHARS // 2)
    except OSError as exc:
        if exc.errno == errno.E2BIG:  # the kernel's limit on one argument (128 KiB), not the directory's fault
            return failure(
                f"The command is too long to run ({len(params.command):,} characters). Write it to a script file "
                "with write_file and run that file instead.",
                "invalid_argument",
            )
        return failure_from(exc, fs, params.cwd or ".", verb="used as the working directory")
    except (ValueError, SandboxError) as exc:
        return failure_from(exc, fs, params.cwd or ".", verb="used as the working directory")
    value: dict[str, object] = {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "truncated": result.truncated,
        "duration_s": round(result.duration_s, 3),
    }
    message = describe(result, params.command, timeout)
    if result.timed_out:
        return ToolResult(message, value, success=False, error_code="timed_out")
    return ToolResult(message, value)


RUN_COMMAND: Tool[Any] = Tool(
    "run_command",
    "Run a shell command (sh -c) inside the workspace's sandbox: no network, the workspace at its usual path. "
    "Returns the exit code and output (long output keeps its head and tail). Default timeout 120 s, at most 600.",
    RunCommandParams,
    run_command,
    mutating=True,
    destructive=True,
    idempotent=False,
    transactional=False,  # what a command touches is unknown beforehand: its journal entry is the undo
)
