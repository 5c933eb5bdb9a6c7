"""The JSON of a session's history: journal entries, their changes, undo requests and change events.

Paths are shown as the API shows them (absolute: ``/src/app.py``); a change's ``before``/``after`` is a
content id (the file's ETag without quotes), ``"directory"``, or ``null`` where nothing was there; ``before`` is
``"not-kept"`` for a file a command changed whose prior content was not kept (that entry cannot be undone). An
``exec`` entry's ``detail`` is the command.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictBool

from workspacefs.history import Actor, Change, ChangeEvent, JournalEntry
from workspacefs.server._models import RequestModel, WholeNumber

__all__ = [
    "ActorModel",
    "ChangeModel",
    "EventModel",
    "HistoryEntryModel",
    "HistoryList",
    "UndoActor",
    "UndoEntry",
    "UndoRequest",
    "UndoResponse",
    "actor_model",
    "entry_model",
    "event_model",
]

Kind = Literal["created", "modified", "deleted", "moved"]


class ActorModel(BaseModel):
    """Who made a change, as the caller declared it (``_actor.py`` says how a request declares it)."""

    name: str | None
    session: str | None
    tool_call: str | None
    via: str | None
    label: str


class ChangeModel(BaseModel):
    """One path an entry changed."""

    path: str
    kind: Kind
    from_path: str | None
    before: str | None
    after: str | None
    size_before: int
    size_after: int
    size_delta: int
    read_only_before: bool | None = Field(
        default=None,
        description="The file's read-only flag before, where the change set it or a read-only file went (null: left"
        " alone)",
    )
    read_only_after: bool | None = Field(default=None, description="The flag the change set (null: left alone)")


class HistoryEntryModel(BaseModel):
    """One journal entry: one operation and every path it changed."""

    entry_id: int
    time: datetime
    actor: ActorModel
    operation: str
    changes: list[ChangeModel]
    size_delta: int
    undoes: int | None = Field(description="The entry this one undid (an undo is an entry too)")
    detail: str | None


class HistoryList(BaseModel):
    """Entries, newest first."""

    data: list[HistoryEntryModel]


class UndoEntry(RequestModel):
    """``{"entry_id": 12}``: undo that entry."""

    model_config = ConfigDict(extra="forbid")
    entry_id: WholeNumber = Field(ge=1, le=2**62, description="The entry to undo")
    force: StrictBool = Field(False, description="Overwrite later changes of the same paths")


class UndoActor(RequestModel):
    """``{"actor": "agent-7", "last": 3}``: undo that actor's newest entries."""

    model_config = ConfigDict(extra="forbid")
    actor: str = Field(min_length=1, max_length=400, description="A name, session or tool-call id")
    last: WholeNumber = Field(1, ge=1, le=1000, description="How many of the actor's entries")
    force: StrictBool = Field(False, description="Overwrite later changes of the same paths")


class UndoRequest(RootModel[UndoEntry | UndoActor]):
    """``{"entry_id": 12}``, or ``{"actor": "agent-7", "last": 3}``; ``force`` overwrites later changes."""


class UndoResponse(BaseModel):
    """The entries the undo made (one per entry undone, newest first)."""

    data: list[HistoryEntryModel]


class EventModel(BaseModel):
    """The ``data`` of one ``change`` event of ``GET …/events``: one path of one journal entry."""

    entry_id: int | None = Field(description="The journal entry (null: a change made outside workspacefs)")
    index: int | None = Field(description="The change's position in its entry")
    kind: Kind
    path: str
    from_path: str | None
    is_directory: bool
    content_id: str | None
    time: datetime
    actor: ActorModel
    operation: str | None
    undoes: int | None


def _shown(path: str | None) -> str | None:
    return None if path is None else "/" + path


def actor_model(actor: Actor) -> ActorModel:
    """An actor's JSON."""
    name, session, call, via = actor.fields()
    return ActorModel(name=name, session=session, tool_call=call, via=via, label=actor.label)


def _change_model(change: Change) -> ChangeModel:
    return ChangeModel(
        path="/" + change.path,
        kind=change.kind,
        from_path=_shown(change.from_path),
        before=change.before,
        after=change.after,
        size_before=change.size_before,
        size_after=change.size_after,
        size_delta=change.size_delta,
        read_only_before=change.read_only_before,
        read_only_after=change.read_only_after,
    )


def entry_model(entry: JournalEntry) -> HistoryEntryModel:
    """An entry's JSON."""
    return HistoryEntryModel(
        entry_id=entry.entry_id,
        time=entry.time,
        actor=actor_model(entry.actor),
        operation=entry.operation,
        changes=[_change_model(change) for change in entry.changes],
        size_delta=entry.size_delta,
        undoes=entry.undoes,
        detail=entry.detail,
    )


def event_model(entry: JournalEntry | None, index: int | None, event: ChangeEvent | None = None) -> EventModel:
    """The event of change ``index`` of ``entry`` (or, for a change made outside workspacefs, of ``event``)."""
    if entry is not None and index is not None:
        change = entry.changes[index]
        return EventModel(
            entry_id=entry.entry_id,
            index=index,
            kind=change.kind,
            path="/" + change.path,
            from_path=_shown(change.from_path),
            is_directory="directory" in (change.before, change.after),
            content_id=change.after if change.after != "directory" else None,
            time=entry.time,
            actor=actor_model(entry.actor),
            operation=entry.operation,
            undoes=entry.undoes,
        )
    assert event is not None
    return EventModel(
        entry_id=event.entry_id,
        index=None,
        kind=event.kind,
        path="/" + event.path,
        from_path=_shown(event.from_path),
        is_directory=event.is_directory,
        content_id=event.content_id,
        time=event.time,
        actor=actor_model(event.actor),
        operation=None,
        undoes=None,
    )
