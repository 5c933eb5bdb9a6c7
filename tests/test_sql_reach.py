"""Only a failed connection reads as "cannot reach the database" (``ConnectionError``, 503): an error psycopg
raises itself carries no SQLSTATE, and most of those are not about reaching the server at all."""

from __future__ import annotations

import socket

import psycopg
import pytest
from psycopg.errors import CancellationTimeout, PipelineAborted

from workspacefs.backends.sql._reach import lost_connection


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_only_a_failed_connection_reads_as_an_unreachable_database(postgres_url: str) -> None:
    closed_here = psycopg.connect(postgres_url)
    closed_here.close()
    with pytest.raises(psycopg.OperationalError) as closed:
        closed_here.execute("SELECT 1")  # this process's own mistake: the database is fine
    assert closed.value.sqlstate is None
    assert lost_connection(closed.value, "db") is None
    assert lost_connection(closed.value, "db", closed_here) is None  # closed by us, not broken
    for client_side in (PipelineAborted("pipeline aborted"), CancellationTimeout("cancellation timeout")):
        assert lost_connection(client_side, "db") is None

    # what is a connection failure still is one: a refused attempt, and a connection that broke under a statement
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(f"postgresql://postgres@127.0.0.1:{_free_port()}/none", connect_timeout=10)
    assert isinstance(lost_connection(refused.value, "db"), ConnectionError)
    victim = psycopg.connect(postgres_url, autocommit=True)
    with psycopg.connect(postgres_url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (victim.info.backend_pid,))
    failures = []
    for _ in range(2):  # the server's farewell (57P01) if it was read, then psycopg's own error (no SQLSTATE)
        with pytest.raises(psycopg.OperationalError) as broke:
            victim.execute("SELECT 1")
        failures.append(broke.value)
    assert victim.broken and failures[-1].sqlstate is None
    assert all(isinstance(lost_connection(f, "db", victim), ConnectionError) for f in failures)
    victim.close()
