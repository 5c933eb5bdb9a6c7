"""Path policies: which reads, writes, deletes and commands an agent may make, and which need a person's yes.

``Policy.default()`` applies when nothing is configured: it asks before anything changes agent and tool
configuration (``.git/``, ``.claude/``, ``.vscode/``, CI workflows, ``AGENTS.md`` …) or shell start-up files,
and before anything reads or changes secrets (``.env``, keys, credentials). See README, "Path policy".
"""

from workspacefs.policy._guard import GuardedFilesystem
from workspacefs.policy._policy import Policy
from workspacefs.policy._rules import (
    ACTIONS,
    OPERATIONS,
    Action,
    ApprovalRequest,
    Approver,
    Decision,
    Operation,
    PolicyRule,
    default_rules,
)

__all__ = [
    "ACTIONS",
    "OPERATIONS",
    "Action",
    "ApprovalRequest",
    "Approver",
    "Decision",
    "GuardedFilesystem",
    "Operation",
    "Policy",
    "PolicyRule",
    "default_rules",
]
