"""The path policy through the real service: ``ask`` held pending until an admin decides (in this process or
another one on the same database), ``deny`` refused at once, policies per session and per token, a rename or
a move onto a protected path refused like a write, and quotas (413/507) that leave the old content."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from workspacefs import SqlStore
from workspacefs.server import TokenStore
from workspacefs.testing._service import ServiceProcess, running_service

AGENT = "policy-agent"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


class Service:
    """One running service, an admin client and a write token of ``AGENT`` on a fresh session."""

    def __init__(self, running: ServiceProcess, admin_token: str | None = None) -> None:
        self.running = running
        headers = bearer(admin_token) if admin_token else running.headers()
        self.admin = httpx.Client(base_url=running.url, headers=headers, timeout=60)
        self.session = f"s-{uuid.uuid4().hex[:8]}"
        assert self.admin.post(f"/v1/agents/{AGENT}/sessions", json={"id": self.session}).status_code == 201
        self.agent = httpx.Client(base_url=running.url, headers=bearer(self.token(scope="write")), timeout=60)

    def token(self, **body: Any) -> str:
        created = self.admin.post("/v1/tokens", json={"agent_id": AGENT, **body})
        assert created.status_code == 201, created.text
        return str(created.json()["token"])

    def url(self, suffix: str) -> str:
        return f"/v1/agents/{AGENT}/sessions/{self.session}{suffix}"

    def fs(self, path: str) -> str:
        return self.url(f"/fs/{path.lstrip('/')}")

    def pending(self) -> list[dict[str, Any]]:
        listed = self.admin.get("/v1/approvals")
        assert listed.status_code == 200, listed.text
        return [a for a in listed.json()["data"] if a["session_id"] == self.session]

    def wait_for_pending(self) -> dict[str, Any]:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = self.pending()
            if found:
                return found[0]
            time.sleep(0.05)
        raise AssertionError("no approval became pending")


def in_background(call: Any) -> tuple[threading.Thread, list[httpx.Response]]:
    answers: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    return thread, answers


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    url = f"sqlite:///{tmp_path_factory.mktemp('policy') / 'service.db'}"
    with running_service(url, extra_args=("--approval-timeout", "3")) as service:
        yield service


@pytest.fixture
def svc(running: ServiceProcess) -> Iterator[Service]:
    service = Service(running)
    yield service
    service.admin.close()
    service.agent.close()


def error_of(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()["error"]
    return response.status_code, body["code"], body["message"]


def test_an_ask_waits_for_an_admin_and_goes_on_when_approved(svc: Service) -> None:
    thread, answers = in_background(
        lambda: svc.agent.post(svc.fs("/.github/workflows/ci.yml"), json={"content": "on: push\n"})
    )
    approval = svc.wait_for_pending()
    assert approval["operation"] == "write" and approval["target"] == "/.github/workflows/ci.yml"
    assert approval["pattern"] and approval["agent_id"] == AGENT and approval["status"] == "pending"
    assert svc.admin.get(svc.fs("/.github/workflows/ci.yml")).status_code == 404  # nothing written while held
    decided = svc.admin.post(f"/v1/approvals/{approval['id']}", json={"approve": True})
    assert decided.status_code == 200 and decided.json()["status"] == "approved"
    thread.join(30)
    assert answers[0].status_code == 201, answers[0].text
    assert svc.admin.get(svc.fs("/.github/workflows/ci.yml")).json()["content"] == "on: push\n"
    again = svc.admin.post(f"/v1/approvals/{approval['id']}", json={"approve": False})
    assert error_of(again)[:2] == (409, "approval_decided")


def test_a_denied_ask_is_refused_with_a_reason_and_changes_nothing(svc: Service) -> None:
    assert svc.agent.post(svc.fs("/AGENTS.md"), json={"content": "be nice\n"}).status_code == 403  # ask, timed out
    approval_list = svc.admin.get("/v1/approvals", params={"status": "expired"}).json()["data"]
    assert any(a["session_id"] == svc.session and a["target"] == "/AGENTS.md" for a in approval_list)

    thread, answers = in_background(lambda: svc.agent.delete(svc.fs("/.bashrc")))
    approval = svc.wait_for_pending()
    assert svc.admin.post(f"/v1/approvals/{approval['id']}", json={"approve": False}).json()["status"] == "denied"
    thread.join(30)
    status, code, message = error_of(answers[0])
    assert (status, code) == (403, "policy_denied")
    assert "needs an admin's approval" in message and "an admin declined it" in message and "/.bashrc" in message


def test_an_unanswered_ask_expires_and_says_so(svc: Service) -> None:
    started = svc.agent.put(svc.fs("/.envrc"), json={"content": "export X=1\n"}, headers={"If-Match": "*"})
    status, code, message = error_of(started)
    assert (status, code) == (403, "policy_denied") and "it was not approved" in message
    assert "no one approved it within 3 s" in message


def test_only_admin_tokens_see_and_decide_approvals(svc: Service) -> None:
    thread, answers = in_background(lambda: svc.agent.post(svc.fs("/.vscode/tasks.json"), json={"content": "{}"}))
    approval = svc.wait_for_pending()
    assert error_of(svc.agent.get("/v1/approvals"))[:2] == (403, "insufficient_scope")
    own = svc.agent.post(f"/v1/approvals/{approval['id']}", json={"approve": True})
    assert error_of(own)[:2] == (403, "insufficient_scope")  # an agent never approves its own request
    svc.admin.post(f"/v1/approvals/{approval['id']}", json={"approve": False})
    thread.join(30)
    assert answers[0].status_code == 403
    assert svc.admin.post("/v1/approvals/no-such", json={"approve": True}).status_code == 404


def test_a_session_policy_denies_at_once_and_moves_onto_protected_paths_are_writes(svc: Service) -> None:
    policy = {"rules": [{"action": "deny", "operations": ["write", "delete"], "pattern": "locked/**"}]}
    assert svc.agent.put(svc.url("/policy"), json=policy).status_code == 403  # only admins set policies
    set_ = svc.admin.put(svc.url("/policy"), json=policy)
    assert set_.status_code == 200 and set_.json()["source"] == "session"
    assert set_.json()["rules"][0] == {**policy["rules"][0], "reason": None}
    assert svc.agent.get(svc.url("/policy")).json()["rules"] == set_.json()["rules"]

    assert svc.agent.post(svc.fs("/notes.txt"), json={"content": "x"}).status_code == 201
    status, code, message = error_of(svc.agent.post(svc.fs("/locked/a.txt"), json={"content": "x"}))
    assert (status, code) == (403, "policy_denied") and "does not allow write on /locked/a.txt" in message
    moved = svc.agent.post(svc.url("/fs/_/move"), json={"src_path": "/notes.txt", "dst_path": "/locked/notes.txt"})
    assert error_of(moved)[:2] == (403, "policy_denied")
    copied = svc.agent.post(svc.url("/fs/_/copy"), json={"src_path": "/notes.txt", "dst_path": "/locked/x.txt"})
    assert error_of(copied)[:2] == (403, "policy_denied")
    svc.admin.delete(svc.url("/policy"))  # back to the service's (default) policy: locked/ is free again
    assert svc.admin.post(svc.fs("/locked/inner/a.txt"), json={"content": "x"}).status_code == 201
    svc.admin.put(svc.url("/policy"), json=policy)
    renamed = svc.agent.post(svc.url("/fs/_/move"), json={"src_path": "/locked", "dst_path": "/free"})
    assert error_of(renamed)[:2] == (403, "policy_denied")  # moving the directory away deletes what it holds
    assert svc.admin.get(svc.fs("/locked/inner/a.txt")).status_code == 200
    assert svc.admin.get(svc.fs("/notes.txt")).json()["content"] == "x"
    assert svc.admin.get(svc.url("/policy")).json()["source"] == "session"
    assert svc.admin.delete(svc.url("/policy")).status_code == 204
    assert svc.admin.get(svc.url("/policy")).json()["source"] == "service"


def test_a_tokens_own_policy_applies_to_that_token_only(svc: Service) -> None:
    reader_of_src = svc.token(
        scope="write",
        policy={"rules": [{"action": "deny", "operations": ["read", "write"], "pattern": "private/**"}]},
    )
    limited = httpx.Client(base_url=svc.running.url, headers=bearer(reader_of_src), timeout=30)
    try:
        assert svc.agent.post(svc.fs("/private/plan.md"), json={"content": "secret plan"}).status_code == 201
        assert error_of(limited.get(svc.fs("/private/plan.md")))[:2] == (403, "policy_denied")
        assert limited.post(svc.fs("/public.md"), json={"content": "ok"}).status_code == 201
        assert svc.agent.get(svc.fs("/private/plan.md")).status_code == 200
        listed = svc.admin.get("/v1/tokens").json()["data"]
        mine = [t for t in listed if t["policy"] is not None]
        assert any(r["pattern"] == "private/**" for t in mine for r in t["policy"]["rules"])
    finally:
        limited.close()


def test_a_decision_in_another_process_releases_the_request(service_url: str) -> None:
    store = SqlStore(service_url)  # a shared database may hold tokens already: the service then prints none
    admin_token = TokenStore(store).create(agent_id=None, label="policy test")[0]
    store.close()
    with (
        running_service(service_url, extra_args=("--approval-timeout", "30")) as first,
        running_service(service_url) as second,
    ):
        svc = Service(first, admin_token)
        other = httpx.Client(base_url=second.url, headers=svc.admin.headers, timeout=30)
        try:
            thread, answers = in_background(
                lambda: svc.agent.post(svc.fs("/.claude/settings.json"), json={"content": "{}"})
            )
            approval = svc.wait_for_pending()
            assert other.post(f"/v1/approvals/{approval['id']}", json={"approve": True}).status_code == 200
            thread.join(30)
            assert answers[0].status_code == 201, answers[0].text
        finally:
            other.close()
            svc.admin.close()
            svc.agent.close()


def test_the_service_can_run_without_a_policy(fast_tmp: Path) -> None:
    with running_service(f"sqlite:///{fast_tmp / 'open.db'}", extra_args=("--policy", "none")) as open_service:
        svc = Service(open_service)
        assert svc.agent.post(svc.fs("/.git/hooks/pre-commit"), json={"content": "#!/bin/sh\n"}).status_code == 201
        assert svc.agent.get(svc.url("/policy")).json() == {"source": "service", "rules": []}
        policy_file = fast_tmp / "policy.json"
        policy_file.write_text(
            json.dumps({"rules": [{"action": "deny", "operations": ["write"], "pattern": "*.lock"}]})
        )
    with running_service(f"sqlite:///{fast_tmp / 'file.db'}", extra_args=("--policy", str(policy_file))) as filed:
        svc = Service(filed)
        assert error_of(svc.agent.post(svc.fs("/deps.lock"), json={"content": "x"}))[:2] == (403, "policy_denied")


def test_quotas_refuse_with_413_and_507_and_keep_the_old_content(fast_tmp: Path) -> None:
    limits = ("--quota-bytes", "100", "--quota-files", "3", "--quota-file-bytes", "60")
    with running_service(f"sqlite:///{fast_tmp / 'quota.db'}", extra_args=limits) as limited:
        svc = Service(limited)
        assert svc.agent.post(svc.fs("/a.txt"), json={"content": "a" * 50}).status_code == 201
        too_big = svc.agent.put(svc.fs("/a.txt"), json={"content": "b" * 61})
        assert error_of(too_big)[:2] == (413, "file_too_large")
        streamed = svc.agent.put(
            svc.fs("/a.txt"),
            content=iter([b"c" * 40, b"c" * 40]),
            headers={"Content-Type": "application/octet-stream"},
        )
        assert streamed.status_code == 413  # over the largest file mid-stream
        assert svc.agent.post(svc.fs("/b.txt"), json={"content": "b" * 40}).status_code == 201
        full = svc.agent.post(svc.fs("/c.txt"), json={"content": "c" * 20})
        assert error_of(full)[:2] == (507, "quota_exceeded")
        assert svc.agent.get(svc.fs("/a.txt")).json()["content"] == "a" * 50
        assert svc.agent.get(svc.fs("/c.txt")).status_code == 404
        assert svc.agent.post(svc.fs("/d.txt"), json={"content": "d"}).status_code == 201
        assert error_of(svc.agent.post(svc.fs("/e.txt"), json={"content": ""}))[:2] == (507, "quota_exceeded")
