"""Who may touch which session, read in one statement per request: token → session catalogue → session policy.

Every file request needs the caller's token row (never cached: a revocation is refused from the next request
on, in every process), the session the URL names (never cached: a deleted session is gone at once) and that
session's policy (never cached: an admin's change applies to the next request). They used to be three
SQLAlchemy statements, each with its own connection checkout (and, on SQLite, ``BEGIN``/``ROLLBACK`` and an
isolation reset around it; on PostgreSQL a pre-ping round trip): a dozen statements before the file was read.
Here they are one prebuilt statement on the storage's driver-level connections (``SqlStore.driver``, the
fast path the file reads use), whose rows this module types itself (SQLite's text timestamps, its 0/1
booleans) — the same values :class:`~workspacefs.server.tokens.TokenStore` and
:class:`~workspacefs.server.catalog.SessionCatalog` return.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from workspacefs.backends.sql import SqlStore
from workspacefs.server.catalog import DEFAULT_AGENT, CatalogEntry
from workspacefs.server.tokens import Scope, TokenInfo, hash_token, parsed_policy

__all__ = ["Access", "AccessReader", "SessionAccess"]

_BY_TOKEN = (
    "SELECT t.id, t.agent_id, t.label, t.created_at, t.scope, t.expires_at, t.rate_limit, t.policy, t.browser,"  # noqa: S105
    " t.parent_id FROM wsfs_tokens t WHERE t.token_hash = ?"
)
"""The token alone (the URL names no session): one lookup by the unique index on the hash."""

_WITH_SESSION = (
    "SELECT t.id, t.agent_id, t.label, t.created_at, t.scope, t.expires_at, t.rate_limit, t.policy, t.browser,"
    " t.parent_id, x.id, x.public_id, x.created_at, x.updated_at, p.policy"
    " FROM (SELECT 1 AS one) q"
    " LEFT JOIN wsfs_tokens t ON t.token_hash = ?"
    " LEFT JOIN (SELECT s.id, o.public_id, s.created_at, s.updated_at FROM wsfs_session_owners o"
    " JOIN wsfs_sessions s ON s.id = o.session_id WHERE o.agent_id = ? AND o.public_id = ?) x ON 1 = 1"
    " LEFT JOIN wsfs_session_policies p ON p.session_id = x.id"
)
"""One row: the token's columns (NULL for an unknown token, or none: a NULL hash), the session's (NULL when the
agent has none by that id: the unique index on ``(agent_id, public_id)`` finds at most one) and its policy
(NULL: the service's applies)."""

_WITH_DEFAULT_SESSION = (
    "SELECT t.id, t.agent_id, t.label, t.created_at, t.scope, t.expires_at, t.rate_limit, t.policy, t.browser,"
    " t.parent_id, x.id, x.public_id, x.created_at, x.updated_at, p.policy"
    " FROM (SELECT 1 AS one) q"
    " LEFT JOIN wsfs_tokens t ON t.token_hash = ?"
    " LEFT JOIN (SELECT * FROM ("
    "SELECT s.id, o.public_id, s.created_at, s.updated_at, 0 AS pick FROM wsfs_session_owners o"
    " JOIN wsfs_sessions s ON s.id = o.session_id WHERE o.agent_id = ? AND o.public_id = ?"
    " UNION ALL"
    " SELECT s.id, s.id AS public_id, s.created_at, s.updated_at, 1 AS pick FROM wsfs_sessions s WHERE s.id = ?"
    " AND NOT EXISTS (SELECT 1 FROM wsfs_session_owners o WHERE o.session_id = s.id)"
    ") f ORDER BY pick LIMIT 1) x ON 1 = 1"
    " LEFT JOIN wsfs_session_policies p ON p.session_id = x.id"
)
"""The same for the agent ``default``, which also owns the storage sessions nobody owns, under their storage id
(``catalog.py``); an owned session of the same public id comes first."""


@dataclass(frozen=True, slots=True)
class SessionAccess:
    """The session a request's URL names, as read with its token: the catalogue's entry (``None``: the agent has
    no such session) and the session's own policy as stored (``None``: the service's applies)."""

    agent_id: str
    session_id: str
    entry: CatalogEntry | None
    policy: str | None

    def names(self, agent_id: str, session_id: str) -> bool:
        """True if this is what was read for ``agent_id``'s ``session_id``."""
        return self.agent_id == agent_id and self.session_id == session_id


@dataclass(frozen=True, slots=True)
class Access:
    """What one lookup found: the token's record (``None``: unknown, revoked or not asked) and the session."""

    token: TokenInfo | None
    session: SessionAccess | None


_REMEMBERED = 1024
"""Rows whose typed values are kept (per reader): the same row read again needs no conversion."""


class AccessReader:
    """The lookup, its statements built once per store in the database's placeholder style.

    Typing a row (timestamps parsed, the token's policy decoded) cost about 6 µs of a 21 µs lookup on SQLite, for
    the same values request after request: the typed values are kept per row, keyed by every column read, so a
    changed row (a new expiry, a renamed session) is typed anew and a row that is gone is never used."""

    def __init__(self, store: SqlStore) -> None:
        self._driver = store.driver
        sql = self._driver.sql
        self._token_only = sql(_BY_TOKEN)
        self._with_session = sql(_WITH_SESSION)
        self._with_default_session = sql(_WITH_DEFAULT_SESSION)
        self._typed_token = functools.lru_cache(maxsize=_REMEMBERED)(self._token_of)
        self._typed_entry = functools.lru_cache(maxsize=_REMEMBERED)(self._entry_of)

    def lookup(self, secret: str | None, agent_id: str | None = None, session_id: str | None = None) -> Access:
        """The token of ``secret`` (if given) and, if both ids are given, that session of that agent: one
        statement (an autocommit statement sees one snapshot)."""
        hashed = None if secret is None else hash_token(secret)
        if agent_id is None or session_id is None:
            if hashed is None:
                return Access(None, None)
            with self._driver.statement() as tx:
                cursor = tx.run(self._token_only, (hashed,))
                tx.sync()
                row = cursor.fetchone()
            return Access(None if row is None else self._typed_token(tuple(row[:10])), None)
        params: tuple[str | None, ...]
        if agent_id == DEFAULT_AGENT:
            statement, params = self._with_default_session, (hashed, agent_id, session_id, session_id)
        else:
            statement, params = self._with_session, (hashed, agent_id, session_id)
        with self._driver.statement() as tx:
            cursor = tx.run(statement, params)
            tx.sync()
            row = cursor.fetchone()
        token = self._typed_token(tuple(row[:10])) if row[0] is not None else None
        entry = None if row[10] is None else self._typed_entry(agent_id, *row[10:14])
        return Access(token, SessionAccess(agent_id, session_id, entry, row[14]))

    def _entry_of(self, agent_id: str, storage_id: str, public_id: str, created: Any, updated: Any) -> CatalogEntry:
        stamp = self._driver.stamp
        return CatalogEntry(public_id, agent_id, stamp(created), stamp(updated), storage_id)

    def _token_of(self, row: tuple[Any, ...]) -> TokenInfo:
        stamp = self._driver.stamp
        return TokenInfo(
            row[0],
            row[1],
            row[2],
            stamp(row[3]),
            Scope(row[4]),
            None if row[5] is None else stamp(row[5]),
            row[6],
            None if row[7] is None else parsed_policy(row[7]),
            bool(row[8]),
            row[9],
        )
