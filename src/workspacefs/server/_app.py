"""``create_app``: the FastAPI application of the workspace service and its web file browser."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from workspacefs._version import __version__
from workspacefs.backends.sql import SqlStore, default_database
from workspacefs.policy import Policy
from workspacefs.quota import Quota
from workspacefs.server import _actions, _admin, _files, _history, _merging, _policies, _sessions, _signin
from workspacefs.server._actor import ActorHeaders
from workspacefs.server._approvals import DEFAULT_APPROVAL_TIMEOUT
from workspacefs.server._errors import ASGIApp, Message, Receive, Scope, Send, install_error_handlers
from workspacefs.server._limits import DEFAULT_MAX_JSON_BYTES, DEFAULT_RATE_LIMIT, BodyLimit, refuse_undecodable_url
from workspacefs.server._service import Service
from workspacefs.server._storage import session_storage

__all__ = ["DEFAULT_MAX_JSON_BYTES", "DEFAULT_MAX_UPLOAD_BYTES", "DEFAULT_RATE_LIMIT", "create_app"]

DEFAULT_MAX_UPLOAD_BYTES = 8 * 1024**3
"""Raw uploads stream in fixed memory; this only bounds what one request may store."""
_UI_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
"""The browser UI runs only its own script: even a name that slipped into HTML could run nothing."""

_DESCRIPTION = """One filesystem per session for LLM agents: files under
`/v1/agents/{agent_id}/sessions/{session_id}/fs`, with snapshots, diffs and restores, streamed uploads and
downloads, ETag/If-Match compare-and-set, and a web file browser at `/`. Create a session with
`POST /v1/agents/{agent_id}/sessions`: send `{"id": "ticket-4711"}` to choose its id (409 if the agent
already has it), or no body for a new UUIDv7. Grep answers each line as `line_content` (as the Python API's
`GrepMatch`) and, for older clients, also as `line`. Authenticate with `Authorization: Bearer <token>`
(`workspacefs token create --agent ID`). A token's scope is `read`, `write` or `admin` (token management);
over its rate it gets 429 with `Retry-After`. JSON bodies are limited (4 MiB by default): send larger
content raw (`Content-Type: application/octet-stream`). A path policy protects agent configuration and
secrets: a request an `ask` rule covers waits until an admin decides it (`GET /v1/approvals`,
`POST /v1/approvals/{id}`, or the browser's prompt). Every change is journaled with who made it: the token's
agent (the browser's sign-in: `user via browser`), the session, and the optional headers `X-Tool-Call-Id` (the
model's tool call) and `X-Actor` (appended to the agent's name, never replacing it); read it with
`GET …/history`, undo with `POST …/undo`, and follow changes live with `GET …/events` (Server-Sent Events,
resumable with `Last-Event-ID`)."""


_DOCS_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
"""Swagger UI at ``/docs``: its bundle and our ``docs.js`` from this service, nothing inline, nothing remote."""
_REDOC_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; worker-src blob:; form-action 'none'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
"""Redoc at ``/redoc`` writes its styles into the page and parses in a worker made from a blob: only that."""


_ANSWER_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; sandbox"
"""Every API answer (JSON, a file's bytes, events): never a page, so nothing in it may run, load or be framed,
even where a browser is made to render one (a file's bytes are also ``attachment`` and ``nosniff``)."""


def _page_policy(path: str) -> str | None:
    """The content security policy of the page at ``path`` (``None``: an API answer, which is no page)."""
    if path == "/" or path.startswith("/static/"):
        return _UI_POLICY
    if path == "/docs":
        return _DOCS_POLICY
    if path == "/redoc":
        return _REDOC_POLICY
    return None


class _SecurityHeaders:
    """Adds ``nosniff`` everywhere, a strict content security policy to the pages (the browser UI, the docs) and a
    sandboxing one to every other answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = _page_policy(scope.get("path", ""))
        if await refuse_undecodable_url(scope, send):  # outermost: before anything reads the mangled path
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-content-type-options", b"nosniff"))
                headers.append((b"referrer-policy", b"no-referrer"))
                headers.append((b"content-security-policy", (policy or _ANSWER_POLICY).encode()))
                headers.append((b"x-frame-options", b"DENY"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _document_bearer_auth(app: FastAPI) -> None:
    """Declare the bearer scheme in the OpenAPI document (so /docs offers "Authorize" and clients know)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                tags=app.openapi_tags,
            )
            document.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "description": "workspacefs token create --agent ID"}
            }
            document["security"] = [{"bearer": []}]
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _static_dir() -> Path:
    return Path(str(resources.files("workspacefs.server") / "static"))


def _docs_assets() -> Path:
    """Swagger UI and Redoc as the ``fastapi-offline`` package ships them (the server extra installs it), so
    ``/docs`` works without the internet; that package refreshes them from their projects' releases."""
    return Path(str(resources.files("fastapi_offline") / "static"))


def create_app(
    store: SqlStore | str | None = None,
    *,
    auth: bool = True,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
    max_json_bytes: int = DEFAULT_MAX_JSON_BYTES,
    rate_limit: int = DEFAULT_RATE_LIMIT,
    policy: Policy | None = None,
    approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
    quota: Quota | None = None,
    sessions_root: str | None = None,
) -> FastAPI:
    """The service over ``store`` (a :class:`SqlStore`, a database URL, or ``None`` for the default
    SQLite file). ``auth=False`` serves without tokens: only bind that to loopback. ``rate_limit`` is the
    requests per minute of a token that has no limit of its own (0: none). ``policy`` applies to sessions
    without their own (default: ``Policy.default()``; ``Policy()`` allows everything); an ``ask`` waits up to
    ``approval_timeout`` seconds for an admin's decision. ``quota`` limits each session's storage.
    ``sessions_root`` keeps sessions' files at a URL instead of in the database (``file:///srv/agents``: a
    directory per agent and session; ``s3://…``; a ``composite://`` layout; see ``_storage.py``)."""
    owned = not isinstance(store, SqlStore)
    sql_store = store if isinstance(store, SqlStore) else SqlStore(store or default_database())

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        _app.state.workspacefs.stopping.set()
        if owned:
            sql_store.close()

    app = FastAPI(
        title="workspacefs",
        version=__version__,
        description=_DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served below from local assets: FastAPI's own pages load them from a CDN
        redoc_url=None,
        openapi_tags=[
            {"name": "files", "description": "Read, create, update and delete by path"},
            {"name": "actions", "description": "stat, move, copy, grep, glob"},
            {"name": "sessions", "description": "Agents, sessions and snapshots"},
            {"name": "history", "description": "Who changed what, undo, and changes as they happen (SSE)"},
            {"name": "tokens", "description": "Token management (admin tokens)"},
            {"name": "policy", "description": "Path policies and the approvals their ask rules wait for"},
            {"name": "sign-in", "description": "The web file browser's sign-in cookie"},
        ],
    )
    app.state.workspacefs = Service(
        sql_store,
        auth=auth,
        max_upload_bytes=max_upload_bytes,
        rate_limit=rate_limit,
        policy=policy,
        approval_timeout=approval_timeout,
        quota=quota,
        sessions=session_storage(sql_store, sessions_root),
    )
    install_error_handlers(app)
    # the file routes first: most requests are theirs, and routing tries routes in order (the paths of the
    # other routers never reach into /fs, so the order changes no answer)
    app.include_router(_actions.router)  # before the files router: its catch-all would take /fs/_/…
    app.include_router(_files.router)
    app.include_router(_sessions.router)
    app.include_router(_merging.router)
    app.include_router(_history.router)
    app.include_router(_admin.router)
    app.include_router(_policies.router)
    app.include_router(_signin.router)
    static = _static_dir()
    app.mount("/static/vendor", StaticFiles(directory=_docs_assets()), name="docs-assets")
    app.mount("/static", StaticFiles(directory=static), name="static")

    @app.get("/", include_in_schema=False)
    async def browser() -> Response:
        return FileResponse(static / "index.html", media_type="text/html")

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> Response:
        """Liveness for a load balancer or orchestrator: answers without a token and touches no table (so it
        is also the framework's own floor in ``bench/bench_server.py``)."""
        return Response(b'{"status":"ok"}', media_type="application/json")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> Response:
        return FileResponse(static / "docs.html", media_type="text/html")

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> Response:
        return FileResponse(static / "redoc.html", media_type="text/html")

    if auth:
        _document_bearer_auth(app)
    app.add_middleware(BodyLimit, max_bytes=max_json_bytes, streams=_files.streams_raw)
    app.add_middleware(ActorHeaders)
    app.add_middleware(_SecurityHeaders)
    return app
