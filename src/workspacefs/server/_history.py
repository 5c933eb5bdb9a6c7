"""A session's history over REST: its journal, the content of any version, undo, and live change events.

``GET …/history`` lists journal entries newest first (filtered by path, entry id or time, actor); an entry's
``content`` endpoint returns what a path held before or after it (two of them make the browser's diff);
``POST …/undo`` puts back one entry, or an actor's last n, as new ``undo`` entries (409 ``undo_conflict``
naming the later entries when a path changed again since, unless ``force``); ``GET …/events`` streams
changes as Server-Sent Events (``_events.py``). Reading needs a ``read`` token, undoing a ``write`` token,
and every call goes through the session's policy like the file routes. Who made each change is the
request's actor (``_actor.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from workspacefs.errors import UndoConflictError, UnsupportedOperationError, error_code
from workspacefs.history import ChangeWatcher
from workspacefs.paths import strict_path_pattern
from workspacefs.server._auth import Credentials, ReadAccess, Reader, Writer
from workspacefs.server._errors import ApiError, error_body, error_responses, translate
from workspacefs.server._events import EventStream, EventStreamResponse, parse_last_event_id
from workspacefs.server._history_models import (
    HistoryEntryModel,
    HistoryList,
    UndoActor,
    UndoEntry,
    UndoRequest,
    UndoResponse,
    entry_model,
)
from workspacefs.server._service import AgentId, Service, ServiceDep, SessionId, wire_path
from workspacefs.server._transfer import attachment, parse_json

__all__ = ["router"]

router = APIRouter(prefix="/v1/agents/{agent_id}/sessions/{session_id}", tags=["history"])

EntryId = Annotated[int, Path(ge=1, le=2**62, description="A journal entry's id")]
PathFilter = Annotated[
    str | None,
    Query(
        max_length=4096,
        description="Only entries touching this path (or below it)",
        json_schema_extra={"pattern": strict_path_pattern(slash="optional")},
    ),
]
_TIME = (
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d{1,6})?)?"
    r"(Z|[+-]([01]\d|2[0-3]):[0-5]\d)"
)
Since = Annotated[
    str | None,
    Query(
        pattern=rf"^(\d{{1,18}}|{_TIME})$",
        description=(
            "Only entries after this entry id, or after this time (ISO 8601, e.g. 2026-11-24T10:00:00Z; UTC where it"
            " names no zone). Not a gap-free cursor: on an object store an entry whose change was in progress"
            " appears once confirmed, with an id below ones listed before it; follow changes with GET …/events"
        ),
    ),
]
ActorFilter = Annotated[
    str | None, Query(min_length=1, max_length=400, description="Only entries by this name, session or tool-call id")
]
Limit = Annotated[int, Query(ge=1, le=1000, description="At most this many entries")]
Side = Annotated[Literal["before", "after"], Query(description="The content just before or just after the entry")]
LastEventId = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        pattern=r"^\d{1,18}(:\d{1,9})?$",
        description="Resume after this event (EventSource sends it when it reconnects): ENTRY[:INDEX]",
    ),
]


def _since(value: str | None) -> int | datetime | None:
    if value is None:
        return None
    if value.isdigit() and len(value) <= 18:
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, "invalid_parameter", "since is an entry id or an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise ApiError(400, "invalid_parameter", "since needs a time zone (Z or +00:00)")
    return moment


def _norm(path: str | None) -> str | None:
    return None if path is None else wire_path(path)


@router.get("/history", response_model=HistoryList, responses=error_responses(404, 501), summary="The history")
async def history(
    *,
    agent_id: AgentId,
    session_id: SessionId,
    who: Reader,
    running: ServiceDep,
    path: PathFilter = None,
    since: Since = None,
    actor: ActorFilter = None,
    limit: Limit = 100,
) -> HistoryList:
    """Journal entries, newest first: each with its time, its actor (name, session, tool call, via), the
    operation and every path it changed (kind, content ids before and after, size change)."""
    wanted, after = _norm(path), _since(since)

    def work() -> HistoryList:
        fs = running.filesystem(who, agent_id, session_id)
        return HistoryList(data=[entry_model(e) for e in fs.history(wanted, since=after, actor=actor, limit=limit)])

    return await running.run(work)


@router.get(
    "/history/{entry_id}", response_model=HistoryEntryModel, responses=error_responses(404, 501), summary="One entry"
)
async def history_entry(
    *, entry_id: EntryId, agent_id: AgentId, session_id: SessionId, who: Reader, running: ServiceDep
) -> HistoryEntryModel:
    """One journal entry (404 ``history_entry_not_found`` if there is none, or retention dropped it)."""

    def work() -> HistoryEntryModel:
        return entry_model(running.filesystem(who, agent_id, session_id).history_entry(entry_id))

    return await running.run(work)


@router.get(
    "/history/{entry_id}/content",
    responses={
        200: {"content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
        **error_responses(404, 501),
    },
    response_model=None,
    summary="A file as it was before or after an entry",
)
async def version_content(
    *,
    entry_id: EntryId,
    agent_id: AgentId,
    session_id: SessionId,
    who: Reader,
    running: ServiceDep,
    path: Annotated[
        str,
        Query(
            max_length=4096,
            description="A path the entry changed",
            json_schema_extra={"pattern": strict_path_pattern(slash="optional", allow_root=False)},
        ),
    ],
    side: Side = "after",
) -> Response:
    """The raw bytes ``path`` held just before or just after the entry (404 where no file was there then, or
    that content is no longer kept). Two of these are a diff between any two versions."""
    norm = wire_path(path)

    def work() -> bytes:
        content: bytes = running.filesystem(who, agent_id, session_id).read_version(entry_id, norm, side=side)
        return content

    return Response(await running.run(work), media_type="application/octet-stream", headers=attachment(norm))


def _still_allowed(running: Service, access: Credentials, agent_id: str, session_id: str) -> bool:
    """Whether a stream's credentials still reach its session (one statement, as every request reads them):
    a stream outlives the request that checked them, and a revocation must still end it."""
    found = running.access.lookup(access.secret, agent_id, session_id)
    if found.session is None or found.session.entry is None:
        return False  # the session was deleted
    if access.secret is None:
        return True  # the service runs without auth
    token = found.token
    if token is None or token.expired(datetime.now(UTC)) or not token.allows(agent_id):
        return False
    return not (access.cookie and not token.browser)


def _conflict(exc: UndoConflictError) -> JSONResponse:
    translated = translate(exc)
    message = translated.message if translated is not None else str(exc)
    if exc.later:
        message += f" (later entries: {', '.join(str(each) for each in exc.later)})"
    body = error_body(error_code(exc) or "undo_conflict", message)
    body["error"]["later"] = list(exc.later)
    return JSONResponse(body, status_code=409)


@router.post(
    "/undo",
    response_model=UndoResponse,
    responses=error_responses(404, 409, 501),
    summary="Undo an entry, or an actor's last entries",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"anyOf": [UndoEntry.model_json_schema(), UndoActor.model_json_schema()]}
                }
            },
        }
    },
)
async def undo(*, request: Request, agent_id: AgentId, session_id: SessionId, who: Writer, running: ServiceDep) -> Any:
    """Put back what ``entry_id`` changed, or the ``last`` n entries of ``actor`` (newest first), each as a new
    ``undo`` entry (which can be undone in turn). 409 ``undo_conflict`` when a path changed again since: the
    error's ``later`` lists those entries (empty: changed outside workspacefs); ``force`` overwrites them."""
    body = parse_json(UndoRequest, await request.body()).root
    entry_id = body.entry_id if isinstance(body, UndoEntry) else None
    actor, last = (body.actor, body.last) if isinstance(body, UndoActor) else (None, None)

    def work() -> UndoResponse:
        fs = running.filesystem(who, agent_id, session_id)
        made = fs.undo(entry_id, actor=actor, last=last, force=body.force)
        return UndoResponse(data=[entry_model(entry) for entry in made])

    try:
        return await running.run(work)
    except UndoConflictError as exc:
        return _conflict(exc)


@router.get(
    "/events",
    response_model=None,
    responses={
        200: {
            "description": "Server-Sent Events: `event: change`, `id: ENTRY:INDEX`, `data`: the change as JSON",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **error_responses(404, 501),
    },
    summary="Changes as they happen (Server-Sent Events)",
)
async def events(
    *,
    agent_id: AgentId,
    session_id: SessionId,
    access: ReadAccess,
    running: ServiceDep,
    request: Request,
    path: PathFilter = None,
    last_event_id: LastEventId = None,
) -> Response:
    """One ``change`` event per changed path (``id: ENTRY:INDEX``), keep-alive comments while quiet. Reconnect
    with ``Last-Event-ID`` (EventSource does) to get what was missed from the journal first, then live events:
    none lost, none twice."""
    resume = parse_last_event_id(last_event_id)
    norm = (_norm(path) or "/").lstrip("/")

    def subscribe() -> tuple[Any, ChangeWatcher, Callable[[], None]]:
        who = access.verify()
        fs = running.filesystem(who, agent_id, session_id)
        if not fs.capabilities.watch:
            raise UnsupportedOperationError("This session's storage cannot be watched")
        release = running.stream_places.take(who.token.token_id if who.token is not None else "")
        try:
            return fs, fs.watch(norm or "/", recursive=True), release  # before the response starts: nothing is missed
        except BaseException:
            release()
            raise

    fs, watcher, release = await running.run(subscribe)
    keepalive = getattr(request.app.state, "event_keepalive", None)  # seconds; tests shorten the 15 s default
    stream = EventStream(
        fs,
        watcher,
        norm,
        resume,
        running.run,
        stopping=running.stopping,
        allowed=partial(_still_allowed, running, access, agent_id, session_id),
        release=release,
        **({"keepalive": keepalive} if keepalive else {}),
    )
    return EventStreamResponse(stream)
