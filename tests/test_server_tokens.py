"""Token scopes, expiry, rate limits and revocation, through the real application and two real service
processes on one database (SQLite and PostgreSQL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from conftest import api_routes
from fastapi.testclient import TestClient

from workspacefs import SqlStore
from workspacefs.cli import main
from workspacefs.server import TokenStore, create_app
from workspacefs.server.tokens import Scope
from workspacefs.testing._service import running_service


def error_of(response: Any) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return response.status_code, body["error"]["code"]


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def secured(store: SqlStore) -> Iterator[TestClient]:
    with TestClient(create_app(store, auth=True)) as client:
        yield client


def _agent() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


# --- scopes ----------------------------------------------------------------------------------------------------


def test_every_route_declares_its_scope_and_only_reads_are_open_to_read_tokens() -> None:
    app = create_app("sqlite:///:memory:", auth=True)
    read_only_posts = {"/stat", "/grep", "/glob"}  # POSTed for their bodies; they change nothing
    walked = list(api_routes(app.routes))
    assert len(walked) > 30 and any(r.path == "/v1/tokens" for r in walked)  # the walk reaches every router
    for route in walked:
        if not route.include_in_schema:
            continue
        needs = {d.call.__name__ for d in route.dependant.dependencies if d.call is not None}
        scopes = needs & {"needs_read", "needs_write", "needs_admin"}
        if route.path == "/v1/signin" and route.methods & {"POST", "DELETE"}:
            assert scopes == set(), route.methods  # signing in and out: what credentials the browser holds
            continue
        assert len(scopes) == 1, (route.path, needs)
        if route.path.startswith(("/v1/tokens", "/v1/approvals")) or (
            route.path.endswith("/policy") and route.methods & {"PUT", "DELETE"}
        ):
            assert scopes == {"needs_admin"}, route.path  # tokens, decisions and policies: admins only
        elif route.methods <= {"GET", "HEAD"} or any(route.path.endswith(p) for p in read_only_posts):
            assert scopes == {"needs_read"}, route.path
        else:
            assert scopes == {"needs_write"}, (route.path, route.methods)


def test_a_read_token_reads_and_changes_nothing(secured: TestClient, store: SqlStore) -> None:
    agent = _agent()
    tokens = TokenStore(store)
    writer, _ = tokens.create(agent_id=agent)
    reader, info = tokens.create(agent_id=agent, scope="read")
    assert info.scope is Scope.READ
    base = secured.post(f"/v1/agents/{agent}/sessions", json={"id": "s"}, headers=bearer(writer)).json()["id"]
    base = f"/v1/agents/{agent}/sessions/{base}"
    secured.post(f"{base}/fs/a.txt", json={"content": "a"}, headers=bearer(writer))
    snap = secured.post(f"{base}/snapshots", headers=bearer(writer)).json()["id"]
    as_reader = bearer(reader)
    for method, url, body in (
        ("GET", f"{base}/fs/a.txt", None),
        ("GET", f"{base}/fs", None),
        ("POST", f"{base}/fs/_/stat", {"path": "/a.txt"}),
        ("POST", f"{base}/fs/_/grep", {"pattern": "a"}),
        ("POST", f"{base}/fs/_/glob", {"pattern": "*"}),
        ("GET", f"{base}/snapshots", None),
        ("GET", f"{base}/snapshots/{snap}/diff", None),
        ("GET", f"/v1/agents/{agent}/sessions", None),
        ("GET", "/v1/agents", None),
    ):
        assert secured.request(method, url, json=body, headers=as_reader).status_code == 200, url
    for method, url, body in (
        ("POST", f"{base}/fs/b.txt", {"content": "b"}),
        ("PUT", f"{base}/fs/a.txt", {"content": "changed"}),
        ("DELETE", f"{base}/fs/a.txt", None),
        ("POST", f"{base}/fs/_/move", {"src_path": "/a.txt", "dst_path": "/c.txt"}),
        ("POST", f"{base}/fs/_/copy", {"src_path": "/a.txt", "dst_path": "/c.txt"}),
        ("POST", f"{base}/snapshots", {}),
        ("POST", f"{base}/snapshots/{snap}/restore", None),
        ("DELETE", f"{base}/snapshots/{snap}", None),
        ("POST", f"/v1/agents/{agent}/sessions", {}),
        ("DELETE", base, None),
        ("GET", "/v1/tokens", None),
        ("POST", "/v1/tokens", {"agent_id": agent}),
    ):
        refused = secured.request(method, url, json=body, headers=as_reader)
        assert error_of(refused) == (403, "insufficient_scope"), (method, url)
    raw = secured.put(
        f"{base}/fs/a.txt", content=b"x", headers={**as_reader, "content-type": "application/octet-stream"}
    )
    assert error_of(raw) == (403, "insufficient_scope")
    assert secured.get(f"{base}/fs/a.txt", headers=as_reader).json()["content"] == "a"
    assert len(secured.get(f"{base}/snapshots", headers=as_reader).json()["data"]) == 1


def test_a_write_token_acts_only_for_its_agent_and_manages_no_tokens(secured: TestClient, store: SqlStore) -> None:
    mine, theirs = _agent(), _agent()
    tokens = TokenStore(store)
    writer, _ = tokens.create(agent_id=mine)
    other, _ = tokens.create(agent_id=theirs)
    theirs_session = secured.post(f"/v1/agents/{theirs}/sessions", json={"id": "x"}, headers=bearer(other))
    assert theirs_session.status_code == 201
    as_writer = bearer(writer)
    assert secured.post(f"/v1/agents/{mine}/sessions", json={"id": "x"}, headers=as_writer).status_code == 201
    assert (
        secured.post(f"/v1/agents/{mine}/sessions/x/fs/f.txt", json={"content": "f"}, headers=as_writer).status_code
        == 201
    )
    assert secured.delete(f"/v1/agents/{mine}/sessions/x", headers=as_writer).status_code == 204
    refused = secured.post(f"/v1/agents/{theirs}/sessions", json={"id": "y"}, headers=as_writer)
    assert error_of(refused) == (404, "agent_not_found")
    for method, url in (("GET", "fs"), ("DELETE", ""), ("POST", "snapshots")):
        answer = secured.request(method, f"/v1/agents/{theirs}/sessions/x/{url}".rstrip("/"), headers=as_writer)
        assert error_of(answer) == (404, "session_not_found"), (method, url)
    assert error_of(secured.get("/v1/tokens", headers=as_writer)) == (403, "insufficient_scope")
    assert error_of(secured.post("/v1/tokens", json={"agent_id": mine}, headers=as_writer)) == (
        403,
        "insufficient_scope",
    )
    token_id = tokens.list()[0].token_id
    assert error_of(secured.delete(f"/v1/tokens/{token_id}", headers=as_writer)) == (403, "insufficient_scope")


def test_admin_tokens_manage_tokens_and_the_browser_listing(secured: TestClient, store: SqlStore) -> None:
    admin, _ = TokenStore(store).create(agent_id=None, label="admin")
    as_admin = bearer(admin)
    agent = _agent()
    made = secured.post(
        "/v1/tokens",
        json={"agent_id": agent, "scope": "read", "label": "ci", "expires_in": 3600, "rate_limit": 30},
        headers=as_admin,
    )
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["token"].startswith("wsfs_") and (body["scope"], body["agent_id"], body["rate_limit"]) == (
        "read",
        agent,
        30,
    )
    assert datetime.fromisoformat(body["expires_at"]) > datetime.now(UTC)
    listed = secured.get("/v1/tokens", headers=as_admin).json()["data"]
    assert any(t["id"] == body["id"] for t in listed) and all("token" not in t for t in listed)
    assert secured.get("/v1/agents", headers=bearer(body["token"])).json() == {"data": [agent]}
    assert error_of(secured.post("/v1/tokens", json={"scope": "admin", "agent_id": agent}, headers=as_admin)) == (
        422,
        "invalid_body",
    )
    every = secured.post("/v1/tokens", json={"scope": "admin"}, headers=as_admin).json()
    assert (every["scope"], every["agent_id"]) == ("admin", None)
    # what the browser does with an admin token: every agent, any agent's sessions
    secured.post(f"/v1/agents/{agent}/sessions", json={"id": "ui"}, headers=as_admin)
    assert agent in secured.get("/v1/agents", headers=as_admin).json()["data"]
    assert [s["id"] for s in secured.get(f"/v1/agents/{agent}/sessions", headers=as_admin).json()["data"]] == ["ui"]
    assert secured.delete(f"/v1/tokens/{body['id']}", headers=as_admin).status_code == 204
    assert error_of(secured.get("/v1/agents", headers=bearer(body["token"]))) == (401, "unauthorized")
    assert error_of(secured.delete(f"/v1/tokens/{body['id']}", headers=as_admin)) == (404, "token_not_found")


# --- expiry and rate limits --------------------------------------------------------------------------------------


def test_an_expired_token_gets_401_that_says_so(secured: TestClient, store: SqlStore) -> None:
    tokens = TokenStore(store)
    expired, _ = tokens.create(agent_id="late", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    fresh, info = tokens.create(agent_id="late", expires_in=timedelta(hours=1))
    refused = secured.get("/v1/agents", headers=bearer(expired))
    assert error_of(refused) == (401, "token_expired")
    assert "expired" in refused.json()["error"]["message"]
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert secured.get("/v1/agents", headers=bearer(fresh)).status_code == 200
    assert info.expires_at is not None and not info.expired()
    with pytest.raises(ValueError, match="admin"):
        tokens.create(agent_id="late", scope="admin")


def test_a_token_over_its_rate_gets_429_with_retry_after(store: SqlStore) -> None:
    tokens = TokenStore(store)
    limited, _ = tokens.create(agent_id="busy", rate_limit=3)
    by_default, _ = tokens.create(agent_id="busy")
    unlimited, _ = tokens.create(agent_id="busy", rate_limit=0)
    with TestClient(create_app(store, auth=True, rate_limit=5)) as client:
        assert [client.get("/v1/agents", headers=bearer(limited)).status_code for _ in range(3)] == [200] * 3
        refused = client.get("/v1/agents", headers=bearer(limited))
        assert error_of(refused) == (429, "rate_limited")
        assert int(refused.headers["retry-after"]) >= 1
        assert [client.get("/v1/agents", headers=bearer(by_default)).status_code for _ in range(6)] == [200] * 5 + [429]
        assert {client.get("/v1/agents", headers=bearer(unlimited)).status_code for _ in range(20)} == {200}
        # each token counts on its own, and refused requests cost nothing anyone else pays for
        assert error_of(client.get("/v1/agents", headers=bearer(limited)))[0] == 429


# --- revocation across processes ---------------------------------------------------------------------------------


def test_a_revocation_is_seen_at_once_by_another_process(service_url: str, fast_tmp: Path) -> None:
    url = service_url
    if url.startswith("sqlite"):
        url = f"sqlite:///{fast_tmp / f'two-{uuid.uuid4().hex}.db'}"
    store = SqlStore(url)
    tokens = TokenStore(store)
    admin, _ = tokens.create(agent_id=None, label="two processes")
    victim, victim_info = tokens.create(agent_id="revoked-bot")
    other, other_info = tokens.create(agent_id="revoked-bot")
    with running_service(url) as first, running_service(url) as second:
        assert first.pid != second.pid
        for service in (first, second):
            assert httpx.get(service.url + "/v1/agents", headers=bearer(victim)).status_code == 200
        revoked = httpx.delete(f"{first.url}/v1/tokens/{victim_info.token_id}", headers=bearer(admin))
        assert revoked.status_code == 204
        for service in (second, first):  # the other process first: nothing it cached may let the token in
            assert error_of(httpx.get(service.url + "/v1/agents", headers=bearer(victim))) == (401, "unauthorized")
        assert httpx.get(second.url + "/v1/agents", headers=bearer(other)).status_code == 200
        assert tokens.revoke(other_info.token_id)  # as `workspacefs token revoke` does, from a third process
        assert error_of(httpx.get(second.url + "/v1/agents", headers=bearer(other))) == (401, "unauthorized")
    store.close()


# --- the command line ----------------------------------------------------------------------------------------


def test_token_commands_take_scope_expiry_and_rate(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / f'tokens-{uuid.uuid4().hex}.db'}"
    runner = CliRunner()
    made = runner.invoke(
        main,
        [
            "token",
            "create",
            "--agent",
            "bot",
            "--scope",
            "read",
            "--expires-in",
            "2h",
            "--rate-limit",
            "5",
            "--db",
            url,
        ],
    )
    assert made.exit_code == 0, made.output
    assert "(read)" in made.stderr and "expires" in made.stderr
    store = SqlStore(url)
    info = TokenStore(store).verify(made.stdout.strip().splitlines()[-1])
    assert info is not None and (info.scope, info.agent_id, info.rate_limit) == (Scope.READ, "bot", 5)
    assert info.expires_at is not None and timedelta(hours=1) < info.expires_at - datetime.now(UTC) <= timedelta(
        hours=2
    )
    admin = runner.invoke(main, ["token", "create", "--all-agents", "--ttl", "30d", "--db", url])
    assert admin.exit_code == 0 and "(admin)" in admin.stderr
    for bad in (
        ["--agent", "bot", "--scope", "admin"],
        ["--agent", "bot", "--expires-in", "soon"],
        ["--agent", "bot", "--expires-in", "0"],
        ["--agent", "bot", "--rate-limit", "-1"],
    ):
        assert runner.invoke(main, ["token", "create", *bad, "--db", url]).exit_code == 2, bad
    listed = runner.invoke(main, ["token", "list", "--db", url]).stdout.splitlines()
    assert [line.split("\t")[1:3] for line in listed] == [["bot", "read"], ["*", "admin"]]
    assert listed[0].split("\t")[5] == "5" and listed[1].split("\t")[5] == "default"
    store.close()
