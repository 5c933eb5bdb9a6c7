"""Forks and merge results of the SQL backend: metadata rows only, content stays in the shared blobs.

A fork is a new session of the same store whose file rows are copied from its parent's (or from one of its
snapshots' entries): one ``INSERT … SELECT`` of the rows, no byte of content, so it costs O(files) rows and
nothing per byte. Sessions forked from one another form a *family* (``wsfs_sessions.family``, migration
``0007``), whose members restore and merge each other's snapshots.

A merge result is a snapshot made from another snapshot's entries plus the merge's writes and deletions,
without touching any session's files: the entries are copied set-based, then the few merged paths are fixed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from workspacefs.backends._merging import SnapshotFile, Written
from workspacefs.backends.sql._schema import session_files, sessions, snapshot_entries, snapshots
from workspacefs.backends.sql._store import SqlStore
from workspacefs.paths import ROOT, ancestors, basename, parent
from workspacefs.results import FilesystemSnapshot

__all__ = ["ENTRY_COLUMNS", "capture_merged", "copy_session", "family_of", "family_sessions", "same_family"]

F = session_files
E = snapshot_entries
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
"""What a file row and a snapshot entry hold alike: a snapshot copies them one way, a restore the other."""


def family_of(connection: Connection, session_id: str) -> str:
    """The family a session belongs to (its own id when it was never forked)."""
    row = connection.execute(sa.select(sessions.c.family).where(sessions.c.id == session_id)).first()
    return session_id if row is None or row.family is None else str(row.family)


def same_family(connection: Connection, one: str, other: str) -> bool:
    """Whether two sessions are of one family (a session is of its own)."""
    return one == other or family_of(connection, one) == family_of(connection, other)


def family_sessions(connection: Connection, session_id: str) -> list[str]:
    """Every session of ``session_id``'s family, itself included."""
    family = family_of(connection, session_id)
    found = connection.execute(
        sa.select(sessions.c.id).where(sa.or_(sessions.c.id == family, sessions.c.family == family))
    ).scalars()
    return sorted({session_id, *found})


def copy_session(
    connection: Connection, store: SqlStore, source: str, fork: str, snapshot_id: str | None = None
) -> None:
    """Create session ``fork`` in ``source``'s family holding ``source``'s files, or those of its snapshot
    ``snapshot_id`` (``FileExistsError`` if the id is taken). Rows only: content blobs are shared."""
    store.create_session(connection, fork)
    connection.execute(
        sa.update(sessions)
        .where(sessions.c.id == fork)
        .values(family=family_of(connection, source), forked_from=source)
    )
    if snapshot_id is None:
        rows = sa.select(sa.literal(fork), *[F.c[c] for c in ENTRY_COLUMNS]).where(
            F.c.session_id == source, F.c.path != ROOT
        )
        order = F.c.path
    else:
        rows = sa.select(sa.literal(fork), *[E.c[c] for c in ENTRY_COLUMNS]).where(
            E.c.snapshot_id == snapshot_id, E.c.path != ROOT
        )
        order = E.c.path
    connection.execute(sa.insert(F).from_select(["session_id", *ENTRY_COLUMNS], rows.order_by(order)))


def _drop_entries(connection: Connection, snapshot_id: str, path: str) -> None:
    """Remove an entry and everything below it from a snapshot being built."""
    below = sa.and_(E.c.path > path + "/", E.c.path < path + "0")  # '0' follows '/': the subtree, by range
    connection.execute(sa.delete(E).where(E.c.snapshot_id == snapshot_id, sa.or_(E.c.path == path, below)))


def _entry(connection: Connection, snapshot_id: str, path: str) -> Any:
    return connection.execute(sa.select(E).where(E.c.snapshot_id == snapshot_id, E.c.path == path)).first()


def _row(snapshot_id: str, path: str, *, blob_id: str | None, size: int, now: datetime) -> dict[str, Any]:
    return {
        "snapshot_id": snapshot_id,
        "path": path,
        "parent": parent(path) if path != ROOT else None,
        "name": basename(path),
        "is_directory": blob_id is None,
        "is_readonly": False,
        "blob_id": blob_id,
        "size_bytes": size,
        "created_at": now,
        "updated_at": now,
    }


def capture_merged(
    connection: Connection,
    store: SqlStore,
    *,
    session_id: str,
    draft: FilesystemSnapshot,
    start: FilesystemSnapshot,
    writes: Mapping[str, Written],
    deletes: Collection[str],
) -> tuple[int, int]:
    """Make snapshot ``draft`` of ``session_id`` from ``start``'s entries with ``deletes`` removed and ``writes``
    written (in the caller's write transaction); its file count and bytes."""
    new, now = str(draft.snapshot_id), datetime.now(UTC)
    connection.execute(
        sa.insert(snapshots).values(
            id=new,
            session_id=session_id,
            tag=draft.tag,
            parent_id=str(draft.parent_id) if draft.parent_id else None,
            file_count=0,
            total_bytes=0,
            created_at=draft.created_at,
        )
    )
    connection.execute(
        sa.insert(E).from_select(
            ["snapshot_id", *ENTRY_COLUMNS],
            sa.select(sa.literal(new), *[E.c[c] for c in ENTRY_COLUMNS]).where(
                E.c.snapshot_id == str(start.snapshot_id)
            ),
        )
    )
    for path in sorted(deletes):
        _drop_entries(connection, new, path)
    for path in sorted(writes):
        for directory in ancestors(path):
            above = _entry(connection, new, directory)
            if above is not None and not above.is_directory:
                _drop_entries(connection, new, directory)
                above = None
            if above is None:
                connection.execute(sa.insert(E).values(_row(new, directory, blob_id=None, size=0, now=now)))
        _drop_entries(connection, new, path)
        wanted = writes[path]
        if isinstance(wanted, SnapshotFile):
            source = _entry(connection, str(wanted.snapshot.snapshot_id), wanted.path)
            if source is None:
                raise FileNotFoundError(f"Snapshot {wanted.snapshot.snapshot_id} has no file {wanted.path!r}")
            values = {**source._asdict(), "snapshot_id": new, "path": path}
        else:
            values = _row(new, path, blob_id=store.put_content(connection, wanted), size=len(wanted), now=now)
        connection.execute(sa.insert(E).values(values))
    count, total = connection.execute(
        sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(E.c.size_bytes), 0)).where(
            E.c.snapshot_id == new, E.c.is_directory.is_(False)
        )
    ).one()
    connection.execute(
        sa.update(snapshots).where(snapshots.c.id == new).values(file_count=int(count), total_bytes=int(total))
    )
    return int(count), int(total)
