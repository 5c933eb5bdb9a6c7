"""One error shape for every failure, ``{"error": {"code", "message"}}``, and the status it maps to.

Filesystem exceptions become statuses here and nowhere else (``HTTP_STATUS``), and so do the service's own
refusals — a missing or expired token, a scope too narrow, too many requests (``REFUSALS``): both tables
are looked up by the exception's type, never by its message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from workspacefs import errors
from workspacefs.errors import SnapshotError

__all__ = [
    "HTTP_STATUS",
    "REFUSALS",
    "ApiError",
    "BrowserHeaderRequiredError",
    "ForeignHostError",
    "RateLimitedError",
    "ScopeDeniedError",
    "ServiceRefusal",
    "SignInCodeError",
    "TokenExpiredError",
    "TokenRequiredError",
    "TooManyStreamsError",
    "error_body",
    "error_responses",
    "install_error_handlers",
    "translate",
]

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


class ServiceRefusal(Exception):  # noqa: N818 - the family's name; each member ends in Error
    """A request refused for who sends it or how often, not for anything in storage; carries the headers
    its answer needs (``WWW-Authenticate``, ``Retry-After``)."""

    def __init__(self, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.headers = dict(headers or {})


class TokenRequiredError(ServiceRefusal, PermissionError):
    """No bearer token, or one the service does not know (never issued, or revoked)."""


class TokenExpiredError(TokenRequiredError):
    """A token past its ``expires_at``."""


class SignInCodeError(TokenRequiredError):
    """A browser sign-in code that is unknown, already used or expired (a code works once, for minutes)."""


class BrowserHeaderRequiredError(ServiceRefusal, PermissionError):
    """A browser's request that changes something without ``X-Workspacefs: 1`` (signed in by its cookie, or to a
    service without auth), which the page sends and a form on another site cannot (cross-site request forgery)."""


class ForeignHostError(ServiceRefusal, PermissionError):
    """A browser's request to a service without auth by a name other than a loopback one: another site's DNS name
    pointed at this machine (DNS rebinding), whose page would otherwise read every session."""


class ScopeDeniedError(ServiceRefusal, PermissionError):
    """A valid token whose scope does not cover the request (a ``read`` token writing, …)."""


class RateLimitedError(ServiceRefusal, RuntimeError):
    """A token over its requests per minute; ``retry_after`` whole seconds until one more is allowed."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})
        self.retry_after = retry_after


class TooManyStreamsError(ServiceRefusal, RuntimeError):
    """A token that already holds as many open event streams as one token may (each holds a thread and a watcher)."""


REFUSALS: Mapping[type[BaseException], tuple[int, str]] = {
    TokenRequiredError: (401, "unauthorized"),
    TokenExpiredError: (401, "token_expired"),
    SignInCodeError: (401, "invalid_signin_code"),
    ScopeDeniedError: (403, "insufficient_scope"),
    BrowserHeaderRequiredError: (403, "browser_header_required"),
    ForeignHostError: (403, "foreign_host"),
    RateLimitedError: (429, "rate_limited"),
    TooManyStreamsError: (429, "too_many_streams"),
}
"""Status and code of each of the service's own refusals (looked up by type, most specific first)."""


def error_body(code: str, message: str) -> dict[str, Any]:
    """The one error shape."""
    return {"error": {"code": code, "message": message}}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON response of an error."""
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


HTTP_STATUS: Mapping[type[BaseException], int] = {
    errors.PathEscapeError: 403,
    errors.SymlinkRefusedError: 403,
    errors.SpecialFileError: 403,
    errors.HardLinkRefusedError: 403,
    errors.RootProtectedError: 403,
    errors.MountPointError: 403,
    errors.ReadOnlyError: 403,
    errors.ReadOnlyFileError: 403,
    errors.NotReadBeforeWriteError: 403,
    errors.FileChangedSinceReadError: 412,
    errors.PolicyDeniedError: 403,
    PermissionError: 403,
    errors.DirectoryNotEmptyError: 409,
    IsADirectoryError: 409,
    NotADirectoryError: 409,
    FileNotFoundError: 404,
    FileExistsError: 409,
    errors.PreconditionFailedError: 412,
    errors.ConcurrentChangeError: 409,
    errors.UndoConflictError: 409,
    errors.UndoContentNotKeptError: 409,
    errors.QuotaExceededError: 507,
    errors.FileTooLargeError: 413,
    OSError: 500,
    ConnectionError: 503,
    UnicodeDecodeError: 400,
    errors.InvalidPathError: 400,
    errors.UnsafeNameError: 400,
    errors.PathTooLongError: 400,
    errors.PathTooDeepError: 400,
    errors.NameTooLongError: 400,
    errors.LimitExceededError: 400,
    errors.ContentTooLargeError: 413,
    errors.InvalidPatternError: 400,
    errors.PatternTooSlowError: 400,
    errors.PatternTooLargeError: 400,
    errors.InvalidTextError: 400,
    errors.MoveIntoSelfError: 400,
    ValueError: 400,
    errors.UnsupportedOperationError: 501,
    errors.SandboxError: 503,
    errors.SnapshotError: 409,
    errors.SnapshotCreationError: 409,
    errors.SnapshotRestoreError: 409,
    errors.SnapshotNotFoundError: 404,
    errors.SnapshotIncompatibleError: 400,
    errors.AmbiguousSnapshotError: 400,
    errors.HistoryEntryNotFoundError: 404,
}
"""The HTTP status of each error type (looked up by the exception's MRO: most specific first); the body's
``code`` is the type's shared code (``errors.ERROR_CODES``)."""


def _refusal(exc: errors.PolicyDeniedError) -> str:
    """A policy's refusal, said so a client knows whether asking again can help."""
    target = f"/{exc.filename}" if isinstance(exc.filename, str) and not exc.filename.startswith("/") else exc.filename
    why = f"{exc.strerror}; rule pattern {exc.pattern}" if exc.pattern else str(exc.strerror)
    if exc.action != "ask":
        return f"The session's policy does not allow {exc.operation} on {target} ({why}); an admin can change it"
    outcome = "an admin declined it" if exc.asked else "it was not approved"
    return f"{exc.operation.capitalize()} on {target} needs an admin's approval ({why}), and {outcome}"


def _message(exc: BaseException) -> str:
    if isinstance(exc, errors.PolicyDeniedError):
        return _refusal(exc)
    if isinstance(exc, OSError) and not isinstance(exc, SnapshotError):
        reason = exc.strerror or type(exc).__name__
        return f"{reason}: {exc.filename}" if exc.filename else reason
    return str(exc) or type(exc).__name__


def translate(exc: BaseException) -> ApiError | None:
    """The response for a filesystem exception, or ``None`` if it is not a caller's error (a bug: 500)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ServiceRefusal):
        refusal = errors.lookup(REFUSALS, exc)
        if refusal is None:
            return None
        return ApiError(refusal[0], refusal[1], str(exc), exc.headers)
    status = errors.lookup(HTTP_STATUS, exc)
    code = errors.error_code(exc)
    if status is None or code is None:
        return None
    return ApiError(status, code, _message(exc))


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


def _routes(routes: Iterable[Any]) -> Iterator[Any]:
    """Every route, also those of included routers (newer FastAPI keeps an included router as one route)."""
    for route in routes:
        yield route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _routes(inner.routes)


def _allowed_methods(request: Request) -> str:
    """Every method some route serves at this path (Starlette names only the first route's)."""
    path = request.url.path
    methods: set[str] = set()
    for route in _routes(request.app.routes):
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
        if mapped.status >= 500:  # the machine failed (an I/O error): the caller gets its code, we get the trace
            log.error("%s on %s %s", mapped.code, request.method, request.url.path, exc_info=exc)
        return await _api_error(request, mapped)
    log.exception("Unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "The service failed; the error has been logged")


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception to the one error shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for kind in (ServiceRefusal, OSError, ValueError, SnapshotError, LookupError):  # HistoryEntryNotFoundError
        app.add_exception_handler(kind, _unexpected)
    app.add_exception_handler(Exception, _unexpected)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses an endpoint can return (every one has the same shape)."""
    descriptions = {
        400: "Bad path, pattern or parameter",
        401: "Missing, unknown, revoked or expired bearer token",
        403: "Not allowed: a read-only file or workspace, a path outside it, or a token's scope",
        404: "No such agent, session, file or snapshot",
        409: "Exists, not empty, or a conflicting change",
        412: "If-Match did not match the current content",
        413: "Body or file too large for this request",
        405: "Method not allowed here (see the Allow header)",
        422: "Invalid request body",
        429: "Too many requests for this token (see the Retry-After header)",
        501: "Not offered by this session's storage",
        503: "The storage (database or object store) cannot be reached now; retry later",
    }
    # any request can be malformed, unauthenticated, beyond its token's scope or rate, or lost, and any
    # request needs its storage
    every = sorted({400, 401, 403, 404, 422, 429, 503, *statuses})
    return {s: {"model": _error_model(), "description": descriptions[s]} for s in every}


def _error_model() -> Any:
    from workspacefs.server._models import ErrorResponse  # noqa: PLC0415 - keeps this module model-free

    return ErrorResponse
