"""``Policy`` and ``PolicyRule``: ordered allow/deny/ask rules on glob patterns over canonical workspace paths.

A rule names an action (``allow``, ``deny``, ``ask``), the operations it covers (``read``, ``write``,
``delete``, ``exec``) and a pattern. The first rule whose pattern matches decides; no match allows.
Patterns are matched against the path after the one validator (``paths.py``), in Unicode NFC and case-folded,
so ``.GIT/config`` and ``.git/config`` are the same to a rule. A pattern without ``/`` matches a name at any
depth (``.env``, ``*.pem``); one with ``/`` matches from the root (``**/`` for any depth); ``dir/**`` covers
``dir`` itself and everything below it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import tomllib
import unicodedata
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import anyio.from_thread

from workspacefs.errors import PolicyDeniedError
from workspacefs.paths import basename
from workspacefs.search import GlobMatcher

if TYPE_CHECKING:
    from workspacefs.policy._guard import GuardedFilesystem
    from workspacefs.protocol import Filesystem

__all__ = [
    "ACTIONS",
    "OPERATIONS",
    "Action",
    "ApprovalRequest",
    "Approver",
    "Decision",
    "Operation",
    "Policy",
    "PolicyRule",
]

Operation = Literal["read", "write", "delete", "exec"]
Action = Literal["allow", "deny", "ask"]
OPERATIONS: tuple[Operation, ...] = get_args(Operation)
ACTIONS: tuple[Action, ...] = get_args(Action)


def _fold(text: str) -> str:
    """The form rules compare: Unicode NFC, case-folded (so no spelling of a name slips past a rule)."""
    return unicodedata.normalize("NFC", text).casefold()


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """``action`` for ``operations`` on paths matching ``pattern``; ``reason`` is shown with a refusal."""

    action: Action
    operations: tuple[Operation, ...]
    pattern: str
    reason: str | None = None
    _matchers: tuple[tuple[GlobMatcher, bool], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"A policy rule's action must be one of {', '.join(ACTIONS)}, not {self.action!r}")
        operations = (self.operations,) if isinstance(self.operations, str) else tuple(self.operations)
        if not operations or any(op not in OPERATIONS for op in operations):
            raise ValueError(f"A policy rule's operations must be among {', '.join(OPERATIONS)}, not {operations!r}")
        object.__setattr__(self, "operations", operations)
        object.__setattr__(self, "_matchers", _compile(self.pattern))

    def covers(self, operation: Operation) -> bool:
        """True if this rule speaks about ``operation``."""
        return operation in self.operations

    def matches(self, path: str) -> bool:
        """True if the canonical ``path`` (root-relative, ``""`` for the root) matches the pattern."""
        folded = _fold(path)
        name = basename(folded)
        return any(matcher.matches(name if by_name else folded) for matcher, by_name in self._matchers)

    def describe(self) -> str:
        """``deny write,delete .git/**``: how messages name the rule."""
        return f"{self.action} {','.join(self.operations)} {self.pattern}"

    def to_dict(self) -> dict[str, Any]:
        """The rule as JSON-ready data (what :meth:`Policy.from_dict` reads)."""
        data: dict[str, Any] = {"action": self.action, "operations": list(self.operations), "pattern": self.pattern}
        if self.reason:
            data["reason"] = self.reason
        return data


def _compile(pattern: str) -> tuple[tuple[GlobMatcher, bool], ...]:
    """Matchers for a rule pattern, each flagged ``True`` if it matches names rather than whole paths."""
    if not isinstance(pattern, str) or not pattern.strip("/"):
        raise ValueError(f"A policy rule needs a non-empty pattern, not {pattern!r}")
    text = _fold(pattern.strip().lstrip("/"))
    if "/" not in text.rstrip("/"):
        return ((GlobMatcher(text.rstrip("/"), what="policy pattern"), True),)
    matchers = [(GlobMatcher(text, what="policy pattern"), False)]
    if text.endswith("/**"):  # the directory itself, not only what it holds
        matchers.append((GlobMatcher(text[:-3], what="policy pattern"), False))
    return tuple(matchers)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What an approver is asked: may ``operation`` touch ``paths`` (all matched by ``rule``)?

    ``target`` is the path the caller named (a directory whose contents include ``paths``, say); ``detail``
    adds what else a person should know (the command to run, the snapshot to restore).
    """

    operation: Operation
    target: str
    paths: tuple[str, ...]
    rule: PolicyRule
    detail: str | None = None

    def describe(self) -> str:
        """One line for a prompt: ``write '.git/hooks/pre-commit' (rule: ask write,delete **/.git/**)``."""
        shown = ", ".join(repr(p or ".") for p in self.paths[:3])
        more = f" and {len(self.paths) - 3} more" if len(self.paths) > 3 else ""
        text = f"{self.operation} {shown}{more} (rule: {self.rule.describe()})"
        return f"{text}: {self.detail}" if self.detail else text


Approver = Callable[[ApprovalRequest], bool | Awaitable[bool]]
"""Decides an ``ask``: returns (or, if async, resolves to) ``True`` to allow."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The action for one operation on one path, and the rule that chose it (``None``: no rule matched)."""

    action: Action
    rule: PolicyRule | None


_ALLOWED = Decision("allow", None)


class Policy:
    """Ordered rules and an optional approver for ``ask`` (without one, ``ask`` refuses).

    ``Policy.default()`` is what applies when nothing is configured; ``Policy()`` (no rules) allows
    everything. Apply a policy to a filesystem with :meth:`guard`, or give it to ``ToolContext(policy=…)``,
    ``FileManager(policy=…)``, the CLI (``--policy``) or the service.
    """

    def __init__(self, rules: Iterable[PolicyRule] = (), *, approve: Approver | None = None) -> None:
        self.rules: tuple[PolicyRule, ...] = tuple(rules)
        for rule in self.rules:
            if not isinstance(rule, PolicyRule):
                raise TypeError(f"Policy rules must be PolicyRule values, not {type(rule).__name__}")
        self.approve = approve
        self._views: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    # --- building ----------------------------------------------------------------------------------------

    @classmethod
    def default(cls, *, approve: Approver | None = None) -> Policy:
        """Agent and tool configuration and shell start-up files ask before a write or delete; secrets ask before
        any access (README: "What the default policy protects")."""
        return cls(DEFAULT_RULES, approve=approve)

    def with_approver(self, approve: Approver | None) -> Policy:
        """The same rules with another approver."""
        return Policy(self.rules, approve=approve)

    def extended(self, rules: Iterable[PolicyRule]) -> Policy:
        """A policy whose ``rules`` come first (so they can allow what these rules ask about), then these."""
        return Policy((*rules, *self.rules), approve=self.approve)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, approve: Approver | None = None) -> Policy:
        """``{"rules": [{"action", "operations", "pattern", "reason"?}, …], "include_default": bool}``: with
        ``include_default`` (the default) the default rules follow the given ones."""
        if not isinstance(data, Mapping):
            raise ValueError("A policy is an object with a 'rules' list")
        unknown = set(data) - {"rules", "include_default"}
        if unknown:
            raise ValueError(f"Unknown policy field(s): {', '.join(sorted(unknown))}")
        raw_rules = data.get("rules", [])
        if not isinstance(raw_rules, list):
            raise ValueError("A policy's 'rules' must be a list")
        rules = [_rule_from(item, index) for index, item in enumerate(raw_rules)]
        include_default = data.get("include_default", True)
        if not isinstance(include_default, bool):
            raise ValueError("A policy's 'include_default' must be true or false")
        return cls([*rules, *(DEFAULT_RULES if include_default else ())], approve=approve)

    @classmethod
    def load(cls, path: str | Path, *, approve: Approver | None = None) -> Policy:
        """Read a policy from a JSON or TOML file (see :meth:`from_dict` for the shape)."""
        source = Path(path)
        text = source.read_text(encoding="utf-8")
        try:
            data = tomllib.loads(text) if source.suffix.lower() == ".toml" else json.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"The policy file {source.name!r} is not valid: {exc}") from None
        return cls.from_dict(data, approve=approve)

    def to_dict(self) -> dict[str, Any]:
        """Every rule, in order, as JSON-ready data (``include_default`` false: the list is complete)."""
        return {"rules": [rule.to_dict() for rule in self.rules], "include_default": False}

    # --- deciding ----------------------------------------------------------------------------------------

    def decide(self, operation: Operation, path: str) -> Decision:
        """The first rule covering ``operation`` whose pattern matches canonical ``path``; allow if none does."""
        for rule in self.rules:
            if rule.covers(operation) and rule.matches(path):
                return Decision(rule.action, rule)
        return _ALLOWED

    def restricts(self, operation: Operation) -> bool:
        """True if some rule could refuse or ask about ``operation`` (else checks can be skipped)."""
        return any(rule.action != "allow" and rule.covers(operation) for rule in self.rules)

    def check(
        self, operation: Operation, paths: Sequence[str], *, target: str | None = None, detail: str | None = None
    ) -> None:
        """Allow ``operation`` on every canonical path in ``paths``, or raise.

        A ``deny`` raises :class:`~workspacefs.errors.PolicyDeniedError`; an ``ask`` calls the approver once per
        rule, with every path that rule matched, and raises if it says no or there is none. ``target`` is the
        path the caller named (default: the first), ``detail`` what else an approver should know.
        """
        asked: dict[PolicyRule, list[str]] = {}
        for path in paths:
            decision = self.decide(operation, path)
            if decision.rule is None or decision.action == "allow":
                continue
            if decision.action == "deny":
                raise PolicyDeniedError(
                    path, _reason(decision.rule), operation=operation, pattern=decision.rule.pattern, action="deny"
                )
            asked.setdefault(decision.rule, []).append(path)
        for rule, matched in asked.items():
            named = target if target is not None else paths[0]
            if not self._approved(ApprovalRequest(operation, named, tuple(matched), rule, detail)):
                raise PolicyDeniedError(
                    matched[0],
                    _reason(rule),
                    operation=operation,
                    pattern=rule.pattern,
                    action="ask",
                    asked=self.approve is not None,
                )

    def _approved(self, request: ApprovalRequest) -> bool:
        if self.approve is None:
            return False
        return bool(resolve(self.approve, request))

    # --- applying ----------------------------------------------------------------------------------------

    def guard(self, fs: Filesystem) -> GuardedFilesystem:
        """``fs`` seen through this policy (see :class:`~workspacefs.policy.GuardedFilesystem`); the same view
        each time for the same filesystem, so state keyed by it (what a model has read) carries over."""
        from workspacefs.policy._guard import GuardedFilesystem  # noqa: PLC0415 - the two modules refer to each other

        if isinstance(fs, GuardedFilesystem) and fs.policy is self:
            return fs
        try:
            known = self._views.get(fs)
        except TypeError:  # a filesystem that cannot be weakly referenced gets a new view each time
            return GuardedFilesystem(fs, self)
        view = known() if known is not None else None
        if view is None:  # held weakly both ways: the view (which holds fs) must not keep the cache entry alive
            view = GuardedFilesystem(fs, self)
            self._views[fs] = weakref.ref(view)
        return view

    def __repr__(self) -> str:
        approver = "" if self.approve is None else ", approve=…"
        return f"Policy({len(self.rules)} rules{approver})"


def _reason(rule: PolicyRule) -> str:
    return rule.reason or f"protected by the workspace policy ({rule.describe()})"


def _rule_from(item: Any, index: int) -> PolicyRule:
    if not isinstance(item, Mapping):
        raise ValueError(f"Policy rule {index} must be an object with action, operations and pattern")
    unknown = set(item) - {"action", "operations", "pattern", "reason"}
    if unknown:
        raise ValueError(f"Policy rule {index} has unknown field(s): {', '.join(sorted(unknown))}")
    operations = item.get("operations", OPERATIONS)
    if isinstance(operations, str):
        operations = [operations]
    try:
        return PolicyRule(
            action=item.get("action", ""),
            operations=tuple(operations),
            pattern=item.get("pattern", ""),
            reason=item.get("reason"),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Policy rule {index}: {exc}") from None


def resolve(approve: Approver, request: ApprovalRequest) -> bool:
    """Call an approver, sync or async, from synchronous code: an async answer is awaited on the caller's event
    loop when called from one of its worker threads (``anyio.to_thread``), on a fresh loop otherwise."""
    answer = approve(request)
    if not inspect.isawaitable(answer):
        return bool(answer)

    async def wait() -> bool:
        return bool(await answer)

    if _in_worker_thread():
        return anyio.from_thread.run(wait)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:  # never block a running loop on itself
        return pool.submit(asyncio.run, wait()).result()


def _in_worker_thread() -> bool:
    """True in a thread an event loop lent work to (it can run a coroutine on that loop for us)."""
    try:
        anyio.from_thread.run_sync(int)
    except RuntimeError:
        return False
    return True


def _protect(
    action: Action, operations: tuple[Operation, ...], patterns: Sequence[str], reason: str
) -> list[PolicyRule]:
    return [PolicyRule(action, operations, pattern, reason) for pattern in patterns]


_CHANGE: tuple[Operation, ...] = ("write", "delete")
_ANY_ACCESS: tuple[Operation, ...] = ("read", "write", "delete")

CONFIGURATION_PATTERNS: tuple[str, ...] = (
    "**/.git/**",
    "**/.github/workflows/**",
    "**/.husky/**",
    "**/.claude/**",
    "**/.codex/**",
    "**/.cursor/**",
    "**/.gemini/**",
    "**/.vscode/**",
    "**/.idea/**",
    "**/.devcontainer/**",
    "AGENTS.md",
    "CLAUDE.md",
    "GEMINI.md",
    ".cursorrules",
    ".mcp.json",
    ".gitmodules",
    ".gitattributes",
    ".pre-commit-config.yaml",
)
"""Files that tools on the user's machine read and run: git hooks and config, CI workflows, agent settings and
instructions, editor tasks, MCP server lists."""

SHELL_PATTERNS: tuple[str, ...] = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    "**/.config/fish/**",
    ".envrc",
)
"""Shell start-up files and direnv's ``.envrc``: run by the next shell opened in the directory."""

SECRET_PATTERNS: tuple[str, ...] = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "**/.ssh/**",
    "**/.aws/**",
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
)
"""Secrets: environment files, private keys, cloud and package-registry credentials."""

SECRET_TEMPLATES: tuple[str, ...] = (".env.example", ".env.sample", ".env.template")
"""Templates of environment files, which hold no secrets: readable."""

DEFAULT_RULES: tuple[PolicyRule, ...] = (
    *_protect("allow", ("read",), SECRET_TEMPLATES, "an environment template holds no secrets"),
    *_protect("ask", _ANY_ACCESS, SECRET_PATTERNS, "a secret: reading or changing it needs the user's approval"),
    *_protect(
        "ask",
        _CHANGE,
        CONFIGURATION_PATTERNS,
        "configuration that tools on the user's machine trust or run: changing it needs the user's approval",
    ),
    *_protect(
        "ask", _CHANGE, SHELL_PATTERNS, "a shell start-up file, run by the next shell: changing it needs approval"
    ),
)
"""What :meth:`Policy.default` holds, in order."""
