"""Which database failures mean "the server cannot be reached" (``ConnectionError``) or "try again"
(``ConcurrentChangeError``).

Every surface maps ``ConnectionError`` once (503 ``storage_unavailable``, exit 1, a "try again" tool message),
so a stopped or restarting PostgreSQL answers like an unreachable object store instead of a 500. Only a lost
or refused connection counts: a constraint, a syntax error or a locked SQLite file keeps its own type. A
transaction PostgreSQL rolled back to break a deadlock (SQLSTATE ``40P01``) or a serialization failure
(``40001``) changed nothing and may simply run again: ``ConcurrentChangeError`` (409 ``conflict``).
"""

from __future__ import annotations

import errno

import sqlalchemy as sa

from workspacefs.errors import ConcurrentChangeError

__all__ = ["classified", "lost_connection", "lost_race"]

_SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})
"""PostgreSQL's admin shutdown, crash shutdown and "cannot connect now" (class 08 is connection exceptions)."""


_RACES = frozenset({"40P01", "40001"})
"""PostgreSQL's deadlock_detected and serialization_failure: the transaction was rolled back, nothing changed."""


def classified(exc: BaseException, where: str) -> OSError | None:
    """The typed error a database failure means (:func:`lost_connection`, :func:`lost_race`), else ``None``."""
    return lost_connection(exc, where) or lost_race(exc)


def lost_race(exc: BaseException) -> ConcurrentChangeError | None:
    """``ConcurrentChangeError`` if PostgreSQL rolled the transaction back to break a deadlock or a
    serialization conflict (it changed nothing and may run again), else ``None``."""
    original = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    if getattr(original, "sqlstate", None) not in _RACES or not type(original).__module__.startswith("psycopg"):
        return None
    return ConcurrentChangeError(None, "Another writer of the workspace held what this change needed; try again")


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
