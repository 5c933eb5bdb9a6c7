"""``PolicyRule`` and what a policy is made of: ordered allow/deny/ask rules on glob patterns over canonical
workspace paths, the questions an approver is asked, and the default rules.

A rule names an action (``allow``, ``deny``, ``ask``), the operations it covers (``read``, ``write``,
``delete``, ``exec``) and a pattern. The first rule whose pattern matches decides; no match allows.
Patterns are matched against the path after the one validator (``paths.py``), in Unicode NFC and case-folded,
so ``.GIT/config`` and ``.git/config`` are the same to a rule. A pattern without ``/`` matches a name at any
depth (``.env``, ``*.pem``); one with ``/`` matches from the root (``**/`` for any depth); ``dir/**`` covers
``dir`` itself and everything below it.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from workspacefs.paths import basename
from workspacefs.protocol import Filesystem
from workspacefs.search import GlobMatcher

__all__ = [
    "ACTIONS",
    "ALLOWED",
    "OPERATIONS",
    "Action",
    "ApprovalRequest",
    "Approver",
    "Checks",
    "Decision",
    "Operation",
    "PolicyRule",
    "default_rules",
    "fold",
    "reason_of",
    "resolve",
    "rule_from",
]

Operation = Literal["read", "write", "delete", "exec"]
Action = Literal["allow", "deny", "ask"]
OPERATIONS: tuple[Operation, ...] = get_args(Operation)
ACTIONS: tuple[Action, ...] = get_args(Action)


def fold(text: str) -> str:
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
        folded = fold(path)
        return self.matches_folded(folded, basename(folded))

    def regexes(self) -> tuple[tuple[str, bool], ...] | None:
        """The pattern as whole-match regular expressions (``re.DOTALL``), each flagged ``True`` if it matches
        names; ``None`` if one needs the linear-time engine (a policy then cannot screen with it)."""
        found = tuple((matcher.regex, by_name) for matcher, by_name in self._matchers)
        return None if any(regex is None for regex, _ in found) else found  # type: ignore[return-value]

    def matches_folded(self, folded: str, name: str) -> bool:
        """:meth:`matches` for a path already in the form rules compare (:func:`fold`) and its last segment
        (a policy folds a path once for all its rules)."""
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
    text = fold(pattern.strip().lstrip("/"))
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


ALLOWED = Decision("allow", None)
"""What applies where no rule matches."""


class Checks(Protocol):
    """What a guarded view asks of its policy (``Policy`` is the one implementation)."""

    def decide(self, operation: Operation, path: str) -> Decision: ...

    def restricts(self, operation: Operation) -> bool: ...

    def check(
        self, operation: Operation, paths: Sequence[str], *, target: str | None = None, detail: str | None = None
    ) -> None: ...

    def guard(self, fs: Filesystem) -> Any: ...


def reason_of(rule: PolicyRule) -> str:
    """The reason a refusal by ``rule`` gives."""
    return rule.reason or f"protected by the workspace policy ({rule.describe()})"


def rule_from(item: Any, index: int) -> PolicyRule:
    """A rule from JSON/TOML data (``ValueError`` naming rule ``index`` and what is wrong)."""
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
    import inspect  # noqa: PLC0415 - approvals are rare; importing asyncio and anyio costs ~30 ms at start-up

    answer = approve(request)
    if not inspect.isawaitable(answer):
        return bool(answer)
    import asyncio  # noqa: PLC0415
    import concurrent.futures  # noqa: PLC0415

    async def wait() -> bool:
        return bool(await answer)

    if _in_worker_thread():
        import anyio.from_thread  # noqa: PLC0415

        return anyio.from_thread.run(wait)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:  # never block a running loop on itself
        return pool.submit(asyncio.run, wait()).result()


def _in_worker_thread() -> bool:
    """True in a thread an event loop lent work to (it can run a coroutine on that loop for us)."""
    import anyio.from_thread  # noqa: PLC0415

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


@functools.cache
def default_rules() -> tuple[PolicyRule, ...]:
    """What :meth:`Policy.default` holds, in order (built on first use: compiling them costs start-up time)."""
    return (
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
