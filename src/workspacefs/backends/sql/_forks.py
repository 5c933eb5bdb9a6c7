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
from workspacefs.backends.sql import _versions as versions
from workspacefs.backends.sql._schema import file_versions, session_files, sessions, snapshot_entries, snapshots
from workspacefs.backends.sql._store import SqlStore
from workspacefs.backends.sql._versions import ENTRY_COLUMNS
from workspacefs.paths import ROOT, ancestors, basename, parent
from workspacefs.results import FilesystemSnapshot

__all__ = [
    "ENTRY_COLUMNS",
    "capture_merged",
    "copy_session",
    "entry_at",
    "family_of",
    "family_sessions",
    "same_family",
]

F = session_files
E = snapshot_entries
V = file_versions


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


def copy_session(connection: Connection, store: SqlStore, source: str, fork: str, snapshot: Any = None) -> None:
    """Create session ``fork`` in ``source``'s family holding ``source``'s files, or those of ``snapshot`` (its
    ``wsfs_snapshots`` row; ``FileExistsError`` if the id is taken). Rows only: content blobs are shared."""
    store.create_session(connection, fork)
    connection.execute(
        sa.update(sessions)
        .where(sessions.c.id == fork)
        .values(family=family_of(connection, source), forked_from=source)
    )
    order: Any
    if snapshot is None:
        rows = sa.select(sa.literal(fork), *[F.c[c] for c in ENTRY_COLUMNS]).where(
            F.c.session_id == source, F.c.path != ROOT
        )
        order = F.c.path
    else:
        entries = versions.entries(snapshot)
        rows = sa.select(sa.literal(fork), *[entries.c[c] for c in ENTRY_COLUMNS]).where(entries.c.path != ROOT)
        order = entries.c.path
    connection.execute(sa.insert(F).from_select(["session_id", *ENTRY_COLUMNS], rows.order_by(order)))


def _drop_entries(connection: Connection, snapshot_id: str, path: str) -> None:
    """Remove an entry and everything below it from a snapshot being built."""
    below = sa.and_(E.c.path > path + "/", E.c.path < path + "0")  # '0' follows '/': the subtree, by range
    connection.execute(sa.delete(E).where(E.c.snapshot_id == snapshot_id, sa.or_(E.c.path == path, below)))


def _entry(connection: Connection, snapshot_id: str, path: str) -> Any:
    return connection.execute(sa.select(E).where(E.c.snapshot_id == snapshot_id, E.c.path == path)).first()


def entry_at(connection: Connection, snapshot: Any, path: str) -> Any:
    """The entry (:data:`ENTRY_COLUMNS`) of ``path`` in ``snapshot`` (its ``wsfs_snapshots`` row), or ``None``:
    for a snapshot kept by mark, the path's oldest version after the mark, else its current row."""
    if snapshot.mark is None:
        return connection.execute(
            sa.select(*[E.c[c] for c in ENTRY_COLUMNS]).where(E.c.snapshot_id == snapshot.id, E.c.path == path)
        ).first()
    version = connection.execute(
        sa.select(V.c.existed, *[V.c[c] for c in ENTRY_COLUMNS])
        .where(V.c.session_id == snapshot.session_id, V.c.seq > snapshot.mark, V.c.path == path)
        .order_by(V.c.seq)
        .limit(1)
    ).first()
    if version is not None:
        return version if version.existed else None
    return connection.execute(
        sa.select(*[F.c[c] for c in ENTRY_COLUMNS]).where(F.c.session_id == snapshot.session_id, F.c.path == path)
    ).first()


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
    start: Any,
    writes: Mapping[str, Written],
    deletes: Collection[str],
    read_only: Mapping[str, bool],
) -> tuple[int, int]:
    """Make snapshot ``draft`` of ``session_id`` from ``start``'s entries (``start``: its ``wsfs_snapshots`` row)
    with ``deletes`` removed, ``writes`` written and the files of ``read_only`` given that flag (in the caller's
    write transaction); its file count and bytes.
    The result is written out in ``wsfs_snapshot_entries``: it is no state the session was ever in."""
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
    entries = versions.entries(start)
    connection.execute(
        sa.insert(E).from_select(
            ["snapshot_id", *ENTRY_COLUMNS], sa.select(sa.literal(new), *[entries.c[c] for c in ENTRY_COLUMNS])
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
            held = connection.execute(
                sa.select(snapshots).where(snapshots.c.id == str(wanted.snapshot.snapshot_id))
            ).first()
            source = None if held is None else entry_at(connection, held, wanted.path)
            if source is None:
                raise FileNotFoundError(f"Snapshot {wanted.snapshot.snapshot_id} has no file {wanted.path!r}")
            values = {**{c: source._mapping[c] for c in ENTRY_COLUMNS}, "snapshot_id": new, "path": path}
        else:
            values = _row(new, path, blob_id=store.put_content(connection, wanted), size=len(wanted), now=now)
        connection.execute(sa.insert(E).values(values))
    for flag in (False, True):
        paths = sorted(path for path, wanted in read_only.items() if wanted is flag)
        if paths:
            connection.execute(sa.update(E).where(E.c.snapshot_id == new, E.c.path.in_(paths)).values(is_readonly=flag))
    count, total = connection.execute(
        sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(E.c.size_bytes), 0)).where(
            E.c.snapshot_id == new, E.c.is_directory.is_(False)
        )
    ).one()
    connection.execute(
        sa.update(snapshots).where(snapshots.c.id == new).values(file_count=int(count), total_bytes=int(total))
    )
    return int(count), int(total)
