"""Statements per authenticated REST request, on SQLite and PostgreSQL (counts, not times: speed is in bench/).

The count comes from the databases' own traces of every connection the service opens: SQLite's trace callback
(each statement run, ``BEGIN``/``COMMIT`` included) and libpq's protocol trace (each ``Execute`` or simple
``Query`` a statement, each ``Sync`` or ``Query`` a wait for the server). Token, session and policy are read
in one statement with the token (``server/_access.py``), so a request costs one statement more than its file
operation, and the floor (a request that reads only its token) one.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.policy import Policy
from workspacefs.server import SessionCatalog, TokenStore, create_app
from workspacefs.server._access import AccessReader
from workspacefs.server._approvals import ApprovalStore, stored_policy


@dataclass
class Counted:
    statements: int
    round_trips: int
    text: list[str]


class Tracer:
    """Every statement the store's connections run, from the moment it is made (existing connections dropped)."""

    def __init__(self, store: SqlStore, scratch: Path) -> None:
        self.store = store
        self.sqlite: list[str] = []
        self.files: list[Path] = []
        self._sinks: list[Any] = []
        self._scratch = scratch
        store.engine.dispose()
        store.driver.close()
        sa.event.listen(store.engine, "connect", self._connected)

    def _connected(self, dbapi: Any, _record: Any) -> None:
        if self.store.dialect == "sqlite":
            dbapi.set_trace_callback(self.sqlite.append)
            return
        path = self._scratch / f"trace-{len(self.files)}"
        self.files.append(path)
        sink = open(path, "w")  # noqa: SIM115 - open for the connection's life (libpq writes to its descriptor)
        self._sinks.append(sink)
        dbapi.pgconn.trace(sink.fileno())

    def _drain(self) -> list[str]:
        if self.store.dialect == "sqlite":
            # a statement whose triggers run (the grep index's) is traced again for each: counted once
            found = [text for index, text in enumerate(self.sqlite) if index == 0 or self.sqlite[index - 1] != text]
            self.sqlite[:] = []
            return found
        messages: list[str] = []
        for path, sink in zip(self.files, self._sinks, strict=True):
            with open(path, errors="replace") as trace:
                lines = trace.read().replace("\0", "").splitlines()
            sink.truncate(0)  # libpq goes on at its offset: the bytes before it read back as NUL, skipped above
            messages += [line.split("\t")[3] for line in lines if "\tF\t" in line]
        return messages

    def count(self, request: Callable[[], Any]) -> Counted:
        self._drain()
        request()
        found = self._drain()
        if self.store.dialect == "sqlite":
            return Counted(len(found), len(found), found)
        kinds = [message.split(" ")[0] for message in found]
        return Counted(
            statements=sum(1 for kind in kinds if kind in ("Execute", "Query")),
            round_trips=sum(1 for kind in kinds if kind in ("Sync", "Query")),
            text=found,
        )


@pytest.fixture
def served(service_url: str) -> Iterator[tuple[TestClient, Tracer, dict[str, str]]]:
    store = SqlStore(service_url)
    agent = f"counted-{uuid.uuid4().hex[:8]}"  # PostgreSQL is shared by the tests
    entry = SessionCatalog(store).create(agent, "main")
    SqlFilesystem(store, entry.storage_id, create=False).write("a.txt", "x" * 1024)
    secret, _ = TokenStore(store).create(agent_id=agent, rate_limit=0)
    with tempfile.TemporaryDirectory() as scratch:
        tracer = Tracer(store, Path(scratch))
        with TestClient(create_app(store, auth=True)) as client:
            yield (
                client,
                tracer,
                {"Authorization": f"Bearer {secret}", "X-File": f"/v1/agents/{agent}/sessions/main/fs/a.txt"},
            )
    store.close()


def test_the_floor_reads_the_token_in_one_statement(served: tuple[TestClient, Tracer, dict[str, str]]) -> None:
    client, tracer, auth = served
    client.get("/v1/agents", headers=auth)  # connections made and warm
    counted = tracer.count(lambda: client.get("/v1/agents", headers=auth).raise_for_status())
    assert (counted.statements, counted.round_trips) == (1, 1), counted.text


def test_a_health_check_touches_no_table(served: tuple[TestClient, Tracer, dict[str, str]]) -> None:
    client, tracer, _ = served
    counted = tracer.count(lambda: client.get("/healthz").raise_for_status())
    assert counted.statements == 0, counted.text


def test_an_authenticated_read_is_two_statements(served: tuple[TestClient, Tracer, dict[str, str]]) -> None:
    client, tracer, auth = served
    file = auth["X-File"]
    client.get(file, headers=auth)
    counted = tracer.count(lambda: client.get(file, headers=auth).raise_for_status())
    # token + session + policy in one; the file's row and content in the other
    assert (counted.statements, counted.round_trips) == (2, 2), counted.text


def test_an_authenticated_write_is_the_write_plus_two(served: tuple[TestClient, Tracer, dict[str, str]]) -> None:
    client, tracer, auth = served
    file = auth["X-File"]
    client.put(file, headers=auth, json={"content": "warm"})
    counted = tracer.count(lambda: client.put(file, headers=auth, json={"content": "new"}).raise_for_status())
    if tracer.store.dialect == "sqlite":
        # access; BEGIN IMMEDIATE, content, rows, file row, journal row (which keeps the replaced content: nothing
        # to collect), COMMIT; the answer's read
        assert counted.statements == 1 + 6 + 1, counted.text
    else:
        # access; the write's one round trip (tests/test_sql_round_trips.py); the answer's read
        assert counted.round_trips == 1 + 1 + 1, counted.text
    assert client.get(file, headers=auth).json()["content"] == "new"


def test_the_one_statement_finds_what_the_catalogue_finds(service_url: str) -> None:
    """Token, session (owned, the agent default's library sessions, another agent's, missing) and policy, as
    the stores that own them return them."""
    store = SqlStore(service_url)
    try:
        catalog, tokens = SessionCatalog(store), TokenStore(store)
        alice, bob, owned, library = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("alice", "bob", "owned", "lib"))
        catalog.create(alice, "s1")
        catalog.create("default", owned)
        SqlFilesystem(store, library).write("x", "1")  # made through the library: no owner row
        secret, info = tokens.create(agent_id=alice, policy={"rules": [{"action": "deny", "pattern": "*.key"}]})
        reader = AccessReader(store)
        for agent, session in [(alice, "s1"), (alice, "nope"), (bob, "s1"), ("default", owned),
                               ("default", library), (alice, library)]:  # fmt: skip
            found = reader.lookup(secret, agent, session)
            assert found.token == tokens.verify(secret) == info
            assert found.session is not None and found.session.names(agent, session)
            assert found.session.entry == catalog.get(agent, session), (agent, session)
            assert found.session.policy is None
        mine = catalog.get(alice, "s1")
        assert mine is not None
        ApprovalStore(store).set_session_policy(mine.storage_id, Policy.default())
        found = reader.lookup(secret, alice, "s1").session
        assert found is not None and found.policy is not None
        assert stored_policy(found.policy).to_dict() == Policy.default().to_dict()
        assert reader.lookup("wsfs_unknown", alice, "s1").token is None
        assert reader.lookup(None, alice, "s1").token is None
        assert reader.lookup(secret).token == info and reader.lookup(secret).session is None
    finally:
        store.close()


def test_the_one_statement_uses_indexes(store: SqlStore) -> None:
    """Every table is reached through an index (SQLite scans only its one-row subqueries)."""
    from workspacefs.server import _access

    TokenStore(store)  # the service's tables
    driver = store.driver
    for sql, params in (
        (_access._BY_TOKEN, ("h",)),
        (_access._WITH_SESSION, ("h", "agent", "session")),
        (_access._WITH_DEFAULT_SESSION, ("h", "default", "session", "session")),
    ):
        with driver.transaction(write=False) as tx:
            if driver.postgres:
                tx.run("SET LOCAL enable_seqscan = off")
                cursor = tx.run("EXPLAIN " + driver.sql(sql), params)
                tx.sync()
                plan = [row[0] for row in cursor.fetchall()]
                assert not [line for line in plan if "Seq Scan on wsfs_" in line], "\n".join(plan)
            else:
                plan = [row[3] for row in tx.run("EXPLAIN QUERY PLAN " + sql, params).fetchall()]
                scans = [line for line in plan if line.startswith("SCAN")]
                assert set(scans) <= {"SCAN CONSTANT ROW", "SCAN q", "SCAN x LEFT-JOIN", "SCAN f"}, plan
