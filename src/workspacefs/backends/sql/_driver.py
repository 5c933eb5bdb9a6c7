"""Driver-level transactions for the SQL backend's hot paths: small writes, reads, stats and listings.

SQLAlchemy Core spends 30 to 60 µs compiling, executing and wrapping each statement, and its pool adds a
``SELECT 1`` (pre-ping) and isolation changes per checkout: more than SQLite takes to run the statement,
and several PostgreSQL round trips. So the operations a workspace does thousands of times run prebuilt SQL
text on the DBAPI connection: SQLite in autocommit mode with explicit ``BEGIN IMMEDIATE``; PostgreSQL
(psycopg 3) in autocommit mode for single statements (a read, or a small write, which is one call of a
function: one round trip each) and in pipeline mode for transactions of several statements, so they travel
together and only :meth:`Tx.sync` waits for the server (psycopg's pipeline costs more than it saves for one
statement). The hottest single statements (a small write's call, a small read, a stat) skip even psycopg's cursor:
:meth:`Driver.fetch_row` sends them with libpq and psycopg's C adapters, prepared as psycopg would prepare them.
Everything else still goes through SQLAlchemy on the same tables.
"""

from __future__ import annotations

import contextlib
import select
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine

from workspacefs.backends.sql._poll import Turnaround, poll
from workspacefs.backends.sql._reach import classified, foreign_key_failed
from workspacefs.backends.sql._turns import Turns


class _NeverRaised(Exception):  # noqa: N818 - a stand-in, never raised
    """An error SQLite never raises (its quota check answers instead of failing)."""


_OK: frozenset[int] = frozenset()
_FATAL_ERROR: Any = None
_NOT_PREPARED: type[Exception] = _NeverRaised
try:  # PostgreSQL's driver is optional
    from psycopg.errors import InvalidSqlStatementName
    from psycopg.generators import execute as _exchange
    from psycopg.pq import ExecStatus

    _OK = frozenset((ExecStatus.TUPLES_OK, ExecStatus.COMMAND_OK))
    _FATAL_ERROR = ExecStatus.FATAL_ERROR
    _NOT_PREPARED = InvalidSqlStatementName
except ImportError:  # pragma: no cover - SQLite only
    pass

__all__ = ["Driver", "Prepared", "Scope", "Tx"]


class Tx:
    """Statements of one transaction (or one autocommit statement) on a DBAPI connection.

    :meth:`run` queues a statement and returns its cursor; its rows are readable after :meth:`sync`
    (SQLite runs each statement at once, so ``sync`` costs nothing there).
    """

    __slots__ = ("_binary", "_connection", "_cursors", "_pending", "_pipeline", "_quiet", "after_commit")

    def __init__(
        self,
        connection: Any,
        pipeline: Any,
        *,
        postgres: bool,
        cursors: tuple[Any, Any] | None = None,
        quiet: Any = None,
    ) -> None:
        self._connection = connection
        self._pipeline = pipeline
        self._binary = postgres
        self._cursors = cursors
        """The connection's own cursors (text, binary) when each statement is read before the next runs."""
        self._quiet = quiet
        """SQLite: the connection's own cursor for the statements whose rows nobody reads (see :meth:`do`)."""
        self._pending = False
        self.after_commit: list[tuple[str, Sequence[Any]]] = []

    def collect(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Collect content this transaction stopped using. SQLite: now, in the transaction (its writers
        run one at a time). PostgreSQL: right after the COMMIT, in the same round trip, on their own: a
        collection that loses a race on a foreign key (another transaction is starting to use the
        content) fails alone, the write stays committed, and ``gc`` collects later."""
        if self._pipeline is None:
            for sql, params in statements:
                self.do(sql, params)
        else:
            self.after_commit.extend(statements)

    def run(self, sql: str, params: Sequence[Any] = (), *, binary: bool = False) -> Any:
        """Queue (PostgreSQL) or run (SQLite) one statement; its cursor. ``binary``: PostgreSQL sends the
        results in binary (bytea as raw bytes, not hex text to decode)."""
        self._pending = True
        cursors = self._cursors
        if cursors is not None:  # no new cursor per statement (psycopg's costs more than a SQLite statement)
            return cursors[binary and self._binary].execute(sql, params)
        if binary and self._binary:
            return self._connection.execute(sql, params, binary=True)
        return self._connection.execute(sql, params)

    def do(self, sql: str, params: Sequence[Any] = ()) -> None:
        """:meth:`run` a statement whose rows nobody reads. SQLite runs it on the connection's own cursor: a new
        cursor per statement (``Connection.execute``) cost 0.75 µs, six times per small write."""
        quiet = self._quiet
        if quiet is None:
            self.run(sql, params)
            return
        self._pending = True
        quiet.execute(sql, params)  # it runs to its end: nothing stays open on the cursor

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """A statement's rows, all read before the next statement runs (SQLite: on the connection's own cursor,
        as :meth:`do`)."""
        quiet = self._quiet
        if quiet is None:
            cursor = self.run(sql, params)
            self.sync()
            found: list[Any] = cursor.fetchall()
            return found
        self._pending = True
        return quiet.execute(sql, params).fetchall()  # type: ignore[no-any-return]

    def sync(self, *, force: bool = False) -> None:
        """Wait for every queued statement's result (one round trip on PostgreSQL; none if nothing is
        queued, unless ``force``: after an error, to bring the pipeline back to a clean state)."""
        if self._pipeline is not None and (self._pending or force):
            self._pending = False
            self._pipeline.sync()


class Prepared:
    """A hot PostgreSQL statement that :meth:`Driver.fetch_row` runs on libpq directly: its numbered text, the
    name it is prepared under on each connection, and its parameters' formats (bytea binary, the rest text)."""

    __slots__ = ("binary", "formats", "name", "text", "turnaround")

    def __init__(self, sql: str, number: int, *, binary: bool) -> None:
        from psycopg.adapt import PyFormat  # noqa: PLC0415 - PostgreSQL only

        parts = sql.split("%s")
        if any("%" in part for part in parts):  # a literal percent (``%%``) would need psycopg's own conversion
            raise ValueError(f"fetch_row takes only %s placeholders: {sql!r}")
        self.text = "".join(f"{part}${i}" for i, part in enumerate(parts[:-1], 1)).encode() + parts[-1].encode()
        self.name = f"wsfs_hot_{number}".encode()
        self.formats = [PyFormat.BINARY if p.startswith("::bytea") else PyFormat.TEXT for p in parts[1:]]
        """Text for every parameter but bytea's (its cast, not a type sent, types it: one prepared statement fits
        every call, a ``None`` too)."""
        self.binary = 1 if binary else 0
        """The results' format (binary: bytea as raw bytes)."""
        self.turnaround = Turnaround()
        """Its recent round trips: whether, and how long, its next call polls before blocking (:mod:`._poll`)."""


class Driver:
    """DBAPI connections of a store's engine, pooled here, handing out :class:`Tx` objects.

    ``sql`` turns statement text written with ``?`` placeholders into the driver's style.
    """

    def __init__(
        self, engine: Engine, dialect: str, *, pool_size: int, where: str = "", writers: Turns | None = None
    ) -> None:
        self._engine = engine
        self.writers = writers
        """SQLite: the turns this process's writers of the database take (see :mod:`._turns`)."""
        self.where = where
        """The database, for the message of a lost connection."""
        self.postgres = dialect == "postgresql"
        self._idle: dict[bool, list[tuple[Any, Any]]] = {False: [], True: []}
        """Idle connections: pipelined (PostgreSQL transactions, whose statements travel in batches) and
        plain (single autocommit statements: psycopg's pipeline costs more than it saves for one)."""
        self._pipelines: dict[int, Any] = {}
        self._cursors: dict[int, tuple[Any, Any]] = {}
        """The reused cursors of each plain connection (text, binary)."""
        self._statements: dict[str, Prepared] = {}
        self._adapters: dict[int, tuple[Any, dict[bytes, int]]] = {}
        """Each plain connection's psycopg transformer (C dumpers and loaders, no cursor) and its hot statements:
        how many times each ran unnamed, or ``-1`` once it is prepared."""
        self._lock = threading.Lock()
        self._running = 0
        """How many :meth:`fetch_row` calls of this driver are in flight (under ``_lock``): only a lone one polls."""
        self._pool_size = pool_size
        self.integrity_error: type[Exception] = engine.dialect.dbapi.IntegrityError  # type: ignore[union-attr]
        """The driver's ``IntegrityError`` (a constraint refused a statement)."""
        self.server_error: type[Exception] = engine.dialect.dbapi.Error  # type: ignore[union-attr]
        """The base of the driver's errors (a pipelined PostgreSQL connection one aborted is not kept)."""
        self.quota_refused: type[Exception] = (
            engine.dialect.dbapi.errors.DivisionByZero  # type: ignore[union-attr]
            if self.postgres
            else _NeverRaised
        )
        """What PostgreSQL raises when a write's check in its transaction (``_hot.QUOTA_GUARD``) refuses it."""

    def sql(self, text: str) -> str:
        """``text`` with the driver's placeholder style (``?`` for sqlite3, ``%s`` for psycopg)."""
        return text.replace("?", "%s") if self.postgres else text

    def now(self) -> Any:
        """A timestamp as this database stores it (SQLite: the text SQLAlchemy writes and reads back)."""
        return datetime.now(UTC) if self.postgres else _sqlite_now()

    def stamp(self, value: Any) -> datetime:
        """A stored timestamp as an aware UTC ``datetime``."""
        stamp: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
        return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)

    def _connect(self, pipelined: bool) -> tuple[Any, Any]:
        proxy = self._engine.raw_connection()  # the engine's connect hooks (SQLite pragmas) have run
        connection: Any = proxy.driver_connection
        proxy.detach()
        if not self.postgres:
            return connection, None
        connection.autocommit = True  # transactions are explicit: BEGIN travels in the first batch
        if not pipelined:
            return connection, None
        entered = connection.pipeline()  # held for the connection's life (collecting it would leave the mode)
        self._pipelines[id(connection)] = entered
        return connection, entered.__enter__()

    def _checkout(self, pipelined: bool = True) -> tuple[Any, Any]:
        pipelined = pipelined and self.postgres
        idle = self._idle[pipelined]
        while True:
            with self._lock:
                if not idle:
                    return self._connect(pipelined)
                held = idle.pop()
            if not self.postgres or not _hung_up(held[0]):
                return held
            self._discard(held)  # the server closed it (restart, idle timeout, terminated backend)

    def _checkin(self, held: tuple[Any, Any]) -> None:
        idle = self._idle[held[1] is not None]
        with self._lock:
            if len(idle) < self._pool_size:
                idle.append(held)
                return
        self._discard(held)

    def quiet_cursor(self, connection: Any) -> Any:
        """A SQLite connection's own cursor for statements whose rows nobody reads (:meth:`Tx.do`)."""
        found = self._cursors.get(id(connection))
        if found is None:
            cursor = connection.cursor()
            found = self._cursors[id(connection)] = (cursor, cursor)
        return found[0]

    def cursors(self, connection: Any) -> tuple[Any, Any]:
        """A plain PostgreSQL connection's two cursors (text results, binary results), made on first use."""
        found = self._cursors.get(id(connection))
        if found is None:
            found = self._cursors[id(connection)] = (connection.cursor(), connection.cursor(binary=True))
        return found

    def fetch_row(self, sql: str, params: Sequence[Any], *, binary: bool = False) -> tuple[Any, ...] | None:
        """One autocommit statement's first row (``None``: no row), in one round trip. PostgreSQL: on libpq without
        a psycopg cursor (its Python work per statement cost a small write more CPU than the rest of the client),
        prepared when psycopg would (after ``prepare_threshold`` runs; one round trip more, once); errors as a
        cursor's."""
        if not self.postgres:
            with self.statement() as tx:
                return tx.run(sql, params).fetchone()  # type: ignore[no-any-return]
        statement = self._statements.get(sql)
        if statement is None:
            with self._lock:  # one name per statement text, even when threads meet it first together
                statement = self._statements.get(sql) or Prepared(sql, len(self._statements), binary=binary)
                self._statements[sql] = statement
        with self._lock:
            self._running += 1
        try:
            try:
                held = self._checkout(pipelined=False)
            except Exception as exc:
                _raise_if_lost(exc, self.where)
                raise
            connection = held[0]
            try:
                row = self._fetch_row(connection, statement, params, self._running)
            except BaseException as exc:
                typed = classified(exc, self.where, connection)  # before _recover closes a broken connection
                self._recover(held, None, error=exc)
                if typed is not None:
                    raise typed from exc
                raise
        finally:
            with self._lock:
                self._running -= 1
        self._checkin(held)
        return row

    def _fetch_row(
        self, connection: Any, statement: Prepared, params: Sequence[Any], running: int
    ) -> tuple[Any, ...] | None:
        adapters = self._adapters.get(id(connection))
        if adapters is None:
            from psycopg.adapt import Transformer  # noqa: PLC0415 - PostgreSQL only

            adapters = self._adapters[id(connection)] = (Transformer(connection), {})
        transformer, runs = adapters
        values = transformer.dump_sequence(params, statement.formats)  # raises as a cursor would (a NUL in text)
        formats = transformer.formats
        pgconn = connection.pgconn
        name = statement.name
        ran = runs.get(name, 0)
        if ran >= 0:  # not prepared yet: as psycopg does, after the connection's prepare_threshold runs unnamed
            threshold = connection.prepare_threshold  # None: never (a pooler that keeps no prepared statements)
            if threshold is None or ran < threshold:
                runs[name] = ran + 1
                pgconn.send_query_params(statement.text, values, None, formats, statement.binary)
            else:
                pgconn.send_prepare(name, statement.text)  # one round trip more, once per connection
                _result(connection, connection.wait(_exchange(pgconn)))
                runs[name] = -1
                pgconn.send_query_prepared(name, values, formats, statement.binary)
        else:
            pgconn.send_query_prepared(name, values, formats, statement.binary)
        turnaround = statement.turnaround
        budget = turnaround.budget(running)
        sent = time.perf_counter_ns()
        ran_out = bool(budget) and not poll(pgconn, sent + budget)
        try:
            result = _result(connection, connection.wait(_exchange(pgconn)))
        except _NOT_PREPARED:  # a DEALLOCATE ALL (psycopg's, after a ROLLBACK it ran) dropped it: nothing ran
            pgconn.send_prepare(name, statement.text)
            _result(connection, connection.wait(_exchange(pgconn)))
            pgconn.send_query_prepared(name, values, formats, statement.binary)
            result = _result(connection, connection.wait(_exchange(pgconn)))
        turnaround.observe(time.perf_counter_ns() - sent, ran_out=ran_out)
        if not result.ntuples:
            return None
        transformer.set_pgresult(result)
        row: tuple[Any, ...] = transformer.load_row(0, tuple)
        return row

    def _discard(self, held: tuple[Any, Any]) -> None:
        self._pipelines.pop(id(held[0]), None)
        self._cursors.pop(id(held[0]), None)
        self._adapters.pop(id(held[0]), None)
        with contextlib.suppress(Exception):  # a broken connection is being thrown away anyway
            held[0].close()

    def transaction(self, *, write: bool) -> Scope:
        """``with driver.transaction(write=…) as tx``: committed when the block ends, rolled back if it raises."""
        return Scope(self, "BEGIN IMMEDIATE" if write and not self.postgres else "BEGIN")

    def snapshot(self) -> Scope:
        """A read-only transaction that sees one snapshot for its whole life (a streaming read holds one;
        PostgreSQL: REPEATABLE READ; SQLite: a WAL read transaction)."""
        return Scope(self, "BEGIN ISOLATION LEVEL REPEATABLE READ" if self.postgres else "BEGIN")

    def statement(self) -> Scope:
        """``with driver.statement() as tx``: autocommit statements (one statement is atomic and sees one
        snapshot), no BEGIN, no COMMIT."""
        return Scope(self, None)

    def batch(self) -> Scope:
        """``with driver.batch() as tx``: autocommit statements that travel together (PostgreSQL: pipelined, one
        round trip; after a failed one the rest are skipped and :meth:`Tx.sync` raises its error)."""
        return Scope(self, None, pipelined=True)

    def _commit(self, tx: Tx) -> bool:
        """Commit ``tx`` and run its collection; whether its connection can be kept (not when the collection
        aborted the pipeline: see :meth:`_recover`)."""
        tx.do("COMMIT")
        try:  # a pipeline may hand back an error at a later statement's send already, not only at the sync
            for sql, params in tx.after_commit:
                tx.run(sql, params)
            tx.sync()
        except self.integrity_error as exc:
            if not tx.after_commit or not foreign_key_failed(exc):  # only a foreign key's refusal is a race
                raise
            # a collection lost its race: the COMMIT before it went through (its error would come first)
            with contextlib.suppress(Exception):
                tx.sync(force=True)
            return False
        return True

    def _recover(
        self, held: tuple[Any, Any], tx: Tx | None, *, keep: bool = True, error: BaseException | None = None
    ) -> None:
        """Roll back after a failure and keep the connection if it is healthy (and ``keep``), else close it. A
        pipeline the server's ``error`` aborted is not kept: psycopg (3.3) counts a statement it skipped, on the run
        that prepares it, as prepared, and every later run of it fails ("prepared statement does not exist")."""
        connection, pipeline = held
        if pipeline is not None and isinstance(error, self.server_error):
            keep = False
        try:
            if pipeline is not None and tx is not None:
                with contextlib.suppress(Exception):  # the error that matters is already raised
                    pipeline.sync()  # collect what was queued (an aborted pipeline raises here)
                if connection.pgconn.transaction_status != 0:  # not idle: inside a (failed) transaction
                    tx.run("ROLLBACK")
                    pipeline.sync()
            elif self.postgres:
                if connection.pgconn.transaction_status != 0:
                    connection.execute("ROLLBACK")
            elif connection.in_transaction:
                connection.execute("ROLLBACK")
        except Exception:  # no way back: drop the connection
            self._discard(held)
            return
        if keep:
            self._checkin(held)
        else:
            self._discard(held)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {False: [], True: []}
        for held in [*idle[False], *idle[True]]:
            self._discard(held)


def _result(connection: Any, results: Sequence[Any]) -> Any:
    """The statement's result, or the error a cursor raises for it (by SQLSTATE: the same types)."""
    result = results[-1]
    if result.status not in _OK:
        from psycopg import errors  # noqa: PLC0415 - PostgreSQL only

        if result.status == _FATAL_ERROR:
            raise errors.error_from_result(result, encoding=connection.info.encoding)
        raise errors.InternalError(f"unexpected result status from query: {result.status}")
    return result


def _hung_up(connection: Any) -> bool:
    """An idle PostgreSQL connection with something to read has been closed by the server (its farewell or
    EOF is waiting): a zero-timeout poll, instead of a ``SELECT 1`` round trip per checkout."""
    try:
        readable, _, _ = select.select([connection.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable) or connection.closed


class Scope:
    """A checked-out connection for one ``with`` block (a class, not a generator: this is the hot path)."""

    __slots__ = ("_begin", "_driver", "_held", "_pipelined", "_turns", "_tx")

    def __init__(self, driver: Driver, begin: str | None, *, pipelined: bool = False) -> None:
        self._driver = driver
        self._begin = begin
        self._pipelined = pipelined or begin is not None
        self._turns = driver.writers if begin == "BEGIN IMMEDIATE" else None

    def __enter__(self) -> Tx:
        turns = self._turns
        if turns is not None and not turns.take():
            self._turns = turns = None  # this thread's write already holds the turn
        try:
            return self._enter()
        except BaseException:
            if turns is not None:
                turns.give()
            raise

    def _enter(self) -> Tx:
        try:
            self._held = held = self._driver._checkout(pipelined=self._pipelined)
        except Exception as exc:
            _raise_if_lost(exc, self._driver.where)
            raise
        driver = self._driver
        # a plain scope reads each statement's rows before the next runs: its cursors can be reused (PostgreSQL only:
        # a SQLite cursor not read to its end keeps its statement, and so a read transaction, open)
        plain = driver.postgres and not self._pipelined
        cursors = driver.cursors(held[0]) if plain else None
        quiet = None if driver.postgres else driver.quiet_cursor(held[0])
        self._tx = tx = Tx(held[0], held[1], postgres=driver.postgres, cursors=cursors, quiet=quiet)
        if self._begin is not None:
            try:
                tx.do(self._begin)
            except BaseException as exc:
                typed = classified(exc, driver.where, held[0])  # before _recover closes a broken connection
                driver._recover(held, tx, error=exc)
                if typed is not None:
                    raise typed from exc
                raise
        return tx

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: Any) -> None:
        turns = self._turns
        if turns is None:
            self._exit(kind, error)
            return
        try:
            self._exit(kind, error)
        finally:
            turns.give()

    def _exit(self, kind: type[BaseException] | None, error: BaseException | None) -> None:
        driver, tx, held = self._driver, self._tx, self._held
        try:
            if kind is None:
                if self._begin is None:
                    tx.sync()
                elif not driver._commit(tx):
                    driver._discard(held)
                    return
        except driver.quota_refused:
            # a connection whose pipeline a refused write aborted goes: psycopg (3.3) then named auto-prepared
            # statements the server no longer had ("prepared statement does not exist" on the next writes).
            # A refusal here is rare (the check before the transaction refuses the rest): a new connection is cheap
            driver._recover(held, tx, keep=False)
            raise
        except BaseException as exc:
            typed = classified(exc, driver.where, held[0])  # before _recover closes a broken connection
            driver._recover(held, tx, error=exc)
            if typed is not None:
                raise typed from exc
            raise
        if kind is not None:
            typed = None if error is None or not driver.postgres else classified(error, driver.where, held[0])
            driver._recover(held, tx, error=error)
            if typed is not None:
                raise typed from error
            return
        driver._checkin(held)


_SECOND: tuple[int, str] = (-1, "")
"""The second :func:`_sqlite_now` last wrote, and its date and time of day as text."""


def _sqlite_now() -> str:
    """Now as SQLite stores it: naive UTC text with microseconds, what ``isoformat(" ", "microseconds")`` writes
    (its date and time of day made once a second: the isoformat per write cost 1.3 µs)."""
    global _SECOND  # noqa: PLW0603 - one tuple swapped whole: a thread reads an old pair or a new one, never mixed
    second, micros = divmod(time.time_ns() // 1000, 1_000_000)
    cached, prefix = _SECOND
    if cached != second:
        prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%d %H:%M:%S")
        _SECOND = (second, prefix)
    return f"{prefix}.{micros:06d}"


def _raise_if_lost(exc: BaseException, where: str) -> None:
    """Raise the typed error ``exc`` (a failed connection attempt) means: ``ConnectionError`` for a lost or refused
    connection (else return, and the caller re-raises ``exc`` as it was)."""
    lost = classified(exc, where)
    if lost is not None:
        raise lost from exc
