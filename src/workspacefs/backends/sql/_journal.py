"""The SQL journal: ``wsfs_journal`` rows written in each change's own transaction, read back as entries.

A primitive of :class:`~workspacefs.backends.sql.SqlFilesystem` writes one row per path it changes in the
same transaction as the change (so a crash leaves both or neither); :class:`SqlJournal` turns rows back
into :class:`~workspacefs.history.JournalEntry` values (the rows sharing an ``op_key`` are one entry, its id
their lowest ``seq``). Watchers in this process hear of changes when they commit; on PostgreSQL a
listener thread hears ``NOTIFY wsfs_journal`` (a trigger on the table), so a change made through any
process reaches every watcher.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from workspacefs.backends.sql._schema import journal as J  # noqa: N812 - the table, as F is wsfs_files
from workspacefs.backends.sql._schema import session_files as F  # noqa: N812
from workspacefs.backends.sql._store import SqlStore
from workspacefs.errors import HistoryEntryNotFoundError
from workspacefs.history import DIRECTORY, Actor, Change, ChangeEvent, Journal, JournalEntry
from workspacefs.paths import ROOT

__all__ = ["JournalTag", "SqlJournal", "insert_changes", "insert_rows", "subtree_of", "tagged", "tree_rows"]


@dataclass(frozen=True, slots=True)
class JournalTag:
    """What every row of one operation carries: its key, name, actor, and what it undid."""

    op_key: str
    operation: str
    actor: Actor
    undoes: int | None
    detail: str | None

    def row(self, session: str, at: datetime, change: Change) -> tuple[Any, ...]:
        """The parameters of ``INSERT_JOURNAL`` for one change."""
        name, actor_session, call, via = self.actor.fields()
        return (
            session,
            self.op_key,
            at,
            self.operation,
            name,
            actor_session,
            call,
            via,
            change.path,
            change.from_path,
            change.before,
            change.after,
            change.size_before,
            change.size_after,
            self.undoes,
            self.detail,
        )


_COLUMNS = (
    "session_id",
    "op_key",
    "at",
    "operation",
    "actor_name",
    "actor_session",
    "actor_call",
    "actor_via",
    "path",
    "from_path",
    "before_id",
    "after_id",
    "size_before",
    "size_after",
    "undoes",
    "detail",
)


def subtree_of(column: Any, base: str) -> sa.ColumnElement[bool]:
    """``column`` is ``base`` or below it (a range: ``'a/' <= p < 'a0'``)."""
    if base == ROOT:
        return sa.true()
    return sa.or_(column == base, sa.and_(column >= base + "/", column < base + "0"))


def tagged(  # noqa: PLR0917 - one value per column, in the table's order
    tag: JournalTag, session: str, at: datetime, path: Any, before: Any, after: Any, size_before: Any, size_after: Any
) -> sa.Select[Any]:
    """A ``SELECT`` of journal rows: the tag's constants around the given path, kinds and sizes."""
    name, actor_session, call, via = tag.actor.fields()
    return sa.select(
        sa.literal(session),
        sa.literal(tag.op_key),
        sa.literal(at, type_=J.c.at.type),
        sa.literal(tag.operation),
        sa.literal(name, type_=sa.Text),
        sa.literal(actor_session, type_=sa.Text),
        sa.literal(call, type_=sa.Text),
        sa.literal(via, type_=sa.Text),
        path,
        sa.literal(None, type_=sa.Text),
        before,
        after,
        size_before,
        size_after,
        sa.literal(tag.undoes, type_=sa.BigInteger),
        sa.literal(tag.detail, type_=sa.Text),
    )


def tree_rows(tag: JournalTag, session: str, at: datetime, base: str, *, deleting: bool) -> sa.Select[Any]:
    """The journal rows of every entry of ``base``'s subtree as created (``deleting``: as deleted), straight
    from ``wsfs_files`` (one statement, however many paths)."""
    kind = sa.case((F.c.is_directory, sa.literal(DIRECTORY)), else_=F.c.blob_id)
    size = sa.case((F.c.is_directory, sa.literal(0)), else_=F.c.size_bytes)
    nothing = sa.literal(None, type_=sa.Text)
    before, after = (kind, nothing) if deleting else (nothing, kind)
    sizes = (size, sa.literal(0)) if deleting else (sa.literal(0), size)
    return tagged(tag, session, at, F.c.path, before, after, *sizes).where(
        F.c.session_id == session, subtree_of(F.c.path, base)
    )


def insert_rows(select: sa.Select[Any]) -> sa.Insert:
    """``INSERT INTO wsfs_journal … SELECT``."""
    return sa.insert(J).from_select(list(_COLUMNS), select)


def insert_changes(connection: Any, tag: JournalTag, session: str, changes: Sequence[Change]) -> None:
    """Write the rows of ``changes`` in ``connection``'s transaction."""
    if changes:
        at = datetime.now(UTC)
        connection.execute(sa.insert(J), [dict(zip(_COLUMNS, tag.row(session, at, c), strict=True)) for c in changes])


class SqlJournal(Journal):
    """The entries of one session of a :class:`SqlStore`."""

    def __init__(self, store: SqlStore, session: str) -> None:
        super().__init__()
        self._store = store
        self._session = session
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock_catch_up = threading.Lock()
        self.last_seen = 0
        """The last row published to watchers."""

    # --- reading --------------------------------------------------------------------------------------

    def _entries_of(self, connection: Any, keys: Sequence[str]) -> list[JournalEntry]:
        """The entries of ``keys``, in the order given."""
        if not keys:
            return []
        rows = connection.execute(
            sa.select(J).where(J.c.session_id == self._session, J.c.op_key.in_(list(keys))).order_by(J.c.seq)
        ).all()
        grouped: dict[str, list[Any]] = {}
        for row in rows:
            grouped.setdefault(row.op_key, []).append(row)
        return [_entry(grouped[key]) for key in keys if key in grouped]

    def entries(
        self,
        *,
        path: str | None = None,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> list[JournalEntry]:
        where = [J.c.session_id == self._session]
        if path is not None and path != ROOT:
            where.append(sa.or_(subtree_of(J.c.path, path), subtree_of(J.c.from_path, path)))
        if isinstance(since, datetime):
            where.append(J.c.at > since)
        if isinstance(actor, Actor):
            for column, wanted in zip(
                (J.c.actor_name, J.c.actor_session, J.c.actor_call, J.c.actor_via), actor.fields(), strict=True
            ):
                if wanted:
                    where.append(column == wanted)
        elif actor is not None:
            where.append(sa.or_(J.c.actor_name == actor, J.c.actor_session == actor, J.c.actor_call == actor))
        first = sa.func.min(J.c.seq)
        query = sa.select(J.c.op_key, first).where(*where).group_by(J.c.op_key)
        if isinstance(since, int):
            query = query.having(first > since)
        query = query.order_by(first.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._store.read() as connection:
            keys = [r[0] for r in connection.execute(query)]
            return self._entries_of(connection, keys)

    def entry(self, entry_id: int) -> JournalEntry:
        with self._store.read() as connection:
            key = connection.execute(
                sa.select(J.c.op_key).where(J.c.session_id == self._session, J.c.seq == entry_id)
            ).scalar()
            found = self._entries_of(connection, [key]) if key is not None else []
        if not found or found[0].entry_id != entry_id:
            raise HistoryEntryNotFoundError(f"No journal entry {entry_id}")
        return found[0]

    def entry_of_key(self, op_key: str) -> JournalEntry | None:
        """The entry an operation's rows form (``None``: it wrote none)."""
        with self._store.read() as connection:
            found = self._entries_of(connection, [op_key])
        return found[0] if found else None

    def prune(self, *, before: datetime | None = None, keep: int | None = None) -> int:
        entries = (
            sa.select(J.c.op_key)
            .where(J.c.session_id == self._session)
            .group_by(J.c.op_key)
            .order_by(sa.func.min(J.c.seq).desc())
        )
        with self._store.write() as connection:
            doomed: set[str] = set()
            if keep is not None:
                doomed.update(connection.execute(entries.offset(keep)).scalars())
            if before is not None:
                doomed.update(connection.execute(entries.having(sa.func.min(J.c.at) < before)).scalars())
            if not doomed:
                return 0
            keys = sorted(doomed)
            mine = sa.and_(J.c.session_id == self._session, J.c.op_key.in_(keys))
            held = [r[0] for r in connection.execute(sa.select(J.c.before_id).where(mine).distinct())]
            connection.execute(sa.delete(J).where(mine))
            self._store.release(connection, [b for b in held if b and b != DIRECTORY])
        return len(keys)

    # --- watching -------------------------------------------------------------------------------------

    def changed(self) -> None:
        """A change of this process committed: publish it (PostgreSQL's listener does that instead)."""
        if not self.watched or self._store.dialect == "postgresql":
            return
        self._catch_up()

    def _watching_started(self) -> None:
        if self._listener is not None:
            return
        with self._store.read() as connection:
            newest = sa.select(sa.func.max(J.c.seq)).where(J.c.session_id == self._session)
            self.last_seen = int(connection.execute(newest).scalar() or 0)
        if self._store.dialect != "postgresql":
            return
        self._stop.clear()
        ready = threading.Event()
        self._listener = threading.Thread(target=self._listen, args=(ready,), name="wsfs-journal-listen", daemon=True)
        self._listener.start()
        ready.wait(10)

    def _watching_stopped(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            self._stop.set()
            listener.join(5)

    def _listen(self, ready: threading.Event) -> None:
        """``LISTEN wsfs_journal`` on a connection of its own; publish the session's new entries."""
        proxy = self._store.engine.raw_connection()
        connection: Any = proxy.driver_connection
        try:
            connection.autocommit = True
            connection.execute("LISTEN wsfs_journal")
            ready.set()
            while not self._stop.is_set():
                for note in connection.notifies(timeout=0.2, stop_after=100):
                    session, _, _seq = note.payload.rpartition(" ")
                    if session == self._session:  # at once: after the loop is 0.2 s (or 100 notes) later
                        self._catch_up()
        finally:
            ready.set()
            with contextlib.suppress(Exception):
                connection.execute("UNLISTEN wsfs_journal")
            proxy.close()

    def _catch_up(self) -> None:
        """Publish every row written after the last one published, oldest first (a change made in several
        transactions is published as each commits)."""
        twin = J.alias("twin")
        entry_id = sa.select(sa.func.min(twin.c.seq)).where(twin.c.op_key == J.c.op_key).scalar_subquery()
        with self._lock_catch_up, self._store.read() as connection:
            rows = connection.execute(
                sa.select(J, entry_id.label("entry_id"))
                .where(J.c.session_id == self._session, J.c.seq > self.last_seen)
                .order_by(J.c.seq)
            ).all()
            if rows:
                self.last_seen = int(rows[-1].seq)
        events = []
        for row in rows:
            change = Change(
                row.path, row.before_id, row.after_id, int(row.size_before), int(row.size_after), row.from_path
            )
            at = row.at if row.at.tzinfo is not None else row.at.replace(tzinfo=UTC)
            actor = Actor(row.actor_name, row.actor_session, row.actor_call, row.actor_via)
            events.append(
                ChangeEvent(
                    change.kind,
                    change.path,
                    actor,
                    change.after if change.after != DIRECTORY else None,
                    int(row.entry_id),
                    at,
                    DIRECTORY in (change.before, change.after),
                    change.from_path,
                )
            )
        self.publish(events)


def _entry(rows: Sequence[Any]) -> JournalEntry:
    first = rows[0]
    at = first.at if first.at.tzinfo is not None else first.at.replace(tzinfo=UTC)
    return JournalEntry(
        int(first.seq),
        at,
        Actor(first.actor_name, first.actor_session, first.actor_call, first.actor_via),
        first.operation,
        tuple(
            Change(r.path, r.before_id, r.after_id, int(r.size_before), int(r.size_after), r.from_path) for r in rows
        ),
        None if first.undoes is None else int(first.undoes),
        first.detail,
    )
