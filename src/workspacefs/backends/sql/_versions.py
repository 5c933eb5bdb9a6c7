"""Snapshots by mark: a snapshot records a position, and the rows changed after it are kept as versions.

Triggers on ``wsfs_files`` (migration ``0008``) write the row a change replaced to ``wsfs_file_versions`` in
the change's own statement, while the session has a snapshot with a mark, for the first change of each path
after the newest mark (later ones until the next snapshot are no snapshot's state). A snapshot with mark ``m``
is then the session's current rows, except that a path with versions after ``m`` is as its oldest such version
says (``existed`` false: no row). So taking a snapshot writes one row (its file count and bytes come from the
previous snapshot and the paths changed since); restoring or comparing one reads the versions after its mark
and the current rows of those paths, however large the session.

A snapshot stays valid while its versions are kept: versions are deleted only when no snapshot with a mark
at or before them is left (:func:`collect`). Operations that need a snapshot's whole manifest (a fork from
it, a merge, another session of the family restoring it) read :func:`entries`, a query that assembles the
manifest from the same rows; snapshots made from other snapshots (merge results) and those taken before
``0008`` keep their rows in ``wsfs_snapshot_entries`` (``mark`` NULL), and :func:`entries` reads those.

Consistency of the mark: SQLite has one writer at a time, and a snapshot is taken in a write transaction.
On PostgreSQL every statement changing a session's rows takes a shared advisory lock on the session (in the
trigger) that a snapshot takes exclusively before it reads the rows and draws its mark: a change commits
before the snapshot reads, or writes its versions after the mark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from workspacefs.backends.sql._schema import file_versions, session_files, snapshot_entries, snapshots

__all__ = [
    "ENTRY_COLUMNS",
    "VERSION_LOCK",
    "collect",
    "entries",
    "first_versions",
    "take_mark",
]

F = session_files
E = snapshot_entries
V = file_versions
ENTRY_COLUMNS = (
    "path",
    "parent",
    "name",
    "is_directory",
    "is_readonly",
    "blob_id",
    "size_bytes",
    "created_at",
    "updated_at",
)
"""What a file row, a snapshot entry and a version hold alike."""

VERSION_LOCK = 0x77737673
"""The class of the per-session advisory lock the triggers share (migration ``0008``)."""


def take_mark(connection: Connection, session_id: str) -> None:
    """Hold the session against changes until the caller's transaction ends (PostgreSQL; SQLite's writer already
    holds the database): call before reading the rows a snapshot describes."""
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.text("SELECT pg_advisory_xact_lock(:k, hashtext(:s))"), {"k": VERSION_LOCK, "s": session_id}
        )


def current_mark(connection: Connection) -> int:
    """A mark below every version written after it (call after :func:`take_mark`, in the same transaction)."""
    if connection.dialect.name == "postgresql":
        drawn = connection.execute(sa.text("SELECT nextval(pg_get_serial_sequence('wsfs_file_versions', 'seq'))"))
        return int(drawn.scalar_one())
    found = connection.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'wsfs_file_versions'")).scalar()
    return int(found or 0)


def _after(session_id: str, mark: int, table: Any = V) -> sa.ColumnElement[bool]:
    return sa.and_(table.c.session_id == session_id, table.c.seq > mark)


def first_versions(session_id: str, mark: int) -> sa.Select[Any]:
    """For each path changed after ``mark``, its oldest version after it: the path as it was at the mark."""
    later = V.alias("later")
    first = sa.select(sa.func.min(later.c.seq)).where(_after(session_id, mark, later), later.c.path == V.c.path)
    return sa.select(V).where(_after(session_id, mark), V.c.seq == first.scalar_subquery())


def entries(snapshot: Any) -> sa.Subquery:
    """A snapshot's rows (the :data:`ENTRY_COLUMNS`), whichever way it is kept (``snapshot``: its row)."""
    if snapshot.mark is None:
        return sa.select(*[E.c[c] for c in ENTRY_COLUMNS]).where(E.c.snapshot_id == snapshot.id).subquery("entries")
    session_id, mark = snapshot.session_id, int(snapshot.mark)
    touched = sa.exists().where(_after(session_id, mark), V.c.path == F.c.path)
    unchanged = sa.select(*[F.c[c] for c in ENTRY_COLUMNS]).where(F.c.session_id == session_id, ~touched)
    first = first_versions(session_id, mark).subquery("first")
    before = sa.select(*[first.c[c] for c in ENTRY_COLUMNS]).where(first.c.existed.is_(True))
    return sa.union_all(unchanged, before).subquery("entries")


def floor(connection: Connection, session_id: str) -> int | None:
    """The lowest mark among the session's snapshots (``None``: it has none, and needs no versions)."""
    found = connection.execute(
        sa.select(sa.func.min(snapshots.c.mark)).where(snapshots.c.session_id == session_id)
    ).scalar()
    return None if found is None else int(found)


def collect(connection: Connection, session_id: str) -> list[str]:
    """Delete the versions no snapshot of the session needs any more; the blobs they named (for release)."""
    lowest = floor(connection, session_id)
    doomed = V.c.session_id == session_id
    if lowest is not None:
        doomed = sa.and_(doomed, V.c.seq <= lowest)
    held = [r[0] for r in connection.execute(sa.select(V.c.blob_id).where(doomed, V.c.blob_id.is_not(None)).distinct())]
    connection.execute(sa.delete(V).where(doomed))
    return held


def row_values(row: Any) -> Mapping[str, Any]:
    """A version's (or row's) :data:`ENTRY_COLUMNS`."""
    mapping = row._mapping
    return {c: mapping[c] for c in ENTRY_COLUMNS}


def same_row(one: Any, other: Any) -> bool:
    """Whether two rows hold the same values in every entry column (times compared as stored)."""
    a, b = one._mapping, other._mapping
    return all(_same(a[c], b[c]) for c in ENTRY_COLUMNS)


def _same(a: Any, b: Any) -> bool:
    if hasattr(a, "tzinfo") and hasattr(b, "tzinfo") and (a.tzinfo is None) != (b.tzinfo is None):
        a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
    return bool(a == b)
