"""The deployment of issue 18, on loopback: several ``workspacefs serve`` processes over one PostgreSQL
database and one S3 content store (moto's server), exercised through real sockets by concurrent clients.

Every process here is a real one (``python -m workspacefs serve``, PostgreSQL's binaries, ``moto.server``)
and is stopped by the fixture that started it. Nothing is timed: waits are bounded by budgets only a hang
reaches, and outcomes are checked by counting (statuses, bytes, objects, rows).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from conftest import missing

from workspacefs import SqlStore
from workspacefs.server.tokens import TokenStore
from workspacefs.testing._postgres import create_database
from workspacefs.testing._s3 import S3Server, moto_available, running_s3
from workspacefs.testing._service import ServiceProcess, free_port, running_service

BUCKET = "wsfs-tests"
MIN_BYTES = 1024
"""Chunks of at least this many bytes go to the content store: small enough that the tests' files land in S3."""
HANG_BUDGET = 60.0
"""Seconds a single request may take before the test calls it a hang (only a hang reaches it)."""
_ids = itertools.count()


def fresh_database(server_url: str) -> str:
    """A new, empty database on the test PostgreSQL server: one database has one content store."""
    return create_database(server_url, f"wsfs_deploy_{os.getpid()}_{next(_ids)}")


@dataclass
class Deployment:
    """Service processes over one database and one content store, an admin token, and a store to look inside."""

    db_url: str
    content_url: str
    services: list[ServiceProcess]
    auth: dict[str, str]
    store: SqlStore

    def client(self, index: int) -> httpx.Client:
        """A client of the ``index``-th process (modulo their number), with the admin token."""
        service = self.services[index % len(self.services)]
        return httpx.Client(base_url=service.url, headers=self.auth, timeout=HANG_BUDGET)

    def serve_args(self) -> tuple[str, ...]:
        """The extra ``serve`` arguments every process of this deployment runs with."""
        return ("--content-store", self.content_url, "--rate-limit", "0")


@contextmanager
def deployment_over(postgres_url: str, server: S3Server, processes: int) -> Iterator[Deployment]:
    """``processes`` serve processes over a fresh database and a fresh prefix of ``server``'s test bucket.

    The database is migrated and the admin token made before any process starts (no two processes race
    to migrate a new database); every process is stopped on the way out."""
    db = fresh_database(postgres_url)
    db_url = f"{db}?content_store_min_bytes={MIN_BYTES}"
    content = server.url(BUCKET, f"deploy-{uuid.uuid4().hex[:12]}")
    store = SqlStore(db, content_store=content, content_store_min_bytes=MIN_BYTES)
    secret, _ = TokenStore(store).create(agent_id=None, label="deployment test")
    with ExitStack() as stack:
        stack.callback(store.close)
        deployment = Deployment(db_url, content, [], {"Authorization": f"Bearer {secret}"}, store)
        for _ in range(processes):
            deployment.services.append(stack.enter_context(running_service(db_url, extra_args=deployment.serve_args())))
        yield deployment


@pytest.fixture(scope="module")
def deployment(postgres_url: str, s3_server: Any) -> Iterator[Deployment]:
    """Three serve processes over one PostgreSQL database and one S3 content store (the session's server)."""
    assert isinstance(s3_server, S3Server)
    with deployment_over(postgres_url, s3_server, 3) as made:
        yield made


def new_session(client: httpx.Client, agent: str) -> str:
    """A new session of ``agent``; its files' URL prefix."""
    created = client.post(f"/v1/agents/{agent}/sessions")
    assert created.status_code in (200, 201), created.text
    return f"/v1/agents/{agent}/sessions/{created.json()['id']}/fs"


def object_keys(store: SqlStore) -> set[str]:
    """Every chunk object under the deployment's content-store prefix (listed in the bucket itself)."""
    assert store.content is not None
    return {info.key for info in store.content.objects()}


def object_rows(store: SqlStore) -> set[str]:
    """The object keys the database's chunk rows marked ``object`` name."""
    assert store.content is not None
    with store.read() as connection:
        hashes = connection.exec_driver_sql("SELECT hash FROM wsfs_chunks WHERE stored = 'object'").scalars().all()
    return {store.content.key(digest) for digest in hashes}


def sizes(client: httpx.Client, fs: str) -> dict[str, int]:
    """Name -> size of the files at the root of a session (metadata only: the database answers it)."""
    listed = client.get(fs)
    assert listed.status_code == 200, listed.text
    return {entry["name"]: entry["size_bytes"] for entry in listed.json()["data"]}


# --- read-your-writes across processes ------------------------------------------------------------------


CLIENTS = 30
FILES_PER_CLIENT = 3


def test_every_write_is_readable_from_every_process_at_once(deployment: Deployment) -> None:
    with deployment.client(0) as admin:
        fs = new_session(admin, "ryw")
    start = threading.Barrier(CLIENTS, timeout=HANG_BUDGET)

    def one_client(number: int) -> int:
        """Write through one process, read back through the other two at once; returns the reads checked."""
        writer = deployment.client(number)
        readers = [deployment.client(number + 1), deployment.client(number + 2)]
        checked = 0
        try:
            start.wait()
            for index in range(FILES_PER_CLIENT):
                path = f"{fs}/client-{number}/file-{index}.txt"
                body = f"client {number} file {index} " * (40 + number)  # above MIN_BYTES: content in S3
                written = writer.post(path, json={"content": body})
                assert written.status_code == 201, written.text
                for reader in readers:
                    read = reader.get(path)
                    assert read.status_code == 200, read.text
                    assert read.json()["content"] == body
                    assert read.headers["etag"] == written.headers["etag"]
                    checked += 1
        finally:
            for client in (writer, *readers):
                client.close()
        return checked

    with ThreadPoolExecutor(CLIENTS) as pool:
        checked = list(pool.map(one_client, range(CLIENTS), timeout=4 * HANG_BUDGET))
    assert sum(checked) == CLIENTS * FILES_PER_CLIENT * 2
    assert object_keys(deployment.store)  # the content really is in the object store
    assert object_rows(deployment.store) <= object_keys(deployment.store)


# --- If-Match races -------------------------------------------------------------------------------------

RACERS = 6
ROUNDS = 4


def test_if_match_writers_racing_through_different_processes_one_wins(deployment: Deployment) -> None:
    with deployment.client(0) as admin:
        fs = new_session(admin, "race")
        created = admin.post(f"{fs}/doc.txt", json={"content": "round 0 " * 200})
        assert created.status_code == 201, created.text
        etag = created.headers["etag"]
    clients = [deployment.client(index) for index in range(RACERS)]
    try:
        for round_number in range(1, ROUNDS + 1):
            start = threading.Barrier(RACERS, timeout=HANG_BUDGET)

            def race(
                index: int, tag: str = etag, number: int = round_number, gate: threading.Barrier = start
            ) -> tuple[int, str, str | None]:
                body = f"round {number} racer {index} " * 100
                gate.wait()
                answer = clients[index].put(f"{fs}/doc.txt", json={"content": body}, headers={"If-Match": tag})
                return answer.status_code, body, answer.headers.get("etag")

            with ThreadPoolExecutor(RACERS) as pool:
                outcomes = list(pool.map(race, range(RACERS), timeout=2 * HANG_BUDGET))
            statuses = sorted(status for status, _, _ in outcomes)
            assert statuses == [200] + [412] * (RACERS - 1), outcomes
            winner = next(outcome for outcome in outcomes if outcome[0] == 200)
            for index in range(len(deployment.services)):  # every process sees the winner's content, nothing else
                read = clients[index].get(f"{fs}/doc.txt")
                assert read.json()["content"] == winner[1] and read.headers["etag"] == winner[2]
            assert winner[2] is not None
            etag = winner[2]
    finally:
        for client in clients:
            client.close()


# --- kill -9 in the middle of an upload -----------------------------------------------------------------

MIB = 1024 * 1024
UPLOAD_BYTES = 64 * MIB
KILL_AFTER_BYTES = 16 * MIB


def test_kill_9_mid_upload_keeps_the_old_content_and_gc_leaves_no_orphan(deployment: Deployment) -> None:
    old = os.urandom(300 * 1024)  # two chunks above MIN_BYTES: the old content lives in S3
    with deployment.client(0) as admin:
        fs = new_session(admin, "killed")
        created = admin.post(f"{fs}/big.bin", content=old, headers={"content-type": "application/octet-stream"})
        assert created.status_code == 201, created.text
    objects_before = object_keys(deployment.store)
    with running_service(deployment.db_url, extra_args=deployment.serve_args()) as victim:
        sent = 0
        killed = threading.Event()

        def body() -> Iterator[bytes]:
            """64 MiB of fresh bytes; from 16 MiB on, before each further MiB, the server is killed as soon as
            it has stored some of them as new objects (so it has received part of the body). Progress is
            counted in bytes sent: a server that stores nothing before the end is never killed, and fails."""
            nonlocal sent
            while sent < UPLOAD_BYTES:
                stored = sent >= KILL_AFTER_BYTES and bool(object_keys(deployment.store) - objects_before)
                if stored and not killed.is_set():
                    os.kill(victim.pid, signal.SIGKILL)
                    victim.process.wait(timeout=HANG_BUDGET)
                    killed.set()
                piece = os.urandom(MIB)
                sent += len(piece)
                yield piece

        with (
            httpx.Client(base_url=victim.url, headers=deployment.auth, timeout=HANG_BUDGET) as client,
            pytest.raises(httpx.TransportError),
        ):
            client.put(f"{fs}/big.bin", content=body(), headers={"content-type": "application/octet-stream"})
        assert killed.is_set() and victim.process.returncode == -signal.SIGKILL
        assert KILL_AFTER_BYTES <= sent < UPLOAD_BYTES
    left_behind = object_keys(deployment.store) - objects_before
    assert left_behind  # the dead writer's objects (fresh random bytes: nothing else can name them)
    for index in range(len(deployment.services)):  # the survivors: the old content, whole, and nothing else
        with deployment.client(index) as client:
            read = client.get(f"{fs}/big.bin", headers={"accept": "application/octet-stream"})
            assert read.status_code == 200 and read.content == old
            assert read.headers["etag"] == created.headers["etag"]
            listed = client.get(fs)
            assert listed.status_code == 200
            assert [entry["name"] for entry in listed.json()["data"]] == ["big.bin"], listed.json()
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "workspacefs",
            "gc",
            "--db",
            deployment.db_url,
            *deployment.serve_args()[:2],
            "--grace",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_BUDGET,
        check=False,
    )
    assert collected.returncode == 0, collected.stderr
    remaining = object_keys(deployment.store)
    assert not remaining & left_behind  # the dead writer's objects are collected
    assert remaining == object_rows(deployment.store)  # no orphan, and no row without its object
    for index in range(len(deployment.services)):  # still serving: the old file, and a new write everywhere
        with deployment.client(index) as client:
            assert client.get(f"{fs}/big.bin", headers={"accept": "application/octet-stream"}).content == old
            fresh = f"after-kill-{index} " * 200
            assert client.post(f"{fs}/after-{index}.txt", json={"content": fresh}).status_code == 201
            with deployment.client(index + 1) as other:
                assert other.get(f"{fs}/after-{index}.txt").json()["content"] == fresh


# --- the object store goes away, and comes back ---------------------------------------------------------


@contextmanager
def moto_on(port: int) -> Iterator[S3Server]:
    """moto's S3 server on ``port`` (a fixed one, so a restart comes back where the clients look), with the
    test bucket made; stopped on the way out. Its objects live in its memory: a restart starts empty."""
    with running_s3(port) as server:
        server.make_bucket(BUCKET)
        yield server


def test_an_unreachable_object_store_is_a_503_and_service_resumes_when_it_returns(postgres_url: str) -> None:
    if not moto_available():
        missing("moto's S3 server is not installed (pip install 'moto[server]')")
    port = free_port()
    large = "needs the object store " * 200  # above MIN_BYTES: its chunk is an object
    small = "kept in the database"  # below MIN_BYTES: no object at all
    with ExitStack() as stack:
        first_life = ExitStack()
        stack.callback(first_life.close)
        server = first_life.enter_context(moto_on(port))
        deployment = stack.enter_context(deployment_over(postgres_url, server, 2))
        first, second = deployment.client(0), deployment.client(1)
        stack.callback(first.close)
        stack.callback(second.close)
        fs = new_session(first, "outage")
        assert first.post(f"{fs}/large.txt", json={"content": large}).status_code == 201
        assert first.post(f"{fs}/small.txt", json={"content": small}).status_code == 201
        assert second.get(f"{fs}/large.txt").json()["content"] == large

        first_life.close()  # the object store goes away
        for client in (first, second):
            read = client.get(f"{fs}/large.txt")  # bounded by HANG_BUDGET: only a hang fails here
            assert read.status_code == 503, read.text
            assert read.json()["error"]["code"] == "storage_unavailable"
            assert "object store" in read.json()["error"]["message"]
            wrote = client.put(f"{fs}/large.txt", json={"content": large + "changed"})
            assert wrote.status_code == 503, wrote.text
            assert client.get(f"{fs}/small.txt").json()["content"] == small  # the database alone still serves
            # metadata still answers, and the refused write changed nothing
            assert sizes(client, fs) == {"large.txt": len(large), "small.txt": len(small)}

        back = stack.enter_context(moto_on(port))  # the same port; moto comes back empty (its objects were in memory)
        assert back.endpoint_url == server.endpoint_url
        for number, client in enumerate((first, second)):
            fresh = f"written after the outage {number} " * 200
            assert client.post(f"{fs}/after-{number}.txt", json={"content": fresh}).status_code == 201
            for reader in (first, second):
                assert reader.get(f"{fs}/after-{number}.txt").json()["content"] == fresh
        assert first.get(f"{fs}/small.txt").json()["content"] == small
        assert sizes(second, fs)["large.txt"] == len(large)


def test_processes_starting_together_on_a_new_database_migrate_it_once(postgres_url: str) -> None:
    """Six processes open a new PostgreSQL database at the same moment, each migrating the storage and the
    service's tables: the schema lock lets one migrate while the others wait, so every one starts."""
    db = fresh_database(postgres_url)
    script = (
        "import sys\n"
        "from workspacefs import SqlStore\n"
        "from workspacefs.server._tables import migrate_service\n"
        "sys.stdin.readline()\n"  # every process waits here, so they all begin at once
        "store = SqlStore(sys.argv[1])\n"
        "migrate_service(store)\n"
        "print('ok')\n"
    )
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", script, db],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    outcomes = []
    for process in starters:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in starters:
        out, err = process.communicate(timeout=HANG_BUDGET)
        outcomes.append((process.returncode, out.strip(), err.strip().splitlines()[-1:] if err.strip() else []))
    assert [(code, out) for code, out, _ in outcomes] == [(0, "ok")] * 6, outcomes
