"""Moving bytes over HTTP in fixed memory: raw downloads, raw uploads, ETags and If-Match.

Blocking database work runs in the thread pool; the event loop only shuttles buffers. An upload is
written through a streaming writer that commits when the body ends and leaves the old content when
anything fails, so a dropped connection never stores half a file.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect

from workspacefs.paths import basename
from workspacefs.protocol import ByteWriter, VersionedContent
from workspacefs.server._errors import ApiError

__all__ = [
    "DOWNLOAD_CHUNK",
    "IF_MATCH_PATTERN",
    "INLINE_DOWNLOAD",
    "attachment",
    "etag",
    "expected_version",
    "is_raw",
    "parse_json",
    "raw_download",
    "receive_upload",
    "wants_raw",
]

DOWNLOAD_CHUNK = 256 * 1024
"""Bytes per streamed piece of a download."""
INLINE_DOWNLOAD = 1024 * 1024
"""Raw downloads up to this size are sent in one piece; larger ones stream."""
InThread = Callable[..., Awaitable[Any]]
"""Runs a blocking function with arguments in a worker thread (``Service.run``)."""
_UPLOAD_BATCH = 1024 * 1024
"""Upload bytes gathered on the event loop before one hop to a thread writes them."""
M = TypeVar("M", bound=BaseModel)
_NEVER = "\x00weak"
"""Stands for a weak ETag in If-Match: RFC 9110 compares If-Match strongly, so it never matches."""


def etag(content_id: str | None) -> dict[str, str]:
    """The ``ETag`` header for a content id (directories have none)."""
    return {} if content_id is None else {"ETag": f'"{content_id}"'}


_ETAG = r'(?:W/)?"[!#-~]*"'
IF_MATCH_PATTERN = rf"^ *(?:\*|{_ETAG}(?: *, *{_ETAG})*) *$"
"""``If-Match`` as RFC 9110 writes it: ``*`` or a list of (possibly weak) quoted entity tags."""
_IF_MATCH = re.compile(IF_MATCH_PATTERN)
_TAG = re.compile(_ETAG)


def expected_version(header: str | None) -> list[str] | None:
    """The content ids an ``If-Match`` header accepts (``["*"]``: any existing file; ``None``: no header).

    Weak tags never match: If-Match compares strongly (RFC 9110 §13.1.1).
    """
    if header is None:
        return None
    if not _IF_MATCH.match(header):
        raise ApiError(400, "bad_if_match", 'If-Match takes "*" or quoted ETags such as "\\"abc…\\""')
    if header.strip() == "*":
        return ["*"]
    return [_NEVER if tag.startswith("W/") else tag[1:-1] for tag in _TAG.findall(header)]


def wants_raw(request: Request) -> bool:
    """True if the client asked for raw bytes (``Accept: application/octet-stream``) and not JSON."""
    accept = request.headers.get("accept", "").lower()
    return "application/octet-stream" in accept and "application/json" not in accept


def is_raw(request: Request) -> bool:
    """True if the request body is raw bytes (``Content-Type: application/octet-stream``)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/octet-stream"


def parse_json(model: type[M], body: bytes) -> M:
    """A request body as ``model`` (empty means ``{}``); 422 with the reasons otherwise."""
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(x) for x in problem['loc']) or 'body'}: {problem['msg']}" for problem in exc.errors()[:5]
        ]
        raise ApiError(422, "invalid_body", "; ".join(problems)) from None


def attachment(path: str) -> dict[str, str]:
    """The headers of every response that carries a file's bytes (a download, a version of it): a file to save,
    never a page to show, whatever the bytes hold (an ``.html`` a model wrote must not run on the service's
    origin, where the browser's sign-in cookie lives; ``_app.py`` adds ``nosniff`` and a sandboxing policy)."""
    name = basename(path)
    ascii_name = name.encode("ascii", "replace").decode().replace('"', "_").replace("\\", "_")
    return {"Content-Disposition": f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"}


def raw_download(version: VersionedContent) -> Response:
    """The raw bytes of one version of a file: in one piece when small, otherwise streamed from its reader
    (closed afterwards); the ``ETag`` names exactly the bytes sent."""
    headers = {**etag(version.content_id), **attachment(version.stat.path)}
    reader = version.reader
    if version.stat.size_bytes <= INLINE_DOWNLOAD:
        with reader:
            content = reader.read()
        return Response(content, media_type="application/octet-stream", headers=headers)
    headers["Content-Length"] = str(version.stat.size_bytes)

    def pieces() -> Iterator[bytes]:
        while piece := reader.read(DOWNLOAD_CHUNK):
            yield piece

    return StreamingResponse(
        pieces(), media_type="application/octet-stream", headers=headers, background=BackgroundTask(reader.close)
    )


async def receive_upload(request: Request, open_writer: Callable[[], ByteWriter], limit: int, run: InThread) -> int:
    """Stream the request body into a writer opened (in a thread) by ``open_writer``; commit at the end.

    ``run`` is the service's way into its database threads. Returns the bytes stored. Over ``limit``
    bytes is 413 and stores nothing.
    """
    writer: ByteWriter = await run(open_writer)
    total = 0
    try:
        buffered = bytearray()
        try:
            async for piece in request.stream():
                total += len(piece)
                if total > limit:
                    raise ApiError(413, "too_large", f"Uploads are limited to {limit} bytes")
                buffered += piece
                if len(buffered) >= _UPLOAD_BATCH:
                    batch = bytes(buffered)
                    buffered.clear()
                    await run(writer.write, batch)
        except ClientDisconnect:
            raise ApiError(400, "incomplete_body", "The client went away before the body ended") from None
        if buffered:
            await run(writer.write, bytes(buffered))
        await run(writer.close)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await run(writer.abort)
        raise
    return total
