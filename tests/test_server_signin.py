"""Browser sign-in: one-time codes and tokens traded for an ``HttpOnly`` cookie, the header that keeps cross-site
requests out, sign-out and revocation (SQLite and PostgreSQL, through the real application); and around it the
``serve`` and ``open`` commands as real processes: a sign-in link on every start, codes shared by every process
over one database, and a busy port refused with exit code 7 before anything starts."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from workspacefs import SqlStore
from workspacefs.server import TokenStore, create_app
from workspacefs.server._tables import signin_codes
from workspacefs.testing._service import running_service

BROWSER = {"X-Workspacefs": "1"}
COOKIE = "wsfs_signin_80"  # the test client's server is http://testserver (port 80)


def error_of(response: Any) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return response.status_code, body["error"]["code"]


def _agent() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def app(store: SqlStore) -> Any:
    return create_app(store, auth=True)


@pytest.fixture
def client(app: Any) -> Iterator[TestClient]:
    with TestClient(app) as opened:
        yield opened


def signed_in(client: TestClient, store: SqlStore) -> str:
    """Sign ``client`` in with a fresh code; the cookie's secret."""
    answer = client.post("/v1/signin", json={"code": TokenStore(store).mint_signin()}, headers=BROWSER)
    assert answer.status_code == 200, answer.text
    return str(client.cookies[COOKIE])


# --- the API ---------------------------------------------------------------------------------------------------


def test_a_code_signs_in_once_with_a_strict_httponly_cookie(client: TestClient, app: Any, store: SqlStore) -> None:
    code = TokenStore(store).mint_signin()
    answer = client.post("/v1/signin", json={"code": code}, headers=BROWSER)
    assert answer.status_code == 200, answer.text
    assert answer.json() | {"expires_at": None} == {
        "agent_id": None,
        "scope": "admin",
        "expires_at": None,
        "browser": True,
    }
    cookie = answer.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")[1:]}
    assert cookie.startswith(f"{COOKIE}=wsfs_")
    assert attributes["samesite"].lower() == "samesite=strict" and attributes["path"] == "Path=/"
    assert "httponly" in attributes and "secure" not in attributes  # Secure only over https
    assert 0 < int(attributes["max-age"].split("=")[1]) <= 12 * 3600
    # the cookie alone signs the client in, for reading; it is a browser token an admin can see
    assert client.get("/v1/agents").status_code == 200
    assert client.get("/v1/signin").json()["browser"] is True
    browsers = [t for t in client.get("/v1/tokens").json()["data"] if t["browser"]]
    assert any(t["scope"] == "admin" and t["expires_at"] for t in browsers)
    # a code works once
    with TestClient(app) as other:
        assert error_of(other.post("/v1/signin", json={"code": code}, headers=BROWSER)) == (401, "invalid_signin_code")
        assert error_of(other.get("/v1/agents")) == (401, "unauthorized")


def test_over_https_the_cookie_is_secure(app: Any, store: SqlStore) -> None:
    with TestClient(app, base_url="https://testserver") as secure:
        answer = secure.post("/v1/signin", json={"code": TokenStore(store).mint_signin()}, headers=BROWSER)
        assert answer.status_code == 200, answer.text
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith("wsfs_signin_443=") and "; Secure" in cookie and "HttpOnly" in cookie
        assert secure.get("/v1/signin").json()["browser"] is True


def test_an_expired_or_unknown_code_is_refused(client: TestClient, store: SqlStore) -> None:
    code = TokenStore(store).mint_signin()
    with store.write() as connection:  # as if ten minutes had passed
        connection.execute(sa.update(signin_codes).values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    assert error_of(client.post("/v1/signin", json={"code": code}, headers=BROWSER)) == (401, "invalid_signin_code")
    unknown = client.post("/v1/signin", json={"code": "wsfs_signin_nothing"}, headers=BROWSER)
    assert error_of(unknown) == (401, "invalid_signin_code")
    both = client.post("/v1/signin", json={"code": code, "token": "x"}, headers=BROWSER)
    assert error_of(both) == (422, "invalid_body")
    with pytest.raises(ValueError, match="positive"):
        TokenStore(store).mint_signin(expires_in=timedelta(0))


def test_a_cookie_changes_nothing_without_the_browser_header(client: TestClient, store: SqlStore) -> None:
    agent = _agent()
    signed_in(client, store)
    forged = client.post(f"/v1/agents/{agent}/sessions", json={"id": "s"})  # what a cross-site form could send
    assert error_of(forged) == (403, "browser_header_required")
    assert client.get(f"/v1/agents/{agent}/sessions").json() == {"data": []}  # nothing was made
    made = client.post(f"/v1/agents/{agent}/sessions", json={"id": "s"}, headers=BROWSER)
    assert made.status_code == 201, made.text
    fs = f"/v1/agents/{agent}/sessions/s/fs/a.txt"
    assert client.post(fs, json={"content": "mine"}, headers=BROWSER).status_code == 201
    for method in ("PUT", "DELETE"):
        refused = client.request(method, fs, json={"content": "theirs"} if method == "PUT" else None)
        assert error_of(refused) == (403, "browser_header_required"), method
    assert client.get(fs).json()["content"] == "mine"  # reading needs no header
    # signing in needs the header too (no sign-in forced on a browser by another site); the code stays usable
    code = TokenStore(store).mint_signin()
    assert error_of(client.post("/v1/signin", json={"code": code})) == (403, "browser_header_required")
    assert client.post("/v1/signin", json={"code": code}, headers=BROWSER).status_code == 200


def test_a_token_signs_in_with_its_own_rights_and_its_revocation_signs_out(client: TestClient, store: SqlStore) -> None:
    agent = _agent()
    tokens = TokenStore(store)
    secret, info = tokens.create(agent_id=agent, scope="write", expires_in=timedelta(hours=1))
    answer = client.post("/v1/signin", json={"token": secret}, headers=BROWSER)
    assert answer.status_code == 200, answer.text
    assert answer.json()["agent_id"] == agent and answer.json()["scope"] == "write"
    assert info.expires_at is not None
    assert datetime.fromisoformat(answer.json()["expires_at"]) <= info.expires_at  # never outlives its token
    assert error_of(client.get("/v1/tokens")) == (403, "insufficient_scope")
    assert client.post(f"/v1/agents/{agent}/sessions", json={}, headers=BROWSER).status_code == 201
    assert client.get(f"/v1/agents/{_agent()}/sessions").json() == {"data": []}
    assert tokens.revoke(info.token_id)
    assert error_of(client.get("/v1/agents")) == (401, "unauthorized")  # its browser sign-ins went with it
    assert error_of(client.post("/v1/signin", json={"token": secret}, headers=BROWSER)) == (401, "unauthorized")


def test_sign_out_revokes_the_cookie_and_clears_it(client: TestClient, app: Any, store: SqlStore) -> None:
    secret = signed_in(client, store)
    assert error_of(client.delete("/v1/signin")) == (403, "browser_header_required")
    out = client.delete("/v1/signin", headers=BROWSER)
    assert out.status_code == 204
    assert out.headers["set-cookie"].startswith(f'{COOKIE}=""') and "Max-Age=0" in out.headers["set-cookie"]
    with TestClient(app, cookies={COOKIE: secret}) as replay:  # the old cookie, sent anyway
        assert error_of(replay.get("/v1/agents")) == (401, "unauthorized")
    # an API token in the cookie is not a browser's sign-in: refused there, and sign-out never revokes it
    api_secret, _ = TokenStore(store).create(agent_id=None)
    with TestClient(app, cookies={COOKIE: api_secret}) as misplaced:
        assert error_of(misplaced.get("/v1/agents")) == (401, "unauthorized")
        assert misplaced.delete("/v1/signin", headers=BROWSER).status_code == 204
    assert client.get("/v1/agents", headers={"Authorization": f"Bearer {api_secret}"}).status_code == 200


def test_without_auth_signing_in_is_a_no_op(store: SqlStore) -> None:
    with TestClient(create_app(store, auth=False)) as open_client:
        answer = open_client.post("/v1/signin", json={"code": "anything"}, headers=BROWSER)
        assert answer.status_code == 200 and "set-cookie" not in answer.headers
        assert open_client.get("/v1/signin").json() == {
            "agent_id": None,
            "scope": "admin",
            "expires_at": None,
            "browser": False,
        }


# --- serve and open, as real processes --------------------------------------------------------------------------


def redeem(base_url: str, link: str) -> httpx.Response:
    """Post the code of a printed sign-in link to the service at ``base_url``, as the page does."""
    code = link.split("#signin=", 1)[1]
    return httpx.post(base_url + "/v1/signin", json={"code": code}, headers=BROWSER)


def open_link(db_url: str, base_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "workspacefs", "open", "--db", db_url, "--url", base_url]
    return subprocess.run(
        command + ([] if env else ["--no-browser"]),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
        check=False,
    )


def test_serve_prints_a_fresh_sign_in_link_on_every_start(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / f'links-{uuid.uuid4().hex}.db'}"
    with running_service(url) as first:
        assert first.token is not None and first.signin_link is not None
        assert first.signin_link.startswith(first.url + "/#signin=wsfs_signin_")
        assert "workspacefs open --db" in "".join(first.output)  # how to get another one later
    with running_service(url) as again:  # tokens exist now: no new token, but a sign-in link all the same
        assert again.token is None and again.signin_link is not None
        assert again.signin_link != first.signin_link
        answer = redeem(again.url, again.signin_link)
        assert answer.status_code == 200 and answer.json()["scope"] == "admin"
        ((name, secret),) = answer.cookies.items()
        assert name == f"wsfs_signin_{again.url.rsplit(':', 1)[1]}"  # one cookie per port: services side by side
        assert httpx.get(again.url + "/v1/agents", headers={"Cookie": f"{name}={secret}"}).status_code == 200
        assert redeem(again.url, again.signin_link).status_code == 401  # once


def test_open_mints_a_link_any_process_on_the_database_redeems_once(service_url: str) -> None:
    with running_service(service_url) as one, running_service(service_url) as two:
        printed = open_link(service_url, one.url)
        assert printed.returncode == 0, printed.stderr
        link = printed.stdout.strip()
        assert link.startswith(one.url + "/#signin=wsfs_signin_") and "nothing answers" not in printed.stderr
        answer = redeem(two.url, link)  # minted for one, redeemed at the other: the database is shared
        assert answer.status_code == 200, answer.text
        assert redeem(one.url, link).status_code == 401  # and only once, whichever process is asked
        ((name, secret),) = answer.cookies.items()
        other = f"wsfs_signin_{one.url.rsplit(':', 1)[1]}"  # each port has its own cookie; the credential is shared
        assert name != other
        shared = httpx.get(one.url + "/v1/signin", headers={"Cookie": f"{other}={secret}"})
        assert shared.status_code == 200 and shared.json()["browser"] is True


def test_open_starts_the_web_browser_with_the_link(fast_tmp: Path) -> None:
    url = f"sqlite:///{fast_tmp / f'open-{uuid.uuid4().hex}.db'}"
    opened = fast_tmp / f"opened-{uuid.uuid4().hex}.txt"
    browser = fast_tmp / f"browser-{uuid.uuid4().hex}.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {opened}\n')
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    with running_service(url) as service:
        done = open_link(url, service.url + "/", BROWSER=str(browser))  # webbrowser runs $BROWSER with the link
        assert done.returncode == 0, done.stderr
        assert opened.read_text() == done.stdout.strip()
        assert redeem(service.url, opened.read_text()).status_code == 200
    refused = subprocess.run(
        [sys.executable, "-m", "workspacefs", "open", "--db", url, "--url", "ftp://example", "--no-browser"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2 and "http://" in refused.stderr
    typo = fast_tmp / f"typo-{uuid.uuid4().hex}.db"
    missing = open_link(f"sqlite:///{typo}", "http://127.0.0.1:8765/")
    assert missing.returncode == 3 and "No such database" in missing.stderr and not typo.exists()


def test_a_busy_port_exits_7_with_one_line_before_anything_starts(fast_tmp: Path) -> None:
    database = fast_tmp / f"busy-{uuid.uuid4().hex}.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "workspacefs", "serve", "--db", f"sqlite:///{database}", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 7, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"workspacefs: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(stop what uses it or choose another --port)"
    ]
    assert not database.exists()  # checked before the database was opened, or a sign-in code minted
    assert re.search(
        r"7 address in use",
        subprocess.run(
            [sys.executable, "-m", "workspacefs", "--help"], capture_output=True, text=True, timeout=60, check=True
        ).stdout,
    )
