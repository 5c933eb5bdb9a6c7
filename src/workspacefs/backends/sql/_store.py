"""``SqlStore``: one database (SQLite or PostgreSQL) holding many sessions' files, deduplicated.

The store owns the engine and everything below the filesystem semantics: transactions that behave
the same on both databases (SQLite in WAL mode with ``BEGIN IMMEDIATE`` for writers and a busy
timeout; PostgreSQL at READ COMMITTED with row locks), migrations, sessions, the content-addressed
chunk and blob tables, and garbage collection of content nothing refers to any more.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, InternalError, OperationalError

from workspacefs.backends.sql import _grep_index as grep_index
from workspacefs.backends.sql._content import (
    CONTENT_LOCK,
    STORED_OBJECT,
    STORED_SQL,
    ContentStore,
    check_chunk_list,
    check_piece,
    missing_chunk,
)
from workspacefs.backends.sql._driver import Driver
from workspacefs.backends.sql._hot import Statements, release_statements
from workspacefs.backends.sql._lock_order import lock_session
from workspacefs.backends.sql._reach import classified, foreign_key_failed, key_taken, raised_in_database, refused
from workspacefs.backends.sql._schema import (
    CHUNK_SIZE,
    blob_chunks,
    blobs,
    chunks,
    file_versions,
    journal,
    session_files,
    sessions,
    snapshot_entries,
    snapshots,
    uploads,
)
from workspacefs.backends.sql._turns import Turns, turns_for
from workspacefs.errors import ConcurrentChangeError, file_not_found
from workspacefs.protocol import BytesLike
from workspacefs.quota import QUOTA_URL_PARAMETERS
from workspacefs.streams import content_id_of_chunks

__all__ = [
    "UPLOAD_GRACE",
    "GcReport",
    "SessionInfo",
    "SqlStore",
    "default_database",
    "engine_url",
    "migrate",
    "missing_database",
]

CONTENT_STORE_URL_PARAMETERS = ("content_store", "content_store_min_bytes")
HISTORY_URL_PARAMETERS = ("history", "history_entries")
DEFAULT_HISTORY_ENTRIES = 10_000
"""Journal entries each session keeps by default; older ones, and the content only they held, are dropped."""
_PRUNE_EVERY = 256
"""Journaled commits of a store between two retention passes over the session just written."""
"""Options of a SQL URL that configure its store's content store (``content_store`` percent-encoded)."""
UPLOAD_GRACE = timedelta(hours=1)
"""A streaming write silent for this long is taken for abandoned by :meth:`SqlStore.gc`."""
SQLITE_BUSY_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class GcReport:
    """What a collection removed (or, in a dry run, would remove): chunk rows of the database and chunk
    objects of the content store (their keys)."""

    chunks: int
    objects: list[str]
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session of the store: one isolated tree of files and its snapshots."""

    session_id: str
    created_at: datetime
    updated_at: datetime


def engine_url(url: str) -> tuple[str, dict[str, str]]:
    """SQLAlchemy URL for a workspacefs URL (``postgresql://`` uses psycopg 3) and its workspacefs options.

    Query parameters the database driver does not know (``session``, ``read_only`` …) are taken out.
    """
    parsed = sa.engine.make_url(url)
    ours = {"session", "read_only", "agent", "mount_point", "create", *CONTENT_STORE_URL_PARAMETERS}
    ours |= set(HISTORY_URL_PARAMETERS)
    ours |= set(QUOTA_URL_PARAMETERS)
    options = {k: str(v) for k, v in parsed.query.items() if k in ours}
    parsed = parsed.difference_update_query(list(ours))
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if not parsed.drivername.startswith(("sqlite", "postgresql")):
        raise ValueError(f"SqlStore supports sqlite:// and postgresql:// URLs, not {parsed.drivername}://")
    return parsed.render_as_string(hide_password=False), options


ROW_GONE = "A row this change refers to was deleted by another connection meanwhile; try again"
_HASH: Any = sa.bindparam("b_hash")
_BLOB: Any = sa.bindparam("b_blob")
_CHUNK_EXISTS = sa.select(chunks.c.hash).where(chunks.c.hash == _HASH)
_CHUNK_DATA = sa.select(chunks.c.data, chunks.c.stored, chunks.c.size).where(chunks.c.hash == _HASH)
_CHUNK_STORED = sa.select(chunks.c.stored).where(chunks.c.hash == _HASH)
_CHUNK_HASHES = sa.select(blob_chunks.c.chunk_hash).where(blob_chunks.c.blob_id == _BLOB).order_by(blob_chunks.c.seq)
_INLINE_DATA = sa.select(blobs.c.data).where(blobs.c.id == _BLOB)
_INSERT_BLOB_CHUNKS = sa.insert(blob_chunks)
_SESSION_BY_ID = sa.select(sessions).where(sessions.c.id == sa.bindparam("b_id"))
_SESSION_ROW = sa.select(sessions.c.id).where(sessions.c.id == sa.bindparam("b_id"))
_HOLD_SESSION = _SESSION_ROW.with_for_update(key_share=True)


def _utc(stamp: datetime) -> datetime:
    """SQLite hands back naive timestamps; every stamp the store writes is UTC."""
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's "begin" event below decides how to begin
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        # writers take the lock up front, so two writers never deadlock upgrading from a read
        immediate = connection.get_execution_options().get("wsfs_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def migration_config() -> Any:
    """The Alembic configuration of storage's migrations (set ``attributes["connection"]`` to run it)."""
    from alembic.config import Config  # noqa: PLC0415 - only needed when migrating

    config = Config()
    config.set_main_option("script_location", str(resources.files("workspacefs.backends.sql") / "migrations"))
    return config


SCHEMA_LOCK = 0x77736673_736368
"""The PostgreSQL advisory lock key ("wsfssch") held while a schema is migrated."""


def hold_schema_lock(connection: Connection) -> None:
    """Serialise migrations of one database for the rest of the transaction: several processes starting at
    once on a new PostgreSQL database otherwise race to create the same tables (SQLite's ``BEGIN
    IMMEDIATE`` already lets one writer in at a time)."""
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})")


def migrate(engine_or_url: Engine | str) -> None:
    """Bring the schema up to the newest migration (idempotent; run on first use; one process at a time)."""
    from alembic import command  # noqa: PLC0415 - only needed when migrating

    engine = engine_or_url if isinstance(engine_or_url, Engine) else sa.create_engine(engine_url(engine_or_url)[0])
    config = migration_config()
    with engine.connect().execution_options(wsfs_write=True) as connection, connection.begin():
        hold_schema_lock(connection)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    if not isinstance(engine_or_url, Engine):
        engine.dispose()


_COLLECT_BATCH = 1000
"""Blob ids per statement when collecting: a session's whole set may pass PostgreSQL's 65,535 bind parameters."""
_ANALYZE_AFTER = 2000
"""Blobs indexed in one catch-up after which PostgreSQL's statistics of the index tables are renewed."""


class SqlStore:
    """Sessions and their content in one database; hand out filesystems with :meth:`filesystem`."""

    _migrated: ClassVar[set[str]] = set()
    _migrate_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        content_store: str | ContentStore | None = None,
        content_store_min_bytes: int | None = None,
        history: bool | None = None,
        history_entries: int | None = None,
    ) -> None:
        """Open (and migrate) the database at ``url``.

        ``history`` (default on; the URL option ``history=off`` too) journals every change in its own
        transaction, keeping the newest ``history_entries`` entries per session (default 10,000) and the
        content they replaced, for ``history``/``undo``; off, replaced content is collected at once.

        ``content_store`` (or the URL's ``content_store`` option, percent-encoded) is an
        ``s3://bucket/prefix?endpoint_url=…`` URL: chunks of at least ``content_store_min_bytes`` (default
        one whole chunk, 256 KiB; the URL option of that name too) are kept there instead of in the database,
        content-addressed, and collected by :meth:`collect` (``workspacefs gc``). Without it every byte stays
        in the database.
        """
        self.url, options = engine_url(url)
        self.content = _content_store(content_store, content_store_min_bytes, options)
        """Where large chunks are kept (``None``: in the database)."""
        self.history, self.history_entries = _history_options(history, history_entries, options)
        """Whether changes are journaled, and how many entries each session keeps."""
        self._journaled_commits = 0
        self.dialect = sa.engine.make_url(self.url).get_backend_name()
        self._writers: Turns | None = None
        if self.dialect == "sqlite":
            database = sa.engine.make_url(self.url).database
            self._writers = turns_for(database, SQLITE_BUSY_TIMEOUT_MS / 1000)
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            self.engine = sa.create_engine(self.url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
            _configure_sqlite(self.engine)
        else:
            self.engine = sa.create_engine(
                self.url, pool_size=pool_size, max_overflow=2 * pool_size, pool_pre_ping=True
            )
        self.shown_url = sa.engine.make_url(self.url).render_as_string(hide_password=True)
        """The database's URL for messages (no password)."""
        self.driver = Driver(
            self.engine, self.dialect, pool_size=pool_size, where=self.shown_url, writers=self._writers
        )
        """The hot paths' own connections (driver-level statements; see :mod:`._driver`)."""
        self.sql = Statements.build(self.dialect, self.driver.sql)
        """The hot statements, in this database's dialect and placeholder style."""
        insert = self.insert
        self._insert_chunk = sa.insert(chunks)
        self._upsert_chunk = insert(chunks).on_conflict_do_update(
            index_elements=["hash"], set_={"touched_at": insert(chunks).excluded.touched_at}
        )
        # RETURNING says whether a row was inserted; rowcount is not reliable under every driver
        self._insert_blob = insert(blobs).on_conflict_do_nothing(index_elements=["id"]).returning(blobs.c.id)
        self.insert_file_row = (
            insert(session_files)
            .on_conflict_do_nothing(index_elements=["session_id", "path"])
            .returning(session_files.c.path)
        )
        with SqlStore._migrate_lock:
            if self.url not in SqlStore._migrated:
                try:
                    migrate(self.engine)
                except sa.exc.OperationalError as exc:  # no server, no such database, a file it cannot open
                    self.engine.dispose()
                    shown = sa.engine.make_url(self.url).render_as_string(hide_password=True)
                    reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
                    raise ConnectionError(f"Cannot use the database {shown}: {reason}") from exc
                SqlStore._migrated.add(self.url)

    # --- transactions -------------------------------------------------------------------------------

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        """A lost or refused connection becomes ``ConnectionError``, a broken deadlock ``ConcurrentChangeError``
        (see ``_reach.py``)."""
        try:
            yield
        except sa.exc.DBAPIError as exc:
            lost = classified(exc, self.shown_url)
            if lost is None:
                raise
            raise lost from exc

    @contextmanager
    def write(self, *, checked: bool = True) -> Iterator[Connection]:
        """A write transaction (SQLite: ``BEGIN IMMEDIATE``, after this process's earlier writers of the
        database, see :mod:`._turns`; PostgreSQL: row locks taken by the caller).

        ``checked=False`` (fork only: its rows are copies of rows already valid) runs it on SQLite without
        foreign key checks, which are a third of a big fork's time; PostgreSQL checks as always."""
        turns = self._writers
        taken = turns is not None and turns.take()
        try:
            with (
                self._reachable(),
                self.engine.connect().execution_options(wsfs_write=True) as connection,
                self._unchecked(connection) if not checked and self.dialect == "sqlite" else nullcontext(),
                connection.begin(),
            ):
                yield connection
        finally:
            if taken:
                assert turns is not None
                turns.give()

    @contextmanager
    def session_write(self, session_id: str, path: str = "/") -> Iterator[Connection]:
        """:meth:`write` for a change of session ``session_id``: a foreign key's refusal because the session was
        deleted meanwhile (by any connection) raises what every change of a deleted session raises,
        ``FileNotFoundError`` naming ``path``; with the session back (made again) ``ConcurrentChangeError``. A
        refusal no concurrent writer causes (not a key, not a foreign key) raises :func:`~._reach.refused` (``OSError``
        EIO). Told by the error's code and the session's row being gone, never by the message."""
        try:
            with self.write() as connection:
                yield connection
        except IntegrityError as exc:
            if foreign_key_failed(exc.orig):
                if not self.session_exists(session_id):
                    raise file_not_found(path) from None
                raise ConcurrentChangeError(path, ROW_GONE) from exc  # deleted and made again: typed, run it again
            if key_taken(exc.orig):  # a concurrent creator's row: the caller decides (look again, or "exists")
                raise
            raise refused(exc, path) from exc  # a NOT NULL, a CHECK, a trigger: no race, running again fails too
        except sa.exc.DBAPIError as exc:
            if raised_in_database(exc):  # a trigger's RAISE without a code of its own
                raise refused(exc, path) from exc
            raise

    def session_exists(self, session_id: str) -> bool:
        """Whether the session's row exists now (in a statement of its own)."""
        with self.read_once() as connection:
            return connection.execute(_SESSION_ROW, {"b_id": session_id}).first() is not None

    def hold_session(self, connection: Connection, session_id: str, path: str = "/", *, lock: bool = True) -> None:
        """Keep the session's row from being deleted until the caller's transaction ends (PostgreSQL: ``FOR KEY
        SHARE``, the lock a foreign key check takes; SQLite's writer holds the database), or raise
        ``FileNotFoundError`` naming ``path`` if it is gone. Taken before the session's advisory lock (see
        :mod:`._lock_order`), so a snapshot never waits for a session's delete while holding what the delete needs.
        ``lock=False``: only the check (a reader, which may be on a standby)."""
        query = _HOLD_SESSION if lock and self.dialect == "postgresql" else _SESSION_ROW
        if connection.execute(query, {"b_id": session_id}).first() is None:
            raise file_not_found(path)

    @contextmanager
    def _unchecked(self, connection: Connection) -> Iterator[None]:
        """SQLite's foreign keys off around a transaction on ``connection`` (the pragma is ignored inside one,
        so it goes to the driver's connection before SQLAlchemy begins), on again after it; a connection whose
        transaction or pragma failed is discarded, so one with foreign keys off never serves another writer."""
        raw = connection.connection.driver_connection
        assert raw is not None
        restored = False
        raw.execute("PRAGMA foreign_keys=OFF")
        try:
            yield
            raw.execute("PRAGMA foreign_keys=ON")
            restored = True
        finally:
            if not restored:
                connection.invalidate()

    @contextmanager
    def read_once(self) -> Iterator[Connection]:
        """A connection for one statement, without BEGIN/COMMIT round trips (a statement is atomic)."""
        with self._reachable(), self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            yield connection

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction: one consistent view for everything inside it."""
        with self._reachable(), self.engine.connect() as connection, connection.begin():
            yield connection

    def insert(self, table: sa.Table) -> Any:
        """``INSERT`` with this dialect's ``ON CONFLICT`` support."""
        return (postgresql if self.dialect == "postgresql" else sqlite).insert(table)

    def lock(self, statement: sa.Select[Any], *, shared: bool = False) -> sa.Select[Any]:
        """``SELECT … FOR UPDATE`` (or ``FOR SHARE``) where rows can be locked; SQLite's writer already
        holds the whole database."""
        return statement.with_for_update(read=shared) if self.dialect == "postgresql" else statement

    # --- sessions -----------------------------------------------------------------------------------

    def ensure_session(self, connection: Connection, session_id: str) -> None:
        """Create the session and its root directory if they do not exist."""
        now = datetime.now(UTC)
        connection.execute(
            self.insert(sessions)
            .values(id=session_id, created_at=now, updated_at=now)
            .on_conflict_do_nothing(index_elements=["id"])
        )
        connection.execute(
            self.insert(session_files)
            .values(
                session_id=session_id,
                path="",
                parent=None,
                name="",
                is_directory=True,
                is_readonly=False,
                blob_id=None,
                size_bytes=0,
                created_at=now,
                updated_at=now,
            )
            .on_conflict_do_nothing(index_elements=["session_id", "path"])
        )

    def create_session(self, connection: Connection, session_id: str) -> None:
        """Create a session in the caller's transaction (``FileExistsError`` if the id is taken)."""
        if connection.execute(sa.select(sessions.c.id).where(sessions.c.id == session_id)).first():
            raise FileExistsError(f"Session {session_id!r} already exists")
        self.ensure_session(connection, session_id)

    def session(self, session_id: str) -> SessionInfo | None:
        """A session by id, or ``None``."""
        with self.read_once() as connection:
            row = connection.execute(_SESSION_BY_ID, {"b_id": session_id}).first()
        return None if row is None else SessionInfo(row.id, _utc(row.created_at), _utc(row.updated_at))

    def sessions(self) -> list[SessionInfo]:
        """Every session of the store, oldest first."""
        query = sa.select(sessions).order_by(sessions.c.created_at, sessions.c.id)
        with self.read() as connection:
            rows = connection.execute(query).all()
        return [SessionInfo(r.id, _utc(r.created_at), _utc(r.updated_at)) for r in rows]

    def delete_session(self, session_id: str, connection: Connection | None = None) -> bool:
        """Delete a session with its files and snapshots (in ``connection``'s transaction when given);
        ``False`` if it did not exist."""
        if connection is None:
            with self.write() as own:
                return self.delete_session(session_id, own)
        if self.dialect == "postgresql":
            lock_session(connection, session_id)  # before the session's row: the writers' order (_lock_order)
        released = self._blob_ids(connection, session_id)
        # its snapshots first, so the triggers stop keeping versions of the rows the session's delete cascades to
        connection.execute(sa.delete(snapshots).where(snapshots.c.session_id == session_id))
        connection.execute(sa.delete(file_versions).where(file_versions.c.session_id == session_id))
        deleted = connection.execute(
            sa.delete(sessions).where(sessions.c.id == session_id).returning(sessions.c.id)
        ).first()
        self.release(connection, released)
        return deleted is not None

    def _blob_ids(self, connection: Connection, session_id: str) -> set[str]:
        files = sa.select(session_files.c.blob_id).where(session_files.c.session_id == session_id)
        snaps = (
            sa.select(snapshot_entries.c.blob_id)
            .join(snapshots, snapshots.c.id == snapshot_entries.c.snapshot_id)
            .where(snapshots.c.session_id == session_id)
        )
        kept = sa.select(journal.c.before_id).where(
            journal.c.session_id == session_id, journal.c.before_id != "directory"
        )
        held = sa.select(file_versions.c.blob_id).where(file_versions.c.session_id == session_id)
        return {r[0] for r in connection.execute(sa.union(files, snaps, kept, held)) if r[0] is not None}

    # --- content ------------------------------------------------------------------------------------

    def upload_chunks(self, upload_id: str, first_seq: int, pieces: Sequence[BytesLike]) -> list[str]:
        """Store chunks of a streaming write (numbered from ``first_seq``) in one short transaction (one
        round trip on PostgreSQL); the upload rows keep them from collection until the write commits
        (or is abandoned and collected by :meth:`gc`). Their hashes, in order."""
        content = self.content
        if content is not None and any(content.goes_out(len(piece)) for piece in pieces):
            with self.write() as connection:  # chunk objects are written under the content lock (see put_chunk)
                now = datetime.now(UTC)
                hashes = []
                for seq, piece in enumerate(pieces, first_seq):
                    hashes.append(self.put_chunk(connection, bytes(piece)))
                    connection.execute(
                        sa.insert(uploads).values(upload_id=upload_id, seq=seq, chunk_hash=hashes[-1], created_at=now)
                    )
                return hashes
        digests = [hashlib.sha256(piece).hexdigest() for piece in pieces]
        driver = self.driver
        with driver.transaction(write=True) as tx:
            now = driver.now()
            for seq, (digest, piece) in enumerate(zip(digests, pieces, strict=True), first_seq):
                tx.run(self.sql.put_chunk, (digest, len(piece), piece, now))
                tx.run(self.sql.hold_chunk, (upload_id, seq, digest, now))
        return digests

    def finish_upload(self, connection: Connection, upload_id: str) -> None:
        """Drop an upload's hold on its chunks (in the transaction that commits or abandons it)."""
        connection.execute(sa.delete(uploads).where(uploads.c.upload_id == upload_id))

    def abandon_upload(self, upload_id: str, path: str | None = None) -> None:
        """Forget an aborted upload of ``path`` and collect the chunks nothing else uses."""
        with self.write() as connection:
            hashes = [
                r[0]
                for r in connection.execute(sa.select(uploads.c.chunk_hash).where(uploads.c.upload_id == upload_id))
            ]
            self.finish_upload(connection, upload_id)
            self.drop_unused_chunks(connection, hashes, path)

    def put_chunk(self, connection: Connection, data: bytes) -> str:
        """Store a chunk unless an identical one exists; return its hash.

        On PostgreSQL an existing row is touched (``ON CONFLICT DO UPDATE``), which locks it: a
        concurrent collection of that chunk then waits, and fails on the foreign key, instead of
        deleting content this transaction is about to use. SQLite writers are serialised already.
        """
        digest = hashlib.sha256(data).hexdigest()
        row = {"hash": digest, "size": len(data), "data": data, "touched_at": datetime.now(UTC), "stored": STORED_SQL}
        if self.content is not None and self.content.goes_out(len(data)):
            self._put_object_chunk(connection, digest, data, row)
            return digest
        if self.dialect == "postgresql":
            connection.execute(self._upsert_chunk, row)
        elif connection.execute(_CHUNK_EXISTS, {"b_hash": digest}).first() is None:
            connection.execute(self._insert_chunk, row)
        return digest

    def lock_content(self, connection: Connection, *, exclusive: bool = False) -> None:
        """Take the content lock for the rest of the transaction (see :mod:`._content`): shared by a writer
        before it writes a chunk object, exclusive while :meth:`gc` deletes objects. SQLite: every write
        transaction already holds the database's one write lock."""
        if self.dialect == "postgresql":
            function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
            connection.exec_driver_sql(f"SELECT {function}({CONTENT_LOCK})")

    def _put_object_chunk(self, connection: Connection, digest: str, data: bytes, row: dict[str, Any]) -> None:
        """Store a chunk in the content store: its object first, then its row, both under the content lock.

        A chunk row that exists names bytes that exist (in ``data``, or as an object the collector cannot
        delete while this transaction holds the lock), so only a new chunk costs a PUT: identical content is
        one object however many files hold it."""
        assert self.content is not None
        self.lock_content(connection)
        stored = connection.execute(_CHUNK_STORED, {"b_hash": digest}).scalar()
        if stored is None:
            self.content.put(digest, data)  # before the row: a crash leaves an object without a row, never the reverse
        if stored != STORED_SQL:  # a chunk already in the database keeps its row (and bytes) as they are
            row = {**row, "data": b"", "stored": STORED_OBJECT}
        if self.dialect == "postgresql":
            connection.execute(self._upsert_chunk, row)
        elif stored is None:
            connection.execute(self._insert_chunk, row)

    def chunk_bytes(self, digest: str, data: Any, stored: str | None, size: int, path: str | None = None) -> bytes:
        """A chunk's bytes from its row's ``data``, ``stored`` and ``size``: the row's own, or its object's (an
        ``OSError`` names ``path``, the file being read: DESIGN §3; the chunk's hash only in the message)."""
        if stored == STORED_OBJECT:
            if self.content is None:
                message = f"Chunk {digest} is in a content store; open the store with content_store=…"
                raise OSError(5, message, path)
            return self.content.get(digest, size, path)
        return bytes(data)

    def register_blob(self, connection: Connection, hashes: Sequence[str], size: int) -> str:
        """The blob made of ``hashes`` (stored chunks), created if new; its id names its content."""
        blob_id = blob_id_for(hashes, size)
        inserted = connection.execute(self._insert_blob, {"id": blob_id, "size": size, "chunk_count": len(hashes)})
        if inserted.first() is not None and hashes:  # a new blob: list its chunks (an existing one already has)
            connection.execute(
                _INSERT_BLOB_CHUNKS,
                [{"blob_id": blob_id, "seq": seq, "chunk_hash": digest} for seq, digest in enumerate(hashes)],
            )
        return blob_id

    def put_content(self, connection: Connection, data: bytes) -> str:
        """Store whole content and return its blob id: inline up to one chunk, else cut at fixed offsets."""
        if self.inline(len(data)):
            blob_id = inline_blob_id(data)
            connection.exec_driver_sql(self.sql.put_inline, (blob_id, len(data), data))
            return blob_id
        hashes = [self.put_chunk(connection, data[i : i + CHUNK_SIZE]) for i in range(0, len(data), CHUNK_SIZE)]
        return self.register_blob(connection, hashes, len(data))

    def chunk_hashes(self, connection: Connection, blob_id: str) -> list[str]:
        """The chunk hashes of a blob, in order."""
        return [r[0] for r in connection.execute(_CHUNK_HASHES, {"b_blob": blob_id})]

    def inline(self, size: int) -> bool:
        """Whether whole content of ``size`` bytes is stored in its blob row (at most one chunk, and not
        bound for the content store)."""
        return size <= CHUNK_SIZE and (size == 0 or self.content is None or not self.content.goes_out(size))

    def read_chunk(self, connection: Connection, digest: str, path: str) -> bytes:
        """One chunk of the file at ``path``, from the database or the content store."""
        row = connection.execute(_CHUNK_DATA, {"b_hash": digest}).first()
        if row is None:
            raise missing_chunk(digest, path)
        return self.chunk_bytes(digest, row.data, row.stored, row.size, path)

    def checked_chunk(self, connection: Connection, hashes: Sequence[str], index: int, size: int, path: str) -> bytes:
        """Chunk ``index`` of the file at ``path`` (``size`` bytes listed as ``hashes``), if it holds what it must."""
        digest = hashes[index]
        return check_piece(self.read_chunk(connection, digest, path), index, size, digest, path)

    def checked_chunks(self, connection: Connection, hashes: Sequence[str], size: int, path: str) -> Iterator[bytes]:
        """Every chunk of the file at ``path``, ``size`` bytes listed as ``hashes``, each checked against the size:
        a list that lost a row, or a chunk of the wrong length, is EIO naming ``path`` (never a shorter file)."""
        check_chunk_list(len(hashes), size, path)
        for index in range(len(hashes)):
            yield self.checked_chunk(connection, hashes, index, size, path)

    def blob_parts(self, connection: Connection, blob_id: str) -> tuple[list[str], bytes | None]:
        """A blob's chunk hashes in order, or its inline content (then no hashes)."""
        hashes = self.chunk_hashes(connection, blob_id)
        if hashes:
            return hashes, None
        data = connection.execute(_INLINE_DATA, {"b_blob": blob_id}).scalar()
        return [], None if data is None else bytes(data)

    # --- garbage collection ---------------------------------------------------------------------------

    def release(
        self,
        connection: Connection,
        blob_ids: Iterable[str | None],
        path: str | None = None,
        *,
        committed: bool = False,
    ) -> None:
        """Delete the given blobs if nothing refers to them any more, then their orphaned chunks.

        Each delete carries its own "unreferenced" condition, so checking and deleting is one statement.
        On PostgreSQL foreign keys also guard against a concurrent writer: if a delete would orphan a row
        it fails, the savepoint around this collection rolls back, and the content stays (``gc`` collects
        it later). SQLite's writers run one at a time, so there is no such race there. Any other refusal
        raises :func:`~._reach.refused` naming ``path`` (the change being made; ``committed``: made already, by an
        earlier transaction).
        """
        candidates = sorted({b for b in blob_ids if b})
        if not candidates:
            return
        if self.dialect != "postgresql":
            self._collect(connection, candidates)
            return
        with self._losing_races(path, committed=committed), connection.begin_nested():
            self._collect(connection, candidates)

    @contextmanager
    def _losing_races(self, path: str | None, *, committed: bool = False) -> Iterator[None]:
        """Around a collection's savepoint: a foreign key's refusal (a concurrent writer refers to the content
        again) keeps the content, silently; any other (a ``CHECK``, a trigger, a ``NOT NULL``: the schema and this
        code disagree) raises :func:`~._reach.refused` (``OSError`` EIO) naming ``path``."""
        try:
            yield
        except IntegrityError as exc:
            if not foreign_key_failed(exc.orig):
                raise refused(exc, path, committed=committed) from exc
        except sa.exc.DBAPIError as exc:
            if raised_in_database(exc):  # a trigger's RAISE without a code of its own
                raise refused(exc, path, committed=committed) from exc
            raise

    def _collect(self, connection: Connection, blob_ids: Sequence[str]) -> None:
        hashes: set[str] = set()
        for start in range(0, len(blob_ids), _COLLECT_BATCH):  # PostgreSQL takes at most 65,535 parameters
            batch = blob_ids[start : start + _COLLECT_BATCH]
            query = sa.select(blob_chunks.c.chunk_hash).where(blob_chunks.c.blob_id.in_(batch)).distinct()
            hashes.update(connection.execute(query).scalars())
        for sql, params in self.release_statements(blob_ids, sorted(hashes)):
            connection.exec_driver_sql(sql, params)

    def _drop_unused_chunks(self, connection: Connection, hashes: Iterable[str]) -> None:
        for sql, params in self.release_statements([], list(hashes)):
            connection.exec_driver_sql(sql, params)

    def release_statements(
        self, blob_ids: Sequence[str], chunk_hashes: Sequence[str]
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """:func:`_hot.release_statements` in this database's placeholder style (every collection uses it)."""
        return [(self.driver.sql(sql), params) for sql, params in release_statements(blob_ids, chunk_hashes)]

    def drop_unused_chunks(self, connection: Connection, hashes: Iterable[str], path: str | None = None) -> None:
        """Delete the chunks among ``hashes`` nothing uses (in a savepoint on PostgreSQL, as :meth:`release`)."""
        if self.dialect != "postgresql":
            self._drop_unused_chunks(connection, hashes)
            return
        with self._losing_races(path), connection.begin_nested():
            self._drop_unused_chunks(connection, hashes)

    def gc(self, *, grace: timedelta = UPLOAD_GRACE) -> int:
        """Collect everything nothing refers to: blobs, chunks, and uploads abandoned longer than
        ``grace`` ago (a writer that crashed mid-stream). Returns the chunks deleted.

        Chunk objects of a content store are collected by :meth:`collect` (which calls this first)."""
        with self.write() as connection:
            return self._gc_rows(connection, datetime.now(UTC) - grace)

    def collect(self, *, grace: timedelta = UPLOAD_GRACE, dry_run: bool = False) -> GcReport:
        """:meth:`gc`, then delete the content store's chunk objects that no chunk row names and that were
        written more than ``grace`` ago (``workspacefs gc``).

        Safe against concurrent writers: objects are deleted inside a transaction that holds the content
        lock exclusively and has re-checked, after taking it, that no row names them (see :mod:`._content`).
        ``dry_run`` does the same work in one transaction that is rolled back, and deletes no object: the
        report lists what a real run would remove now."""
        cutoff = datetime.now(UTC) - grace
        content = self.content
        if dry_run:
            candidates = content.older_than(cutoff) if content is not None else []
            with self.engine.connect().execution_options(wsfs_write=True) as connection:
                transaction = connection.begin()
                try:
                    collected = self._gc_rows(connection, cutoff)
                    doomed = self._unreferenced(connection, candidates)
                finally:
                    transaction.rollback()
            return GcReport(collected, doomed, dry_run=True)
        collected = self.gc(grace=grace)
        if content is None:
            return GcReport(collected, [])
        candidates = content.older_than(cutoff)  # listed before the lock: a writer's newer object is not among them
        with self.write() as connection:
            self.lock_content(connection, exclusive=True)
            doomed = self._unreferenced(connection, candidates)
            content.client.delete(doomed)  # while the lock is held: no writer can be about to name them
        return GcReport(collected, doomed)

    def _unreferenced(self, connection: Connection, candidates: Sequence[Any]) -> list[str]:
        """The keys among ``candidates`` (chunk objects) whose chunk has no row that keeps it in the store."""
        assert self.content is not None or not candidates
        by_digest = {self.content.digest_of(item.key): item.key for item in candidates} if self.content else {}
        wanted = sorted(d for d in by_digest if d)
        kept: set[str] = set()
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            query = sa.select(chunks.c.hash).where(chunks.c.hash.in_(batch), chunks.c.stored == STORED_OBJECT)
            kept.update(connection.execute(query).scalars())
        return sorted(by_digest[d] for d in wanted if d not in kept)

    def _gc_rows(self, connection: Connection, cutoff: datetime) -> int:
        """The database's part of :meth:`gc`, in the caller's write transaction."""
        connection.execute(sa.delete(uploads).where(uploads.c.created_at < cutoff))
        unreferenced = sa.select(blobs.c.id).where(
            ~sa.exists().where(session_files.c.blob_id == blobs.c.id),
            ~sa.exists().where(snapshot_entries.c.blob_id == blobs.c.id),
            ~sa.exists().where(journal.c.before_id == blobs.c.id),
            ~sa.exists().where(file_versions.c.blob_id == blobs.c.id),
        )
        self.release(connection, [r[0] for r in connection.execute(unreferenced)])
        orphaned = sa.delete(chunks).where(
            ~sa.exists().where(blob_chunks.c.chunk_hash == chunks.c.hash),
            ~sa.exists().where(uploads.c.chunk_hash == chunks.c.hash),
        )
        collected = len(connection.execute(orphaned.returning(chunks.c.hash)).all())
        grep_index.rebuild_if_stale(connection, self.dialect)
        return collected

    def index_for_grep(self) -> int:
        """Bring the grep index up to date (batches of its own transactions); returns the blobs taken.

        A database this process may not write (a read-only file, a standby) leaves the rest queued:
        queued content is always a grep candidate, so results stay complete, only slower."""
        with self.read_once() as connection:
            if not grep_index.anything_queued(connection):
                return 0
        done = 0
        try:
            while True:
                with self.write() as connection:
                    taken = grep_index.index_pending(connection, self.dialect, self.chunk_bytes)
                done += taken
                if taken < grep_index.BATCH:
                    break
        except (OperationalError, InternalError):  # not writable here: queued content stays a candidate
            return done
        if done >= _ANALYZE_AFTER and self.dialect == "postgresql":
            # fresh statistics, or the planner may walk every file of a session to find the few queued blobs
            with self.read_once() as connection:
                connection.exec_driver_sql("ANALYZE wsfs_grep_keys, wsfs_grep_text")
        return done

    def content_stats(self) -> dict[str, int]:
        """Rows and bytes of stored content (for tests and monitoring); inline content counts as a chunk."""
        with self.read() as connection:
            chunk_rows, chunk_bytes = connection.execute(
                sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(chunks.c.size), 0))
            ).one()
            inline_rows, inline_bytes = connection.execute(
                sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(blobs.c.size), 0)).where(
                    blobs.c.data.is_not(None)
                )
            ).one()
            blob_rows = connection.execute(sa.select(sa.func.count()).select_from(blobs)).scalar_one()
        return {
            "chunks": int(chunk_rows) + int(inline_rows),
            "chunk_bytes": int(chunk_bytes) + int(inline_bytes),
            "blobs": int(blob_rows),
        }

    def journaled(self) -> bool:
        """Count one journaled commit; ``True`` when it is time to apply retention to the session written."""
        self._journaled_commits += 1
        return self._journaled_commits % _PRUNE_EVERY == 0

    def close(self) -> None:
        """Release every pooled connection."""
        self.driver.close()
        self.engine.dispose()


def inline_blob_id(data: bytes) -> str:
    """The blob id (content id) of content of at most one chunk: the same as if it were chunked."""
    return blob_id_for([hashlib.sha256(data).hexdigest()] if data else [], len(data))


def blob_id_for(hashes: Sequence[str], size: int) -> str:
    """A blob's id: the hash of its size and chunk hashes (fixed chunking makes it a content id)."""
    return content_id_of_chunks(hashes, size)


def _history_options(history: bool | None, entries: int | None, options: dict[str, str]) -> tuple[bool, int]:
    """``history`` and ``history_entries`` from the arguments, else the URL's options, else the defaults."""
    if history is None:
        flag = options.get("history", "on").lower()
        if flag not in {"on", "off", "true", "false", "1", "0", "yes", "no"}:
            raise ValueError(f"history must be on or off, not {flag!r}")
        history = flag in {"on", "true", "1", "yes"}
    if entries is None:
        try:
            entries = int(options.get("history_entries", DEFAULT_HISTORY_ENTRIES))
        except ValueError:
            raise ValueError("history_entries must be a whole number of entries") from None
    if entries < 0:
        raise ValueError("history_entries must not be negative")
    return history, entries


def _content_store(
    given: str | ContentStore | None, min_bytes: int | None, options: dict[str, str]
) -> ContentStore | None:
    """The content store a store is opened with: the argument, else the URL's ``content_store`` option."""
    url = given if given is not None else options.get("content_store")
    if min_bytes is None and "content_store_min_bytes" in options:
        try:
            min_bytes = int(options["content_store_min_bytes"])
        except ValueError:
            raise ValueError("content_store_min_bytes must be a whole number of bytes") from None
    if url is None or url == "":
        if min_bytes is not None:
            raise ValueError("content_store_min_bytes needs a content_store")
        return None
    threshold = CHUNK_SIZE if min_bytes is None else min_bytes
    if threshold < 1:
        raise ValueError("content_store_min_bytes must be at least 1")
    if isinstance(url, ContentStore):
        return url if min_bytes is None else ContentStore(url.client, url.root, threshold, url.url)
    from workspacefs.backends._objects._opening import client_from_url  # noqa: PLC0415 - needs the s3 extra

    client, root = client_from_url(url)
    return ContentStore(client, root, threshold, url)


def missing_database(url: str) -> str | None:
    """The file a ``sqlite:///`` URL names when it does not exist yet (``None``: it exists, or the URL is an
    in-memory or server database, whose absence only connecting can tell). Lets a reader refuse before
    :class:`SqlStore` would create the file."""
    parsed = sa.engine.make_url(engine_url(url)[0])
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return None if Path(database).exists() else database


def default_database() -> str:
    """The embedded default: a SQLite file under the user's data directory."""
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(data) / 'workspacefs' / 'workspace.db'}"
