"""The REST API of seed 004 (plus snapshots, ETags and raw streaming), on SQLite and a real PostgreSQL."""

from __future__ import annotations

import base64
import itertools
import os
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.server import SessionCatalog, create_app

_ids = itertools.count()


class Api:
    """A test client bound to one fresh session of one agent."""

    def __init__(self, client: TestClient, store: SqlStore, agent: str = "agent-1") -> None:
        self.client = client
        self.store = store
        self.agent = agent
        self.session = f"t{os.getpid()}-{next(_ids)}-{uuid.uuid4().hex[:6]}"
        created = client.post(f"/v1/agents/{agent}/sessions", json={"id": self.session})
        assert created.status_code == 201, created.text

    @property
    def base(self) -> str:
        return f"/v1/agents/{self.agent}/sessions/{self.session}"

    def fs(self, path: str = "") -> str:
        return f"{self.base}/fs{path}"

    def create(self, path: str, content: str = "", **extra: Any) -> Any:
        response = self.client.post(self.fs(path), json={"content": content, **extra})
        assert response.status_code == 201, response.text
        return response

    def action(self, name: str, **body: Any) -> Any:
        return self.client.post(self.fs(f"/_/{name}"), json=body)


@pytest.fixture
def client(store: SqlStore) -> Iterator[TestClient]:
    with TestClient(create_app(store, auth=False)) as test_client:
        yield test_client


@pytest.fixture
def api(client: TestClient, store: SqlStore) -> Api:
    return Api(client, store)


def error_of(response: Any) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["message"]
    return response.status_code, body["error"]["code"]


# --- seed 004's examples, field for field ---------------------------------------------------------------


def test_create_file_answers_the_seed_shape(api: Api) -> None:
    response = api.client.post(api.fs("/src/main.rs"), json={"content": "fn main() {}", "encoding": "text"})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {
        "id", "session_id", "path", "name", "content", "encoding", "is_directory", "is_readonly",
        "size_bytes", "created_at", "updated_at",
    }  # fmt: skip
    assert uuid.UUID(body["id"])
    assert body["session_id"] == api.session
    assert (body["path"], body["name"], body["content"], body["encoding"]) == (
        "/src/main.rs",
        "main.rs",
        "fn main() {}",
        "text",
    )
    assert (body["is_directory"], body["is_readonly"], body["size_bytes"]) == (False, False, 12)
    assert body["created_at"] and body["updated_at"]
    assert response.headers["etag"].startswith('"')


def test_directories_listing_and_auto_created_parents(api: Api) -> None:
    created = api.client.post(api.fs("/docs"), json={"is_directory": True})
    assert created.status_code == 201 and created.json()["is_directory"] is True
    assert created.json()["content"] is None
    api.create("/a/b/c.txt", "deep")
    root = api.client.get(api.fs()).json()["data"]
    assert [(e["path"], e["is_directory"]) for e in root] == [("/a", True), ("/docs", True)]
    assert [e["path"] for e in api.client.get(api.fs("/a")).json()["data"]] == ["/a/b"]
    listing = api.client.get(api.fs("/a/b")).json()["data"]
    assert [(e["name"], e["size_bytes"], e["content"]) for e in listing] == [("c.txt", 4, None)]
    assert api.client.get(api.fs("/")).json() == api.client.get(api.fs()).json()


def test_grep_example_from_the_seed(api: Api) -> None:
    api.create("/src/main.rs", "fn main() {}\n")
    api.create("/src/lib/util.rs", "// helpers\npub fn helper() {}\n")
    api.create("/notes.md", "fn in markdown\n")
    response = api.action("grep", pattern=r"fn\s+\w+", path_pattern="*.rs")
    assert response.status_code == 200
    assert response.json() == {
        "data": [
            {
                "path": "/src/lib/util.rs",
                "matches": [
                    {
                        "path": "/src/lib/util.rs",
                        "line_number": 2,
                        "line_content": "pub fn helper() {}",
                        "line": "pub fn helper() {}",
                    }
                ],
            },
            {
                "path": "/src/main.rs",
                "matches": [
                    {"path": "/src/main.rs", "line_number": 1, "line_content": "fn main() {}", "line": "fn main() {}"}
                ],
            },
        ],
        "truncated": False,
    }
    nested = api.action("grep", pattern="fn", path_pattern="src/**/*.rs").json()["data"]
    assert [f["path"] for f in nested] == ["/src/lib/util.rs", "/src/main.rs"]  # ** spans zero or more folders
    below = api.action("grep", pattern="fn", path_pattern="src/lib/*.rs").json()["data"]
    assert [f["path"] for f in below] == ["/src/lib/util.rs"]
    # a glob, not a regex: '.' is a literal dot and '[' an unfinished class the glob engine reports
    assert api.action("grep", pattern="fn", path_pattern="*.r.").json()["data"] == []
    assert api.action("grep", pattern="FN MAIN", case_insensitive=True).json()["data"][0]["path"] == "/src/main.rs"
    limited = api.action("grep", pattern="fn", max_matches=1).json()
    assert limited["truncated"] is True and sum(len(f["matches"]) for f in limited["data"]) == 1
    assert api.action("grep", pattern="fn", path="/src/lib").json()["data"][0]["path"] == "/src/lib/util.rs"


def test_grep_lines_carry_the_python_name_line_content(api: Api) -> None:
    """``line_content`` is what ``GrepMatch`` calls it; ``line`` stays, the same text, for older clients."""
    content = "alpha\r\n  needle one\t\nno\nneedle two"
    api.create("/a.txt", content)
    lines = api.action("grep", pattern="needle").json()["data"][0]["matches"]
    entry = SessionCatalog(api.store).get(api.agent, api.session)
    assert entry is not None
    python = SqlFilesystem(api.store, entry.storage_id).grep("needle")
    assert [m["line_content"] for m in lines] == [m.line_content for m in python] == ["  needle one\t", "needle two"]
    assert [m["line"] for m in lines] == [m["line_content"] for m in lines]
    assert [m["line_number"] for m in lines] == [m.line_number for m in python] == [2, 4]


def test_openapi_documents_grep_line_content_and_choosing_a_session_id(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    grep_line = schemas["GrepLine"]["properties"]
    assert {"line_content", "line"} <= set(schemas["GrepLine"]["required"])
    assert "line_content" in grep_line["line"]["description"] and grep_line["line_content"]["description"]
    body = document["paths"]["/v1/agents/{agent_id}/sessions"]["post"]["requestBody"]
    session_id = body["content"]["application/json"]["schema"]["properties"]["id"]
    assert "your own id" in session_id["description"].lower()
    assert '{"id": ' in document["info"]["description"] and "line_content" in document["info"]["description"]


def test_grep_and_glob_errors(api: Api) -> None:
    assert error_of(api.action("grep", pattern="(unclosed")) == (400, "invalid_pattern")
    assert error_of(api.action("grep", pattern="x", path="/missing")) == (404, "not_found")
    assert error_of(api.action("grep", pattern="")) == (422, "invalid_body")
    assert error_of(api.action("grep", pattern="x", max_matches=0)) == (422, "invalid_body")
    assert error_of(api.action("glob", pattern="**/*", path="/nope")) == (404, "not_found")


def test_glob_action(api: Api) -> None:
    for path in ("/src/a.py", "/src/pkg/b.py", "/README.md"):
        api.create(path, "x")
    assert api.action("glob", pattern="**/*.py").json() == {"data": ["/src/a.py", "/src/pkg/b.py"]}
    assert api.action("glob", pattern="*.py", path="/src").json() == {"data": ["/src/a.py"]}


# --- encoding ---------------------------------------------------------------------------------------------


def test_text_and_base64_encoding(api: Api) -> None:
    binary = b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256))
    created = api.client.post(
        api.fs("/img.png"), json={"content": base64.b64encode(binary).decode(), "encoding": "base64"}
    )
    assert created.status_code == 201 and created.json()["encoding"] == "base64"
    read = api.client.get(api.fs("/img.png")).json()
    assert read["encoding"] == "base64" and base64.b64decode(read["content"]) == binary
    assert read["size_bytes"] == len(binary)
    # a NUL within the first 8 KiB means binary; after it, valid UTF-8 stays text
    late_nul = "a" * 9000 + "\x00"
    api.create("/late.txt", late_nul)
    assert api.client.get(api.fs("/late.txt")).json()["encoding"] == "text"
    api.create("/early.txt", "ab\x00c")
    assert api.client.get(api.fs("/early.txt")).json() == api.client.get(api.fs("/early.txt")).json()
    early = api.client.get(api.fs("/early.txt")).json()
    assert early["encoding"] == "base64" and base64.b64decode(early["content"]) == b"ab\x00c"
    invalid_utf8 = base64.b64encode(b"caf\xe9").decode()
    api.client.post(api.fs("/latin1.txt"), json={"content": invalid_utf8, "encoding": "base64"})
    assert api.client.get(api.fs("/latin1.txt")).json()["encoding"] == "base64"
    unicode_text = "héllo → 世界 🎉\n"
    api.create("/u.txt", unicode_text)
    got = api.client.get(api.fs("/u.txt")).json()
    assert (got["content"], got["encoding"], got["size_bytes"]) == (unicode_text, "text", len(unicode_text.encode()))
    bad = api.client.post(api.fs("/bad.bin"), json={"content": "not base64!", "encoding": "base64"})
    assert error_of(bad) == (400, "invalid_base64")


def test_lone_surrogates_are_refused_not_crashed_on(api: Api) -> None:
    raw = b'{"content": "\\ud800"}'
    response = api.client.post(api.fs("/s.txt"), content=raw, headers={"content-type": "application/json"})
    assert error_of(response) == (422, "invalid_body")
    assert error_of(
        api.client.post(api.fs("/s.txt"), content=b"{not json", headers={"content-type": "application/json"})
    ) == (422, "invalid_body")


# --- create, update, delete ---------------------------------------------------------------------------------


def test_create_conflicts(api: Api) -> None:
    api.create("/a.txt", "one")
    assert error_of(api.client.post(api.fs("/a.txt"), json={"content": "two"})) == (409, "already_exists")
    assert api.client.get(api.fs("/a.txt")).json()["content"] == "one"
    assert error_of(api.client.post(api.fs("/a.txt"), json={"is_directory": True})) == (409, "already_exists")
    assert error_of(api.client.post(api.fs("/a.txt/b"), json={"content": ""})) == (409, "not_a_directory")
    api.client.post(api.fs("/d"), json={"is_directory": True})
    assert error_of(api.client.post(api.fs("/d"), json={"is_directory": True})) == (409, "already_exists")
    assert error_of(api.client.post(api.fs("/e"), json={"is_directory": True, "content": "x"})) == (422, "invalid_body")
    assert error_of(api.client.post(api.fs("/f"), json={"content": "x", "mode": "w"})) == (422, "invalid_body")
    empty = api.client.post(api.fs("/empty.txt"))
    assert empty.status_code == 201 and empty.json()["size_bytes"] == 0


def test_update(api: Api) -> None:
    api.create("/a.txt", "one")
    updated = api.client.put(api.fs("/a.txt"), json={"content": "two"})
    assert updated.status_code == 200 and updated.json()["content"] == "two"
    assert api.client.get(api.fs("/a.txt")).json()["content"] == "two"
    assert error_of(api.client.put(api.fs("/missing.txt"), json={"content": "x"})) == (404, "not_found")
    api.client.post(api.fs("/dir"), json={"is_directory": True})
    assert error_of(api.client.put(api.fs("/dir"), json={"content": "x"})) == (409, "is_a_directory")
    unchanged = api.client.put(api.fs("/a.txt"), json={})  # nothing to change is not an error
    assert unchanged.status_code == 200 and unchanged.json()["content"] == "two"


def test_read_only_files_cannot_change_but_can_be_deleted(api: Api) -> None:
    created = api.create("/locked.txt", "keep", is_readonly=True)
    assert created.json()["is_readonly"] is True
    assert error_of(api.client.put(api.fs("/locked.txt"), json={"content": "no"})) == (403, "read_only")
    raw = api.client.put(api.fs("/locked.txt"), content=b"no", headers={"content-type": "application/octet-stream"})
    assert error_of(raw) == (403, "read_only")
    assert api.client.get(api.fs("/locked.txt")).json()["content"] == "keep"
    unlocked = api.client.put(api.fs("/locked.txt"), json={"is_readonly": False, "content": "changed"})
    assert unlocked.status_code == 200 and unlocked.json()["is_readonly"] is False
    relock = api.client.put(api.fs("/locked.txt"), json={"is_readonly": True})
    assert relock.json()["is_readonly"] is True and relock.json()["content"] == "changed"
    assert api.client.delete(api.fs("/locked.txt")).status_code == 204
    assert error_of(api.client.get(api.fs("/locked.txt"))) == (404, "not_found")


def test_delete(api: Api) -> None:
    api.create("/dir/a.txt", "a")
    api.create("/dir/sub/b.txt", "b")
    assert error_of(api.client.delete(api.fs("/dir"))) == (409, "directory_not_empty")
    assert api.client.get(api.fs("/dir/a.txt")).status_code == 200
    assert api.client.delete(api.fs("/dir/a.txt")).status_code == 204
    assert api.client.delete(api.fs("/dir?recursive=true")).status_code == 204
    assert api.client.get(api.fs()).json()["data"] == []
    assert error_of(api.client.delete(api.fs("/dir"))) == (404, "not_found")
    assert error_of(api.client.delete(api.fs("/"))) == (400, "invalid_path")
    api.client.post(api.fs("/empty"), json={"is_directory": True})
    assert api.client.delete(api.fs("/empty")).status_code == 204


def test_only_underscore_itself_is_reserved(api: Api) -> None:
    for name in ("/__init__.py", "/_config", "/src/_/x.txt", "/_a/_b"):
        api.create(name, name)
        assert api.client.get(api.fs(name)).json()["content"] == name
        assert api.client.put(api.fs(name), json={"content": "new"}).status_code == 200
    assert error_of(api.client.post(api.fs("/_/x.txt"), json={"content": ""})) == (400, "reserved_path")
    assert error_of(api.client.post(api.fs("/_"), json={"is_directory": True})) == (400, "reserved_path")
    assert error_of(api.client.put(api.fs("/_/other"), json={"content": ""})) == (400, "reserved_path")
    not_post = api.client.put(api.fs("/_/stat"), json={"content": ""})
    assert error_of(not_post) == (405, "method_not_allowed") and not_post.headers["allow"] == "POST"
    assert error_of(api.client.get(api.fs("/_/grep"))) == (405, "method_not_allowed")
    sessions = api.client.patch(f"/v1/agents/{api.agent}/sessions", json={})  # a route of an included router
    assert error_of(sessions) == (405, "method_not_allowed") and sessions.headers["allow"] == "GET, POST"
    assert error_of(api.action("move", src_path="/_config", dst_path="/_/x")) == (400, "reserved_path")
    assert error_of(api.action("nope", path="/")) == (400, "reserved_path")


@pytest.mark.parametrize(
    ("raw_path", "code"),
    [
        ("/a/%2E%2E/b", "invalid_path"),
        ("/a/%2E/b", "invalid_path"),
        ("/a//b", "invalid_path"),
        ("/a%00b", "invalid_path"),
        ("/a%0Ab", "invalid_path"),
        ("/" + "x" * 81, "name_too_long"),  # an invalid_path too, with the code every surface gives it
        ("/" + "/".join(["d"] * 17), "path_too_deep"),
    ],
)
def test_bad_paths_are_400(api: Api, raw_path: str, code: str) -> None:
    for method in ("GET", "POST", "PUT", "DELETE"):
        kwargs: dict[str, Any] = {} if method in ("GET", "DELETE") else {"json": {"content": "x"}}
        response = api.client.request(method, api.fs(raw_path), **kwargs)
        assert error_of(response) == (400, code), (method, raw_path)
    assert error_of(
        api.action("stat", path=raw_path.replace("%2E", ".").replace("%00", "\x00").replace("%0A", "\n"))
    ) == (400, code)
    assert api.client.get(api.fs()).json()["data"] == []


def test_names_that_need_url_escaping(api: Api) -> None:
    for name in ("with space.txt", "q?a#b.txt", "100%.txt", "<img src=x onerror=alert(1)>", "日本語.md", "a+b=c&d.txt"):
        url = api.fs("/" + _quote(name))
        assert api.client.post(url, json={"content": name}).status_code == 201, name
        assert api.client.get(url).json()["name"] == name
    names = [e["name"] for e in api.client.get(api.fs()).json()["data"]]
    assert "<img src=x onerror=alert(1)>" in names and "q?a#b.txt" in names


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


# --- actions ------------------------------------------------------------------------------------------------


def test_stat(api: Api) -> None:
    created = api.create("/src/a.py", "print(1)\n")
    stat = api.action("stat", path="/src/a.py")
    assert stat.status_code == 200 and stat.json()["content"] is None
    assert stat.json()["size_bytes"] == 9 and stat.headers["etag"] == created.headers["etag"]
    directory = api.action("stat", path="/src").json()
    assert directory["is_directory"] is True and directory["size_bytes"] == 0
    assert api.action("stat", path="/").json()["path"] == "/"
    assert error_of(api.action("stat", path="/nope")) == (404, "not_found")
    assert error_of(api.action("stat")) == (422, "invalid_body")


def test_move_and_copy(api: Api) -> None:
    api.create("/src/a.txt", "A")
    api.create("/src/b.txt", "B")
    moved = api.action("move", src_path="/src/a.txt", dst_path="/lib/deep/a.txt")
    assert moved.status_code == 200 and moved.json()["path"] == "/lib/deep/a.txt"
    assert error_of(api.client.get(api.fs("/src/a.txt"))) == (404, "not_found")
    assert api.client.get(api.fs("/lib/deep/a.txt")).json()["content"] == "A"
    copied = api.action("copy", src_path="/lib", dst_path="/lib2")
    assert copied.status_code == 200 and copied.json()["is_directory"] is True
    assert api.client.get(api.fs("/lib2/deep/a.txt")).json()["content"] == "A"
    assert error_of(api.action("copy", src_path="/src/b.txt", dst_path="/lib2/deep/a.txt")) == (409, "already_exists")
    over = api.action("copy", src_path="/src/b.txt", dst_path="/lib2/deep/a.txt", overwrite=True)
    assert over.status_code == 200 and api.client.get(api.fs("/lib2/deep/a.txt")).json()["content"] == "B"
    assert error_of(api.action("move", src_path="/nope", dst_path="/x")) == (404, "not_found")
    assert error_of(api.action("move", src_path="/", dst_path="/x")) == (400, "invalid_path")
    assert error_of(api.action("move", src_path="/lib", dst_path="/lib/inside")) == (400, "move_into_itself")
    assert error_of(api.action("move", src_path="/src/b.txt")) == (422, "invalid_body")


# --- compare-and-set ------------------------------------------------------------------------------------------


def test_two_editors_never_overwrite_each_other(api: Api) -> None:
    api.create("/doc.md", "v1")
    alice = api.client.get(api.fs("/doc.md"))
    bob = api.client.get(api.fs("/doc.md"))
    assert alice.headers["etag"] == bob.headers["etag"]
    saved = api.client.put(api.fs("/doc.md"), json={"content": "alice"}, headers={"If-Match": alice.headers["etag"]})
    assert saved.status_code == 200 and saved.headers["etag"] != alice.headers["etag"]
    clash = api.client.put(api.fs("/doc.md"), json={"content": "bob"}, headers={"If-Match": bob.headers["etag"]})
    assert error_of(clash) == (412, "precondition_failed")
    assert api.client.get(api.fs("/doc.md")).json()["content"] == "alice"
    raw_clash = api.client.put(
        api.fs("/doc.md"),
        content=b"bob",
        headers={"If-Match": bob.headers["etag"], "content-type": "application/octet-stream"},
    )
    assert error_of(raw_clash) == (412, "precondition_failed")
    current = saved.headers["etag"]
    listed = api.client.put(api.fs("/doc.md"), json={"content": "listed"}, headers={"If-Match": f'"nope", {current}'})
    assert listed.status_code == 200
    assert error_of(
        api.client.put(api.fs("/doc.md"), json={"content": "w"}, headers={"If-Match": "W/" + listed.headers["etag"]})
    ) == (412, "precondition_failed")
    assert error_of(api.client.put(api.fs("/doc.md"), json={"content": "w"}, headers={"If-Match": "unquoted"})) == (
        400,
        "bad_if_match",
    )
    assert api.client.put(api.fs("/doc.md"), json={"content": "star"}, headers={"If-Match": "*"}).status_code == 200
    assert error_of(api.client.put(api.fs("/none.md"), json={"content": "x"}, headers={"If-Match": "*"})) == (
        404,
        "not_found",
    )
    stale = api.client.delete(api.fs("/doc.md"), headers={"If-Match": bob.headers["etag"]})
    assert error_of(stale) == (412, "precondition_failed")
    assert api.client.get(api.fs("/doc.md")).json()["content"] == "star"


def test_concurrent_compare_and_set_lets_exactly_one_writer_win(api: Api) -> None:
    api.create("/counter.txt", "0")
    tag = api.client.get(api.fs("/counter.txt")).headers["etag"]
    statuses: list[int] = []
    lock = threading.Lock()

    def write(n: int) -> None:
        response = api.client.put(api.fs("/counter.txt"), json={"content": str(n)}, headers={"If-Match": tag})
        with lock:
            statuses.append(response.status_code)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(1, 13)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [412] * 11
    assert api.client.get(api.fs("/counter.txt")).json()["content"] != "0"


# --- raw bytes ------------------------------------------------------------------------------------------------


def test_raw_upload_and_download(api: Api) -> None:
    payload = os.urandom(3 * 1024 * 1024 + 17)
    octet = {"content-type": "application/octet-stream"}
    created = api.client.post(api.fs("/blob.bin"), content=payload, headers=octet)
    assert created.status_code == 201 and created.json()["size_bytes"] == len(payload)
    assert created.json()["content"] is None
    download = api.client.get(api.fs("/blob.bin"), headers={"accept": "application/octet-stream"})
    assert download.status_code == 200 and download.content == payload
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["etag"] == created.headers["etag"]
    assert download.headers["content-length"] == str(len(payload))
    assert "attachment" in download.headers["content-disposition"]
    small = api.client.get(api.fs("/blob.bin"), headers={"accept": "application/octet-stream"})
    assert small.content == payload
    replaced = api.client.put(api.fs("/blob.bin"), content=b"tiny", headers=octet)
    assert replaced.status_code == 200 and replaced.json()["size_bytes"] == 4
    assert api.client.get(api.fs("/blob.bin"), headers={"accept": "application/octet-stream"}).content == b"tiny"
    assert error_of(api.client.post(api.fs("/blob.bin"), content=b"x", headers=octet)) == (409, "already_exists")
    assert error_of(api.client.put(api.fs("/missing.bin"), content=b"x", headers=octet)) == (404, "not_found")
    listing = api.client.get(api.fs(), headers={"accept": "application/octet-stream"})
    assert listing.status_code == 200 and "data" in listing.json()


def test_files_over_the_json_limit_are_streamed_raw(api: Api) -> None:
    big = b"y" * (32 * 1024 * 1024 + 1)
    api.client.post(api.fs("/big.txt"), content=big, headers={"content-type": "application/octet-stream"})
    assert error_of(api.client.get(api.fs("/big.txt"))) == (413, "too_large")
    raw = api.client.get(api.fs("/big.txt"), headers={"accept": "application/octet-stream"})
    assert len(raw.content) == len(big) and raw.content[:10] == big[:10]
    assert api.action("stat", path="/big.txt").json()["size_bytes"] == len(big)


def test_body_limits(store: SqlStore) -> None:
    with TestClient(create_app(store, auth=False, max_json_bytes=1024, max_upload_bytes=4096)) as client:
        api = Api(client, store)
        too_big = client.post(api.fs("/a.txt"), json={"content": "x" * 2000})
        assert error_of(too_big) == (413, "too_large")
        chunked = client.post(
            api.fs("/a.txt"),
            content=iter([b'{"content": "', b"x" * 2000, b'"}']),
            headers={"content-type": "application/json"},
        )
        assert error_of(chunked) == (413, "too_large")
        upload = client.post(
            api.fs("/b.bin"), content=b"z" * 5000, headers={"content-type": "application/octet-stream"}
        )
        assert error_of(upload) == (413, "too_large")
        assert error_of(client.get(api.fs("/b.bin"))) == (404, "not_found")
        assert client.get(api.fs()).json()["data"] == []


# --- errors in one shape ----------------------------------------------------------------------------------------


def test_unknown_query_parameters_are_refused(api: Api) -> None:
    api.create("/dir/a.txt", "a")
    typo = api.client.delete(api.fs("/dir?recusive=true"))
    assert error_of(typo) == (400, "unknown_parameter") and "recursive" in typo.json()["error"]["message"]
    assert api.client.get(api.fs("/dir/a.txt")).status_code == 200
    assert error_of(api.client.get(api.fs("/dir/a.txt?raw=1"))) == (400, "unknown_parameter")
    assert api.client.delete(api.fs("/dir?recursive=true")).status_code == 204


def test_unknown_routes_and_methods_answer_json_errors(client: TestClient, api: Api) -> None:
    assert error_of(client.get("/v2/nothing")) == (404, "not_found")
    assert error_of(client.patch(api.fs("/a.txt"), json={})) == (405, "method_not_allowed")
    assert error_of(client.get("/v1/agents/bad agent!/sessions")) == (400, "bad_request")


# --- sessions ---------------------------------------------------------------------------------------------------


def test_sessions_are_resources(client: TestClient, store: SqlStore) -> None:
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    made = client.post(f"/v1/agents/{agent}/sessions")
    assert made.status_code == 201
    body = made.json()
    assert uuid.UUID(body["id"]).version == 7 and body["agent_id"] == agent
    named = client.post(f"/v1/agents/{agent}/sessions", json={"id": "named-1"})
    assert named.status_code in (201, 409)  # PostgreSQL is shared between runs of this test
    assert error_of(client.post(f"/v1/agents/{agent}/sessions", json={"id": "named-1"})) == (409, "already_exists")
    assert error_of(client.post(f"/v1/agents/{agent}/sessions", json={"id": "bad id"})) == (422, "invalid_body")
    listed = client.get(f"/v1/agents/{agent}/sessions").json()["data"]
    assert listed[0]["id"] == body["id"]
    assert client.get(f"/v1/agents/{agent}/sessions/{body['id']}").json() == body
    assert agent in client.get("/v1/agents").json()["data"]
    base = f"/v1/agents/{agent}/sessions/{body['id']}"
    client.post(f"{base}/fs/a/b.txt", json={"content": "x"})
    client.post(f"{base}/snapshots", json={"tag": "t"})
    assert client.delete(base).status_code == 204
    assert error_of(client.get(base)) == (404, "session_not_found")
    assert error_of(client.get(f"{base}/fs")) == (404, "session_not_found")
    assert error_of(client.post(f"{base}/fs/x.txt", json={"content": ""})) == (404, "session_not_found")
    assert error_of(client.delete(base)) == (404, "session_not_found")
    assert store.session(body["id"]) is None


def test_a_session_is_only_reachable_under_its_agent(api: Api) -> None:
    api.create("/secret.txt", "s")
    other = f"/v1/agents/someone-else/sessions/{api.session}"
    assert error_of(api.client.get(f"{other}/fs/secret.txt")) == (404, "session_not_found")
    assert error_of(api.client.get(other)) == (404, "session_not_found")
    assert error_of(api.client.delete(other)) == (404, "session_not_found")
    assert api.client.get(api.fs("/secret.txt")).status_code == 200


def test_library_sessions_belong_to_the_default_agent(client: TestClient, store: SqlStore) -> None:
    session = f"lib-{uuid.uuid4().hex[:8]}"
    SqlFilesystem(store, session).write("made/in/python.txt", "hello")
    assert session in [s["id"] for s in client.get("/v1/agents/default/sessions").json()["data"]]
    assert "default" in client.get("/v1/agents").json()["data"]
    got = client.get(f"/v1/agents/default/sessions/{session}/fs/made/in/python.txt").json()
    assert got["content"] == "hello"


# --- snapshots --------------------------------------------------------------------------------------------------


def test_snapshots_create_list_diff_restore_delete(api: Api) -> None:
    api.create("/keep.txt", "k")
    api.create("/edit.txt", "before")
    first = api.client.post(f"{api.base}/snapshots", json={"tag": "baseline"})
    assert first.status_code == 201
    snap = first.json()
    assert (snap["tag"], snap["file_count"], snap["total_bytes"], snap["session_id"]) == ("baseline", 2, 7, api.session)
    api.client.put(api.fs("/edit.txt"), json={"content": "after"})
    api.create("/new.txt", "n")
    api.client.delete(api.fs("/keep.txt"))
    diff = api.client.get(f"{api.base}/snapshots/{snap['id']}/diff").json()
    assert diff == {
        "base": snap["id"],
        "target": None,
        "added": ["/new.txt"],
        "modified": ["/edit.txt"],
        "deleted": ["/keep.txt"],
        "unchanged_count": 0,
    }
    second = api.client.post(f"{api.base}/snapshots").json()
    assert second["tag"] is None
    between = api.client.get(f"{api.base}/snapshots/{snap['id']}/diff", params={"against": second["id"]}).json()
    assert between["added"] == ["/new.txt"] and between["target"] == second["id"]
    listed = api.client.get(f"{api.base}/snapshots").json()["data"]
    assert [s["id"] for s in listed] == [snap["id"], second["id"]]
    assert api.client.get(f"{api.base}/snapshots/{snap['id']}").json() == snap
    restored = api.client.post(f"{api.base}/snapshots/{snap['id']}/restore")
    assert restored.status_code == 200
    assert [e["path"] for e in api.client.get(api.fs()).json()["data"]] == ["/edit.txt", "/keep.txt"]
    assert api.client.get(api.fs("/edit.txt")).json()["content"] == "before"
    assert api.client.delete(f"{api.base}/snapshots/{second['id']}").status_code == 204
    assert error_of(api.client.get(f"{api.base}/snapshots/{second['id']}")) == (404, "snapshot_not_found")
    assert error_of(api.client.post(f"{api.base}/snapshots/not-a-uuid/restore")) == (404, "snapshot_not_found")
    assert error_of(api.client.post(f"{api.base}/snapshots", json={"tag": ""})) == (422, "invalid_body")


def test_snapshots_of_one_session_are_invisible_to_another(client: TestClient, store: SqlStore) -> None:
    one, two = Api(client, store), Api(client, store)
    snap = client.post(f"{one.base}/snapshots").json()
    assert error_of(client.post(f"{two.base}/snapshots/{snap['id']}/restore")) == (404, "snapshot_not_found")
    assert client.get(f"{two.base}/snapshots").json()["data"] == []


# --- auth -------------------------------------------------------------------------------------------------------


@pytest.fixture
def secured(store: SqlStore) -> Iterator[TestClient]:
    with TestClient(create_app(store, auth=True)) as test_client:
        yield test_client


def test_requests_without_a_valid_token_are_401(secured: TestClient) -> None:
    headers: dict[str, Any]
    for headers in (
        {},
        {"Authorization": "Bearer wsfs_wrong"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer é".encode()},
    ):
        response = secured.get("/v1/agents", headers=headers)
        assert error_of(response) == (401, "unauthorized")
        assert response.headers["www-authenticate"] == "Bearer"
    assert secured.get("/").status_code == 200  # the browser page itself loads, then asks for a token


def test_agent_tokens_see_only_their_agent(secured: TestClient, store: SqlStore) -> None:
    from workspacefs.server.tokens import TokenStore

    tokens = TokenStore(store)
    alpha, beta = f"alpha-{uuid.uuid4().hex[:6]}", f"beta-{uuid.uuid4().hex[:6]}"
    alpha_token, _ = tokens.create(agent_id=alpha)
    beta_token, _ = tokens.create(agent_id=beta)
    admin_token, _ = tokens.create(agent_id=None, label="admin")
    as_alpha = {"Authorization": f"Bearer {alpha_token}"}
    as_beta = {"Authorization": f"Bearer {beta_token}"}
    as_admin = {"Authorization": f"Bearer {admin_token}"}
    session = secured.post(f"/v1/agents/{alpha}/sessions", headers=as_alpha).json()["id"]
    secured.post(f"/v1/agents/{alpha}/sessions/{session}/fs/x.txt", json={"content": "x"}, headers=as_alpha)
    # beta cannot tell alpha's session from one that does not exist
    seen = secured.get(f"/v1/agents/{alpha}/sessions/{session}/fs/x.txt", headers=as_beta)
    missing = secured.get(f"/v1/agents/{alpha}/sessions/no-such/fs/x.txt", headers=as_beta)
    assert error_of(seen) == error_of(missing) == (404, "session_not_found")
    assert secured.get(f"/v1/agents/{alpha}/sessions", headers=as_beta).json() == {"data": []}
    assert error_of(secured.post(f"/v1/agents/{alpha}/sessions", headers=as_beta)) == (404, "agent_not_found")
    assert error_of(secured.delete(f"/v1/agents/{alpha}/sessions/{session}", headers=as_beta)) == (
        404,
        "session_not_found",
    )
    assert secured.get("/v1/agents", headers=as_beta).json() == {"data": [beta]}
    # the owner and an admin token can
    assert secured.get(f"/v1/agents/{alpha}/sessions/{session}/fs/x.txt", headers=as_alpha).status_code == 200
    assert secured.get(f"/v1/agents/{alpha}/sessions/{session}/fs/x.txt", headers=as_admin).status_code == 200
    assert alpha in secured.get("/v1/agents", headers=as_admin).json()["data"]


def test_tokens_are_stored_hashed_and_can_be_revoked(secured: TestClient, store: SqlStore) -> None:
    import sqlalchemy as sa

    from workspacefs.server.tokens import TokenStore, hash_token

    tokens = TokenStore(store)
    secret, info = tokens.create(agent_id="revoked-agent", label="ci")
    assert re.fullmatch(r"wsfs_[A-Za-z0-9_-]{43}", secret)
    with store.read() as connection:
        rows = (
            connection.execute(sa.text("SELECT * FROM wsfs_tokens WHERE id = :i"), {"i": info.token_id})
            .mappings()
            .all()
        )
    assert len(rows) == 1 and secret not in str(dict(rows[0])) and rows[0]["token_hash"] == hash_token(secret)
    assert secured.get("/v1/agents", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    # the running service has its own cache: revoking through it must take effect at once
    service_tokens = secured.app.state.workspacefs.tokens  # type: ignore[attr-defined]
    assert service_tokens.revoke(info.token_id)
    assert error_of(secured.get("/v1/agents", headers={"Authorization": f"Bearer {secret}"})) == (401, "unauthorized")
    assert not tokens.revoke(info.token_id)
