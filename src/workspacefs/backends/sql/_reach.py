"""Which database failures mean "the server cannot be reached": those become ``ConnectionError``.

Every surface maps ``ConnectionError`` once (503 ``storage_unavailable``, exit 1, a "try again" tool message),
so a stopped or restarting PostgreSQL answers like an unreachable object store instead of a 500. Only a lost
or refused connection counts: a constraint, a syntax error or a locked SQLite file keeps its own type.
"""

from __future__ import annotations

import errno

import sqlalchemy as sa

__all__ = ["lost_connection"]

_SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})
"""PostgreSQL's admin shutdown, crash shutdown and "cannot connect now" (class 08 is connection exceptions)."""


def lost_connection(exc: BaseException, where: str) -> ConnectionError | None:
    """``ConnectionError`` naming ``where`` if ``exc`` is a lost or refused connection, else ``None``."""
    original: BaseException | None = exc
    if isinstance(exc, sa.exc.DBAPIError):
        if exc.connection_invalidated:
            return _unreachable(where, exc.orig or exc)
        original = exc.orig
    if original is None or not type(original).__module__.startswith("psycopg"):
        return None
    import psycopg  # noqa: PLC0415 - only PostgreSQL's errors get here

    if not isinstance(original, psycopg.OperationalError):
        return None
    state = getattr(original, "sqlstate", None)
    if state is None or state.startswith("08") or state in _SERVER_GONE:
        return _unreachable(where, original)
    return None


def _unreachable(where: str, cause: BaseException) -> ConnectionError:
    reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return ConnectionError(errno.ECONNREFUSED, f"Cannot reach the database at {where} ({reason})")
