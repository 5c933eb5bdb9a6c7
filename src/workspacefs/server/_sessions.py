"""Agents, sessions and snapshots as resources.

``/v1/agents`` lists the agents a caller may see; sessions are created, listed, read and deleted
(their files and snapshots go with them); each session can be snapshotted with a tag, restored and
diffed. A snapshot is named by its id, its tag or a unique id prefix (``snapshots.find_snapshot``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from workspacefs.errors import SnapshotNotFoundError
from workspacefs.results import FilesystemSnapshot
from workspacefs.server._auth import Reader, Writer
from workspacefs.server._errors import ApiError, error_responses
from workspacefs.server._models import (
    AgentList,
    CreateSessionRequest,
    CreateSnapshotRequest,
    DiffResponse,
    SessionList,
    SessionModel,
    SnapshotList,
    SnapshotModel,
)
from workspacefs.server._service import (
    AgentId,
    ServedFilesystem,
    ServiceDep,
    SessionId,
    session_model,
    uuid7,
)
from workspacefs.server._transfer import parse_json
from workspacefs.snapshots import find_snapshot

__all__ = ["SESSION", "router", "snapshot_model"]

router = APIRouter(prefix="/v1", tags=["sessions"])
SESSION = "/agents/{agent_id}/sessions/{session_id}"
SnapshotId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=200,
        description="A snapshot's id, its tag (the newest with that tag), or a unique prefix of its id (4+ characters)",
    ),
]
Against = Annotated[
    str | None,
    Query(min_length=1, max_length=200, description="Compare with this snapshot (id, tag or id prefix; default: now)"),
]


@router.get("/agents", response_model=AgentList, responses=error_responses(), summary="List agents")
async def list_agents(*, who: Reader, running: ServiceDep) -> AgentList:
    """Agents that have sessions; a token for one agent sees only that agent."""
    if who.agent_id is not None:
        return AgentList(data=[who.agent_id])
    return AgentList(data=await running.run(running.catalog.agents))


@router.get("/agents/{agent_id}/sessions", response_model=SessionList, responses=error_responses(404))
async def list_sessions(*, agent_id: AgentId, who: Reader, running: ServiceDep) -> SessionList:
    """An agent's sessions, oldest first."""
    if not who.allows(agent_id):
        return SessionList(data=[])
    found = await running.run(running.catalog.sessions, agent_id)
    if not running.sessions.counts_files:  # the files are not rows of the service's database
        found = [replace(info, file_count=None, changed_at=None) for info in found]
    return SessionList(data=[session_model(info) for info in found])


@router.post(
    "/agents/{agent_id}/sessions",
    status_code=201,
    response_model=SessionModel,
    responses=error_responses(404, 409, 422),
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": CreateSessionRequest.model_json_schema()}},
        }
    },
)
async def create_session(*, request: Request, agent_id: AgentId, who: Writer, running: ServiceDep) -> SessionModel:
    """Create a session (an empty filesystem); the id is a new UUIDv7 unless the body gives one. Ids are the
    agent's own: 409 only if this agent already has the id, whatever other agents have."""
    body = parse_json(CreateSessionRequest, await request.body())
    if not who.allows(agent_id):
        raise ApiError(404, "agent_not_found", f"No agent {agent_id!r}")
    session_id = body.id or uuid7()

    def work() -> SessionModel:
        try:
            info = running.catalog.create(agent_id, session_id)
        except FileExistsError:
            raise ApiError(409, "already_exists", f"Session {session_id!r} already exists") from None
        try:
            running.sessions.create(info)
        except BaseException:
            running.catalog.delete(agent_id, session_id)  # no session without its storage
            raise
        return session_model(info)

    return await running.run(work)


@router.get(SESSION, response_model=SessionModel, responses=error_responses(404))
async def get_session(*, agent_id: AgentId, session_id: SessionId, who: Reader, running: ServiceDep) -> SessionModel:
    """One session."""
    info = await running.run(running.session, who, agent_id, session_id)
    return session_model(info)


@router.delete(SESSION, status_code=204, responses=error_responses(404))
async def delete_session(*, agent_id: AgentId, session_id: SessionId, who: Writer, running: ServiceDep) -> Response:
    """Delete a session with all its files and snapshots."""

    def work() -> None:
        entry = running.catalog.get(agent_id, session_id) if who.allows(agent_id) else None
        if entry is None:
            raise ApiError(404, "session_not_found", f"No session {session_id!r} for agent {agent_id!r}")
        running.sessions.delete(entry)  # first: if it fails part way, the session is still there to delete again
        if not running.catalog.delete(agent_id, session_id):
            raise ApiError(404, "session_not_found", f"No session {session_id!r} for agent {agent_id!r}")

    await running.run(work)
    return Response(status_code=204)


# --- snapshots --------------------------------------------------------------------------------------------


def snapshot_model(session_id: str, snapshot: FilesystemSnapshot) -> SnapshotModel:
    return SnapshotModel(
        id=str(snapshot.snapshot_id),
        session_id=session_id,
        tag=snapshot.tag,
        parent_id=str(snapshot.parent_id) if snapshot.parent_id else None,
        file_count=snapshot.file_count,
        total_bytes=snapshot.total_bytes,
        created_at=snapshot.created_at,
    )


def _find(fs: ServedFilesystem, wanted: str) -> FilesystemSnapshot:
    """A snapshot by id, tag or unique id prefix: the rule the CLI and the tools share (404 or 400)."""
    return find_snapshot(fs.snapshots(), wanted)


@router.post(
    SESSION + "/snapshots",
    status_code=201,
    response_model=SnapshotModel,
    responses=error_responses(404, 422),
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": CreateSnapshotRequest.model_json_schema()}},
        }
    },
)
async def create_snapshot(
    *, request: Request, agent_id: AgentId, session_id: SessionId, who: Writer, running: ServiceDep
) -> SnapshotModel:
    """Capture the session's files (no content is copied), optionally with a ``tag``."""
    body = parse_json(CreateSnapshotRequest, await request.body())

    def work() -> SnapshotModel:
        fs = running.filesystem(who, agent_id, session_id)
        return snapshot_model(session_id, fs.snapshot(tag=body.tag))

    return await running.run(work)


@router.get(SESSION + "/snapshots", response_model=SnapshotList, responses=error_responses(404))
async def list_snapshots(*, agent_id: AgentId, session_id: SessionId, who: Reader, running: ServiceDep) -> SnapshotList:
    """The session's snapshots, oldest first."""

    def work() -> SnapshotList:
        fs = running.filesystem(who, agent_id, session_id)
        return SnapshotList(data=[snapshot_model(session_id, s) for s in fs.snapshots()])

    return await running.run(work)


@router.get(SESSION + "/snapshots/{snapshot_id}", response_model=SnapshotModel, responses=error_responses(400, 404))
async def get_snapshot(
    *, snapshot_id: SnapshotId, agent_id: AgentId, session_id: SessionId, who: Reader, running: ServiceDep
) -> SnapshotModel:
    """One snapshot."""

    def work() -> SnapshotModel:
        return snapshot_model(session_id, _find(running.filesystem(who, agent_id, session_id), snapshot_id))

    return await running.run(work)


@router.post(
    SESSION + "/snapshots/{snapshot_id}/restore", response_model=SnapshotModel, responses=error_responses(400, 404)
)
async def restore_snapshot(
    *, snapshot_id: SnapshotId, agent_id: AgentId, session_id: SessionId, who: Writer, running: ServiceDep
) -> SnapshotModel:
    """Put the session's files back as they were in the snapshot (later snapshots are kept)."""

    def work() -> SnapshotModel:
        fs = running.filesystem(who, agent_id, session_id)
        snapshot = _find(fs, snapshot_id)
        fs.restore(snapshot)
        return snapshot_model(session_id, snapshot)

    return await running.run(work)


@router.get(SESSION + "/snapshots/{snapshot_id}/diff", response_model=DiffResponse, responses=error_responses(400, 404))
async def diff_snapshot(
    *,
    snapshot_id: SnapshotId,
    agent_id: AgentId,
    session_id: SessionId,
    who: Reader,
    running: ServiceDep,
    against: Against = None,
) -> DiffResponse:
    """What changed from the snapshot to now, or to the snapshot ``against``."""

    def work() -> DiffResponse:
        fs = running.filesystem(who, agent_id, session_id)
        base = _find(fs, snapshot_id)
        target = _find(fs, against) if against else None
        try:
            changes = fs.diff(base, target)
        except SnapshotNotFoundError:
            raise ApiError(404, "snapshot_not_found", "The snapshot was deleted meanwhile") from None
        return DiffResponse(
            base=str(base.snapshot_id),
            target=str(target.snapshot_id) if target is not None else None,
            added=["/" + p for p in changes.added],
            modified=["/" + p for p in changes.modified],
            deleted=["/" + p for p in changes.deleted],
            unchanged_count=changes.unchanged_count,
        )

    return await running.run(work)


@router.delete(SESSION + "/snapshots/{snapshot_id}", status_code=204, responses=error_responses(400, 404))
async def delete_snapshot(
    *, snapshot_id: SnapshotId, agent_id: AgentId, session_id: SessionId, who: Writer, running: ServiceDep
) -> Response:
    """Forget a snapshot; content only it held is collected."""

    def work() -> None:
        fs = running.filesystem(who, agent_id, session_id)
        fs.delete_snapshot(_find(fs, snapshot_id))

    await running.run(work)
    return Response(status_code=204)
