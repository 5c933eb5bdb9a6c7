"""One error shape for every failure, ``{"error": {"code", "message"}}``, and the status it maps to.

Filesystem exceptions become statuses here and nowhere else; the body-size limit is enforced here
before FastAPI reads a body into memory.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from workspacefs.errors import FailureKind, SnapshotError, classify

__all__ = ["ApiError", "BodyLimit", "error_responses", "install_error_handlers", "translate"]

log = logging.getLogger("workspacefs.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ApiError(Exception):
    """An error response: HTTP status, stable code, human message (and any headers it needs)."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def _body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON response of an error."""
    return JSONResponse(_body(code, message), status_code=status, headers=headers)


def _describe(exc: OSError, fallback: str) -> str:
    reason = exc.strerror or fallback
    return f"{reason}: {exc.filename}" if exc.filename else reason


_STATUS: dict[FailureKind, tuple[int, str]] = {
    "precondition_failed": (412, "The file changed"),
    "snapshot_not_found": (404, "No such snapshot"),
    "snapshot_failed": (409, "The snapshot failed"),
    "not_found": (404, "No such file or directory"),
    "already_exists": (409, "Already exists"),
    "is_a_directory": (409, "Is a directory"),
    "not_a_directory": (409, "Not a directory"),
    "not_allowed": (403, "Not allowed"),
    "directory_not_empty": (409, "Directory not empty"),
    "conflict": (409, "Changed concurrently; try again"),
    "invalid": (400, "Invalid request"),
}
"""Each kind of failure (``errors.classify``) as a status and a fallback message."""
_CODES: dict[FailureKind, str] = {"not_allowed": "read_only", "invalid": "bad_request"}


def translate(exc: BaseException) -> ApiError | None:
    """The response for a filesystem exception, or ``None`` if it is not a caller's error (a bug: 500)."""
    if isinstance(exc, ApiError):
        return exc
    kind = classify(exc)
    if kind is None:
        return None
    status, fallback = _STATUS[kind]
    if isinstance(exc, OSError) and not isinstance(exc, SnapshotError):
        message = _describe(exc, fallback)
    else:
        message = str(exc) or fallback
    return ApiError(status, _CODES.get(kind, kind), message)


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    headers = {"WWW-Authenticate": "Bearer", **exc.headers} if exc.status == 401 else exc.headers
    return error_response(exc.status, exc.code, exc.message, headers or None)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = exc.errors()
    in_body = any(p.get("loc", ("",))[0] == "body" for p in problems)
    parts = []
    for problem in problems[:5]:
        where = ".".join(str(x) for x in problem.get("loc", ()) if x != "body") or "body"
        parts.append(f"{where}: {problem.get('msg', 'invalid')}")
    message = "; ".join(parts) or "Invalid request"
    if in_body:
        return error_response(422, "invalid_body", message)
    return error_response(400, "bad_request", message)


def _allowed_methods(request: Request) -> str:
    """Every method some route serves at this path (Starlette names only the first route's)."""
    path = request.url.path
    methods: set[str] = set()
    for route in request.app.routes:
        pattern = getattr(route, "path_regex", None)
        documented = getattr(route, "include_in_schema", True)
        if pattern is not None and documented and getattr(route, "methods", None) and pattern.match(path):
            methods.update(route.methods)
    return ", ".join(sorted(methods))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    codes = {404: "not_found", 405: "method_not_allowed", 400: "bad_request", 413: "too_large", 401: "unauthorized"}
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
    return error_response(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail), headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    mapped = translate(exc)
    if mapped is not None:
        return await _api_error(request, mapped)
    log.exception("Unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "The service failed; the error has been logged")


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception to the one error shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for kind in (OSError, ValueError, SnapshotError):
        app.add_exception_handler(kind, _unexpected)
    app.add_exception_handler(Exception, _unexpected)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses an endpoint can return (every one has the same shape)."""
    descriptions = {
        400: "Bad path, pattern or parameter",
        401: "Missing or unknown bearer token",
        403: "Read-only file",
        404: "No such agent, session, file or snapshot",
        409: "Exists, not empty, or a conflicting change",
        412: "If-Match did not match the current content",
        413: "Body or file too large for this request",
        405: "Method not allowed here (see the Allow header)",
        422: "Invalid request body",
    }
    every = sorted({400, 401, 404, 422, *statuses})  # any request can be malformed, unauthenticated or lost
    return {s: {"model": _error_model(), "description": descriptions[s]} for s in every}


def _error_model() -> Any:
    from workspacefs.server._models import ErrorResponse  # noqa: PLC0415 - keeps this module model-free

    return ErrorResponse


class BodyLimit:
    """ASGI middleware: refuse (413) a non-streaming request body over ``max_bytes`` before reading it all.

    Raw uploads (``application/octet-stream``) are exempt; the upload endpoints count those themselves.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        if headers.get(b"content-type", b"").split(b";")[0].strip().lower() == b"application/octet-stream":
            await self.app(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        payload = json.dumps(
            _body("too_large", f"Request body exceeds {self.max_bytes} bytes; upload large files as octet-stream")
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})
