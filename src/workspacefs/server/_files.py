"""``/v1/agents/{agent_id}/sessions/{session_id}/fs``: read, create, update and delete by path.

Each handler does its database work in one hop to the thread pool, verifying the caller's token there too
(``Credentials.verify``: token, session and policy in one statement), so a JSON request crosses to a worker
thread once; a raw upload verifies first, before it streams. Only ``_`` as the first segment is
reserved (for the actions in ``_actions.py``); ``_config`` and ``__init__.py`` are ordinary names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import Response
from starlette.convertors import Convertor, register_url_convertor

from workspacefs.errors import PreconditionFailedError, UnsupportedOperationError
from workspacefs.paths import MAX_CONVENIENCE_BYTES, strict_path_pattern
from workspacefs.protocol import ByteWriter
from workspacefs.server._auth import ReadAccess, WriteAccess
from workspacefs.server._direct import DirectReadRoute
from workspacefs.server._errors import ApiError, error_responses
from workspacefs.server._models import CreateFileRequest, FileList, FileModel, UpdateFileRequest
from workspacefs.server._service import (
    AgentId,
    ServedFilesystem,
    SessionId,
    decode_content,
    file_model,
    serving,
    wire_path,
)
from workspacefs.server._transfer import (
    IF_MATCH_PATTERN,
    etag,
    expected_version,
    is_raw,
    parse_json,
    raw_download,
    receive_upload,
    wants_raw,
)
from workspacefs.streams import content_id_of

__all__ = ["PREFIX", "described", "router", "streams_raw", "target_path"]


class _AnyPath(Convertor[str]):
    """Starlette's ``path`` convertor stops at a newline (``.*``); this one takes every character, so a
    path with a control character reaches the validator and gets its 400 instead of a routing 404."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("wsfs_path", _AnyPath())

PREFIX = "/v1/agents/{agent_id}/sessions/{session_id}/fs"
router = APIRouter(prefix=PREFIX, tags=["files"])


def _if_match_schema(schema: dict[str, Any]) -> None:
    """A header is a string or absent, never JSON null: document it as the pattern it must match."""
    schema.pop("anyOf", None)
    schema.update(type="string", pattern=IF_MATCH_PATTERN)


IfMatch = Annotated[
    str | None,
    Header(description='Write only over this ETag ("*": any existing file)', json_schema_extra=_if_match_schema),
]
Recursive = Annotated[bool, Query(description="Delete a non-empty directory and everything in it")]


def _path_parameter(description: str, **rule: Any) -> Any:
    """The ``{path}`` parameter, its rule documented in the schema (``wire_path`` enforces it)."""
    return Path(description=description, json_schema_extra={"pattern": strict_path_pattern(slash="forbidden", **rule)})


AnyPath = Annotated[str, _path_parameter("A file or directory below /fs/ (empty: the root)")]
TargetPath = Annotated[
    str,
    _path_parameter(
        "A path to create or change: not the root, not under the reserved _/", allow_root=False, reserved="_"
    ),
]
ExistingPath = Annotated[str, _path_parameter("A file or directory (not the root)", allow_root=False)]


def _body_schema(model: type[Any]) -> dict[str, Any]:
    """An endpoint that takes either a JSON body or raw bytes (OpenAPI ``requestBody``)."""
    return {
        "requestBody": {
            "required": False,
            "content": {
                "application/json": {"schema": model.model_json_schema(ref_template="#/components/schemas/{model}")},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            },
        }
    }


_JSON = "application/json"


def _json(model: FileModel | FileList, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    # pydantic writes the JSON itself (the bytes JSONResponse(model.model_dump(mode="json")) sends, in one step)
    return Response(model.model_dump_json().encode(), status_code=status, headers=headers, media_type=_JSON)


_UPLOAD_URL = re.compile(r"/v1/agents/[^/]+/sessions/[^/]+/fs/(?!_(?:/|$))[\s\S]+")
"""Where ``create`` and ``update`` take a raw body: a file below ``/fs/``, not under the actions' ``_``."""


def streams_raw(method: str, path: str) -> bool:
    """Whether ``method`` on ``path`` (the URL's path, decoded) reaches an endpoint that streams a raw body in fixed
    memory and counts it (create and update): only there may a raw body exceed the JSON limit (``BodyLimit``)."""
    return method in ("POST", "PUT") and _UPLOAD_URL.fullmatch(path) is not None


def target_path(path: str) -> str:
    """A path that may be created or changed: not the root, not under the reserved ``_``."""
    norm = wire_path(path)
    if norm == "/":
        raise ApiError(400, "invalid_path", "The root directory cannot be created, replaced or deleted")
    if norm.split("/", 2)[1] == "_":
        raise ApiError(400, "reserved_path", "Paths under /_ are reserved for actions such as /_/grep")
    return norm


def described(fs: ServedFilesystem, session_id: str, norm: str, status: int = 200) -> Response:
    """A path's JSON without content, with the ``ETag`` of a file's current content: metadata and id come
    from one versioned read, so they describe the same version."""
    try:
        version = fs.open_versioned(norm)
    except IsADirectoryError:
        return _json(file_model(session_id, fs.stat(norm)), status=status)
    version.reader.close()
    return _json(file_model(session_id, version.stat), status=status, headers=etag(version.content_id))


def _resolve_expect(fs: ServedFilesystem, norm: str, tags: list[str] | None) -> str:
    """The one content id a write must find: ``*`` without If-Match (the write itself then checks that
    the file exists), the current id if If-Match lists it, else one that makes the write fail (412)."""
    if tags is None or tags == ["*"]:
        return "*"
    current = fs.content_id(norm)  # 404 when missing, 409 for a directory
    return current if current in tags else tags[0]


@contextmanager
def _explained(fs: ServedFilesystem, norm: str, expect: str) -> Iterator[None]:
    """A write over ``*`` that finds no file: say why (404 missing, 409 a directory), not 412."""
    try:
        yield
    except PreconditionFailedError:
        if expect != "*":
            raise
        if fs.stat(norm).is_directory:  # raises FileNotFoundError (404) when it is missing
            raise ApiError(409, "is_a_directory", f"Is a directory: {norm}") from None
        raise


# --- read -------------------------------------------------------------------------------------------------

_READ_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A file (with its content) or a directory listing; raw bytes for "
        "`Accept: application/octet-stream`",
        "content": {
            "application/json": {
                "schema": {
                    "anyOf": [{"$ref": "#/components/schemas/FileModel"}, {"$ref": "#/components/schemas/FileList"}]
                }
            },
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    },
    **error_responses(404, 413),
}


def _listing(fs: ServedFilesystem, session_id: str, norm: str) -> Response:
    return _json(FileList(data=[file_model(session_id, child) for child in fs.list_stats(norm)]))


async def list_root(*, agent_id: AgentId, session_id: SessionId, access: ReadAccess) -> Response:
    """The root directory's entries."""
    running = serving(access)

    def work() -> Response:
        return _listing(running.filesystem(access.verify(), agent_id, session_id), session_id, "/")

    return await running.run(work)


router.add_api_route(
    "",
    list_root,
    methods=["GET"],
    response_model=FileList,
    responses=error_responses(404),
    summary="List the root directory",
    route_class_override=DirectReadRoute,
)


def _read(fs: ServedFilesystem, session_id: str, norm: str, raw: bool) -> Response:
    try:
        version = fs.open_versioned(norm)
    except IsADirectoryError:
        return _listing(fs, session_id, norm)
    if raw:
        return raw_download(version)
    with version.reader as reader:
        if version.stat.size_bytes > MAX_CONVENIENCE_BYTES:
            raise ApiError(
                413,
                "too_large",
                f"Files over {MAX_CONVENIENCE_BYTES} bytes are read with Accept: application/octet-stream",
            )
        content = reader.read()
    return _json(file_model(session_id, version.stat, content), headers=etag(version.content_id))


async def read(
    *,
    request: Request,
    path: AnyPath,
    agent_id: AgentId,
    session_id: SessionId,
    access: ReadAccess,
) -> Response:
    """A file as JSON (text or base64 content), its raw bytes, or a directory as ``{"data": [...]}``."""
    running = serving(access)
    raw = wants_raw(request)

    def work() -> Response:
        fs = running.filesystem(access.verify(), agent_id, session_id)
        return _read(fs, session_id, wire_path(path), raw)

    return await running.run(work)


router.add_api_route(
    "/{path:wsfs_path}",
    read,
    methods=["GET"],
    responses=_READ_RESPONSES,
    summary="Read a file or list a directory",
    route_class_override=DirectReadRoute,  # FastAPI's parameter solving was a fifth of a small file's read
)


# --- create -----------------------------------------------------------------------------------------------


def _require_flags(fs: ServedFilesystem) -> None:
    """Refuse (501 by the error table) before anything changes when the storage has no per-file flags."""
    if not fs.capabilities.file_read_only:
        raise UnsupportedOperationError("This session's storage cannot mark files read-only")


def _create_json(fs: ServedFilesystem, session_id: str, norm: str, body: CreateFileRequest) -> Response:
    if body.is_directory:
        if body.content is not None or body.is_readonly:
            raise ApiError(422, "invalid_body", "A directory has no content and cannot be read-only")
        fs.mkdir(norm, parents=True, exist_ok=False)
        return _json(file_model(session_id, fs.stat(norm)), status=201)
    data = decode_content(body.content or "", body.encoding)
    if body.is_readonly:
        _require_flags(fs)
    fs.create_bytes(norm, data, read_only=body.is_readonly)  # the file and its flag appear together
    return _json(file_model(session_id, fs.stat(norm), data), status=201, headers=etag(content_id_of(data)))


@router.post(
    "/{path:wsfs_path}",
    status_code=201,
    response_model=FileModel,
    responses=error_responses(403, 409, 413, 422),
    openapi_extra=_body_schema(CreateFileRequest),
    summary="Create a file or directory",
)
async def create(
    *,
    request: Request,
    path: TargetPath,
    agent_id: AgentId,
    session_id: SessionId,
    access: WriteAccess,
) -> Response:
    """Create a file (JSON ``content`` or a raw body) or, with ``is_directory``, a directory; parents are
    created as needed. 409 if something is already there."""
    running = serving(access)
    if is_raw(request):
        who = await running.run(access.verify)
        norm = target_path(path)
        fs = await running.run(running.filesystem, who, agent_id, session_id)

        def open_new() -> ByteWriter:
            return fs.open_write(norm, mode="create")

        await receive_upload(request, open_new, running.max_upload_bytes, running.run)
        return await running.run(described, fs, session_id, norm, 201)
    data = await request.body()  # already read whole by BodyLimit, within the JSON limit

    def work() -> Response:
        who = access.verify()
        norm = target_path(path)
        fs = running.filesystem(who, agent_id, session_id)
        return _create_json(fs, session_id, norm, parse_json(CreateFileRequest, data))

    return await running.run(work)


# --- update -----------------------------------------------------------------------------------------------


def _update_json(
    fs: ServedFilesystem, session_id: str, norm: str, body: UpdateFileRequest, tags: list[str] | None
) -> Response:
    """Content and flag in one conditional step: a failed If-Match (or anything else) changes neither."""
    data = None if body.content is None else decode_content(body.content, body.encoding)
    if body.is_readonly is not None:
        _require_flags(fs)
    expect = _resolve_expect(fs, norm, tags)
    with _explained(fs, norm, expect):
        if data is not None:  # is_readonly False also lets this write replace a read-only file
            fs.write_bytes_if(norm, data, expect=expect, read_only=body.is_readonly)
        elif body.is_readonly is not None:
            fs.set_read_only_if(norm, body.is_readonly, expect=expect)
        elif expect != "*" and fs.content_id(norm) != expect:
            raise ApiError(412, "precondition_failed", f"The file changed since you read it: {norm}")
    try:
        version = fs.open_versioned(norm)
    except IsADirectoryError:
        raise ApiError(409, "is_a_directory", f"Is a directory: {norm}") from None
    with version.reader as reader:  # content only when JSON may carry it
        content = reader.read() if version.stat.size_bytes <= MAX_CONVENIENCE_BYTES else None
    return _json(file_model(session_id, version.stat, content), headers=etag(version.content_id))


@router.put(
    "/{path:wsfs_path}",
    response_model=FileModel,
    responses=error_responses(403, 404, 409, 412, 413, 422),
    openapi_extra=_body_schema(UpdateFileRequest),
    summary="Replace a file's content",
)
async def update(
    *,
    request: Request,
    path: TargetPath,
    agent_id: AgentId,
    session_id: SessionId,
    access: WriteAccess,
    if_match: IfMatch = None,
) -> Response:
    """Replace an existing file's content (JSON or raw body) and/or its read-only flag. With ``If-Match``
    the write happens only if the file still has that ETag (412 otherwise), so editors never clobber."""
    running = serving(access)
    if is_raw(request):
        who = await running.run(access.verify)
        norm = target_path(path)
        tags = expected_version(if_match)
        fs = await running.run(running.filesystem, who, agent_id, session_id)

        def open_existing() -> ByteWriter:
            expect = _resolve_expect(fs, norm, tags)
            with _explained(fs, norm, expect):
                return fs.open_write_if(norm, expect=expect)

        await receive_upload(request, open_existing, running.max_upload_bytes, running.run)
        return await running.run(described, fs, session_id, norm)
    data = await request.body()  # already read whole by BodyLimit, within the JSON limit

    def work() -> Response:
        who = access.verify()
        norm = target_path(path)
        tags = expected_version(if_match)
        fs = running.filesystem(who, agent_id, session_id)
        return _update_json(fs, session_id, norm, parse_json(UpdateFileRequest, data), tags)

    return await running.run(work)


# --- delete -----------------------------------------------------------------------------------------------


def _delete(fs: ServedFilesystem, norm: str, recursive: bool, tags: list[str] | None) -> None:
    if tags is not None and tags != ["*"]:
        current = None if fs.stat(norm).is_directory else fs.content_id(norm)
        if current not in tags:
            raise ApiError(412, "precondition_failed", f"The file changed since you read it: {norm}")
    fs.delete(norm, recursive=recursive)  # a non-empty directory: DirectoryNotEmptyError, 409 by the table


@router.delete(
    "/{path:wsfs_path}", status_code=204, responses=error_responses(404, 409, 412), summary="Delete a file or directory"
)
async def delete(
    *,
    path: ExistingPath,
    agent_id: AgentId,
    session_id: SessionId,
    access: WriteAccess,
    recursive: Recursive = False,
    if_match: IfMatch = None,
) -> Response:
    """Delete a file (read-only files too) or an empty directory; ``?recursive=true`` for a whole tree."""
    running = serving(access)

    def work() -> None:
        who = access.verify()
        norm = wire_path(path)
        if norm == "/":
            raise ApiError(400, "invalid_path", "The root directory cannot be deleted")
        tags = expected_version(if_match)
        _delete(running.filesystem(who, agent_id, session_id), norm, recursive, tags)

    await running.run(work)
    return Response(status_code=204)
