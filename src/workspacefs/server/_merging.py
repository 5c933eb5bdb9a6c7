"""``POST …/sessions/{session_id}/merge``: a three-way merge of a session's snapshots into a new snapshot.

The three snapshots are named as every snapshot endpoint names them (id, tag or unique id prefix), among the
session's own snapshots only: a session never reaches another's, forks of it included. The answer is 200
whether or not anything conflicted (the merge made its snapshot either way); ``clean`` and ``conflicts`` say
which. ``apply`` restores the session to the result, under the same policy checks as a restore.
"""

from __future__ import annotations

from typing import Annotated, Literal, cast

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from workspacefs.merge import MergeConflict, MergeResult
from workspacefs.protocol import MergeableFilesystem
from workspacefs.server._auth import Writer
from workspacefs.server._errors import ApiError, error_responses
from workspacefs.server._models import RequestModel, SnapshotModel
from workspacefs.server._service import AgentId, ServiceDep, SessionId
from workspacefs.server._sessions import SESSION, snapshot_model
from workspacefs.server._transfer import parse_json
from workspacefs.snapshots import find_snapshot

__all__ = ["ConflictModel", "HunkModel", "MergeRequest", "MergeResponse", "router"]

router = APIRouter(prefix="/v1", tags=["sessions"])
SnapshotName = Annotated[str, Field(min_length=1, max_length=200)]


class MergeRequest(RequestModel):
    """Merge ``theirs`` into ``ours`` from their common ``base`` (each an id, a tag or a unique id prefix)."""

    model_config = ConfigDict(extra="forbid")

    base: SnapshotName
    ours: SnapshotName
    theirs: SnapshotName
    markers: StrictBool = False
    """Write git-style conflict markers into text files in conflict (otherwise they keep ``ours``)."""
    apply: StrictBool = False
    """Restore the session to the merged snapshot."""
    tag: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class HunkModel(BaseModel):
    """Lines both sides changed differently; line numbers are 1-based, each in its own version."""

    ours_start: int
    ours: str
    base_start: int
    base: str
    theirs_start: int
    theirs: str


class ConflictModel(BaseModel):
    """A path the merge could not decide."""

    path: str
    kind: Literal["content", "binary", "modify/delete", "add/add", "file/directory"]
    message: str
    hunks: list[HunkModel]


class MergeResponse(BaseModel):
    """The merged snapshot, what it changes relative to ``ours``, and the conflicts."""

    snapshot: SnapshotModel
    clean: bool
    applied: bool
    conflicts: list[ConflictModel]
    added: list[str]
    modified: list[str]
    deleted: list[str]
    merged: list[str]


def _conflict_model(conflict: MergeConflict) -> ConflictModel:
    return ConflictModel(
        path="/" + conflict.path,
        kind=conflict.kind,
        message=conflict.message,
        hunks=[HunkModel(**hunk.to_dict()) for hunk in conflict.hunks],
    )


def _response(session_id: str, result: MergeResult, applied: bool) -> MergeResponse:
    return MergeResponse(
        snapshot=snapshot_model(session_id, result.snapshot),
        clean=result.clean,
        applied=applied,
        conflicts=[_conflict_model(c) for c in result.conflicts],
        added=["/" + p for p in result.added],
        modified=["/" + p for p in result.modified],
        deleted=["/" + p for p in result.deleted],
        merged=["/" + p for p in result.merged],
    )


@router.post(
    SESSION + "/merge",
    response_model=MergeResponse,
    responses=error_responses(404, 422, 501),
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": MergeRequest.model_json_schema()}}}
    },
)
async def merge_snapshots(
    *, request: Request, agent_id: AgentId, session_id: SessionId, who: Writer, running: ServiceDep
) -> MergeResponse:
    """Three-way merge of the session's snapshots into a new snapshot: file by file, text by line (diff3),
    conflicts listed (and, with ``markers``, marked in the files); ``apply`` restores the session to it."""
    body = parse_json(MergeRequest, await request.body())

    def work() -> MergeResponse:
        fs = running.filesystem(who, agent_id, session_id)
        if not fs.capabilities.merge:
            raise ApiError(501, "unsupported", "This session's storage cannot merge snapshots")
        kept = list(fs.snapshots())
        base, ours, theirs = (find_snapshot(kept, name) for name in (body.base, body.ours, body.theirs))
        merging = cast(MergeableFilesystem, fs)  # the capability promises the protocol
        result = merging.merge(base, ours, theirs, markers=body.markers, tag=body.tag)
        if body.apply:
            merging.restore(result.snapshot)
        return _response(session_id, result, body.apply)

    return await running.run(work)
