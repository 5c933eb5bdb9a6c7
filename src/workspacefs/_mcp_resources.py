"""The workspace's files as MCP resources: ``workspace://<path>``, listed, read, and subscribed to.

``resources/list`` lists every file (paged), ``resources/read`` returns a file as text (UTF-8 without NUL) or
base64, through the same policy and roots as the tools. Where the filesystem can be watched
(``capabilities.watch``), a client hears of changes: on 2025 protocol versions ``resources/subscribe`` asks for
``notifications/resources/updated`` of a URI (one :meth:`fs.watch() <workspacefs.history.ChangeWatcher>` serves
every subscription, its events handed from a thread of their own to the event loop of the session that
subscribed); on 2026-07-28, where ``resources/subscribe`` is gone, ``subscriptions/listen`` with
``resource_subscriptions`` (the SDK's ``ListenHandler``, fed by a watcher that lives as long as the server runs).
A move notifies both its source and its destination; a deletion notifies too (a read then says the resource is
gone).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import quote, unquote

import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp.shared.exceptions import MCPError

from workspacefs.history import ChangeWatcher
from workspacefs.paths import MAX_CONVENIENCE_BYTES, normalize_path
from workspacefs.protocol import Filesystem

__all__ = ["RESOURCE_NOT_FOUND", "SCHEME", "Resources", "path_of", "uri_of"]

logger = logging.getLogger("workspacefs.mcp")

SCHEME = "workspace://"
RESOURCE_NOT_FOUND = -32002
"""The JSON-RPC error code MCP gives a resource that does not exist."""
_PAGE = 500


def uri_of(path: str) -> str:
    """``src/app.py`` → ``workspace://src/app.py`` (characters a URI cannot hold are percent-encoded)."""
    return SCHEME + quote(path, safe="/")


def _shown(uri: object) -> str:
    """A URI as an error names it: cut past 200 characters, so a client sending 100,000 does not get them back."""
    text = str(uri)
    return text if len(text) <= 200 else text[:200] + "…"


def _reason(exc: BaseException) -> str:
    """What went wrong, without Python's ``[Errno 13]`` prefix."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename!r}" if isinstance(exc.filename, str) else exc.strerror
    return str(exc)


def path_of(uri: str) -> str:
    """The workspace path a ``workspace://`` URI names (``workspace:///src/a.py`` too), normalised."""
    text = str(uri)
    if not text.startswith(SCHEME):
        raise MCPError(
            types.INVALID_PARAMS, f"Not a workspace resource: {_shown(text)} (they look like {SCHEME}src/app.py)"
        )
    try:  # strict: an escape that is not UTF-8 (``caf%E9``) must not name the file ``caf\ufffd`` (as REST refuses it)
        named = unquote(text[len(SCHEME) :], errors="strict")
    except UnicodeDecodeError:
        raise MCPError(
            types.INVALID_PARAMS, f"{_shown(text)} has percent-escapes that are not UTF-8; encode names as UTF-8 bytes"
        ) from None
    try:
        return normalize_path(named.lstrip("/"), mount_point=None)
    except (ValueError, PermissionError) as exc:
        raise MCPError(types.INVALID_PARAMS, f"Invalid resource path in {_shown(text)}: {_reason(exc)}") from None


def _position(cursor: str | None) -> int:
    """Where a page of the listing starts: a cursor this server handed out (``-32602`` for any other, as MCP asks,
    never a silent first page nor a Python error for 5,000 digits)."""
    if not cursor:
        return 0
    if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 18):
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {_shown(cursor)!r}: pass the nextCursor of a listing")
    return int(cursor)


def _contents(uri: str, data: bytes) -> types.TextResourceContents | types.BlobResourceContents:
    if b"\x00" not in data[:8192]:
        try:
            return types.TextResourceContents(uri=uri, mime_type="text/plain", text=data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    blob = base64.b64encode(data).decode("ascii")
    return types.BlobResourceContents(uri=uri, mime_type="application/octet-stream", blob=blob)


class Resources:
    """Resource handlers over one filesystem (seen through the server's policy); ``allows(path)`` applies the
    client's roots."""

    def __init__(self, fs: Filesystem, allows: Callable[[str], bool]) -> None:
        self.fs = fs
        self.allows = allows
        self._lock = threading.Lock()
        self._subscribers: dict[Any, tuple[set[str], Any, Any]] = {}
        """Connection → (the URIs it subscribed to, the event-loop token and the session proxy its notifications
        are sent with)."""
        self._watcher: ChangeWatcher | None = None
        self.bus = InMemorySubscriptionBus()
        """What ``subscriptions/listen`` streams hear (2026-07-28)."""

    # --- listing and reading ------------------------------------------------------------------------

    def list(self, cursor: str | None) -> types.ListResourcesResult:
        """Every file the roots allow, sorted by path, ``_PAGE`` at a time."""
        start = _position(cursor)
        files = [m.path for m in self.fs.glob("**") if self.allows(m.path)]
        page = files[start : start + _PAGE]
        resources = [
            types.Resource(name=path.rpartition("/")[2] or path, title=path, uri=uri_of(path)) for path in page
        ]
        more = start + _PAGE < len(files)
        return types.ListResourcesResult(resources=resources, next_cursor=str(start + _PAGE) if more else None)

    def read(self, uri: str) -> types.ReadResourceResult:
        """A file's content (``-32002`` when there is none; the policy and roots refuse as the tools do)."""
        path = path_of(uri)
        if not self.allows(path):
            raise MCPError(types.INVALID_PARAMS, f"{uri} is outside the client's roots")
        try:
            if self.fs.stat(path).size_bytes > MAX_CONVENIENCE_BYTES:
                raise MCPError(types.INVALID_PARAMS, f"{uri} is larger than {MAX_CONVENIENCE_BYTES} bytes")
            data = self.fs.read_bytes(path).content
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}") from None
        except (OSError, ValueError) as exc:
            raise MCPError(types.INVALID_PARAMS, f"{_shown(uri)} cannot be read: {_reason(exc)}") from None
        return types.ReadResourceResult(contents=[_contents(uri_of(path), data)])

    # --- subscriptions ------------------------------------------------------------------------------

    @property
    def can_subscribe(self) -> bool:
        """True where the filesystem can be watched."""
        return bool(self.fs.capabilities.watch)

    def subscribe(self, session: Any, uri: str) -> None:
        """Notify ``session`` when the file at ``uri`` changes (call from the session's event loop)."""
        if not self.can_subscribe:
            raise MCPError(types.INVALID_PARAMS, "This workspace cannot be watched, so resources cannot be subscribed")
        canonical = uri_of(path_of(uri))
        token = anyio.lowlevel.current_token()
        key = _connection(session)
        with self._lock:
            uris = self._subscribers.get(key, (set(), None, None))[0]
            uris.add(canonical)
            self._subscribers[key] = (uris, token, session)
            start = self._watcher is None
            if start:
                self._watcher = self.fs.watch("/", recursive=True)  # type: ignore[attr-defined]
        if start:
            threading.Thread(target=self._pump, name="wsfs-mcp-watch", daemon=True).start()

    def unsubscribe(self, session: Any, uri: str) -> None:
        """Stop notifying ``session`` of ``uri``; the watcher closes with the last subscription."""
        canonical = uri_of(path_of(uri))
        key = _connection(session)
        with self._lock:
            uris = self._subscribers.get(key, (set(), None, None))[0]
            uris.discard(canonical)
            if not uris:
                self._subscribers.pop(key, None)
            watcher = self._watcher if not self._subscribers else None
            if watcher is not None:
                self._watcher = None
        if watcher is not None:
            watcher.close()

    def close(self) -> None:
        """Forget every subscription and stop watching."""
        with self._lock:
            self._subscribers.clear()
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.close()

    @contextlib.asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: while it runs, every change the roots allow goes to the listen streams' bus."""
        watcher = self.fs.watch("/", recursive=True)  # type: ignore[attr-defined]
        token = anyio.lowlevel.current_token()
        threading.Thread(target=self._publish, args=(watcher, token), name="wsfs-mcp-listen", daemon=True).start()
        try:
            yield {}
        finally:
            watcher.close()

    def _publish(self, watcher: ChangeWatcher, token: Any) -> None:
        for event in watcher:
            for path in {event.path, event.from_path} - {None}:
                if path is not None and self.allows(path):
                    try:
                        anyio.from_thread.run(self.bus.publish, ResourceUpdated(uri_of(path)), token=token)
                    except Exception as exc:  # the server stopped: its lifespan closes the watcher next
                        logger.debug("a change was not published: %s", exc)

    def _pump(self) -> None:
        with self._lock:
            watcher = self._watcher
        if watcher is None:
            return
        for event in watcher:
            changed = {uri_of(p) for p in (event.path, event.from_path) if p is not None}
            with self._lock:
                targets = [(key, token, s, uris & changed) for key, (uris, token, s) in self._subscribers.items()]
            for key, token, session, uris in targets:
                for uri in sorted(uris):
                    self._notify(key, token, session, uri)

    def _notify(self, key: Any, token: Any, session: Any, uri: str) -> None:
        try:
            anyio.from_thread.run(session.send_resource_updated, uri, token=token)
        except Exception as exc:  # the connection ended: forget it
            logger.debug("dropping the subscriptions of a closed connection: %s", exc)
            with self._lock, contextlib.suppress(KeyError):
                del self._subscribers[key]


def _connection(session: Any) -> Any:
    """What a subscription belongs to: the client's connection. The SDK hands each request a new session proxy
    (``ServerSession``) over one connection, which it keeps private; its notifications without a request go
    out on the connection's own channel, so any proxy of it can send them."""
    return getattr(session, "_connection", session)
