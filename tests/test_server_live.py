"""The service as users run it: the ``workspacefs`` command, a real socket, large files streamed both ways."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.cli import main
from workspacefs.server import SessionCatalog
from workspacefs.server.tokens import TokenStore
from workspacefs.testing._service import peak_rss_bytes, running_service

MIB = 1024 * 1024


def test_first_start_creates_an_admin_token_and_later_starts_do_not(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / f'first-{uuid.uuid4().hex}.db'}"
    with running_service(url) as service:
        assert service.token is not None
        assert service.signin_link is not None and "#signin=wsfs_signin_" in service.signin_link
        assert httpx.get(service.url + "/v1/agents").status_code == 401
        agents = httpx.get(service.url + "/v1/agents", headers=service.headers())
        assert agents.status_code == 200
        page = httpx.get(service.url + "/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert httpx.get(service.url + "/static/app.js").status_code == 200
        assert httpx.get(service.url + "/openapi.json").json()["info"]["title"] == "workspacefs"
    with running_service(url) as again:
        assert again.token is None
        assert "token create" in "".join(again.output)


def test_no_auth_only_on_loopback_and_it_says_so(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / f'noauth-{uuid.uuid4().hex}.db'}"
    refused = subprocess.run(
        [sys.executable, "-m", "workspacefs", "serve", "--db", url, "--no-auth", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2 and "loopback" in refused.stderr
    with running_service(url, auth=False) as service:
        assert "authentication is OFF" in "".join(service.output)
        assert httpx.get(service.url + "/v1/agents").status_code == 200


def test_token_and_db_commands(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / f'cli-{uuid.uuid4().hex}' / 'nested' / 'cli.db'}"
    runner = CliRunner()
    upgraded = runner.invoke(main, ["db", "upgrade", "--db", url])
    assert upgraded.exit_code == 0, upgraded.output
    created = runner.invoke(main, ["token", "create", "--agent", "bot-7", "--label", "ci", "--db", url])
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip().splitlines()[-1]
    assert secret.startswith("wsfs_")
    store = SqlStore(url)
    info = TokenStore(store).verify(secret)
    assert info is not None and info.agent_id == "bot-7" and info.label == "ci"
    listed = runner.invoke(main, ["token", "list", "--db", url])
    assert info.token_id in listed.stdout and "bot-7" in listed.stdout and secret not in listed.stdout
    assert runner.invoke(main, ["token", "create", "--db", url]).exit_code == 2  # neither --agent nor --all-agents
    assert runner.invoke(main, ["token", "create", "--agent", "x", "--all-agents", "--db", url]).exit_code == 2
    admin = runner.invoke(main, ["token", "create", "--all-agents", "--db", url])
    assert admin.exit_code == 0 and "every agent" in admin.stderr
    revoked = runner.invoke(main, ["token", "revoke", info.token_id, "--db", url])
    assert revoked.exit_code == 0
    assert TokenStore(store).verify(secret) is None
    assert runner.invoke(main, ["token", "revoke", info.token_id, "--db", url]).exit_code == 1
    store.close()
    assert runner.invoke(main, ["--help"]).exit_code == 0


@dataclass
class Live:
    """A running service on SQLite or PostgreSQL, an admin token's headers, and the store behind it."""

    url: str
    auth: dict[str, str]
    store: SqlStore
    pid: int


@pytest.fixture
def live(service_url: str) -> Iterator[Live]:
    store = SqlStore(service_url)
    secret, _ = TokenStore(store).create(agent_id=None, label="live test")
    with running_service(service_url) as service:
        yield Live(service.url, {"Authorization": f"Bearer {secret}"}, store, service.pid)
    store.close()


def _pattern_chunks(total: int, seed: bytes) -> Iterator[bytes]:
    block = hashlib.sha256(seed).digest() * (MIB // 32)
    sent = 0
    while sent < total:
        piece = block[: min(len(block), total - sent)]
        sent += len(piece)
        yield piece


def test_256_mib_streams_both_ways_in_fixed_server_memory(live: Live) -> None:
    total = 256 * MIB
    server_pid = live.pid
    with httpx.Client(base_url=live.url, headers=live.auth, timeout=300) as client:
        session = client.post("/v1/agents/big/sessions").json()["id"]
        fs = f"/v1/agents/big/sessions/{session}/fs"
        small = client.post(
            f"{fs}/warmup.bin", content=os.urandom(MIB), headers={"content-type": "application/octet-stream"}
        )
        assert small.status_code == 201
        client.get(f"{fs}/warmup.bin", headers={"accept": "application/octet-stream"})
        before = peak_rss_bytes(server_pid)
        expected = hashlib.sha256()
        for piece in _pattern_chunks(total, b"a"):
            expected.update(piece)
        created = client.post(
            f"{fs}/big.bin", content=_pattern_chunks(total, b"a"), headers={"content-type": "application/octet-stream"}
        )
        assert created.status_code == 201, created.text
        assert created.json()["size_bytes"] == total
        received = hashlib.sha256()
        size = 0
        with client.stream("GET", f"{fs}/big.bin", headers={"accept": "application/octet-stream"}) as response:
            assert response.status_code == 200
            assert response.headers["etag"] == created.headers["etag"]
            for piece in response.iter_raw():
                received.update(piece)
                size += len(piece)
        assert size == total and received.hexdigest() == expected.hexdigest()
        growth = peak_rss_bytes(server_pid) - before
        print(f"server peak memory growth for 256 MiB up and down: {growth / MIB:.1f} MiB")
        assert growth < 64 * MIB, f"the server's peak memory grew by {growth / MIB:.0f} MiB for a 256 MiB file"


def test_a_dropped_upload_leaves_the_old_content(live: Live) -> None:
    with httpx.Client(base_url=live.url, headers=live.auth, timeout=60) as client:
        session = client.post("/v1/agents/drop/sessions").json()["id"]
        fs = f"/v1/agents/drop/sessions/{session}/fs"
        client.post(f"{fs}/doc.txt", json={"content": "the old content"})

        def breaks_midway() -> Iterator[bytes]:
            yield b"new " * (1024 * 1024)
            raise OSError("the client crashed")

        with pytest.raises(OSError, match="crashed"):
            client.put(f"{fs}/doc.txt", content=breaks_midway(), headers={"content-type": "application/octet-stream"})
        assert client.get(f"{fs}/doc.txt").json()["content"] == "the old content"
    entry = SessionCatalog(live.store).get("drop", session)
    assert entry is not None and entry.storage_id == f"drop/{session}"
    fs_view = SqlFilesystem(live.store, entry.storage_id, create=False)
    assert fs_view.read("doc.txt").content == "the old content"
