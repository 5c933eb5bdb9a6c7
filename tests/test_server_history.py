"""The service's history endpoints on SQLite and a real PostgreSQL: who changed what (the actor a request's
token and headers declare), the content of any version, undo with its conflict, and the policy and scopes
that govern them. The live event stream has its own module (``test_server_events.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from workspacefs import SqlStore
from workspacefs.server import create_app
from workspacefs.server.tokens import TokenStore

AGENT = "agent-h"


class Session:
    """One fresh session of one agent, reached with one token."""

    def __init__(self, client: TestClient, token: str, agent: str = AGENT) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}
        self.base = f"/v1/agents/{agent}/sessions/h-{uuid.uuid4().hex[:10]}"
        self.session = self.base.rsplit("/", 1)[1]
        created = client.post(f"/v1/agents/{agent}/sessions", json={"id": self.session}, headers=self.headers)
        assert created.status_code == 201, created.text

    def call(self, method: str, url: str, **options: Any) -> Any:
        headers = {**self.headers, **options.pop("headers", {})}
        return self.client.request(method, self.base + url, headers=headers, **options)

    def write(self, path: str, content: str, **headers: str) -> None:
        exists = self.call("GET", f"/fs{path}").status_code == 200
        answer = self.call("PUT" if exists else "POST", f"/fs{path}", json={"content": content}, headers=headers)
        assert answer.status_code in (200, 201), answer.text

    def history(self, **query: Any) -> list[dict[str, Any]]:
        answer = self.call("GET", "/history", params=query)
        assert answer.status_code == 200, answer.text
        entries: list[dict[str, Any]] = answer.json()["data"]
        return entries


@pytest.fixture
def tokens(store: SqlStore) -> TokenStore:
    return TokenStore(store)


@pytest.fixture
def client(store: SqlStore) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as test_client:
        yield test_client


@pytest.fixture
def agent_token(tokens: TokenStore) -> str:
    return tokens.create(agent_id=AGENT, label="ci")[0]


def test_history_names_the_token_agent_the_session_and_the_tool_call(client: TestClient, agent_token: str) -> None:
    ws = Session(client, agent_token)
    ws.write("/notes.md", "one\n", **{"X-Tool-Call-Id": "call-1"})
    ws.write("/notes.md", "two\n", **{"X-Actor": "planner"})
    entries = ws.history()
    assert [e["operation"] for e in entries] and len(entries) == 2
    newest, oldest = entries
    assert oldest["actor"] == {
        "name": AGENT,
        "session": ws.session,
        "tool_call": "call-1",
        "via": "rest",
        "label": f"{AGENT} (session {ws.session}, call call-1) via rest",
    }
    assert newest["actor"]["name"] == f"{AGENT}/planner"  # refined, never replaced
    assert newest["entry_id"] > oldest["entry_id"]
    [change] = newest["changes"]
    assert change["path"] == "/notes.md" and change["kind"] == "modified" and change["size_delta"] == 0
    assert oldest["changes"][0]["kind"] == "created" and oldest["changes"][0]["size_delta"] == 4
    assert ws.history(actor="call-1")[0]["entry_id"] == oldest["entry_id"]
    assert [e["entry_id"] for e in ws.history(since=oldest["entry_id"])] == [newest["entry_id"]]
    assert len(ws.history(limit=1)) == 1
    one = ws.call("GET", f"/history/{oldest['entry_id']}")
    assert one.status_code == 200 and one.json() == oldest


def test_since_takes_every_day_of_the_month(client: TestClient, agent_token: str) -> None:
    """The time pattern's days stopped at 29: ``since=2026-01-31T00:00:00Z`` (or any 30th or 31st) was 400."""
    ws = Session(client, agent_token)
    ws.write("/a.txt", "a")
    for day in ("2026-01-30T00:00:00Z", "2026-01-31T23:59:59Z", "2026-03-31T00:00:00+02:00", "2001-12-31T10:00Z"):
        assert len(ws.history(since=day)) == 1, day  # all before the write
    assert ws.history(since="9999-12-31T23:59:59Z") == []
    for wrong in ("2026-02-30T00:00:00Z", "2026-04-31T00:00:00Z", "2026-01-32T00:00:00Z"):
        assert ws.call("GET", "/history", params={"since": wrong}).status_code == 400, wrong


def test_a_header_cannot_pass_for_another_agent(client: TestClient, agent_token: str) -> None:
    ws = Session(client, agent_token)
    ws.write("/a.txt", "x", **{"X-Actor": "other-agent"})
    assert ws.history()[0]["actor"]["name"] == f"{AGENT}/other-agent"
    assert ws.history(actor="other-agent") == []
    bad = ws.call("PUT", "/fs/a.txt", json={"content": "y"}, headers={"X-Actor": "a\tb"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_header"


def test_the_browser_cookie_is_the_user_via_browser(client: TestClient, tokens: TokenStore, agent_token: str) -> None:
    ws = Session(client, agent_token)
    signed = client.post("/v1/signin", json={"token": agent_token}, headers={"X-Workspacefs": "1"})
    assert signed.status_code == 200
    cookie_only = TestClient(client.app, cookies=dict(client.cookies))
    written = cookie_only.post(
        ws.base + "/fs/from-browser.txt", json={"content": "hi"}, headers={"X-Workspacefs": "1", "X-Actor": "mallory"}
    )
    assert written.status_code == 201, written.text
    actor = ws.history()[0]["actor"]
    assert (actor["name"], actor["via"], actor["session"]) == ("user via browser", "browser", ws.session)


def test_content_before_and_after_any_entry(client: TestClient, agent_token: str) -> None:
    ws = Session(client, agent_token)
    ws.write("/f.txt", "v1\n")
    ws.write("/f.txt", "v2\n")
    ws.write("/f.txt", "v3\n")
    first, second = sorted(e["entry_id"] for e in ws.history())[:2]

    def content(entry: int, side: str) -> tuple[int, bytes]:
        answer = ws.call("GET", f"/history/{entry}/content", params={"path": "/f.txt", "side": side})
        return answer.status_code, answer.content

    assert content(second, "before") == (200, b"v1\n")
    assert content(second, "after") == (200, b"v2\n")
    assert content(first, "before")[0] == 404  # nothing was there before it was created
    assert ws.call("GET", f"/history/{second}/content", params={"path": "/other.txt"}).status_code == 404
    assert ws.call("GET", "/history/999999").json()["error"]["code"] == "history_entry_not_found"


def test_undo_an_entry_then_undo_the_undo(client: TestClient, agent_token: str) -> None:
    ws = Session(client, agent_token)
    ws.write("/f.txt", "kept\n")
    ws.write("/f.txt", "mistake\n")
    mistake = ws.history()[0]["entry_id"]
    undone = ws.call("POST", "/undo", json={"entry_id": mistake})
    assert undone.status_code == 200, undone.text
    [made] = undone.json()["data"]
    assert made["operation"] == "undo" and made["undoes"] == mistake and made["actor"]["name"] == AGENT
    assert ws.call("GET", "/fs/f.txt").json()["content"] == "kept\n"
    again = ws.call("POST", "/undo", json={"entry_id": made["entry_id"]})
    assert again.status_code == 200 and ws.call("GET", "/fs/f.txt").json()["content"] == "mistake\n"


def test_undo_refuses_over_a_later_change_and_names_it(client: TestClient, agent_token: str) -> None:
    ws = Session(client, agent_token)
    ws.write("/f.txt", "a\n")
    ws.write("/f.txt", "b\n")
    target = ws.history()[0]["entry_id"]
    ws.write("/f.txt", "c\n")
    later = ws.history()[0]["entry_id"]
    refused = ws.call("POST", "/undo", json={"entry_id": target})
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "undo_conflict" and error["later"] == [later] and str(later) in error["message"]
    assert ws.call("GET", "/fs/f.txt").json()["content"] == "c\n"
    forced = ws.call("POST", "/undo", json={"entry_id": target, "force": True})
    assert forced.status_code == 200 and ws.call("GET", "/fs/f.txt").json()["content"] == "a\n"


def test_undo_an_actors_last_entries(client: TestClient, agent_token: str) -> None:
    ws = Session(client, agent_token)
    ws.write("/keep.txt", "k")
    ws.write("/one.txt", "1", **{"X-Actor": "bot"})
    ws.write("/two.txt", "2", **{"X-Actor": "bot"})
    undone = ws.call("POST", "/undo", json={"actor": f"{AGENT}/bot", "last": 2})
    assert undone.status_code == 200, undone.text
    assert len(undone.json()["data"]) == 2
    names = [f["name"] for f in ws.call("GET", "/fs").json()["data"]]
    assert names == ["keep.txt"]
    for body in ({}, {"entry_id": 1, "actor": "x"}, {"last": 2}, {"entry_id": 0}, {"entry_id": "1"}):
        assert ws.call("POST", "/undo", json=body).status_code == 422, body


def test_scopes_and_other_agents(client: TestClient, tokens: TokenStore, agent_token: str) -> None:
    ws = Session(client, agent_token)
    ws.write("/f.txt", "x")
    entry = ws.history()[0]["entry_id"]
    reader = tokens.create(agent_id=AGENT, scope="read")[0]
    as_reader = {"Authorization": f"Bearer {reader}"}
    assert client.get(ws.base + "/history", headers=as_reader).status_code == 200
    refused = client.post(ws.base + "/undo", json={"entry_id": entry}, headers=as_reader)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "insufficient_scope"
    stranger = {"Authorization": f"Bearer {tokens.create(agent_id='someone-else')[0]}"}
    assert client.get(ws.base + "/history", headers=stranger).status_code == 404
    assert client.get(ws.base + "/history").status_code == 401
    assert ws.call("GET", "/history", params={"nope": 1}).status_code == 400
    assert ws.call("GET", "/history", params={"since": "yesterday"}).status_code == 400


def test_the_policy_governs_undo_and_old_versions(client: TestClient, tokens: TokenStore) -> None:
    guarded = tokens.create(
        agent_id=AGENT, policy={"rules": [{"action": "deny", "operations": ["write", "read"], "pattern": "secret/**"}]}
    )[0]
    free = Session(client, tokens.create(agent_id=AGENT)[0])
    free.write("/secret/key.txt", "v1")
    free.write("/secret/key.txt", "v2")
    entry = free.history()[0]["entry_id"]
    limited = {"Authorization": f"Bearer {guarded}"}
    undo = client.post(free.base + "/undo", json={"entry_id": entry}, headers=limited)
    assert undo.status_code == 403 and undo.json()["error"]["code"] == "policy_denied"
    old = client.get(free.base + f"/history/{entry}/content", params={"path": "/secret/key.txt"}, headers=limited)
    assert old.status_code == 403
    assert free.call("GET", "/fs/secret/key.txt").json()["content"] == "v2"


def test_openapi_documents_the_history_routes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    base = "/v1/agents/{agent_id}/sessions/{session_id}"
    for route in ("/history", "/history/{entry_id}", "/history/{entry_id}/content", "/undo", "/events"):
        assert base + route in paths, route
    assert "text/event-stream" in paths[base + "/events"]["get"]["responses"]["200"]["content"]
