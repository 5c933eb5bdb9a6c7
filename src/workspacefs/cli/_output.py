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
from urllib.parse import urlsplit

import click

from workspacefs import errors
from workspacefs.cli._opening import EPHEMERAL_SCHEMES, open_workspace, path_hint
from workspacefs.open import display_url
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
    "create_option",
    "current_policy",
    "emit",
    "fail",
    "fs_option",
    "json_option",
    "load_policy",
    "open_fs",
    "open_raw",
    "policy_option",
    "reading_from_terminal",
    "reported",
    "writing_fs_option",
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
    help="The workspace: memory://, file:///dir, sqlite:///file.db?session=ID, postgresql://…?session=ID, "
    "s3://bucket/prefix, composite:///abs/mounts.toml (or set WORKSPACEFS_FS).",
)
_POLICY_KEY = "workspacefs.policy"
_CREATE_KEY = "workspacefs.create"
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
    """``--fs URL``, ``--create`` and ``--policy``: the workspace a command acts on (made only when asked),
    and the rules it acts under."""
    return _fs_url_option(policy_option(create_option(command)))


def writing_fs_option(command: F) -> F:
    """``--fs URL`` and ``--policy`` for a command that writes, and so makes a missing workspace itself."""
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


def _remember_create(context: click.Context, _param: click.Parameter, value: bool) -> bool:
    context.meta[_CREATE_KEY] = value
    return value


create_option = click.option(
    "--create",
    "create_workspace",
    is_flag=True,
    expose_value=False,
    callback=_remember_create,
    help="Make the workspace if it does not exist (a SQL database and session, a file:// directory); "
    "without it a missing one is exit 3 and nothing is written.",
)


def open_fs(url: str, *, create: bool | None = None) -> Filesystem:
    """The filesystem at ``url``, seen through the command's ``--policy``. Reading never creates: a missing
    workspace is exit 3 unless ``create`` (a writing command) or ``--create`` says to make it. A bad URL is
    exit code 6; a backend whose extra is missing, 1."""
    policy = current_policy()
    return policy.guard(open_raw(url, create=create))


def open_raw(url: str, *, create: bool | None = None, **options: Any) -> Filesystem:
    """As :func:`open_fs`, without the policy (for a caller that applies it itself, as the MCP server does)."""
    context = click.get_current_context(silent=True)
    creating = bool(context is not None and context.meta.get(_CREATE_KEY)) if create is None else create
    hint = path_hint(url)
    if hint is not None:
        fail(EXIT_INVALID, "bad_url", hint)
    try:
        fs = open_workspace(url, create=creating, **options)
    except FileNotFoundError as exc:
        advice = "" if creating else "; add --create to make it (writing to it makes it too)"
        fail(EXIT_NOT_FOUND, "not_found", f"{_describe(exc)}{advice}")
    except (ValueError, KeyError) as exc:
        fail(EXIT_INVALID, "bad_url", f"cannot open {display_url(url)!r}: {exc}")
    except ImportError as exc:  # an extra that is not installed: the message names it
        fail(EXIT_FAILURE, "missing_dependency", str(exc))
    except OSError as exc:  # the root is a file, the database server refused …
        exit_code, code, message = classify(exc) or (EXIT_FAILURE, "os_error", _describe(exc))
        fail(exit_code, code, f"cannot open {display_url(url)!r}: {message}")
    if urlsplit(url).scheme.lower() in EPHEMERAL_SCHEMES:
        click.echo(
            "workspacefs: memory:// keeps files only while this command runs (use file:///dir or "
            "sqlite:///file.db?session=ID to keep them)",
            err=True,
        )
    return fs


def reading_from_terminal(what: str) -> None:
    """Say so when a command waits for stdin typed at a terminal (a newcomer would take it for a hang)."""
    if sys.stdin.isatty():
        click.echo(f"workspacefs: reading {what} from the terminal; end with Ctrl-D (Ctrl-C cancels)", err=True)


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
    errors.MountPointError: EXIT_DENIED,
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
    errors.UndoConflictError: EXIT_CONFLICT,
    errors.UndoContentNotKeptError: EXIT_CONFLICT,
    errors.QuotaExceededError: EXIT_DENIED,
    errors.FileTooLargeError: EXIT_DENIED,
    OSError: EXIT_FAILURE,
    ConnectionError: EXIT_FAILURE,
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
    errors.InvalidTextError: EXIT_INVALID,
    errors.MoveIntoSelfError: EXIT_INVALID,
    ValueError: EXIT_INVALID,
    errors.UnsupportedOperationError: EXIT_INVALID,
    errors.SandboxError: EXIT_FAILURE,
    errors.SnapshotError: EXIT_FAILURE,
    errors.SnapshotCreationError: EXIT_FAILURE,
    errors.SnapshotRestoreError: EXIT_FAILURE,
    errors.SnapshotNotFoundError: EXIT_NOT_FOUND,
    errors.HistoryEntryNotFoundError: EXIT_NOT_FOUND,
    errors.SnapshotIncompatibleError: EXIT_INVALID,
    errors.AmbiguousSnapshotError: EXIT_INVALID,
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
