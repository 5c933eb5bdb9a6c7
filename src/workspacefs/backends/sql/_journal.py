"""The SQL journal: ``wsfs_journal`` rows written in each change's own transaction, read back as entries.

A primitive of :class:`~workspacefs.backends.sql.SqlFilesystem` writes one row per path it changes in the
same transaction as the change (so a crash leaves both or neither); :class:`SqlJournal` turns rows back
into :class:`~workspacefs.history.JournalEntry` values (the rows sharing an ``op_key`` are one entry, its id
their lowest ``seq``). Watchers in this process hear of changes when they commit; on PostgreSQL a
listener thread hears ``NOTIFY wsfs_journal`` (a trigger on the table), so a change made through any
process reaches every watcher.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from workspacefs.backends.sql._hot import INSERT_JOURNAL_FLAGGED
from workspacefs.backends.sql._schema import journal as J  # noqa: N812 - the table, as F is wsfs_files
from workspacefs.backends.sql._schema import session_files as F  # noqa: N812
from workspacefs.backends.sql._store import SqlStore
from workspacefs.errors import HistoryEntryNotFoundError
from workspacefs.history import DIRECTORY, Actor, Change, ChangeEvent, Journal, JournalEntry
from workspacefs.paths import ROOT, ancestors


class _Peers:
    """The live journals of one store and session in this process, and how many of them are watched (so a
    commit nobody watches costs one attribute read)."""

    __slots__ = ("journals", "watched")

    def __init__(self) -> None:
        self.journals: weakref.WeakSet[SqlJournal] = weakref.WeakSet()
        self.watched = 0


_PEERS: weakref.WeakKeyDictionary[SqlStore, dict[str, _Peers]] = weakref.WeakKeyDictionary()
"""The peers of each store and session in this process."""
_PEERS_LOCK = threading.Lock()
_TRAIL = 64
"""Published rows a catch-up reaches back past: a transaction may commit behind this many later ones."""

_RELISTEN_FIRST = 0.1
"""Seconds before the first attempt to LISTEN again after the connection was lost (doubling to the max)."""
_RELISTEN_MAX = 5.0


__all__ = [
    "NEXT_SEQ",
    "JournalTag",
    "SqlJournal",
    "insert_changes",
    "insert_rows",
    "subtree_of",
    "tagged",
    "tree_rows",
]


@dataclass(frozen=True, slots=True)
class JournalTag:
    """What every row of one operation carries: its key, name, actor, and what it undid."""

    op_key: str | None
    """Shared by the rows of an operation made of several primitives; ``None`` for a one-primitive entry
    (then the row is the entry, and the key's index is not written: the hot path of a small write)."""
    operation: str
    actor: Actor
    undoes: int | None
    detail: str | None

    def fields(self) -> tuple[Any, ...]:
        """What every row of the operation carries, in the table's order: key, operation, actor (four fields),
        what it undid, its detail (the journal arguments of ``wsfs_write_small``)."""
        return (self.op_key, self.operation, *self.actor.fields(), self.undoes, self.detail)

    def row(self, session: str, at: Any, change: Change) -> tuple[Any, ...]:
        """The parameters of ``INSERT_JOURNAL`` for one change (``at``: a time, or SQLite's text of one)."""
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

    def content_row(  # noqa: PLR0917 - one value per column, in the table's order
        self, session: str, at: Any, path: str, before: str | None, after: str, size_before: int, size_after: int
    ) -> tuple[Any, ...]:
        """:meth:`row` of a content change, without making the :class:`Change` (the small write's hot path: a
        ``Change`` cost 1.8 µs, a tenth of what journaling added to a write)."""
        actor = self.actor
        return (
            session,
            self.op_key,
            at,
            self.operation,
            actor.name,
            actor.session,
            actor.tool_call,
            actor.via,
            path,
            None,
            before,
            after,
            size_before,
            size_after,
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
    tag: JournalTag,
    session: str,
    at: datetime,
    path: Any,
    before: Any,
    after: Any,
    size_before: Any,
    size_after: Any,
    flags: tuple[Any, Any] = (None, None),
) -> sa.Select[Any]:
    """A ``SELECT`` of journal rows: the tag's constants around the given path, kinds, sizes and read-only flags
    (``None``: left alone)."""
    flag_before, flag_after = (sa.literal(None, type_=sa.Boolean) if f is None else f for f in flags)
    name, actor_session, call, via = tag.actor.fields()
    return sa.select(
        sa.literal(session),
        sa.literal(tag.op_key, type_=sa.Text),
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
        flag_before,
        flag_after,
    )


def tree_rows(tag: JournalTag, session: str, at: datetime, base: str, *, deleting: bool) -> sa.Select[Any]:
    """The journal rows of every entry of ``base``'s subtree as created (``deleting``: as deleted), straight
    from ``wsfs_files`` (one statement, however many paths)."""
    kind = sa.case((F.c.is_directory, sa.literal(DIRECTORY)), else_=F.c.blob_id)
    size = sa.case((F.c.is_directory, sa.literal(0)), else_=F.c.size_bytes)
    nothing = sa.literal(None, type_=sa.Text)
    before, after = (kind, nothing) if deleting else (nothing, kind)
    sizes: tuple[Any, Any] = (size, sa.literal(0)) if deleting else (sa.literal(0), size)
    locked = sa.case((sa.and_(F.c.is_readonly, sa.not_(F.c.is_directory)), sa.true()), else_=sa.null())
    flags = (locked, None) if deleting else (None, locked)  # a read-only file goes, or comes, read-only
    return tagged(tag, session, at, F.c.path, before, after, *sizes, flags=flags).where(
        F.c.session_id == session, subtree_of(F.c.path, base)
    )


_FLOOR = sa.table("wsfs_journal_floor", sa.column("session_id", sa.Text), sa.column("seq", sa.Integer))
"""SQLite (migration ``0013``): per session id, the highest number given whose rows all went."""

_SESSION = sa.bindparam("journal_session", type_=sa.Text)


def _next_seq() -> sa.ColumnElement[Any]:
    mine = sa.select(sa.func.max(J.c.seq)).where(J.c.session_id == _SESSION).scalar_subquery()
    floors = (sa.select(_FLOOR.c.seq).where(_FLOOR.c.session_id == s).scalar_subquery() for s in (_SESSION, ""))
    return sa.func.max(sa.func.coalesce(mine, 0), *(sa.func.coalesce(f, 0) for f in floors)) + 1


NEXT_SEQ = _next_seq()
"""SQLite: the next entry number of the session bound as ``journal_session`` (``_hot.NEXT_SEQ`` as an expression,
built once: building it per statement cost a quarter of a millisecond)."""


def insert_rows(connection: Any, session: str, select: sa.Select[Any], *order: Any) -> None:
    """``INSERT INTO wsfs_journal … SELECT``, the rows numbered in ``order`` (SQLite numbers them in the session
    from :data:`NEXT_SEQ`; PostgreSQL's ``BIGSERIAL`` as they come)."""
    columns = [*_COLUMNS, "read_only_before", "read_only_after"]
    if connection.dialect.name != "sqlite":
        connection.execute(sa.insert(J).from_select(columns, select.order_by(*order)))
        return
    numbered = NEXT_SEQ - 1 + sa.func.row_number().over(order_by=order)
    statement = sa.insert(J).from_select([*columns, "seq"], select.add_columns(numbered).order_by(*order))
    connection.execute(statement, {"journal_session": session})


def insert_changes(connection: Any, tag: JournalTag, session: str, changes: Sequence[Change]) -> None:
    """Write the rows of ``changes`` in ``connection``'s transaction, numbered in their order."""
    if not changes:
        return
    at = datetime.now(UTC)
    if connection.dialect.name == "sqlite":  # one execution per row: each numbered after the one before
        stamp = at.replace(tzinfo=None).isoformat(" ", "microseconds")  # as SQLAlchemy stores it
        rows = [(*tag.row(session, stamp, c), c.read_only_before, c.read_only_after) for c in changes]
        connection.exec_driver_sql(INSERT_JOURNAL_FLAGGED, rows)
        return
    connection.execute(
        sa.insert(J),
        [
            dict(
                zip(_COLUMNS, tag.row(session, at, c), strict=True),
                read_only_before=c.read_only_before,
                read_only_after=c.read_only_after,
            )
            for c in changes
        ],
    )


class SqlJournal(Journal):
    """The entries of one session of a :class:`SqlStore`."""

    def __init__(self, store: SqlStore, session: str) -> None:
        super().__init__()
        self._store = store
        self._session = session
        with _PEERS_LOCK:  # every journal of this session in this process hears this process's commits
            sessions = _PEERS.get(store)
            if sessions is None:
                sessions = _PEERS[store] = {}
            peers = sessions.get(session)
            if peers is None:
                peers = sessions[session] = _Peers()
            self._peers = peers
            self._peers.journals.add(self)
        self._counted = False
        """Whether this journal counts in ``_peers.watched``."""
        self._lifecycle = threading.Lock()
        """Serialises starting and stopping the watching (the listener thread, the count)."""
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock_catch_up = threading.Lock()
        self.last_seen = 0
        """The newest row published to watchers."""
        self.first_seen = 0
        """Rows up to this one existed before anyone watched: never published."""
        self._sent: collections.deque[int] = collections.deque(maxlen=_TRAIL)

    # --- reading --------------------------------------------------------------------------------------

    def _where(
        self, path: str | None, since: int | datetime | None, actor: str | Actor | None
    ) -> list[sa.ColumnElement[bool]]:
        where = [J.c.session_id == self._session]
        if path is not None and path != ROOT:
            matching = [subtree_of(J.c.path, path), subtree_of(J.c.from_path, path)]
            holding = list(ancestors(path))
            if holding:  # a directory moved with ``path`` in it: one row, naming the directory
                matching.append(
                    sa.and_(
                        J.c.from_path.is_not(None),
                        J.c.after_id == DIRECTORY,
                        sa.or_(J.c.path.in_(holding), J.c.from_path.in_(holding)),
                    )
                )
            where.append(sa.or_(*matching))
        if isinstance(since, datetime):
            where.append(J.c.at > since)
        elif since is not None:
            where.append(J.c.seq > since)
        if isinstance(actor, Actor):
            columns = (J.c.actor_name, J.c.actor_session, J.c.actor_call, J.c.actor_via)
            where += [column == wanted for column, wanted in zip(columns, actor.fields(), strict=True) if wanted]
        elif actor is not None:
            where.append(sa.or_(J.c.actor_name == actor, J.c.actor_session == actor, J.c.actor_call == actor))
        return where

    def _complete(self, connection: Any, rows: Sequence[Any]) -> list[JournalEntry]:
        """The whole entries the given rows belong to, newest first (rows of one operation share ``op_key``;
        a row without one is an entry by itself)."""
        keys = sorted({row.op_key for row in rows if row.op_key is not None})
        grouped: dict[Any, list[Any]] = {row.seq: [row] for row in rows if row.op_key is None}
        for start in range(0, len(keys), 500):
            batch = keys[start : start + 500]
            mine = sa.and_(J.c.session_id == self._session, J.c.op_key.in_(batch))
            for row in connection.execute(sa.select(J).where(mine).order_by(J.c.seq)):
                grouped.setdefault(row.op_key, []).append(row)
        return sorted((_entry(each) for each in grouped.values()), key=lambda e: e.entry_id, reverse=True)

    def entries(
        self,
        *,
        path: str | None = None,
        since: int | datetime | None = None,
        actor: str | Actor | None = None,
        limit: int | None = 100,
    ) -> list[JournalEntry]:
        """Walk the matching rows newest first (the ``(session_id, seq)`` index), a batch at a time, until
        ``limit`` entries are found: cost follows the entries asked for, not the journal's length.

        A path with fewer entries than ``limit`` walks the session's whole journal (at most its retention, 10,000
        rows by default: 3.6-5.5 ms on SQLite, 2.3-5.4 ms on PostgreSQL). Indexes on ``path`` and ``from_path``
        would make it index-driven (PostgreSQL 1.1-2.8 ms; SQLite only with the session named in each ``OR``
        term) but cost every journaled write a page or two more (SQLite WAL pages 16.6 -> 18.9 per new file, 10.8
        -> 12.0 per overwrite; PostgreSQL WAL 2,607 -> 2,807 bytes): left out (``bench/bench_sql_history_path.py``)."""
        query = sa.select(J).where(*self._where(path, since, actor)).order_by(J.c.seq.desc())
        found: dict[Any, None] = {}
        rows: list[Any] = []
        batch = 200 if limit is None else max(2 * limit, 50)
        with self._store.read() as connection:
            offset = 0
            while True:
                page = connection.execute(query.offset(offset).limit(batch)).all()
                for row in page:
                    key = row.op_key if row.op_key is not None else row.seq
                    if key not in found and limit is not None and len(found) >= limit:
                        break
                    found.setdefault(key, None)
                    rows.append(row)
                else:
                    if len(page) == batch:
                        offset += batch
                        continue
                break
            entries = self._complete(connection, rows)
        if isinstance(since, int):
            entries = [e for e in entries if e.entry_id > since]
        return entries if limit is None else entries[:limit]

    def entry(self, entry_id: int) -> JournalEntry:
        with self._store.read() as connection:
            rows = connection.execute(sa.select(J).where(J.c.session_id == self._session, J.c.seq == entry_id)).all()
            found = self._complete(connection, rows)
        if not found or found[0].entry_id != entry_id:
            raise HistoryEntryNotFoundError(f"No journal entry {entry_id}")
        return found[0]

    def entry_of_key(self, op_key: str | None) -> JournalEntry | None:
        """The entry an operation's rows form (``None``: it wrote none)."""
        with self._store.read() as connection:
            rows = connection.execute(
                sa.select(J).where(J.c.session_id == self._session, J.c.op_key == op_key).limit(1)
            ).all()
            found = self._complete(connection, rows)
        return found[0] if found else None

    def retain(self, rows: int) -> int:
        """Retention's quick pass: drop the entries older than the newest ``rows`` rows (so at most that many
        entries stay; an index lookup, not a walk of the entries). Returns how many entries went."""
        # distinct numbers spread over fewer than ``rows``: fewer rows than that, nothing to walk (one statement of
        # two seeks; the walk cost 0.2-0.5 ms at 2,000-8,000 rows, every 256th write: 1-2 µs per write).
        # SQLite numbers each session's rows one after another, so its spans are tight; PostgreSQL's one sequence
        # for all sessions walks more often
        with self._store.driver.statement() as tx:
            cursor = tx.run(self._store.sql.journal_span, (self._session, self._session))
            tx.sync()
            newest, oldest = cursor.fetchone()
        if newest is None or newest - oldest < rows:
            return 0
        if self._store.dialect == "sqlite":
            # a session's rows are numbered one after another and pruning drops the oldest: the newest ``rows`` rows
            # are the numbers above ``newest - rows`` (no walk of 10,000 index entries per pass). A gap (a prune by
            # age after the clock went back) would only keep fewer
            return self._drop([J.c.seq <= newest - rows])
        newest_first = sa.select(J.c.seq).where(J.c.session_id == self._session).order_by(J.c.seq.desc())
        with self._store.read() as connection:
            cut = connection.execute(newest_first.offset(rows).limit(1)).scalar()
        return 0 if cut is None else self._drop([J.c.seq <= cut])

    def prune(self, *, before: datetime | None = None, keep: int | None = None) -> int:
        doomed: list[sa.ColumnElement[bool]] = []
        if keep is not None:
            kept = self.entries(limit=keep) if keep else []
            if not keep or len(kept) == keep:
                threshold = min((e.entry_id for e in kept), default=None)
                doomed.append(J.c.seq < threshold if threshold is not None else sa.true())
        if before is not None:
            doomed.append(J.c.at < before)
        return self._drop(doomed) if doomed else 0

    def _drop(self, doomed: Sequence[sa.ColumnElement[bool]]) -> int:
        """Delete every entry with a row matching any of ``doomed`` (whole entries), and release what only
        they kept."""
        with self._store.write() as connection:
            old = sa.and_(J.c.session_id == self._session, sa.or_(*doomed))
            rows = connection.execute(sa.select(J.c.seq, J.c.op_key, J.c.before_id).where(old)).all()
            keys = sorted({r.op_key for r in rows if r.op_key is not None})
            singles = [r.seq for r in rows if r.op_key is None]
            held = {r.before_id for r in rows if r.before_id and r.before_id != DIRECTORY}
            for start in range(0, len(keys), 500):  # whole entries only: one straddling the cut goes too
                mine = sa.and_(J.c.session_id == self._session, J.c.op_key.in_(keys[start : start + 500]))
                held.update(
                    r[0] for r in connection.execute(sa.select(J.c.before_id).where(mine)) if r[0] and r[0] != DIRECTORY
                )
                connection.execute(sa.delete(J).where(mine))
            for start in range(0, len(singles), 500):
                batch = singles[start : start + 500]
                connection.execute(sa.delete(J).where(J.c.session_id == self._session, J.c.seq.in_(batch)))
            self._store.release(connection, sorted(held))
        return len(keys) + len(singles)

    # --- watching -------------------------------------------------------------------------------------

    def changed(self) -> None:
        """A change of this process committed: every journal of the session in this process that is watched
        publishes it (any filesystem object of the session, not only the one written through); on PostgreSQL
        the listener does that instead, for every process."""
        if not self._peers.watched or self._store.dialect == "postgresql":
            return
        with _PEERS_LOCK:
            peers = list(self._peers.journals)
        for peer in peers:
            if peer.watched:
                peer._catch_up()

    def _watching_started(self) -> None:
        with self._lifecycle:  # never while the last watcher's stop is still under way
            if not self.watched:
                return
            with _PEERS_LOCK:
                if not self._counted:
                    self._counted = True
                    self._peers.watched += 1
            if self._listener is not None:
                return
            with self._store.read() as connection:
                newest = sa.select(sa.func.max(J.c.seq)).where(J.c.session_id == self._session)
                self.last_seen = self.first_seen = int(connection.execute(newest).scalar() or 0)
            self._sent.clear()
            if self._store.dialect != "postgresql":
                return
            self._stop.clear()
            ready = threading.Event()
            self._listener = threading.Thread(
                target=self._listen, args=(ready,), name="wsfs-journal-listen", daemon=True
            )
            self._listener.start()
            ready.wait(10)

    def _watching_stopped(self) -> None:
        with self._lifecycle:
            if self.watched:  # a watch() came in since the last watcher closed: keep going
                return
            with _PEERS_LOCK:
                if self._counted:
                    self._counted = False
                    self._peers.watched -= 1
            listener, self._listener = self._listener, None
            if listener is not None:
                self._stop.set()
                listener.join(5)

    def _listen(self, ready: threading.Event) -> None:
        """``LISTEN wsfs_journal`` on a connection of its own; publish the session's new entries. A lost
        connection (the server restarted, the backend was terminated) is made again, with growing waits, and
        what was committed meanwhile is published then: the watchers never silently stop hearing."""
        import psycopg  # noqa: PLC0415 - only a PostgreSQL store listens

        delay = _RELISTEN_FIRST
        try:
            while not self._stop.is_set():
                try:
                    self._listen_once(ready)
                    return  # stopped
                except (psycopg.Error, sa.exc.DBAPIError, OSError):  # the connection failed: make it again
                    ready.set()  # a watch() waiting for the first LISTEN goes on (it catches up later)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, _RELISTEN_MAX)
        finally:
            ready.set()

    def _listen_once(self, ready: threading.Event) -> None:
        """One connection's life: LISTEN, publish what came since the last one, then each notification."""
        proxy = self._store.engine.raw_connection()
        connection: Any = proxy.driver_connection
        proxy.detach()  # never back into the pool: in autocommit, the pool's next writer would commit per statement
        try:
            connection.autocommit = True
            connection.execute("LISTEN wsfs_journal")
            if ready.is_set():  # made again: what was committed while no one listened
                self._catch_up()
            ready.set()
            while not self._stop.is_set():
                for note in connection.notifies(timeout=0.2, stop_after=100):
                    session, _, _seq = note.payload.rpartition(" ")
                    if session == self._session:  # at once: after the loop is 0.2 s (or 100 notes) later
                        self._catch_up()
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def _catch_up(self) -> None:
        """Publish the rows not published yet, oldest first (a change made in several transactions is published
        as each commits). A row takes its ``seq`` at insert but appears at commit, so a slow transaction can
        commit behind a later one: the query reaches back past the last :data:`_TRAIL` rows published and skips
        those, so a row committed that late is still published (once)."""
        twin = J.alias("twin")
        first = (
            sa.select(sa.func.min(twin.c.seq))
            .where(twin.c.session_id == J.c.session_id, twin.c.op_key == J.c.op_key)
            .scalar_subquery()
        )
        entry_id = sa.case((J.c.op_key.is_(None), J.c.seq), else_=first)
        with self._lock_catch_up, self._store.read() as connection:
            low = self._sent[0] - 1 if len(self._sent) == _TRAIL else self.first_seen
            found = connection.execute(
                sa.select(J, entry_id.label("entry_id"))
                .where(J.c.session_id == self._session, J.c.seq > low)
                .order_by(J.c.seq)
            ).all()
            sent = set(self._sent)
            rows = [row for row in found if row.seq not in sent]
            for row in rows:
                self._sent.append(int(row.seq))
                self.last_seen = max(self.last_seen, int(row.seq))
        events = []
        for row in rows:
            change = _change(row)
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
        tuple(_change(r) for r in rows),
        None if first.undoes is None else int(first.undoes),
        rows[-1].detail,  # a group's detail grows with the operations run in it (Scope.absorb): the last is whole
    )


def _change(row: Any) -> Change:
    """The change one journal row records (with the read-only flag where it set it: migration ``0010``)."""
    return Change(
        row.path,
        row.before_id,
        row.after_id,
        int(row.size_before),
        int(row.size_after),
        row.from_path,
        None if row.read_only_before is None else bool(row.read_only_before),
        None if row.read_only_after is None else bool(row.read_only_after),
    )
