"""Aborted PostgreSQL pipelines never go back to the pool: each test failed before its fix (found in review)."""

from __future__ import annotations

import contextlib
import os

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.testing._postgres import create_database


def test_a_pipelined_batch_a_server_error_aborted_leaves_no_broken_connection(postgres_url: str) -> None:
    """A small write's collection (``driver.batch()``: the blob, then its chunks) loses its race when another writer
    takes the content meanwhile: the blob's delete fails on the files' foreign key and the error is swallowed, the
    chunks' delete after it is skipped. psycopg (3.3) prepares a statement on its sixth run and, when that run is
    skipped by an aborted pipeline, still counts it prepared: the pooled connection then fails every later run of it
    ("prepared statement does not exist"). Here the lost race is its end state (a delete of a blob a file uses),
    on the real driver, once at each run count a statement can be prepared at."""
    url = create_database(postgres_url, f"wsfs_review_b_pipeline_{os.getpid()}")
    store = SqlStore(url, history=False)
    try:
        fs = SqlFilesystem(store, "collect")
        fs.write_bytes("kept.txt", b"in use")
        driver = store.driver
        with store.read() as connection:
            blob = connection.exec_driver_sql("SELECT blob_id FROM wsfs_files WHERE path = 'kept.txt'").scalar_one()
        lost_race = (driver.sql("DELETE FROM wsfs_blobs WHERE id = ?"), (blob,))  # what the lost race runs into
        (chunks, unused), *_ = store.release_statements([], ["0" * 64])  # the collection's statement after it
        for lost_at in range(1, 9):
            driver.close()  # a new connection: psycopg's run counts start again
            for run in range(12):
                with contextlib.suppress(driver.integrity_error), driver.batch() as tx:
                    if run == lost_at:
                        tx.run(*lost_race)
                    tx.run(chunks, unused)
        assert fs.read_bytes("kept.txt").content == b"in use"
    finally:
        store.close()


def test_a_transaction_whose_collection_lost_its_race_leaves_no_broken_connection(postgres_url: str) -> None:
    """The same on a transaction's collection after its COMMIT (``Tx.collect``): the COMMIT went through, the error
    of the collection is swallowed, and the connection went back to the pool with the statement it skipped counted
    as prepared."""
    url = create_database(postgres_url, f"wsfs_review_b_commit_{os.getpid()}")
    store = SqlStore(url, history=False)
    try:
        fs = SqlFilesystem(store, "collect")
        fs.write_bytes("kept.txt", b"in use")
        driver = store.driver
        with store.read() as connection:
            blob = connection.exec_driver_sql("SELECT blob_id FROM wsfs_files WHERE path = 'kept.txt'").scalar_one()
        lost_race = (driver.sql("DELETE FROM wsfs_blobs WHERE id = ?"), (blob,))
        (chunks, unused), *_ = store.release_statements([], ["0" * 64])
        for lost_at in range(1, 9):
            driver.close()
            for run in range(12):
                with driver.transaction(write=True) as tx:
                    tx.run(driver.sql("SELECT 1"))
                    tx.collect([lost_race, (chunks, unused)] if run == lost_at else [(chunks, unused)])
        assert fs.read_bytes("kept.txt").content == b"in use"
    finally:
        store.close()
