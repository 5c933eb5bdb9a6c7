"""The REST API's tests again, with sessions kept outside the service's database (``serve --sessions-root``):
a host directory per session, an object-store prefix per session, and a composite layout per session. The
catalogue, tokens and policies stay in the database (SQLite here); only where the files are changes."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_server_api import *  # noqa: F403 - the API's own tests, run here on other storage
from test_server_api import Api

from workspacefs.server import create_app
from workspacefs.testing._s3 import S3Server

SQL_ONLY = {
    "test_library_sessions_belong_to_the_default_agent": "library sessions are rows of the SQL storage",
    "test_grep_lines_carry_the_python_name_line_content": "it reads the session back through SqlFilesystem",
    "test_read_only_files_cannot_change_but_can_be_deleted": "per-file flags are SQL's (501 elsewhere: below)",
}
"""API tests that are about the SQL storage itself, and why; the rest run here on every storage."""
for _name in SQL_ONLY:
    del globals()[_name]


@pytest.fixture(params=["host", "objectstore", "composite"])
def sessions_root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where this test's sessions keep their files."""
    if request.param == "host":
        return f"file://{tmp_path / 'agents'}"
    if request.param == "objectstore":
        server: S3Server = request.getfixturevalue("s3_server")
        return server.url("wsfs-tests", f"api-{uuid.uuid4().hex[:8]}")
    layout = tmp_path / "layout.toml"  # one mount, so listings are the API tests' own (two: see below)
    layout.write_text(f'[mounts]\n"/" = "file://{tmp_path}/trees/{{agent}}/{{session}}"\n')
    return f"composite://{layout}"


@pytest.fixture
def service_url(fast_tmp: Path) -> str:
    """The catalogue's database: SQLite (the API on PostgreSQL is test_server_api's)."""
    return f"sqlite:///{tempfile.mkdtemp(dir=fast_tmp)}/service.db"


@pytest.fixture
def client(store: Any, sessions_root: str) -> Iterator[TestClient]:
    with TestClient(create_app(store, auth=False, sessions_root=sessions_root)) as test_client:
        yield test_client


@pytest.fixture
def api(client: TestClient, store: Any) -> Api:
    return Api(client, store)


@pytest.fixture
def host_client(store: Any, tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    root = tmp_path / "agents"
    app = create_app(store, auth=False, sessions_root=f"file://{root}")
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client, root


def test_a_host_session_is_a_directory_per_agent_and_session(host_client: tuple[TestClient, Path]) -> None:
    client, root = host_client
    api = Api(client, None, agent="alice")  # type: ignore[arg-type]
    api.create("/src/app.py", "print('hi')\n")
    assert (root / "alice" / api.session / "src" / "app.py").read_text() == "print('hi')\n"
    snapshot = client.post(f"{api.base}/snapshots").json()
    assert (root / ".snapshots" / "alice" / api.session).is_dir()  # beside the sessions, never inside one
    client.put(api.fs("/src/app.py"), json={"content": "changed\n"})
    assert client.post(f"{api.base}/snapshots/{snapshot['id']}/restore").status_code == 200
    assert (root / "alice" / api.session / "src" / "app.py").read_text() == "print('hi')\n"
    listed = client.get("/v1/agents/alice/sessions").json()["data"]
    assert [(s["id"], s["file_count"]) for s in listed] == [(api.session, None)]  # not counted off the database
    refused = client.post(api.fs("/locked.txt"), json={"content": "x", "is_readonly": True})
    assert refused.status_code == 501, refused.text  # no per-file flags in a host directory: said, not ignored
    assert client.delete(api.base).status_code == 204
    assert not (root / "alice").exists() and not (root / ".snapshots" / "alice").exists()
    assert client.get(api.fs("/src/app.py")).status_code == 404


def test_a_composite_layout_gives_each_session_its_own_mounts(store: Any, tmp_path: Path) -> None:
    layout = tmp_path / "layout.toml"
    layout.write_text(
        "[mounts]\n"
        f'"/workspace" = "file://{tmp_path}/trees/{{agent}}/{{session}}"\n'
        f'"/notes" = "sqlite:///{tmp_path}/notes.db?session={{agent}}-{{session}}"\n'
    )
    with TestClient(create_app(store, auth=False, sessions_root=f"composite://{layout}")) as client:
        one, two = Api(client, store, agent="alice"), Api(client, store, agent="bob")
        one.create("/notes/todo.md", "alice's\n")
        two.create("/notes/todo.md", "bob's\n")
        one.create("/workspace/a.txt", "a")
        listing = client.get(one.fs()).json()["data"]
        assert [e["path"] for e in listing] == ["/notes", "/workspace"]
        assert client.get(one.fs("/notes/todo.md")).json()["content"] == "alice's\n"
        assert client.get(two.fs("/notes/todo.md")).json()["content"] == "bob's\n"
        assert (tmp_path / "trees" / "alice" / one.session / "a.txt").read_text() == "a"
        refused = client.delete(one.fs("/notes"), params={"recursive": "true"})
        assert refused.status_code == 403, refused.text  # a mount point (mount_point_protected)
        etag = client.get(one.fs("/notes/todo.md")).headers["etag"]
        stale = client.put(one.fs("/notes/todo.md"), json={"content": "x"}, headers={"If-Match": '"stale"'})
        assert stale.status_code == 412
        fresh = client.put(one.fs("/notes/todo.md"), json={"content": "y"}, headers={"If-Match": etag})
        assert fresh.status_code == 200, fresh.text


def test_a_composite_session_has_the_history_of_its_mounts(store: Any, tmp_path: Path) -> None:
    layout = tmp_path / "layout.toml"
    layout.write_text(
        "[mounts]\n"
        f'"/workspace" = "file://{tmp_path}/trees/{{agent}}/{{session}}"\n'
        f'"/notes" = "sqlite:///{tmp_path}/notes.db?session={{agent}}-{{session}}"\n'
    )
    with TestClient(create_app(store, auth=False, sessions_root=f"composite://{layout}")) as client:
        api = Api(client, store, agent="alice")
        api.create("/notes/todo.md", "v1\n")
        assert client.put(api.fs("/notes/todo.md"), json={"content": "v2\n"}).status_code == 200
        api.create("/workspace/a.txt", "a")
        answer = client.get(f"{api.base}/history")
        assert answer.status_code == 200, answer.text
        entries = answer.json()["data"]
        assert [[c["path"] for c in e["changes"]] for e in entries] == [
            ["/workspace/a.txt"],
            ["/notes/todo.md"],
            ["/notes/todo.md"],
        ]
        assert {e["actor"]["via"] for e in entries} == {"rest"}
        notes = client.get(f"{api.base}/history", params={"path": "/notes"}).json()["data"]
        assert notes == entries[1:]
        second = entries[1]["entry_id"]
        before = client.get(f"{api.base}/history/{second}/content", params={"path": "/notes/todo.md", "side": "before"})
        assert before.content == b"v1\n"
        undone = client.post(f"{api.base}/undo", json={"entry_id": second})
        assert undone.status_code == 200, undone.text
        assert undone.json()["data"][0]["undoes"] == second
        assert client.get(api.fs("/notes/todo.md")).json()["content"] == "v1\n"


def test_a_bad_sessions_root_is_refused_at_start(store: Any) -> None:
    with pytest.raises(ValueError, match="place"):
        create_app(store, sessions_root="memory://")  # every session would share one tree
    with pytest.raises(ValueError, match="workspace URL"):
        create_app(store, sessions_root="/srv/agents")


def test_serve_refuses_a_sessions_root_sessions_would_share(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from workspacefs.cli import main

    db = f"sqlite:///{tmp_path / 'service.db'}"
    refused = CliRunner().invoke(main, ["serve", "--db", db, "--port", "0", "--sessions-root", "memory://"])
    assert refused.exit_code == 2 and "--sessions-root" in refused.output, refused.output
    assert not (tmp_path / "service.db").exists()  # refused before the database was opened
