"""Who is asking and what they may do: bearer tokens (or a browser's sign-in cookie), their scopes, expiry and
rate limits.

Every route declares the scope it needs by the type of its caller parameter — ``Reader``, ``Writer`` or
``Admin`` — so what a ``read`` token can reach is visible in each signature (and a test walks the routes).
The agent a token acts for is checked where the session is looked up, with a 404 that never tells another
agent's session from a missing one.

A browser signs in once (``_signin.py``) and then sends a cookie instead of a bearer token. The cookie is
``SameSite=Strict``, and a cookie-signed-in request that changes anything must also carry ``X-Workspacefs: 1``,
a header a form or link on another site cannot add: together they keep cross-site request forgery out. Without
auth (``serve --no-auth`` on loopback) a browser needs no credentials at all, so there the header is required of
every change a browser makes (one that names its ``Origin`` or ``Sec-Fetch-Site``): a page of any other site the
user visits could otherwise write into, snapshot or restore every session with a plain form. And a browser must
reach such a service by a loopback name or address: a site that points its own DNS name at 127.0.0.1 (DNS
rebinding) would otherwise be same-origin with it and read every session.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import Depends, Request

from workspacefs.server._access import AccessReader, SessionAccess
from workspacefs.server._errors import (
    BrowserHeaderRequiredError,
    ForeignHostError,
    RateLimitedError,
    ScopeDeniedError,
    TokenExpiredError,
    TokenRequiredError,
)
from workspacefs.server._limits import RateLimiter
from workspacefs.server._query import refuse_unknown_query
from workspacefs.server.tokens import Scope, TokenInfo, TokenStore

__all__ = [
    "BROWSER_HEADER",
    "Admin",
    "Caller",
    "Credentials",
    "ReadAccess",
    "Reader",
    "WriteAccess",
    "Writer",
    "authenticate",
    "caller",
    "require_browser_header",
    "signin_cookie",
]

_EXPIRED_CHALLENGE = 'Bearer error="invalid_token", error_description="The token expired"'
BROWSER_HEADER = "X-Workspacefs"
"""The header (value ``1``) the browser UI sends with every request; required with the cookie to change anything."""
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: a token's record, or ``None`` when the service runs without auth (everything allowed)."""

    token: TokenInfo | None
    cookie: bool = False
    """True if the request was signed in by the browser's cookie rather than a bearer token."""
    session: SessionAccess | None = None
    """The session the URL names, read with the token (one statement, ``_access.py``); ``None``: not read."""

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
    access: AccessReader
    rate_limits: RateLimiter

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """Run blocking (database) work in the service's thread pool."""
        ...


def _service(request: Request) -> Authenticating:
    found: Authenticating = request.app.state.workspacefs
    return found


def signin_cookie(request: Request) -> str:
    """The name of the sign-in cookie: one per port, since browsers share cookies between the ports of a host
    and two services on one machine must not sign each other's browsers out."""
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    return f"wsfs_signin_{port}"


def require_browser_header(request: Request) -> None:
    """Refuse (403) a request without ``X-Workspacefs: 1``: what a page of another site cannot send."""
    if request.headers.get(BROWSER_HEADER) != "1":
        raise BrowserHeaderRequiredError(
            f"A request signed in by the browser's cookie must send '{BROWSER_HEADER}: 1' to change anything "
            "(the web file browser does; API clients send 'Authorization: Bearer <token>' instead)"
        )


def _from_a_browser(request: Request) -> bool:
    """True if a browser made the request: browsers name the ``Origin`` of every change and, today, the
    ``Sec-Fetch-Site`` of every request; API clients send neither."""
    headers = request.headers
    return "origin" in headers or "sec-fetch-site" in headers


def _names_this_machine(host: str) -> bool:
    """True if a ``Host`` header names the loopback interface (``localhost``, ``127.0.0.1:8765``, ``[::1]``):
    a name no other site's DNS can point at this machine."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True  # browsers resolve these to loopback themselves, never through DNS
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _guard_without_auth(request: Request) -> None:
    """Without auth, what keeps other sites out of a browser's requests: its ``Host`` must name this machine (403
    otherwise: a rebound DNS name would make another site's page same-origin), and a change needs
    ``X-Workspacefs: 1`` (403 otherwise: a form on another site)."""
    if not _from_a_browser(request):
        return
    host = request.headers.get("host", "")
    if not _names_this_machine(host):
        raise ForeignHostError(
            f"This service runs without tokens, so a browser may reach it only as localhost or a loopback address, "
            f"not as {host[:100]!r} (another site's name pointed at this machine could read every session)"
        )
    if request.method not in _SAFE_METHODS and request.headers.get(BROWSER_HEADER) != "1":
        raise BrowserHeaderRequiredError(
            f"This service runs without tokens, so a browser must send '{BROWSER_HEADER}: 1' to change anything "
            "(the web file browser does; a page of another site cannot)"
        )


def authenticate(
    running: Authenticating, info: TokenInfo | None, *, cookie: bool = False, session: SessionAccess | None = None
) -> Caller:
    """The caller a verified token makes, after its expiry and its rate limit are checked (``session``: the
    URL's session, read with the token)."""
    if info is None:
        if cookie:
            raise TokenRequiredError("This browser's sign-in was revoked; sign in again (workspacefs open)")
        raise TokenRequiredError("Unknown or revoked token")
    if info.expired(datetime.now(UTC)):
        assert info.expires_at is not None
        if cookie:
            raise TokenExpiredError("This browser's sign-in expired; sign in again (workspacefs open)")
        raise TokenExpiredError(
            f"This token expired at {info.expires_at:%Y-%m-%d %H:%M:%S} UTC; create a new one "
            "(workspacefs token create … --expires-in …)",
            headers={"WWW-Authenticate": _EXPIRED_CHALLENGE},
        )
    wait = running.rate_limits.take(info.token_id, info.rate_limit)
    if wait is not None:
        limit = running.rate_limits.default_per_minute if info.rate_limit is None else info.rate_limit
        raise RateLimitedError(f"This token may send {limit} requests per minute; retry in {wait} s", retry_after=wait)
    return Caller(info, cookie, session)


def _url_session(request: Request) -> tuple[str | None, str | None]:
    """The agent and session the URL names (``None`` where it names none): read with the token."""
    params = request.path_params
    agent_id, session_id = params.get("agent_id"), params.get("session_id")
    return (agent_id if isinstance(agent_id, str) else None), (session_id if isinstance(session_id, str) else None)


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a request presented, checked as far as no database is needed (a missing token is 401, a cookie's
    change without the browser's header 403): :meth:`verify` turns it into a :class:`Caller`.

    The routes of a request's hot path (reading and writing files) verify in the same worker call as their
    own database work, so such a request crosses to the thread pool once; every other route verifies in its
    dependency (``Reader``, ``Writer``, ``Admin``)."""

    running: Authenticating
    secret: str | None
    """The bearer token or cookie; ``None`` when the service runs without auth."""
    cookie: bool = False
    url_session: tuple[str | None, str | None] = (None, None)
    """The agent and session the URL names, read with the token."""
    needed: Scope = Scope.READ

    def verify(self) -> Caller:
        """The caller (blocking: run it in the service's thread pool): 401 for an unknown, revoked or expired
        token, 429 over its rate, 403 if its scope does not cover :attr:`needed`."""
        if self.secret is None:
            return Caller(None)
        if not self.secret.isascii():
            return authenticate(self.running, None, cookie=self.cookie)
        found = self.running.access.lookup(self.secret, *self.url_session)
        info = found.token
        if self.cookie and info is not None and not info.browser:
            info = None  # an API token never works as a cookie
        who = authenticate(self.running, info, cookie=self.cookie, session=found.session)
        if not who.scope.covers(self.needed):
            raise ScopeDeniedError(
                f"This token's scope is {who.scope.value!r}; this request needs {self.needed.value!r}"
            )
        return who


def presented(request: Request, needed: Scope = Scope.READ) -> Credentials:
    """The bearer token, or else the browser's sign-in cookie, not yet verified (no database work), for a route
    that needs ``needed``: 400 for a query parameter the route does not declare (``_query.py``), 401 without a
    token or cookie (unless auth is off), 403 for a cookie's change without the browser's header."""
    refuse_unknown_query(request)
    running = _service(request)
    if not running.auth:
        _guard_without_auth(request)
        return Credentials(running, None)
    authorization = request.headers.get("authorization")
    if authorization is None and (secret := request.cookies.get(signin_cookie(request))) is not None:
        if request.method not in _SAFE_METHODS:
            require_browser_header(request)
        return Credentials(running, secret, True, _url_session(request), needed)
    if not authorization or not authorization.lower().startswith("bearer "):
        raise TokenRequiredError(
            "Send 'Authorization: Bearer <token>' (workspacefs token create), or sign the browser in (workspacefs open)"
        )
    return Credentials(running, authorization[7:].strip(), False, _url_session(request), needed)


async def caller(request: Request, needed: Scope = Scope.READ) -> Caller:
    """Authenticate the bearer token, or else the browser's sign-in cookie, in the service's thread pool: 401
    without a valid one (unless auth is off), 403 for a cookie's change without the browser's header or a scope
    that does not cover ``needed``, 429 over its rate."""
    presenting = presented(request, needed)
    if presenting.secret is None:
        return Caller(None)
    return await presenting.running.run(presenting.verify)


# Each route takes its credentials through exactly one FastAPI dependency, which also checks the query string
# and reads the service from the application: solving a dependency costs each request about 8 µs, and the
# three (query, credentials, service) were a fifth of a small file's read.


def _needs(scope: Scope) -> Callable[[Request], Awaitable[Caller]]:
    """A dependency that admits callers whose scope covers ``scope`` (403 otherwise)."""

    async def check(request: Request) -> Caller:
        return await caller(request, scope)

    check.__name__ = f"needs_{scope.value}"
    return check


def _will_need(scope: Scope) -> Callable[[Request], Awaitable[Credentials]]:
    """A dependency for the hot routes: credentials that :meth:`Credentials.verify` admits only with ``scope``."""

    async def check(request: Request) -> Credentials:
        return presented(request, scope)

    check.__name__ = f"needs_{scope.value}"
    return check


Reader = Annotated[Caller, Depends(_needs(Scope.READ))]
"""A caller that may read (every valid token)."""
Writer = Annotated[Caller, Depends(_needs(Scope.WRITE))]
"""A caller that may change files, snapshots and sessions of its agents."""
Admin = Annotated[Caller, Depends(_needs(Scope.ADMIN))]
"""A caller that may manage tokens."""
ReadAccess = Annotated[Credentials, Depends(_will_need(Scope.READ))]
"""Credentials to :meth:`~Credentials.verify` (as a reader) in the route's own worker call."""
WriteAccess = Annotated[Credentials, Depends(_will_need(Scope.WRITE))]
"""Credentials to :meth:`~Credentials.verify` (as a writer) in the route's own worker call."""
