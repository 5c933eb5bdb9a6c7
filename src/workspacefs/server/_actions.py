"""The actions under the reserved ``/fs/_/``: ``stat``, ``move``, ``copy``, ``grep`` and ``glob``.

``grep``'s ``path_pattern`` is a glob over file paths (``*.rs`` matches names at any depth,
``src/**/*.rs`` paths below the searched directory), never a regex.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from starlette.convertors import Convertor, register_url_convertor

from workspacefs.server._auth import Reader, Writer
from workspacefs.server._errors import ApiError, error_responses
from workspacefs.server._files import PREFIX, described, target_path
from workspacefs.server._models import (
    FileModel,
    GlobRequest,
    GlobResponse,
    GrepFile,
    GrepLine,
    GrepRequest,
    GrepResponse,
    PathRequest,
    TransferRequest,
)
from workspacefs.server._service import (
    AgentId,
    ServedFilesystem,
    ServiceDep,
    SessionId,
    wire_path,
)

__all__ = ["router"]

router = APIRouter(prefix=PREFIX + "/_", tags=["actions"])
ACTIONS = ("stat", "move", "copy", "grep", "glob")


class _ActionName(Convertor[str]):
    """Matches only the actions' names, so other paths under ``_/`` reach the files router."""

    regex = "|".join(ACTIONS)

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("wsfs_action", _ActionName())


@router.api_route(
    "/{action:wsfs_action}",
    methods=["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"],
    include_in_schema=False,
)
async def not_an_action_method(action: str) -> None:
    """Actions are POSTed; without this the catch-all file routes would answer other methods here."""
    raise ApiError(405, "method_not_allowed", f"/_/{action} is an action: POST to it", {"Allow": "POST"})


@router.post("/stat", response_model=FileModel, responses=error_responses(404, 422), summary="A file's metadata")
async def stat(
    *, body: PathRequest, agent_id: AgentId, session_id: SessionId, who: Reader, running: ServiceDep
) -> Response:
    """Metadata of a file or directory, without content; the ``ETag`` header carries its content id."""
    norm = wire_path(body.path)

    def work() -> Response:
        return described(running.filesystem(who, agent_id, session_id), session_id, norm)

    return await running.run(work)


def _transfer(fs: ServedFilesystem, session_id: str, body: TransferRequest, *, move: bool) -> Response:
    source = wire_path(body.src_path)
    if source == "/":
        raise ApiError(400, "invalid_path", "The root directory cannot be moved or copied")
    destination = target_path(body.dst_path)
    (fs.move if move else fs.copy)(source, destination, overwrite=body.overwrite)
    return described(fs, session_id, destination)


@router.post("/move", response_model=FileModel, responses=error_responses(403, 404, 409, 422), summary="Move")
async def move(
    *, body: TransferRequest, agent_id: AgentId, session_id: SessionId, who: Writer, running: ServiceDep
) -> Response:
    """Move or rename a file or directory; missing parents of ``dst_path`` are created. 409 if
    ``dst_path`` exists, unless ``overwrite`` (which never replaces a directory by a file or back)."""

    def work() -> Response:
        return _transfer(running.filesystem(who, agent_id, session_id), session_id, body, move=True)

    return await running.run(work)


@router.post("/copy", response_model=FileModel, responses=error_responses(403, 404, 409, 422), summary="Copy")
async def copy(
    *, body: TransferRequest, agent_id: AgentId, session_id: SessionId, who: Writer, running: ServiceDep
) -> Response:
    """Copy a file, or a directory recursively (no content is duplicated in storage)."""

    def work() -> Response:
        return _transfer(running.filesystem(who, agent_id, session_id), session_id, body, move=False)

    return await running.run(work)


def _grep(fs: ServedFilesystem, body: GrepRequest) -> GrepResponse:
    base = wire_path(body.path)
    fs.stat(base)  # 404 for a missing directory rather than an empty answer
    pattern = f"(?i){body.pattern}" if body.case_insensitive else body.pattern
    found = fs.grep(pattern, path=base, glob=body.path_pattern, max_matches=body.max_matches + 1)
    truncated = len(found) > body.max_matches
    grouped: dict[str, list[GrepLine]] = {}
    for match in found[: body.max_matches]:
        shown = "/" + match.path
        grouped.setdefault(shown, []).append(
            GrepLine(
                path=shown, line_number=match.line_number, line_content=match.line_content, line=match.line_content
            )
        )
    return GrepResponse(data=[GrepFile(path=p, matches=m) for p, m in grouped.items()], truncated=truncated)


@router.post("/grep", response_model=GrepResponse, responses=error_responses(404, 422), summary="Search contents")
async def grep(
    *, body: GrepRequest, agent_id: AgentId, session_id: SessionId, who: Reader, running: ServiceDep
) -> GrepResponse:
    """Lines matching the regex ``pattern`` in files below ``path`` whose path matches the glob
    ``path_pattern``, grouped by file, sorted by path and line."""

    def work() -> GrepResponse:
        return _grep(running.filesystem(who, agent_id, session_id), body)

    return await running.run(work)


@router.post("/glob", response_model=GlobResponse, responses=error_responses(404, 422), summary="Find files")
async def glob(
    *, body: GlobRequest, agent_id: AgentId, session_id: SessionId, who: Reader, running: ServiceDep
) -> GlobResponse:
    """Files below ``path`` whose path relative to it matches the glob ``pattern`` (``**`` crosses
    directories), sorted."""
    base = wire_path(body.path)

    def work() -> GlobResponse:
        fs = running.filesystem(who, agent_id, session_id)
        fs.stat(base)
        return GlobResponse(data=["/" + m.path for m in fs.glob(body.pattern, path=base)])

    return await running.run(work)
