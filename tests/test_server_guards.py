"""Guard rails of the service (issue 14): a refused PUT changes nothing, session ids belong to their agent,
databases made before those ids were scoped keep every session at its URL, JSON bodies are bounded.

Everything runs through the real application on SQLite and on a real PostgreSQL.
"""

from __future__ import annotations

import itertools
import re
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from fastapi.testclient import TestClient

from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem, SqlStore
from workspacefs.cli import main
from workspacefs.errors import PreconditionFailedError, ReadOnlyFileError, UnsupportedOperationError
from workspacefs.server import SessionCatalog, create_app
from workspacefs.server.tokens import hash_token
from workspacefs.streams import content_id_of
from workspacefs.testing._postgres import throwaway_database

_ids = itertools.count()
OCTET = {"content-type": "application/octet-stream"}


def error_of(response: Any) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return response.status_code, body["error"]["code"]


@pytest.fixture
def client(store: SqlStore) -> Iterator[TestClient]:
    with TestClient(create_app(store, auth=False)) as test_client:
        yield test_client


def new_session(client: TestClient, agent: str) -> str:
    """A fresh session of ``agent``; its base URL."""
    session = f"g{next(_ids)}-{uuid.uuid4().hex[:8]}"
    assert client.post(f"/v1/agents/{agent}/sessions", json={"id": session}).status_code == 201
    return f"/v1/agents/{agent}/sessions/{session}"


# --- a refused PUT changes nothing ---------------------------------------------------------------------------


def _state(client: TestClient, url: str) -> tuple[str, bool, str]:
    got = client.get(url)
    assert got.status_code == 200, got.text
    return got.json()["content"], got.json()["is_readonly"], got.headers["etag"]


def test_a_put_with_a_stale_if_match_changes_neither_content_nor_flag(client: TestClient) -> None:
    base = new_session(client, "editor")
    locked, unlocked = f"{base}/fs/locked.txt", f"{base}/fs/open.txt"
    assert client.post(locked, json={"content": "kept", "is_readonly": True}).status_code == 201
    assert client.post(unlocked, json={"content": "kept"}).status_code == 201
    stale = '"' + content_id_of(b"something else") + '"'
    attempts: list[tuple[str, dict[str, Any]]] = [
        (locked, {"content": "new", "is_readonly": False}),  # was: the flag cleared, then 412
        (locked, {"is_readonly": False}),
        (unlocked, {"content": "new", "is_readonly": True}),
        (unlocked, {"is_readonly": True}),
        (unlocked, {"content": "new"}),
    ]
    for url, body in attempts:
        before = _state(client, url)
        refused = client.put(url, json=body, headers={"If-Match": stale})
        assert error_of(refused) == (412, "precondition_failed"), body
        assert _state(client, url) == before, body
    for url in (locked, unlocked):  # raw uploads too
        before = _state(client, url)
        assert error_of(client.put(url, content=b"new", headers={**OCTET, "If-Match": stale}))[0] in (403, 412)
        assert _state(client, url) == before


def test_content_and_flag_change_together_when_the_precondition_holds(client: TestClient) -> None:
    base = new_session(client, "editor")
    url = f"{base}/fs/doc.txt"
    created = client.post(url, json={"content": "v1", "is_readonly": True})
    assert created.status_code == 201 and created.json()["is_readonly"] is True
    assert error_of(client.put(url, json={"content": "v2"})) == (403, "read_only")  # the flag guards the content
    unlocked = client.put(
        url, json={"content": "v2", "is_readonly": False}, headers={"If-Match": created.headers["etag"]}
    )
    assert unlocked.status_code == 200 and (unlocked.json()["content"], unlocked.json()["is_readonly"]) == ("v2", False)
    relocked = client.put(
        url, json={"content": "v3", "is_readonly": True}, headers={"If-Match": unlocked.headers["etag"]}
    )
    assert (relocked.json()["content"], relocked.json()["is_readonly"]) == ("v3", True)
    flag_only = client.put(url, json={"is_readonly": False}, headers={"If-Match": relocked.headers["etag"]})
    assert (flag_only.json()["content"], flag_only.json()["is_readonly"]) == ("v3", False)
    # a create that is refused (the file exists) changes nothing either
    assert error_of(client.post(url, json={"content": "other", "is_readonly": True})) == (409, "already_exists")
    assert _state(client, url)[:2] == ("v3", False)
    nested = client.post(f"{base}/fs/new/dir/ro.txt", json={"content": "r", "is_readonly": True})
    assert nested.status_code == 201 and nested.json()["is_readonly"] is True


def test_the_library_api_writes_content_and_flag_in_one_step(store: SqlStore, fast_tmp: Path) -> None:
    fs = SqlFilesystem(store, f"flags-{uuid.uuid4().hex[:8]}")
    fs.create_bytes("a.txt", b"one", read_only=True)
    assert fs.stat("a.txt").read_only
    with pytest.raises(ReadOnlyFileError):
        fs.write_bytes_if("a.txt", b"two", expect="*")
    with pytest.raises(PreconditionFailedError):
        fs.write_bytes_if("a.txt", b"two", expect=content_id_of(b"stale"), read_only=False)
    with pytest.raises(PreconditionFailedError):
        fs.set_read_only_if("a.txt", False, expect=content_id_of(b"stale"))
    assert fs.read("a.txt").content == "one" and fs.stat("a.txt").read_only
    with fs.open_write_if("a.txt", expect=content_id_of(b"one"), read_only=False) as writer:
        writer.write(b"streamed")
    assert fs.read("a.txt").content == "streamed" and not fs.stat("a.txt").read_only
    # backends without per-file flags refuse read_only= before they change anything
    for other in (InMemoryFilesystem(), HostFilesystem(tempfile.mkdtemp(dir=fast_tmp))):
        other.write("a.txt", "kept")
        assert not other.capabilities.file_read_only
        with pytest.raises(UnsupportedOperationError):
            other.write_bytes_if("a.txt", b"x", expect="*", read_only=True)
        with pytest.raises(UnsupportedOperationError):
            other.open_write_if("a.txt", expect="*", read_only=False)
        with pytest.raises(UnsupportedOperationError):
            other.create_bytes("b.txt", b"x", read_only=True)
        with pytest.raises(UnsupportedOperationError):
            other.set_read_only_if("a.txt", True, expect="*")
        assert other.read("a.txt").content == "kept" and not other.exists("b.txt")
        other.close()


# --- session ids belong to their agent -----------------------------------------------------------------------


def test_two_agents_can_have_the_same_session_id_with_separate_files(client: TestClient, store: SqlStore) -> None:
    alpha, beta, name = f"alpha-{uuid.uuid4().hex[:6]}", f"beta-{uuid.uuid4().hex[:6]}", "main"
    never = client.get(f"/v1/agents/{beta}/sessions/{name}")
    assert client.post(f"/v1/agents/{alpha}/sessions", json={"id": name}).status_code == 201
    # beta learns nothing: the same answer as before alpha's session existed, and it may take the id itself
    assert error_of(client.get(f"/v1/agents/{beta}/sessions/{name}")) == error_of(never) == (404, "session_not_found")
    made = client.post(f"/v1/agents/{beta}/sessions", json={"id": name})
    assert made.status_code == 201 and made.json() == {**made.json(), "id": name, "agent_id": beta}
    assert error_of(client.post(f"/v1/agents/{alpha}/sessions", json={"id": name})) == (409, "already_exists")
    assert error_of(client.post(f"/v1/agents/{beta}/sessions", json={"id": name})) == (409, "already_exists")
    client.post(f"/v1/agents/{alpha}/sessions/{name}/fs/who.txt", json={"content": "alpha"})
    client.post(f"/v1/agents/{beta}/sessions/{name}/fs/who.txt", json={"content": "beta"})
    assert client.get(f"/v1/agents/{alpha}/sessions/{name}/fs/who.txt").json()["content"] == "alpha"
    assert client.get(f"/v1/agents/{beta}/sessions/{name}/fs/who.txt").json()["content"] == "beta"
    assert [s["id"] for s in client.get(f"/v1/agents/{alpha}/sessions").json()["data"]] == [name]
    assert [s["id"] for s in client.get(f"/v1/agents/{beta}/sessions").json()["data"]] == [name]
    snap = client.post(f"/v1/agents/alpha-x/sessions/{name}/snapshots")
    assert error_of(snap) == (404, "session_not_found")
    # deleting one leaves the other
    assert client.delete(f"/v1/agents/{alpha}/sessions/{name}").status_code == 204
    assert client.get(f"/v1/agents/{beta}/sessions/{name}/fs/who.txt").json()["content"] == "beta"
    # where the files live: readable storage ids an operator can open
    entry = SessionCatalog(store).get(beta, name)
    assert entry is not None and entry.storage_id == f"{beta}/{name}"
    assert SqlFilesystem(store, entry.storage_id, create=False).read("who.txt").content == "beta"


def test_the_default_agent_keeps_library_session_ids(client: TestClient, store: SqlStore) -> None:
    name = f"lib-{uuid.uuid4().hex[:8]}"
    SqlFilesystem(store, name).write("made/in/python.txt", "hello")
    listed = [s["id"] for s in client.get("/v1/agents/default/sessions").json()["data"]]
    assert name in listed
    assert error_of(client.post("/v1/agents/default/sessions", json={"id": name})) == (409, "already_exists")
    other = client.post("/v1/agents/someone/sessions", json={"id": name})
    assert other.status_code == 201  # the library session is the default agent's, not a taken id
    made = f"svc-{uuid.uuid4().hex[:8]}"
    assert client.post("/v1/agents/default/sessions", json={"id": made}).status_code == 201
    client.post(f"/v1/agents/default/sessions/{made}/fs/x.txt", json={"content": "x"})
    assert SqlFilesystem(store, made, create=False).read("x.txt").content == "x"  # same id in storage


def test_an_operator_opens_an_agents_session_with_the_cli(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / f'cli-{uuid.uuid4().hex}.db'}"
    with TestClient(create_app(url, auth=False)) as client:
        client.post("/v1/agents/support-bot/sessions", json={"id": "main"})
        client.post("/v1/agents/support-bot/sessions/main/fs/notes/todo.md", json={"content": "- ship\n"})
    listed = CliRunner().invoke(main, ["ls", "notes", "--fs", f"{url}?session=support-bot/main"])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.split() == ["todo.md"]


# --- a database from before scoped ids and scopes ---------------------------------------------------------


@contextmanager
def fresh_database(service_url: str, fast_tmp: Path) -> Iterator[str]:
    """An empty database on the same server: a new SQLite file, or a new PostgreSQL database."""
    if service_url.startswith("sqlite"):
        yield f"sqlite:///{fast_tmp / f'old-{uuid.uuid4().hex}.db'}"
        return
    with throwaway_database(service_url, "wsfs_old") as url:
        yield url


def _build_old_service_schema(url: str) -> SqlStore:
    """Storage at its newest revision, the service's tables at ``s0001`` (before scoped ids and token scopes),
    filled as the old code filled them: owner rows keyed by the public id, and a library session."""
    from alembic import command
    from alembic.config import Config

    store = SqlStore(url)
    config = Config()
    config.set_main_option("script_location", str(resources.files("workspacefs.server") / "migrations"))
    now = datetime.now(UTC)
    with store.write() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "s0001")
        for session in ("main", "beta-work", "library"):
            store.ensure_session(connection, session)
        connection.execute(
            sa.text("INSERT INTO wsfs_session_owners (session_id, agent_id, created_at) VALUES (:s, :a, :t)"),
            [{"s": "main", "a": "alpha", "t": now}, {"s": "beta-work", "a": "beta", "t": now}],
        )
        connection.execute(
            sa.text(
                "INSERT INTO wsfs_tokens (id, token_hash, agent_id, label, created_at) VALUES (:i, :h, :a, :l, :t)"
            ),
            [
                {"i": "t-alpha", "h": hash_token("wsfs_old_alpha"), "a": "alpha", "l": "old agent", "t": now},
                {"i": "t-admin", "h": hash_token("wsfs_old_admin"), "a": None, "l": "old admin", "t": now},
            ],
        )
    for session, content in (("main", "alpha's"), ("beta-work", "beta's"), ("library", "made in python")):
        SqlFilesystem(store, session, create=False).write("file.txt", content)
    return store


def test_an_old_database_upgrades_with_every_session_at_its_url(service_url: str, fast_tmp: Path) -> None:
    with fresh_database(service_url, fast_tmp) as url:
        store = _build_old_service_schema(url)
        as_alpha = {"Authorization": "Bearer wsfs_old_alpha"}
        as_admin = {"Authorization": "Bearer wsfs_old_admin"}
        with TestClient(create_app(store, auth=True)) as client:  # opening migrates to the newest revision
            for agent, session, content in (
                ("alpha", "main", "alpha's"),
                ("beta", "beta-work", "beta's"),
                ("default", "library", "made in python"),
            ):
                got = client.get(f"/v1/agents/{agent}/sessions/{session}/fs/file.txt", headers=as_admin)
                assert got.status_code == 200 and got.json()["content"] == content, (agent, got.text)
            # the old agent token still writes its agent's files, and the old admin token still manages tokens
            put = client.put("/v1/agents/alpha/sessions/main/fs/file.txt", json={"content": "v2"}, headers=as_alpha)
            assert put.status_code == 200
            scopes = {t["id"]: t["scope"] for t in client.get("/v1/tokens", headers=as_admin).json()["data"]}
            assert scopes == {"t-alpha": "write", "t-admin": "admin"}
            assert error_of(client.get("/v1/tokens", headers=as_alpha)) == (403, "insufficient_scope")
            # ids are per agent from now on, also next to sessions made before
            for agent in ("gamma", "default"):
                made = client.post(f"/v1/agents/{agent}/sessions", json={"id": "main"}, headers=as_admin)
                assert made.status_code == 201, made.text
                assert client.get(f"/v1/agents/{agent}/sessions/main/fs", headers=as_admin).json() == {"data": []}
            again = client.post("/v1/agents/alpha/sessions", json={"id": "main"}, headers=as_alpha)
            assert error_of(again) == (409, "already_exists")
            alpha_file = client.get("/v1/agents/alpha/sessions/main/fs/file.txt", headers=as_alpha)
            assert alpha_file.json()["content"] == "v2"
            assert sorted(client.get("/v1/agents", headers=as_admin).json()["data"]) == [
                "alpha",
                "beta",
                "default",
                "gamma",
            ]
        store.close()


# --- JSON bodies are bounded; raw bodies stream ----------------------------------------------------------


def test_json_bodies_are_bounded_and_say_to_stream(client: TestClient) -> None:
    base = new_session(client, "big")
    big = "x" * (5 * 1024 * 1024)
    refused = client.post(f"{base}/fs/big.txt", json={"content": big})
    assert error_of(refused) == (413, "too_large")
    assert "application/octet-stream" in refused.json()["error"]["message"]
    assert "4 MiB" in refused.json()["error"]["message"]
    assert error_of(client.get(f"{base}/fs/big.txt")) == (404, "not_found")
    raw = client.post(f"{base}/fs/big.txt", content=big.encode(), headers=OCTET)
    assert raw.status_code == 201 and raw.json()["size_bytes"] == len(big)
    replaced = client.put(f"{base}/fs/big.txt", content=big.encode() + b"!", headers=OCTET)
    assert replaced.status_code == 200 and replaced.json()["size_bytes"] == len(big) + 1


def test_a_raw_body_is_unbounded_only_where_it_streams(store: SqlStore) -> None:
    """The JSON limit let any ``application/octet-stream`` body through, to every route, and every route but the
    two upload routes reads its body whole: 256 MiB to ``POST /v1/signin``, which needs no token, held 512 MiB
    of the server's memory. A raw body over the limit is 413 on every other changing route (the test walks them)."""
    from conftest import api_routes

    app = create_app(store, auth=False, max_json_bytes=1024)
    big = b"x" * 4096
    with TestClient(app) as open_client:
        base = new_session(open_client, "raw")
        routes = [
            (method, route.path, route.name)
            for route in api_routes(app.routes)
            for method in sorted(route.methods - {"GET", "HEAD", "OPTIONS"})
        ]
        values = {
            "agent_id": "raw",
            "session_id": base.rpartition("/")[2],
            "path": "up.bin",
            "entry_id": "1",
            "action": "move",
        }
        streamed = []
        for method, template, name in routes:
            url = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values.get(m.group(1), "x"), template)
            answer = open_client.request(method, url, content=big, headers=OCTET)
            if (method, name) in {("POST", "create"), ("PUT", "update")}:
                streamed.append(answer.status_code)
                continue
            assert answer.status_code in (405, 413), (method, template, answer.status_code, answer.text)
            if answer.status_code == 413:
                assert error_of(answer) == (413, "too_large")
            else:  # the actions' catch-all for methods they do not take: nothing is read
                assert name == "not_an_action_method", (method, template)
        assert streamed == [201, 200]  # the uploads: larger than the limit, streamed and stored
        assert open_client.get(f"{base}/fs/up.bin", headers={"accept": "application/octet-stream"}).content == big
        # the reserved actions' names are no upload, whatever follows them
        for path in ("_/move", "_/grep", "_/anything"):
            assert open_client.post(f"{base}/fs/{path}", content=big, headers=OCTET).status_code == 413, path
