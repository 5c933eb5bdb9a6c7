"""Other sites' pages against a service without tokens: cross-site request forgery, route by route: a change a browser makes without ``X-Workspacefs: 1`` is refused
when the service runs without tokens (``serve --no-auth``: a browser then needs no cookie, so any site's page could
write), on every route that changes anything, including the ones added later (the test walks the routes).

The requests are what a form on another site sends: ``text/plain`` (a JSON body fits in one), an ``Origin`` and a
``Sec-Fetch-Site`` of ``cross-site``. (With a sign-in cookie the same header was required already:
``test_server_signin.py``.) And DNS rebinding: a page of another site whose name is pointed at 127.0.0.1 is
same-origin with the service, so a browser must reach it by a loopback name.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import api_routes
from fastapi.testclient import TestClient

from workspacefs.server import create_app

BROWSER = {"X-Workspacefs": "1"}
FORGED = {"content-type": "text/plain", "origin": "https://evil.example", "sec-fetch-site": "cross-site"}
_SAFE = {"GET", "HEAD", "OPTIONS"}


def error_of(response: Any) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return response.status_code, body["error"]["code"]


def _changes(app: Any) -> list[tuple[str, str]]:
    """Every (method, path template) of the application that may change something."""
    found = [
        (method, route.path)
        for route in api_routes(app.routes)
        if route.name != "not_an_action_method"  # only answers 405 (actions are POSTed), before anything else
        for method in route.methods - _SAFE
    ]
    assert len(found) >= 15, found  # the walk sees the routes (files, actions, sessions, history, admin, sign-in)
    return sorted(found)


def _url(template: str, agent: str) -> str:
    values = {
        "agent_id": agent,
        "session_id": "s",
        "path": "f.txt",
        "entry_id": "1",
        "snapshot_id": "snap",
        "action": "move",
    }
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values.get(m.group(1), "x"), template)


def _forged_everywhere(client: TestClient, agent: str) -> None:
    """Every changing route refuses the forged request (403 browser_header_required), and nothing changed."""
    before = client.get(f"/v1/agents/{agent}/sessions/s/fs").json()
    for method, template in _changes(client.app):
        answer = client.request(method, _url(template, agent), content=b'{"content": "forged"}', headers=FORGED)
        assert answer.status_code == 403, (method, template, answer.status_code, answer.text)
        assert error_of(answer) == (403, "browser_header_required"), (method, template)
    assert client.get(f"/v1/agents/{agent}/sessions/s/fs").json() == before
    assert [s["id"] for s in client.get(f"/v1/agents/{agent}/sessions").json()["data"]] == ["s"]


@pytest.fixture
def open_client(store: Any) -> Iterator[TestClient]:
    with TestClient(create_app(store, auth=False), base_url="http://127.0.0.1:8765") as client:
        yield client


def test_without_auth_a_page_of_another_site_changes_nothing(open_client: TestClient) -> None:
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    assert open_client.post(f"/v1/agents/{agent}/sessions", json={"id": "s"}).status_code == 201
    _forged_everywhere(open_client, agent)
    # the web file browser sends the header; API clients (no Origin, no Sec-Fetch-Site) need none
    url = f"/v1/agents/{agent}/sessions/s/fs/"
    page = {**FORGED, **BROWSER, "content-type": "application/json", "sec-fetch-site": "same-origin"}
    assert open_client.post(url + "page.txt", json={"content": "x"}, headers=page).status_code == 201
    assert open_client.post(url + "api.txt", json={"content": "x"}).status_code == 201
    # reading needs no header (another site's page cannot read the answer: no CORS)
    assert open_client.get(url + "api.txt", headers=FORGED).status_code == 200


def test_without_auth_a_browser_reaches_the_service_only_by_a_loopback_name(open_client: TestClient) -> None:
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    assert open_client.post(f"/v1/agents/{agent}/sessions", json={"id": "s"}).status_code == 201
    url = f"/v1/agents/{agent}/sessions/s/fs/secret.txt"
    assert open_client.post(url, json={"content": "mine"}).status_code == 201
    # a page of http://evil.example:8765, its name rebound to 127.0.0.1: same-origin, so it could read the answers
    rebound = {"host": "evil.example:8765", "sec-fetch-site": "same-origin", "sec-fetch-mode": "cors"}
    for path in ("/v1/agents", f"/v1/agents/{agent}/sessions", url, f"/v1/agents/{agent}/sessions/s/history"):
        assert error_of(open_client.get(path, headers=rebound)) == (403, "foreign_host"), path
    changed = open_client.put(
        url, json={"content": "theirs"}, headers={**rebound, **BROWSER, "origin": "http://evil.example:8765"}
    )
    assert error_of(changed) == (403, "foreign_host")
    assert open_client.get(url).json()["content"] == "mine"
    # the service's own names and addresses, with or without a port; API clients (no browser headers) as before
    for host in ("localhost:8765", "127.0.0.1", "127.0.0.2:80", "[::1]:8765", "app.localhost:8765", "LOCALHOST"):
        answer = open_client.get(url, headers={**rebound, "host": host})
        assert answer.status_code == 200, (host, answer.text)
    assert open_client.get(url, headers={"host": "evil.example:8765"}).status_code == 200
