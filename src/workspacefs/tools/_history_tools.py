"""``history`` and ``undo``: the journal of changes, and putting one back, for a model.

Offered only when asked for (``tools_for(fs, history=True)``, ``HISTORY_TOOLS``) and where the filesystem
keeps history (``capabilities.history``): undo changes files the model may not have looked at since, so an
application opts in. ``undo`` takes an entry id (from ``history``), or ``last=n`` for the model's own newest
entries (those of ``ToolContext.actor``). It never forces: a path changed again since is refused, and the
message says which entries to undo first. Every file an undo touches must be read again before it is
overwritten or edited (read-before-write forgets it).
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import Field

from workspacefs.errors import HistoryEntryNotFoundError, UndoConflictError, UnsupportedOperationError
from workspacefs.history import JournalEntry
from workspacefs.tools._core import Tool, ToolContext, ToolResult
from workspacefs.tools._file_tools import _Params
from workspacefs.tools._messages import display, failure, failure_from, human_size, plural, shown

__all__ = ["HISTORY", "UNDO"]

_SHOWN_ENTRIES = 100
_SHOWN_PATHS = 5
_LETTER = {"created": "A", "modified": "M", "deleted": "D", "moved": "R"}


def _journaled(context: ToolContext) -> Any:
    fs = context.filesystem
    if fs is None or not fs.capabilities.history:
        return failure(
            "This workspace keeps no history of changes, so history and undo are unavailable.", "unsupported"
        )
    return cast(Any, fs)  # the capability promises history/undo


def _line(context: ToolContext, entry: JournalEntry) -> str:
    fs = context.filesystem
    assert fs is not None
    changes = [f"{_LETTER[c.kind]} {shown(fs, c.path)}" for c in entry.changes[:_SHOWN_PATHS]]
    if len(entry.changes) > _SHOWN_PATHS:
        changes.append(f"and {len(entry.changes) - _SHOWN_PATHS} more")
    delta = entry.size_delta
    size = f", {'+' if delta >= 0 else '-'}{human_size(abs(delta))}" if delta else ""
    undoes = f" (undid #{entry.undoes})" if entry.undoes is not None else ""
    when = entry.time.strftime("%Y-%m-%d %H:%M:%S")
    return f"#{entry.entry_id} {when} {entry.actor.label} {entry.operation}{undoes}: {', '.join(changes)}{size}"


# --- history --------------------------------------------------------------------------------------


class HistoryParams(_Params):
    path: str | None = Field(
        None, description="Only changes of this file or directory; the whole workspace by default."
    )
    limit: int = Field(20, ge=1, le=_SHOWN_ENTRIES, description="How many of the newest entries to show.")


def history(params: HistoryParams, *, context: ToolContext) -> ToolResult[list[dict[str, object]]]:
    """The newest journal entries: who changed which paths, when, with what operation."""
    fs = _journaled(context)
    if isinstance(fs, ToolResult):
        return fs
    try:
        entries: list[JournalEntry] = fs.history(params.path, limit=params.limit)
    except (OSError, ValueError) as exc:
        return failure_from(exc, fs, params.path or ".", verb="looked up")
    where = f" of '{display(fs, params.path)}'" if params.path else ""
    if not entries:
        return ToolResult(f"No changes{where} are recorded.", [])
    lines = [_line(context, entry) for entry in entries]
    head = (
        f"The newest {plural(len(entries), 'change')}{where}, newest first (A added, M modified, D deleted, R moved):"
    )
    value: list[dict[str, object]] = [
        {"entry_id": e.entry_id, "operation": e.operation, "actor": e.actor.label, "paths": list(e.paths)}
        for e in entries
    ]
    return ToolResult("\n".join([head, *lines, "Undo one with undo(entry_id=N)."]), value)


HISTORY = Tool(
    name="history",
    description=(
        "Show the newest changes of the workspace (or of one path): entry id, time, who made it, the operation "
        "and the paths it changed. Use the entry id with undo."
    ),
    params=HistoryParams,
    handler=history,
)


# --- undo -----------------------------------------------------------------------------------------


class UndoParams(_Params):
    entry_id: int | None = Field(None, ge=1, description="The entry to undo, as history shows it (#N).")
    last: int | None = Field(None, ge=1, le=20, description="Instead: undo your own newest N changes.")


def undo(params: UndoParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Put back what an entry changed, as a new entry (which can itself be undone)."""
    fs = _journaled(context)
    if isinstance(fs, ToolResult):
        return fs
    if (params.entry_id is None) == (params.last is None):
        return failure("Give entry_id (from history) or last (your own newest changes), not both.", "invalid_argument")
    if params.last is not None and not context.actor:
        return failure(
            "last=N needs to know who you are, and this session does not say; call history and undo by entry_id.",
            "invalid_argument",
        )
    try:
        if params.entry_id is not None:
            made: list[JournalEntry] = fs.undo(params.entry_id)
        else:
            made = fs.undo(actor=context.actor, last=params.last)
    except HistoryEntryNotFoundError as exc:
        return failure_from(exc, fs, ".", verb="undone")
    except UndoConflictError as exc:
        return failure_from(exc, fs, str(exc.filename or "."), verb="undone")
    except (OSError, ValueError, UnsupportedOperationError) as exc:
        return failure_from(exc, fs, str(getattr(exc, "filename", None) or "."), verb="undone")
    for entry in made:
        for path in entry.paths:
            context.read_state.forget(fs, path)  # the content changed under the model: read it again
    if not made:
        return ToolResult("Nothing to undo: the paths already hold what they held before.", {"entries": []})
    lines = [_line(context, entry) for entry in made]
    undone = ", ".join(f"#{entry.undoes}" for entry in made)
    return ToolResult(
        f"Undid {undone}:\n" + "\n".join(lines) + "\nRead a file again before you edit it; an undo can be undone too.",
        {"entries": [entry.entry_id for entry in made], "undid": [entry.undoes for entry in made]},
    )


UNDO = Tool(
    name="undo",
    description=(
        "Undo one change of the workspace by its entry id (see history), or your own newest changes with last=N. "
        "Refused, changing nothing, when a path was changed again since; undo the later entry first."
    ),
    params=UndoParams,
    handler=undo,
    mutating=True,
    destructive=True,
    idempotent=False,
    transactional=False,  # one undo is one journaled step; the journal, not the tool layer, puts it back
)
