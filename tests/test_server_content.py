"""A file a model wrote (``.html``, ``.svg``, ``.js``) is never a page on the service's origin, where the browser's
sign-in cookie lives: every answer carrying a file's bytes (a download, a version from the history) is
``application/octet-stream``, an ``attachment``, ``nosniff``, and under a content security policy that sandboxes
it, as every other API answer is; only the browser UI's and the docs' pages get their own policy."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from workspacefs.server import create_app

PAGE = "<html><body><script>fetch('/v1/tokens').then(r => r.text()).then(alert)</script></body></html>"
RAW = {"accept": "application/octet-stream"}


@pytest.fixture
def client(store: Any) -> Iterator[TestClient]:
    with TestClient(create_app(store, auth=False)) as opened:
        yield opened


def _inert(answer: Any, name: str) -> None:
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/octet-stream"
    assert (
        answer.headers["content-disposition"].startswith("attachment;")
        and name in answer.headers["content-disposition"]
    )
    assert answer.headers["x-content-type-options"] == "nosniff"
    policy = answer.headers["content-security-policy"]
    assert "sandbox" in policy and "default-src 'none'" in policy


def test_a_models_page_is_downloaded_never_shown(client: TestClient) -> None:
    base = f"/v1/agents/pages/sessions/{uuid.uuid4().hex[:12]}"
    assert client.post(base.rpartition("/")[0], json={"id": base.rpartition("/")[2]}).status_code == 201
    for name in ("page.html", "image.svg", "code.js"):
        assert client.post(f"{base}/fs/{name}", json={"content": PAGE}).status_code == 201
        _inert(client.get(f"{base}/fs/{name}", headers=RAW), name)
    entry = client.get(f"{base}/history", params={"path": "/page.html"}).json()["data"][0]["entry_id"]
    version = client.get(f"{base}/history/{entry}/content", params={"path": "/page.html"})
    assert version.content == PAGE.encode()
    _inert(version, "page.html")  # was: no Content-Disposition and no policy
    # JSON answers are sandboxed too; the pages keep their own policy (they run the UI's own script)
    listing = client.get(f"{base}/fs")
    assert "sandbox" in listing.headers["content-security-policy"]
    assert "sandbox" not in client.get("/").headers["content-security-policy"]
    assert "script-src 'self'" in client.get("/").headers["content-security-policy"]
