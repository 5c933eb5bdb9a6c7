"""Which database failures mean "the server cannot be reached" (``ConnectionError``) or "try again"
(``ConcurrentChangeError``).

Every surface maps ``ConnectionError`` once (503 ``storage_unavailable``, exit 1, a "try again" tool message),
so a stopped or restarting PostgreSQL answers like an unreachable object store instead of a 500. Only a lost
or refused connection counts: a constraint, a syntax error or a locked SQLite file keeps its own type. A
transaction PostgreSQL rolled back to break a deadlock (SQLSTATE ``40P01``) or a serialization failure
(``40001``) changed nothing and may simply run again: ``ConcurrentChangeError`` (409 ``conflict``). A foreign key's
refusal is told from a unique key's by its code (:func:`foreign_key_failed`), never by its message, and the files'
key refusing a row a concurrent creator inserted first (:func:`file_row_taken`) from every other constraint, which no
concurrent writer causes and :func:`refused` reports as it is.
"""

from __future__ import annotations

import errno

import sqlalchemy as sa

from workspacefs.errors import ConcurrentChangeError

__all__ = [
    "classified",
    "file_row_taken",
    "foreign_key_failed",
    "lost_connection",
    "lost_race",
    "raised_in_database",
    "refused",
]

_SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})
"""PostgreSQL's admin shutdown, crash shutdown and "cannot connect now" (class 08 is connection exceptions)."""


_RACES = frozenset({"40P01", "40001"})
"""PostgreSQL's deadlock_detected and serialization_failure: the transaction was rolled back, nothing changed."""


def classified(exc: BaseException, where: str, connection: object = None) -> OSError | None:
    """The typed error a database failure means (:func:`lost_connection`, :func:`lost_race`), else ``None``;
    ``connection``: the driver's connection the error came from (ask before closing it)."""
    return lost_connection(exc, where, connection) or lost_race(exc)


def lost_race(exc: BaseException) -> ConcurrentChangeError | None:
    """``ConcurrentChangeError`` if PostgreSQL rolled the transaction back to break a deadlock or a
    serialization conflict (it changed nothing and may run again), else ``None``."""
    original = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    if getattr(original, "sqlstate", None) not in _RACES or not type(original).__module__.startswith("psycopg"):
        return None
    return ConcurrentChangeError(None, "Another writer of the workspace held what this change needed; try again")


def foreign_key_failed(exc: BaseException | None) -> bool:
    """Whether a driver's integrity error is a foreign key's (a row referred to is gone), not a unique key's:
    PostgreSQL's SQLSTATE ``23503``, SQLite's extended result code ``SQLITE_CONSTRAINT_FOREIGNKEY``."""
    original = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    if getattr(original, "sqlstate", None) == "23503":  # PostgreSQL's foreign_key_violation
        return True
    return getattr(original, "sqlite_errorname", None) == "SQLITE_CONSTRAINT_FOREIGNKEY"


def key_taken(exc: BaseException | None) -> bool:
    """Whether a driver's integrity error is a unique or primary key refusing a row another transaction inserted
    first (PostgreSQL's SQLSTATE ``23505``, SQLite's ``SQLITE_CONSTRAINT_UNIQUE``/``_PRIMARYKEY``): the one refusal a
    concurrent creator causes, so the only one worth looking again after."""
    original = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    if getattr(original, "sqlstate", None) == "23505":  # PostgreSQL's unique_violation
        return True
    return getattr(original, "sqlite_errorname", None) in ("SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY")


def file_row_taken(exc: BaseException | None) -> bool:
    """Whether a driver's integrity error is the files table's key refusing a path another transaction inserted
    first: PostgreSQL's ``unique_violation`` (SQLSTATE ``23505``) on ``wsfs_files``, told by the table the server
    names. SQLite: never, its writers run one at a time (``BEGIN IMMEDIATE`` before the rows are read), so no key
    there refuses a row because of a concurrent writer."""
    original = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    if getattr(original, "sqlstate", None) != "23505":
        return False
    return getattr(getattr(original, "diag", None), "table_name", None) == "wsfs_files"


def raised_in_database(exc: BaseException | None) -> bool:
    """Whether a driver's error is a ``RAISE EXCEPTION`` of a trigger or function that gave no code of its own
    (PostgreSQL's SQLSTATE ``P0001``, ``raise_exception``): a refusal as a constraint's is, though not an integrity
    error. SQLite's ``RAISE(ABORT, …)`` is an integrity error already."""
    original = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    return getattr(original, "sqlstate", None) == "P0001"


def refused(exc: BaseException, path: str | None, *, committed: bool = False) -> OSError:
    """``OSError`` (EIO) naming ``path`` for a constraint no concurrent writer breaks (a ``NOT NULL``, a ``CHECK``, a
    trigger's refusal: the database's schema and this code disagree): running again would fail the same way.
    ``committed``: the change itself went through, only collecting the content it replaced was refused."""
    original = (exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc) or exc
    reason = (str(original).strip().splitlines() or [type(original).__name__])[0]
    if committed:
        message = f"The change was made, but the database refused to collect the content it replaced ({reason})"
        return OSError(errno.EIO, message, path)
    return OSError(errno.EIO, f"The database refused the change, not a concurrent one ({reason})", path)


def lost_connection(exc: BaseException, where: str, connection: object = None) -> ConnectionError | None:
    """``ConnectionError`` naming ``where`` if ``exc`` is a lost or refused connection, else ``None``.

    A server's error says so by its SQLSTATE (class ``08``, or the server going away). An error psycopg raises
    itself has none, and is a connection failure only when the connection failed: a connection attempt's (its
    ``pgconn`` is the failed connection), a connect timeout, or one raised by ``connection`` (the driver's
    connection it came from) that broke under it (psycopg's ``broken``: interrupted, not closed by us; SQLAlchemy
    marks such an error ``connection_invalidated``). Any other (a pipeline aborted by an earlier error, a
    connection this process closed, a cancellation timeout) keeps its own type and message.
    """
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
    if state is not None:
        return _unreachable(where, original) if state.startswith("08") or state in _SERVER_GONE else None
    attempt = isinstance(original, psycopg.errors.ConnectionTimeout) or original.pgconn is not None
    if attempt or getattr(connection, "broken", False) is True:
        return _unreachable(where, original)
    return None


def _unreachable(where: str, cause: BaseException) -> ConnectionError:
    reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return ConnectionError(errno.ECONNREFUSED, f"Cannot reach the database at {where} ({reason})")
