"""How every command reports: results on stdout (text or ``--json``), errors on stderr, exit codes.

Exit codes a script can rely on: 0 success; 1 nothing found (``grep`` without a match) or another
failure; 2 bad usage; 3 not found; 4 exists, not empty, or a directory/file mix-up; 5 not allowed
(read-only, outside the workspace); 6 invalid input (a bad path, regex or glob, a bad URL).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeVar

import click

from workspacefs import errors
from workspacefs.open import open_filesystem
from workspacefs.policy import ApprovalRequest, Policy
from workspacefs.protocol import Filesystem

__all__ = [
    "EXIT_CODES",
    "EXIT_CONFLICT",
    "EXIT_DENIED",
    "EXIT_FAILURE",
    "EXIT_INVALID",
    "EXIT_NOT_FOUND",
    "classify",
    "current_policy",
    "emit",
    "fail",
    "fs_option",
    "json_option",
    "load_policy",
    "open_fs",
    "policy_option",
    "reported",
]

EXIT_FAILURE = 1
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_DENIED = 5
EXIT_INVALID = 6

F = TypeVar("F", bound=Callable[..., Any])

_fs_url_option = click.option(
    "--fs",
    "fs_url",
    metavar="URL",
    envvar="WORKSPACEFS_FS",
    required=True,
    help="The workspace: memory://, file:///dir, sqlite:///file.db?session=ID, postgresql://…?session=ID "
    "(or set WORKSPACEFS_FS).",
)
_POLICY_KEY = "workspacefs.policy"
POLICY_HELP = (
    "The path policy: 'default' (asks before changing agent and tool configuration or touching secrets; "
    "at a terminal you are asked, elsewhere it refuses), 'none', or a JSON/TOML policy file "
    "(or set WORKSPACEFS_POLICY)."
)


def _remember_policy(context: click.Context, _param: click.Parameter, value: str) -> str:
    context.meta[_POLICY_KEY] = value
    return value


policy_option = click.option(
    "--policy",
    metavar="FILE|default|none",
    envvar="WORKSPACEFS_POLICY",
    default="default",
    show_default=True,
    expose_value=False,
    is_eager=True,
    callback=_remember_policy,
    help=POLICY_HELP,
)


def fs_option(command: F) -> F:
    """``--fs URL`` and ``--policy``: the workspace a command acts on, and the rules it acts under."""
    return _fs_url_option(policy_option(command))


def _ask_at_terminal(request: ApprovalRequest) -> bool:
    return click.confirm(f"workspacefs: {request.describe()}. Allow it?", default=False, err=True)


def load_policy(value: str) -> Policy:
    """``default``, ``none`` or a policy file, with a prompt as approver when a person is at the terminal."""
    approve = _ask_at_terminal if sys.stdin.isatty() and sys.stderr.isatty() else None
    if value == "none":
        return Policy()
    if value == "default":
        return Policy.default(approve=approve)
    try:
        return Policy.load(value, approve=approve)
    except OSError as exc:
        fail(EXIT_INVALID, "bad_policy", f"cannot read the policy file {value!r}: {exc.strerror or exc}")
    except ValueError as exc:
        fail(EXIT_INVALID, "bad_policy", str(exc))


def current_policy() -> Policy:
    """The policy ``--policy`` chose for this command (the default when the command has no such option)."""
    context = click.get_current_context(silent=True)
    return load_policy(str(context.meta.get(_POLICY_KEY, "default")) if context is not None else "default")


json_option = click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")


def open_fs(url: str) -> Filesystem:
    """The filesystem at ``url``, seen through the command's ``--policy`` (a bad URL is exit code 6; a backend
    whose extra is missing, 1)."""
    policy = current_policy()
    try:
        return policy.guard(open_filesystem(url))
    except (ValueError, KeyError) as exc:
        fail(EXIT_INVALID, "bad_url", f"cannot open {url!r}: {exc}")
    except ImportError as exc:  # an extra that is not installed: the message names it
        fail(EXIT_FAILURE, "missing_dependency", str(exc))


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


EXIT_CODES: Mapping[type[BaseException], int] = {
    errors.PathEscapeError: EXIT_DENIED,
    errors.SymlinkRefusedError: EXIT_DENIED,
    errors.SpecialFileError: EXIT_DENIED,
    errors.HardLinkRefusedError: EXIT_DENIED,
    errors.RootProtectedError: EXIT_DENIED,
    errors.ReadOnlyError: EXIT_DENIED,
    errors.ReadOnlyFileError: EXIT_DENIED,
    errors.NotReadBeforeWriteError: EXIT_DENIED,
    errors.FileChangedSinceReadError: EXIT_CONFLICT,
    errors.PolicyDeniedError: EXIT_DENIED,
    PermissionError: EXIT_DENIED,
    errors.DirectoryNotEmptyError: EXIT_CONFLICT,
    IsADirectoryError: EXIT_CONFLICT,
    NotADirectoryError: EXIT_CONFLICT,
    FileNotFoundError: EXIT_NOT_FOUND,
    FileExistsError: EXIT_CONFLICT,
    errors.PreconditionFailedError: EXIT_CONFLICT,
    errors.ConcurrentChangeError: EXIT_CONFLICT,
    errors.QuotaExceededError: EXIT_DENIED,
    errors.FileTooLargeError: EXIT_DENIED,
    OSError: EXIT_FAILURE,
    UnicodeDecodeError: EXIT_INVALID,
    errors.InvalidPathError: EXIT_INVALID,
    errors.UnsafeNameError: EXIT_INVALID,
    errors.PathTooLongError: EXIT_INVALID,
    errors.PathTooDeepError: EXIT_INVALID,
    errors.NameTooLongError: EXIT_INVALID,
    errors.LimitExceededError: EXIT_INVALID,
    errors.ContentTooLargeError: EXIT_INVALID,
    errors.InvalidPatternError: EXIT_INVALID,
    errors.PatternTooSlowError: EXIT_INVALID,
    errors.PatternTooLargeError: EXIT_INVALID,
    errors.MoveIntoSelfError: EXIT_INVALID,
    ValueError: EXIT_INVALID,
    errors.UnsupportedOperationError: EXIT_INVALID,
    errors.SandboxError: EXIT_FAILURE,
    errors.SnapshotError: EXIT_FAILURE,
    errors.SnapshotCreationError: EXIT_FAILURE,
    errors.SnapshotRestoreError: EXIT_FAILURE,
    errors.SnapshotNotFoundError: EXIT_NOT_FOUND,
    errors.SnapshotIncompatibleError: EXIT_INVALID,
}
"""The exit code of each error type (looked up by the exception's MRO: most specific first)."""


def classify(exc: BaseException) -> tuple[int, str, str] | None:
    """``(exit code, error code, message)`` for an exception, or ``None`` for a bug (left to propagate)."""
    exit_code = errors.lookup(EXIT_CODES, exc)
    code = errors.error_code(exc)
    if exit_code is None or code is None:
        return None
    message = _describe(exc) if isinstance(exc, OSError) else str(exc)
    return exit_code, code, message


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
            classified = classify(exc)
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
