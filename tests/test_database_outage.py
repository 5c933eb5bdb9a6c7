"""A PostgreSQL server that stops under a running store and service: every surface says the storage cannot be
reached (``ConnectionError``: 503 ``storage_unavailable``, exit 1, a "try again" tool message) instead of a
500 or a traceback, and everything works again once the server is back. A real server, really stopped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from conftest import missing
from fastapi.testclient import TestClient

from workspacefs import SqlFilesystem, SqlStore, ToolContext, dispatch
from workspacefs.cli import main
from workspacefs.server import TokenStore, create_app
from workspacefs.testing._postgres import PostgresServer, postgres_binaries, postgres_server


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    if postgres_binaries() is None:
        missing("PostgreSQL server binaries are not installed (apt-get install postgresql)")
    with postgres_server("wsfs_outage") as running:
        yield running


def test_a_stopped_server_is_unreachable_on_every_surface_then_recovers(server: PostgresServer) -> None:
    store = SqlStore(server.url)
    fs = SqlFilesystem(store, "outage")
    fs.write("a.txt", "before\n")
    secret, _ = TokenStore(store).create(agent_id=None, label="admin")
    headers = {"Authorization": f"Bearer {secret}"}
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        assert client.get("/v1/agents", headers=headers).status_code == 200
        server.stop()
        with pytest.raises(ConnectionError, match="Cannot reach the database"):
            fs.read("a.txt")
        with pytest.raises(ConnectionError):
            fs.write("b.txt", "during\n")
        with pytest.raises(ConnectionError):
            fs.snapshot()
        answered = client.get("/v1/agents", headers=headers)  # the token's own lookup
        assert answered.status_code == 503, answered.text
        assert answered.json()["error"]["code"] == "storage_unavailable"
        read = client.get("/v1/agents/default/sessions/outage/fs/a.txt", headers=headers)
        assert read.status_code == 503, read.text
        tool = dispatch("read_file", {"path": "a.txt"}, ToolContext(filesystem=fs))
        assert not tool.success and "try again" in tool.message.lower(), tool.message
        cli = CliRunner().invoke(main, ["cat", "a.txt", "--fs", f"{server.url}?session=outage"])
        assert cli.exit_code == 1 and "Cannot" in cli.output and "Traceback" not in cli.output, cli.output
        server.start()
        assert fs.read("a.txt").content == "before\n"
        fs.write("b.txt", "after\n")
        assert client.get("/v1/agents/default/sessions/outage/fs/b.txt", headers=headers).json()["content"] == "after\n"
    store.close()
