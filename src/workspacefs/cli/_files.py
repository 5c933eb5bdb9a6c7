"""File commands for a person at a terminal: ``ls``, ``cat``, ``write``, ``rm``, ``mv``, ``cp``, ``grep``,
``glob``, ``stat``. Each opens ``--fs URL`` and goes through the same filesystem API the tools use."""

from __future__ import annotations

import io
import sys
from typing import Any, cast

import click

from workspacefs import errors
from workspacefs.cli._output import (
    EXIT_CODES,
    EXIT_CONFLICT,
    EXIT_DENIED,
    EXIT_FAILURE,
    EXIT_INVALID,
    EXIT_NOT_FOUND,
    current_policy,
    emit,
    fail,
    fs_option,
    json_option,
    open_fs,
    reading_from_terminal,
    reported,
    writing_fs_option,
)
from workspacefs.paths import DEFAULT_CHUNK_SIZE
from workspacefs.results import FileStat, WriteMode
from workspacefs.search import text_or_base64
from workspacefs.tools import ToolContext
from workspacefs.tools._patch_tools import apply_patch_text

__all__ = ["register"]


def _stat_json(stat: FileStat) -> dict[str, Any]:
    return {
        "path": stat.path,
        "is_directory": stat.is_directory,
        "size_bytes": stat.size_bytes,
        "created_at": stat.created_at.isoformat() if stat.created_at else None,
        "modified_at": stat.modified_at.isoformat() if stat.modified_at else None,
        "read_only": stat.read_only,
    }


def _when(stat: FileStat) -> str:
    return stat.modified_at.strftime("%Y-%m-%d %H:%M") if stat.modified_at else "-"


@click.command("ls", short_help="List a directory.")
@click.argument("path", default="/")
@click.option("-l", "--long", "long_format", is_flag=True, help="Show size and modification time.")
@fs_option
@json_option
@reported
def ls(path: str, long_format: bool, fs_url: str, as_json: bool) -> None:
    """List a directory (folders end in /)."""
    fs = open_fs(fs_url)
    entries = fs.list(path)
    stats = [fs.stat(e.path) for e in entries] if long_format or as_json else []

    def text() -> None:
        for index, entry in enumerate(entries):
            name = entry.name + ("/" if entry.is_directory else "")
            if long_format:
                size = "-" if entry.is_directory else str(entry.size_bytes)
                click.echo(f"{size:>12}  {_when(stats[index])}  {name}")
            else:
                click.echo(name)

    listing = [{"name": e.name, **_stat_json(s)} for e, s in zip(entries, stats, strict=True)] if as_json else []
    emit(as_json, listing, text)


@click.command("cat", short_help="Print a file (raw bytes, or --json).")
@click.argument("path")
@fs_option
@json_option
@reported
def cat(path: str, fs_url: str, as_json: bool) -> None:
    """Print a file's bytes (streamed; --json gives text or base64 like the REST API)."""
    fs = open_fs(fs_url)
    if as_json:
        data = fs.read_bytes(path).content
        content, encoding = text_or_base64(data)
        emit(True, {"path": fs.stat(path).path, "encoding": encoding, "content": content}, lambda: None)
        return
    out = sys.stdout.buffer
    with fs.open_read(path) as reader:
        for chunk in reader.chunks(DEFAULT_CHUNK_SIZE):
            out.write(chunk)
    out.flush()


@click.command("write", short_help="Write stdin to a file, atomically.")
@click.argument("path")
@click.option("--append", is_flag=True, help="Add to the end instead of replacing.")
@click.option("--create", "create_only", is_flag=True, help="Fail (exit 4) if the file exists.")
@writing_fs_option
@json_option
@reported
def write(path: str, append: bool, create_only: bool, fs_url: str, as_json: bool) -> None:
    """Write stdin to a file (streamed, atomic: the old content stays if anything fails). Makes the workspace
    (database, session or directory) if it does not exist."""
    if append and create_only:
        raise click.UsageError("--append and --create exclude each other")
    fs = open_fs(fs_url, create=True)
    mode: WriteMode = "append" if append else "create" if create_only else "overwrite"
    source = cast(io.BufferedReader, sys.stdin.buffer)  # what Python gives stdin: it has read1
    reading_from_terminal(path)
    # at a terminal read what each line brings, so one Ctrl-D ends the input (read() would wait for a second)
    read = source.read1 if sys.stdin.isatty() else source.read
    with fs.open_write(path, mode=mode) as writer:
        while block := read(1024 * 1024):
            writer.write(block)
        written = writer.bytes_written
    stat = fs.stat(path)
    emit(as_json, {**_stat_json(stat), "bytes_written": written, "mode": mode}, lambda: None)


@click.command("rm", short_help="Delete files or (-r) directories.")
@click.argument("paths", nargs=-1, required=True)
@click.option("-r", "--recursive", is_flag=True, help="Remove directories and everything in them.")
@fs_option
@json_option
@reported
def rm(paths: tuple[str, ...], recursive: bool, fs_url: str, as_json: bool) -> None:
    """Delete files (and, with -r, directories)."""
    fs = open_fs(fs_url)
    for path in paths:
        try:
            fs.delete(path, recursive=recursive)
        except errors.DirectoryNotEmptyError:
            fail(
                EXIT_CONFLICT,
                "directory_not_empty",
                f"{path}: directory not empty; use -r to delete it and its contents",
            )
    emit(as_json, {"deleted": list(paths)}, lambda: None)


def _transfer(verb: str) -> click.Command:
    @click.command(verb, short_help="Move or rename." if verb == "mv" else "Copy files or directories.")
    @click.argument("source")
    @click.argument("destination")
    @click.option("--overwrite", is_flag=True, help="Replace an existing destination of the same kind.")
    @fs_option
    @json_option
    @reported
    def command(source: str, destination: str, overwrite: bool, fs_url: str, as_json: bool) -> None:
        fs = open_fs(fs_url)
        (fs.move if verb == "mv" else fs.copy)(source, destination, overwrite=overwrite)
        emit(as_json, _stat_json(fs.stat(destination)), lambda: None)

    command.help = (
        "Move or rename a file or directory (parents are created)."
        if verb == "mv"
        else "Copy a file, or a directory with everything in it (parents are created)."
    )
    return command


@click.command("grep", short_help="Search file contents with a regex.")
@click.argument("pattern")
@click.argument("path", default="/")
@click.option("--glob", "name_glob", metavar="GLOB", help="Only files matching this glob (*.py, src/**/*.rs).")
@click.option("-i", "--ignore-case", is_flag=True, help="Match case-insensitively.")
@click.option("-m", "--max-count", type=click.IntRange(1), default=1000, show_default=True, help="Stop after N.")
@fs_option
@json_option
@reported
def grep(
    *, pattern: str, path: str, name_glob: str | None, ignore_case: bool, max_count: int, fs_url: str, as_json: bool
) -> None:
    """Search file contents for a regular expression; exit 1 when nothing matches (like grep)."""
    fs = open_fs(fs_url)
    matches = fs.grep(f"(?i){pattern}" if ignore_case else pattern, path=path, glob=name_glob, max_matches=max_count)

    def text() -> None:
        for match in matches:
            click.echo(f"{match.path}:{match.line_number}:{match.line_content}")

    emit(
        as_json,
        [
            {"path": m.path, "line_number": m.line_number, "line_content": m.line_content, "line": m.line_content}
            for m in matches
        ],
        text,
    )
    if not matches:
        sys.exit(EXIT_FAILURE)


@click.command("glob", short_help="Find files by glob pattern.")
@click.argument("pattern")
@click.argument("path", default="/")
@fs_option
@json_option
@reported
def glob(pattern: str, path: str, fs_url: str, as_json: bool) -> None:
    """List files whose path below PATH matches PATTERN (** crosses directories)."""
    fs = open_fs(fs_url)
    found = [m.path for m in fs.glob(pattern, path=path)]

    def text() -> None:
        for match in found:
            click.echo(match)

    emit(as_json, found, text)


@click.command("stat", short_help="Show a path's metadata.")
@click.argument("path")
@fs_option
@json_option
@reported
def stat(path: str, fs_url: str, as_json: bool) -> None:
    """Show a file's or directory's metadata."""
    fs = open_fs(fs_url)
    info = fs.stat(path)

    def text() -> None:
        kind = "directory" if info.is_directory else "file"
        click.echo(f"{info.path or '/'}: {kind}, {info.size_bytes} bytes, modified {_when(info)}")
        if info.read_only:
            click.echo("read-only")

    emit(as_json, _stat_json(info), text)


_PATCH_EXIT_CODES = {
    **{errors.ERROR_CODES[kind]: code for kind, code in EXIT_CODES.items() if kind in errors.ERROR_CODES},
    "invalid_patch": EXIT_INVALID,
    "patch_mismatch": EXIT_CONFLICT,
    "changed_since_read": EXIT_CONFLICT,
    "not_found": EXIT_NOT_FOUND,
    "not_text": EXIT_INVALID,
    "too_large": EXIT_INVALID,
    "invalid_path": EXIT_INVALID,
    "read_only": EXIT_DENIED,
}
"""A failed patch's exit code, by the stable code of the failure (the errors' own codes, and the patch's)."""


@click.command("patch", short_help="Apply a '*** Begin Patch' patch from stdin, all or nothing.")
@writing_fs_option
@json_option
@reported
def patch(fs_url: str, as_json: bool) -> None:
    """Apply a Codex-style patch (*** Begin Patch / *** Add File / *** Update File / *** Delete File /
    *** End Patch) read from stdin: every file changes, or none does (exit 4 when context does not match)."""
    fs = open_fs(fs_url, create=True)
    reading_from_terminal("the patch")
    text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    result = apply_patch_text(text, ToolContext(filesystem=fs, read_before_write=False, policy=current_policy()))
    if not result.success:
        fail(
            _PATCH_EXIT_CODES.get(result.error_code or "", EXIT_FAILURE),
            result.error_code or "patch_failed",
            result.message,
        )
    emit(as_json, result.value, lambda: click.echo(result.message))


def register(group: click.Group) -> None:
    """Add the file commands to the ``workspacefs`` group."""
    for command in (ls, cat, write, rm, _transfer("mv"), _transfer("cp"), grep, glob, stat, patch):
        group.add_command(command)
