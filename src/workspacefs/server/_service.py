"""What every route shares: the store, which session a caller may touch, and how a file's metadata becomes
seed 004's JSON (who the caller is: ``_auth.py``).

Routes depend on protocols (``ServedFilesystem``: a snapshotable filesystem with ``ConditionalWrites``),
never on a backend class. A session belongs to one agent, and its id is that agent's (``catalog.py``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import Depends, Path, Request

from workspacefs.backends.sql import SqlStore
from workspacefs.errors import InvalidPathError, error_code
from workspacefs.history import Actor, ChangeWatcher, JournalEntry
from workspacefs.paths import MAX_CONVENIENCE_BYTES, basename, strict_path
from workspacefs.policy import Policy
from workspacefs.protocol import BytesLike, ConditionalWrites, SnapshotableFilesystem
from workspacefs.quota import Quota
from workspacefs.results import FileStat, WriteResult
from workspacefs.search import text_or_base64
from workspacefs.server._access import AccessReader, SessionAccess
from workspacefs.server._actor import acting, request_actor
from workspacefs.server._approvals import DEFAULT_APPROVAL_TIMEOUT, ApprovalStore, stored_policy
from workspacefs.server._auth import Caller, Credentials
from workspacefs.server._errors import ApiError
from workspacefs.server._events import StreamPlaces
from workspacefs.server._limits import DEFAULT_RATE_LIMIT, RateLimiter
from workspacefs.server._models import ID_PATTERN, FileModel, SessionModel
from workspacefs.server._query import known_query_only
from workspacefs.server._storage import SessionStorage, SqlSessions
from workspacefs.server._workers import WorkerPool
from workspacefs.server.catalog import DEFAULT_AGENT, CatalogEntry, SessionCatalog
from workspacefs.server.tokens import TokenStore

__all__ = [
    "DEFAULT_AGENT",
    "AgentId",
    "ServedFilesystem",
    "Service",
    "SessionId",
    "decode_content",
    "file_model",
    "known_query_only",
    "service",
    "serving",
    "session_model",
    "uuid7",
    "wire_path",
]

T = TypeVar("T")

AgentId = Annotated[str, Path(pattern=ID_PATTERN, description="Agent id")]
SessionId = Annotated[str, Path(pattern=ID_PATTERN, description="Session id")]
_FILE_IDS = uuid.UUID("6f1c9a52-4d8e-4c1b-9a57-3f0e7b2d5c11")
_EPOCH = datetime.fromtimestamp(0, UTC)


class ServedFilesystem(SnapshotableFilesystem, ConditionalWrites, Protocol):
    """What the REST API needs of a session's filesystem: the protocols, plus what every ``BaseFilesystem``
    has (the read-only flag only where ``capabilities.file_read_only``; content and flag change together)."""

    def list_stats(self, path: str = ".") -> Sequence[FileStat]:
        """The metadata of a directory's entries, sorted by name."""
        ...

    def set_read_only_if(self, path: str, read_only: bool, *, expect: str) -> None:
        """Set a file's read-only flag only over content id ``expect`` (``"*"``: any existing file)."""
        ...

    def create_bytes(self, path: str, content: BytesLike, *, read_only: bool = False) -> WriteResult:
        """Create a new file (parents too), read-only from the start if asked."""
        ...

    # the journal (where ``capabilities.history``; ``watch`` where ``capabilities.watch``)
    def history(
        self,
        path: str | None = None,
        *,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> list[JournalEntry]:
        """Journal entries, newest first."""
        ...

    def history_entry(self, entry_id: int) -> JournalEntry:
        """One journal entry."""
        ...

    def read_version(self, entry_id: int, path: str, *, side: str = "after") -> bytes:
        """What ``path`` held before or after an entry."""
        ...

    def undo(
        self,
        entry_id: int | Sequence[int] | None = None,
        *,
        actor: str | Actor | None = None,
        last: int | None = None,
        force: bool = False,
    ) -> list[JournalEntry]:
        """Put entries back, as new entries."""
        ...

    def watch(self, path: str = "/", *, recursive: bool = True) -> ChangeWatcher:
        """Events of changes from now on."""
        ...


class Service:
    """The state of one running service."""

    def __init__(
        self,
        store: SqlStore,
        *,
        auth: bool,
        max_upload_bytes: int,
        rate_limit: int = DEFAULT_RATE_LIMIT,
        db_threads: int = 8,
        policy: Policy | None = None,
        approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        quota: Quota | None = None,
        sessions: SessionStorage | None = None,
    ) -> None:
        self.store = store
        self.sessions = SqlSessions(store) if sessions is None else sessions
        """Where each session's files are (the service's database unless ``serve --sessions-root``)."""
        self.catalog = SessionCatalog(store)
        self.tokens = TokenStore(store)
        self.access = AccessReader(store)
        """Token, session and session policy of a request, in one statement."""
        self.auth = auth
        self.max_upload_bytes = max_upload_bytes
        self.rate_limits = RateLimiter(rate_limit)
        # Few threads on purpose: many Python threads fighting for the GIL starve the event loop that
        # parses every request. SQLite writes one at a time anyway; PostgreSQL waits release the GIL.
        self.workers = WorkerPool(db_threads)
        """Where blocking work runs (``_workers.py``: a hop costs ~8 µs of CPU, anyio's cost ~60 µs)."""
        self.policy = Policy.default() if policy is None else policy.with_approver(None)
        """The rules of sessions without their own policy."""
        # a request waiting for a decision holds a thread: half of them stay free for everything else
        self.approvals = ApprovalStore(store, timeout=approval_timeout, max_pending=max(1, db_threads // 2))
        self.quota = quota
        """The limits of each session's storage (``None``: none)."""
        self.stream_places = StreamPlaces()
        """Event streams each token holds open (``_events.py``: at most ``DEFAULT_STREAMS_PER_TOKEN``)."""
        self.stopping = threading.Event()
        """Set when the service shuts down: open event streams end (``serve`` sets it on its exit signal)."""

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """Run blocking (database) work in the service's thread pool."""
        return await self.workers.run(function, *args)

    def _access(self, who: Caller, agent_id: str, session_id: str) -> SessionAccess:
        """The session the caller names and its policy: as read with the token (the same statement), or else
        (without auth, or for another URL's ids) read now, in one statement."""
        found = who.session
        if found is None or not found.names(agent_id, session_id):
            found = self.access.lookup(None, agent_id, session_id).session
            assert found is not None
        return found

    def session(self, who: Caller, agent_id: str, session_id: str) -> CatalogEntry:
        """A session the caller may see, else 404 (never 403: existence must not leak across agents).

        Read on every request (with the token, in one indexed statement: ``_access.py``), never cached: a
        deleted session is gone at once, in every process, and an id can never lead to a session of another
        agent."""
        info = self._access(who, agent_id, session_id).entry if who.allows(agent_id) else None
        if info is None:
            raise ApiError(404, "session_not_found", f"No session {session_id!r} for agent {agent_id!r}")
        return info

    def filesystem(self, who: Caller, agent_id: str, session_id: str) -> ServedFilesystem:
        """The filesystem of a session the caller may see (404 otherwise), seen through the session's policy
        (or the service's) and then the token's own, with ``ask`` held for a person (``_approvals.py``), acting
        as the request's actor (``_actor.py``: every change is journaled under it).
        Both policies are read with the request's token, never cached (a change applies to the next request);
        their compiled rules are kept per stored text (``stored_policy``)."""
        found = self._access(who, agent_id, session_id) if who.allows(agent_id) else None
        entry = None if found is None else found.entry
        if found is None or entry is None:
            raise ApiError(404, "session_not_found", f"No session {session_id!r} for agent {agent_id!r}")
        storage = self.sessions.open_shared(entry, quota=self.quota)
        token_id = who.token.token_id if who.token is not None else None
        approve = self.approvals.approver(agent_id=entry.agent_id, session_id=entry.session_id, token_id=token_id)
        rules = self.policy if found.policy is None else stored_policy(found.policy)
        served: ServedFilesystem = rules.with_approver(approve).guard(storage)
        if who.token is not None and who.token.policy is not None:
            own = stored_policy(json.dumps(who.token.policy, sort_keys=True))
            served = own.with_approver(approve).guard(served)
        actor = request_actor(who.token, cookie=who.cookie, session_id=session_id)
        return acting(served, actor)


async def service(request: Request) -> Service:
    """The running service (a FastAPI dependency; ``async`` because FastAPI runs a plain function dependency
    in its thread pool, a worker-thread round trip per request for a lookup of an attribute)."""
    found: Service = request.app.state.workspacefs
    return found


ServiceDep = Annotated[Service, Depends(service)]


def serving(access: Credentials) -> Service:
    """The service whose request presented ``access``: the hot routes take it from their credentials instead of
    from a dependency of its own (each costs a request about 8 µs to solve)."""
    running = access.running
    if not isinstance(running, Service):
        raise TypeError(f"credentials of {type(running).__name__}, not of the workspace service")
    return running


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


def file_id(session_id: str, path: str) -> str:
    """A file's id: ``uuid5`` of its session and path (stable, so a client can key by it), computed as the
    standard does (RFC 9562: SHA-1 of namespace and name, version and variant bits set) without building the
    intermediate ``UUID`` objects, which cost more than the hash."""
    digest = bytearray(hashlib.sha1(_FILE_IDS.bytes + f"{session_id}\0{path}".encode(), usedforsecurity=False).digest())
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    text = digest[:16].hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def file_model(session_id: str, info: FileStat, content: bytes | None = None) -> FileModel:
    """Seed 004's file JSON for a file's metadata (and its content, when the response carries it)."""
    text, encoding = text_or_base64(content) if content is not None else (None, None)
    updated = info.modified_at or info.created_at or _EPOCH
    return FileModel(
        id=file_id(session_id, info.path),
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
    """A session's JSON (its file count and last change where the catalogue counted them: in listings)."""
    return SessionModel(
        id=info.session_id,
        agent_id=info.agent_id,
        created_at=info.created_at,
        updated_at=info.updated_at,
        file_count=info.file_count,
        changed_at=info.changed_at,
    )


def uuid7() -> str:
    """A time-ordered UUID (version 7), as seed 004 uses for ids; Python 3.11 has no ``uuid.uuid7``."""
    millis = time.time_ns() // 1_000_000
    raw = bytearray(millis.to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))
