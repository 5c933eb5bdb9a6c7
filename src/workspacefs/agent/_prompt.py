"""``Prompt``: finds the workspace section anywhere in its tree and builds tool contexts from it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workspacefs.agent._sections import Section, WorkspaceSection
from workspacefs.policy import Policy
from workspacefs.protocol import Filesystem
from workspacefs.tools import ReadState, Tool, ToolContext

__all__ = ["Prompt", "PromptTemplate", "build_tool_context"]


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A named, ordered tree of sections."""

    ns: str
    key: str
    sections: Sequence[Section]


class Prompt:
    """A prompt over a template; ``filesystem()`` returns the workspace section's filesystem."""

    def __init__(self, template: PromptTemplate | Sequence[Section]) -> None:
        self.template = template if isinstance(template, PromptTemplate) else PromptTemplate("", "", tuple(template))

    def sections(self) -> Iterator[Section]:
        """Every section, depth first."""
        for section in self.template.sections:
            yield from section.walk()

    def workspace_section(self) -> Section | None:
        """The first section (depth first) that owns a filesystem."""
        for section in self.sections():
            if isinstance(section, WorkspaceSection):
                return section
        return None

    def filesystem(self) -> Filesystem | None:
        """The workspace section's filesystem, or ``None`` when the prompt has none."""
        section = self.workspace_section()
        return section.filesystem if isinstance(section, WorkspaceSection) else None

    def tools(self) -> tuple[Tool[Any], ...]:
        """Tools offered by the sections, first definition of each name kept."""
        found: dict[str, Tool[Any]] = {}
        for section in self.sections():
            for tool in section.tools:
                found.setdefault(tool.name, tool)
        return tuple(found.values())

    def render(self, **params: Any) -> str:
        """The prompt text."""
        return "\n\n".join(section.render(params) for section in self.template.sections)


def build_tool_context(
    prompt: Prompt,
    *,
    session: Any = None,
    adapter: Any = None,
    rendered_prompt: Any = None,
    deadline: datetime | None = None,
    budget_tracker: Any = None,
    read_before_write: bool = True,
    transactional: bool | None = None,
    policy: Policy | None = None,
) -> ToolContext:
    """The context a tool call runs in: the prompt's filesystem under ``policy`` (default:
    ``Policy.default()``), and the session's read ledger.

    Build one per call if you like: the read-before-write state lives in the session, so it
    carries over (without a session each context starts with an empty ledger).
    """
    read_state = session.read_state if session is not None else ReadState()
    return ToolContext(
        filesystem=prompt.filesystem(),
        prompt=prompt,
        rendered_prompt=rendered_prompt,
        adapter=adapter,
        session=session,
        deadline=deadline,
        budget_tracker=budget_tracker,
        read_state=read_state,
        read_before_write=read_before_write,
        transactional=transactional,
        policy=policy,
    )
