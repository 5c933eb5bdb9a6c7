"""Bearer tokens of the workspace service, kept in the service's own table as SHA-256 hashes.

A token is 32 random bytes, shown once when created; only its hash is stored, so a leaked database
does not leak credentials. Random secrets of that size need no slow password hash: SHA-256 cannot be
inverted and there is nothing to guess. A token acts for one agent, or for all (``agent_id=None``), with a
scope (``read``, ``write`` or ``admin``), an optional expiry and an optional rate limit of its own.

Verifying a token is one lookup by the unique index on its hash, with no cache in front of it: a token
revoked by any process (the CLI, another server) is refused by every process from the next request on.

A browser signs in with a one-time code (:meth:`TokenStore.mint_signin`, printed in a link by ``workspacefs
serve`` and ``workspacefs open``) or with a token; either becomes a short-lived *browser* token that the
service keeps in an ``HttpOnly`` cookie (``_signin.py``). Codes live in the database like tokens, so any
process of the service redeems one, once.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from workspacefs.backends.sql import SqlStore
from workspacefs.policy import Policy
from workspacefs.server._tables import migrate_service, signin_codes, tokens

__all__ = [
    "BROWSER_SIGNIN_TTL",
    "SIGNIN_CODE_TTL",
    "SIGNIN_PREFIX",
    "TOKEN_PREFIX",
    "Scope",
    "TokenInfo",
    "TokenStore",
    "hash_token",
    "parsed_policy",
]

TOKEN_PREFIX = "wsfs_"  # noqa: S105 - a prefix, not a secret
"""Every secret starts with this, so a token pasted in the wrong place is recognisable (and greppable)."""
SIGNIN_PREFIX = "wsfs_signin_"
"""Sign-in codes start with this, so the browser's sign-in dialog tells a pasted code from a token."""
SIGNIN_CODE_TTL = timedelta(minutes=10)
"""How long a sign-in code (a link printed at a terminal) can be redeemed: long enough to click it."""
BROWSER_SIGNIN_TTL = timedelta(hours=12)
"""How long a browser stays signed in (a working day), unless its token expires or is revoked sooner."""
_BY_HASH = sa.select(tokens).where(tokens.c.token_hash == sa.bindparam("b_hash"))


class Scope(StrEnum):
    """What a token may do, each scope including the one before it."""

    READ = "read"
    """Read files, listings, sessions, snapshots and diffs; nothing that changes anything."""
    WRITE = "write"
    """Also create, change and delete files, snapshots (restore too) and sessions of its agents."""
    ADMIN = "admin"
    """Also manage tokens; always for every agent."""

    def covers(self, needed: Scope) -> bool:
        """True if this scope includes ``needed``."""
        order = (Scope.READ, Scope.WRITE, Scope.ADMIN)
        return order.index(self) >= order.index(needed)


def hash_token(secret: str) -> str:
    """The stored form of a secret."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def parsed_policy(text: str) -> dict[str, Any]:
    """A token's stored policy (``Policy.to_dict()`` form, as JSON) as data."""
    found: dict[str, Any] = json.loads(text)
    return found


def _utc(stamp: datetime | None) -> datetime | None:
    return stamp if stamp is None or stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token's record (never its secret). New rights (a path policy, …) become new fields here and columns
    of ``wsfs_tokens``, read in :meth:`TokenStore._info`."""

    token_id: str
    agent_id: str | None
    """The agent it acts for; ``None``: every agent."""
    label: str | None
    created_at: datetime
    scope: Scope = Scope.WRITE
    expires_at: datetime | None = None
    """When it stops working; ``None``: never."""
    rate_limit: int | None = None
    """Requests per minute; ``None``: the service's default; ``0``: unlimited."""
    policy: Mapping[str, Any] | None = None
    """The token's own path policy (``Policy.to_dict()`` form), applied after its session's; ``None``: none."""
    browser: bool = False
    """A browser's sign-in (kept in a cookie, expires within :data:`BROWSER_SIGNIN_TTL`), not an API token."""
    parent_id: str | None = None
    """The token a browser signed in with (revoking that token revokes this one too); ``None``: a code's."""

    def allows(self, agent_id: str) -> bool:
        """True if this token may see ``agent_id``'s sessions."""
        return self.agent_id is None or self.agent_id == agent_id

    def expired(self, now: datetime | None = None) -> bool:
        """True once ``expires_at`` has passed."""
        return self.expires_at is not None and self.expires_at <= (now or datetime.now(UTC))


class TokenStore:
    """Create, list, revoke and verify tokens."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        migrate_service(store)

    def create(
        self,
        *,
        agent_id: str | None,
        label: str | None = None,
        scope: Scope | str | None = None,
        expires_in: timedelta | None = None,
        expires_at: datetime | None = None,
        rate_limit: int | None = None,
        policy: Mapping[str, Any] | None = None,
    ) -> tuple[str, TokenInfo]:
        """A new token: its secret (show it once; it is not stored) and its record.

        ``scope`` defaults to ``write`` for one agent and ``admin`` for every agent (what such tokens could do
        before scopes existed); ``admin`` needs ``agent_id=None``, since it can mint tokens for any agent.
        ``policy`` (``Policy.from_dict`` form, checked here) restricts every request of the token further.
        """
        policy = Policy.from_dict(policy).to_dict() if policy is not None else None
        chosen = Scope(scope) if scope is not None else (Scope.WRITE if agent_id is not None else Scope.ADMIN)
        if chosen is Scope.ADMIN and agent_id is not None:
            raise ValueError("An admin token manages tokens of every agent: it cannot be limited to one agent")
        if rate_limit is not None and rate_limit < 0:
            raise ValueError("rate_limit is a number of requests per minute (0: unlimited)")
        if expires_in is not None:
            if expires_at is not None:
                raise ValueError("Give expires_in or expires_at, not both")
            if expires_in <= timedelta(0):
                raise ValueError("expires_in must be positive")
            expires_at = datetime.now(UTC) + expires_in
        info = TokenInfo(
            str(uuid.uuid4()), agent_id, label, datetime.now(UTC), chosen, _utc(expires_at), rate_limit, policy
        )
        with self._store.write() as connection:
            return self._insert(connection, info), info

    @staticmethod
    def _insert(connection: Connection, info: TokenInfo) -> str:
        """Store ``info`` under a new secret, in the caller's transaction; the secret."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        connection.execute(
            sa.insert(tokens).values(
                id=info.token_id,
                token_hash=hash_token(secret),
                agent_id=info.agent_id,
                label=info.label,
                created_at=info.created_at,
                scope=info.scope.value,
                expires_at=info.expires_at,
                rate_limit=info.rate_limit,
                policy=json.dumps(info.policy) if info.policy is not None else None,
                browser=info.browser,
                parent_id=info.parent_id,
            )
        )
        return secret

    @staticmethod
    def _info(row: Any) -> TokenInfo:
        return TokenInfo(
            row.id,
            row.agent_id,
            row.label,
            _utc(row.created_at) or row.created_at,
            Scope(row.scope),
            _utc(row.expires_at),
            row.rate_limit,
            parsed_policy(row.policy) if row.policy is not None else None,
            bool(row.browser),
            row.parent_id,
        )

    def list(self) -> list[TokenInfo]:
        """Every token, oldest first."""
        with self._store.read() as connection:
            rows = connection.execute(sa.select(tokens).order_by(tokens.c.created_at, tokens.c.id)).all()
        return [self._info(r) for r in rows]

    def get(self, token_id: str) -> TokenInfo | None:
        """One token's record by id, or ``None``."""
        with self._store.read_once() as connection:
            row = connection.execute(sa.select(tokens).where(tokens.c.id == token_id)).first()
        return None if row is None else self._info(row)

    def revoke(self, token_id: str) -> bool:
        """Delete a token by id, and the browser sign-ins made with it; ``False`` if there was none. Every
        process refuses them from then on."""
        with self._store.write() as connection:
            gone = connection.execute(
                sa.delete(tokens)
                .where(sa.or_(tokens.c.id == token_id, tokens.c.parent_id == token_id))
                .returning(tokens.c.id)
            ).all()
        return any(row.id == token_id for row in gone)

    # --- browser sign-in ------------------------------------------------------------------------------------

    def mint_signin(
        self, *, agent_id: str | None = None, scope: Scope | str = Scope.ADMIN, expires_in: timedelta = SIGNIN_CODE_TTL
    ) -> str:
        """A one-time sign-in code for a browser (what ``workspacefs serve`` and ``workspacefs open`` print in a
        link): redeemed once, within ``expires_in``, for a browser sign-in of ``scope`` (admin by default)."""
        chosen = Scope(scope)
        if chosen is Scope.ADMIN and agent_id is not None:
            raise ValueError("An admin sign-in acts for every agent: it cannot be limited to one agent")
        if expires_in <= timedelta(0):
            raise ValueError("expires_in must be positive")
        code = SIGNIN_PREFIX + secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        with self._store.write() as connection:
            self._forget_expired(connection, now)
            connection.execute(
                sa.insert(signin_codes).values(
                    code_hash=hash_token(code),
                    agent_id=agent_id,
                    scope=chosen.value,
                    created_at=now,
                    expires_at=now + expires_in,
                )
            )
        return code

    def redeem_signin(self, code: str) -> tuple[str, TokenInfo] | None:
        """Exchange a sign-in code for a browser token (its secret and record), or ``None`` if the code is
        unknown, used or expired. The code's row is deleted in the same statement that reads it, so two
        processes racing for one code cannot both win."""
        now = datetime.now(UTC)
        with self._store.write() as connection:
            row = connection.execute(
                sa.delete(signin_codes)
                .where(signin_codes.c.code_hash == hash_token(code))
                .returning(signin_codes.c.agent_id, signin_codes.c.scope, signin_codes.c.expires_at)
            ).first()
            if row is None or (_utc(row.expires_at) or now) <= now:
                return None
            info = self._browser_info(
                agent_id=row.agent_id, scope=Scope(row.scope), expires_at=now + BROWSER_SIGNIN_TTL
            )
            return self._insert(connection, info), info

    def sign_in_browser(self, token: TokenInfo) -> tuple[str, TokenInfo]:
        """A browser token with ``token``'s rights (agent, scope, rate, policy), expiring within
        :data:`BROWSER_SIGNIN_TTL` and no later than ``token``; revoking ``token`` revokes it too."""
        now = datetime.now(UTC)
        until = now + BROWSER_SIGNIN_TTL
        if token.expires_at is not None:
            until = min(until, token.expires_at)
        parent = token.parent_id if token.browser else token.token_id
        info = self._browser_info(
            agent_id=token.agent_id,
            scope=token.scope,
            expires_at=until,
            rate_limit=token.rate_limit,
            policy=token.policy,
            parent_id=parent,
        )
        with self._store.write() as connection:
            self._forget_expired(connection, now)
            return self._insert(connection, info), info

    @staticmethod
    def _browser_info(
        *,
        agent_id: str | None,
        scope: Scope,
        expires_at: datetime,
        rate_limit: int | None = None,
        policy: Mapping[str, Any] | None = None,
        parent_id: str | None = None,
    ) -> TokenInfo:
        now = datetime.now(UTC)
        return TokenInfo(
            token_id=str(uuid.uuid4()),
            agent_id=agent_id,
            label=f"browser sign-in {now:%Y-%m-%d %H:%M} UTC",
            created_at=now,
            scope=scope,
            expires_at=expires_at,
            rate_limit=rate_limit,
            policy=policy,
            browser=True,
            parent_id=parent_id,
        )

    @staticmethod
    def _forget_expired(connection: Connection, now: datetime) -> None:
        """Delete expired sign-in codes and browser tokens (they can never work again), so neither piles up."""
        connection.execute(sa.delete(signin_codes).where(signin_codes.c.expires_at <= now))
        connection.execute(sa.delete(tokens).where(tokens.c.browser.is_(True), tokens.c.expires_at <= now))

    def verify(self, secret: str) -> TokenInfo | None:
        """The record of a presented secret (expired ones too: see :meth:`TokenInfo.expired`), or ``None``."""
        with self._store.read_once() as connection:
            row = connection.execute(_BY_HASH, {"b_hash": hash_token(secret)}).first()
        return None if row is None else self._info(row)
