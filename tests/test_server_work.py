"""Work a REST request does besides its own: the FastAPI dependencies solved for it and its hops to a worker thread
(counts, not times: ``bench/bench_server.py`` measures the time; the statements are in test_server_statements.py).

Solving a dependency costs a request about 8 µs, a hop to a thread more: a file's read is about 100 µs of CPU.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import fastapi.routing
import pytest
import sqlalchemy as sa
from conftest import api_routes
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.testclient import TestClient

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.server import SessionCatalog, TokenStore, _files, create_app
from workspacefs.server._access import AccessReader
from workspacefs.server._auth import Credentials
from workspacefs.server._service import Service
from workspacefs.server._tables import tokens as wsfs_tokens

FILES = "/v1/agents/{agent_id}/sessions/{session_id}/fs"


def solved(dependant: Any) -> list[str]:
    """The dependency functions FastAPI calls for one request of a route, nested ones too."""
    found: list[str] = []
    for sub in dependant.dependencies:
        found += solved(sub)
        if sub.call is not None:
            found.append(sub.call.__name__)
    return found


def test_a_file_request_solves_one_dependency_and_others_two() -> None:
    """A file's credentials, query check and service come from one dependency (there were four: the router's query
    check, the scope's check, the credentials it wraps and the service); other routes add the service's."""
    app = create_app("sqlite:///:memory:", auth=True)
    walked = [route for route in api_routes(app.routes) if route.include_in_schema]
    assert len(walked) > 30
    for route in walked:
        calls = solved(route.dependant)
        if route.path == "/v1/signin" and route.methods & {"POST", "DELETE"}:
            assert calls == ["known_query_only", "service"], route.path  # no credentials: signing in and out
            continue
        assert calls[0].startswith("needs_"), (route.path, route.methods, calls)
        if route.path.startswith(FILES) and not route.path.startswith(FILES + "/_/"):
            assert calls == [calls[0]], (route.path, route.methods, calls)  # nothing but the credentials
        else:
            assert calls in ([calls[0]], [calls[0], "service"]), (route.path, route.methods, calls)


@pytest.fixture
def served(service_url: str) -> Iterator[tuple[TestClient, Service, dict[str, str], str]]:
    store = SqlStore(service_url)
    agent = f"work-{uuid.uuid4().hex[:8]}"  # PostgreSQL is shared by the tests
    entry = SessionCatalog(store).create(agent, "main")
    SqlFilesystem(store, entry.storage_id, create=False).write("a.txt", "x" * 1024)
    secret, _ = TokenStore(store).create(agent_id=agent, rate_limit=0)
    with TestClient(create_app(store, auth=True)) as client:
        running = client.app.state.workspacefs  # type: ignore[attr-defined]
        yield client, running, {"Authorization": f"Bearer {secret}"}, f"/v1/agents/{agent}/sessions/main/fs/a.txt"
    store.close()


def test_a_file_request_crosses_to_a_worker_thread_once(
    served: tuple[TestClient, Service, dict[str, str], str],
) -> None:
    client, running, auth, file = served
    hops: list[str] = []
    run = running.run

    def counted(function: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        hops.append(getattr(function, "__name__", "?"))
        return run(function, *args)

    running.run = counted  # type: ignore[method-assign]
    for request in (
        lambda: client.get(file, headers=auth),
        lambda: client.put(file, headers=auth, json={"content": "new"}),
        lambda: client.get("/v1/agents", headers=auth),
    ):
        hops.clear()
        request().raise_for_status()
        assert len(hops) == 1, hops


def test_a_file_read_solves_no_parameters_and_answers_as_fastapi_would(
    served: tuple[TestClient, Service, dict[str, str], str],
) -> None:
    """A file's or the root's GET calls its endpoint directly (``_direct.py``: FastAPI's solving was a fifth of the
    read); an id FastAPI's pattern refuses still gets FastAPI's own answer: 400, or 401 first without a token."""
    client, _, auth, file = served
    solving = fastapi.routing.solve_dependencies
    solved: list[str] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        solved.append(kwargs["request"].url.path)
        return await solving(*args, **kwargs)

    root = file.rsplit("/", 1)[0]
    fastapi.routing.solve_dependencies = counted  # type: ignore[assignment]
    try:
        for url in (file, root, file + "/..", root.replace("/fs", "/fs/")):
            answer = client.get(url, headers=auth)
            assert answer.status_code in (200, 400), (url, answer.text)
        assert solved == []
        read = client.get(file, headers=auth)
        assert read.json()["content"] == "x" * 1024 and read.headers["etag"]
        agent = file.split("/")[3]
        for bad in (agent + "%0A", "-" + agent, agent + "%20x", "a" * 129):
            wrong = file.replace(f"/agents/{agent}/", f"/agents/{bad}/")
            answer = client.get(wrong, headers=auth)
            assert (answer.status_code, answer.json()["error"]["code"]) == (400, "bad_request"), (bad, answer.text)
            assert "should match pattern" in answer.json()["error"]["message"]  # pydantic's words: FastAPI answered
            assert client.get(wrong).status_code == 401  # the credentials' check comes first, as FastAPI solves it
        assert len(solved) == 8  # those went to FastAPI's handler
        solved.clear()
        assert client.get(file + "?typo=1", headers=auth).status_code == 400
        assert client.get(file, headers={"Authorization": "Bearer wsfs_unknown"}).status_code == 401
        assert solved == []
    finally:
        fastapi.routing.solve_dependencies = solving  # type: ignore[assignment]


def test_a_file_read_honours_an_override_of_its_credentials_dependency(
    served: tuple[TestClient, Service, dict[str, str], str],
) -> None:
    """An application that overrides the credentials' dependency (``app.dependency_overrides``, FastAPI's way to
    swap authentication) gets its override on every route: the direct call of a file's GET skipped it, so the
    read answered 401 where FastAPI, and the same file's PUT, used the override."""
    client, _, _, file = served
    app: Any = client.app
    route = next(r for r in api_routes(app.routes) if r.path == FILES + "/{path:wsfs_path}" and "GET" in r.methods)
    put = next(r for r in api_routes(app.routes) if r.path == FILES + "/{path:wsfs_path}" and "PUT" in r.methods)

    def anyone(request: Request) -> Credentials:
        return Credentials(request.app.state.workspacefs, None)  # as without auth

    app.dependency_overrides[route.dependant.dependencies[0].call] = anyone
    app.dependency_overrides[put.dependant.dependencies[0].call] = anyone
    try:
        assert client.put(file, json={"content": "over"}).status_code == 200
        got = client.get(file)
        assert got.json().get("content") == "over", got.text
        assert client.get(file.rsplit("/", 1)[0]).status_code == 200
    finally:
        app.dependency_overrides.clear()
    assert client.get(file).status_code == 401


def test_a_file_read_runs_the_dependencies_its_router_was_included_with(
    served: tuple[TestClient, Service, dict[str, str], str],
) -> None:
    """An application that includes the files router with dependencies of its own (``include_router(...,
    dependencies=...)``: an audit, an extra check) has them run for every route: the direct call of a file's
    GET skipped them (FastAPI keeps those in the included route's context, not in the route)."""
    client, running, auth, file = served

    def teapot() -> None:
        raise HTTPException(418)

    app = FastAPI()
    app.state.workspacefs = running
    app.include_router(_files.router, dependencies=[Depends(teapot)])
    with TestClient(app) as other:
        assert other.put(file, headers=auth, json={"content": "x"}).status_code == 418
        assert other.get(file, headers=auth).status_code == 418
        assert other.get(file.rsplit("/", 1)[0], headers=auth).status_code == 418
    assert client.get(file, headers=auth).status_code == 200  # the service's own app: no such dependency


def test_an_unknown_query_parameter_is_refused_by_every_router_before_the_token(
    served: tuple[TestClient, Service, dict[str, str], str],
) -> None:
    """The check moved from each router into the one dependency: it still comes first (400 even without a token)."""
    client, _, auth, file = served
    session = file.rsplit("/fs/", 1)[0]
    for method, url in (
        ("GET", file),
        ("PUT", file),
        ("GET", "/v1/agents"),
        ("GET", session),
        ("GET", session + "/snapshots"),
        ("GET", session + "/history"),
        ("GET", session + "/policy"),
        ("POST", session.replace("/fs", "") + "/fs/_/grep"),
        ("GET", "/v1/tokens"),
        ("GET", "/v1/signin"),
    ):
        for headers in (auth, {}):
            answer = client.request(method, url + "?typo=1", headers=headers, json={"pattern": "x"})
            assert answer.status_code == 400, (method, url, answer.text)
            assert answer.json()["error"]["code"] == "unknown_parameter"


def test_a_tokens_row_typed_once_is_still_read_every_time(service_url: str) -> None:
    """The typed values of a token's row are kept (``_access.py``), keyed by the whole row: an expiry changed by
    another process applies to the next lookup, and a revoked token is refused at once."""
    store = SqlStore(service_url)
    try:
        agent = f"typed-{uuid.uuid4().hex[:8]}"
        SessionCatalog(store).create(agent, "main")
        tokens = TokenStore(store)
        secret, info = tokens.create(agent_id=agent)
        reader = AccessReader(store)
        first = reader.lookup(secret, agent, "main")
        assert first.token == info and reader.lookup(secret, agent, "main").token is first.token  # typed once
        soon = (datetime.now(UTC) + timedelta(minutes=5)).replace(microsecond=0)  # stored exactly on both databases
        with store.write() as connection:  # as another process would change it
            connection.execute(sa.update(wsfs_tokens).where(wsfs_tokens.c.id == info.token_id).values(expires_at=soon))
        changed = reader.lookup(secret, agent, "main").token
        assert changed is not None and changed.expires_at is not None
        assert changed.expires_at == soon
        assert tokens.revoke(info.token_id)
        assert reader.lookup(secret, agent, "main").token is None
    finally:
        store.close()
