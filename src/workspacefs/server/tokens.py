"""Bearer tokens of the workspace service, kept in the service's own table as SHA-256 hashes.

A token is 32 random bytes, shown once when created; only its hash is stored, so a leaked database
does not leak credentials. Random secrets of that size need no slow password hash: SHA-256 cannot be
inverted and there is nothing to guess. A token is scoped to one agent, or to all (``agent_id=None``).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa

from workspacefs.backends.sql import SqlStore
from workspacefs.server._tables import migrate_service, tokens

__all__ = ["TOKEN_PREFIX", "TokenInfo", "TokenStore", "hash_token"]

TOKEN_PREFIX = "wsfs_"  # noqa: S105 - a prefix, not a secret
"""Every secret starts with this, so a token pasted in the wrong place is recognisable (and greppable)."""
_CACHE_SECONDS = 5.0
"""How long a verified token is trusted without asking the database again (revocation takes this long)."""


def hash_token(secret: str) -> str:
    """The stored form of a secret."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token's record (never its secret): ``agent_id`` ``None`` means it may act for every agent."""

    token_id: str
    agent_id: str | None
    label: str | None
    created_at: datetime

    def allows(self, agent_id: str) -> bool:
        """True if this token may see ``agent_id``'s sessions."""
        return self.agent_id is None or self.agent_id == agent_id


class TokenStore:
    """Create, list, revoke and verify tokens."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        migrate_service(store)
        self._cache: dict[str, tuple[float, TokenInfo | None]] = {}
        self._lock = threading.Lock()

    def create(self, *, agent_id: str | None, label: str | None = None) -> tuple[str, TokenInfo]:
        """A new token: its secret (show it once; it is not stored) and its record."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        info = TokenInfo(str(uuid.uuid4()), agent_id, label, datetime.now(UTC))
        with self._store.write() as connection:
            connection.execute(
                sa.insert(tokens).values(
                    id=info.token_id,
                    token_hash=hash_token(secret),
                    agent_id=agent_id,
                    label=label,
                    created_at=info.created_at,
                )
            )
        return secret, info

    def list(self) -> list[TokenInfo]:
        """Every token, oldest first."""
        with self._store.read() as connection:
            rows = connection.execute(sa.select(tokens).order_by(tokens.c.created_at)).all()
        return [TokenInfo(r.id, r.agent_id, r.label, r.created_at) for r in rows]

    def revoke(self, token_id: str) -> bool:
        """Delete a token by id; ``False`` if there was none."""
        with self._store.write() as connection:
            gone = connection.execute(sa.delete(tokens).where(tokens.c.id == token_id).returning(tokens.c.id)).first()
        with self._lock:
            self._cache.clear()
        return gone is not None

    def verify(self, secret: str) -> TokenInfo | None:
        """The record of a presented secret, or ``None``; answers are cached for a few seconds."""
        digest = hash_token(secret)
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        with self._store.read_once() as connection:
            row = connection.execute(sa.select(tokens).where(tokens.c.token_hash == digest)).first()
        info = None if row is None else TokenInfo(row.id, row.agent_id, row.label, row.created_at)
        with self._lock:
            if len(self._cache) > 10_000:  # a flood of wrong tokens must not grow memory without bound
                self._cache.clear()
            self._cache[digest] = (now + _CACHE_SECONDS, info)
        return info
