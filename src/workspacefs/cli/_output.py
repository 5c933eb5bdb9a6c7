"""How every command reports: results on stdout (text or ``--json``), errors on stderr, exit codes.

Exit codes a script can rely on: 0 success; 1 nothing found (``grep`` without a match) or another
failure; 2 bad usage; 3 not found; 4 exists, not empty, or a directory/file mix-up; 5 not allowed
(read-only, outside the workspace); 6 invalid input (a bad path, regex or glob, a bad URL).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from workspacefs.errors import FailureKind, SnapshotError, classify
from workspacefs.open import open_filesystem
from workspacefs.protocol import Filesystem

__all__ = [
    "EXIT_CONFLICT",
    "EXIT_DENIED",
    "EXIT_FAILURE",
    "EXIT_INVALID",
    "EXIT_NOT_FOUND",
    "emit",
    "fail",
    "fs_option",
    "json_option",
    "open_fs",
    "reported",
]

EXIT_FAILURE = 1
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_DENIED = 5
EXIT_INVALID = 6

F = TypeVar("F", bound=Callable[..., Any])

fs_option = click.option(
    "--fs",
    "fs_url",
    metavar="URL",
    envvar="WORKSPACEFS_FS",
    required=True,
    help="The workspace: memory://, file:///dir, sqlite:///file.db?session=ID, postgresql://…?session=ID "
    "(or set WORKSPACEFS_FS).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")


def open_fs(url: str) -> Filesystem:
    """The filesystem at ``url`` (errors become exit code 6)."""
    try:
        return open_filesystem(url)
    except (ValueError, KeyError) as exc:
        fail(EXIT_INVALID, "bad_url", f"cannot open {url!r}: {exc}")


def fail(code: int, kind: str, message: str) -> NoReturn:
    """Report an error on stderr (as JSON under ``--json``) and exit with ``code``."""
    context = click.get_current_context(silent=True)
    as_json = bool(context and context.params.get("as_json"))
    if as_json:
        click.echo(json.dumps({"error": {"code": kind, "message": message}}), err=True)
    else:
        click.echo(f"workspacefs: {message}", err=True)
    sys.exit(code)


def _describe(exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason


_EXIT: dict[FailureKind, int] = {
    "precondition_failed": EXIT_CONFLICT,
    "snapshot_not_found": EXIT_NOT_FOUND,
    "snapshot_failed": EXIT_FAILURE,
    "not_found": EXIT_NOT_FOUND,
    "already_exists": EXIT_CONFLICT,
    "is_a_directory": EXIT_CONFLICT,
    "not_a_directory": EXIT_CONFLICT,
    "not_allowed": EXIT_DENIED,
    "directory_not_empty": EXIT_CONFLICT,
    "conflict": EXIT_CONFLICT,
    "invalid": EXIT_INVALID,
}
"""Each kind of failure (``errors.classify``) as an exit code."""


def _classify(exc: BaseException) -> tuple[int, str, str] | None:
    kind = classify(exc)
    if kind is None:
        if isinstance(exc, OSError):  # an I/O failure of the machine, not a bug: say it, exit 1
            return EXIT_FAILURE, "os_error", _describe(exc)
        return None
    message = _describe(exc) if isinstance(exc, OSError) and not isinstance(exc, SnapshotError) else str(exc)
    return _EXIT[kind], kind, message


def reported(command: F) -> F:
    """Turn a command's filesystem errors into a message on stderr and a meaningful exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BrokenPipeError:  # `workspacefs cat … | head`: the reader left, which is not an error
            sys.stderr.close()
            sys.exit(0)
        except Exception as exc:
            classified = _classify(exc)
            if classified is None:
                raise
            fail(*classified)

    return wrapper  # type: ignore[return-value]


def emit(as_json: bool, value: Any, text: Callable[[], None]) -> None:
    """Print ``value`` as JSON, or run ``text`` to print it for people."""
    if as_json:
        click.echo(json.dumps(value, default=str, ensure_ascii=False))
    else:
        text()
