"""Small shapes deepagents expects: its newline handling, its timestamps, its shell output form."""

from __future__ import annotations

from datetime import datetime

from deepagents.backends.protocol import ExecuteResponse

from workspacefs.results import ExecResult

__all__ = ["crlf_only", "execute_response", "iso", "universal_newlines"]


def iso(when: datetime | None) -> str | None:
    """An ISO 8601 timestamp (workspacefs times are aware, in UTC), or ``None``."""
    return when.isoformat() if when is not None else None


def universal_newlines(text: str) -> str:
    """``\\r\\n`` and lone ``\\r`` as ``\\n``, as Python's text mode reads them (``FilesystemBackend`` reads so)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def crlf_only(text: str) -> bool:
    """True when every line break of ``text`` is ``\\r\\n`` (an edit then keeps them so)."""
    pairs = text.count("\r\n")
    return pairs > 0 and pairs == text.count("\n") == text.count("\r")


def execute_response(done: ExecResult) -> ExecuteResponse:
    """stdout, then each stderr line marked ``[stderr]``, then a non-zero exit code: ``LocalShellBackend``'s form."""
    parts = [done.stdout] if done.stdout else []
    if done.stderr:
        parts.extend(f"[stderr] {line}" for line in done.stderr.strip().split("\n"))
    output = "\n".join(parts) if parts else "<no output>"
    if done.exit_code != 0:
        output = f"{output.rstrip()}\n\nExit code: {done.exit_code}"
    return ExecuteResponse(output=output, exit_code=done.exit_code, truncated=done.truncated)
