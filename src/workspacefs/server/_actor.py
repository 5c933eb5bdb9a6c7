"""Who a request acts as: the :class:`~workspacefs.history.Actor` every change it makes is journaled under.

The actor comes from what the request proves and declares, never from a guess:

- ``name``: the bearer token's agent id (a token for every agent: its label, else ``token <id>``); a browser
  signed in by its cookie is ``user via browser``. A client may refine the name with ``X-Actor: planner``,
  which is *appended* (``agent-7/planner``), so a header can never make one token's changes read as another
  agent's; the browser's name is not refinable. Without auth (loopback only) ``X-Actor`` is the name.
- ``session``: the session id in the URL; ``tool_call``: the ``X-Tool-Call-Id`` header; ``via``: ``rest``
  or ``browser``.

The headers are read once per request by :class:`ActorHeaders` (ASGI middleware) into a context variable,
which the thread-pool calls of the request inherit; :func:`acting` wraps the session's filesystem so that
every call on it (and on a writer it opens, whose bytes may arrive in later calls) runs inside
:func:`~workspacefs.history.acting_as`. ``Service.filesystem`` applies it: no route has code of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from workspacefs.history import Actor, acting_as
from workspacefs.server._errors import ApiError, ASGIApp, Receive, Scope, Send

__all__ = ["ACTOR_HEADER", "BROWSER_USER", "TOOL_CALL_HEADER", "ActorHeaders", "acting", "request_actor"]

ACTOR_HEADER = "X-Actor"
TOOL_CALL_HEADER = "X-Tool-Call-Id"
BROWSER_USER = "user via browser"
_MAX_HEADER = 200
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Declared:
    """What the request's headers declare (raw, validated when the actor is made)."""

    actor: str | None = None
    tool_call: str | None = None


_NOTHING = _Declared()
_DECLARED: ContextVar[_Declared] = ContextVar("workspacefs_request_actor", default=_NOTHING)


class ActorHeaders:
    """ASGI middleware: keep ``X-Actor`` and ``X-Tool-Call-Id`` of an HTTP request where its handlers see them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        actor = call = None
        for name, value in scope.get("headers", ()):
            if name == b"x-actor":
                actor = value.decode("latin-1")
            elif name == b"x-tool-call-id":
                call = value.decode("latin-1")
        if actor is None and call is None:
            await self.app(scope, receive, send)
            return
        token = _DECLARED.set(_Declared(actor, call))
        try:
            await self.app(scope, receive, send)
        finally:
            _DECLARED.reset(token)


def _header(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if len(value) > _MAX_HEADER or not value.isprintable():
        raise ApiError(400, "invalid_header", f"{name} must be printable and at most {_MAX_HEADER} characters")
    return value


def request_actor(token: Any, *, cookie: bool, session_id: str) -> Actor:
    """The actor of the current request: ``token`` is the caller's ``TokenInfo`` (``None``: auth is off)."""
    declared = _DECLARED.get()
    refinement = _header(ACTOR_HEADER, declared.actor)
    call = _header(TOOL_CALL_HEADER, declared.tool_call)
    if cookie:
        return Actor(BROWSER_USER, session_id, call, "browser")
    if token is None:
        return Actor(refinement, session_id, call, "rest")
    base = token.agent_id or token.label or f"token {token.token_id}"
    name = f"{base}/{refinement}" if refinement else base
    return Actor(name, session_id, call, "rest")


_WRITER_METHODS = frozenset({"write", "write_all", "close", "abort", "commit", "__exit__"})


class _ActingWriter:
    """A writer whose every call (bytes arriving, the close that commits) runs as the request's actor."""

    def __init__(self, inner: Any, actor: Actor) -> None:
        self._inner = inner
        self._actor = actor

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        return _as(value, self._actor) if callable(value) and name in _WRITER_METHODS else value

    def __enter__(self) -> _ActingWriter:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        with acting_as(self._actor):
            return self._inner.__exit__(*exc)


def _as(method: Callable[..., Any], actor: Actor) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        with acting_as(actor):
            result = method(*args, **kwargs)
        if hasattr(result, "write_all") and hasattr(result, "close"):  # a ByteWriter: its commit comes later
            return _ActingWriter(result, actor)
        return result

    return call


class _Acting:
    """A filesystem whose every method runs as ``actor`` (attributes that are not methods pass through)."""

    def __init__(self, inner: Any, actor: Actor) -> None:
        self._inner = inner
        self._actor = actor

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        return _as(value, self._actor) if callable(value) and not name.startswith("__") else value


def acting(fs: T, actor: Actor) -> T:
    """``fs`` seen as acting for ``actor``: the same protocol, every call inside ``acting_as(actor)``."""
    return cast(T, _Acting(fs, actor))
