"""A constraint no concurrent writer breaks (a ``CHECK``, a trigger's refusal, a ``NOT NULL`` the code does not fill:
the database's schema and this code disagree) fails a write at once, as ``OSError`` (EIO) saying what the database
refused; it is not retried as a lost race and does not read as "too many concurrent writers" or "file exists".

Each test owns a throwaway database (a new SQLite file, a new PostgreSQL database) and adds the refusal to it. The
attempts are counted by the databases themselves: SQLite's statement trace (each attempt is one ``BEGIN IMMEDIATE``),
PostgreSQL's trigger bumping a sequence (which a rollback does not undo) for each row ``wsfs_write_small`` writes.
"""

from __future__ import annotations

import errno
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from workspacefs import ConcurrentChangeError, SqlFilesystem, SqlStore
from workspacefs.testing._postgres import throwaway_database

REFUSED_SIZE = 13
"""Content of this many bytes is refused by the test's constraint, and so is a directory named ``refused``."""

SQLITE_REFUSAL = (
    "CREATE TRIGGER wsfs_test_refuse_insert BEFORE INSERT ON wsfs_files"
    f" WHEN NEW.size_bytes = {REFUSED_SIZE} OR NEW.name = 'refused'"
    " BEGIN SELECT RAISE(ABORT, 'refused by the test''s trigger'); END",
    "CREATE TRIGGER wsfs_test_refuse_update BEFORE UPDATE ON wsfs_files"
    f" WHEN NEW.size_bytes = {REFUSED_SIZE} BEGIN SELECT RAISE(ABORT, 'refused by the test''s trigger'); END",
)
POSTGRES_COUNTER = (
    "CREATE SEQUENCE wsfs_test_attempts",
    "CREATE FUNCTION wsfs_test_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " IF current_setting('wsfs.accounted', true) = 'on' THEN PERFORM nextval('wsfs_test_attempts'); END IF;"
    " RETURN NEW; END $$",
    "CREATE TRIGGER wsfs_test_count BEFORE INSERT OR UPDATE ON wsfs_files FOR EACH ROW"
    " EXECUTE FUNCTION wsfs_test_count()",
)
"""Counts the file rows ``wsfs_write_small`` writes (it sets ``wsfs.accounted`` while it writes), rolled back or not."""
POSTGRES_REFUSAL = (
    f"ALTER TABLE wsfs_files ADD CONSTRAINT wsfs_test_refuse CHECK (size_bytes <> {REFUSED_SIZE} AND name <> 'refused')"
    " NOT VALID",
)
POSTGRES_NOT_NULL = (  # a column a newer migration added and this code does not fill
    "ALTER TABLE wsfs_journal ADD COLUMN wsfs_test_note text NOT NULL DEFAULT ''",
    "ALTER TABLE wsfs_journal ALTER COLUMN wsfs_test_note DROP DEFAULT",
)


@pytest.fixture
def unjournaled(postgres_url: str) -> Iterator[SqlStore]:
    """A store without history on a PostgreSQL database of its own: replaced content is collected at once."""
    with own_postgres(postgres_url, history=False) as opened:
        yield opened


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[SqlStore]:
    """A store on a database of its own (the test changes its schema)."""
    if request.param == "sqlite":
        opened = SqlStore(f"sqlite:///{fast_tmp / f'refusals-{uuid.uuid4().hex}.db'}")
        yield opened
        opened.close()
        return
    with own_postgres(request.getfixturevalue("postgres_url")) as opened:
        yield opened


@pytest.fixture
def postgres(postgres_url: str) -> Iterator[SqlStore]:
    """A store on a PostgreSQL database of its own."""
    with own_postgres(postgres_url) as opened:
        yield opened


@contextmanager
def own_postgres(server_url: str, *, history: bool = True) -> Iterator[SqlStore]:
    """A store on a new PostgreSQL database, dropped after."""
    with throwaway_database(server_url, "wsfs_refusals") as url:
        opened = SqlStore(url, history=history)
        try:
            yield opened
        finally:
            opened.close()


def run_sql(store: SqlStore, statements: tuple[str, ...]) -> None:
    """Change the throwaway database's schema, beside the store's own connections."""
    with store.engine.begin() as connection:
        for statement in statements:
            connection.exec_driver_sql(statement)


def refuse(store: SqlStore) -> None:
    """Make the database refuse content of :data:`REFUSED_SIZE` bytes and a directory named ``refused``."""
    run_sql(store, SQLITE_REFUSAL if store.dialect == "sqlite" else POSTGRES_COUNTER + POSTGRES_REFUSAL)


def attempts(store: SqlStore, operation: Callable[[], Any]) -> tuple[int, BaseException | None]:
    """How many times ``operation`` (a small write) ran its write, and what it raised."""
    raised: BaseException | None = None
    if store.dialect == "postgresql":
        before = postgres_count(store)
        try:
            operation()
        except Exception as exc:
            raised = exc
        return postgres_count(store) - before, raised
    driver = store.driver
    held = driver._checkout()  # the pool hands this connection to the write (one thread)
    seen: list[str] = []
    held[0].set_trace_callback(seen.append)
    driver._checkin(held)
    try:
        operation()
    except Exception as exc:
        raised = exc
    finally:
        held[0].set_trace_callback(None)
    return sum(statement == "BEGIN IMMEDIATE" for statement in seen), raised


def postgres_count(store: SqlStore) -> int:
    """The attempts the counting trigger has seen so far."""
    with store.engine.connect() as connection:
        value, called = connection.exec_driver_sql("SELECT last_value, is_called FROM wsfs_test_attempts").one()
    return int(value) if called else 0


def assert_refused(raised: BaseException | None, path: str) -> None:
    """The write failed as a constraint's refusal: EIO naming the path, not a race, not an existing file."""
    assert isinstance(raised, OSError), raised
    assert not isinstance(raised, (ConcurrentChangeError, FileExistsError)), raised
    assert raised.errno == errno.EIO
    assert raised.filename == path
    assert "refused" in str(raised)


@pytest.mark.parametrize("mode", ["new", "overwrite", "create"])
def test_a_constraint_no_race_breaks_fails_a_small_write_once(store: SqlStore, mode: str) -> None:
    """Before: a new file or an overwrite ran the write 5 times and raised "Too many concurrent writers"
    (``ConcurrentChangeError``), ``mode="create"`` raised ``FileExistsError`` for a file that does not exist."""
    fs = SqlFilesystem(store, "refusals")
    if mode == "overwrite":
        fs.write("a.txt", "first")
    refuse(store)
    write_mode = "create" if mode == "create" else "overwrite"
    ran, raised = attempts(store, lambda: fs.write("a.txt", "x" * REFUSED_SIZE, mode=write_mode))
    assert_refused(raised, "a.txt")
    assert ran == 1
    assert fs.read("a.txt").content == "first" if mode == "overwrite" else not fs.exists("a.txt")
    fs.write("a.txt", "x" * (REFUSED_SIZE + 1))  # what the constraint allows is written as before
    assert fs.read("a.txt").content == "x" * (REFUSED_SIZE + 1)


def test_a_constraint_no_race_breaks_fails_a_mkdir_as_refused(store: SqlStore) -> None:
    """Before: ``FileExistsError`` for a directory that does not exist."""
    fs = SqlFilesystem(store, "refusals")
    refuse(store)
    with pytest.raises(OSError) as raised:
        fs.mkdir("refused", exist_ok=False)
    assert_refused(raised.value, "refused")
    assert not fs.exists("refused")


def test_on_postgresql_only_the_files_key_is_a_race(postgres: SqlStore) -> None:
    """A concurrent creator's row (the files key, ``23505`` on ``wsfs_files``) still makes the write run again and
    overwrite it; a ``NOT NULL`` the code does not fill (a journal column a newer migration added) fails at once.
    Before: the ``NOT NULL`` ran the write 5 times and raised "Too many concurrent writers"."""
    store = postgres
    run_sql(store, POSTGRES_COUNTER)
    fs = SqlFilesystem(store, "race")
    fs.write("seed.txt", "seed")
    ran, raised = attempts(store, lambda: write_while_created(store, fs, "raced.txt"))
    assert raised is None
    assert ran == 2  # the one the creator's row refused, and the overwrite after it
    assert fs.read("raced.txt").content == "the writer's"

    run_sql(store, POSTGRES_NOT_NULL)
    ran, raised = attempts(store, lambda: fs.write("new.txt", "journaled"))
    assert_refused(raised, "new.txt")
    assert "wsfs_test_note" in str(raised)
    assert ran == 1
    assert not fs.exists("new.txt")


def write_while_created(store: SqlStore, fs: SqlFilesystem, path: str) -> None:
    """Write ``path`` while another transaction inserts its row: the write waits on that row's key, and when the other
    commits, its insert is refused by the files key (a lost race)."""
    with store.engine.connect() as reading:
        blob, size = reading.exec_driver_sql("SELECT blob_id, size_bytes FROM wsfs_files WHERE path = 'seed.txt'").one()
    creator = store.engine.raw_connection()
    try:
        creator.cursor().execute(
            "INSERT INTO wsfs_files (session_id, path, parent, name, is_directory, is_readonly, blob_id, size_bytes,"
            " created_at, updated_at) VALUES (%s, %s, '', %s, false, false, %s, %s, now(), now())",
            (fs.session_id, path, path, blob, size),
        )
        failed: list[BaseException] = []
        writer = threading.Thread(target=_write, args=(fs, path, failed))
        writer.start()
        wait_for_a_lock_wait(store)
        creator.commit()
        writer.join(timeout=30)
        assert not writer.is_alive()
    finally:
        creator.close()
    if failed:
        raise failed[0]


def _write(fs: SqlFilesystem, path: str, failed: list[BaseException]) -> None:
    try:
        fs.write(path, "the writer's")
    except BaseException as exc:
        failed.append(exc)


def wait_for_a_lock_wait(store: SqlStore) -> None:
    """Until a connection of the database waits for a lock (the writer, on the creator's row)."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with store.engine.connect() as connection:
            if connection.exec_driver_sql(query).scalar_one():
                return
        time.sleep(0.01)
    raise AssertionError("the writer never waited for the creator's row")


def test_a_constraint_no_race_breaks_fails_other_writes_as_refused(store: SqlStore) -> None:
    """Writes that are not the small write's call (a stream, a copy: ``SqlStore.session_write``) fail the same way.
    Before: SQLAlchemy's own ``IntegrityError``, untyped (the service answered it as an unexpected error)."""
    fs = SqlFilesystem(store, "refusals")
    fs.write("source.txt", "x" * REFUSED_SIZE + "y")
    refuse(store)
    with pytest.raises(OSError) as raised, fs.open_write("streamed/refused") as writer:
        writer.write(b"z" * 1000)
    assert_refused(raised.value, "streamed/refused")
    with pytest.raises(OSError) as raised:
        fs.copy("source.txt", "refused")
    assert_refused(raised.value, "refused")
    assert not fs.exists("refused")
    assert not fs.exists("streamed/refused")


def test_a_constraint_no_race_breaks_fails_a_new_session_in_the_catalog(store: SqlStore) -> None:
    """The service's catalogue looked again after any integrity error and, five refusals later, said the session
    "already exists". Only a key another request took is looked at again; anything else fails at once."""
    from workspacefs.server.catalog import SessionCatalog

    catalog = SessionCatalog(store)
    catalog.create("agent", "kept")
    refusal = (
        "CREATE TRIGGER wsfs_test_refuse_owner BEFORE INSERT ON wsfs_session_owners WHEN NEW.public_id = 'refused'"
        " BEGIN SELECT RAISE(ABORT, 'refused by the test''s trigger'); END",
    )
    if store.dialect == "postgresql":
        refusal = (
            "ALTER TABLE wsfs_session_owners ADD CONSTRAINT wsfs_test_refuse CHECK (public_id <> 'refused') NOT VALID",
        )
    run_sql(store, refusal)
    with pytest.raises(OSError) as raised:
        catalog.create("agent", "refused")
    assert not isinstance(raised.value, FileExistsError), raised.value
    assert raised.value.errno == errno.EIO
    assert catalog.get("agent", "refused") is None
    with pytest.raises(FileExistsError):
        catalog.create("agent", "kept")  # a session that exists still says so
    assert catalog.create("agent", "other").session_id == "other"


def test_a_session_deleted_under_a_new_one_in_the_catalog_is_looked_at_again(postgres: SqlStore) -> None:
    """A concurrent request that made the same session (``ensure_session`` then finds its row and inserts none) and a
    delete of it between that and the owner's row: the owner's foreign key refuses, a race like a taken key. Made here
    by a trigger that deletes the session under the first owner row only (a sequence: not undone by the rollback)."""
    from workspacefs.server.catalog import SessionCatalog

    catalog = SessionCatalog(postgres)
    run_sql(
        postgres,
        (
            "CREATE SEQUENCE wsfs_test_gone",
            "CREATE FUNCTION wsfs_test_gone() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF NEW.public_id = 'raced' AND nextval('wsfs_test_gone') = 1 THEN"
            " DELETE FROM wsfs_sessions WHERE id = NEW.session_id; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER wsfs_test_gone BEFORE INSERT ON wsfs_session_owners FOR EACH ROW"
            " EXECUTE FUNCTION wsfs_test_gone()",
        ),
    )
    assert catalog.create("agent", "raced").session_id == "raced"
    assert catalog.get("agent", "raced") is not None
    with postgres.engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT last_value FROM wsfs_test_gone").scalar() == 2  # looked at again


REFUSE_COLLECTION = (
    "CREATE FUNCTION wsfs_test_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " RAISE EXCEPTION 'refused by the test''s trigger' USING ERRCODE = 'check_violation'; END $$",
    "CREATE TRIGGER wsfs_test_refuse_blob BEFORE DELETE ON wsfs_blobs FOR EACH ROW"
    " EXECUTE FUNCTION wsfs_test_refuse_delete()",
    "CREATE TRIGGER wsfs_test_refuse_chunk BEFORE DELETE ON wsfs_chunks FOR EACH ROW"
    " EXECUTE FUNCTION wsfs_test_refuse_delete()",
)
"""Every delete of content is refused by something that is not a foreign key (a ``CHECK``'s code, from a trigger)."""
RACE_COLLECTION = (
    "CREATE FUNCTION wsfs_test_use_again() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " INSERT INTO wsfs_files (session_id, path, parent, name, is_directory, is_readonly, blob_id, size_bytes,"
    " created_at, updated_at) SELECT id, 'again-' || left(OLD.id, 16), '', 'again-' || left(OLD.id, 16),"
    " false, false, OLD.id, OLD.size, now(), now() FROM wsfs_sessions LIMIT 1; RETURN OLD; END $$",
    "CREATE TRIGGER wsfs_test_use_again BEFORE DELETE ON wsfs_blobs FOR EACH ROW EXECUTE FUNCTION wsfs_test_use_again()",
)
"""A concurrent writer's race, made at the moment it matters: a file row refers to the blob being deleted, so the
blob's foreign key refuses the delete (rolled back with the collection's savepoint, as the refusal is)."""


def blob_count(store: SqlStore) -> int:
    """The content rows the database keeps."""
    with store.engine.connect() as connection:
        return int(connection.exec_driver_sql("SELECT count(*) FROM wsfs_blobs").scalar_one())


def assert_collection_refused(raised: BaseException | None, path: str | None, *, made: bool = False) -> None:
    """Collecting content failed as a constraint's refusal naming ``path``; ``made``: the change itself went through
    (collected after its commit) and the message says so."""
    assert isinstance(raised, OSError), raised
    assert not isinstance(raised, (ConcurrentChangeError, FileExistsError)), raised
    assert raised.errno == errno.EIO
    assert raised.filename == path
    assert "refused by the test's trigger" in str(raised)
    assert ("was made" in str(raised)) is made


def test_a_refusal_while_collecting_on_postgresql_is_an_error(unjournaled: SqlStore) -> None:
    """Collecting content a change stopped using is refused by a constraint no concurrent writer breaks: the change
    fails as EIO naming its path (rolled back), or, when the collection ran after its commit (a small write), says
    it was made. Before: every such refusal was swallowed as if a concurrent writer had used the content again."""
    store = unjournaled
    fs = SqlFilesystem(store, "collected")
    fs.write("small.txt", "first")
    fs.write("deleted.txt", "doomed")
    fs.write("big.bin", "b" * 300_000)
    fs.write("streamed.bin", "s" * 300_000)
    run_sql(store, REFUSE_COLLECTION)
    with pytest.raises(OSError) as raised:
        fs.delete("deleted.txt")
    assert_collection_refused(raised.value, "deleted.txt")
    assert fs.read("deleted.txt").content == "doomed"
    with pytest.raises(OSError) as raised:
        fs.write("big.bin", "c" * 300_000)
    assert_collection_refused(raised.value, "big.bin")
    assert fs.read("big.bin").content == "b" * 300_000
    with pytest.raises(OSError) as raised:
        fs.move("big.bin", "streamed.bin", overwrite=True)
    assert_collection_refused(raised.value, "streamed.bin")
    assert fs.read("streamed.bin").content == "s" * 300_000
    with pytest.raises(OSError) as raised:  # the small write's own call, collected after its commit
        fs.write("small.txt", "second")
    assert_collection_refused(raised.value, "small.txt", made=True)
    assert fs.read("small.txt").content == "second"

    # the one refusal a collection expects, a foreign key's (a concurrent writer refers to the content again),
    # stays silent: the change is made and the content kept for gc
    run_sql(store, ("DROP TRIGGER wsfs_test_refuse_blob ON wsfs_blobs", *RACE_COLLECTION))
    before = blob_count(store)
    fs.delete("deleted.txt")
    fs.write("small.txt", "third")
    fs.write("big.bin", "c" * 300_000)
    assert not fs.exists("deleted.txt")
    assert fs.read("small.txt").content == "third"
    assert fs.read("big.bin").content == "c" * 300_000
    assert blob_count(store) == before + 2  # the three replaced stay, two new came
    run_sql(
        store, ("DROP TRIGGER wsfs_test_use_again ON wsfs_blobs", "DROP TRIGGER wsfs_test_refuse_chunk ON wsfs_chunks")
    )
    store.gc()
    assert blob_count(store) == 3  # what the three files hold


def test_a_refusal_dropping_a_streams_chunks_on_postgresql_is_an_error(postgres: SqlStore) -> None:
    """A stream whose content is stored inline already (another file's) drops the chunk it uploaded
    (``drop_unused_chunks``), as does a stream abandoned: a refusal there that is not a foreign key's fails it.
    Before: swallowed, the write went through and the abandoned stream's error was the caller's own."""
    fs = SqlFilesystem(postgres, "streams")
    fs.write("inline.txt", "z" * 1000)
    run_sql(postgres, REFUSE_COLLECTION)
    with pytest.raises(OSError) as raised, fs.open_write("streamed.txt") as writer:
        writer.write(b"z" * 1000)
    assert_collection_refused(raised.value, "streamed.txt")
    assert not fs.exists("streamed.txt")
    writer = fs.open_write("abandoned.txt")
    writer.write(b"y" * 300_000)  # one whole chunk uploaded
    with pytest.raises(OSError) as raised:
        writer.abort()
    assert_collection_refused(raised.value, "abandoned.txt")
    assert not fs.exists("abandoned.txt")


def test_a_refusal_collecting_after_a_commit_on_postgresql_is_an_error(postgres: SqlStore) -> None:
    """A transaction's collection queued for after its commit (``Tx.collect``) that a constraint no concurrent writer
    breaks refuses raises it. Before: any integrity error there was taken for a lost race and dropped."""
    fs = SqlFilesystem(postgres, "after")
    fs.write("a.txt", "kept")
    fs.delete("a.txt")  # its content stays for the journal's undo: nothing refers to it once the journal is gone
    with postgres.engine.begin() as connection:
        connection.exec_driver_sql("DELETE FROM wsfs_journal")
        (blob,) = connection.exec_driver_sql("SELECT id FROM wsfs_blobs WHERE data = 'kept'::bytea").one()
    run_sql(postgres, REFUSE_COLLECTION)
    driver = postgres.driver
    with pytest.raises(driver.integrity_error, match="refused by the test"), driver.transaction(write=True) as tx:
        tx.collect(postgres.release_statements([blob], []))
    run_sql(postgres, ("DROP TRIGGER wsfs_test_refuse_blob ON wsfs_blobs", *RACE_COLLECTION))
    with driver.transaction(write=True) as tx:  # a foreign key's refusal is a race lost: silent, the content stays
        tx.collect(postgres.release_statements([blob], []))
    assert blob_count(postgres) == 1


def test_a_refusal_in_gc_on_postgresql_is_an_error(postgres: SqlStore) -> None:
    """``gc`` collecting content a constraint refuses to delete fails as EIO (no caller's path to name). Before: it
    reported nothing collected and succeeded."""
    fs = SqlFilesystem(postgres, "gc")
    fs.write("a.txt", "gone")
    fs.delete("a.txt")
    with postgres.engine.begin() as connection:
        connection.exec_driver_sql("DELETE FROM wsfs_journal")
    run_sql(postgres, REFUSE_COLLECTION)
    with pytest.raises(OSError) as raised:
        postgres.gc()
    assert_collection_refused(raised.value, None)


PLAIN_RAISE = (
    "CREATE FUNCTION wsfs_test_raise() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    f" IF NEW.size_bytes = {REFUSED_SIZE} THEN RAISE EXCEPTION 'refused by the test''s trigger'; END IF;"
    " RETURN NEW; END $$",
    "CREATE TRIGGER wsfs_test_raise BEFORE INSERT OR UPDATE ON wsfs_files FOR EACH ROW EXECUTE FUNCTION wsfs_test_raise()",
)
"""A trigger's ``RAISE EXCEPTION`` with no code of its own (SQLSTATE ``P0001``, not an integrity error)."""
PLAIN_RAISE_ON_DELETE = (
    "CREATE FUNCTION wsfs_test_raise_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " RAISE EXCEPTION 'refused by the test''s trigger'; END $$",
    "CREATE TRIGGER wsfs_test_raise_blob BEFORE DELETE ON wsfs_blobs FOR EACH ROW"
    " EXECUTE FUNCTION wsfs_test_raise_delete()",
)


def test_a_trigger_s_plain_raise_on_postgresql_is_refused(unjournaled: SqlStore) -> None:
    """A trigger's ``RAISE EXCEPTION`` without a code is PostgreSQL's ``P0001``, not an integrity error: it escaped as
    the driver's own ``RaiseException`` (a small write) or SQLAlchemy's ``ProgrammingError`` (a stream, a collection),
    untyped, its message the SQL it ran. It fails as the constraints' refusals do: EIO naming the path."""
    store = unjournaled
    fs = SqlFilesystem(store, "raised")
    fs.write("a.txt", "first")
    fs.write("doomed.txt", "doomed")
    fs.write("b.txt", "12345")
    run_sql(store, PLAIN_RAISE)
    writes: list[tuple[str, Callable[[], object]]] = [
        ("new.txt", lambda: fs.write("new.txt", "x" * REFUSED_SIZE)),
        ("a.txt", lambda: fs.write("a.txt", "x" * REFUSED_SIZE)),
        ("b.txt", lambda: fs.write("b.txt", "x" * (REFUSED_SIZE - 5), mode="append")),
    ]
    for path, write in writes:
        with pytest.raises(OSError) as raised:
            write()
        assert_refused(raised.value, path)
    with pytest.raises(OSError) as raised, fs.open_write("streamed.txt") as writer:
        writer.write(b"z" * REFUSED_SIZE)
    assert_refused(raised.value, "streamed.txt")
    assert (fs.read("a.txt").content, fs.read("b.txt").content) == ("first", "12345")
    assert not fs.exists("new.txt")
    assert not fs.exists("streamed.txt")
    run_sql(store, PLAIN_RAISE_ON_DELETE)
    with pytest.raises(OSError) as raised:
        fs.delete("doomed.txt")
    assert_collection_refused(raised.value, "doomed.txt")
    with pytest.raises(OSError) as raised:  # collected after its commit
        fs.write("a.txt", "second")
    assert_collection_refused(raised.value, "a.txt", made=True)

    from workspacefs.server.catalog import SessionCatalog

    catalog = SessionCatalog(store)
    run_sql(
        store,
        (
            "CREATE TRIGGER wsfs_test_raise_owner BEFORE INSERT ON wsfs_session_owners FOR EACH ROW"
            " WHEN (NEW.public_id = 'refused') EXECUTE FUNCTION wsfs_test_raise_delete()",
        ),
    )
    with pytest.raises(OSError) as raised:
        catalog.create("agent", "refused")
    assert not isinstance(raised.value, FileExistsError), raised.value
    assert raised.value.errno == errno.EIO
    assert catalog.create("agent", "other").session_id == "other"
