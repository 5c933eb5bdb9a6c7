"""``ls``, ``glob``, ``grep``, ``rm`` and the extras ``mkdir``, ``mv``, ``cp``, ``stat``."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workspacefs.errors import MoveIntoSelfError
from workspacefs.paths import DEFAULT_MAX_GREP_MATCHES, MAX_CONVENIENCE_BYTES, ROOT, normalize_path
from workspacefs.protocol import Filesystem
from workspacefs.tools._core import Tool, ToolContext, ToolResult
from workspacefs.tools._editing import RefusalError, current_id, read_file_call, require_fresh
from workspacefs.tools._messages import display, failure, failure_from, human_size, plural, shown
from workspacefs.undo import UndoLog

__all__ = ["CP", "GLOB", "GREP", "LS", "MKDIR", "MV", "RM", "STAT"]

GREP_DEFAULT_RESULTS = 200
GLOB_MAX_SHOWN = 1000
"""Names a listing shows (``glob``'s matches, ``ls``'s entries); the rest are counted, not shown."""
_GREP_LINE_CHARS = 300


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _dirs(count: int) -> str:
    return f"{count} directory" if count == 1 else f"{count} directories"


def _no_filesystem() -> ToolResult[Any]:
    return failure("No filesystem is available in this context; the tool cannot run.")


# --- ls -------------------------------------------------------------------------------------------


class LsParams(_Params):
    path: str = Field(".", description="Directory to list; the workspace root by default.")


def ls(params: LsParams, *, context: ToolContext) -> ToolResult[list[dict[str, object]]]:
    """Entries sorted by name: directories end in ``/``, files show their size."""
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    try:
        entries = fs.list(params.path)
    except NotADirectoryError:
        return failure(
            f"'{display(fs, params.path)}' is a file, not a directory; stat describes it, and read_file shows it "
            "if it is text.",
            "not_a_directory",
        )
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path, verb="listed")
    where = display(fs, params.path)
    if not entries:
        return ToolResult(f"'{where}' is an empty directory.", [])
    rows = [
        f"{e.name}/" if e.is_directory else f"{e.name}  ({human_size(e.size_bytes or 0)})"
        for e in entries[:GLOB_MAX_SHOWN]
    ]
    if len(entries) > GLOB_MAX_SHOWN:  # a model reads a bounded listing, as glob's
        rows.append(
            f"… and {len(entries) - GLOB_MAX_SHOWN} more; glob with path=\"{where}\" and a pattern such as '*.py' "
            "finds the ones you need."
        )
    dirs = sum(e.is_directory for e in entries)
    header = f"{where}: {plural(len(entries) - dirs, 'file')}, {_dirs(dirs)}"
    return ToolResult(header + "\n" + "\n".join(rows), [asdict(e) for e in entries])


def _missing_scope(fs: Filesystem, path: str, *, directory: bool = False) -> ToolResult[Any] | None:
    """A failure when the place to search does not exist, or (``directory``) is a file: a model never takes
    "no matches" for "searched"."""
    try:
        if fs.stat(path).is_file and directory:
            return failure(
                f"'{display(fs, path)}' is a file, not a directory; glob searches directories (grep searches a "
                "file's content).",
                "not_a_directory",
            )
    except FileNotFoundError:
        return failure(
            f"'{display(fs, path)}' does not exist, so nothing was searched. Use ls or glob to find the right path.",
            "not_found",
        )
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, path, verb="searched")
    return None


# --- glob -----------------------------------------------------------------------------------------


class GlobParams(_Params):
    pattern: str = Field(description="Glob such as '**/*.py' ('*' stays in one directory, '**' spans any).")
    path: str = Field(".", description="Directory to search from.")


def glob(params: GlobParams, *, context: ToolContext) -> ToolResult[list[str]]:
    """Matching files, sorted; long lists are cut with a note."""
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    try:
        matches = [shown(fs, m.path) for m in fs.glob(params.pattern, path=params.path)]
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path, verb="searched")
    if not matches:
        missing = _missing_scope(fs, params.path, directory=True)
        if missing is not None:
            return missing
        return ToolResult(f"No files match '{params.pattern}' under '{display(fs, params.path)}'.", [])
    body = "\n".join(matches[:GLOB_MAX_SHOWN])
    if len(matches) > GLOB_MAX_SHOWN:
        body += f"\n… and {len(matches) - GLOB_MAX_SHOWN} more; use a narrower pattern or path."
    return ToolResult(f"{plural(len(matches), 'file')} match '{params.pattern}':\n{body}", matches)


# --- grep -----------------------------------------------------------------------------------------


class GrepParams(_Params):
    pattern: str = Field(description="Regular expression (RE2 syntax, like Python's); one match per line.")
    path: str = Field(".", description="Directory (searched recursively) or file to search.")
    glob: str | None = Field(None, description="Only files matching this glob: '*.py' by name, 'src/**/*.py' by path.")
    max_results: int = Field(
        GREP_DEFAULT_RESULTS, ge=1, le=DEFAULT_MAX_GREP_MATCHES, description="Most matching lines to return."
    )


def grep(params: GrepParams, *, context: ToolContext) -> ToolResult[list[dict[str, object]]]:
    """Matching lines grouped by file, with line numbers; says when the list was capped."""
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    try:
        found = fs.grep(params.pattern, path=params.path, glob=params.glob, max_matches=params.max_results + 1)
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path, verb="searched")
    capped = len(found) > params.max_results
    found = found[: params.max_results]
    if not found:
        missing = _missing_scope(fs, params.path)
        if missing is not None:
            return missing
        scope = display(fs, params.path) + (f" (files matching '{params.glob}')" if params.glob else "")
        return ToolResult(f"No lines match '{params.pattern}' in '{scope}'.", [])
    lines: list[str] = []
    current = None
    for match in found:
        if match.path != current:
            current = match.path
            lines.append(("" if not lines else "\n") + shown(fs, match.path))
        text = match.line_content
        if len(text) > _GREP_LINE_CHARS:
            text = text[:_GREP_LINE_CHARS] + " …"
        lines.append(f"{match.line_number:6}: {text}")
    files = len({m.path for m in found})
    header = f"{plural(len(found), 'matching line')} in {plural(files, 'file')}"
    if capped:
        header += f" (showing the first {params.max_results}; narrow the pattern, path or glob to see the rest)"
    value = [{**asdict(m), "path": shown(fs, m.path)} for m in found]
    return ToolResult(header + ":\n" + "\n".join(lines), value)


# --- rm -------------------------------------------------------------------------------------------


class RmParams(_Params):
    path: str = Field(description="File or directory to remove.")
    recursive: bool = Field(False, description="Needed to remove a directory that is not empty.")


def _tree_counts(fs: Filesystem, path: str) -> tuple[int, int]:
    """(files, directories) below a directory."""
    files = dirs = 0
    for entry in fs.walk(path):
        dirs += entry.is_directory
        files += not entry.is_directory
    return files, dirs


def rm(params: RmParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Remove a file, or a directory (``recursive`` for a non-empty one); says what went."""
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    where = display(fs, params.path)
    try:
        if normalize_path(params.path, mount_point=fs.mount_point) == ROOT:  # before advice that cannot work
            return failure("The workspace root itself cannot be removed; remove the paths inside it.", "root_protected")
        info = fs.stat(params.path)
        files, dirs = _tree_counts(fs, params.path) if info.is_directory else (1, 0)
        if info.is_directory and (files or dirs) and not params.recursive:
            return failure(
                f"'{where}' is a directory holding {plural(files, 'file')} and {_dirs(dirs)}; "
                "pass recursive=true to remove it and everything in it."
            )
        fs.delete(params.path, recursive=params.recursive)
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path, verb="removed")
    context.read_state.forget(fs, params.path)
    if info.is_directory:
        held = f" with {plural(files, 'file')} and {_dirs(dirs)}." if files or dirs else " (empty)."
        message = f"Removed directory '{where}'{held}"
    else:
        message = f"Removed file '{where}' ({human_size(info.size_bytes)})."
    return ToolResult(message, {"path": where, "files": files if info.is_directory else 1, "directories": dirs})


# --- mkdir, mv, cp, stat ----------------------------------------------------------------------------


class MkdirParams(_Params):
    path: str = Field(description="Directory to create; missing parents are created too.")


def mkdir(params: MkdirParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Create a directory (and its parents); fine if it already exists."""
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    where = display(fs, params.path)
    try:
        existed = fs.exists(params.path)
        fs.mkdir(params.path, parents=True, exist_ok=True)
    except FileExistsError:
        return failure(f"'{where}' already exists as a file; choose another name.", "already_exists")
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path, verb="created")
    return ToolResult(f"'{where}' already existed." if existed else f"Created directory '{where}'.", {"path": where})


class TransferParams(_Params):
    src: str = Field(description="File or directory to take.")
    dst: str = Field(description="Where it goes (the full new path, not a directory to drop it into).")
    overwrite: bool = Field(False, description="Replace an existing destination of the same kind.")


def _transfer(params: TransferParams, context: ToolContext, *, move: bool) -> ToolResult[dict[str, object]]:
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    verb = "moved" if move else "copied"
    src, dst = display(fs, params.src), display(fs, params.dst)
    try:
        if params.overwrite:
            _require_replaceable(context, fs, params.src, params.dst)
        (fs.move if move else fs.copy)(params.src, params.dst, overwrite=params.overwrite)
    except RefusalError as refused:
        return refused.result()
    except (FileExistsError, IsADirectoryError, NotADirectoryError) as exc:
        kinds = _kinds(fs, params.src, params.dst)
        if kinds is not None and kinds[1] and not kinds[0]:  # a file onto a directory's name
            name = params.src.rstrip("/").rsplit("/", 1)[-1]
            return failure(
                f"'{dst}' is an existing directory. dst is the full new path of '{src}', not a folder to drop it "
                f'into: to put it inside, use dst="{dst}/{name}".',
                "already_exists",
            )
        if isinstance(exc, FileExistsError):
            return failure(
                f"'{dst}' already exists; pass overwrite=true to replace it, or choose another destination.",
                "already_exists",
            )
        return failure_from(exc, fs, exc.filename if isinstance(exc.filename, str) else params.dst, verb=verb)
    except MoveIntoSelfError:
        action = "move" if move else "copy"
        why = "they are the same path" if src == dst else "a directory cannot go inside itself"
        return failure(f"Cannot {action} '{src}' to '{dst}': {why}.", "move_into_itself")
    except ValueError as exc:
        return failure_from(exc, fs, params.src, verb=verb)
    except OSError as exc:
        return failure_from(exc, fs, exc.filename if isinstance(exc.filename, str) else params.src, verb=verb)
    if move:
        context.read_state.forget(fs, params.src)
    return ToolResult(f"{verb.capitalize()} '{src}' to '{dst}'.", {"src": src, "dst": dst})


def _require_replaceable(context: ToolContext, fs: Filesystem, src: str, dst: str) -> None:
    """An existing file ``overwrite`` would replace is overwritten as ``write_file`` overwrites: only once the model
    has read it, at the version it holds now (``RefusalError`` otherwise; a directory, no file or ``src`` itself,
    which the transfer refuses: nothing to ask)."""
    try:
        same = normalize_path(src, mount_point=fs.mount_point) == normalize_path(dst, mount_point=fs.mount_point)
        if same or not fs.stat(dst).is_file:
            return
        now = current_id(fs, dst)
    except (OSError, ValueError):  # missing, or a path the transfer itself refuses with its own message
        return
    require_fresh(context, fs, dst, now, reread=read_file_call(display(fs, dst)))


def _may_replace(params: TransferParams, log: UndoLog) -> bool:
    """True if the transfer can change ``dst``: it is missing, or ``overwrite`` replaces one of the source's kind
    (else the call is refused before any change, and nothing of ``dst`` needs copying first)."""
    try:
        held = log.fs.stat(params.dst)
    except FileNotFoundError:
        return True
    if not params.overwrite:
        return False
    try:
        return log.fs.stat(params.src).is_directory == held.is_directory
    except FileNotFoundError:
        return False


def _undo_move(params: TransferParams, log: UndoLog) -> None:
    if _may_replace(params, log):
        log.will_move(params.src, params.dst)


def _undo_copy(params: TransferParams, log: UndoLog) -> None:
    if _may_replace(params, log):
        log.will_change(params.dst)  # copying a tree takes many steps


def _kinds(fs: Filesystem, src: str, dst: str) -> tuple[bool, bool] | None:
    """``(src is a directory, dst is a directory)``, or ``None`` if either cannot be examined."""
    try:
        return fs.stat(src).is_directory, fs.stat(dst).is_directory
    except (OSError, ValueError):
        return None


def mv(params: TransferParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Move or rename a file or directory."""
    return _transfer(params, context, move=True)


def cp(params: TransferParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Copy a file, or a directory with everything in it."""
    return _transfer(params, context, move=False)


class StatParams(_Params):
    path: str = Field(description="File or directory to describe.")


def stat(params: StatParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Kind, size and modification time."""
    fs = context.filesystem
    if fs is None:
        return _no_filesystem()
    try:
        info = fs.stat(params.path)
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path, verb="examined")
    where = shown(fs, normalize_path(params.path, mount_point=fs.mount_point))
    text = f"'{where}' is a directory" if info.is_directory else f"'{where}' is a file of {human_size(info.size_bytes)}"
    if info.is_file and info.size_bytes >= 1024:
        text += f" ({info.size_bytes} bytes)"
    if info.modified_at is not None:
        text += f", modified {info.modified_at.isoformat(timespec='seconds')}"
    value: dict[str, object] = {**asdict(info), "path": where}
    if info.is_file and info.size_bytes <= MAX_CONVENIENCE_BYTES:  # the version a precondition can name
        try:
            value["content_id"] = current_id(fs, params.path)
        except (OSError, ValueError):
            pass
        else:
            text += f", content id {value['content_id']} (pass it as expected_hash to write only over this version)"
    return ToolResult(text + ".", value)


LS = Tool("ls", "List a directory: names sorted, directories marked with '/', files with sizes.", LsParams, ls)
GLOB = Tool("glob", "Find files by glob pattern (e.g. '**/*.py'); results sorted by path.", GlobParams, glob)
GREP = Tool(
    "grep",
    "Search file contents with a regular expression; matching lines grouped by file with line numbers. "
    "Binary files are skipped. Filter files with `glob`.",
    GrepParams,
    grep,
)
RM = Tool(
    "rm",
    "Remove a file or directory (recursive=true for a non-empty directory).",
    RmParams,
    rm,
    mutating=True,
    destructive=True,
    # no undo plan: one delete call, atomic in memory and SQL; copying a tree only to be able to put it back
    # would cost more than the delete (a host delete that fails part way leaves the rest, like ``rm -r``)
)
MKDIR = Tool(
    "mkdir",
    "Create a directory and any missing parents.",
    MkdirParams,
    mkdir,
    mutating=True,
    undo=lambda params, log: log.will_create(params.path),
)
MV = Tool(
    "mv",
    "Move or rename a file or directory (overwrite=true to replace).",
    TransferParams,
    mv,
    mutating=True,
    destructive=True,
    idempotent=False,
    undo=_undo_move,
)
CP = Tool(
    "cp",
    "Copy a file, or a directory with its contents.",
    TransferParams,
    cp,
    mutating=True,
    destructive=True,
    undo=_undo_copy,
)
STAT = Tool("stat", "Describe a path: file or directory, size, modification time.", StatParams, stat)
