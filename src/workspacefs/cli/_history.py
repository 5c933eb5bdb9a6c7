"""History commands: ``log`` (like ``git log --stat``) and ``undo``.

Every command of the CLI runs as the actor ``--actor``/``WORKSPACEFS_ACTOR`` names (via ``cli``), so what it
changes is attributed in the journal; ``log`` reads the journal the backend keeps (memory, host, SQL).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import click

from workspacefs.cli._output import EXIT_INVALID, emit, fail, fs_option, json_option, open_fs, writing_fs_option
from workspacefs.cli._output import reported as _reported
from workspacefs.history import DIRECTORY, NOT_KEPT, Change, HistoryFilesystem, JournalEntry
from workspacefs.protocol import Filesystem

__all__ = ["entry_json", "register"]


def _journaled(fs: Filesystem) -> HistoryFilesystem:
    if not fs.capabilities.history:
        fail(EXIT_INVALID, "unsupported", f"{fs!r} keeps no history of changes")
    return cast(HistoryFilesystem, fs)  # the capability promises the methods


def _since(value: str | None) -> int | datetime | None:
    """``--since``: an entry id, or an ISO time."""
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter("an entry id or an ISO time such as 2026-11-24T10:00", param_hint="--since") from None


def _side(value: str | None) -> str:
    if value is None:
        return "-"
    if value == NOT_KEPT:
        return "(not kept)"
    return "dir" if value == DIRECTORY else value[:12]


def change_json(change: Change) -> dict[str, Any]:
    """One change as the CLI and the service print it."""
    return {
        "path": change.path,
        "kind": change.kind,
        "from_path": change.from_path,
        "before": change.before,
        "after": change.after,
        "size_delta": change.size_delta,
        "read_only_before": change.read_only_before,
        "read_only_after": change.read_only_after,
    }


def entry_json(entry: JournalEntry) -> dict[str, Any]:
    """One entry as the CLI prints it under ``--json``."""
    actor = entry.actor
    return {
        "entry_id": entry.entry_id,
        "time": entry.time.isoformat(),
        "actor": {"name": actor.name, "session": actor.session, "tool_call": actor.tool_call, "via": actor.via},
        "operation": entry.operation,
        "undoes": entry.undoes,
        "detail": entry.detail,
        "size_delta": entry.size_delta,
        "changes": [change_json(c) for c in entry.changes],
    }


def _print_entry(entry: JournalEntry) -> None:
    undoes = f" (undoes {entry.undoes})" if entry.undoes is not None else ""
    click.echo(f"entry {entry.entry_id}  {entry.operation}{undoes}")
    if entry.operation == "exec" and entry.detail:  # the command that made the changes
        click.echo(f"Ran:   {entry.detail}")
    click.echo(f"When:  {entry.time.isoformat(timespec='seconds')}")
    click.echo(f"Who:   {entry.actor.label}")
    for change in entry.changes:
        moved = f" (from {change.from_path})" if change.from_path else ""
        if change.read_only_after is not None:
            moved += " (made read-only)" if change.read_only_after else " (made writable)"
        elif change.read_only_before:  # a read-only file that went: undo brings it back read-only
            moved += " (was read-only)"
        sign = "+" if change.size_delta >= 0 else ""
        click.echo(
            f"  {change.kind:<8} {change.path}{moved}  {_side(change.before)} -> {_side(change.after)}  "
            f"{sign}{change.size_delta} B"
        )
    click.echo()


@click.command("log", short_help="Show the journal of changes, newest first (like git log --stat).")
@click.argument("path", required=False)
@click.option("--since", help="Only entries after this entry id or ISO time.")
@click.option("--actor", "who", help="Only entries by this agent, session or tool call id.")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most this many.")
@fs_option
@json_option
@_reported
def log(*, path: str | None, since: str | None, who: str | None, limit: int, fs_url: str, as_json: bool) -> None:
    """Show who changed what and when: each entry's actor, operation, and the paths it changed with their
    content ids before and after and the bytes added. PATH limits it to entries touching PATH or below."""
    entries = _journaled(open_fs(fs_url)).history(path, since=_since(since), actor=who, limit=limit)

    def text() -> None:
        for entry in entries:
            _print_entry(entry)

    emit(as_json, [entry_json(e) for e in entries], text)


@click.command("undo", short_help="Undo a journal entry (or an actor's last entries), as a new entry.")
@click.argument("entry_id", type=int, required=False)
@click.option("--actor", "who", help="Undo the last entries of this agent, session or tool call id.")
@click.option("--last", type=click.IntRange(min=1), help="With --actor: how many of its entries (default 1).")
@click.option("--force", is_flag=True, help="Undo even over later changes to the same paths.")
@writing_fs_option
@json_option
@_reported
def undo(*, entry_id: int | None, who: str | None, last: int | None, force: bool, fs_url: str, as_json: bool) -> None:
    """Put back what entry ENTRY_ID changed (see `workspacefs log`). Refused (exit 4, nothing changed) when a
    later change touched the same path, unless --force."""
    if (entry_id is None) == (who is None):
        raise click.UsageError("give an ENTRY_ID or --actor (with --last N)")
    if last is not None and who is None:
        raise click.UsageError("--last goes with --actor")
    made = _journaled(open_fs(fs_url)).undo(entry_id, actor=who, last=last, force=force)

    def text() -> None:
        for entry in made:
            click.echo(f"undid entry {entry.undoes} as entry {entry.entry_id}: {', '.join(entry.paths) or '-'}")

    emit(as_json, [entry_json(e) for e in made], text)


def register(group: click.Group) -> None:
    """Add the history commands to ``group``."""
    group.add_command(log)
    group.add_command(undo)
