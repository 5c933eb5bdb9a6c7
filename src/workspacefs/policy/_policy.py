"""``Policy``: ordered rules (``PolicyRule``) and an optional approver for ``ask``; :meth:`Policy.guard` applies
it to a filesystem. See ``_rules.py`` for how patterns match."""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from workspacefs.errors import PolicyDeniedError
from workspacefs.paths import basename
from workspacefs.policy._guard import GuardedFilesystem
from workspacefs.policy._rules import (
    ALLOWED,
    OPERATIONS,
    ApprovalRequest,
    Approver,
    Decision,
    Operation,
    PolicyRule,
    default_rules,
    fold,
    reason_of,
    resolve,
    rule_from,
)
from workspacefs.protocol import Filesystem

__all__ = ["Policy"]


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
        self._covering = {op: tuple(rule for rule in self.rules if rule.covers(op)) for op in OPERATIONS}
        """The rules of each operation, in order (so a decision looks at those only)."""
        self._restricting = frozenset(
            op for op, rules in self._covering.items() if any(rule.action != "allow" for rule in rules)
        )
        self._screens = {op: _screen(rules) for op, rules in self._covering.items()}
        """Per operation, one expression each for names and paths that every rule's match also matches: a path
        neither matches is allowed without trying the rules one by one (what almost every path is)."""

    # --- building ----------------------------------------------------------------------------------------

    @classmethod
    def default(cls, *, approve: Approver | None = None) -> Policy:
        """Agent and tool configuration and shell start-up files ask before a write or delete; secrets ask before
        any access (README: "What the default policy protects")."""
        return cls(default_rules(), approve=approve)

    def with_approver(self, approve: Approver | None) -> Policy:
        """The same rules with another approver (cheap: the service makes one per request)."""
        twin = object.__new__(Policy)
        twin.rules, twin.approve, twin._views = self.rules, approve, weakref.WeakKeyDictionary()
        twin._covering, twin._restricting, twin._screens = self._covering, self._restricting, self._screens
        return twin

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
        rules = [rule_from(item, index) for index, item in enumerate(raw_rules)]
        include_default = data.get("include_default", True)
        if not isinstance(include_default, bool):
            raise ValueError("A policy's 'include_default' must be true or false")
        return cls([*rules, *(default_rules() if include_default else ())], approve=approve)

    @classmethod
    def load(cls, path: str | Path, *, approve: Approver | None = None) -> Policy:
        """Read a policy from a JSON or TOML file (see :meth:`from_dict` for the shape)."""
        source = Path(path)
        import json  # noqa: PLC0415 - only policy files need these
        import tomllib  # noqa: PLC0415

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
        rules = self._covering.get(operation)
        if rules is None:  # not an operation: what the rules say about it is nothing
            return ALLOWED
        folded = fold(path)
        name = basename(folded)
        screen = self._screens[operation]
        if screen is not None and not _passes(screen, folded, name):
            return ALLOWED
        for rule in rules:
            if rule.matches_folded(folded, name):
                return Decision(rule.action, rule)
        return ALLOWED

    def restricts(self, operation: Operation) -> bool:
        """True if some rule could refuse or ask about ``operation`` (else checks can be skipped)."""
        return operation in self._restricting

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
                    path, reason_of(decision.rule), operation=operation, pattern=decision.rule.pattern, action="deny"
                )
            asked.setdefault(decision.rule, []).append(path)
        for rule, matched in asked.items():
            named = target if target is not None else paths[0]
            if not self._approved(ApprovalRequest(operation, named, tuple(matched), rule, detail)):
                raise PolicyDeniedError(
                    matched[0],
                    reason_of(rule),
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


_Screen = tuple["re.Pattern[str] | None", "re.Pattern[str] | None"]


def _screen(rules: Sequence[PolicyRule]) -> _Screen | None:
    """The alternation of ``rules``' name patterns and of their path patterns (``None``: some rule cannot be
    screened this way, so every path goes through the rules)."""
    names: list[str] = []
    paths: list[str] = []
    for rule in rules:
        found = rule.regexes()
        if found is None:
            return None
        for regex, by_name in found:
            (names if by_name else paths).append(f"(?:{regex})")
    return (
        re.compile("|".join(names), re.DOTALL) if names else None,
        re.compile("|".join(paths), re.DOTALL) if paths else None,
    )


def _passes(screen: _Screen, folded: str, name: str) -> bool:
    """True if some rule of the screen may match (folded) ``path`` or its ``name``."""
    by_name, by_path = screen
    return (by_name is not None and by_name.fullmatch(name) is not None) or (
        by_path is not None and by_path.fullmatch(folded) is not None
    )
