"""Who is asking and what they may do: bearer tokens, their scopes, expiry and rate limits.

Every route declares the scope it needs by the type of its caller parameter — ``Reader``, ``Writer`` or
``Admin`` — so what a ``read`` token can reach is visible in each signature (and a test walks the routes).
The agent a token acts for is checked where the session is looked up, with a 404 that never tells another
agent's session from a missing one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import Depends, Header, Request

from workspacefs.server._errors import RateLimitedError, ScopeDeniedError, TokenExpiredError, TokenRequiredError
from workspacefs.server._limits import RateLimiter
from workspacefs.server.tokens import Scope, TokenInfo, TokenStore

__all__ = ["Admin", "Caller", "Reader", "Writer", "authenticate", "caller"]

_EXPIRED_CHALLENGE = 'Bearer error="invalid_token", error_description="The token expired"'


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: a token's record, or ``None`` when the service runs without auth (everything allowed)."""

    token: TokenInfo | None

    def allows(self, agent_id: str) -> bool:
        """True if the caller may act for ``agent_id``."""
        return self.token is None or self.token.allows(agent_id)

    @property
    def scope(self) -> Scope:
        """What the caller may do (``admin`` without auth)."""
        return Scope.ADMIN if self.token is None else self.token.scope

    @property
    def agent_id(self) -> str | None:
        """The one agent the caller acts for, or ``None`` for every agent."""
        return None if self.token is None else self.token.agent_id


T = TypeVar("T")


class Authenticating(Protocol):
    """What authentication needs of the running service (``_service.Service``, which builds on this module)."""

    auth: bool
    tokens: TokenStore
    rate_limits: RateLimiter

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """Run blocking (database) work in the service's thread pool."""
        ...


def _service(request: Request) -> Authenticating:
    found: Authenticating = request.app.state.workspacefs
    return found


def authenticate(running: Authenticating, info: TokenInfo | None) -> Caller:
    """The caller a verified token makes, after its expiry and its rate limit are checked."""
    if info is None:
        raise TokenRequiredError("Unknown or revoked token")
    if info.expired(datetime.now(UTC)):
        assert info.expires_at is not None
        raise TokenExpiredError(
            f"This token expired at {info.expires_at:%Y-%m-%d %H:%M:%S} UTC; create a new one "
            "(workspacefs token create … --expires-in …)",
            headers={"WWW-Authenticate": _EXPIRED_CHALLENGE},
        )
    wait = running.rate_limits.take(info.token_id, info.rate_limit)
    if wait is not None:
        limit = running.rate_limits.default_per_minute if info.rate_limit is None else info.rate_limit
        raise RateLimitedError(f"This token may send {limit} requests per minute; retry in {wait} s", retry_after=wait)
    return Caller(info)


async def caller(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Caller:
    """Authenticate the bearer token (a FastAPI dependency, run once per request): 401 without a valid one
    (unless auth is off), 429 over its rate."""
    running = _service(request)
    if not running.auth:
        return Caller(None)
    if not authorization or not authorization.lower().startswith("bearer "):
        raise TokenRequiredError("Send 'Authorization: Bearer <token>' (workspacefs token create)")
    secret = authorization[7:].strip()
    info = await running.run(running.tokens.verify, secret) if secret.isascii() else None
    return authenticate(running, info)


def _needs(scope: Scope) -> Callable[[Caller], Awaitable[Caller]]:
    """A dependency that admits callers whose scope covers ``scope`` (403 otherwise)."""

    async def check(who: Annotated[Caller, Depends(caller)]) -> Caller:
        if not who.scope.covers(scope):
            raise ScopeDeniedError(f"This token's scope is {who.scope.value!r}; this request needs {scope.value!r}")
        return who

    check.__name__ = f"needs_{scope.value}"
    return check


Reader = Annotated[Caller, Depends(_needs(Scope.READ))]
"""A caller that may read (every valid token)."""
Writer = Annotated[Caller, Depends(_needs(Scope.WRITE))]
"""A caller that may change files, snapshots and sessions of its agents."""
Admin = Annotated[Caller, Depends(_needs(Scope.ADMIN))]
"""A caller that may manage tokens."""
