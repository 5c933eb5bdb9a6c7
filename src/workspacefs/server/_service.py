"""What every route shares: the store, who is asking, which session they may touch, and how a file's
metadata becomes seed 004's JSON.

Routes depend on protocols (``ServedFilesystem``: a snapshotable filesystem with ``ConditionalWrites``),
never on a backend class. A session belongs to one agent (``catalog.py``).
"""

from __future__ import annotations

import base64
import binascii
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Protocol, TypeVar

import anyio
import anyio.to_thread
from fastapi import Depends, Header, Path, Request

from workspacefs.backends.sql import SqlFilesystem, SqlStore
from workspacefs.errors import InvalidPathError, error_code
from workspacefs.paths import MAX_CONVENIENCE_BYTES, basename, strict_path
from workspacefs.protocol import ConditionalWrites, SnapshotableFilesystem
from workspacefs.results import FileStat
from workspacefs.search import text_or_base64
from workspacefs.server._errors import ApiError
from workspacefs.server._models import ID_PATTERN, FileModel, SessionModel
from workspacefs.server.catalog import DEFAULT_AGENT, CatalogEntry, SessionCatalog
from workspacefs.server.tokens import TokenInfo, TokenStore

__all__ = [
    "DEFAULT_AGENT",
    "AgentId",
    "Caller",
    "ServedFilesystem",
    "Service",
    "SessionId",
    "caller",
    "decode_content",
    "file_model",
    "known_query_only",
    "service",
    "session_model",
    "uuid7",
    "wire_path",
]

OWNER_CACHE_SECONDS = 5.0
"""How long a session's owner is remembered without asking the database (like tokens: seconds)."""
T = TypeVar("T")

AgentId = Annotated[str, Path(pattern=ID_PATTERN, description="Agent id")]
SessionId = Annotated[str, Path(pattern=ID_PATTERN, description="Session id")]
_FILE_IDS = uuid.UUID("6f1c9a52-4d8e-4c1b-9a57-3f0e7b2d5c11")
_EPOCH = datetime.fromtimestamp(0, UTC)


class ServedFilesystem(SnapshotableFilesystem, ConditionalWrites, Protocol):
    """What the REST API needs of a session's filesystem: the protocols, plus two conveniences every
    ``BaseFilesystem`` has (``set_read_only`` only where ``capabilities.file_read_only``)."""

    def list_stats(self, path: str = ".") -> Sequence[FileStat]:
        """The metadata of a directory's entries, sorted by name."""
        ...

    def set_read_only(self, path: str, read_only: bool = True) -> None:
        """Mark a file read-only, or writable again."""
        ...


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: a token's record, or ``None`` when the service runs without auth."""

    token: TokenInfo | None

    def allows(self, agent_id: str) -> bool:
        """True if the caller may see ``agent_id``'s sessions."""
        return self.token is None or self.token.allows(agent_id)


class Service:
    """The state of one running service."""

    def __init__(self, store: SqlStore, *, auth: bool, max_upload_bytes: int, db_threads: int = 8) -> None:
        self.store = store
        self.catalog = SessionCatalog(store)
        self.tokens = TokenStore(store)
        self.auth = auth
        self.max_upload_bytes = max_upload_bytes
        # Few threads on purpose: many Python threads fighting for the GIL starve the event loop that
        # parses every request. SQLite writes one at a time anyway; PostgreSQL waits release the GIL.
        self.limiter = anyio.CapacityLimiter(db_threads)
        self._owners: dict[str, tuple[float, str]] = {}

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """Run blocking (database) work in the service's thread pool."""
        return await anyio.to_thread.run_sync(function, *args, limiter=self.limiter)

    def session(self, who: Caller, agent_id: str, session_id: str) -> CatalogEntry:
        """A session the caller may see, else 404 (never 403: existence must not leak across agents)."""
        info = self.catalog.get(session_id) if who.allows(agent_id) else None
        if info is None or info.agent_id != agent_id:
            raise ApiError(404, "session_not_found", f"No session {session_id!r} for agent {agent_id!r}")
        self._owners[session_id] = (time.monotonic() + OWNER_CACHE_SECONDS, agent_id)
        return info

    def forget(self, session_id: str) -> None:
        """Drop a deleted session from the ownership cache."""
        self._owners.pop(session_id, None)

    def filesystem(self, who: Caller, agent_id: str, session_id: str) -> ServedFilesystem:
        """The filesystem of a session the caller may see (404 otherwise).

        Which agent owns a session is cached for a few seconds: it never changes while the session lives,
        and the file operations themselves find nothing once a session is deleted.
        """
        cached = self._owners.get(session_id)
        if cached is None or cached[0] < time.monotonic() or cached[1] != agent_id or not who.allows(agent_id):
            if len(self._owners) > 100_000:
                self._owners.clear()
            self.session(who, agent_id, session_id)
        return SqlFilesystem(self.store, session_id, create=False)


def service(request: Request) -> Service:
    """The running service (a FastAPI dependency)."""
    found: Service = request.app.state.workspacefs
    return found


async def caller(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Caller:
    """Authenticate the bearer token (a FastAPI dependency): 401 without a valid one, unless auth is off."""
    running = service(request)
    if not running.auth:
        return Caller(None)
    if not authorization or not authorization.lower().startswith("bearer "):
        raise ApiError(401, "unauthorized", "Send 'Authorization: Bearer <token>' (workspacefs token create)")
    secret = authorization[7:].strip()
    info = await running.run(running.tokens.verify, secret) if secret.isascii() else None
    if info is None:
        raise ApiError(401, "unauthorized", "Unknown or revoked token")
    return Caller(info)


_QUERY_NAMES: dict[int, frozenset[str]] = {}


def _declared_query(dependant: Any) -> set[str]:
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _declared_query(sub)
    return names


async def known_query_only(request: Request) -> None:
    """Refuse (400) query parameters an endpoint does not declare: ``?recusive=true`` is a bug to report,
    not a flag to ignore while the request does something else (a router-wide FastAPI dependency)."""
    if not request.query_params:
        return
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    allowed = _QUERY_NAMES.get(id(route))
    if allowed is None:
        allowed = _QUERY_NAMES.setdefault(id(route), frozenset(_declared_query(dependant)))
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        accepted = ", ".join(sorted(allowed)) or "none"
        raise ApiError(
            400, "unknown_parameter", f"Unknown query parameter(s) {', '.join(unknown)}; accepted: {accepted}"
        )


CallerDep = Annotated[Caller, Depends(caller)]
ServiceDep = Annotated[Service, Depends(service)]


def wire_path(path: str) -> str:
    """A path from a URL or body, validated strictly (400 for ``..``, ``//``, NUL …), in the absolute form
    the API shows (``/`` is the root), so error messages name paths the way the client does."""
    try:
        return "/" + strict_path(path)
    except InvalidPathError as exc:  # its own code: invalid_path, path_too_deep, name_too_long …
        raise ApiError(400, error_code(exc) or "invalid_path", str(exc)) from None


def shown(path: str) -> str:
    """A root-relative path as the API shows it: absolute."""
    return "/" + path


def decode_content(content: str, encoding: str) -> bytes:
    """The bytes of a request's ``content`` (400 for bad base64, 413 over the JSON limit)."""
    if encoding == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "invalid_base64", "content is not valid base64") from None
    else:
        data = content.encode("utf-8")
    if len(data) > MAX_CONVENIENCE_BYTES:
        raise ApiError(
            413, "too_large", f"JSON content is limited to {MAX_CONVENIENCE_BYTES} bytes; PUT application/octet-stream"
        )
    return data


def file_model(session_id: str, info: FileStat, content: bytes | None = None) -> FileModel:
    """Seed 004's file JSON for a file's metadata (and its content, when the response carries it)."""
    text, encoding = text_or_base64(content) if content is not None else (None, None)
    updated = info.modified_at or info.created_at or _EPOCH
    return FileModel(
        id=str(uuid.uuid5(_FILE_IDS, f"{session_id}\0{info.path}")),
        session_id=session_id,
        path=shown(info.path),
        name=basename(info.path),
        content=text,
        encoding=encoding,
        is_directory=info.is_directory,
        is_readonly=info.read_only,
        size_bytes=info.size_bytes,
        created_at=info.created_at or updated,
        updated_at=updated,
    )


def session_model(info: CatalogEntry) -> SessionModel:
    """A session's JSON."""
    return SessionModel(
        id=info.session_id, agent_id=info.agent_id, created_at=info.created_at, updated_at=info.updated_at
    )


def uuid7() -> str:
    """A time-ordered UUID (version 7), as seed 004 uses for ids; Python 3.11 has no ``uuid.uuid7``."""
    millis = time.time_ns() // 1_000_000
    raw = bytearray(millis.to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))
